"""Helpers for the tests that signal a pipeline mid-step (runtime/stop.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
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
                    timeout: float = 90, on_signal: Callable[[], None] | None = None) -> tuple[str, str, int]:
    """Wait until ``ready`` (a step under way), send ``signum`` (then call ``on_signal``), wait for the
    exit: returns the process's stdout and stderr and the requests the server received after the signal."""
    wait_until(what, ready, proc)
    at_signal = srv.total
    proc.send_signal(signum)
    if on_signal is not None:
        on_signal()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running {timeout}s after the signal:\n{out}\n{err}") from None
    return stdout, stderr, srv.total - at_signal


class Gate:
    """``answers`` for the fake server that hold requests, so a test signals a step in a known state
    instead of racing the server's latency: the first ``quota`` requests of each ``key`` are answered
    at once, every later one waits until :meth:`release_held` (the ones held by then) or :meth:`open`
    (all, now and later). A request held at the signal and released then may finish; one arriving
    after it is held, so each of the step's slots sends at most one request after the signal.

    Use it as ``FakeServer(answers=gate)`` and ``with gate:`` (opens it on the way out, so no handler
    thread stays blocked)."""

    def __init__(self, answers: Callable[[Any], Any], *, quota: int = 0,
                 key: Callable[[Any], Hashable] = lambda req: None, timeout: float = 120) -> None:
        self._answers, self._quota, self._key, self._timeout = answers, quota, key, timeout
        self._lock = threading.Lock()
        self._seen: Counter[Hashable] = Counter()
        self._held: list[tuple[Hashable, threading.Event]] = []
        self._open = False

    def __call__(self, req: Any) -> Any:
        with self._lock:
            k = self._key(req)
            self._seen[k] += 1
            wait = None if self._open or self._seen[k] <= self._quota else threading.Event()
            if wait is not None:
                self._held.append((k, wait))
        if wait is not None:
            wait.wait(self._timeout)
        return self._answers(req)

    def held(self) -> Counter[Hashable]:
        """Requests waiting now, by key."""
        with self._lock:
            return Counter(k for k, ev in self._held if not ev.is_set())

    def release_held(self) -> None:
        with self._lock:
            for _, ev in self._held:
                ev.set()

    def open(self) -> None:
        with self._lock:
            self._open = True
        self.release_held()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.open()


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]
