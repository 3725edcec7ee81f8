"""How much the run directory's per-record fsync costs the event loop.

Runs ``map_with_resume`` over N trivial units (each awaits LATENCY seconds, then returns a
1.5 KB record) at concurrency C, with a heartbeat task measuring how late the event loop wakes
it. Every record is appended and fsynced as in a real stage. Prints the wall time against the
ideal (N / C x LATENCY) and the loop's lag percentiles.

    .venv/bin/python bench/rundir_writes.py [--n 4000] [--concurrency 64] [--latency 0.05] [--dir PATH]

Measured on 2 shared cores, ext4 on a virtual disk (fsync about 5 ms): 4,000 units, C=64, 50 ms:
fsync on the event loop (before) 16.7-24.5 s, 0.13-0.19 of ideal, loop lag p50 114-321 ms;
on the run directory's writer thread with group commit (now) 3.8 s, 0.81-0.82 of ideal, loop lag
p50 0.7-1.0 ms, p99 9 ms. With each worker taking its next unit while its last record is written
(2026-12-06, interleaved with the tree before, load average 2.2): 0.90-0.91 -> 0.96-0.97 of ideal.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

from cresowlve_core.runtime import RunDir, map_with_resume


async def bench(n: int, concurrency: int, latency: float, directory: str | None) -> str:
    async def call(u: str, prev: Any) -> dict[str, Any]:
        await asyncio.sleep(latency)
        return {"key": u, "status": "ok", "text": "x" * 1500}

    lags: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - t - 0.005)

    hb = asyncio.ensure_future(heartbeat())
    run = RunDir(tempfile.mkdtemp(dir=directory))
    t = time.perf_counter()
    await map_with_resume(run, "out.jsonl", [f"u{i}" for i in range(n)], key=lambda u: u, call=call,
                          concurrency=concurrency, progress=False)
    wall = time.perf_counter() - t
    done.set()
    await hb
    lags.sort()
    ideal = n / concurrency * latency
    return (f"{n} units, C={concurrency}, {latency * 1000:.0f} ms: wall {wall:.2f} s (ideal {ideal:.2f} s, "
            f"{ideal / wall:.2f} of ideal); loop lag p50 {lags[len(lags) // 2] * 1000:.1f} ms, "
            f"p99 {lags[int(len(lags) * 0.99)] * 1000:.1f} ms, max {lags[-1] * 1000:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--dir", default=None, help="where the run directory goes (default: the temp dir)")
    a = ap.parse_args()
    print(asyncio.run(bench(a.n, a.concurrency, a.latency, a.dir)))


if __name__ == "__main__":
    main()
