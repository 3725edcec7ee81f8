"""Scoring a prediction: exact match (strict and lenient) and the LLM judge.

* **strict** is exactly the paper's released metric (:func:`paper_normalize` on both sides, then
  equality with the reference answer alone): lower-case, strip, ``ё→е``; a standalone «и» removed;
  each of ``«»"'“”‘’.,;:!?…—-(){}[]`` replaced by a space; whitespace collapsed. So
  "[Nicolaus] Copernicus." needs "Nicolaus Copernicus", and "Росянка и дрозофила" equals
  "Росянка, дрозофила". Two sides that both normalise to nothing ("И" and "и") match, as in the
  released code (``normalize_string(reference) == normalize_string(prediction)`` in
  mismayil/cresowlve ``src/cresowlve/evaluate_lm.py``).
* **lenient** is our own, richer metric: Unicode NFKC, case-fold, ``ё→е``, every quote form and all
  punctuation to spaces, the «и» rule; it accepts the reference with or without its
  ``[optional]`` parts and every alternative of the zachet (``other_answers``). Alternatives are
  split only where the packs really list them: on ``;``, on `` / `` and on line breaks — never on
  commas ("Кошка, мышка" is one answer) and never inside the reference. A «Незачёт» (not accepted)
  part never accepts. Anything strict accepts, lenient accepts.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from cresowlve_core.llm.base_model import one_line
from cresowlve_core.prompts import Prompt, load_prompt

_QUOTES = "«»“”„‟‘’‚‛\"'`´‹›"
_PUNCT = re.compile(r"[^\w\s]|_", re.U)
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_ALT_SPLIT = re.compile(r";|\n|\s/\s")
_ZACHET_PREFIX = re.compile(r"^\s*(зач[её]т|accepted|also accepted|other answers?)\s*[:.]\s*", re.I)
_NOT_ACCEPTED = re.compile(r"(не\s*зач[её]т|not accepted|do not accept)", re.I)
_SENTENCE_BREAK = re.compile(r"[.!?…]\s+\w")
_STANDALONE_I = re.compile(r"\bи\b")
_PAPER_PUNCT = "«»\"'“”‘’.,;:!?…—-(){}[]"
_PAPER_PUNCT_TO_SPACE = str.maketrans(dict.fromkeys(_PAPER_PUNCT, " "))
_QUOTES_TO_SPACE = str.maketrans(dict.fromkeys(_QUOTES, " "))


#: texts up to this long have their normalisations remembered (:func:`_short_paper_normalize`): a record's
#: reference and prediction are normalised by more than one metric (lenient EM asks strict EM first)
MEMO_CHARS = 200


def paper_normalize(text: str | None) -> str:
    """The paper's released normalisation, step by step in its order."""
    if not text:
        return ""
    return _short_paper_normalize(text) if len(text) <= MEMO_CHARS else _paper_normalize(text)


@functools.lru_cache(maxsize=1024)
def _short_paper_normalize(text: str) -> str:
    return _paper_normalize(text)


def _paper_normalize(text: str) -> str:
    t = text.lower().strip().replace("ё", "е")
    t = _STANDALONE_I.sub(" ", t)
    t = t.translate(_PAPER_PUNCT_TO_SPACE)
    return " ".join(t.split())


def normalize(text: str | None) -> str:
    if not text:
        return ""
    t = unicodedata.normalize("NFKC", text).casefold().replace("ё", "е")
    t = _STANDALONE_I.sub(" ", t)
    t = t.translate(_QUOTES_TO_SPACE)
    t = _PUNCT.sub(" ", t)
    return " ".join(t.split())


def bracket_variants(answer: str) -> set[str]:
    """Every way of reading ``[optional]`` parts: each kept or dropped."""
    parts = _BRACKETS.split(answer)
    # parts alternates: text, bracketed, text, bracketed, ...
    optional = parts[1::2]
    out = set()
    for keep in itertools.product((True, False), repeat=min(len(optional), 6)):
        s = parts[0]
        for i, opt in enumerate(optional):
            s += (opt if (i >= len(keep) or keep[i]) else "") + parts[2 * i + 2]
        out.add(normalize(s))
    return {v for v in out if v}


