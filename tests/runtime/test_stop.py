"""runtime/stop.py in-process: a requested stop cancels the running step and the later steps send
nothing; SIGINT stays ignored when it was. The subprocess tests that signal each
pipeline are tests/*/test_*_stop.py and tests/test_mainjob_stop.py."""

from __future__ import annotations

import asyncio
import json
import signal
import threading

import pytest

from cresowlve_core.runtime import INTERRUPTED, RunDir, map_with_resume, run_coro, stop


@pytest.fixture(autouse=True)
def no_stop_left_behind():
    stop.reset()
    yield
    stop.reset()


def test_a_stop_cancels_the_running_step_and_the_next_step_sends_nothing(tmp_path):
    started: list[str] = []

    async def slow(u, prev):
        started.append(u)
        if u == "a":
            threading.Timer(0.2, stop.request, args=(signal.SIGTERM,)).start()  # the signal arrives mid-step
        await asyncio.sleep(0 if u == "a" else 30)
        return {"key": u, "status": "ok"}

    async def pipeline():
        first = await map_with_resume(RunDir(tmp_path / "one"), "out.jsonl", ["a", "b", "c", "d"], key=lambda u: u,
                                      call=slow, concurrency=2, progress=False)
        second = await map_with_resume(RunDir(tmp_path / "two"), "out.jsonl", ["x", "y"], key=lambda u: u,
                                       call=slow, concurrency=2, progress=False)
        return first, second

    first, second = run_coro(pipeline())
    assert first.stopped == INTERRUPTED and first.n_done == 1 and first.n_not_run == 3
    assert second.stopped == INTERRUPTED and second.n_sent == 0
    assert started == ["a", "b", "c"] and stop.requested() == signal.SIGTERM  # nothing started after the stop


def test_a_record_being_written_when_the_stop_comes_is_counted(tmp_path):
    writing, release = threading.Event(), threading.Event()

    class SlowDisk(RunDir):
        def _write_lines(self, filename, lines):
            writing.set()
            assert release.wait(10)
            super()._write_lines(filename, lines)

    async def answer(u, prev):
        if u != "a":
            await asyncio.sleep(30)
        return {"key": u, "status": "ok"}

    def stop_mid_write():
        assert writing.wait(10)
        stop.request(signal.SIGTERM)  # cancels the run while "a" is on the writer thread
        threading.Timer(0.5, release.set).start()

    threading.Thread(target=stop_mid_write, daemon=True).start()
    result = run_coro(map_with_resume(SlowDisk(tmp_path / "run"), "out.jsonl", ["a", "b", "c"], key=lambda u: u,
                                      call=answer, concurrency=3, progress=False))
    lines = (tmp_path / "run" / "out.jsonl").read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a"]
    assert result.stopped == INTERRUPTED and result.n_done == 1 and result.n_not_run == 2
    assert list(result.records) == ["a"]


def test_a_cancellation_outside_a_step_becomes_keyboardinterrupt():
    async def idle():
        threading.Timer(0.1, stop.request).start()
        await asyncio.sleep(30)

    with pytest.raises(KeyboardInterrupt):
        run_coro(idle())


def test_sigint_stays_ignored_and_sigterm_is_handled():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    before = signal.getsignal(signal.SIGTERM)
    try:
        with stop.handle_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a background job keeps ignoring Ctrl-C
            assert signal.getsignal(signal.SIGTERM) is stop._on_signal
        assert signal.getsignal(signal.SIGTERM) is before  # restored when the command ends
    finally:
        signal.signal(signal.SIGINT, previous)
