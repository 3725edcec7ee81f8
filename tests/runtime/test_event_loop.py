"""The run's event loop: uvloop's, from a script and from inside a running loop (a notebook), and
named in the manifest."""

from __future__ import annotations

import asyncio
import sys

import pytest

from cresowlve_core.runtime import new_manifest, run_coro
from cresowlve_core.runtime.aio import NO_UVLOOP, event_loop_name

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not install on Windows")


async def _loop_and_manifest() -> tuple[str, str | None]:
    return type(asyncio.get_running_loop()).__module__, new_manifest("evaluation").event_loop


def test_run_coro_runs_on_uvloop_and_the_manifest_says_so() -> None:
    import uvloop

    module, recorded = run_coro(_loop_and_manifest())
    assert NO_UVLOOP is None and module.startswith("uvloop")
    assert recorded == event_loop_name() == f"uvloop {uvloop.__version__}"


def test_run_coro_inside_a_running_loop_runs_on_uvloop_too() -> None:
    async def notebook_cell() -> tuple[str, str | None]:
        return run_coro(_loop_and_manifest())

    module, recorded = asyncio.run(notebook_cell())  # the kernel's loop is asyncio's
    assert module.startswith("uvloop") and recorded is not None and recorded.startswith("uvloop ")


def test_a_loop_the_caller_made_is_named_as_asyncio() -> None:
    module, recorded = asyncio.run(_loop_and_manifest())
    assert module.startswith("asyncio") and recorded is not None and recorded.startswith("asyncio (")
