"""Fault figures: ``cresowlve eval`` against tests/fakeserver.py with injected faults.

    .venv/bin/python bench/faults.py            # the scenarios in SCENARIOS (a few minutes)
    .venv/bin/python bench/faults.py --quick    # 300 items per scenario

Each scenario evaluates N distinct items with the real command line (``python -m
cresowlve_core.cli eval``, a separate process) against a fake server that answers a fraction
``rate`` of all requests with a fault drawn (seeded) from :data:`FAULT_KINDS`. A ``kill -9``
scenario SIGKILLs the first process once ~40% of the items are recorded, then resumes. Every
scenario re-runs the same command (a resume) while it exits non-zero, at most ``MAX_PASSES``
times, as a user would.

Hostile scenarios (``HOSTILE``, on raw asyncio sockets from ``tests/hostile.py``) replace the
fake server with one that misbehaves at the connection level:

* ``html502``: the first 8 answers are nginx's HTML "502 Bad Gateway" page (a gateway whose
  backend restarts), then normal answers;
* ``accept-close``: for 20 s from the first connection every connection is accepted and closed
  at once (longer than the breaker's 10 s window: the first pass stops with exit 3, a resume
  after the outage finishes);
* ``desync``: every 7th answer is followed at once by an extra answer nobody asked for
  (``Answer999999``) on the same keep-alive connection. (An extra answer that arrives while the
  next request is already in flight on that connection cannot be told from its answer by
  HTTP/1.1 framing, by any client; see docs/llm.md.)
* ``full-cache``: the fake server without faults, and the response cache's SQLite file capped a
  few pages above its size (``PRAGMA max_page_count``), so SQLite reports the database full after
  some entries: the run goes on uncached (one WARNING), nothing is lost or re-sent.

Printed per scenario:

* ``lost``: items without an ``ok`` record at the end;
* ``duplicated``: ``ok`` records beyond one per item in ``responses.jsonl``;
* ``re-sent``: model answers the server delivered successfully beyond one per item (a paid
  answer that was asked for again, e.g. lost in flight at a ``kill -9``; the response cache
  normally serves those on resume, hence the ``--no-cache`` rows);
* ``misattributed``: ``ok`` records whose answer belongs to another item;
* ``requests``, ``faults`` (server side), ``passes`` (exit code of every run; ``-9`` = killed),
  wall seconds.

Exits 1 if any scenario lost, duplicated or misattributed an item.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fakeserver import FakeServer  # noqa: E402
from hostile import Conn, HostileServer, chat_body, http_response, prompt_of  # noqa: E402

from cresowlve_core.items import Item, ItemView  # noqa: E402

#: 429/503 carry Retry-After: 0; "garbage" is a 200 with a non-JSON body; "disconnect" closes the socket.
FAULT_KINDS = ("429", "500", "503", "408", "garbage", "disconnect")
MAX_PASSES = 6
LATENCY_S = 0.02
_PUZZLE = re.compile(r"Puzzle number (\d+):")


@dataclass(frozen=True)
class Scenario:
    n_items: int
    rate: float
    concurrency: int
    kill: bool = False
    cache: bool = True
    hostile: str | None = None  # a HOSTILE mode instead of the fake server's faults


SCENARIOS = [
    Scenario(1000, 0.2, 16),
    Scenario(1000, 0.5, 16),
    Scenario(2000, 0.2, 64),
    Scenario(2000, 0.5, 64),
    Scenario(1000, 0.2, 16, kill=True),
    Scenario(1000, 0.2, 16, kill=True, cache=False),
    Scenario(2000, 0.5, 64, kill=True, cache=False),
    Scenario(40, 0.0, 8, hostile="html502"),
    Scenario(300, 0.0, 16, hostile="accept-close"),
    Scenario(1000, 0.0, 16, hostile="desync"),
    Scenario(300, 0.0, 16, hostile="full-cache"),
]
HOSTILE = ("html502", "accept-close", "desync", "full-cache")
#: runs the CLI with the response cache's SQLite file capped a few pages above its size at open
#: (PRAGMA max_page_count): after some entries SQLite itself reports SQLITE_FULL, as on a full disk
FULL_CACHE_LAUNCHER = """
import runpy, sqlite3, sys
real = sqlite3.connect
def connect(*args, **kwargs):
    conn = real(*args, **kwargs)
    if str(args[0] if args else kwargs.get("database", "")).endswith("responses.sqlite"):
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 6}")
    return conn
