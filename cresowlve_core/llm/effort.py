"""Thinking effort: whether an answer shows that the model thought.

How an effort is *sent* belongs to the provider profile (:mod:`cresowlve_core.llm.profiles`:
``reasoning_effort``, ``reasoning.effort``, OpenRouter's ``reasoning`` object, or a chat-template
switch). A run records :func:`sent_fields` in ``Manifest.sent`` (exactly what went over the wire
besides the messages) and checks :func:`shows_reasoning` on its answers, so a run labelled
"thinking" whose answers show no sign of reasoning is flagged instead of being filed with
thinking runs.

The old provider *presets* (``--preset vllm-qwen3`` and friends) are now profile names:
:data:`PRESETS` maps each old name to its profile.
"""

from __future__ import annotations

from cresowlve_core.llm.profiles import PRESET_ALIASES as PRESETS
from cresowlve_core.llm.types import Completion
from cresowlve_core.llm.wire import sent_fields


def shows_reasoning(completion: Completion) -> bool:
    """True if the answer shows reasoning: reasoning tokens were reported (> 0) or thoughts came back."""
    return bool((completion.usage.reasoning_tokens or 0) > 0 or (completion.thoughts or "").strip())


__all__ = ["PRESETS", "sent_fields", "shows_reasoning"]
