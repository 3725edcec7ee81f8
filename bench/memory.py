"""Peak memory of a judged ``cresowlve eval``, fresh and resumed, against the run's size.

    .venv/bin/python bench/memory.py                        # 5,000 and 20,000 items (a few minutes)
    .venv/bin/python bench/memory.py --sizes 61830 --phases fresh resume   # the target itself (~10 min)

Each size is one judged run (``--judge-model``, nonce-verdict protocol, ``--no-cache``) of N
synthetic items into a fresh temporary run directory, then two resumes of it: one with nothing
left to do, and one after the judge's fields were stripped from every record's last line
(``judge_status: not_run``), so the resume re-judges every answer from the stored records. The
endpoint is an asyncio HTTP server in this process (no latency): the answerer gets a ~600-character
reasoning with an ``<Answer>`` tag, the judge a ~300-character reasoning and the verdict line with
the request's nonce. Peak RSS is the child's own ``ru_maxrss`` (``os.wait4``), and KiB per item is
the slope between the smallest and the largest size; the intercept is what the run costs at no items.

Target: a 61,830-item judged run peaks under 400 MiB, on resume too. The machine is shared, so the
load average is printed; RSS depends on load far less than time does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_ITEMS, TARGET_MIB = 61830, 400
PHASES = ("fresh", "resume", "rejudge")
NONCE = re.compile(rb"VERDICT-([A-Za-z0-9]+):")
REASONING = ("Let me think about this step by step. The question plays on a double meaning, and the clue in the "
             "second sentence narrows it to one object that the story's hero could have seen from the deck. ") * 3


def _reply(text: str, n_in: int, n_out: int) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "model": "bench-model",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": n_in, "completion_tokens": n_out,
                                 "total_tokens": n_in + n_out}}).encode()


ANSWER = _reply(REASONING + "\n<Answer>Venus</Answer>", 180, 140)


def judge_reply(nonce: bytes) -> bytes:
    text = ("The candidate answer names the same planet as the reference, in other words, and the accepted "
            "alternatives do not change that. Nothing in it contradicts the explanation. ") * 2
    return _reply(text + f"\nVERDICT-{nonce.decode()}: CORRECT", 420, 70)


async def _serve(ready: threading.Event, port: list[int]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                i = head.lower().find(b"content-length:")
                n = int(head[i + 15:head.index(b"\r\n", i)]) if i >= 0 else 0
                body = await reader.readexactly(n) if n else b""
                m = NONCE.search(body)
                out = judge_reply(m.group(1)) if m else ANSWER
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % len(out) + out)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port.append(server.sockets[0].getsockname()[1])
    ready.set()
    async with server:
        await server.serve_forever()


def start_endpoint() -> str:
    ready, port = threading.Event(), []
    threading.Thread(target=lambda: asyncio.run(_serve(ready, port)), daemon=True).start()
    ready.wait(10)
    return f"http://127.0.0.1:{port[0]}/v1"


def write_items(path: Path, n: int) -> Path:
    """N items shaped like the benchmark's: a question of a few sentences, an explanation, annotations."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({
                "id": f"chgk_{i:010x}", "difficulty": i % 5 + 1, "reasoning_type": "creative",
                "knowledge_domains": ["astronomy", "history"], "creative_domains": ["wordplay"],
                "cultures": ["western"], "atomic_facts": ["Venus is the second planet.", "It is seen at dawn."],
                "en": {"question": f"Puzzle {i}: " + "A sailor looked up before dawn and saw it shining. " * 5
                       + "Which planet?", "answer": "Venus", "other_answers": "the Morning Star",
                       "explanation": "The morning star is Venus, visible before sunrise. " * 3},
            }) + "\n")
    return path


def run_eval(items: Path, run_dir: Path, url: str, env: dict[str, str]) -> tuple[int, float, float]:
    """One ``cresowlve eval`` in a child process: (exit code, peak RSS in MiB, wall seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "cresowlve_core.cli", "eval", "--items", str(items),
                             "--model", "bench-model", "--base-url", url, "--judge-model", "bench-judge",
                             "--run-dir", str(run_dir), "--concurrency", "64", "--no-cache"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        print("   " + (err.decode(errors="replace").strip().splitlines() or [""])[-1], flush=True)
    return proc.returncode, usage.ru_maxrss / 1024, time.monotonic() - t0


def unjudge(run_dir: Path) -> None:
    """Rewrite the run's records with the judge's fields cleared, so that a resume judges them all again."""
    path = run_dir / "responses.jsonl"
    latest = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            latest[(rec["id"], rec["lang"])] = rec
    with path.open("w", encoding="utf-8") as f:
        for rec in latest.values():
            rec.update(judge_status="not_run", judge_verdict=None, judge_raw=None, judge_model=None,
                       judge_usage=None, judge_cost=None, judge_outcome=None)
            rec["scores"]["judge"] = None
            f.write(json.dumps(rec) + "\n")


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000], help="item counts (default: 5000 20000)")
    ap.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES), help="default: all three")
    a = ap.parse_args()
    url = start_endpoint()
    print(f"judged cresowlve eval, peak RSS of the child ({load()})")
    print(f"{'N':>7} {'phase':>10} {'MiB':>8} {'wall s':>7} {'disk KiB/item':>13} exit", flush=True)
    peaks: dict[str, dict[int, float]] = {}
    ok = True
    with tempfile.TemporaryDirectory(prefix="cresowlve-mem-") as tmp:
        env = {**os.environ, "CRESOWLVE_CACHE_DIR": f"{tmp}/cache", "CRESOWLVE_DATA_DIR": f"{tmp}/data",
               "CRESOWLVE_REPORTS_DIR": f"{tmp}/reports", "PYTHONPATH": str(REPO)}
        for n in a.sizes:
            items = write_items(Path(tmp) / f"items-{n}.jsonl", n)
            run_dir = Path(tmp) / f"run-{n}"
            for phase in a.phases:
                if phase == "rejudge":
                    unjudge(run_dir)
                rc, mib, wall = run_eval(items, run_dir, url, env)
                size = (run_dir / "responses.jsonl").stat().st_size / 1024 / n
                peaks.setdefault(phase, {})[n] = mib
                above = n >= TARGET_ITEMS and mib >= TARGET_MIB
                ok &= rc == 0 and not above
                print(f"{n:>7} {phase:>10} {mib:>8.1f} {wall:>7.1f} {size:>13.2f} {rc}"
                      f"{f'  ABOVE {TARGET_MIB} MiB' if above else ''}", flush=True)
            summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
            if summary["n_judged"] != n:  # every answer judged, whatever the phases
                print(f"   the summary counts {summary['n_judged']} judged of {n}")
                ok = False
    if len(a.sizes) >= 2:
        lo, hi = min(a.sizes), max(a.sizes)
        for phase, by_n in peaks.items():
            slope = (by_n[hi] - by_n[lo]) / (hi - lo)
            at_target = by_n[lo] + slope * (TARGET_ITEMS - lo)
            passed = at_target < TARGET_MIB
            ok &= passed
            print(f"{phase:>10}: {slope * 1024:.2f} KiB per item, {by_n[lo] - slope * lo:.0f} MiB at none; "
                  f"{TARGET_ITEMS:,} items: {at_target:.0f} MiB (target < {TARGET_MIB}){'' if passed else '  ABOVE'}")
    print(f"({load()})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