def split_alternatives(other_answers: str | None, answer: str | None = None) -> list[str]:
    """The accepted alternatives of a zachet.

    Split on ``;``, `` / `` and line breaks; a «Незачёт»/"not accepted" part and everything after
    it is dropped. A part is further split on commas only when it really is a list (translated
    zachets write "Music, score, cacophony."): never when it is a sentence (an inner ``. ``), when
    it restates the reference ``answer`` ("Adieu, Aramis. With a reasonable amount of deviation in
    spelling."), or when a comma item is longer than three words.
    """
    if not other_answers:
        return []
    text = other_answers[:5000]
    cut = _NOT_ACCEPTED.search(text)
    if cut:
        text = text[: cut.start()]
    refs = bracket_variants(answer) if answer else set()
    out: list[str] = []
    for part in _ALT_SPLIT.split(text):
        part = _ZACHET_PREFIX.sub("", part).strip()
        if not normalize(part):
            continue
        out.extend(_comma_items(part, refs))
    return out


def _comma_items(part: str, refs: set[str]) -> list[str]:
    items = [x.strip() for x in part.split(",") if normalize(x)]
    padded = f" {normalize(part)} "
    is_sentence = bool(_SENTENCE_BREAK.search(part.strip().rstrip(".!?…")))
    restates = any(f" {r} " in padded for r in refs)
    if len(items) < 2 or is_sentence or restates or any(len(normalize(x).split()) > 3 for x in items):
        return [part.strip(" ,")]
    return items


def accepted_answers(answer: str, other_answers: str | None = None) -> set[str]:
    """All normalised strings lenient exact match accepts."""
    accepted = bracket_variants(answer)
    for alt in split_alternatives(other_answers, answer):
        accepted |= bracket_variants(alt)
    return accepted


def exact_match(prediction: str | None, answer: str, other_answers: str | None = None) -> bool:
    """Lenient exact match: reference (with or without ``[optional]`` parts) or any zachet alternative."""
    if exact_match_strict(prediction, answer):
        return True
    pred = normalize(prediction)
    return bool(pred) and pred in accepted_answers(answer, other_answers)


def exact_match_strict(prediction: str | None, answer: str) -> bool:
    """The paper's exact match: :func:`paper_normalize` on both sides, equal to the reference only.

    Exactly as the released code compares them, also when both sides normalise to the empty
    string: a prediction "И" for the reference "и", or "—" for "—", is a match there, so here.
    """
    return paper_normalize(prediction) == paper_normalize(answer)


# --------------------------------------------------------------------------- the LLM judge

Verdict = Literal["CORRECT", "INCORRECT"]


JudgeProtocol = Literal["nonce-verdict", "paper"]
#: the protocols a judge call can follow: a configured one, or ``fewshot-yes-no``, which replaces
#: ``nonce-verdict`` when the judge is a base model (llm/base_model.py)
JudgeRule = Literal["nonce-verdict", "paper", "fewshot-yes-no"]
FEWSHOT_PROTOCOL: JudgeRule = "fewshot-yes-no"


def judge_rule(protocol: JudgeProtocol, base_model: bool) -> JudgeRule:
    """The protocol a judge call follows: a base-model judge answers the few-shot yes/no prompt
    instead of writing a nonce verdict line; the paper's protocol stays the paper's."""
    return FEWSHOT_PROTOCOL if base_model and protocol == "nonce-verdict" else protocol


@dataclass(frozen=True)
class JudgeRequest:
    messages: list[dict[str, str]]
    nonce: str
    prompt: Prompt
    protocol: JudgeRule = "nonce-verdict"

    def parse(self, judge_output: str | None, *, cut_off: bool = False) -> Verdict | None:
        """The verdict under this request's protocol, or None (unscored). ``cut_off``: the output ended at
        the judge's token limit; under the paper's protocol it is a verdict only if it is a whole bare
        yes or no (the rest of the reply was never written, so it is no "anything else": unscored)."""
        if self.protocol == "paper":
            if cut_off and paper_normalize(judge_output) not in ("yes", "no"):
                return None
            return parse_paper_verdict(judge_output)
        if self.protocol == FEWSHOT_PROTOCOL:
            return parse_yes_no(judge_output)
        return parse_verdict(judge_output, self.nonce)


#: How each protocol turns a judge's output into a score; written into the run manifest's judge section.
JUDGE_PROTOCOLS: dict[str, dict[str, str]] = {
    "nonce-verdict": {
        "verdict_rule": "the output's VERDICT-<nonce>: CORRECT|INCORRECT line (the word may stand on the "
                        "line after the tag); an echo of the prompt, both verdicts or a wrong nonce are unscored",
        "unparseable_counts_as": "unscored",
    },
    "paper": {
        "verdict_rule": "correct if and only if the judge output, normalised as the paper's exact match "
                        "(lower-case, strip, ё→е, a standalone «и» and punctuation to spaces, whitespace "
                        "collapsed), equals \"yes\"; anything else is incorrect, except a reply cut off at the "
                        "judge's token limit before a bare yes or no (unscored, counted as cut off)",
        "unparseable_counts_as": "wrong",
        "source": "mismayil/cresowlve src/cresowlve/evaluate_lm.py (judge match) and utils.py (normalize_string)",
    },
    FEWSHOT_PROTOCOL: {
        "verdict_rule": "a base-model judge completes the few-shot prompt judge_fewshot ('Same:'); the first word "
                        "of its continuation: yes/да -> CORRECT, no/нет -> INCORRECT, anything else unscored",
        "unparseable_counts_as": "unscored",
    },
}


