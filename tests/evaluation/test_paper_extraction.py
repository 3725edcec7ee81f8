"""The paper's answer extraction (``extract_prediction`` of mismayil/cresowlve, evaluate_lm.py):
strict exact match and the paper judge read the paper's prediction, not ours.

The oracle below is written from the rule's statement alone (a spec oracle, not the released
code): the output stripped; scanning left to right, an ``<Answer>`` (any case) opens, the next
``</Answer>`` after it closes (an inner ``<Answer>`` is content), a ``</Answer>`` with nothing open
is ignored; the prediction is the last closed content, stripped. With no closed pair: the text
after the first ``<Answer>``, stripped. With no ``<Answer>`` at all: the whole stripped output.
"""

import random
import re

import pytest

from cresowlve_core.evaluation.metrics import Reference, formula_scores
from cresowlve_core.evaluation.paper_extraction import paper_extract_prediction
from cresowlve_core.evaluation.scoring import judge_prediction
from cresowlve_core.evaluation.solve import extract_answer

_TAG = re.compile(r"(</?answer>)", re.I)


def spec_oracle(output: str | None) -> str:
    text = (output or "").strip()
    closed: list[str] = []
    current: list[str] | None = None
    first_open_at: int | None = None
    pieces = _TAG.split(text)
    for i, piece in enumerate(pieces):
        tag = piece.lower()
        if tag == "<answer>":
            if first_open_at is None:
                first_open_at = i
            if current is None:
                current = []
                continue
        if tag == "</answer>" and current is not None:
            closed.append("".join(current))
            current = None
            continue
        if current is not None:
            current.append(piece)
    if closed:
        return closed[-1].strip()
    if first_open_at is not None:
        return "".join(pieces[first_open_at + 1:]).strip()
    return text


HAND = [
    ("Reasoning...\n<Answer>Copernicus</Answer>", "Copernicus"),
    ("<Answer>Venus</Answer> no wait <Answer> Copernicus </Answer>", "Copernicus"),
    ("<answer>x</ANSWER>", "x"),
    # a closed pair wins over a later unclosed tag (ours reads the unclosed one)
    ("<Answer>A</Answer> then more <Answer>B", "A"),
    ("Рассуждение <Answer>  Коперник\nи Галилей", "Коперник\nи Галилей"),
    ("Step 1...\nAnswer: The band Europe", "Step 1...\nAnswer: The band Europe"),
    ("Рассуждение...\nОтвет: Мелодия", "Рассуждение...\nОтвет: Мелодия"),
    ("**Final answer:** Copernicus", "**Final answer:** Copernicus"),
    ("<Answer>**Copernicus**</Answer>", "**Copernicus**"),
    ("<Answer>a <Answer>b</Answer>", "a <Answer>b"),
    ("<Answer><Answer>a</Answer>b</Answer>", "<Answer>a"),
    ("<Answer></Answer>", ""),
    ("<Answer>...</Answer>", "..."),
    ("<Answer>x</Answer", "x</Answer"),
    ("<Answer >x</Answer>", "<Answer >x</Answer>"),
    ("<Answer>a <Answer>b", "a <Answer>b"),
    ("</Answer> stray <Answer>z</Answer>", "z"),
    ("   ", ""),
    ("", ""),
    (None, ""),
]


@pytest.mark.parametrize("output,expected", HAND)
def test_hand_written_cases(output, expected):
    assert paper_extract_prediction(output) == expected
    assert spec_oracle(output) == expected


_REASON = ["Let me think step by step.", "The question mentions a famous astronomer.",
           "Вопрос о знаменитом астрономе.", "Подумаем: «он» — это Коперник?", "Hmm.\n\nFirst, 1) …",
           "**Key idea:** the sun, not the earth.", "Ёлка и дрозофила — оба ответа?"]
_ANSWERS = ["Copernicus", "Коперник", "Nicolaus Copernicus.", "Росянка и дрозофила", "the band «Europe»",
            "Ёж", "A / B", "…", ""]
_WRAPS = [
    "<Answer>{a}</Answer>", "<answer>{a}</answer>", "<ANSWER> {a} </ANSWER>", "<Answer>**{a}**</Answer>",
    "<Answer>{a}", "<Answer>\n{a}\n", "Answer: {a}", "Ответ: {a}", "**Answer:** {a}", "Final answer: {a}",
    "{a}", "<Answer>x <Answer>{a}</Answer>", "<Answer><Answer>{a}</Answer></Answer>", "<Answer>{a}</Answer",
    "</Answer>{a}", "<Answer >{a}</Answer>", "<Answer>{a}</Answer>\n\nAnswer: {a}!",
]


def generated_outputs(n: int, seed: int = 25) -> list[str]:
    """Realistic raw outputs: reasoning in En/Ru, one to three answer attempts in any of the forms
    models write (tags closed or not, nested, answer lines, markdown), sometimes multiline."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [rng.choice(_REASON) for _ in range(rng.randint(0, 3))]
        for _ in range(rng.randint(1, 3)):
            parts.append(rng.choice(_WRAPS).format(a=rng.choice(_ANSWERS)))
            if rng.random() < 0.3:
                parts.append(rng.choice(_REASON))
        sep = rng.choice(["\n", " ", "\n\n", "\r\n"])
        out.append(rng.choice(["", "  ", "\n"]) + sep.join(parts) + rng.choice(["", "\n", "  "]))
    return out


def test_generated_outputs_match_the_spec_oracle():
    outputs = generated_outputs(300)
    assert len(set(outputs)) >= 200
    mismatches = [o for o in outputs if paper_extract_prediction(o) != spec_oracle(o)]
    assert mismatches == []
    # the generator does exercise the cases where the paper's rule and ours part ways
    ours = [extract_answer(o)[0] for o in outputs]
    differs = sum(a != paper_extract_prediction(o) for a, o in zip(ours, outputs, strict=True))
    assert differs >= 50


def test_long_output_is_linear():
    # many unclosed tags and no closing one: one scan, not one scan per tag
    text = "<Answer>" * 100_000 + "x"
    assert paper_extract_prediction(text) == text[len("<Answer>"):]


def test_strict_exact_match_reads_the_papers_prediction():
    ref = Reference("Copernicus")
    # (raw output, strict under the paper's extraction, lenient under ours)
    cases = [("Answer: Copernicus", False, True), ("<Answer>**Copernicus**</Answer>", False, True),
             ("<Answer>Copernicus</Answer> then <Answer>Kepler", True, False),
             ("<Answer> Copernicus. </Answer>", True, True)]
    for raw, strict, lenient in cases:
        scores = formula_scores(raw, extract_answer(raw)[0], ref)
        assert (scores["em_strict"], scores["em_lenient"]) == (strict, lenient), raw
    # a base model's continuation: the paper's rule reads its first line, the completion's answer
    assert formula_scores("Copernicus\nQ: next", "Copernicus", ref, fewshot=True)["em_strict"] is True


def test_paper_judge_is_shown_the_papers_prediction():
    rec = {"raw_output": "Thinking.\n**Answer:** Copernicus", "prediction": "Copernicus"}
    assert judge_prediction(rec, "paper") == "Thinking.\n**Answer:** Copernicus"
    assert judge_prediction(rec, "nonce-verdict") == "Copernicus"
    assert judge_prediction({"raw_output": "Copernicus\nQ:", "prediction": "Copernicus"}, "fewshot-yes-no") == "Copernicus"
