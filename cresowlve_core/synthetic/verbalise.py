"""Stage 3: an LLM writes the literal and the obfuscated puzzle, and an explanation.

:func:`verbalise_messages` builds the prompt, chosen by the verbaliser's provider profile:

* a chat model gets ``synth_verbalise`` (instructions and one worked example) and
  :func:`parse_verbalisation` reads the last complete ``<literal>``, ``<obfuscated>`` and
  ``<explanation>`` blocks;
* a base model (profile ``base_model``: the embedded Gemma 3 270M; :mod:`cresowlve_core.llm.base_model`)
  gets the few-shot completion prompt ``synth_verbalise_fewshot`` (three worked examples, then the
  open one ending at ``Literal:``) over ``/v1/completions``, and :func:`parse_fewshot_verbalisation`
  reads the continuation's first line as the literal puzzle, then its ``Obfuscated:`` and
  ``Explanation:`` lines.

Both parsers are pure and apply the same guards (:func:`checked`): all three parts non-empty, none
copied from the prompt (a base model that echoes a worked example must not pass it off as its own
puzzle), and at least one ALL-CAPS placeholder from :data:`PLACEHOLDERS` in the obfuscated text
(which ones is recorded). Anything else is ``None``: the candidate is counted as unparsed, never
guessed. Leaked answer names are checked afterwards by the pipeline (``answers.find_leaks``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from cresowlve_core.llm.base_model import MAX_LINE_CHARS, first_line, one_line, user_message
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.facts import Candidate

#: Only the last this-many characters of an output are parsed (linear time on runaway outputs).
MAX_PARSE_CHARS = 50_000
PLACEHOLDERS = ("X", "Y", "Z", "HE", "SHE", "IT", "ITS", "HIM", "HER", "HIS", "THEY", "THEM", "THEIR",
                "THIS", "THAT", "THESE", "THOSE")
_PLACEHOLDER = re.compile(r"\b(" + "|".join(PLACEHOLDERS) + r")\b")
TAGS = ("literal", "obfuscated", "explanation")
PROMPT = "synth_verbalise"
FEWSHOT_PROMPT = "synth_verbalise_fewshot"
#: the labelled lines of a few-shot continuation after the literal one (the open slot is ``Literal:``)
_LABEL_LINE = re.compile(r"^[\s*#>_-]*(obfuscated|explanation|answer|facts|literal)[\s*_]*[:：](.*)$", re.I)
#: stop sequences beyond the blank line: the start of a next example written without one
FEWSHOT_STOP = ("\nAnswer:",)


@dataclass(frozen=True)
class Verbalisation:
    literal: str
    obfuscated: str
    explanation: str
    placeholders: tuple[str, ...]

    def to_record(self) -> dict[str, Any]:
        d = asdict(self)
        d["placeholders"] = list(self.placeholders)
        return d


def fact_lines(candidate: Candidate, source: KnowledgeSource) -> str:
    """``- relation: object (description)`` per fact."""
    lines = []
    for p, o in candidate.facts:
        desc = (source.description_of(o) or "").strip()
        lines.append(f"- {source.english_label(p) or p}: {source.english_label(o) or o}" + (f" ({desc})" if desc else ""))
    return "\n".join(lines)


def fact_line(candidate: Candidate, source: KnowledgeSource) -> str:
    """``relation: object; ...`` on one line (the few-shot prompt's format: no descriptions)."""
    return "; ".join(f"{one_line(source.english_label(p) or p)}: {one_line(source.english_label(o) or o)}"
                     for p, o in candidate.facts)


def verbalise_prompt(base_model: bool = False) -> Prompt:
    """``synth_verbalise`` for a chat model, ``synth_verbalise_fewshot`` for a base model."""
    return load_prompt(FEWSHOT_PROMPT if base_model else PROMPT)


def verbalise_messages(candidate: Candidate, source: KnowledgeSource,
                       base_model: bool = False) -> tuple[list[dict[str, str]], str]:
    """The messages for one candidate and the prompt tag (``base_model``: the few-shot completion
    prompt, every field on one line, ending at its open slot ``Literal:``)."""
    prompt = verbalise_prompt(base_model)
    answer = source.english_label(candidate.anchor) or candidate.anchor
    description = (source.description_of(candidate.anchor) or "no description").strip()
    if base_model:
        text = prompt.render(answer=one_line(answer), answer_description=one_line(description),
                             facts=fact_line(candidate, source))
    else:
        text = prompt.render(answer=answer, answer_description=description, facts=fact_lines(candidate, source))
    return user_message(text, base_model), prompt.tag


def _last_block(text: str, low: str, tag: str) -> str | None:
    close = low.rfind(f"</{tag}>")
    if close < 0:
        return None
    start = low.rfind(f"<{tag}>", 0, close)
    if start < 0:
        return None
    body = " ".join(text[start + len(tag) + 2:close].split())
    return body or None


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def parse_verbalisation(text: str | None, prompt: str | None = None) -> Verbalisation | None:
    """The three tagged parts, or ``None`` if any is missing or empty, the obfuscated text has no
    ALL-CAPS placeholder, or (given the ``prompt``) any part is copied from the prompt: a base
    model that echoes the prompt's worked example must not pass it off as its own puzzle."""
    if not text:
        return None
    tail = text[-MAX_PARSE_CHARS:]
    low = tail.lower()
    if len(low) != len(tail):  # a few characters change length when lowered
        low = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in tail)
    return checked({t: _last_block(tail, low, t) for t in TAGS}, prompt)


