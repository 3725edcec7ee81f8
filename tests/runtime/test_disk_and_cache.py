"""Full disks, failing caches, and the fsync off the event loop.

* The run directory is the source of truth: a cache that fails (full, read-only, locked) is one
  WARNING and the run goes on uncached; nothing is lost, nothing is re-sent on resume.
* A full run directory stops the run with exit 3 and a line naming the file.
* Records are written and fsynced on the run directory's writer thread; a unit counts as done
  only once its record is on disk, which still holds after ``kill -9``.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core import jsonl
from cresowlve_core.cli import main
from cresowlve_core.llm import cache as cache_mod
from cresowlve_core.runtime import RunDir, map_with_resume


class _FullDiskConn:
    """A sqlite connection whose writes fail as on a full disk (reads work)."""

    def __init__(self, conn: sqlite3.Connection, message: str) -> None:
        self._conn, self._message = conn, message

    def execute(self, sql: str, *args):
        if sql.lstrip().upper().startswith(("INSERT", "DELETE", "UPDATE")):
            raise sqlite3.OperationalError(self._message)
        return self._conn.execute(sql, *args)

    def close(self) -> None:
        self._conn.close()


def _eval(base_url: str, tmp: Path, *extra: str) -> int:
    items = S.write_items(tmp / "items.jsonl", S.eval_items())
    return main(["eval", "--model", "fake-model", "--base-url", base_url, "--items", str(items), "--lang", "en",
                 "--run-dir", str(tmp / "run"), "--max-tokens", "64", "--concurrency", "2", *extra])


@pytest.mark.parametrize("message", ["database or disk is full", "attempt to write a readonly database",
                                     "database is locked"])
def test_a_failing_cache_is_a_warning_and_nothing_is_lost_or_resent(tmp_path, monkeypatch, caplog, message):
    real_init = cache_mod.ResponseCache.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        self._conn = _FullDiskConn(self._conn, message)

    monkeypatch.setattr(cache_mod.ResponseCache, "__init__", init)
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    with FakeServer(answers=S.eval_answers) as srv:
        assert _eval(srv.base_url, tmp_path) == 0  # before: exit 2, the 4 answers in hand dropped
        assert srv.total == 4
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "response cache" in r.getMessage()]
        assert len(warnings) == 1 and message in warnings[0] and str(tmp_path / "cache") in warnings[0]
        assert _eval(srv.base_url, tmp_path) == 0
        assert srv.total == 4  # resumed from the run directory: nothing re-sent
    recs = jsonl.read_jsonl(tmp_path / "run" / "responses.jsonl")
    assert sorted(r["id"] for r in recs if r["status"] == "ok") == [it.id for it in S.eval_items()]


def test_a_cache_that_cannot_be_opened_is_a_warning(tmp_path, monkeypatch, caplog):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "afile"))  # its parent is a file
    with FakeServer(answers=S.eval_answers) as srv:
        assert _eval(srv.base_url, tmp_path) == 0
        assert srv.total == 4
    assert any("going on without the cache" in r.getMessage() for r in caplog.records)


def _enospc_on(monkeypatch, name: str) -> None:
    """fsync of a file called ``name`` fails with ENOSPC, as the kernel reports a full disk."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(name):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("name", ["responses.jsonl", "manifest.json.tmp"])
def test_a_full_run_directory_exits_3_naming_the_file(tmp_path, monkeypatch, capsys, name):
    _enospc_on(monkeypatch, name)
    with FakeServer(answers=S.eval_answers) as srv:
        code = _eval(srv.base_url, tmp_path, "--no-cache")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    target = tmp_path / "run" / name.removesuffix(".tmp")
    assert code == 3 and err.startswith("error: disk full writing ") and str(target) in err, err


def test_a_run_directory_made_unwritable_mid_run_exits_3_naming_the_file(tmp_path, monkeypatch, capsys):
    """Every answer recorded, then the run directory refuses the manifest's rewrite (its permissions changed,
    or its file system was remounted read-only, after the run began). Before: a PermissionError traceback,
    'bug: this is an unexpected error in cresowlve', exit 1; now one line naming the file and the reason,
    exit 3, and a resume sends nothing again."""
    real_open = open
    finished = tmp_path / "run" / "manifest.json.tmp"

    def refusing_open(file, mode="r", *a, **kw):  # the manifest's rewrite at finish, after every record
        if Path(file) == finished and "w" in mode and (tmp_path / "run" / "responses.jsonl").exists():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", refusing_open)
    with FakeServer(answers=S.eval_answers) as srv:
        code = _eval(srv.base_url, tmp_path, "--no-cache")
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 3, err
        assert err[-1] == (f"error: cannot write {finished} (Permission denied); finished work is kept, "
                           "make it writable and run again")
        assert not any("Traceback" in line or line.startswith("bug:") for line in err)
        monkeypatch.setattr("builtins.open", real_open)
        assert _eval(srv.base_url, tmp_path, "--no-cache") == 0
        assert srv.total == 4  # every answer was on disk: the resume sent nothing
    recs = jsonl.read_jsonl(tmp_path / "run" / "responses.jsonl")
    assert sorted(r["id"] for r in recs if r["status"] == "ok") == [it.id for it in S.eval_items()]


