"""A response cache on SQLite, safe for several processes at once.

The database runs in WAL mode with a generous ``busy_timeout``; every write is one short
transaction, so two notebooks (or a notebook and a CLI run) can share one file. The client's
writes are grouped (``put(..., deferred=True)``): an answer is written at once when the last write
was :attr:`ResponseCache.GROUP_S` ago or more, else with the next group, up to
:attr:`ResponseCache.GROUP_ROWS` answers in one transaction (a commit per answer was the cache's
largest cost); what still waits is written at :meth:`ResponseCache.flush` (the client's
``aclose``), :meth:`ResponseCache.close` or exit. A waiting answer is already a hit in this
process; another process sees it once written. A kill loses at most the answers still waiting,
which the run directory holds anyway (the cache is never the source of truth), so a resume
re-sends nothing because of it. Only what is worth replaying is stored (:func:`worth_caching`): an answer with text,
a refusal and a filtered answer (the model's final behaviour on that item, so a rerun re-asks
nothing), each with its ``outcome`` and refusal text; never an error, never an empty answer.

The key is the SHA-256 of canonical JSON over everything that can change an answer:
base URL, model, API kind, messages, every ``GenParams`` field and the prompt version.
Nothing secret goes in: the API key is never part of a key, and every stored value is redacted
(the key variable of the endpoint plus every variable named like a credential) before it is
written, so a server that echoes the ``Authorization`` header cannot put the key on disk.

A cache file that cannot be opened (unwritable, not a database) raises one :class:`CacheError`
naming the file; a stage then runs without the cache, with one WARNING
(:meth:`~cresowlve_core.llm.options.ClientOptions.open_cache`), and ``cresowlve cache`` exits 2.
A read or a write that fails during a run (a full disk, a read-only file, a lock held too long)
is a WARNING too: the cache turns itself off for the rest of the run and every answer still goes
to the run directory, which is the source of truth. Nothing is lost and nothing is re-sent on
resume because of a cache failure.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import json
import logging
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any, get_args

from cresowlve_core.jsontext import dumps
from cresowlve_core.llm.types import (
    NOT_AN_ANSWER,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    Outcome,
    Usage,
)
from cresowlve_core.paths import cache_dir
from cresowlve_core.secrets import find_secret_values, redact

log = logging.getLogger(__name__)


def default_cache_path() -> Path:
    """``<cache dir>/responses.sqlite``, resolved when called (so ``CRESOWLVE_CACHE_DIR`` set later counts)."""
    return cache_dir() / "responses.sqlite"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    created_at REAL NOT NULL,
    payload TEXT NOT NULL
)
"""


class CacheError(LLMConfigError):
    """The response cache file cannot be used (unwritable, corrupt, not a database)."""


