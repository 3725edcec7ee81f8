"""Run a coroutine to completion from a script, the CLI or a notebook cell."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, also from inside a running loop (Jupyter, marimo).

    In a notebook the kernel's loop is already running, so the coroutine runs on a fresh loop in
    a worker thread and this call blocks until it is done; exceptions propagate to the caller.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
