"""Run a coroutine to completion from a script, the CLI or a notebook cell."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

import cresowlve_core.runtime.stop as stop

T = TypeVar("T")


def run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, also from inside a running loop (Jupyter, marimo).

    In a notebook the kernel's loop is already running, so the coroutine runs on a fresh loop in
    a worker thread and this call blocks until it is done; exceptions propagate to the caller.
    The coroutine is the task that a stop (Ctrl-C, SIGTERM: :mod:`~cresowlve_core.runtime.stop`)
    cancels; a stage that returns after the cancellation (``map_with_resume`` does) returns
    normally, and a cancellation that escapes the coroutine becomes :class:`KeyboardInterrupt`.
    """
    main = stop.cancellable(coro)
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(main)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, main).result()
    except asyncio.CancelledError:
        if stop.requested() is None:
            raise
        raise KeyboardInterrupt from None
