"""Throughput of LLMClient against the fake server, and the speed of a fully cached re-run.

    .venv/bin/python bench/throughput.py [--latency 0.2] [--in-process]

Part 1: after one untimed warm-up wave (connections open), N requests with server latency L
at concurrency C ∈ {1, 16, 64} (see ``RUNS``); prints requests/s, the ratio to the ideal C/L
(target ≥ 0.9 at C=64 with 1,280 requests) and client CPU per request. Short runs pay a start-up and tail cost
of roughly one extra wave, so the sustained rate shows in the long C=64 row. The server runs in a separate
process by default so that its threads do not compete with the client for the GIL.

Part 2: 2,061 distinct prompts, cache pre-filled by a real pass through the client; then
the timed re-run through ``LLMClient.complete``; prints seconds and how many requests the
server saw (targets: < 5 s, 0 requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fakeserver import FakeServer  # noqa: E402

from cresowlve_core.llm import Endpoint, GenParams, LLMClient, ResponseCache  # noqa: E402

N_CACHED = 2061
# (concurrency, requests): a short C=1 check, then 16 and 64 in flight; 1,280 at C=64 is the
# case of record (20 waves; target >= 0.9 of C/L); the last row is one full pass over the
# 2,061-item benchmark, the size that matters for an evaluation run.
RUNS = ((1, 20), (16, 256), (64, 256), (64, 1280), (64, 2061))


@contextmanager
def server(latency: float, in_process: bool) -> Iterator[str]:
    """A fake server's base URL, in this process or a child process."""
    if in_process:
        with FakeServer(latency_s=latency) as srv:
            yield srv.base_url
        return
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fakeserver.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("READY "):
            raise RuntimeError(f"fake server did not start: {line!r}")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


def server_total(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stats") as r:
        return int(json.load(r)["total"])


async def run_batch(client: LLMClient, prompts: list[str], pv: str, *, warmup: int = 0) -> tuple[float, float]:
    """Send all prompts at once (the client's semaphore bounds concurrency).

    ``warmup`` untimed requests go first so that connections are open (steady state).
    Returns (wall seconds, client CPU seconds) of the timed part.
    """
    def ask(p: str, version: str) -> Any:
        return client.complete([{"role": "user", "content": p}], GenParams(), prompt_version=version)

    async with client:
        await asyncio.gather(*(ask(f"warm-up {i}", pv + "-warmup") for i in range(warmup)))
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(ask(p, pv) for p in prompts))
        return time.perf_counter() - t0, time.process_time() - c0


def throughput(latency: float, in_process: bool) -> None:
    print(f"\nThroughput, server latency {latency * 1000:.0f} ms (after one untimed warm-up wave)")
    print(f"{'C':>4} {'N':>5} {'seconds':>8} {'req/s':>8} {'ideal':>8} {'ratio':>6} {'cpu ms/req':>11}")
    with server(latency, in_process) as url:
        ep = Endpoint(url, "bench-model")
        for c, n in RUNS:
            client = LLMClient(ep, concurrency=c)
            secs, cpu = asyncio.run(run_batch(client, [f"c{c} n{n} prompt {i}" for i in range(n)], f"tp-{c}-{n}", warmup=c))
            rps, ideal = n / secs, c / latency
            print(f"{c:>4} {n:>5} {secs:>8.2f} {rps:>8.1f} {ideal:>8.1f} {rps / ideal:>6.2f} {cpu / n * 1000:>11.2f}")


def cached_rerun(in_process: bool) -> None:
    prompts = [f"distinct prompt number {i}" for i in range(N_CACHED)]
    with tempfile.TemporaryDirectory() as tmp, server(0.0, in_process) as url:
        ep = Endpoint(url, "bench-model")
        cache = ResponseCache(Path(tmp) / "responses.sqlite")
        fill, _ = asyncio.run(run_batch(LLMClient(ep, concurrency=64, cache=cache), prompts, pv="cached"))
        before = server_total(url)
        secs, _ = asyncio.run(run_batch(LLMClient(ep, concurrency=64, cache=cache), prompts, pv="cached"))
        seen = server_total(url) - before
        print(f"\nCached re-run of {N_CACHED} distinct prompts (cache filled in {fill:.2f} s, "
              f"{cache.stats()['entries']} entries)")
        print(f"  re-run: {secs:.2f} s, requests seen by the server: {seen}  (targets: < 5 s, 0)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--in-process", action="store_true", help="run the fake server in this process")
    args = ap.parse_args()
    throughput(args.latency, args.in_process)
    cached_rerun(args.in_process)


if __name__ == "__main__":
    main()
