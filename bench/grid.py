"""Wall time of ``cresowlve grid`` against its ideal, with ``--workers 1`` and ``--workers 2``.

    .venv/bin/python bench/grid.py                       # the paper's shape: 36 cells x 2,061 items, judge on
    .venv/bin/python bench/grid.py --items 200           # the same grid on 200 items (about 10x shorter)

The grid has the paper config's shape (``configs/paper_table1.yaml``: 18 configurations x 2
languages, ``parallel: 3``, ``concurrency: 16``, a judge), every cell against ``bench/throughput.py``'s
asyncio endpoint at ``--latency`` (default 50 ms), the cache off so every call is sent. Each cell's
slot sends the answer and then the verdict, so the ideal wall time is ``requests x latency /
(parallel x concurrency)``; the ratio printed is ideal / measured (target with 2 workers on 2 cores:
>= 0.85). ``start s`` is the time from the command's start to its first request (the interpreter, the
imports, the workers' start), ``end s`` from its last request to its exit. CPU time is the command's and its workers' (user + system), which a busy machine distorts
much less than wall time: the load average is printed beside each run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from throughput import REPO, arrivals, endpoint, load  # noqa: E402

PARALLEL, CONCURRENCY, N_CONFIGS = 3, 16, 18


def write_items(path: Path, n: int) -> str:
    from cresowlve_core.items import Item, ItemView

    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            view = ItemView(question=f"Puzzle {i}: which planet?", answer="Venus")
            f.write(json.dumps(Item(id=f"chgk_{i:010x}", en=view, ru=view).model_dump()) + "\n")
    return str(path)


def write_grid(tmp: Path, base_url: str, n_items: int, workers: int) -> Path:
    cfg = {"name": f"bench-w{workers}", "items": write_items(tmp / "items.jsonl", n_items), "langs": ["en", "ru"],
           "parallel": PARALLEL, "runs_dir": str(tmp / f"runs-w{workers}"), "report": False,
           "options": {"concurrency": CONCURRENCY, "max_tokens": 64, "cache": False},
           "judge": {"model": "bench-judge"},
           "models": [{"model": f"bench-model-{i}", "base_url": base_url} for i in range(N_CONFIGS)]}
    path = tmp / f"grid-w{workers}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run(base_url: str, n_items: int, workers: int, latency: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        config = write_grid(tmp, base_url, n_items, workers)
        env = {**os.environ, "PYTHONPATH": str(REPO), "CRESOWLVE_CACHE_DIR": str(tmp / "cache")}
        arrivals(base_url)  # forget earlier requests
        before, t0, load_before = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic(), os.getloadavg()[0]
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", str(config), "--workers", str(workers)],
                              cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"grid --workers {workers} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
        times = arrivals(base_url)
        n = len(times)
    ideal = n * latency / (PARALLEL * CONCURRENCY)
    # (the endpoint's clock is this machine's monotonic clock: the first request's time after the start
    # is what starting the command and its workers costs, and the time after the last one what ending does)
    start, end = times[0] - t0, t0 + wall - times[-1]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"workers": workers, "requests": n, "wall": wall, "ideal": ideal, "ratio": ideal / wall, "cpu": cpu,
            "start": start, "end": end, "load_before": load_before, "load_after": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=2061, help="items per cell (default: 2,061, the paper's)")
    ap.add_argument("--latency", type=float, default=0.05, help="endpoint latency in seconds (default: 0.05)")
    ap.add_argument("--workers", default="1,2", help="comma-separated --workers values to run (default: 1,2)")
    a = ap.parse_args()
    print(f"grid: {N_CONFIGS * 2} cells x {a.items} items, judge on, parallel {PARALLEL} x concurrency {CONCURRENCY}, "
          f"{a.latency * 1000:.0f} ms; {os.cpu_count()} cores; {load()}")
    print(f"{'workers':>7} {'requests':>9} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'cpu s':>7} "
          f"{'cpu ms/req':>10} {'start s':>7} {'end s':>6} {'load':>10}")
    with endpoint(a.latency) as url:
        for w in (int(x) for x in a.workers.split(",")):
            r = run(url, a.items, w, a.latency)
            print(f"{w:>7} {r['requests']:>9} {r['wall']:>8.1f} {r['ideal']:>8.1f} {r['ratio']:>6.2f} {r['cpu']:>7.1f} "
                  f"{r['cpu'] / r['requests'] * 1000:>10.2f} {r['start']:>7.1f} {r['end']:>6.1f} "
                  f"{r['load_before']:>4.1f}->{r['load_after']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
