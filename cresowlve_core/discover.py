"""What exists: the newest build, error-analysis output and evaluation runs, for the apps' defaults.

The review app (``notebooks/review.py``), the annotation app (``notebooks/annotate_errors.py``)
and the explorer (``notebooks/explore.py``, ``notebooks/explore.ipynb``) start on what the
project's own commands wrote, newest first, and say where they looked when nothing is there:

==================  ===================================================  ==============================
default of          the newest of                                        written by
==================  ===================================================  ==============================
review app          ``<data>/builds/*/build.json``                       ``cresowlve build``, the main job
annotation app      ``annotations/sample.jsonl`` under ``<data>/errors``  ``cresowlve errors report``,
                    and ``<data>/runs/errors``                           the main job (04)
explorer labels     ``labels/*/labels.jsonl`` under the same two         ``cresowlve errors label``,
                                                                         the main job (04)
explorer runs       evaluation runs under ``<data>/runs`` (not           ``cresowlve eval``, ``grid``,
                    archived, not synthetic): their folder, as a glob    the main job (02)
==================  ===================================================  ==============================

"Newest" is by modification time. Everything resolves from the current project
(:mod:`cresowlve_core.paths`), so a second clone finds its own files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cresowlve_core import paths

SAMPLE = "sample.jsonl"
LABELS = "labels.jsonl"


@dataclass(frozen=True)
class Found:
    """The newest match of ``what`` (``path`` None when nothing is there) and where it was sought."""

    what: str
    path: Path | None
    looked: tuple[str, ...]

    def __bool__(self) -> bool:
        return self.path is not None

    def where(self) -> str:
        """The places sought, each as code (a glob's ``**`` is never read as emphasis)."""
        return ", ".join(f"`{p}`" for p in self.looked)

    def nothing(self) -> str:
        """One sentence for the app when nothing is found."""
        return f"no {self.what} found (looked for {self.where()})"


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return float("-inf")


def _newest(files: Iterable[Path]) -> Path | None:
    found = sorted(set(files), key=lambda p: (_mtime(p), str(p)))
    return found[-1] if found else None


def error_dirs() -> list[Path]:
    """Where error-analysis output lives: ``cresowlve errors``'s default ``--out-dir``
    (``<data>/errors``) and the main job's ``<data>/runs/errors/<model>``."""
    return [paths.data_dir() / "errors", paths.runs_dir() / "errors"]


def newest_build() -> Found:
    """The newest build directory (one holding ``build.json``) under ``<data>/builds``."""
    root = paths.data_dir() / "builds"
    hit = _newest(root.glob("*/build.json"))
    return Found("build", hit.parent if hit else None, (str(root / "*" / "build.json"),))


def newest_error_sample() -> Found:
    """The newest annotation sample (``annotations/sample.jsonl``) of an error analysis."""
    roots = error_dirs()
    hit = _newest(f for r in roots for f in r.rglob(f"annotations/{SAMPLE}"))
    return Found("annotation sample", hit, tuple(str(r / "**" / "annotations" / SAMPLE) for r in roots))


def error_label_dirs() -> list[Path]:
    """Every error-analysis output folder (``OUT_DIR``, holding ``labels/<labeller>/labels.jsonl``),
    the one whose labels were written last first."""
    files = sorted({f for r in error_dirs() for f in r.rglob(f"labels/*/{LABELS}")},
                   key=lambda p: (_mtime(p), str(p)), reverse=True)
    return list(dict.fromkeys(f.parents[2] for f in files))


def newest_error_labels() -> Found:
    """The error-analysis output folder whose labels were written last."""
    dirs = error_label_dirs()
    return Found("error labels", dirs[0] if dirs else None,
                 tuple(str(r / "**" / "labels" / "*" / LABELS) for r in error_dirs()))


def _synthetic(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("synthetic"))
    except (OSError, ValueError, AttributeError):
        return False


def newest_runs() -> Found:
    """The folder of the newest evaluation run under ``<data>/runs`` (archived and synthetic runs
    left out), as a glob over its runs: the main job's ``demo/*``, a grid's cells, or the runs
    ``cresowlve eval`` writes by default. ``path`` is that glob."""
    from cresowlve_core.evaluation.listing import find_runs

    root = paths.runs_dir()
    runs = [d for d in find_runs() if not _synthetic(d)]
    hit = max(runs, key=lambda d: (_run_mtime(d), str(d)), default=None)
    return Found("evaluation runs", hit.parent / "*" if hit else None,
                 (str(root / "**" / "manifest.json") + " (evaluation runs; not archive/, not synthetic)",))


def _run_mtime(d: Path) -> float:
    return max(_mtime(d / name) for name in ("manifest.json", "responses.jsonl", "summary.json"))
