"""Where the project keeps things, resolved from the *current project*, lazily.

The project root is the nearest directory, from the working directory upwards, whose
``pyproject.toml`` names ``cresowlve-core``; outside any checkout it is the repository the package
was installed from. So a second clone sharing one editable venv reads and writes its own
``data/`` and ``reports/``, not the first clone's.

Every location is computed when asked for, so environment variables set later (by tests, by
:func:`cresowlve_core.notebooks.run_notebook` for its kernel) take effect:

=========================  ==========================================  =======================
what                       default                                     override
=========================  ==========================================  =======================
user data (runs, cache)    ``<project>/data``                          ``CRESOWLVE_DATA_DIR``
run directories            ``<data>/runs``                             (follows the data dir)
response/embedding cache   ``<data>/cache``                            ``CRESOWLVE_CACHE_DIR``
reports                    ``<project>/reports``                       ``CRESOWLVE_REPORTS_DIR``
=========================  ==========================================  =======================

*Shipped* inputs (ChGK packs, demo items, the paper's Table 1, CREATE queries, the KG subset) are
read with :func:`shipped_data`: from the user data dir when a file of that name is there, else from
the project's ``data/``, else from the package's own checkout. They are never written.

``from cresowlve_core.paths import DATA_DIR`` still works (module attributes are computed on
access), but it freezes the value at import time: new code should call the functions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE_REPO = PACKAGE_DIR.parent
"""The checkout the package is installed from (editable installs); git provenance is read here."""
REPO_ROOT = PACKAGE_REPO  # kept for existing imports: the package's checkout, not the current project

PROJECT_NAME = "cresowlve-core"
_NAME_RE = re.compile(r'^\s*name\s*=\s*["\']' + re.escape(PROJECT_NAME) + r'["\']', re.M)


def _names_project(pyproject: Path) -> bool:
    try:
        return bool(_NAME_RE.search(pyproject.read_text(encoding="utf-8")))
    except OSError:
        return False


def project_root(start: str | Path | None = None) -> Path:
    """The nearest directory from ``start`` (default: the working directory) upwards whose
    ``pyproject.toml`` names ``cresowlve-core``; else the package's own checkout."""
    try:
        here = Path(start) if start is not None else Path.cwd()
    except OSError:  # the working directory was deleted
        return PACKAGE_REPO
    here = here.resolve()
    for d in (here, *here.parents):
        if _names_project(d / "pyproject.toml"):
            return d
    return PACKAGE_REPO


def _env_path(var: str) -> Path | None:
    value = os.environ.get(var)
    return Path(value).expanduser() if value else None


def data_dir() -> Path:
    """The user's data directory: ``CRESOWLVE_DATA_DIR`` or ``<project>/data``."""
    return _env_path("CRESOWLVE_DATA_DIR") or project_root() / "data"


def runs_dir() -> Path:
    """Default parent of run directories: ``<data>/runs``."""
    return data_dir() / "runs"


def cache_dir() -> Path:
    """The response and embedding cache: ``CRESOWLVE_CACHE_DIR`` or ``<data>/cache``."""
    return _env_path("CRESOWLVE_CACHE_DIR") or data_dir() / "cache"


def reports_dir() -> Path:
    """Where reports are written: ``CRESOWLVE_REPORTS_DIR`` or ``<project>/reports``."""
    return _env_path("CRESOWLVE_REPORTS_DIR") or project_root() / "reports"


def notebooks_dir() -> Path:
    """The notebook templates: ``<project>/notebooks`` when it has any, else the package's."""
    local = project_root() / "notebooks"
    return local if any(local.glob("*.ipynb")) else PACKAGE_REPO / "notebooks"


def shipped_data(*parts: str) -> Path:
    """A shipped input under ``data/`` (e.g. ``shipped_data("chgk")``): the user data dir's copy
    if present, else the project's, else the package checkout's (returned even if missing, so
    errors name where the file should be)."""
    rel = Path(*parts)
    candidates = [data_dir() / rel, project_root() / "data" / rel, PACKAGE_REPO / "data" / rel]
    for c in candidates:
        if c.exists():
            return c
    return candidates[-1]


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (what a run records of a file it read: an items file,
    a hub snapshot's data file)."""
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


_LAZY = {
    "DATA_DIR": data_dir,
    "RUNS_DIR": runs_dir,
    "CACHE_DIR": cache_dir,
    "REPORTS_DIR": reports_dir,
    "NOTEBOOKS_DIR": notebooks_dir,
    "PROJECT_ROOT": project_root,
}


def __getattr__(name: str) -> Path:
    """``paths.DATA_DIR`` and friends, computed on access (see the module docstring)."""
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
