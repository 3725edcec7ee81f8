"""Speaking to a base model: few-shot completion prompts over ``/v1/completions``.

A base model (the embedded Gemma 3 270M) has no chat template: asked in chat form it copies the
prompt back. Harnesses for base models (lm-evaluation-harness, HELM) instead show a few solved
examples and leave the last one open (``...\\nAnswer:``); the model continues the text, and the
continuation up to the first line break is its answer. Every model-calling stage does the same
when the endpoint's provider profile says ``base_model`` (the ``embedded`` profile, which the
embedded server sets for its own ``127.0.0.1:PORT``; see :mod:`cresowlve_core.llm.local`):

* the prompt is the stage's ``*_fewshot`` prompt file (versioned like every prompt), ending right
  after the open slot (``Answer:``) with no line break (:func:`open_slot`): after a line break the
  model starts a new line of the pattern (``Candidate: …``) instead of filling the slot;
* the call goes to ``/v1/completions`` with ``stop`` at the first blank line, where the examples
  end (:func:`completion_params`);
* the parser reads the first non-blank line of the continuation (:func:`first_line`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cresowlve_core.llm.types import Endpoint, GenParams

#: where a few-shot continuation ends: the blank line before the next example (a continuation that
#: starts with a line break still gets its line)
STOP = ("\n\n",)
#: how much of a continuation is looked at for its first line (a runaway output must not stall a parser)
MAX_LINE_CHARS = 2_000


def is_base_model(endpoint: Endpoint | Any) -> bool:
    """True when ``endpoint``'s provider profile says it serves a base model (completion prompts)."""
    profile = getattr(endpoint, "profile", None)
    return bool(getattr(profile, "base_model", False))


def open_slot(text: str) -> str:
    """A rendered few-shot prompt ending at its open slot: trailing whitespace and line breaks removed."""
    return text.rstrip()


def user_message(text: str, base_model: bool = False) -> list[dict[str, str]]:
    """``text`` as the one user message of a request; for a base model it ends at its open slot
    (:func:`open_slot`), the prompt a completion request sends."""
    return [{"role": "user", "content": open_slot(text) if base_model else text}]


def completion_params(params: GenParams, *, max_tokens: int | None = None) -> GenParams:
    """``params`` for a few-shot completion: the ``/completions`` API, stopping at the first blank line;
    ``max_tokens`` (when given) replaces the budget."""
    extra = {**params.extra, "stop": list(STOP)}
    budget = params.max_tokens if max_tokens is None else max_tokens
    return dataclasses.replace(params, api="completions", extra=extra, max_tokens=budget)


def one_line(text: str | None, cap: int = 600) -> str:
    """``text`` as one line of at most ``cap`` characters (whitespace runs, line breaks included,
    collapsed): a field of a few-shot prompt cannot start an example of its own."""
    return " ".join((text or "")[: cap * 4].split())[:cap]


def first_line(text: str | None) -> str:
    """The first non-blank line of a continuation, stripped (linear; looks at :data:`MAX_LINE_CHARS`)."""
    for line in (text or "")[:MAX_LINE_CHARS].splitlines():
        if line.strip():
            return line.strip()
    return ""


__all__ = ["MAX_LINE_CHARS", "STOP", "completion_params", "first_line", "is_base_model", "one_line", "open_slot",
           "user_message"]
