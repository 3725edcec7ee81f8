"""A run directory: the unit of resume and reporting for every stage that calls models.

It holds ``manifest.json`` and one or more append-only JSONL files. Each record is written,
flushed and fsynced the moment its work finishes, so a killed run loses nothing that completed.
Readers take the *last* record per key, so a retried unit simply supersedes its earlier error.

A torn last line (a kill or a full disk mid-write) is moved to ``<file>.torn`` before the next
append, so the file stays valid JSONL and nothing is silently lost. One process at a time may
write a run directory (:meth:`RunDir.lock`); a stage reading another's records holds the lock shared
(:meth:`RunDir.reading`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import ValidationError

from cresowlve_core import jsonl
from cresowlve_core.failures import StoppedError, UsageError, failed_write
from cresowlve_core.jsonl import dumps_line
from cresowlve_core.outfiles import write_json
from cresowlve_core.runtime.manifest import FORMAT_VERSION, Manifest, ResumeError, check_resumable
from cresowlve_core.runtime.provenance import now_iso
from cresowlve_core.secrets import find_secret_values, scrub

log = logging.getLogger(__name__)

T = TypeVar("T")

RESPONSES = "responses.jsonl"
SUMMARY = "summary.json"
LOCK = ".lock"
#: set to 1 (by the main job, for the stages it renders): a run directory of another configuration is
#: archived and started afresh instead of refused (:meth:`RunDir.begin`)
ARCHIVE_CHANGED_ENV = "CRESOWLVE_ARCHIVE_CHANGED"
#: bytes read at a time when looking for a file's last line (:meth:`RunDir._repair_tail`)
_TAIL_BLOCK = 1 << 16


#: the run directories whose lock this process holds, by resolved path: the holder and the asyncio task
#: that took the lock (None when it was taken outside a task), so that a stage of this process that
#: ended with an exception between :meth:`RunDir.begin` and :meth:`RunDir.finish` does not keep the
#: next stage of this process (a notebook's next cell) out of the directory
_HOLDERS: dict[Path, tuple[weakref.ref[RunDir], weakref.ref[asyncio.Task[Any]] | None]] = {}


def _take_over_if_ended(path: Path) -> None:
    """Release the lock an earlier :class:`RunDir` of this process holds on ``path`` when the asyncio
    task that took it has ended (its stage raised before :meth:`RunDir.finish`: nothing writes there any
    more). A holder still in its task, or one that took the lock outside a task, keeps it."""
    holder, task = _HOLDERS.get(path, (None, None))
    run = holder() if holder is not None else None
    taker = task() if task is not None else None
    ended = task is not None and (taker is None or taker.done())
    if run is not None and run._held is not None and ended:
        log.info("%s: released the lock of an earlier run in this process that stopped with an error", path)
        run._release()


def _current_task() -> weakref.ref[asyncio.Task[Any]] | None:
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        return None
    return weakref.ref(task) if task is not None else None


def archive_changed_from_env() -> bool:
    """Whether :data:`ARCHIVE_CHANGED_ENV` asks to archive run directories of another configuration."""
    return os.environ.get(ARCHIVE_CHANGED_ENV, "").strip() not in ("", "0")


def refuse_changed(run_dir: str | Path, new: Manifest, *, archive_changed: bool | None = None) -> None:
    """Raise the :class:`ResumeError` that :meth:`~cresowlve_core.runtime.RunDir.begin` of ``new``
    would raise in ``run_dir`` (another configuration there), before anything is started or
    written. Nothing when ``run_dir`` holds no readable manifest (``begin`` says why a bad one is
    bad), nor under the archive-on-change rule (``archive_changed``, default: the main job's
    variable), which moves the old run aside instead."""
    path = Path(run_dir) / "manifest.json"
    if archive_changed or (archive_changed is None and archive_changed_from_env()) or not path.is_file():
        return
    try:
        old = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    check_resumable(old, new)


def archive_run(path: Path) -> Path:
    """Move a run directory to ``<parent>/archive/<name>-<UTC time>`` (a suffix if that exists); return where."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest = path.parent / "archive" / f"{path.name}-{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = path.parent / "archive" / f"{path.name}-{stamp}-{n}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    path.rename(dest)
    return dest


class RunDirError(UsageError, RuntimeError):
    """The run directory cannot be used (not a directory, unwritable, locked, corrupt)."""


class RunDirGone(StoppedError):
    """The run directory was moved or removed while the run wrote it: the run stops (exit 3); what it
    wrote before is wherever the directory went."""


class RunDir:
    """Append-only JSONL files plus a manifest, safe to write from many asyncio tasks."""

    def __init__(self, path: str | Path, *, secret_names: list[str] | None = None):
        self.path = Path(path)
        if str(path).strip() == "":
            raise RunDirError("the run directory must not be empty")
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path} is a file, not a run directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise RunDirError(f"cannot create run directory {self.path}: a parent is a file") from exc
        except PermissionError as exc:
            raise RunDirError(f"cannot create run directory {self.path}: permission denied") from exc
        except OSError as exc:  # a read-only file system, a full disk: said in one line, nothing created
            raise RunDirError(f"cannot create run directory {self.path}: {exc.strerror or exc}") from exc
        if not os.access(self.path, os.W_OK):
            raise RunDirError(f"run directory {self.path} is not writable")
        self._lock = threading.Lock()
        self._held: IO[str] | None = None  # the open lock file while this process holds the lock
        self._key = self.path  # the resolved path it was locked under (_HOLDERS)
        self._secrets = find_secret_values(secret_names)
        self._checked: set[str] = set()
        #: per file written: (descriptor open for appending, st_dev, st_ino of the file it opened)
        self._files: dict[str, tuple[int, int, int]] = {}
        weakref.finalize(self, _close_descriptors, self._files)
        self._writer = _GroupWriter(self._write_lines)
        self.repairs: list[str] = []

    # ---- manifest

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> Manifest | None:
        if not self.manifest_path.exists():
            return None
        try:  # an older layout is upgraded as it is read (Manifest's validator: upgrade_manifest)
            return Manifest.model_validate_json(self.manifest_path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            why = "; ".join(str(e["msg"]) for e in exc.errors()[:3])
            raise RunDirError(f"{self.manifest_path}: not a valid manifest ({why})") from exc

    def write_manifest(self, manifest: Manifest) -> None:
        self.write_json("manifest.json", manifest.model_dump(mode="json"))

    def begin(self, manifest: Manifest, *, archive_changed: bool | None = None) -> Manifest:
        """Start or resume: take the run directory's lock (held until :meth:`finish`), check the
        old manifest (if any) against ``manifest`` and write it. A second process is refused by
        the lock before the manifest is touched. Raises
        :class:`~cresowlve_core.runtime.manifest.ResumeError` for another configuration, unless
        ``archive_changed`` (default: the :data:`ARCHIVE_CHANGED_ENV` variable, which the main job
        sets) says to move the old run to ``<parent>/archive/<name>-<UTC time>`` and start afresh."""
        self._acquire()
        try:
            old = self.read_manifest()
            if old is not None:
                try:
                    manifest = check_resumable(old, manifest)
                except ResumeError as exc:
                    if not (archive_changed if archive_changed is not None else archive_changed_from_env()):
                        raise
                    self._release()
                    dest = archive_run(self.path)
                    print(f"{self.path}: {str(exc).split('; use another')[0]}; moved it to {dest} and "
                          "starting afresh", flush=True)
                    self.path.mkdir(parents=True)
                    self._checked.clear()
                    self._acquire()
            self.write_manifest(manifest)
        except BaseException:
            self._release()
            raise
        return manifest

    def finish(self, manifest: Manifest, *, stopped: str | None = None,
               summary: dict[str, Any] | None = None) -> Manifest:
        """Stamp ``finished_at`` (and why it stopped early), write the manifest and the summary."""
        manifest = manifest.model_copy(update={"finished_at": now_iso(), "stopped": stopped})
        try:
            self.write_manifest(manifest)
            if summary is not None:
                self.write_summary(summary)
        finally:
            self._release()
        return manifest

    def abandon(self, before: Manifest | None) -> None:
        """Undo :meth:`begin` for a run refused after it began (a record it cannot read): the manifest
        it replaced (``before``, :meth:`read_manifest` before it) written back, so the directory does not
        claim a resume that did not happen, and the lock released, so this process can use the
        directory again once it is mended."""
        try:
            if before is not None:
                self.write_manifest(before)
        finally:
            self._release()

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write ``summary.json``, stamped with the run directory's ``format_version``."""
        self.write_json(SUMMARY, {"format_version": FORMAT_VERSION, **summary})

    def write_json(self, filename: str, data: Any) -> None:
        """Write a whole JSON file atomically (manifest, summary)."""
        try:
            write_json(self.path / filename, data, secrets=self._secrets)
        except OSError as exc:
            raise self._failed_write(exc, self.path / filename)  # noqa: B904 (its cause is set when it is new)

    def _failed_write(self, exc: OSError, path: Path) -> BaseException:
        """The exception to raise for a failed write of ``path`` in this run directory: :class:`RunDirGone`
        when the directory itself is no longer there, else :func:`~cresowlve_core.failures.failed_write`'s."""
        if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not self.path.is_dir():
            gone = RunDirGone(f"run directory {self.path} was moved or removed while the run wrote it "
                              f"({exc.strerror}: {exc.filename or path}); what it wrote before is wherever it went: "
                              "put it back and run again to resume")
            gone.__cause__ = exc
            return gone
        return failed_write(exc, path)

    # ---- records

    def append(self, filename: str, record: dict[str, Any]) -> None:
        """Append one record and fsync it before returning (the caller's thread)."""
        self._write_lines(filename, [self.scrub(dumps_line(record))])

    async def append_async(self, filename: str, record: dict[str, Any]) -> None:
        """Append one record on the run's writer thread; return once it is written and fsynced.

        The event loop never waits on the disk. Records queued while a write is under way are
        written together and fsynced once (group commit), so the guarantee is the same as
        :meth:`append`: when this returns, the record is on disk. A write error (a full disk)
        is raised here, naming the file.
        """
        await self.hurried(self.queue_append(filename, record))

    def queue_append(self, filename: str, record: dict[str, Any]) -> asyncio.Future[None]:
        """Queue one record on the run's writer thread; the future is done once it is written and
        fsynced (:meth:`append_async`). Cancelling a wait on it does not take the record back: the
        line is already queued."""
        return self._writer.submit(filename, self.scrub(dumps_line(record)))

    def hurried(self, fut: asyncio.Future[T]) -> asyncio.Future[T]:
        """``fut`` (a record's future from :meth:`queue_append`, or a task waiting on one), for a
        caller about to wait on it: if it is not done, the writer thread writes what is queued
        without waiting out its group window (:class:`_GroupWriter`)."""
        if not fut.done():
            self._writer.hurry()
        return fut

    def _write_lines(self, filename: str, lines: list[str]) -> None:
        path = self.path / filename
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        with self._lock:
            try:
                fd = self._append_fd(filename, path)
                view = memoryview(data)
                while view:  # a regular file takes it whole; a short write is continued, never dropped
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as exc:  # a full disk stops the run (DiskFull); the file is named either way
                self._close_file(filename)  # the next write opens it again and checks its tail first
                raise self._failed_write(exc, path)  # noqa: B904 (its cause is set when it is a new exception)

    def _append_fd(self, filename: str, path: Path) -> int:
        """The descriptor ``filename``'s records are appended through, opened (``O_APPEND``) once and
        kept while the file at ``path`` is the one it opened: a file moved, replaced or removed since
        (a run archived, a rescore) is opened again, its tail checked (:meth:`_repair_tail`) first.
        Held under ``self._lock``."""
        held = self._files.get(filename)
        if held is not None:
            try:
                st = os.stat(path)
                if (st.st_dev, st.st_ino) == held[1:]:
                    return held[0]
            except FileNotFoundError:
                pass
            self._close_file(filename)
        if filename not in self._checked:
            self._repair_tail(filename)
            self._checked.add(filename)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        st = os.fstat(fd)
        self._files[filename] = (fd, st.st_dev, st.st_ino)
        return fd

    def _close_file(self, filename: str) -> None:
        """Close ``filename``'s descriptor, if open; its tail is checked again before the next write."""
        held = self._files.pop(filename, None)
        self._checked.discard(filename)
        if held is not None:
            with contextlib.suppress(OSError):
                os.close(held[0])

    def _close_files(self) -> None:
        with self._lock:
            for filename in list(self._files):
                self._close_file(filename)

    def repair_tail(self, filename: str) -> None:
        """Make ``filename`` end on a complete line before it is read to be rewritten whole (a rescore): a torn
        tail goes to ``<file>.torn`` (:meth:`_repair_tail`), as it does before the next append."""
        with self._lock:
            self._repair_tail(filename)

    def _repair_tail(self, filename: str) -> None:
        """Make the file end on a complete line: a torn tail goes to ``<file>.torn``."""
        path = self.path / filename
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with open(path, "rb") as f:  # only the last line is read, not the whole file
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            cut, end = 0, size
            while end > 0:  # the last newline, looked for backwards a block at a time
                start = max(0, end - _TAIL_BLOCK)
                f.seek(start)
                i = f.read(end - start).rfind(b"\n")
                if i >= 0:
                    cut = start + i + 1
                    break
                end = start
            f.seek(cut)
            tail = f.read()
        try:
            json.loads(tail)
            complete = True
        except ValueError:
            complete = False
        writing = path.with_name(path.name + ".torn") if not complete else path
        try:
            if complete:  # a whole record missing only its newline
                with open(path, "ab") as f:
                    f.write(b"\n")
                return
            with open(writing, "ab") as side:
                side.write(tail + b"\n")
            writing = path
            with open(path, "r+b") as f:
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # a full disk stops the run (DiskFull), naming the file it could not write
            raise failed_write(exc, writing)  # noqa: B904 (its cause is set when it is a new exception)
        msg = f"{path}: moved a torn last line ({len(tail)} bytes) to {path.name}.torn; its unit will be re-run"
        self.repairs.append(msg)
        log.warning(msg)

    def read(self, filename: str) -> list[dict[str, Any]]:
        """Every record of ``filename`` in file order (see :func:`read_jsonl`)."""
        return read_jsonl(self.path / filename)

    def latest(self, filename: str, key: Callable[[dict[str, Any]], Any]) -> dict[Any, dict[str, Any]]:
        """The last record per key (the file is read one line at a time: superseded lines are not kept)."""
        return {key(r): r for _, r in self.scan(filename)}

    def index(self, filename: str, key: Callable[[dict[str, Any]], Any],
              entry: Callable[[dict[str, Any]], T]) -> dict[Any, tuple[int, T]]:
        """Per key, the byte offset of its last record and ``entry(record)``: a compact view of a
        run (what a resume and a summary need) that costs what ``entry`` keeps, not whole records.
        :meth:`read_at` reads the whole record again by its offset."""
        return {key(r): (offset, entry(r)) for offset, r in self.scan(filename)}

    def scan(self, filename: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(byte offset, record)`` for every record of ``filename`` in file order, one line at a
        time, with the errors of :func:`read_jsonl` (nothing for a missing file)."""
        path = self.path / filename
        if not path.exists():
            return iter(())
        return jsonl.scan_jsonl(path, torn_tail_ok=True, error=RunDirError)

    def read_at(self, filename: str, offset: int) -> dict[str, Any]:
        """The record whose line starts at ``offset`` (from :meth:`index`); the file is append-only, so
        an offset stays valid while the run goes on."""
        return jsonl.read_line_at(self.path / filename, offset)

    # ---- one writer at a time

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run directory's lock; a second process gets a clear :class:`RunDirError`.
        Re-entrant: inside :meth:`begin` ... :meth:`finish` the lock is already held."""
        if self._held is not None:
            yield
            return
        self._acquire()
        try:
            yield
        finally:
            self._release()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the run directory's lock shared while another stage reads its records (a generation
        being scored): refused with a clear :class:`RunDirError` while a process writes the directory
        (:meth:`lock`, :meth:`begin`), and no writer can begin until it is released. Readers share it."""
        f = self._flocked(fcntl.LOCK_SH, ", which is still writing it; wait for it to finish")
        try:
            yield
        finally:
            f.close()

    def _flocked(self, mode: int, busy: str) -> IO[str]:
        """The lock file opened and locked with ``mode`` (shared or exclusive), without waiting: a
        :class:`RunDirError` saying ``busy`` when another process holds it the other way."""
        f = open(self.path / LOCK, "a+")
        try:
            fcntl.flock(f.fileno(), mode | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise RunDirError(f"{self.path} is in use by another process (lock {LOCK}){busy}") from None
        return f

    def _acquire(self) -> None:
        if self._held is not None:
            return
        self._key = key = self.path.resolve()
        _take_over_if_ended(key)
        f = self._flocked(fcntl.LOCK_EX, "; wait for it to finish, or use another run directory")
        try:
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
        except OSError as exc:  # a full disk: stopped before anything starts, the lock file named
            with contextlib.suppress(OSError):
                f.close()
            raise failed_write(exc, self.path / LOCK) from None
        self._held = f
        _HOLDERS[key] = (weakref.ref(self), _current_task())

    def _release(self) -> None:
        self._close_files()  # another process may write the files once the lock is released
        held, self._held = self._held, None
        if held is not None:
            held.close()
            holder, _ = _HOLDERS.get(self._key, (None, None))
            if holder is not None and holder() is self:
                del _HOLDERS[self._key]

    def scrub(self, text: str) -> str:
        """``text`` through the redaction choke point (:func:`cresowlve_core.secrets.scrub`) with
        this run's key variables."""
        return scrub(text, self._secrets)

    _safe = scrub


class _GroupWriter:
    """One thread that writes and fsyncs a run's records off the event loop, in submission order.

    Everything queued while the previous write was under way, or within :attr:`GROUP_WINDOW_S` of
    the first record of a write, goes out in one write and one fsync per file; :meth:`hurry` (a
    caller is waiting for a queued record) ends the window at once. Each record's future is
    resolved only after its fsync. The thread exits when idle.
    """

    IDLE_S = 1.0
    #: how long the thread waits after a write's first record for others, unless hurried. A stage
    #: waits on a record's write only when its next record is ready first (``map_with_resume``
    #: takes the next unit meanwhile), and then hurries the writer; so slow calls share few, large
    #: writes, and fast ones (a cache, a quick local server) are not held back by the window. Each
    #: write costs a thread wake-up, an fsync and a wake-up of the loop, about 0.3-0.45 ms of CPU:
    #: at 330 records/s a 5 ms window spent 0.15-0.18 ms of CPU per record on writing, 50 ms
    #: 0.04-0.06 ms.
    GROUP_WINDOW_S = 0.05

    def __init__(self, write: Callable[[str, list[str]], None]) -> None:
        self._write = write
        self._queue: queue.SimpleQueue[tuple[str, str, asyncio.AbstractEventLoop, asyncio.Future[None]]] = \
            queue.SimpleQueue()
        self._guard = threading.Lock()
        self._hurried = threading.Event()
        self._thread: threading.Thread | None = None

    def hurry(self) -> None:
        """End the current group window now (see the class docstring)."""
        self._hurried.set()

    def submit(self, filename: str, line: str) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._guard:
            self._queue.put((filename, line, loop, fut))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rundir-writer", daemon=True)
                self._thread.start()
        return fut

    def _run(self) -> None:
        while True:
            try:
                batch = [self._queue.get(timeout=self.IDLE_S)]
            except queue.Empty:
                with self._guard:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            self._hurried.wait(self.GROUP_WINDOW_S)  # more records join this write, unless one is awaited
            self._hurried.clear()
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            by_file: dict[str, list[tuple[str, str, asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}
            for item in batch:
                by_file.setdefault(item[0], []).append(item)
            for filename, items in by_file.items():
                error: BaseException | None = None
                try:
                    self._write(filename, [line for _, line, _, _ in items])
                except BaseException as exc:  # handed to every waiting caller
                    error = exc
                by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
                for _, _, loop, fut in items:
                    by_loop.setdefault(loop, []).append(fut)
                for loop, futs in by_loop.items():  # one wake-up of each loop per write, not one per record
                    try:
                        loop.call_soon_threadsafe(_settle, futs, error)
                    except RuntimeError:  # the loop is closed (the run was interrupted)
                        pass


def _settle(futs: list[asyncio.Future[None]], error: BaseException | None) -> None:
    """Resolve the futures of records written together, in submission order."""
    for fut in futs:
        if fut.done():
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)


def _close_descriptors(files: dict[str, tuple[int, int, int]]) -> None:
    """Close the descriptors a collected :class:`RunDir` left open."""
    for fd, _, _ in files.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    files.clear()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every record of a run's JSONL file in file order, without opening the run for writing.

    Lines are split on ``"\\n"`` only (:mod:`cresowlve_core.jsonl`). A torn last line is skipped
    (and repaired on the next append); any other unparseable line, or a line that is not a JSON
    object, is a :class:`RunDirError` naming the file and line.
    """
    return jsonl.read_jsonl(path, torn_tail_ok=True, missing_ok=True, error=RunDirError)
