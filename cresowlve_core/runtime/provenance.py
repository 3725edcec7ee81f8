"""Where a result came from: the time, the code's git SHA and the versions of key packages."""

from __future__ import annotations

import functools
import subprocess
from datetime import UTC, datetime
from importlib import metadata

from cresowlve_core.paths import REPO_ROOT

TRACKED_PACKAGES = ("cresowlve-core", "openai", "pydantic", "pandas", "numpy", "scipy", "altair", "xllamacpp", "torch")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def git_sha() -> str | None:
    """HEAD of the checkout the code runs from, ``-dirty`` when tracked files changed."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=5, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


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