def parse_fewshot_verbalisation(text: str | None, prompt: str | None = None) -> Verbalisation | None:
    """A base model's continuation of ``synth_verbalise_fewshot``: its first non-blank line is the
    literal puzzle (the prompt ends at ``Literal:``), then the first ``Obfuscated:`` and
    ``Explanation:`` lines before any next example (``Answer:``/``Facts:``/``Literal:``) or blank
    line; the same guards as :func:`parse_verbalisation` (:func:`checked`). Reads the first
    :data:`~cresowlve_core.llm.base_model.MAX_LINE_CHARS` characters of each line."""
    if not text:
        return None
    literal = first_line(text)
    m = _LABEL_LINE.match(literal)
    if m:  # the model wrote the label again ("Literal: ...") or went straight to another one
        if m.group(1).lower() != "literal":
            return None
        literal = m.group(2)
    lines = text[: 3 * MAX_LINE_CHARS].lstrip().splitlines()[1:]
    parts: dict[str, str | None] = {"literal": _value(literal), "obfuscated": None, "explanation": None}
    for line in lines:
        if not line.strip():
            break
        m = _LABEL_LINE.match(line[:MAX_LINE_CHARS])
        if m is None:
            continue
        label = m.group(1).lower()
        if label not in parts or label == "literal":
            break  # a next example begins
        if parts[label] is None:
            parts[label] = _value(m.group(2))
    return checked(parts, prompt)


def ends_in_explanation(text: str | None) -> bool:
    """A few-shot continuation's last non-blank line is its ``Explanation:`` line: nothing followed it,
    so a continuation cut off at the token limit may have cut the explanation mid-sentence."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    m = _LABEL_LINE.match(lines[-1][:MAX_LINE_CHARS]) if lines else None
    return m is not None and m.group(1).lower() == "explanation"


def _value(text: str) -> str | None:
    """A labelled line's text: one line, without the markdown emphasis around its label."""
    return " ".join(text.strip().strip("*_").split()) or None


def checked(parts: dict[str, str | None], prompt: str | None = None) -> Verbalisation | None:
    """The guards both parsers share: every part of :data:`TAGS` present and non-empty, none copied
    from the ``prompt`` (given), an ALL-CAPS placeholder in the obfuscated text; else ``None``."""
    if any(not parts.get(t) for t in TAGS):
        return None
    if prompt is not None:
        echo = _squash(prompt)
        if any(_squash(parts[t] or "") in echo for t in TAGS):
            return None
    found = tuple(dict.fromkeys(_PLACEHOLDER.findall(parts["obfuscated"] or "")))
    if not found:
        return None
    return Verbalisation(parts["literal"] or "", parts["obfuscated"] or "", parts["explanation"] or "", found)
