"""Run a coroutine to completion from a script, the CLI or a notebook cell, on uvloop.

The run's event loop is uvloop's (:func:`new_event_loop`), a declared dependency: its loop, sockets
and timers are C (libuv), so a model call costs less CPU than on asyncio's Python selector loop
(docs/llm.md, "Throughput"). uvloop is not installable on Windows; there, and only there, the loop
is asyncio's own. Which loop ran is recorded in every run's manifest (``event_loop``,
:func:`event_loop_name`). A coroutine awaited on a loop the caller made (``asyncio.run``, a
notebook's ``await``) runs on that loop, named as asyncio's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import cresowlve_core.runtime.stop as stop
from cresowlve_core.eventloop import NO_UVLOOP, new_event_loop

T = TypeVar("T")


def event_loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """Which event loop runs ``loop`` (default: the running one, else the one :func:`new_event_loop`
    makes): ``"uvloop 0.23.0"``, or ``"asyncio"`` with the reason when it is asyncio's own."""
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
    if loop is None and NO_UVLOOP is not None:
        return NO_UVLOOP
    if loop is None or type(loop).__module__.split(".")[0] == "uvloop":
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return NO_UVLOOP or "asyncio (a loop made by the caller, not by cresowlve_core.runtime)"


def _run(main: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)

#: the youngest generation's threshold during a run (Python's default: 700 allocations)
RUN_GC_THRESHOLD = 10_000


@contextlib.contextmanager
def run_gc() -> Iterator[None]:
    """Python's cyclic garbage collector tuned for a run, and put back as it was afterwards.

    What exists when the run starts (the imported libraries, the loaded items) lives until the
    run ends: it is frozen (``gc.freeze``), so no collection walks it again,
    and the youngest generation is collected every :data:`RUN_GC_THRESHOLD` allocations instead of
    700, so the objects of calls in flight are mostly freed by their reference counts before a
    collection sees them. Without this the collector's walks of the live objects took 9-15% of a
    run's CPU. Cycles made during the run are still collected."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(RUN_GC_THRESHOLD, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on the loop of :func:`new_event_loop` (uvloop), also from inside a
    running loop (Jupyter, marimo).

    In a notebook the kernel's loop is already running, so the coroutine runs on a fresh loop in
    a worker thread (uvloop's too) and this call blocks until it is done; exceptions propagate to the caller.
    The coroutine is the task that a stop (Ctrl-C, SIGTERM: :mod:`~cresowlve_core.runtime.stop`)
    cancels; a stage that returns after the cancellation (``map_with_resume`` does) returns
    normally, and a cancellation that escapes the coroutine becomes :class:`KeyboardInterrupt`.
    """
    main = stop.cancellable(coro)
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            with run_gc():
                return _run(main)
        with concurrent.futures.ThreadPoolExecutor(1) as pool, run_gc():
            return pool.submit(_run, main).result()
    except asyncio.CancelledError:
        if stop.requested() is None:
            raise
        raise KeyboardInterrupt from None
