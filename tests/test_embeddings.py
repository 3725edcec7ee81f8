"""cresowlve_core.embeddings: shape, normalisation, determinism, the disk cache, semantics."""

from __future__ import annotations

import numpy as np
import pytest

from cresowlve_core import embeddings


def _fake_model(monkeypatch) -> list[list[str]]:
    """Stand in for the model: each text becomes a unit vector picked by its length; returns the list
    the texts of each encoding call are appended to."""
    calls: list[list[str]] = []

    def fake_encode(texts: list[str], batch_size: int) -> np.ndarray:
        calls.append(list(texts))
        v = np.zeros((len(texts), embeddings.DIMENSION), dtype=np.float32)
        for i, t in enumerate(texts):
            v[i, len(t) % embeddings.DIMENSION] = 1.0
        return v

    monkeypatch.setattr(embeddings, "_encode", fake_encode)
    return calls


def test_empty_input_needs_no_model(tmp_path):
    out = embeddings.embed([], cache_path=tmp_path / "e.sqlite")
    assert out.shape == (0, embeddings.DIMENSION) and out.dtype == np.float32


def test_cache_hit_avoids_recomputation(tmp_path, monkeypatch):
    calls = _fake_model(monkeypatch)
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


def test_encode_threads_from_the_environment(monkeypatch):
    monkeypatch.delenv(embeddings.THREADS_ENV, raising=False)
    assert embeddings.encode_threads() == 0  # torch's own count
    monkeypatch.setenv(embeddings.THREADS_ENV, " 3 ")
    assert embeddings.encode_threads() == 3
    monkeypatch.setenv(embeddings.THREADS_ENV, "0")
    assert embeddings.encode_threads() == 0
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv(embeddings.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=embeddings.THREADS_ENV):
            embeddings.encode_threads()


@pytest.mark.embeddings
def test_one_thread_encode_matches_the_models_default_encode(monkeypatch):
    """The vectors of a seeded sample of the recorded CREATE path texts, as ``embed`` computes them
    with ``CRESOWLVE_EMBED_THREADS=1``, equal the plain ``SentenceTransformer.encode`` with torch's own thread
    count up to float noise; torch's setting is restored afterwards."""
    import random

    import torch

    from cresowlve_core.create.distance import path_text
    from cresowlve_core.create.scored import load_recorded

    monkeypatch.setenv(embeddings.THREADS_ENV, "1")
    texts = sorted({path_text(p) for s in load_recorded() for p in s.paths})
    sample = random.Random(0).sample(texts, 48)
    model = embeddings.load_model()
    torch.set_num_threads(2)
    old = model.encode(sample, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    seen: list[int] = []
    encode = model.encode

    def watched(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return encode(*args, **kwargs)

    monkeypatch.setattr(model, "encode", watched)
    new = embeddings.embed(sample, cache=False)
    assert seen == [1] and torch.get_num_threads() == 2
    assert float(np.abs(new - old).max()) <= 1e-5
    assert float((new * old).sum(axis=1).min()) >= 0.9999


def test_a_damaged_cache_row_is_recomputed_with_one_warning_naming_it(tmp_path, monkeypatch, caplog):
    """A cached row of another dimension (another model's vector), a torn write or a NaN row is never
    used: its text is encoded again and the row rewritten, with one WARNING naming the file and the
    first key. Before: ``ValueError: could not broadcast input array from shape (768,) into shape (384,)``."""
    import sqlite3

    calls = _fake_model(monkeypatch)
    path = tmp_path / "e.sqlite"
    texts = ["a", "bb", "ccc", "dddd"]
    good = embeddings.embed(texts, cache_path=path)
    other_model = np.full(768, 768 ** -0.5, dtype=np.float32)
    damage = {"bb": other_model.tobytes(), "ccc": good[2].tobytes()[:700], "dddd": np.full(384, np.nan, np.float32).tobytes()}
    with sqlite3.connect(path) as db:
        for text, blob in damage.items():
            db.execute("UPDATE embeddings SET vec = ? WHERE key = ?", (blob, embeddings.text_key(text)))
    with caplog.at_level("WARNING", logger="cresowlve_core.embeddings"):
        again = embeddings.embed(texts, cache_path=path)
    np.testing.assert_array_equal(again, good)
    assert calls[-1] == ["bb", "ccc", "dddd"]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == (f"embedding cache {path}: 3 rows that cannot be {embeddings.MODEL_NAME} vectors, not used: "
                       f"recomputed and rewritten (the first: key {embeddings.text_key('bb')}, 768 floats, not 384)")
    caplog.clear()
    embeddings.embed(texts, cache_path=path)
    assert len(calls) == 2 and not caplog.records  # rewritten: read from the cache, nothing to warn about


def test_a_cache_file_that_is_not_a_database_is_one_warning_and_the_texts_are_encoded(tmp_path, monkeypatch, caplog):
    """Before: ``sqlite3.DatabaseError: file is not a database`` with a traceback and a "bug:" line
    from `cresowlve create score`. The cache is derived data: the model encodes every text, and one
    WARNING per process names the file and what to do with it."""
    calls = _fake_model(monkeypatch)
    monkeypatch.setattr(embeddings, "_unusable_warned", set(), raising=False)  # a fresh process
    path = tmp_path / "e.sqlite"
    path.write_bytes(b"not a database, " * 400)
    with caplog.at_level("WARNING", logger="cresowlve_core.embeddings"):
        for _ in range(2):
            out = embeddings.embed(["a", "b"], cache_path=path)
            assert out.shape == (2, embeddings.DIMENSION) and (out[:, 1] == 1.0).all()
    assert calls == [["a", "b"], ["a", "b"]]  # encoded by the model each time, with no cache to read
    assert [r.getMessage() for r in caplog.records] == [
        f"embedding cache {path} cannot be read (file is not a database); going on without it, every text encoded "
        "by the model (delete or move the file to start a new cache)"]
    assert path.read_bytes().startswith(b"not a database")  # left as it was, for the user to look at
