"""Thinking effort: what is sent to make a model think, and whether an answer shows it did.

The OpenAI wire sends the effort itself (``reasoning_effort`` on Chat Completions,
``reasoning.effort`` on Responses). Servers that take another form get it through
``GenParams.extra_body``, most easily from a named preset::

    GenParams(effort="high", api="chat", extra_body=preset_body("vllm-qwen3", "high"))

A run records :func:`sent_fields` in ``Manifest.sent`` (exactly what went over the wire besides
the messages) and checks :func:`shows_reasoning` on its answers, so a run labelled "thinking"
whose answers show no sign of reasoning is flagged instead of being filed with thinking runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cresowlve_core.llm.types import Completion
from cresowlve_core.llm.wire import sent_fields


def _thinks(effort: str | None) -> bool:
    return effort not in (None, "", "none")


#: preset name -> (effort -> extra request body)
PRESETS: dict[str, Callable[[str | None], dict[str, Any]]] = {
    # the OpenAI API takes the effort natively: nothing extra
    "openai": lambda effort: {},
    # vLLM / SGLang serving Qwen3 (and other templates with an enable_thinking switch)
    "vllm-qwen3": lambda effort: {"chat_template_kwargs": {"enable_thinking": _thinks(effort)}},
    # llama.cpp's server: the same template switch
    "llama-cpp": lambda effort: {"chat_template_kwargs": {"enable_thinking": _thinks(effort)}},
    # OpenRouter's unified reasoning object
    "openrouter": lambda effort: ({"reasoning": {"enabled": True}} if effort == "adaptive"
                                  else {"reasoning": {"effort": effort}} if _thinks(effort)
                                  else {"reasoning": {"enabled": False}}),
}


def preset_body(name: str, effort: str | None) -> dict[str, Any]:
    """The extra request body of provider preset ``name`` for ``effort`` (pure; see ``PRESETS``)."""
    try:
        make = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown provider preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None
    return make(effort)


def shows_reasoning(completion: Completion) -> bool:
    """True if the answer shows reasoning: reasoning tokens were reported (> 0) or thoughts came back."""
    return bool((completion.usage.reasoning_tokens or 0) > 0 or (completion.thoughts or "").strip())


__all__ = ["PRESETS", "preset_body", "sent_fields", "shows_reasoning"]
