"""Where a result came from: the time, the code's git SHA and the versions of key packages."""

from __future__ import annotations

import functools
import subprocess
import time
from datetime import UTC, datetime
from importlib import metadata

from cresowlve_core.paths import REPO_ROOT

TRACKED_PACKAGES = ("cresowlve-core", "openai", "pydantic", "pandas", "numpy", "scipy", "altair", "xllamacpp", "torch")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


#: how old a read of the checkout's state :func:`git_sha` gives as it is (a grid worker reads it in
#: a thread just before each cell starts, so that its event loop never waits on git)
GIT_SHA_FRESH_S = 5.0

_last_read: list[tuple[float, str | None]] = []  # (time.monotonic() of the read, its value)


def git_sha() -> str | None:
    """HEAD of the checkout the code runs from, ``-dirty`` when tracked files changed: as
    :func:`read_git_sha` read it at most :data:`GIT_SHA_FRESH_S` ago, else read now (the checkout
    may change while a process runs, so a read is not kept longer)."""
    last = _last_read[-1] if _last_read else None
    if last is not None and time.monotonic() - last[0] <= GIT_SHA_FRESH_S:
        return last[1]
    return read_git_sha()


def read_git_sha() -> str | None:
    """Read HEAD and the dirty flag now (two ``git`` processes) for :func:`git_sha`; safe in a thread."""
    at = time.monotonic()
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=5, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5)
        value: str | None = out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        value = None
    _last_read[:] = [(at, value)]  # (one replacement: a reader in another thread sees the old read or this one)
    return value


def package_versions() -> dict[str, str]:
    """The installed versions of :data:`TRACKED_PACKAGES`, read once per process (each read parses the
    package's whole METADATA file: about 50 ms for the nine, which every cell of a grid paid)."""
    return dict(_package_versions())


@functools.cache
def _package_versions() -> dict[str, str]:
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