sqlite3.connect = connect
sys.argv[0] = "cresowlve"
runpy.run_module("cresowlve_core.cli", run_name="__main__")
"""
NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway"
             b"</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n")


class HostilePlan:
    """The handler of a hostile scenario; counts requests per prompt, answers and faults."""

    def __init__(self, mode: str):
        self.mode = mode
        self.started = time.monotonic()
        self.by_prompt: Counter[str] = Counter()
        self.faulted: Counter[str] = Counter()
        self.total = 0
        self.connections = 0

    async def __call__(self, conn: Conn) -> None:
        self.connections += 1
        if self.connections == 1:
            self.started = time.monotonic()  # the outage starts with the first connection
        if self.mode == "accept-close" and time.monotonic() - self.started < 20:
            conn.close()
            return
        while (req := await conn.request()) is not None:
            prompt = prompt_of(req)
            self.total += 1
            self.by_prompt[prompt] += 1
            await asyncio.sleep(LATENCY_S)
            m = _PUZZLE.search(prompt)
            answer = http_response(chat_body(f"Thinking...\n<Answer>Answer{m.group(1) if m else '?'}</Answer>"))
            if self.mode == "html502" and self.total <= 8:
                self.faulted[prompt] += 1
                await conn.write(b"HTTP/1.1 502 Bad Gateway\r\nServer: nginx/1.24.0\r\nContent-Type: text/html\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(NGINX_502) + NGINX_502)
                continue
            if self.mode == "desync" and self.total % 7 == 0:
                answer += http_response(chat_body("<Answer>Answer999999</Answer>"))
            await conn.write(answer)


class FaultPlan:
    """Chooses each request's fault with a seeded RNG and counts faults per prompt."""

    def __init__(self, rate: float, seed: int = 0):
        self.rate = rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.faulted: Counter[str] = Counter()

    def __call__(self, req) -> str | None:
        with self._lock:
            if self._rng.random() >= self.rate:
                return None
            self.faulted[req.prompt] += 1
            return self._rng.choice(FAULT_KINDS)


def answer_for(req) -> str:
    m = _PUZZLE.search(req.prompt)
    return f"Thinking...\n<Answer>Answer{m.group(1) if m else '?'}</Answer>"


def write_items(path: Path, n: int) -> Path:
    lines = (json.dumps(Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle number {i}: who is X?",
                                                                answer=f"Answer{i}")).model_dump())
             for i in range(n))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _ok_counts(run_dir: Path) -> tuple[Counter[str], int]:
    """``ok`` records per item id, and how many ``ok`` records hold another item's answer."""
    path = run_dir / "responses.jsonl"
    counts: Counter[str] = Counter()
    misattributed = 0
    if not path.exists():
        return counts, 0
    for line in path.read_bytes().split(b"\n"):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line from the kill; the runtime moves it aside on resume
        if rec.get("status") == "ok":
            counts[rec["id"]] += 1
            misattributed += rec.get("prediction") != f"Answer{int(rec['id'].removeprefix('chgk_'), 16)}"
    return counts, misattributed


