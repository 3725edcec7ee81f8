"""The event loop a run's code makes: uvloop's (a declared dependency: its loop, sockets and timers
are C, so a model call costs less CPU than on asyncio's Python selector loop), or asyncio's own
where uvloop is not installable (Windows). Used by :mod:`cresowlve_core.runtime.aio` for the run
and by the HTTP worker processes (:mod:`cresowlve_core.llm.http_workers`)."""

from __future__ import annotations

import asyncio
import sys

#: why the loop is asyncio's own, or None where it is uvloop's (every platform uvloop installs on)
NO_UVLOOP = "asyncio (uvloop is not installable on Windows)" if sys.platform == "win32" else None


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's, or asyncio's where uvloop is not installable (Windows)."""
    if NO_UVLOOP is not None:
        return asyncio.new_event_loop()
    import uvloop  # deferred: `cresowlve --help` imports no event loop

    return uvloop.new_event_loop()