def judge_prediction(record: dict[str, Any], rule: JudgeRule, *, fewshot: bool = False) -> str:
    """What the judge is shown as the candidate answer of a record: under the paper's protocol the
    paper's extraction of the raw output (as its released judge saw it), otherwise our extraction
    (the record's ``prediction``)."""
    if rule == "paper":
        from cresowlve_core.evaluation.paper_extraction import paper_prediction

        return paper_prediction(record.get("raw_output"), fewshot)
    return record.get("prediction") or ""


def judge_nonce(item_id: str, prediction: str, seed: int) -> str:
    """Deterministic (so the judge call is cacheable) but unknowable to the model under test."""
    return hashlib.sha256(f"{item_id}\x1f{prediction}\x1f{seed}".encode()).hexdigest()[:8].upper()


#: What the judge is shown of a prediction at most: a 2 MB answer must not become a 2 MB request.
JUDGE_PREDICTION_CAP = 4000
#: How much of the judge's output is searched for its verdict (the verdict is its last line).
JUDGE_OUTPUT_CAP = 20_000
#: Text of the judge prompt that a real verdict never contains: an output holding any of it is an
#: echo of the prompt (the embedded base model copies its prompt back) and is unscored.
ECHO_MARKERS = ("<candidate_answer>", "</reference_answer>", "You are grading an answer",
                "followed by a single word")


def judge_request(
    item_id: str,
    question: str,
    answer: str,
    prediction: str,
    *,
    explanation: str | None = None,
    other_answers: str | None = None,
    seed: int = 0,
    protocol: JudgeRule = "nonce-verdict",
) -> JudgeRequest:
    """The judge's messages for one prediction: our nonce-verdict protocol (default), the paper's
    bare yes/no protocol (``protocol="paper"``, prompt ``judge_paper``), or the base-model few-shot
    yes/no (``protocol="fewshot-yes-no"``, prompt ``judge_fewshot``, every field on one line)."""
    nonce = judge_nonce(item_id, prediction, seed)
    if protocol == FEWSHOT_PROTOCOL:
        prompt = load_prompt("judge_fewshot")
        text = prompt.render(answer=one_line(answer, 300), other_answers=one_line(other_answers or "(none)", 300),
                             prediction=one_line(prediction, 300) or "(empty)")
        return JudgeRequest([{"role": "user", "content": text.rstrip()}], nonce, prompt, protocol)
    prompt = load_prompt("judge_paper" if protocol == "paper" else "judge")
    text = prompt.render(
        question=question.strip(),
        answer=answer.strip(),
        other_answers=(other_answers or "(none)").strip(),
        explanation=(explanation or "(none)").strip(),
        prediction=_cap(_defang(prediction.strip())) or "(empty)",
        nonce=nonce,
    )
    return JudgeRequest([{"role": "user", "content": text}], nonce, prompt, protocol)


def _defang(prediction: str) -> str:
    """Stop a prediction from closing the candidate block early."""
    return re.sub(r"</?\s*candidate_answer\s*>", "", prediction, flags=re.I)


def _cap(prediction: str) -> str:
    if len(prediction) <= JUDGE_PREDICTION_CAP:
        return prediction
    return prediction[:JUDGE_PREDICTION_CAP] + f" [… {len(prediction) - JUDGE_PREDICTION_CAP} more characters not shown]"


_YES, _NO = frozenset({"yes", "да"}), frozenset({"no", "нет"})


def parse_yes_no(judge_output: str | None) -> Verdict | None:
    """A base-model judge's verdict: the first word of its continuation, ``yes``/``да`` CORRECT,
    ``no``/``нет`` INCORRECT (case and punctuation ignored); anything else None (unscored).
    Reads the first :data:`~cresowlve_core.llm.base_model.MAX_LINE_CHARS` characters only."""
    from cresowlve_core.llm.base_model import first_line

    words = paper_normalize(first_line(judge_output)).split()
    if not words:
        return None
    return "CORRECT" if words[0] in _YES else "INCORRECT" if words[0] in _NO else None