def _n_lines(run_dir: Path) -> int:
    path = run_dir / "responses.jsonl"
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def run_scenario(sc: Scenario, work: Path) -> dict[str, object]:
    """Run one scenario in ``work`` and return its row."""
    work.mkdir(parents=True, exist_ok=True)
    items = write_items(work / "items.jsonl", sc.n_items)
    run_dir = work / "run"
    env = {**os.environ, "CRESOWLVE_CACHE_DIR": str(work / "cache"), "CRESOWLVE_DATA_DIR": str(work / "data"),
           "CRESOWLVE_REPORTS_DIR": str(work / "reports")}
    connection_level = sc.hostile in ("html502", "accept-close", "desync")
    plan: FaultPlan | HostilePlan = HostilePlan(sc.hostile) if connection_level and sc.hostile else FaultPlan(sc.rate)
    passes: list[int] = []
    t0 = time.monotonic()
    server = (HostileServer(plan) if isinstance(plan, HostilePlan)
              else FakeServer(answers=answer_for, faults=plan, latency_s=LATENCY_S))
    with server as srv:
        base_url = srv.url if isinstance(srv, HostileServer) else srv.base_url
        launcher = ["-c", FULL_CACHE_LAUNCHER] if sc.hostile == "full-cache" else ["-m", "cresowlve_core.cli"]
        cmd = [sys.executable, *launcher, "eval", "--items", str(items), "--model", "fake-model",
               "--base-url", base_url, "--run-dir", str(run_dir), "--concurrency", str(sc.concurrency),
               "--max-tokens", "32", *([] if sc.cache else ["--no-cache"])]
        if sc.kill:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while proc.poll() is None and _n_lines(run_dir) < 0.4 * sc.n_items:
                time.sleep(0.02)
            proc.kill()  # SIGKILL: no cleanup of any kind
            proc.wait()
            passes.append(-9)
        warnings: list[str] = []
        for _ in range(MAX_PASSES):
            done = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            passes.append(done.returncode)
            warnings += [line for line in done.stderr.splitlines() if "cache" in line.lower()]
            if done.returncode == 0:
                break
        source = plan if isinstance(plan, HostilePlan) else srv
        by_prompt = Counter(source.by_prompt)
        total = source.total
    seconds = time.monotonic() - t0
    delivered = {p: by_prompt[p] - plan.faulted[p] for p in by_prompt}
    ok, misattributed = _ok_counts(run_dir)
    return {
        "items": sc.n_items, "fault_rate": sc.rate, "concurrency": sc.concurrency,
        "kill_9": sc.kill, "cache": sc.cache, "hostile": sc.hostile,
        "lost": sc.n_items - len(ok),
        "duplicated": sum(c - 1 for c in ok.values() if c > 1),
        "misattributed": misattributed,
        "re_sent": sum(max(0, d - 1) for d in delivered.values()),
        "requests": total, "faults": sum(plan.faulted.values()),
        "passes": passes, "seconds": round(seconds, 1), "cache_warnings": warnings,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="300 items per fault-rate scenario (default: off)")
    ap.add_argument("--only", choices=("faults", "hostile"), default=None,
                    help="only the fake server's fault scenarios, or only the hostile ones (default: all)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file (default: none)")
    a = ap.parse_args()
    header = (f"{'scenario':<14} {'items':>6} {'fault':>6} {'conc':>5} {'kill-9':>7} {'cache':>6} {'lost':>5} {'dup':>4} "
              f"{'misattr':>8} {'re-sent':>8} {'requests':>9} {'faults':>7} {'seconds':>8}  passes (exit codes)")
    print(f"fault kinds: {', '.join(FAULT_KINDS)}; hostile: {', '.join(HOSTILE)}; server latency {LATENCY_S}s")
    print(header, flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cresowlve-faults-") as tmp:
        for i, sc in enumerate(SCENARIOS):
            if a.only and (a.only == "hostile") != bool(sc.hostile):
                continue
            if a.quick and not sc.hostile:
                sc = Scenario(300, sc.rate, sc.concurrency, sc.kill, sc.cache)
            row = run_scenario(sc, Path(tmp) / f"s{i}")
            rows.append(row)
            print(f"{sc.hostile or 'fault mix':<14} {row['items']:>6} {row['fault_rate']:>6.0%} {row['concurrency']:>5} "
                  f"{'yes' if row['kill_9'] else 'no':>7} {'on' if row['cache'] else 'off':>6} {row['lost']:>5} "
                  f"{row['duplicated']:>4} {row['misattributed']:>8} {row['re_sent']:>8} {row['requests']:>9} "
                  f"{row['faults']:>7} {row['seconds']:>8}  {row['passes']}", flush=True)
            for line in row["cache_warnings"][:1]:
                print(f"{'':<14} {line[max(0, line.find('WARNING')):].strip()[:150]}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    bad = [r for r in rows if r["lost"] or r["duplicated"] or r["misattributed"]]
    print(f"{len(rows) - len(bad)}/{len(rows)} scenarios lost, duplicated and misattributed nothing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
