"""Turn an item into a prompt for the model under test, and its output back into an answer.

Non-thinking models get the chain-of-thought prompt (reason, then ``<Answer>…</Answer>``);
thinking models (run with a reasoning effort) get the plain prompt (answer only).
"""

from __future__ import annotations

import re

from cresowlve_core.items import ItemView, Lang
from cresowlve_core.evaluation.records import Extraction
from cresowlve_core.prompts import Prompt, load_prompt

_ANSWER_CLOSED = re.compile(r"<answer>(.*?)</answer>", re.I | re.S)
_ANSWER_OPEN = re.compile(r"<answer>(?!.*<answer>)(.*)\Z", re.I | re.S)
_ANSWER_LINE = re.compile(r"^\s*(?:\*\*)?(?:final answer|answer|ответ|окончательный ответ)(?:\*\*)?\s*[:：]\s*(?:\*\*)?(.+?)\s*$", re.I | re.M)


def solve_prompt(lang: Lang, thinking: bool) -> Prompt:
    return load_prompt(f"solve_{'plain' if thinking else 'cot'}_{lang}")


def solve_messages(view: ItemView, prompt: Prompt) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt.render(question=view.question.strip())}]


def extract_answer(text: str | None) -> tuple[str, Extraction]:
    """The model's final answer and how it was found.

    In order: the last ``<Answer>…</Answer>``; the text after an unclosed last ``<Answer>``;
    a final ``Answer:`` line; otherwise the whole text, flagged ``fallback_whole_text``.
    """
    text = (text or "").strip()
    if not text:
        return "", "empty"
    closed = _ANSWER_CLOSED.findall(text)
    last_open = text.lower().rfind("<answer>")
    last_close = text.lower().rfind("</answer>")
    if last_open > last_close:  # the final tag was never closed (e.g. max_tokens)
        m = _ANSWER_OPEN.search(text)
        if m and m.group(1).strip():
            return _clean(m.group(1)), "unclosed_answer_tag"
    if closed:
        return _clean(closed[-1]), "answer_tag"
    lines = _ANSWER_LINE.findall(text)
    if lines:
        return _clean(lines[-1]), "answer_line"
    return _clean(text), "fallback_whole_text"


def _clean(s: str) -> str:
    s = s.strip().strip("*").strip()
    return re.sub(r"\s+", " ", s)
