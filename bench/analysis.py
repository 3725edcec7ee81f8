"""Benchmark the analysis stage on a paper-scale synthetic run set.

    .venv/bin/python bench/analysis.py [--items 2061] [--configs 18] [--out DIR] [--reuse]

Generates ``configs × 2`` synthetic run directories (``n_items`` records each; 74,196 records
by default) in a temporary directory (or ``--out``; with ``--reuse`` the runs already written
there by an earlier call with the same sizes are used again), then times:

1. generation (``write_synthetic_runs``),
2. loading (``load_runs`` in this process),
3. notebook execution (papermill with the reports' engine, ``notebooks/03_analysis.ipynb`` with
   default parameters),
4. HTML rendering (``cresowlve_core.notebooks.render_html``).

Each step prints its wall time and its CPU time (user + system, this process and the kernel it
waited for), and the load average when the step ended: the machine may be shared, and CPU time
is what load distorts least. Targets, both printed and both required (exit 1 if one is missed):
36 runs (18 configurations) execute + render under 15 s, 360 runs (180 configurations) under
60 s with an HTML page under 8 MB. Other sizes are measured against the 360-run targets.
The synthetic runs are never results; they are removed unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: configurations -> (execute + render limit in s, HTML limit in MB or None)
TARGETS: dict[int, tuple[float, float | None]] = {18: (15.0, None), 180: (60.0, 8.0)}


def _cpu() -> float:
    """User + system CPU seconds of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _reusable(runs_dir: Path, configs: int, n_items: int) -> list[Path] | None:
    """The run directories of an earlier call with these sizes, or None."""
    dirs = sorted(p for p in runs_dir.glob("*") if (p / "responses.jsonl").exists())
    if len(dirs) != 2 * configs:
        return None
    with (dirs[0] / "responses.jsonl").open(encoding="utf-8") as fh:
        lines = sum(1 for _ in fh)
    return dirs if lines == n_items else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2061)
    ap.add_argument("--configs", type=int, default=18)
    ap.add_argument("--out", type=Path, default=None, help="keep runs and report here")
    ap.add_argument("--reuse", action="store_true", help="use the runs an earlier call wrote in --out")
    args = ap.parse_args()
    if args.reuse and args.out is None:
        ap.error("--reuse needs --out")

    import papermill as pm

    from cresowlve_core.analysis import load_runs, write_synthetic_runs
    from cresowlve_core.notebook_progress import render_progress
    from cresowlve_core.notebooks import render_html
    from cresowlve_core.paths import NOTEBOOKS_DIR

    work = args.out or Path(tempfile.mkdtemp(prefix="cresowlve-bench-"))
    runs_dir, reports = work / "runs", work / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    timings: dict[str, tuple[float, float, float]] = {}

    def step(name: str, t: float, c: float) -> None:
        timings[name] = (time.perf_counter() - t, _cpu() - c, os.getloadavg()[0])

    t, c = time.perf_counter(), _cpu()
    dirs = _reusable(runs_dir, args.configs, args.items) if args.reuse else None
    if dirs is None:
        shutil.rmtree(runs_dir, ignore_errors=True)
        dirs = write_synthetic_runs(runs_dir, n_items=args.items, configs=args.configs, seed=0)
        step("generate", t, c)

    t, c = time.perf_counter(), _cpu()
    rs = load_runs(str(runs_dir / "*"))
    step("load", t, c)

    out_nb = reports / "03_analysis.ipynb"
    t, c = time.perf_counter(), _cpu()
    with render_progress("03_analysis", None) as engine:  # the papermill engine every report runs with
        pm.execute_notebook(
            str(NOTEBOOKS_DIR / "03_analysis.ipynb"),
            str(out_nb),
            parameters={"runs": str(runs_dir / "*"), "export_dir": str(reports)},
            cwd=str(NOTEBOOKS_DIR),
            kernel_name="python3",
            progress_bar=False,
            **engine,
        )
    step("notebook execute", t, c)

    t, c = time.perf_counter(), _cpu()
    html = render_html(out_nb, reports / "03_analysis.html")
    step("HTML render", t, c)

    wall = timings["notebook execute"][0] + timings["HTML render"][0]
    cpu = timings["notebook execute"][1] + timings["HTML render"][1]
    size_mb = html.stat().st_size / 1e6
    limit_s, limit_mb = TARGETS.get(args.configs, TARGETS[180])
    print(
        f"runs: {len(dirs)} dirs, {len(rs.responses):,} records ({args.configs} configs x 2 langs x {args.items} items)"
    )
    print(f"  {'step':<18} {'wall s':>8} {'CPU s':>8} {'load':>6}")
    for name, (sec, cpu_s, load) in timings.items():
        print(f"  {name:<18} {sec:8.2f} {cpu_s:8.2f} {load:6.1f}")
    time_ok = wall < limit_s
    size_ok = limit_mb is None or size_mb < limit_mb
    print(f"  {'execute + render':<18} {wall:8.2f} {cpu:8.2f}         "
          f"(target < {limit_s:.0f} s wall: {'OK' if time_ok else 'MISSED'})")
    size_target = f"(target < {limit_mb:.0f} MB: {'OK' if size_ok else 'MISSED'})" if limit_mb else "(no size target)"
    print(f"  {'HTML size':<18} {size_mb:8.2f} MB {size_target}")
    print(f"  .ipynb size        {out_nb.stat().st_size / 1e6:8.2f} MB")
    if args.out is not None:
        print(f"kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if not (time_ok and size_ok):
        print(f"incomplete: target missed at {args.configs} configurations (load average {os.getloadavg()[0]:.1f})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
