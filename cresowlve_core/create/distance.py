"""The distance between two paths: an annealed cosine distance of their embedded text.

Following the released CREATE scoring code:

* **Path text** (:func:`path_text`): the last triple — the query's constraint, shared by every
  path — is dropped; the rest is lower-cased; the first triple is written ``" [r] t"`` (its head is
  always ``entity_a``), later ones ``"h [r] t"``; the parts are joined with ``" | "``. The paper
  only says "string representation"; it does not mention dropping the last triple.
* **Embedding**: all-MiniLM-L6-v2, L2-normalised (:mod:`cresowlve_core.embeddings`).
* **Cosine distance** ``x = 1 - cos`` lies in ``[0, 2]``.
* **Transform** (:func:`transform_distance`, paper eq. 9): ``d = 1`` if ``0.7 < x <= 1``, else
  ``0.5 * (1 - cos(pi * (x / 0.7) ** 2))``; then clipped to ``<= 1``. The paper defines the
  formula only on ``[0, 1]``; as in the released code, ``x > 1`` (rare: anti-correlated texts)
  falls into the formula branch and is clipped, e.g. ``x = 1.2 -> 0.9908``.
* In a square matrix of a set against itself the diagonal is set to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cresowlve_core.create.paths import Path
from cresowlve_core.failures import InputError

Embedder = Callable[[list[str]], np.ndarray]
"""Anything mapping texts to L2-normalised row vectors (default: :func:`cresowlve_core.embeddings.embed`)."""

ANNEAL_UNTIL = 0.7
#: how far an embedded row's length may be from 1 (float32 rounding is about 1e-7)
UNIT_NORM_TOLERANCE = 1e-3


def path_text(path: Path) -> str:
    """The text embedded for a path (see module docstring)."""
    parts: list[str] = []
    for i, t in enumerate(path[:-1]):
        head, tail = (str(t[0]), str(t[-1])) if t else ("", "")  # an empty triple (a malformed path) says nothing
        rel = " ".join(str(x) for x in t[1:-1])
        parts.append(f" [{rel}] {tail}" if i == 0 else f"{head} [{rel}] {tail}")
    return " | ".join(parts).lower()


def transform_distance(x: np.ndarray | float) -> np.ndarray | float:
    """Paper eq. 9 with the released code's handling of ``x > 1`` (see module docstring)."""
    arr = np.asarray(x, dtype=np.float64)
    annealed = 0.5 * (1.0 - np.cos(np.pi * (arr / ANNEAL_UNTIL) ** 2))
    d = np.where((arr > ANNEAL_UNTIL) & (arr <= 1.0), 1.0, annealed)
    d = np.minimum(d, 1.0)
    return float(d) if np.ndim(x) == 0 else d


def default_embedder(texts: list[str]) -> np.ndarray:
    from cresowlve_core.embeddings import embed

    return embed(texts)


def embedded(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """``embedder(texts)``, checked to be what a distance needs: one finite, L2-normalised row per
    text. A NaN row makes every distance to it NaN (and the utility NaN), a zero or unnormalised
    row gives a cosine distance outside its meaning, a missing or extra row shifts every path onto
    another's text: each is an :class:`~cresowlve_core.failures.InputError` naming the first row."""
    vecs = np.asarray(embedder(texts))
    if vecs.ndim != 2 or vecs.shape[0] != len(texts):
        raise InputError(f"the embedder returned an array of shape {vecs.shape} for {len(texts)} texts: "
                         "one row per text is needed")
    rows = np.asarray(vecs, dtype=np.float64)
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():
        raise InputError(f"the embedder returned {int((~finite).sum())} of {len(texts)} rows with NaN or infinity "
                         f"(the first: row {int(np.argmin(finite))})")
    norms = np.linalg.norm(rows, axis=1)
    off = np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE
    if off.any():
        first = int(np.argmax(off))
        raise InputError(f"the embedder returned {int(off.sum())} of {len(texts)} rows that are not L2-normalised "
                         f"(the first: row {first}, length {norms[first]:.4g}); cosine distance needs unit rows")
    return vecs


def cosine_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``1 - a @ b.T`` for L2-normalised rows."""
    return 1.0 - np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64).T


def distance_matrix(paths: Sequence[Path], embedder: Embedder | None = None) -> np.ndarray:
    """Transformed distances between every pair of ``paths``; the diagonal is 1."""
    n = len(paths)
    if n == 0:
        return np.zeros((0, 0))
    vecs = embedded(embedder or default_embedder, [path_text(p) for p in paths])
    d = np.asarray(transform_distance(cosine_distance(vecs, vecs)), dtype=np.float64)
    np.fill_diagonal(d, 1.0)
    return d


def cross_distances(
    paths: Sequence[Path], others: Sequence[Path], embedder: Embedder | None = None
) -> np.ndarray:
    """Transformed distances ``(len(paths), len(others))`` between two collections (no diagonal rule)."""
    if not paths or not others:
        return np.zeros((len(paths), len(others)))
    emb = embedder or default_embedder
    texts = [path_text(p) for p in paths] + [path_text(p) for p in others]
    vecs = embedded(emb, texts)
    a, b = vecs[: len(paths)], vecs[len(paths) :]
    return np.asarray(transform_distance(cosine_distance(a, b)), dtype=np.float64)
