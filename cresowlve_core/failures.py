"""The project's exception types: one base, :class:`CresowlveError`, that carries its exit code.

Every exception the project raises on purpose derives from one of the three families below, and the
CLI exits with ``exc.exit_code`` after one ``error:`` line. Any other exception that reaches the CLI
(a ``KeyError``, a bare ``ValueError`` from a bug) is a bug: its traceback is shown and the exit code
is 1. A stdlib-only leaf, so that every layer (the llm layer included) can raise these.
"""

from __future__ import annotations

import errno
import os
from typing import Any, ClassVar

EXIT_OK = 0  # every unit done
EXIT_INCOMPLETE = 1  # the run finished, but some units errored or were not run
EXIT_USAGE = 2  # refused before any work: bad argument, items file, run directory, configuration
EXIT_STOPPED = 3  # stopped early: fatal provider error, --max-cost, a full disk; finished work kept

#: the errno values of a write that failed because the disk is full or failing
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO)
#: the errno values of a write the system refused: the file or its directory is not writable (its
#: permissions changed, or its file system was made read-only, after the run began)
WRITE_DENIED_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


class CresowlveError(Exception):
    """The base of every project exception.

    ``exit_code`` None marks an internal signal (a transport failure classified inside the llm
    layer, a unit's record carried to the runtime): it is always caught inside the project, so
    one that reaches the CLI is a bug and is shown with its traceback."""

    exit_code: ClassVar[int | None] = None


class UsageError(CresowlveError):
    """Refused before any request: a bad argument, an unreadable input file, an unusable run
    directory, a configuration that does not match (exit 2)."""

    exit_code: ClassVar[int | None] = EXIT_USAGE


class StoppedError(CresowlveError):
    """Stopped early: a fatal provider error, a budget reached, a full disk; finished work is
    kept and a re-run resumes (exit 3)."""

    exit_code: ClassVar[int | None] = EXIT_STOPPED


class IncompleteError(CresowlveError):
    """The command ran but did not produce all it should (exit 1)."""

    exit_code: ClassVar[int | None] = EXIT_INCOMPLETE


class DiskFull(StoppedError, OSError):
    """A write failed because the disk is full (or failing): the run stops, finished work is kept.

    An ``OSError`` too (same ``errno``, ``strerror`` and ``filename``), so code that handles a
    failed write as an ``OSError`` still does."""

    def __str__(self) -> str:
        what = "disk full" if self.errno in (errno.ENOSPC, errno.EDQUOT) else "disk error"
        where = f" writing {self.filename}" if self.filename else ""
        return f"{what}{where} ({self.strerror}); finished work is kept, free space and run again"


class WriteDenied(StoppedError, OSError):
    """A write the system refused (permission denied, a read-only file system): the run stops,
    finished work is kept. An ``OSError`` too, like :class:`DiskFull`."""

    def __str__(self) -> str:
        where = f" {self.filename}" if self.filename else ""
        return f"cannot write{where} ({self.strerror}); finished work is kept, make it writable and run again"


def failed_write(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """The exception to raise for ``exc``, a failed write of ``path``: :class:`DiskFull` (caused by
    ``exc``) when the disk is full or failing, :class:`WriteDenied` (caused by ``exc``) when the
    system refused the write, else ``exc`` itself; each names ``path`` when ``exc`` named no file
    (a failed ``write()`` or ``fsync()`` names none)."""
    if exc.filename is None:
        exc.filename = os.fspath(path)
    if isinstance(exc, (DiskFull, WriteDenied)):
        return exc
    kind: type[OSError]
    if exc.errno in DISK_FULL_ERRNOS:
        kind = DiskFull
    elif exc.errno in WRITE_DENIED_ERRNOS:
        kind = WriteDenied
    else:
        return exc
    stop = kind(exc.errno, exc.strerror or os.strerror(exc.errno or 0), exc.filename)
    stop.__cause__ = exc
    return stop


class InputError(UsageError, ValueError):
    """An input that cannot be used: a file's content, an argument's or a configuration's value; the
    message names the input and says why."""


class MissingInput(UsageError, FileNotFoundError):
    """An input file, folder or run directory that does not exist (or is not what was asked for)."""


#: how much of an error's first line a summary keeps: enough for the client's prefix ("model 'm' at URL:
#: gave up after 6 attempts; last error: ...") and the provider's own message after it
ERROR_CHARS = 300


def error_line(error: object) -> str:
    """The first line of an error as a summary keeps it (:data:`ERROR_CHARS`)."""
    text = str(error)
    return text.splitlines()[0][:ERROR_CHARS] if text.strip() else "error"


def validation_problems(exc: Any, whole: str = "value") -> str:
    """A pydantic ``ValidationError`` as one line: ``field.path: message`` for each problem, joined by
    ``; `` (``whole`` names a problem of the value as a whole)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors())
