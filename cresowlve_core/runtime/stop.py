"""The one stop mechanism of the runtime: the first Ctrl-C or SIGTERM stops the current step of a
pipeline and skips the rest; the pipeline still writes its summary (exit 130 / 143).

How it works:

- :func:`handle_signals` (the CLI wraps every command in it) installs one handler for SIGTERM,
  and for SIGINT unless SIGINT is ignored (a background job of a script: then SIGTERM alone
  stops it, with the same summary);
- the first signal records itself (:func:`requested`) and cancels the coroutine that
  :func:`~cresowlve_core.runtime.run_coro` is running: :func:`~cresowlve_core.runtime.map_with_resume`
  turns that into ``stopped == "interrupted"`` (finished units are on disk), and starts no unit
  once a stop is requested, so the steps after it send nothing;
- pipelines ask :func:`requested` between steps and skip the rest; a long synchronous step (a
  notebook render) runs inside :func:`interruptible`, where the signal raises
  :class:`KeyboardInterrupt` at once;
- a second signal raises :class:`KeyboardInterrupt` wherever the program is: it exits at once.

Only the main thread receives signals; a notebook's kernel keeps its own Ctrl-C handling.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}

_lock = threading.Lock()
_state: dict[str, Any] = {"signum": None, "interruptible": 0}
_running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []


def requested() -> int | None:
    """The signal that asked this process to stop (``signal.SIGINT`` or ``SIGTERM``), else None."""
    signum: int | None = _state["signum"]
    return signum


def signal_name(signum: int | None = None) -> str:
    """``Ctrl-C`` or ``SIGTERM`` (of ``signum``, default the one received)."""
    return SIGNAL_NAMES.get(signal.Signals(signum if signum is not None else requested() or signal.SIGINT), "signal")


def reset() -> None:
    """Forget a received stop (a new command in the same process; tests)."""
    _state["signum"] = None


def request(signum: int = signal.SIGINT) -> None:
    """Ask for a stop as the first signal would (the running coroutine is cancelled)."""
    _state["signum"] = signum
    with _lock:
        running = list(_running)
    for loop, task in running:
        with contextlib.suppress(RuntimeError):  # the loop has just closed
            loop.call_soon_threadsafe(task.cancel)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if requested() is not None:
        raise KeyboardInterrupt  # a second signal: exit at once
    request(signum)
    if _state["interruptible"] and not _running:
        raise KeyboardInterrupt


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Install the stop handler for SIGTERM and (unless ignored) SIGINT; restore them on exit.

    Only from the main thread (elsewhere this does nothing: signals are not delivered there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _on_signal)}
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A synchronous step that a stop interrupts at once (with :class:`KeyboardInterrupt`)."""
    if requested() is not None:
        raise KeyboardInterrupt
    _state["interruptible"] += 1
    try:
        yield
    finally:
        _state["interruptible"] -= 1


async def cancellable(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` as the task a stop cancels (used by :func:`~cresowlve_core.runtime.run_coro`)."""
    task = asyncio.current_task()
    assert task is not None
    entry = (asyncio.get_running_loop(), task)
    with _lock:
        _running.append(entry)
    try:
        return await coro
    finally:
        with _lock:
            _running.remove(entry)