#: the way round an unusable cache for a command that calls a model; ``cresowlve cache`` has no model
#: call to make without it, so it leaves this out of its message
WITHOUT_CACHE_HINT = ", or run without the cache (--no-cache)"


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, unicode kept (the project's writer:
    never ``NaN``/``Infinity``)."""
    return dumps(obj, sort_keys=True, separators=(",", ":"))


#: the outcomes a stored completion may have (an entry with another is damaged: a miss)
_OUTCOMES = frozenset(get_args(Outcome))

_PARAM_FIELDS = tuple(f.name for f in dataclasses.fields(GenParams))


def cache_key(endpoint: Endpoint, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> str:
    """SHA-256 hex digest identifying one request."""
    # the fields as they are (GenParams is flat but for two dicts, which are written, not changed;
    # dataclasses.asdict would deep-copy them for every call)
    fields = {name: getattr(params, name) for name in _PARAM_FIELDS}
    if not fields.get("extra_body"):
        del fields["extra_body"]  # added later: an empty one keeps the keys of older entries
    profile = endpoint.profile
    material = {
        "base_url": endpoint.base_url.rstrip("/"),
        "model": endpoint.model,
        "api": params.resolved_api(profile),
        "messages": messages,
        "params": fields,
        "prompt_version": prompt_version,
    }
    if profile.name != "generic":  # the profile shapes the request: another request, another key
        material["provider"] = profile.name
    if endpoint.wire != "openai":
        material["wire"] = endpoint.wire
    return hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()


def worth_caching(c: Completion) -> bool:
    """An answer with text, a refusal or a filtered answer (see the module docstring)."""
    return bool(c.text.strip()) or c.outcome in NOT_AN_ANSWER


def _to_payload(c: Completion, secrets: list[str]) -> str:
    payload = canonical_json(
        {
            "text": c.text,
            "thoughts": c.thoughts,
            "usage": c.usage.model_dump(),
            "cost": c.cost,
            "reported_cost": c.reported_cost,
            "latency_s": c.latency_s,
            "model": c.model,
            "raw": c.raw,
            "outcome": c.outcome,
            "refusal": c.refusal,
        }
    )
    for s in secrets:  # the value as written inside JSON strings, too
        payload = redact(payload, [s, json.dumps(s, ensure_ascii=False)[1:-1]])
    return payload


#: the fields of a stored payload that must have one type when present and not null (``text``: always
#: a string); a stored answer of another shape is damaged: a miss
_PAYLOAD_TYPES: dict[str, type | tuple[type, ...]] = {
    "thoughts": str, "refusal": str, "model": str, "raw": dict, "usage": dict,
    "cost": (int, float), "reported_cost": (int, float), "latency_s": (int, float),
}


def _from_payload(payload: str) -> Completion:
    """The completion of a stored payload; ``ValueError``, ``KeyError`` or ``TypeError`` for a damaged
    one (not JSON, not a JSON object, no text, a field of another type, an outcome this version does not
    write)."""
    d = json.loads(payload)
    if not isinstance(d, dict):
        raise TypeError(f"a stored answer must be a JSON object, not {type(d).__name__}")
    if not isinstance(d["text"], str):
        raise TypeError(f"text is {type(d['text']).__name__}")
    for name, kind in _PAYLOAD_TYPES.items():
        value = d.get(name)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise TypeError(f"{name} is {type(value).__name__}")
    raw = d.get("raw") or {}
    if d.get("outcome") is not None and d["outcome"] not in _OUTCOMES:
        raise ValueError(f"outcome {d['outcome']!r} is not one of {sorted(_OUTCOMES)}")
    return Completion(
        text=d["text"],
        thoughts=d.get("thoughts"),
        usage=Usage(**(d.get("usage") or {})),
        cost=d.get("cost"),
        reported_cost=d.get("reported_cost"),
        latency_s=float(d.get("latency_s") or 0.0),
        cached=True,
        model=d.get("model") or "",
        raw=raw,
        # entries written before outcomes were recorded: a cut-off answer was known by its finish_reason
        outcome=d.get("outcome") or ("truncated" if raw.get("finish_reason") == "length" else "answer"),
        refusal=d.get("refusal"),
    )


_Row = tuple[str, str, str, float, str]  # key, model, prompt_version, created_at, payload
_OPEN: weakref.WeakSet[ResponseCache] = weakref.WeakSet()


@atexit.register
def _flush_open_caches() -> None:
    for cache in list(_OPEN):
        cache.flush()


class ResponseCache:
    """``get``/``put`` completions by key; ``stats()`` and ``clear()`` for housekeeping.

    One connection per instance, guarded by a lock so threads may share an instance.
    Different processes must each open their own instance (as they naturally do).
    """

    #: a deferred put waits for a group only while the last write is younger than GROUP_S seconds, and
    #: at most GROUP_ROWS wait
    GROUP_ROWS = 64
    GROUP_S = 1.0

    def __init__(self, path: str | Path | None = None, *, busy_timeout_ms: int = 30_000) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        self._pending: dict[str, _Row] = {}  # deferred puts not yet written, by key
        self._last_write = 0.0  # monotonic time of the last write
        #: Why the cache turned itself off during this run (a failed read or write), else None.
        self.disabled: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.is_dir():
                raise CacheError(f"response cache {self.path} is a directory, not a cache file")
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
            self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            self._retry_locked(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._retry_locked(lambda: self._conn.execute(_SCHEMA))
            self._conn.execute("SELECT 1 FROM responses LIMIT 1").fetchall()
        except (sqlite3.Error, OSError) as exc:
            raise self._error("cannot be opened", exc) from None
        _OPEN.add(self)

    def _error(self, what: str, exc: BaseException) -> CacheError:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        hint = "delete or move the file" if "not a database" in detail or "malformed" in detail else \
            "check its permissions and free space"
        return CacheError(f"response cache {self.path} {what} ({detail}); {hint}{WITHOUT_CACHE_HINT}")

    @staticmethod
    def _retry_locked(fn: Any, attempts: int = 50) -> Any:
        """Run ``fn``, retrying briefly if another process holds a lock during setup."""
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or i == attempts - 1:
                    raise
                time.sleep(0.05)
        return None

    def _disable(self, what: str, exc: BaseException) -> None:
        """Turn the cache off for the rest of the run, with one WARNING naming the file."""
        if self.disabled is None:
            self.disabled = str(self._error(what, exc)).split("; ")[0]
            log.warning("%s; going on without the cache (every answer is still recorded in the run directory)",
                        self.disabled)

    def get(self, key: str) -> Completion | None:
        """The cached completion (with ``cached=True``), or ``None`` (also when the cache is off)."""
        if self.disabled is not None:
            return None
        try:
            with self._lock:
                waiting = self._pending.get(key)
                row = (waiting[4],) if waiting is not None else \
                    self._conn.execute("SELECT payload FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self._disable("cannot be read", exc)
            return None
        if not row:
            return None
        try:
            return _from_payload(row[0])
        except (ValueError, KeyError, TypeError):  # one damaged entry: ask the model again
            log.warning("response cache %s: entry %s is damaged; treated as a miss", self.path, key[:12])
            return None

    def put(self, key: str, completion: Completion, *, model: str | None = None, prompt_version: str = "",
            secrets: list[str] | None = None, deferred: bool = False) -> None:
        """Store a completion under ``model`` (default: the model the server reported).

        The client passes the endpoint's model name so ``stats()``/``clear(model)`` use the
        names you configured. Only what :func:`worth_caching` accepts is stored (never an empty answer).
        ``secrets`` are the values to redact (default: every credential-like variable; the
        client adds its key variable, whatever its name). ``deferred``: written with the next group
        (see the module docstring), else now, together with any that wait. A failed write turns the
        cache off with a WARNING instead of raising: the caller still gets (and records) the answer.
        """
        if not worth_caching(completion) or self.disabled is not None:
            return
        payload = _to_payload(completion, find_secret_values() if secrets is None else secrets)
        row = (key, model or completion.model, prompt_version, time.time(), payload)
        with self._lock:
            self._pending.pop(key, None)  # a newer answer for the key goes after the older ones
            self._pending[key] = row
            if (not deferred or len(self._pending) >= self.GROUP_ROWS
                    or time.monotonic() - self._last_write >= self.GROUP_S):
                self._write_pending()

    def flush(self) -> None:
        """Write the deferred puts that wait (one transaction)."""
        with self._lock:
            self._write_pending()

    def _write_pending(self) -> None:
        """Write every waiting put in one transaction (the lock is held); a failure turns the cache off."""
        rows, self._pending = list(self._pending.values()), {}
        self._last_write = time.monotonic()
        if not rows or self.disabled is not None:
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for row in rows:
                    self._conn.execute("INSERT OR REPLACE INTO responses (key, model, prompt_version, created_at, "
                                       "payload) VALUES (?,?,?,?,?)", row)
                self._conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._disable("cannot be written", exc)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            if key in self._pending:
                return True
            return self._conn.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        with self._lock:
            self._write_pending()
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        """``{"path", "entries", "bytes", "per_model": {model: count}}`` (bytes include the WAL)."""
        try:
            with self._lock:
                self._write_pending()
                per_model = dict(self._conn.execute("SELECT model, COUNT(*) FROM responses GROUP BY model").fetchall())
        except sqlite3.Error as exc:
            raise self._error("cannot be read", exc) from None
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {"path": str(self.path), "entries": sum(per_model.values()), "bytes": size, "per_model": per_model}

    def clear(self, model: str | None = None) -> int:
        """Delete all entries (or those of one model); returns how many were deleted."""
        try:
            with self._lock:
                self._write_pending()
                if model is None:
                    cur = self._conn.execute("DELETE FROM responses")
                else:
                    cur = self._conn.execute("DELETE FROM responses WHERE model = ?", (model,))
        except sqlite3.Error as exc:
            raise self._error("cannot be written", exc) from None
        return int(cur.rowcount)

    def close(self) -> None:
        with self._lock:
            self._write_pending()
            self._conn.close()
        _OPEN.discard(self)

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
