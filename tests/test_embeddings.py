"""cresowlve_core.embeddings: shape, normalisation, determinism, the disk cache, semantics."""

from __future__ import annotations

import numpy as np
import pytest

from cresowlve_core import embeddings


def test_empty_input_needs_no_model(tmp_path):
    out = embeddings.embed([], cache_path=tmp_path / "e.sqlite")
    assert out.shape == (0, embeddings.DIMENSION) and out.dtype == np.float32


def test_cache_hit_avoids_recomputation(tmp_path, monkeypatch):
    calls: list[list[str]] = []

    def fake_encode(texts: list[str], batch_size: int) -> np.ndarray:
        calls.append(list(texts))
        v = np.zeros((len(texts), embeddings.DIMENSION), dtype=np.float32)
        for i, t in enumerate(texts):
            v[i, len(t) % embeddings.DIMENSION] = 1.0
        return v

    monkeypatch.setattr(embeddings, "_encode", fake_encode)
    path = tmp_path / "e.sqlite"
    first = embeddings.embed(["ab", "abc", "ab"], cache_path=path)
    assert calls == [["ab", "abc"]]  # duplicates encoded once
    second = embeddings.embed(["abc", "ab", "new"], cache_path=path)
    assert calls == [["ab", "abc"], ["new"]]  # only the unseen text
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[1], first[0])
    embeddings.embed(["ab"], cache=False, cache_path=path)
    assert calls[-1] == ["ab"]  # cache=False always encodes


@pytest.mark.embeddings
def test_real_model_shape_norm_determinism_and_semantics(tmp_path):
    texts = [
        "The cat sat on the mat.",
        "A cat was sitting on a rug.",
        "Quarterly revenue of the bank grew by four percent.",
    ]
    a = embeddings.embed(texts, cache_path=tmp_path / "e.sqlite")
    assert a.shape == (3, 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    b = embeddings.embed(texts, cache=False)
    np.testing.assert_allclose(a, b, atol=1e-5)  # cached == recomputed
    hits_before = embeddings.stats()["cache_hits"]
    c = embeddings.embed(texts, cache_path=tmp_path / "e.sqlite")
    assert embeddings.stats()["cache_hits"] == hits_before + 3
    np.testing.assert_array_equal(a, c)
    sim = a @ a.T
    assert sim[0, 1] > sim[0, 2] + 0.3
