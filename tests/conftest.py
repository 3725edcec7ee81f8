"""Shared test setup.

* ``tests/`` is on sys.path (for ``fakeserver``).
* Tests never touch the checkout's ``data/`` or ``reports/``:

  - at import (before any ``cresowlve_core`` module freezes a path) the process-wide
    ``CRESOWLVE_DATA_DIR``, ``CRESOWLVE_CACHE_DIR`` and ``CRESOWLVE_REPORTS_DIR`` point into one
    session temporary directory; notebook kernels (nbval, papermill) inherit them;
  - every test then gets its own fresh data, cache and reports directories (autouse fixture
    :func:`isolated_dirs`);
  - a temporary data dir links the *shipped* inputs (packs, demo items, KG, CREATE data) read-only
    from the checkout, and holds the runs and cache a test writes;
  - the session fails if the checkout's ``data/`` or ``reports/`` changed between its start and
    its end (files added, removed or modified), naming what changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))

GUARDED = ("data", "reports")
_OUTPUT_NAMES = {"runs", "cache", "hub"}  # user output under data/: never linked into a test's data dir


def _shipped_names() -> set[str] | None:
    """Top-level names under data/ that git tracks (the shipped inputs), or None without git."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "data"], cwd=REPO, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return {line.split("/")[1] for line in out.stdout.splitlines() if line.count("/") >= 1}


_SHIPPED = _shipped_names()


def seed_data_dir(target: Path) -> Path:
    """A data dir holding links to the checkout's shipped inputs only: never a user's output
    (runs, cache, builds, ...), so nothing a test writes can land in the checkout through a link."""
    target.mkdir(parents=True, exist_ok=True)
    for child in sorted((REPO / "data").iterdir()):
        link = target / child.name
        shipped = child.name in _SHIPPED if _SHIPPED is not None else child.name not in _OUTPUT_NAMES
        if shipped and not link.exists():
            link.symlink_to(child, target_is_directory=child.is_dir())
    return target


def _point_env_at(root: Path, env: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    values = {
        "CRESOWLVE_DATA_DIR": str(seed_data_dir(root / "data")),
        "CRESOWLVE_CACHE_DIR": str(root / "cache"),
        "CRESOWLVE_REPORTS_DIR": str(root / "reports"),
    }
    if env is not None:
        env.update(values)
    return values


_SESSION_ROOT = Path(tempfile.mkdtemp(prefix="cresowlve-tests-"))
_point_env_at(_SESSION_ROOT, os.environ)


def fingerprint(root: Path = REPO, dirs: tuple[str, ...] = GUARDED) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``dirs`` (symlinks by target, not followed)."""
    out: dict[str, str] = {}
    for name in dirs:
        base = root / name
        if not base.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            # an editor's state beside the user's files (JupyterLab open on reports/ during a test run)
            dirnames[:] = sorted(d for d in dirnames if d != ".ipynb_checkpoints")
            for f in sorted(filenames):
                p = Path(dirpath) / f
                rel = str(p.relative_to(root))
                try:
                    if p.is_symlink():
                        out[rel] = "link:" + os.readlink(p)
                    else:
                        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
                except OSError as exc:  # vanished mid-walk: report it as changed
                    out[rel] = f"unreadable: {exc}"
            for d in dirnames:  # empty directories count too (e.g. a created data/runs/notebook/)
                p = Path(dirpath) / d
                if not any(p.iterdir()):
                    out[str(p.relative_to(root)) + "/"] = "dir"
    return out


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or modified between two fingerprints."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = fingerprint()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    changed = changed_paths(before, fingerprint())
    if changed:
        shown = "\n  ".join(changed[:20]) + (f"\n  ... and {len(changed) - 20} more" if len(changed) > 20 else "")
        msg = (f"\nFAILED: the test session changed the checkout's {' or '.join(d + '/' for d in GUARDED)} "
               f"({len(changed)} paths):\n  {shown}\n")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(msg, red=True, bold=True)
        else:
            print(msg, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    shutil.rmtree(_SESSION_ROOT, ignore_errors=True)


_BEFORE = pytest.StashKey[dict]()


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory, monkeypatch) -> dict[str, Path]:
    """Fresh data (with the shipped inputs linked), cache and reports directories for every test."""
    root = tmp_path_factory.mktemp("cresowlve")
    values = _point_env_at(root)
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return {"data": Path(values["CRESOWLVE_DATA_DIR"]), "cache": Path(values["CRESOWLVE_CACHE_DIR"]),
            "reports": Path(values["CRESOWLVE_REPORTS_DIR"])}


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """Point the response/embedding cache at a fresh directory for one test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(cache))
    return cache
