"""Stage 3: an LLM writes the literal and the obfuscated puzzle, and an explanation.

:func:`verbalise_messages` builds the prompt (``synth_verbalise``), :func:`parse_verbalisation`
is the pure parser: the last complete ``<literal>``, ``<obfuscated>`` and ``<explanation>``
blocks, all three non-empty and none copied from the prompt, else ``None`` (the candidate is
counted as unparsed, never guessed; the embedded base model tends to echo the worked example). The obfuscated text must carry at least one ALL-CAPS placeholder from
:data:`PLACEHOLDERS`; which ones it has is recorded.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from cresowlve_core.prompts import load_prompt
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.facts import Candidate

#: Only the last this-many characters of an output are parsed (linear time on runaway outputs).
MAX_PARSE_CHARS = 50_000
PLACEHOLDERS = ("X", "Y", "Z", "HE", "SHE", "IT", "ITS", "HIM", "HER", "HIS", "THEY", "THEM", "THEIR",
                "THIS", "THAT", "THESE", "THOSE")
_PLACEHOLDER = re.compile(r"\b(" + "|".join(PLACEHOLDERS) + r")\b")
TAGS = ("literal", "obfuscated", "explanation")


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


def verbalise_messages(candidate: Candidate, source: KnowledgeSource) -> tuple[list[dict[str, str]], str]:
    """The chat messages for one candidate and the prompt tag."""
    prompt = load_prompt("synth_verbalise")
    text = prompt.render(
        answer=source.english_label(candidate.anchor) or candidate.anchor,
        answer_description=(source.description_of(candidate.anchor) or "no description").strip(),
        facts=fact_lines(candidate, source),
    )
    return [{"role": "user", "content": text}], prompt.tag


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
    parts = {t: _last_block(tail, low, t) for t in TAGS}
    if any(v is None for v in parts.values()):
        return None
    if prompt is not None:
        echo = _squash(prompt)
        if any(_squash(v or "") in echo for v in parts.values()):
            return None
    found = tuple(dict.fromkeys(_PLACEHOLDER.findall(parts["obfuscated"] or "")))
    if not found:
        return None
    return Verbalisation(parts["literal"] or "", parts["obfuscated"] or "", parts["explanation"] or "", found)
