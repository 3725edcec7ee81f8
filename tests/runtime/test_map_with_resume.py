"""The stage runtime: resume, fsynced appends, torn tails, per-unit errors, stop errors, the lock."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
from pathlib import Path

import pytest

from cresowlve_core.exitcodes import stop_parts
from cresowlve_core.llm.types import BudgetExceeded, LLMError, LLMFatalError
from cresowlve_core.runtime import (
    ClientOptions,
    Manifest,
    ResumeError,
    RunDir,
    RunDirError,
    StopWithRecord,
    check_resumable,
    map_with_resume,
    new_manifest,
    run_coro,
)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def run_map(run: RunDir, units, call, **kw):
    return asyncio.run(map_with_resume(run, "out.jsonl", units, key=lambda u: u, call=call, progress=False, **kw))


def test_finished_units_are_skipped_and_errored_units_retried(tmp_path):
    run = RunDir(tmp_path / "run")
    calls: list[str] = []

    async def flaky(u, prev):
        calls.append(u)
        if u == "b":
            raise LLMError("boom for b")
        return {"key": u, "status": "ok", "value": u.upper()}

    first = run_map(run, ["a", "b", "c"], flaky)
    assert first.n_done == 2 and first.n_error == 1 and first.top_error() == ("boom for b", 1)
    assert sorted(calls) == ["a", "b", "c"]
    calls.clear()

    async def fixed(u, prev):
        calls.append(u)
        assert prev is not None and prev["status"] == "error"  # the unit's last record is handed over
        return {"key": u, "status": "ok", "value": u.upper()}

    second = run_map(run, ["a", "b", "c"], fixed)
    assert calls == ["b"] and second.n_skipped == 2 and second.n_sent == 1 and second.n_done == 3
    assert len(lines(run.path / "out.jsonl")) == 4  # appended, never rewritten


def test_a_worker_starts_its_next_unit_while_its_record_is_written_and_has_at_most_one_waiting(tmp_path, monkeypatch):
    """The disk is slow here (each write takes 0.2 s): the worker does not wait for it before its
    next unit, but it waits for its last record before queueing another, and a unit counts as done
    (``on_record``) only once its record is on disk."""
    import time

    run = RunDir(tmp_path / "run")
    path = run.path / "out.jsonl"
    write = RunDir._write_lines

    def slow_write(self, filename, lines_):
        time.sleep(0.2)
        write(self, filename, lines_)

    monkeypatch.setattr(RunDir, "_write_lines", slow_write)
    seen: list[int] = []
    on_disk_when_done: list[bool] = []

    async def call(u, prev):
        seen.append(len(lines(path)) if path.exists() else 0)
        return {"key": u, "status": "ok"}

    def done(rec):
        on_disk_when_done.append(rec["key"] in {r["key"] for r in lines(path)})

    result = run_map(run, ["a", "b", "c", "d"], call, concurrency=1, on_record=done)
    # b starts while a is written; c only once a is on disk (b is then being written); d once b is
    assert seen == [0, 0, 1, 2]
    assert on_disk_when_done == [True] * 4 and result.n_done == 4 and len(lines(path)) == 4


def test_torn_last_line_is_moved_aside_and_its_unit_rerun_once(tmp_path):
    run_path = tmp_path / "run"
    sent: list[str] = []

    async def call(u, prev):
        sent.append(u)
        return {"key": u, "status": "ok", "text": "x" * 50}

    run_map(RunDir(run_path), ["a", "b", "c"], call)
    out = run_path / "out.jsonl"
    data = out.read_bytes()
    out.write_bytes(data[: len(data) - 30])  # a kill (or a full disk) mid-write of the last record
    torn_key = json.loads(data.splitlines()[-1])["key"]
    sent.clear()
    r1 = run_map(RunDir(run_path), ["a", "b", "c"], call)
    r2 = run_map(RunDir(run_path), ["a", "b", "c"], call)
    assert sent == [torn_key]  # exactly one unit re-sent, and only on the first resume
    assert r1.n_done == r2.n_done == 3 and r1.repairs and not r2.repairs
    assert all(isinstance(json.loads(x), dict) for x in out.read_text().splitlines())  # valid JSONL
    assert (run_path / "out.jsonl.torn").read_bytes().strip()  # nothing silently lost


def test_stop_error_starts_nothing_new_and_keeps_what_finished(tmp_path):
    run = RunDir(tmp_path / "run")
    started: list[int] = []

    async def call(u, prev):
        started.append(u)
        await asyncio.sleep(0.01 * (u % 3))
        if u == 3:
            raise BudgetExceeded("budget of $1 spent")
        return {"key": u, "status": "ok"}

    res = asyncio.run(map_with_resume(run, "out.jsonl", list(range(20)), key=lambda u: u, call=call,
                                      record_key=lambda r: r["key"], concurrency=2, progress=False))
    assert res.stopped and res.stopped.startswith("max_cost reached") and isinstance(res.stop_error, BudgetExceeded)
    assert len(started) < 20 and res.n_not_run == 20 - res.n_done
    assert {r["key"] for r in lines(run.path / "out.jsonl")} == set(started) - {3}  # every in-flight call kept


def test_stop_with_record_keeps_the_record(tmp_path):
    run = RunDir(tmp_path / "run")

    async def call(u, prev):
        raise StopWithRecord(LLMFatalError("judge key wrong"), {"key": u, "status": "ok", "judge": None})

    res = run_map(run, ["a"], call)
    assert stop_parts(res.stopped)[0] == "fatal: judge key wrong" and lines(run.path / "out.jsonl")[0]["key"] == "a"


def test_duplicate_units_are_an_error_naming_them(tmp_path):
    async def call(u, prev):
        return {"key": u, "status": "ok"}

    with pytest.raises(ValueError, match="duplicate unit id.*a"):
        run_map(RunDir(tmp_path / "run"), ["a", "b", "a"], call)


def test_a_second_writer_is_refused(tmp_path):
    run = RunDir(tmp_path / "run")
    with run.lock():
        with pytest.raises(RunDirError, match="in use by another process"):
            with RunDir(tmp_path / "run").lock():
                pass


def test_a_run_dir_on_a_read_only_file_system_is_one_line_and_creates_nothing(tmp_path, monkeypatch):
    """Before: the mkdir's OSError (EROFS: neither a permission nor a file in the way) left RunDir
    unexplained, so ``cresowlve errors label --out-dir`` on a read-only mount ended in a traceback and
    "bug" (exit 1) instead of one line (exit 2)."""
    target = tmp_path / "ro" / "run"
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self == target:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(RunDirError, match=rf"cannot create run directory {re.escape(str(target))}: Read-only file system"):
        RunDir(target)
    assert not target.exists()


def test_run_dir_errors_are_one_line(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(RunDirError, match="is a file"):
        RunDir(tmp_path / "f")
    with pytest.raises(RunDirError, match="a parent is a file"):
        RunDir(tmp_path / "f" / "run")
    with pytest.raises(RunDirError, match="must not be empty"):
        RunDir("")
    run = RunDir(tmp_path / "run")
    (run.path / "out.jsonl").write_text('{"key": "a"}\nnot json\n{"key": "b"}\n')
    with pytest.raises(RunDirError, match=r"out.jsonl:2: not JSON"):
        run.read("out.jsonl")


def test_resume_rule(tmp_path):
    old = new_manifest("eval", model="m", lang="en", items="demo", base_url="http://127.0.0.1:8001/v1", prompts=["p@1"])
    same = new_manifest("eval", model="m", lang="en", items="demo", base_url="http://127.0.0.1:8002/v1", prompts=["p@1"])
    # a loopback server restarted on another port is the same server
    assert check_resumable(old, same).base_url_history == ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]
    for change in ({"model": "m2"}, {"lang": "ru"}, {"items": "hub:en"}, {"effort": "high"}, {"prompts": ["p@2"]},
                   {"identity": {"variation": "iterate"}}, {"base_url": "https://api.example.com/v1"}):
        with pytest.raises(ResumeError, match=next(iter(change))):
            check_resumable(old, old.model_copy(update=change))


def test_manifest_reads_pre_runtime_layout_and_strips_url_credentials():
    m = Manifest.model_validate({"kind": "eval", "run_id": "r", "model": "m", "prompt": {"name": "solve_cot_en", "version": "2"},
                                 "base_url": "https://user:pw@host/v1?api-key=abc123"})
    assert m.prompts == ["solve_cot_en@2"]
    assert "pw" not in m.base_url and "abc123" not in m.base_url and m.base_url.startswith("https://host/v1")


def test_run_coro_works_inside_a_running_loop():
    async def inner():
        return 41 + 1

    async def outer():  # as in a notebook cell, where the kernel's loop is running
        return run_coro(inner())

    assert asyncio.run(outer()) == 42 and run_coro(inner()) == 42


def test_client_options_have_one_default_each_and_validate():
    o = ClientOptions()
    assert o.max_tokens == 4096 and o.temperature == 0.0 and o.concurrency == 8
    with pytest.raises(ValueError):
        ClientOptions(concurrency=0)
    with pytest.raises(ValueError):
        ClientOptions(unknown_setting=1)


def test_with_an_entry_the_run_keeps_entries_and_calls_with_the_whole_record_from_disk(tmp_path):
    run = RunDir(tmp_path / "run")
    (run.path / "out.jsonl").write_text(
        '{"key": "a", "status": "error", "error": "old", "text": "first"}\n'
        '{"key": "b", "status": "ok", "text": "done"}\n'
        '{"key": "a", "status": "error", "error": "newer", "text": "second \u2028 line"}\n'
        '{"key": "c", "status": "ok", "te', encoding="utf-8")  # a torn last line: c is not done
    index = run.index("out.jsonl", lambda r: r["key"], lambda r: r["status"])
    assert {k: e for k, (_, e) in index.items()} == {"a": "error", "b": "ok"}
    assert run.read_at("out.jsonl", index["a"][0])["error"] == "newer"
    seen: dict[str, dict | None] = {}

    async def call(u, prev):
        seen[u] = prev
        return {"key": u, "status": "ok", "text": "x" * 1000}

    res = run_map(run, ["a", "b", "c"], call, entry=lambda r: r["status"], done=lambda e: e == "ok")
    assert sorted(seen) == ["a", "c"] and seen["c"] is None
    assert seen["a"] == {"key": "a", "status": "error", "error": "newer", "text": "second \u2028 line"}
    assert res.records == {"a": "ok", "b": "ok", "c": "ok"}  # entries, not the records written
    assert run.latest("out.jsonl", lambda r: r["key"])["a"]["text"] == "x" * 1000


def test_the_index_reads_a_byte_order_mark_and_names_a_bad_line(tmp_path):
    run = RunDir(tmp_path / "run")
    (run.path / "out.jsonl").write_bytes(b'\xef\xbb\xbf{"key": "a", "n": 1}\n\n{"key": "b", "n": "\xc3\xa9"}\n')
    index = run.index("out.jsonl", lambda r: r["key"], lambda r: r["n"])
    assert [run.read_at("out.jsonl", o)["n"] for o, _ in index.values()] == [1, "é"]
    (run.path / "out.jsonl").write_bytes(b'{"key": "a"}\n[1]\n{"key": "b"}\n')
    with pytest.raises(RunDirError, match=r"out.jsonl:2: expected a JSON object"):
        run.index("out.jsonl", lambda r: r["key"], lambda r: r)
    (run.path / "out.jsonl").write_bytes(b'{"key": "a"}\n{"key": "\xff"}\n')
    with pytest.raises(RunDirError, match=r"out.jsonl:2: not UTF-8 \(byte 0xff\)"):
        run.latest("out.jsonl", lambda r: r["key"])


def test_a_full_disk_when_the_lock_is_taken_stops_the_run_as_a_full_disk(tmp_path, monkeypatch):
    """Before: the pid written into ``.lock`` on a full disk raised a bare OSError (ENOSPC), which the CLI
    printed as a traceback and "bug" (exit 1), e.g. ``cresowlve synth`` reaching its solve step on a
    full tmpfs; now it is a DiskFull naming the lock file (exit 3), and the lock is not held."""
    import builtins

    from cresowlve_core.failures import DiskFull
    from cresowlve_core.runtime import rundir

    class FullDisk:
        def __init__(self, f):
            self._f = f

        def __getattr__(self, name):
            return getattr(self._f, name)

        def flush(self):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real_open = builtins.open
    monkeypatch.setattr(rundir, "open", lambda *a, **kw: FullDisk(real_open(*a, **kw)), raising=False)
    run = RunDir(tmp_path / "run")
    with pytest.raises(DiskFull, match=rf"disk full writing {re.escape(str(tmp_path / 'run' / '.lock'))}"):
        run.begin(Manifest(kind="test"))
    monkeypatch.undo()
    with RunDir(tmp_path / "run").lock():  # released: another process may take it
        pass
