"""The run directory's writer thread: records nobody waits for share a write within the group
window; a record someone waits for is written at once."""

from __future__ import annotations

import asyncio
import json
import time

from cresowlve_core.runtime import RunDir, map_with_resume
from cresowlve_core.runtime.rundir import _GroupWriter


def counted_writes(monkeypatch) -> list[int]:
    """The number of records in each write of the run's files, in order."""
    sizes: list[int] = []
    write = RunDir._write_lines

    def counting(self, filename, lines):
        sizes.append(len(lines))
        write(self, filename, lines)

    monkeypatch.setattr(RunDir, "_write_lines", counting)
    return sizes


def test_records_queued_within_the_window_share_one_write(tmp_path, monkeypatch):
    monkeypatch.setattr(_GroupWriter, "GROUP_WINDOW_S", 0.5)
    sizes = counted_writes(monkeypatch)
    run = RunDir(tmp_path / "run")

    async def main() -> None:
        futs = []
        for i in range(10):
            futs.append(run.queue_append("out.jsonl", {"key": i}))
            await asyncio.sleep(0.01)
        await asyncio.gather(*futs)  # nobody hurries: the window runs out

    asyncio.run(main())
    assert sizes == [10]
    assert [json.loads(x)["key"] for x in (run.path / "out.jsonl").read_text().splitlines()] == list(range(10))


def test_a_record_someone_waits_for_does_not_wait_out_the_window(tmp_path, monkeypatch):
    monkeypatch.setattr(_GroupWriter, "GROUP_WINDOW_S", 5.0)
    sizes = counted_writes(monkeypatch)
    run = RunDir(tmp_path / "run")

    async def main() -> list[float]:
        took = []
        for i in range(3):
            t0 = time.monotonic()
            await run.append_async("out.jsonl", {"key": i})
            took.append(time.monotonic() - t0)
        t0 = time.monotonic()
        await run.hurried(run.queue_append("out.jsonl", {"key": 3}))
        took.append(time.monotonic() - t0)
        return took

    took = asyncio.run(main())
    assert max(took) < 2.5, took  # each would take the whole 5 s window if it were not hurried
    assert sizes == [1, 1, 1, 1]
    assert len((run.path / "out.jsonl").read_text().splitlines()) == 4


def test_workers_with_fast_calls_are_not_held_back_by_the_window(tmp_path, monkeypatch):
    """A worker whose next record is ready before its last one is written waits for that write,
    and hurries it: four instant units at concurrency 1 take far less than one 5 s window each."""
    monkeypatch.setattr(_GroupWriter, "GROUP_WINDOW_S", 5.0)
    run = RunDir(tmp_path / "run")

    async def call(u, prev):
        return {"key": u, "status": "ok"}

    t0 = time.monotonic()
    result = asyncio.run(map_with_resume(run, "out.jsonl", ["a", "b", "c", "d"], key=lambda u: u, call=call,
                                         concurrency=1, progress=False))
    assert time.monotonic() - t0 < 4.0
    assert result.n_done == 4
    assert sorted(json.loads(x)["key"] for x in (run.path / "out.jsonl").read_text().splitlines()) == ["a", "b", "c", "d"]
