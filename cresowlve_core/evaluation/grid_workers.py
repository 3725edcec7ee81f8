"""A grid's cells in several processes (``cresowlve grid --workers N``).

One process's event loop spends about a millisecond of CPU per request, so a grid at short latencies
is bound by one core while the others idle. Here the parent starts ``N`` worker processes once and
feeds them cell names through one queue; each worker evaluates up to ``cells_per_worker`` cells at a
time and takes the next cell when one finishes. The parent holds the one progress bar; workers send
it their item counts and each cell's result (``grid.run_cell``'s dict) through a second queue, and
the parent writes ``grid.json`` exactly as the in-process grid does.

How the work is dealt (:func:`deal`): every worker gets the same share of the requests in flight, so
that each carries the same share of the CPU. ``parallel`` cells over ``N`` workers is ``ceil(parallel
/ N)`` cells per worker, each cell at its concurrency times ``parallel / (N x cells per worker)``
(rounded down): 3 cells at concurrency 16 over 2 workers is 2 cells per worker at 12, 48 requests in
flight as in one process, 24 in each worker (dealt 2 + 1 cells at 16, one worker carried two thirds of
the CPU). In flight there are never more requests than ``parallel`` cells at their own concurrency
would send, in all and at any one endpoint, and never more in one cell than its own concurrency. A
cell's concurrency changes no answer and may change between a run and its resume; its manifest
records the concurrency it ran at. Where a cell's share would round down to no request at all
(concurrency 1), the cells are dealt whole instead (:func:`slot_shares`) at their own concurrency.

What the processes share, and why it is safe:

- the response cache: SQLite in WAL mode with a busy timeout (``llm/cache.py``), made for
  several processes at once;
- the budget: ``max_cost`` is a cell's (each role's meter in ``evaluation/runner.py``), and a cell
  runs whole in one worker, so its meter sees every call of that cell and the limit holds as in
  one process; there is no grid-wide budget to share;
- a run directory: each cell has its own, locked by ``RunDir`` as always (a cell whose run
  directory is in use is ``refused``).

Stopping: workers ignore SIGINT (a Ctrl-C in a terminal reaches the whole process group; the
parent decides) and stop on SIGTERM like any command. The parent's first Ctrl-C or SIGTERM sets a
shared value; each worker's watcher thread turns it into the runtime's stop, so its running cells
stop and write their summaries, it starts no other cell, and the parent collects what they report.
A worker that dies (killed, out of memory) fails its running cells with its exit code; the other
workers go on with the rest. A worker whose parent is gone stops too.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from cresowlve_core.evaluation.grid import (
    CellItems,
    GridConfig,
    cell_finished,
    cells,
    run_cell,
    write_grid_summary,
)
from cresowlve_core.runtime import INTERRUPTED, stop
from cresowlve_core.untrusted import one_line

POLL_S = 0.2  # how often the parent and the workers look at the queues and the stop event
FLUSH_S = 0.25  # how often a worker sends its item count to the progress bar


def slot_shares(parallel: int, workers: int) -> list[int]:
    """``parallel`` cell slots dealt over ``workers`` (3 over 2 -> [2, 1])."""
    return [parallel // workers + (i < parallel % workers) for i in range(workers)]


@dataclass(frozen=True)
class Deal:
    """How a grid's cells are dealt over its workers: ``slots[i]`` cells at a time in worker ``i``,
    each at its concurrency times ``num / den`` (rounded down)."""

    slots: list[int]
    num: int = 1
    den: int = 1

    def concurrency(self, own: int) -> int:
        """A cell's concurrency in a worker, from its own."""
        return own * self.num // self.den