def test_a_run_directory_moved_mid_run_exits_3_naming_it(tmp_path, capsys):
    """The run directory renamed while the run writes it (a tidy-up of data/runs/): the next record has
    nowhere to go. Before: FileNotFoundError on .../run/responses.jsonl, a 'bug:' traceback, exit 1; now
    one line saying the directory was moved or removed, exit 3; nothing is written anew at the old path."""
    run, moved = tmp_path / "run", tmp_path / "moved"
    asked = []

    def answers(req):
        asked.append(req)
        if len(asked) == 3:
            run.rename(moved)
        return S.eval_answers(req)

    with FakeServer(answers=answers) as srv:
        code = _eval(srv.base_url, tmp_path, "--no-cache")
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 3, err
        assert err[-1].startswith(f"error: run directory {run} was moved or removed while the run wrote it "
                                  "(No such file or directory: ")
        assert err[-1].endswith("put it back and run again to resume")
        assert not any(line.startswith("bug:") or "Traceback" in line for line in err)
    assert not run.exists() and (moved / "manifest.json").is_file()  # nothing written anew at the old path


def test_records_are_fsynced_off_the_event_loop_and_on_disk_when_reported_done(tmp_path, monkeypatch):
    run = RunDir(tmp_path / "run")
    loop_thread = threading.get_ident()
    fsync_threads: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        fsync_threads.append(threading.get_ident())
        time.sleep(0.01)  # a slow disk: with the fsync on the loop, every unit would wait on it
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    reported: list[str] = []

    def on_record(rec: dict) -> None:  # runs when the unit counts as done: its record is on disk
        on_disk = {r["key"] for r in jsonl.read_jsonl(run.path / "out.jsonl")}
        assert rec["key"] in on_disk
        reported.append(rec["key"])

    async def call(u, prev):
        await asyncio.sleep(0.001)
        return {"key": u, "status": "ok"}

    units = [f"u{i}" for i in range(60)]
    res = asyncio.run(map_with_resume(run, "out.jsonl", units, key=lambda u: u, call=call, on_record=on_record,
                                      concurrency=30, progress=False))
    assert res.n_done == 60 and sorted(reported) == sorted(units)
    assert fsync_threads and loop_thread not in fsync_threads  # never on the event loop's thread
    assert len(fsync_threads) < 60  # records queued during a write share its fsync (group commit)


_KILLED_CHILD = textwrap.dedent("""
    import asyncio, sys
    from cresowlve_core.runtime import RunDir, map_with_resume

    async def call(u, prev):
        await asyncio.sleep(0.002)
        return {"key": u, "status": "ok", "text": "x" * 2000}

    def on_record(rec):
        print("DONE", rec["key"], flush=True)

    run = RunDir(sys.argv[1])
    asyncio.run(map_with_resume(run, "out.jsonl", [f"u{i}" for i in range(100000)], key=lambda u: u, call=call,
                                on_record=on_record, concurrency=32, progress=False))
""")


def test_kill_9_keeps_every_record_that_was_reported_done(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, str(tmp_path / "run")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    reported: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        reported.append(line.split()[1])
        if len(reported) >= 300:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # only whole lines are reports: the kill can cut the last one ("DONE" or "DONE u1" of "DONE u123")
    rest = proc.stdout.read().split("\n")[:-1]
    reported += [line.split()[1] for line in rest if line.startswith("DONE ") and len(line.split()) == 2]
    on_disk = {r["key"] for r in jsonl.read_jsonl(tmp_path / "run" / "out.jsonl", torn_tail_ok=True)}
    missing = [k for k in reported if k not in on_disk]
    assert len(reported) >= 300 and missing == []


def test_a_run_stopped_by_a_full_disk_can_be_run_again_in_the_same_process(tmp_path, monkeypatch, capsys):
    """A notebook kernel that ran ``eval`` onto a full disk, and runs it again once space is freed. Before:
    the stopped run's RunDir, still referenced (here: kept in a list; in a kernel: the last traceback),
    held the directory's lock, so the second run was refused with "is in use by another process"."""
    kept: list[RunDir] = []
    real_init = RunDir.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        kept.append(self)

    monkeypatch.setattr(RunDir, "__init__", init)
    with FakeServer(answers=S.eval_answers) as srv:
        with monkeypatch.context() as full:
            _enospc_on(full, "responses.jsonl")
            assert _eval(srv.base_url, tmp_path, "--no-cache") == 3
        capsys.readouterr()
        code = _eval(srv.base_url, tmp_path, "--no-cache")
    err = capsys.readouterr().err
    assert code == 0 and "in use" not in err, err
    records = jsonl.read_jsonl(tmp_path / "run" / "responses.jsonl")
    assert len({r["id"] for r in records}) == len(S.eval_items()) and all(r["status"] == "ok" for r in records)
    assert kept[0]._held is None  # the stopped run's lock was released when the second run began


def test_a_run_still_going_in_this_process_keeps_its_lock(tmp_path):
    """Only a holder whose task has ended gives the lock up: a stage still running in another task of
    this process keeps the directory, and a second writer is refused."""
    async def both() -> str:
        first = RunDir(tmp_path / "run")
        holding, release = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            with first.lock():
                holding.set()
                await release.wait()

        task = asyncio.create_task(hold())
        await holding.wait()
        try:
            with RunDir(tmp_path / "run").lock():
                return "not refused"
        except Exception as exc:  # noqa: BLE001
            return str(exc)
        finally:
            release.set()
            await task

    assert "is in use by another process" in asyncio.run(both())
