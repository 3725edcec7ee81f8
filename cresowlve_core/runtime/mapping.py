"""``map_with_resume``: run one model-calling function over many units, resumably.

Every stage that calls a model (evaluation, CREATE generation and scoring, construction filters,
error labelling, quizzes, verbalisation) is one call of :func:`map_with_resume`:

- each finished unit is appended (and fsynced) as one JSONL record the moment it finishes, on the
  run directory's writer thread (:meth:`RunDir.append_async`), so the event loop never waits on
  the disk; a unit counts as done (progress, ``on_record``) only once its record is fsynced, and a
  worker takes its next unit meanwhile (at most one record of each worker waits for the disk; a
  worker that must wait for it hurries the writer, so fast calls are not held back by the
  writer's group window);
- a re-run skips units whose latest record is done, and retries errored ones;
- a unit that fails (an :class:`~cresowlve_core.llm.types.LLMError` after the client's own
  retries) is recorded as an error, with its ``outcome`` (``failed`` or ``error``,
  :mod:`~cresowlve_core.runtime.outcomes`), and the run goes on; a refused or filtered answer is a
  finished unit (``status: ok``) that each stage records as it is and :meth:`MapResult.step_counts` counts;
- a stop error (spent budget, wrong key/model/endpoint) stops the run cleanly: no new unit
  starts, calls already in flight are awaited and recorded, and the reason is returned;
- an interruption (Ctrl-C or SIGTERM, which cancel the running task: :mod:`~cresowlve_core.runtime.stop`)
  is a stop too: what has finished is on disk, calls in flight are abandoned, and the result says
  ``stopped ==`` :data:`INTERRUPTED` so that the stage still writes its summary and finish time;
  once a stop is requested no unit starts, so a pipeline's later steps send nothing;
- a tqdm progress bar shows progress in the CLI and in notebooks.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

import cresowlve_core.runtime.stop as stop_request
from cresowlve_core.failures import InputError, error_line
from cresowlve_core.llm.types import CONCURRENCY, LLMError
from cresowlve_core.runtime.errors import STOP_ERRORS, StopWithRecord, stop_reason
from cresowlve_core.runtime.outcomes import error_outcome, outcome_counts, served_models
from cresowlve_core.runtime.rundir import RunDir
from cresowlve_core.untrusted import one_line

U = TypeVar("U")
Record = dict[str, Any]

#: ``MapResult.stopped`` after Ctrl-C / SIGTERM cancelled the run.
INTERRUPTED = "interrupted"


#: seconds between redraws of a progress bar on a terminal (tqdm's default) and on anything else (a
#: pipe, a log file, a notebook), where ten lines a second cost CPU and say no more than one
PROGRESS_INTERVAL_S, PROGRESS_INTERVAL_PIPED_S = 0.1, 1.0


def progress_interval() -> float:
    """How often a progress bar on stderr is redrawn (tqdm's ``mininterval``)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return PROGRESS_INTERVAL_S if isatty is not None and isatty() else PROGRESS_INTERVAL_PIPED_S


def is_ok(record: Record) -> bool:
    """The default 'done' test: the record's ``status`` is ``ok``."""
    return record.get("status") == "ok"


def error_counts(records: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """Each error message (first line, trimmed) of the errored ``records``, with its count."""
    return Counter(error_line(r.get("error") or "") for r in records if r.get("status") == "error")


@dataclass
class MapResult(Generic[U]):
    """What a :func:`map_with_resume` call did."""

    records: dict[Hashable, Any]  # the latest record (or its entry, with ``entry=``) of every unit that has one, by key
    n_units: int
    n_skipped: int  # already done before this call
    n_sent: int  # units run by this call (each has a record; errored ones included)
    stopped: str | None = None  # why the run stopped early, if it did
    stop_error: BaseException | None = None
    repairs: list[str] = field(default_factory=list)

    @property
    def n_done(self) -> int:
        return sum(is_ok(r) for r in self.records.values())

    @property
    def n_error(self) -> int:
        return sum(r.get("status") == "error" for r in self.records.values())

    @property
    def n_not_run(self) -> int:
        return self.n_units - len(self.records)

    def top_error(self) -> tuple[str, int] | None:
        """The most common error message (first line, trimmed) and its count."""
        top = error_counts(self.records.values()).most_common(1)
        return top[0] if top else None

    def step_counts(self, step: str) -> dict[str, Any]:
        """This run as one step of a pipeline: units, done (of which refused, filtered), errored, not run,
        why it stopped, top error, the models the provider said answered."""
        top = self.top_error()
        return {"step": step, "n_units": self.n_units, "n_ok": self.n_done, **outcome_counts(self.records.values()),
                "n_error": self.n_error, "n_not_run": self.n_not_run, "stopped": self.stopped,
                "top_error": [top[0], top[1]] if top else None, "served_models": served_models(self.records.values())}


def pipeline_summary(steps: Sequence[Record]) -> Record:
    """The counts of a multi-step pipeline over the steps that ran (:meth:`MapResult.step_counts`),
    in the form of :func:`cresowlve_core.exitcodes.stage_exit`: ``stopped`` is the first stopped
    step's reason, as ``"<step>: <reason>"`` unless it was an interruption (kept as :data:`INTERRUPTED`)."""
    first = next((s for s in steps if s.get("stopped")), None)
    errors = [(s["top_error"], s["n_error"]) for s in steps if s.get("top_error")]
    top = max(errors, key=lambda e: e[1])[0] if errors else None
    stopped = None
    if first is not None:
        stopped = INTERRUPTED if first["stopped"] == INTERRUPTED else f"{first['step']}: {first['stopped']}"
    return {"n_items": sum(s["n_units"] for s in steps), "n_ok": sum(s["n_ok"] for s in steps),
            "n_refused": sum(s.get("n_refused", 0) for s in steps), "n_filtered": sum(s.get("n_filtered", 0) for s in steps),
            "n_error": sum(s["n_error"] for s in steps), "n_not_run": sum(s["n_not_run"] for s in steps),
            "top_error": list(top) if top else None, "stopped": stopped,
            "stopped_at": first["step"] if first is not None else None, "steps": list(steps)}


def default_error_record(key: Hashable, exc: BaseException) -> Record:
    return {"key": key if isinstance(key, str) else list(key) if isinstance(key, tuple) else str(key),
            "status": "error", "error": str(exc)}


async def map_with_resume(
    run: RunDir,
    records_file: str,
    units: Sequence[U],
    key: Callable[[U], Hashable],
    call: Callable[[U, Record | None], Awaitable[Record]],
    *,
    record_key: Callable[[Record], Hashable] | None = None,
    done: Callable[[Record], bool] = is_ok,
    on_error: Callable[[U, BaseException], Record] | None = None,
    on_record: Callable[[Record], None] | None = None,
    entry: Callable[[Record], Any] | None = None,
    index: dict[Hashable, tuple[int, Any]] | None = None,
    concurrency: int = CONCURRENCY,
    progress: bool = True,
    desc: str = "",
) -> MapResult[U]:
    """Run ``call(unit, previous_record)`` for every unit not yet done; see the module docstring.

    ``key(unit)`` and ``record_key(record)`` must agree (default ``record_key``: ``record["key"]``,
    tuples compared as lists are turned back into tuples). ``previous_record`` is the unit's last
    record (an error, or a partly finished one, e.g. answered but not judged), else ``None``.
    ``on_error`` turns an :class:`LLMError` into the unit's error record (default:
    :func:`default_error_record`). Duplicate keys among ``units`` are an error.

    With ``entry``, the run keeps ``entry(record)`` per unit instead of its whole record, so that
    memory grows by what an entry holds, not by what the model wrote: ``done`` is asked about
    entries, :attr:`MapResult.records` holds entries, and ``call`` still gets the unit's whole
    previous record, read again from disk by its offset (:meth:`RunDir.index`). ``index`` is that
    index when the caller has read it already (the run's lock held since :meth:`RunDir.begin`).
    """
    rkey = record_key or _record_key
    keys = [key(u) for u in units]
    dupes = sorted(str(k) for k, n in Counter(keys).items() if n > 1)
    if dupes:
        raise InputError(f"{len(dupes)} duplicate unit id(s): {', '.join(dupes[:10])}")
    wanted = set(keys)
    with run.lock():
        if entry is None:  # whole records, kept as they are
            found = {k: (-1, r) for k, r in run.latest(records_file, rkey).items()}
        else:
            found = index if index is not None else run.index(records_file, rkey, entry)
        previous = {k: v for k, v in found.items() if k in wanted}  # key -> (offset, record or entry)
        del found
        todo = [(u, k) for u, k in zip(units, keys) if not (k in previous and done(previous[k][1]))]
        # the description names a model: one line, no terminal escape
        bar = tqdm(total=len(units), initial=len(units) - len(todo), desc=one_line(desc or records_file),
                   unit="unit", disable=not progress, dynamic_ncols=True, mininterval=progress_interval())
        queue: asyncio.Queue[tuple[U, Hashable]] = asyncio.Queue()
        for pair in todo:
            queue.put_nowait(pair)
        stop: list[BaseException] = []
        ran = 0  # units that got a record in this call (a unit a stop ended before its record is not run)

        def kept(rec: Record) -> None:
            previous[rkey(rec)] = (-1, rec if entry is None else entry(rec))
            if on_record is not None:
                on_record(rec)
            bar.update(1)

        async def persist(rec: Record) -> None:
            written = run.queue_append(records_file, rec)  # written and fsynced off the loop
            try:
                await asyncio.shield(written)
            except asyncio.CancelledError:
                # A stop cancels the wait, not the write, which the writer thread finishes: wait for
                # it, so that the run's counts include every record its file holds.
                await asyncio.wait([run.hurried(written)])
                if not written.cancelled() and written.exception() is None:
                    kept(rec)
                raise
            kept(rec)

        def last_record(k: Hashable) -> Record | None:
            if k not in previous:
                return None
            offset, kept = previous[k]
            return kept if entry is None else run.read_at(records_file, offset)

        async def worker() -> None:
            # A worker starts its next unit while its last record is being written and fsynced, and
            # waits for that write before it queues another: the disk and the hand-off to the writer
            # thread stay out of the time between its calls, and at most one of its records is
            # waiting for the disk. A unit counts as done once its record is on disk (persist).
            nonlocal ran
            writing: asyncio.Future[None] | None = None
            try:
                while not stop and stop_request.requested() is None:
                    try:
                        unit, k = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        break
                    try:
                        rec = await call(unit, last_record(k))
                    except StopWithRecord as exc:
                        rec = exc.record
                        stop.append(exc.cause)
                    except STOP_ERRORS as exc:
                        stop.append(exc)
                        break
                    except LLMError as exc:
                        rec = on_error(unit, exc) if on_error else default_error_record(k, exc)
                        rec.setdefault("outcome", error_outcome(exc))
                    ran += 1
                    if writing is not None:
                        await run.hurried(writing)  # a failed write (a full disk) ends the worker before another unit
                    writing = asyncio.ensure_future(persist(rec))
            except BaseException:
                if writing is not None:  # the record is written all the same; the worker's own error wins
                    await asyncio.wait([run.hurried(writing)])
                    if not writing.cancelled():
                        writing.exception()
                raise
            if writing is not None:
                await run.hurried(writing)

        n_workers = max(1, min(concurrency, len(todo)))
        interrupted = False
        workers = [asyncio.ensure_future(worker()) for _ in range(n_workers)]
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            # Ctrl-C or SIGTERM (asyncio.run cancels the main task): every finished unit is
            # already on disk; return so that the stage writes its summary and finish time. The
            # gather ends at the first cancelled worker; a worker whose record is being written
            # ends once it is on disk (persist), and the counts wait for it.
            interrupted = True
            await asyncio.wait(workers)
        finally:
            bar.close()
        interrupted = interrupted or (stop_request.requested() is not None and not queue.empty())
    first = stop[0] if stop else None
    return MapResult(
        records={k: previous[k][1] for k in keys if k in previous},
        n_units=len(units),
        n_skipped=len(units) - len(todo),
        n_sent=ran,
        stopped=stop_reason(first) if first else (INTERRUPTED if interrupted else None),
        stop_error=first,
        repairs=list(run.repairs),
    )


def _record_key(record: Record) -> Hashable:
    k = record["key"]
    return tuple(k) if isinstance(k, list) else k
