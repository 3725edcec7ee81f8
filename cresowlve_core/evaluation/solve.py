"""Turn an item into a prompt for the model under test, and its output back into an answer.

Non-thinking models get the chain-of-thought prompt (reason, then ``<Answer>…</Answer>``);
thinking models (run with a reasoning effort) get the plain prompt (answer only); a base model
(provider profile ``base_model``, the embedded Gemma 3 270M) gets the few-shot completion prompt
``solve_fewshot_<lang>`` and its continuation's first line is the answer (extraction ``completion``).

An output that gives back the prompt's own placeholder (``<Answer>...</Answer>``) or merely copies
the prompt is extraction ``echo`` with an empty prediction: never an answer.
"""

from __future__ import annotations

import re
from functools import cache

from cresowlve_core.evaluation.records import Extraction
from cresowlve_core.items import ItemView, Lang
from cresowlve_core.llm.base_model import completion_params, first_line, user_message
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime.step import Step, Variant

#: Only the last this-many characters of a model's output are searched for the answer (a final
#: answer sits at the end; a runaway output of megabytes must not stall the event loop).
MAX_PARSE_CHARS = 200_000
_OPEN, _CLOSE = "<answer>", "</answer>"
# Matched against one line at a time, with no nested or adjacent unbounded quantifiers, so a line
# is scanned once: blank lines or long runs of spaces cannot make it backtrack.
_ANSWER_LINE = re.compile(
    r"[ \t]*(?:\*\*)?(?:final answer|answer|ответ|окончательный ответ)(?:\*\*)?[ \t]*[:：](.*)", re.I
)


#: what the prompts show between the answer tags: an "answer" that is one of these is an echo
PLACEHOLDERS = frozenset({"...", "…", ". . ."})
FEWSHOT = "solve_fewshot"


def solve_prompt(lang: Lang, thinking: bool, base_model: bool = False) -> Prompt:
    if base_model:
        return load_prompt(f"{FEWSHOT}_{lang}")
    return load_prompt(f"solve_{'plain' if thinking else 'cot'}_{lang}")


def solve_step(lang: Lang, thinking: bool) -> Step[ItemView]:
    """The solve call: the chain-of-thought prompt (plain for a thinking model) and the extraction
    of its ``<Answer>``; for a base model the few-shot completion prompt, over ``/completions``, and
    its continuation's first line."""
    return Step("solve",
                chat=Variant(f"solve_{'plain' if thinking else 'cot'}_{lang}", _solve_messages, extract_answer),
                fewshot=Variant(f"{FEWSHOT}_{lang}", _solve_messages, _extract_fewshot, gen=completion_params))


def _solve_messages(prompt: Prompt, view: ItemView) -> list[dict[str, str]]:
    return solve_messages(view, prompt)


def _extract_fewshot(text: str | None) -> tuple[str, Extraction]:
    return extract_answer(text, fewshot=True)


def is_fewshot(prompt_tags: list[str] | tuple[str, ...]) -> bool:
    """True when a run's prompts (``name@version``) include the few-shot completion prompt."""
    return any(t.startswith(FEWSHOT + "_") for t in prompt_tags)


@cache
def _echo_markers() -> tuple[str, ...]:
    """Instruction lines of the answer prompts (lower-cased, first 60 characters): an output holding
    one of them copied the prompt back."""
    out = []
    for name in ("solve_cot_en", "solve_cot_ru", "solve_plain_en", "solve_plain_ru"):
        for line in load_prompt(name).template.splitlines():
            if "$" not in line and len(line) >= 40:
                out.append(line.strip().lower()[:60])
    return tuple(out)


def is_echo(text: str) -> bool:
    """``text`` copies an instruction line of an answer prompt (looks at its last :data:`MAX_PARSE_CHARS`)."""
    low = text[-MAX_PARSE_CHARS:].lower()
    return any(m in low for m in _echo_markers())


def solve_messages(view: ItemView, prompt: Prompt) -> list[dict[str, str]]:
    text = prompt.render(question=view.question.strip())
    return user_message(text, prompt.name.startswith(FEWSHOT))


def extract_answer(text: str | None, *, fewshot: bool = False) -> tuple[str, Extraction]:
    """The model's final answer and how it was found.

    With ``fewshot`` (the base-model prompt): the first non-blank line of the continuation
    (``completion``). Otherwise, in order: the last ``<Answer>…</Answer>``; the text after an
    unclosed last ``<Answer>``; a final ``Answer:`` line; otherwise the whole text, flagged
    ``fallback_whole_text``. Either way an answer that is the prompt's placeholder
    (:data:`PLACEHOLDERS`), or a fallback that copies the prompt (:func:`is_echo`), is ``echo``
    with an empty prediction.
    Tags and answer lines are looked for in the last :data:`MAX_PARSE_CHARS` characters only.
    Linear in the length of ``text``: tags are found with ``str.rfind``, answer lines one line
    at a time from the end.
    """
    text = (text or "").strip()
    if not text:
        return "", "empty"
    if fewshot:
        line = _clean(first_line(text))
        return ("", "echo") if line in PLACEHOLDERS else (line, "completion")
    answer, how = _extract(text)
    if answer in PLACEHOLDERS or (how == "fallback_whole_text" and is_echo(text)):
        return "", "echo"
    return answer, how


def _extract(text: str) -> tuple[str, Extraction]:
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
