"""Time bounds for the parsers that run on model output (on the event loop, so they must be linear).

    .venv/bin/python bench/parsers.py [--bound 0.25]

Each row feeds one adversarial output (the shapes that stalled a run before: 40,000 blank lines,
8,000 unclosed ``<answer>`` tags, a verdict followed by 100,000 spaces, a 2 MB answer, ...) to
``extract_answer`` or ``parse_verdict`` and prints the best of three wall times. Exits 1 if any
row exceeds the bound (default 0.25 s per call; linear code takes milliseconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cresowlve_core.evaluation.scoring import parse_verdict  # noqa: E402
from cresowlve_core.evaluation.solve import extract_answer  # noqa: E402

NONCE = "a1b2c3"

CASES: list[tuple[str, Callable[[str], object], str]] = [
    ("extract_answer: 40,000 blank lines", extract_answer, "I think\n" + "\n" * 40_000 + "Copernicus"),
    ("extract_answer: 40,000 whitespace lines", extract_answer, " \t \n" * 40_000 + "x"),
    ("extract_answer: 8,000 unclosed <answer> tags", extract_answer, "<answer>" * 8_000 + " Venus"),
    ("extract_answer: 8,000 unclosed tags with text", extract_answer, "<answer>x " * 8_000),
    ("extract_answer: 20,000 closed tags", extract_answer, "<Answer>a</Answer>\n" * 20_000),
    ("extract_answer: answer line + 100,000 spaces", extract_answer, "Answer: Europe" + " " * 100_000),
    ("extract_answer: 2 MB of words", extract_answer, "word " * 400_000),
    ("parse_verdict: verdict + 100,000 spaces", lambda t: parse_verdict(t, NONCE),
     f"VERDICT-{NONCE}: CORRECT" + " " * 100_000),
    ("parse_verdict: 100,000 spaces after the prefix", lambda t: parse_verdict(t, NONCE),
     f"VERDICT-{NONCE}" + " " * 100_000 + "x"),
    ("parse_verdict: 100,000 spaces after the colon", lambda t: parse_verdict(t, NONCE),
     f"VERDICT-{NONCE}:" + " " * 100_000),
    ("parse_verdict: 20,000 verdict prefixes", lambda t: parse_verdict(t, NONCE), f"VERDICT-{NONCE}: " * 20_000),
    ("parse_verdict: 2 MB of words", lambda t: parse_verdict(t, NONCE), "word " * 400_000),
]


def best_of(fn: Callable[[str], object], text: str, repeat: int = 3) -> float:
    """The shortest of ``repeat`` wall times of ``fn(text)``, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run only cases whose name contains this text")
    ap.add_argument("--bound", type=float, default=0.25, help="seconds allowed per call (default: 0.25)")
    a = ap.parse_args()
    failed = 0
    print(f"{'case':<50} {'chars':>10} {'seconds':>9}  bound {a.bound}s")
    cases = [c for c in CASES if a.only in c[0]]
    for name, fn, text in cases:
        s = best_of(fn, text)
        over = s > a.bound
        failed += over
        print(f"{name:<50} {len(text):>10,} {s:>9.4f}{'  OVER' if over else ''}", flush=True)
    print(f"{len(cases) - failed}/{len(cases)} within {a.bound}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