def parse_paper_verdict(judge_output: str | None) -> Verdict:
    """The paper's judge verdict, exactly as its released code counts it.

    CORRECT if and only if :func:`paper_normalize` of the output is ``"yes"`` ("Yes", "yes.",
    " YES! "); everything else is INCORRECT, never unscored: "Yes, it matches.", "**Yes.**",
    "Да", "Yes/No", "The answer is yes.", "**Answer:** Yes", an empty output or an echo of the
    prompt (the paper counted every such output as wrong). Linear in the output's length.
    """
    return "CORRECT" if paper_normalize(judge_output) == "yes" else "INCORRECT"


def parse_verdict(judge_output: str | None, nonce: str) -> Verdict | None:
    """The judge's ``VERDICT-<nonce>: CORRECT|INCORRECT`` line, or None (= unscored).

    The word may stand on the tag's line or on the line after it (``VERDICT-<nonce>:`` then
    ``CORRECT``), in markdown bold or not.

    Unscored when there is no such line, when the output echoes the prompt (:data:`ECHO_MARKERS`),
    or when it carries both verdicts: two verdict lines, or one that names the other label after its
    word in capitals as the prompt spells them (``VERDICT-<nonce>: CORRECT or INCORRECT``, a judge
    restating the format). The prompt itself never shows a parseable verdict line, so a copied prompt
    cannot vote. Linear in the output's length (capped; no nested quantifiers).
    """
    if not judge_output:
        return None
    text = judge_output.rstrip()[-JUDGE_OUTPUT_CAP:]
    low = text.lower()
    if any(marker.lower() in low for marker in ECHO_MARKERS):
        return None
    # Every match of VERDICT-<nonce><_VERDICT_WORD> (case ignored), left to right, each search going on
    # after the last match, as re.finditer would find them: the tag's patterns are compiled once, not
    # per nonce (each verdict has its own, so re's cache never held them: a compile per judge call).
    found: set[str] = set()
    pos = 0
    one_label_until = 0  # the verdict lines up to here name one label each (a line is searched once)
    while (tag := _VERDICT_TAG.search(text, pos)) is not None:
        after = tag.end() + len(nonce)
        word = _VERDICT_WORD.match(text, after) if _nonce_at(text, tag.end(), nonce) else None
        if word is None:
            pos = tag.start() + 1
            continue
        verdict = _label(word.group(1))
        found.add(verdict)
        pos = word.end()
        if pos >= one_label_until:
            line_end = text.find("\n", pos)
            line_end = len(text) if line_end < 0 else line_end
            if _OTHER_LABEL[verdict].search(text, pos, line_end):  # "CORRECT or INCORRECT": no verdict
                return None
            one_label_until = line_end
    if len(found) != 1:
        return None  # none, or both verdicts
    return found.pop()  # type: ignore[return-value]


_VERDICT_TAG = re.compile("VERDICT-", re.I)
#: the other label, spelt as the prompt spells the labels, on the rest of a verdict's line: the line names
#: both ("CORRECT or INCORRECT", "CORRECT/INCORRECT", the prompt's "CORRECT if ..., INCORRECT if ...")
_OTHER_LABEL = {"CORRECT": re.compile(r"\bINCORRECT\b"), "INCORRECT": re.compile(r"\bCORRECT\b")}
# the word after the tag on its line, or on the next line (one blank line in between at most)
# (every optional part starts with its own character: no two quantifiers compete for a run of blanks)
_VERDICT_WORD = re.compile(r"[ \t]*:[ \t]*(?:\*+[ \t]*)?(?:\r?\n[ \t]*(?:\r?\n[ \t]*)?(?:\*+[ \t]*)?)?"
                           r"(CORRECT|INCORRECT)\b", re.I)


def _label(word: str) -> Verdict:
    """The label a verdict word matched case-insensitively spells: ``re.I`` also matches a Turkish
    dotted capital ("İNCORRECT"), which ``str.upper`` leaves outside the label set. A match has as many
    characters as the label it matched."""
    return "CORRECT" if len(word) == len("CORRECT") else "INCORRECT"


def _nonce_at(text: str, start: int, nonce: str) -> bool:
    """``text`` holds ``nonce`` at ``start``, case ignored as ``re.I`` ignores it (one character for one)."""
    got = text[start:start + len(nonce)]
    if got == nonce:
        return True
    if len(got) != len(nonce):
        return False
    if got.isascii() and nonce.isascii():  # between ASCII characters re.I equates only the two cases of a letter
        return got.lower() == nonce.lower()
    return re.fullmatch(re.escape(nonce), got, re.I) is not None
