"""Time bounds for every parser that reads model output (they run on the event loop, so they must be linear).

    .venv/bin/python bench/parsers.py [--bound 0.25] [--only NAME]

Every parser of every stage is fed the same adversarial shapes of about 400 KB (the shapes that
stalled runs before: 400,000 blank lines, 50,000 unclosed ``<answer>`` tags, an answer followed by
400,000 spaces, 200,000 open brackets, the parser's own marker repeated 30,000 times, ...) and the
best of three wall times is printed. Exits 1 if any row exceeds the bound (default 0.25 s per
call; linear code takes milliseconds).

Parsers covered (module: function):

* evaluation/solve: ``extract_answer``; evaluation/scoring: ``parse_verdict``, ``parse_paper_verdict``
* construction/parsers: ``parse_yes_no``, ``parse_translation``, ``parse_label_list``,
  ``parse_reasoning_type``, ``parse_facts``
* error_analysis/label: ``parse_label``
* contamination: quiz ``parse_choice``, perturb ``parse_perturbations``, completion ``parse_continuation``
* synthetic: leap ``extract``, verbalise ``parse_verbalisation``
* create: paths ``parse_answer``, judges ``parse_specificity``, ``parse_factuality``

Not covered: ``construction.review.parse_cultures`` (it reads what a reviewer types in the
annotation form, not model output, and does not run on the event loop).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cresowlve_core.construction.parsers import (  # noqa: E402
    parse_facts,
    parse_label_list,
    parse_reasoning_type,
    parse_translation,
    parse_yes_no,
)
from cresowlve_core.contamination.completion import parse_continuation  # noqa: E402
from cresowlve_core.contamination.perturb import parse_perturbations  # noqa: E402
from cresowlve_core.contamination.quiz import parse_choice  # noqa: E402
from cresowlve_core.create.judges import parse_factuality, parse_specificity  # noqa: E402
from cresowlve_core.create.paths import parse_answer  # noqa: E402
from cresowlve_core.error_analysis.label import parse_label  # noqa: E402
from cresowlve_core.evaluation.scoring import parse_paper_verdict, parse_verdict  # noqa: E402
from cresowlve_core.evaluation.solve import extract_answer  # noqa: E402
from cresowlve_core.synthetic.leap import extract as leap_extract  # noqa: E402
from cresowlve_core.synthetic.verbalise import parse_verbalisation  # noqa: E402

NONCE = "a1b2c3"
SIZE = 400_000  # characters per adversarial input

#: name -> (parser of one text, the markers its format uses: each becomes a repeated-marker input)
PARSERS: dict[str, tuple[Callable[[str], object], list[str]]] = {
    "solve.extract_answer": (extract_answer, ["<answer>", "Answer: ", "<Answer>a</Answer>\n", "**Answer:**"]),
    "scoring.parse_verdict": (lambda t: parse_verdict(t, NONCE), [f"VERDICT-{NONCE}: ", f"VERDICT-{NONCE}"]),
    "scoring.parse_paper_verdict": (parse_paper_verdict, ["Correct ", "Incorrect ", "Verdict: "]),
    "construction.parse_yes_no": (parse_yes_no, ["ANSWER: ", "REASON: ", "**ANSWER**: YES\n"]),
    "construction.parse_translation": (parse_translation, ["QUESTION: ", "ANSWER: ", "COMMENT: ", "ПИТЕР "]),
    "construction.parse_label_list": (lambda t: parse_label_list(t, "LABELS"), ["LABELS: a, ", "LABELS:", ", ;"]),
    "construction.parse_reasoning_type": (parse_reasoning_type, ["TYPE: ", "REASONING_TYPE: ", "factual, "]),
    "construction.parse_facts": (parse_facts, ["1. fact\n", "- ", "* *"]),
    "errors.parse_label": (parse_label, ["CATEGORY: ", "RATIONALE: ", "**Category**: x\n"]),
    "quiz.parse_choice": (parse_choice, ["answer is ", "Option ", "(A", "$\\boxed{\\text{", "<answer>B",
                                           "Answer: B. (C) is "]),
    "perturb.parse_perturbations": (lambda t: parse_perturbations(t, "the original question"),
                                    ["1. ", "Option 2) ", "rewrite 3: x\n"]),
    "completion.parse_continuation": (lambda t: parse_continuation(t, "The prefix of the question"),
                                      ["The prefix of the question ", "..."]),
    "synth.leap.extract": (leap_extract, ["<answer>", "Answer: "]),
    "synth.parse_verbalisation": (lambda t: parse_verbalisation(t, "the prompt"), ["QUESTION: ", "ANSWER: ", "[X]"]),
    "create.parse_answer": (parse_answer, ["<answer>", '{"1": [["a", "r", "b"], ', "[", "```json\n", "// x\n"]),
    "create.parse_specificity": (lambda t: parse_specificity(t, 3), ['"judgment": 1,', '{"judgment": ', "["]),
    "create.parse_factuality": (lambda t: parse_factuality(t, 3), ["hallucinated ", "not hallucinated ",
                                                                   '"judgments": [']),
}


def shapes(markers: list[str]) -> list[tuple[str, str]]:
    """The adversarial inputs for one parser: the common shapes and its repeated markers."""
    common = [
        ("400,000 blank lines", "I think\n" + "\n" * SIZE + "Copernicus"),
        ("100,000 whitespace lines", " \t \n" * (SIZE // 4) + "x"),
        ("400,000 spaces, then a word", " " * SIZE + "x"),
        ("a word, then 400,000 spaces", "Answer: Europe" + " " * SIZE),
        ("80,000 words", "word " * (SIZE // 5)),
        ("50,000 unclosed <answer> tags", "<answer>" * (SIZE // 8) + " Venus"),
        ("200,000 open brackets", "[" * (SIZE // 2)),
        ("100,000 '\"' quotes and commas", '",' * (SIZE // 2)),
    ]
    own = [(f"{SIZE // max(1, len(m)):,} x {m.strip() or repr(m)!s}"[:44], m * (SIZE // max(1, len(m))))
           for m in markers]
    own += [(f"{m.strip()} + 400,000 spaces + x"[:44], m + " " * SIZE + "x") for m in markers]
    return common + own


def best_of(fn: Callable[[str], object], text: str, repeat: int = 3, give_up: float = 5.0) -> float:
    """The shortest of ``repeat`` wall times of ``fn(text)``, in seconds (one run when the
    first exceeds ``give_up``: a quadratic parser can take minutes)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t0)
        if times[-1] > give_up:
            break
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run only parsers whose name contains this text")
    ap.add_argument("--bound", type=float, default=0.25, help="seconds allowed per call (default: 0.25)")
    ap.add_argument("--verbose", action="store_true", help="show each input before it runs (default: off)")
    a = ap.parse_args()
    rows = over = 0
    worst: dict[str, tuple[float, str]] = {}
    print(f"{'parser':<32} {'input':<46} {'chars':>9} {'seconds':>8}  bound {a.bound}s")
    for name, (fn, markers) in PARSERS.items():
        if a.only not in name:
            continue
        for label, text in shapes(markers):
            if a.verbose:
                print(f"{name:<32} {label:<46} ...", end="\r", flush=True)
            s = best_of(fn, text)
            rows += 1
            over += s > a.bound
            if s > worst.get(name, (-1.0, ""))[0]:
                worst[name] = (s, label)
            if s > a.bound or s > 0.05:
                print(f"{name:<32} {label:<46} {len(text):>9,} {s:>8.4f}{'  OVER' if s > a.bound else ''}", flush=True)
    print("\nslowest input per parser:")
    for name, (s, label) in worst.items():
        print(f"  {name:<32} {s:>8.4f} s  ({label})")
    print(f"{rows - over}/{rows} calls within {a.bound}s ({len(worst)} parsers)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