def deal(parallel: int, workers: int, concurrencies: list[int]) -> Deal:
    """The same share of ``parallel`` cells' requests in flight for each of ``workers``
    (``concurrencies``: those of the cells to run; see the module docstring).

    Every worker runs ``k = ceil(parallel / workers)`` cells at a time at ``parallel / (workers x k)``
    of their concurrency. That never puts more requests in flight than ``parallel`` cells at their own
    concurrency: the ``workers x k`` largest concurrencies average no more than the ``parallel``
    largest. Where a cell's share would be no request (``floor(c x parallel / (workers x k)) == 0``)
    the cells are dealt whole, :func:`slot_shares`."""
    k = -(-parallel // workers)
    num, den = parallel, workers * k
    if num == den or any(c * num // den < 1 for c in concurrencies):
        return Deal(slot_shares(parallel, workers))
    return Deal([k] * workers, num, den)


def start_method() -> str:
    """How the workers are started: ``fork`` on Linux when this process runs one thread (a CLI
    command), else ``spawn`` (a notebook's kernel or a test beside a server thread: a thread holding
    a lock at the fork would leave it held in the child).

    A forked worker starts with every module and the cells' items this process has loaded (a spawned
    one imports them again, about 1.3 s of CPU each, and reads every item set again)."""
    return "fork" if sys.platform == "linux" and threading.active_count() == 1 else "spawn"


def run_grid_in_workers(grid: GridConfig, workers: int, *, progress: bool = True) -> dict[str, Any]:
    """Evaluate every unfinished cell in ``workers`` processes and write ``grid.json``."""
    grid = grid.model_copy(update={"runs_dir": str(grid.directory())})  # resolved here, the same in every worker
    all_cells = cells(grid)
    items = CellItems()
    todo = [c for c in all_cells if not cell_finished(grid, c, items)]
    total = sum(len(items(c.eval_config(grid))) for c in todo)  # also refuses bad items before any start
    method = start_method()
    if method == "fork":
        # each cell's summary needs scipy.special (runner.summarize: the Wilson interval); imported here
        # once, not on every worker's event loop while its other cells wait
        import scipy.special  # noqa: F401
    else:
        items = CellItems()  # (a spawned worker reads its own: the loaded items are not pickled over)
    ctx: Any = multiprocessing.get_context(method)
    tasks: Any = ctx.Queue()
    events: Any = ctx.Queue()
    stopping = ctx.Value("i", 0)  # the signal that stops the grid, 0 until then (polled: see _worker_main)
    dealt = deal(grid.parallel, workers, [c.eval_config(grid).options.concurrency for c in todo])
    procs = [ctx.Process(target=_worker_main, name=f"grid-worker-{i}", daemon=True,
                         args=(grid.model_dump(mode="json"), i, dealt, tasks, events, stopping, items))
             for i in range(len(dealt.slots))]
    results: dict[str, dict[str, Any]] = {}
    running: dict[int, set[str]] = {i: set() for i in range(len(procs))}
    ended: set[int] = set()
    dead_since: dict[int, float] = {}
    bar: Any = None
    try:
        for p in procs:  # before the first put (the queue's feeder thread) and the bar (tqdm's monitor thread)
            p.start()
        del items
        for c in todo:
            tasks.put(c.name)
        for _ in range(workers):
            tasks.put(None)  # one end mark per worker
        bar = tqdm(total=total, desc=f"grid {one_line(grid.name)} ({len(todo)} cells, {workers} workers)", unit="item",
                   disable=not progress, dynamic_ncols=True)
        while len(ended) < len(procs):
            if stop.requested() is not None and not stopping.value:
                stopping.value = int(stop.requested() or signal.SIGINT)
            try:
                kind, worker, *rest = events.get(timeout=POLL_S)
            except queue.Empty:
                for i, p in enumerate(procs):  # a worker gone without its end message died (killed, out of memory)
                    if i in ended or p.exitcode is None:
                        continue
                    if time.monotonic() - dead_since.setdefault(i, time.monotonic()) > 5 * POLL_S:
                        ended.add(i)  # its last messages, flushed at exit, have had time to arrive
                        for name in running[i]:
                            results[name] = {"status": "failed", "error": "the worker process running this "
                                             f"cell exited with code {p.exitcode}"}
                continue
            if kind == "items":
                bar.update(rest[0])
            elif kind == "start":
                running[worker].add(rest[0])
            elif kind == "cell":
                running[worker].discard(rest[0])
                results[rest[0]] = rest[1]
            elif kind == "end":
                ended.add(worker)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise
    finally:
        stopping.value = stopping.value or int(signal.SIGTERM)  # (on a bug here too: no worker outlives the grid)
        if bar is not None:
            bar.close()
        for p in procs:
            if p.pid is not None:  # (started)
                p.join(timeout=30)
    out = write_grid_summary(grid, all_cells, results)
    return {**out, "stopped": INTERRUPTED} if stop.requested() is not None else out


# --------------------------------------------------------------------------- the worker process


def _worker_main(grid_data: dict[str, Any], worker: int, dealt: Deal, tasks: Any, events: Any, stopping: Any,
                 items: CellItems) -> None:
    """Worker ``worker``: ``dealt.slots[worker]`` cells at a time (``items``: those loaded already)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent turns Ctrl-C into `stopping`
    grid = GridConfig(**grid_data)
    parent = os.getppid()

    def watch() -> None:
        # polled, not an Event's wait: setting an Event blocks when a process that waited on it has died
        while not stopping.value and os.getppid() == parent:  # (the parent gone: stop as on SIGTERM)
            time.sleep(POLL_S)
        if stop.requested() is None:
            stop.request(stopping.value or signal.SIGTERM)

    from cresowlve_core.runtime import run_coro

    with stop.handle_signals():  # SIGTERM to this worker stops it cleanly, as it stops a command
        threading.Thread(target=watch, name="grid-stop-watch", daemon=True).start()
        with contextlib.suppress(KeyboardInterrupt):  # stopped while waiting for a cell: nothing to write
            run_coro(_worker_cells(grid, dealt, worker, tasks, events, items))
    events.put(("end", worker))
    events.close()
    events.join_thread()


async def _worker_cells(grid: GridConfig, dealt: Deal, worker: int, tasks: Any, events: Any,
                        items: CellItems) -> None:
    """Take cells from ``tasks`` while one of the worker's ``dealt.slots[worker]`` slots is free; report
    items and results through ``events``."""
    by_name = {c.name: c for c in cells(grid)}
    free = asyncio.Semaphore(dealt.slots[worker])
    running: set[asyncio.Task[None]] = set()
    count = [0]

    def on_record(_rec: dict[str, Any]) -> None:
        count[0] += 1

    def flush() -> None:
        if count[0]:
            events.put(("items", worker, count[0]))
            count[0] = 0

    async def flusher() -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            flush()

    async def one(name: str) -> None:
        try:
            cell = by_name[name]
            events.put(("start", worker, name))
            cfg = cell.eval_config(grid)
            options = cfg.options.model_copy(update={"concurrency": dealt.concurrency(cfg.options.concurrency)})
            res = await run_cell(grid, cell, items(cfg), on_record, cfg.model_copy(update={"options": options}))
            flush()
            events.put(("cell", worker, name, res))
        finally:
            free.release()

    ticker = asyncio.create_task(flusher())
    try:
        while stop.requested() is None:
            await free.acquire()
            name = await asyncio.to_thread(_next, tasks)
            if name is None or stop.requested() is not None:  # no cell left, or stopped: a taken cell stays not run
                free.release()
                break
            task = asyncio.create_task(one(name))
            running.add(task)
            task.add_done_callback(running.discard)
        if running:
            await asyncio.wait(running)  # (wait, unlike gather, leaves the cells alone when cancelled)
    except asyncio.CancelledError:  # the stop: the running cells stop, write their summaries and report
        if stop.requested() is None:
            raise
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.wait(running)
    finally:
        ticker.cancel()
        flush()


def _next(tasks: Any) -> str | None:
    """The next cell's name from the shared queue (None: none left, or the grid is stopping)."""
    while stop.requested() is None:
        try:
            name: str | None = tasks.get(timeout=POLL_S)
            return name
        except queue.Empty:
            continue
    return None
