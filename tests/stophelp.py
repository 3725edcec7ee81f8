"""Helpers for the tests that signal a pipeline mid-step (runtime/stop.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def spawn_cli(args: list[str], *, ignore_sigint: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m cresowlve_core.cli ARGS`` in its own process. ``ignore_sigint``: start it with SIGINT
    ignored, as a shell script starts a background job (``cmd &``)."""

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-m", "cresowlve_core.cli", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            preexec_fn=ignore if ignore_sigint else None, env={**os.environ, **(env or {})})


def n_lines(root: Path, pattern: str) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in root.glob(pattern) if p.is_file())


def wait_until(what: str, test: Callable[[], bool], proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"not {what} after {timeout}s")


def signal_mid_step(proc: subprocess.Popen, srv: Any, what: str, ready: Callable[[], bool], signum: int,
                    timeout: float = 90) -> tuple[str, str, int]:
    """Wait until ``ready`` (a step under way), send ``signum``, wait for the exit: returns the
    process's stdout and stderr and the requests the server received after the signal."""
    wait_until(what, ready, proc)
    at_signal = srv.total
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=timeout)
    return stdout, stderr, srv.total - at_signal


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]
