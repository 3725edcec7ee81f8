"""Scoring a prediction: exact match (strict and lenient) and the LLM judge.

Exact match normalises both sides: case-fold, Unicode NFKC, ``ё→е``, every quote form and all
punctuation to spaces, whitespace collapsed.

* **strict** compares with the reference answer alone (as the paper does), with square brackets
  simply removed: "[Nicolaus] Copernicus." needs "Nicolaus Copernicus".
* **lenient** also accepts the reference without its ``[optional]`` parts and every alternative
  of the zachet (``other_answers``), split on ``;``, ``,`` and newlines.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from cresowlve_core.prompts import Prompt, load_prompt

_QUOTES = "«»“”„‟‘’‚‛\"'`´‹›"
_PUNCT = re.compile(r"[^\w\s]|_", re.U)
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_ALT_SPLIT = re.compile(r"[;,\n]+")
_ZACHET_PREFIX = re.compile(r"^\s*(зач[её]т|accepted|also accepted|other answers?)\s*[:.]\s*", re.I)


def normalize(text: str | None) -> str:
    if not text:
        return ""
    t = unicodedata.normalize("NFKC", text).casefold().replace("ё", "е")
    t = t.translate({ord(q): " " for q in _QUOTES})
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


def split_alternatives(other_answers: str | None) -> list[str]:
    if not other_answers:
        return []
    alts = [_ZACHET_PREFIX.sub("", a) for a in _ALT_SPLIT.split(other_answers)]
    return [a.strip() for a in alts if normalize(a)]


def accepted_answers(answer: str, other_answers: str | None = None) -> set[str]:
    """All normalised strings lenient exact match accepts."""
    accepted = bracket_variants(answer)
    for alt in split_alternatives(other_answers):
        accepted |= bracket_variants(alt)
    return accepted


def exact_match(prediction: str | None, answer: str, other_answers: str | None = None) -> bool:
    """Lenient exact match: reference (with or without ``[optional]`` parts) or any zachet alternative."""
    pred = normalize(prediction)
    return bool(pred) and pred in accepted_answers(answer, other_answers)


def exact_match_strict(prediction: str | None, answer: str) -> bool:
    """Strict exact match against the reference answer only (brackets' content kept)."""
    pred = normalize(prediction)
    return bool(pred) and pred == normalize(answer.replace("[", "").replace("]", ""))


# --------------------------------------------------------------------------- the LLM judge

Verdict = Literal["CORRECT", "INCORRECT"]


@dataclass(frozen=True)
class JudgeRequest:
    messages: list[dict[str, str]]
    nonce: str
    prompt: Prompt


def judge_nonce(item_id: str, prediction: str, seed: int) -> str:
    """Deterministic (so the judge call is cacheable) but unknowable to the model under test."""
    return hashlib.sha256(f"{item_id}\x1f{prediction}\x1f{seed}".encode()).hexdigest()[:8].upper()


def judge_request(
    item_id: str,
    question: str,
    answer: str,
    prediction: str,
    *,
    explanation: str | None = None,
    other_answers: str | None = None,
    seed: int = 0,
) -> JudgeRequest:
    prompt = load_prompt("judge")
    nonce = judge_nonce(item_id, prediction, seed)
    text = prompt.render(
        question=question.strip(),
        answer=answer.strip(),
        other_answers=(other_answers or "(none)").strip(),
        explanation=(explanation or "(none)").strip(),
        prediction=_defang(prediction.strip()) or "(empty)",
        nonce=nonce,
    )
    return JudgeRequest([{"role": "user", "content": text}], nonce, prompt)


def _defang(prediction: str) -> str:
    """Stop a prediction from closing the candidate block early."""
    return re.sub(r"</?\s*candidate_answer\s*>", "", prediction, flags=re.I)


def parse_verdict(judge_output: str | None, nonce: str) -> Verdict | None:
    """The last ``VERDICT-<nonce>: CORRECT|INCORRECT`` line, or None (= unscored)."""
    if not judge_output:
        return None
    found = re.findall(rf"VERDICT-{re.escape(nonce)}\s*:\s*\**\s*(CORRECT|INCORRECT)\b", judge_output, re.I)
    return found[-1].upper() if found else None  # type: ignore[return-value]
