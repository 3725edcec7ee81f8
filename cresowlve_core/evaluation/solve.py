"""Turn an item into a prompt for the model under test, and its output back into an answer.

Non-thinking models get the chain-of-thought prompt (reason, then ``<Answer>…</Answer>``);
thinking models (run with a reasoning effort) get the plain prompt (answer only).
"""

from __future__ import annotations

import re

from cresowlve_core.evaluation.records import Extraction
from cresowlve_core.items import ItemView, Lang
from cresowlve_core.prompts import Prompt, load_prompt

#: Only the last this-many characters of a model's output are searched for the answer (a final
#: answer sits at the end; a runaway output of megabytes must not stall the event loop).
MAX_PARSE_CHARS = 200_000
_OPEN, _CLOSE = "<answer>", "</answer>"
# Matched against one line at a time, with no nested or adjacent unbounded quantifiers, so a line
# is scanned once: blank lines or long runs of spaces cannot make it backtrack.
_ANSWER_LINE = re.compile(
    r"[ \t]*(?:\*\*)?(?:final answer|answer|ответ|окончательный ответ)(?:\*\*)?[ \t]*[:：](.*)", re.I
)


def solve_prompt(lang: Lang, thinking: bool) -> Prompt:
    return load_prompt(f"solve_{'plain' if thinking else 'cot'}_{lang}")


def solve_messages(view: ItemView, prompt: Prompt) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt.render(question=view.question.strip())}]


def extract_answer(text: str | None) -> tuple[str, Extraction]:
    """The model's final answer and how it was found.

    In order: the last ``<Answer>…</Answer>``; the text after an unclosed last ``<Answer>``;
    a final ``Answer:`` line; otherwise the whole text, flagged ``fallback_whole_text``.
    Tags and answer lines are looked for in the last :data:`MAX_PARSE_CHARS` characters only.
    Linear in the length of ``text``: tags are found with ``str.rfind``, answer lines one line
    at a time from the end.
    """
    text = (text or "").strip()
    if not text:
        return "", "empty"
    tail = text[-MAX_PARSE_CHARS:]
    low = tail.lower()  # same length as tail for every character that can spell a tag
    if len(low) != len(tail):  # a few characters change length when lowered (e.g. "İ")
        low = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in tail)
    last_open = low.rfind(_OPEN)
    last_close = low.rfind(_CLOSE)
    if last_open > last_close:  # the final tag was never closed (e.g. max_tokens)
        after = tail[last_open + len(_OPEN):]
        if after.strip():
            return _clean(after), "unclosed_answer_tag"
    if last_close >= 0:
        opening = low.rfind(_OPEN, 0, last_close)
        if opening >= 0:
            return _clean(tail[opening + len(_OPEN):last_close]), "answer_tag"
    for line in reversed(tail.splitlines()):
        m = _ANSWER_LINE.match(line)
        if m and m.group(1).strip(" \t*"):
            return _clean(m.group(1)), "answer_line"
    return _clean(text), "fallback_whole_text"


def _clean(s: str) -> str:
    s = s.strip().strip("*").strip()
    return re.sub(r"\s+", " ", s)
