"""Benchmark the analysis stage on a paper-scale synthetic run set.

    .venv/bin/python bench/analysis.py [--items 2061] [--configs 18] [--out DIR]

Generates ``configs × 2`` synthetic run directories (``n_items`` records each; 74,196 records
by default) in a temporary directory (or ``--out``), then times:

1. generation (``write_synthetic_runs``),
2. loading (``load_runs`` in this process),
3. notebook execution (papermill, ``notebooks/03_analysis.ipynb`` with default parameters),
4. HTML rendering (``cresowlve_core.notebooks.render_html``).

Target: notebook execute + HTML render under 60 s on the 2-core machine. Exits 1 if missed.
The synthetic runs are never results; they are removed unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET_S = 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2061)
    ap.add_argument("--configs", type=int, default=18)
    ap.add_argument("--out", type=Path, default=None, help="keep runs and report here")
    args = ap.parse_args()

    import papermill as pm

    from cresowlve_core.analysis import load_runs, write_synthetic_runs
    from cresowlve_core.notebooks import render_html
    from cresowlve_core.paths import NOTEBOOKS_DIR

    work = args.out or Path(tempfile.mkdtemp(prefix="cresowlve-bench-"))
    runs_dir, reports = work / "runs", work / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    timings: dict[str, float] = {}
    t = time.perf_counter()
    dirs = write_synthetic_runs(runs_dir, n_items=args.items, configs=args.configs, seed=0)
    timings["generate"] = time.perf_counter() - t

    t = time.perf_counter()
    rs = load_runs(str(runs_dir / "*"))
    timings["load"] = time.perf_counter() - t

    out_nb = reports / "03_analysis.ipynb"
    t = time.perf_counter()
    pm.execute_notebook(
        str(NOTEBOOKS_DIR / "03_analysis.ipynb"),
        str(out_nb),
        parameters={"runs": str(runs_dir / "*"), "export_dir": str(reports)},
        cwd=str(NOTEBOOKS_DIR),
        kernel_name="python3",
        progress_bar=False,
    )
    timings["notebook execute"] = time.perf_counter() - t

    t = time.perf_counter()
    html = render_html(out_nb, reports / "03_analysis.html")
    timings["HTML render"] = time.perf_counter() - t

    total = timings.get("notebook execute", 0.0) + timings.get("HTML render", 0.0)
    print(
        f"runs: {len(dirs)} dirs, {len(rs.responses):,} records ({args.configs} configs x 2 langs x {args.items} items)"
    )
    for name, sec in timings.items():
        print(f"  {name:<18} {sec:7.2f} s")
    verdict = "OK" if total < TARGET_S else "MISSED"
    print(f"  {'execute + render':<18} {total:7.2f} s  (target < {TARGET_S:.0f} s: {verdict})")
    print(f"  HTML size          {html.stat().st_size / 1e6:7.2f} MB")
    if args.out is not None:
        print(f"kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if total < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
