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

from collections.abc import Iterable
from typing import Any

from cresowlve_core.llm.profiles import PRESET_ALIASES as PRESETS
from cresowlve_core.llm.types import Completion, LLMFatalError
from cresowlve_core.llm.wire import sent_fields
from cresowlve_core.untrusted import one_line


def shows_reasoning(completion: Completion) -> bool:
    """True if the answer shows reasoning: reasoning tokens were reported (> 0) or thoughts came back."""
    return bool((completion.usage.reasoning_tokens or 0) > 0 or (completion.thoughts or "").strip())


def refused_effort(adapted: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The adaptation by which a client stopped sending an effort field its provider refused, or None."""
    from cresowlve_core.llm.openai_wire import FIELD_FLAGS  # deferred: the CLI's start-up imports this module

    effort_fields = {field for field, flag in FIELD_FLAGS.items() if flag.startswith("--effort")}
    return next((a for a in adapted if isinstance(a, dict) and a.get("field") in effort_fields), None)


def refuse_unsent_effort(model: str, effort: str | None, adapted: Iterable[dict[str, Any]], unit: str = "answer",
                         flag: str = "--effort") -> None:
    """Raise :class:`LLMFatalError` when a model (the model under test, or the judge: ``flag``
    ``--judge-effort``) was asked at ``effort`` and its provider refused the effort field (``adapted``:
    this run's and earlier runs' adaptations of that model's client): the client would go on without it,
    and ``unit`` s made at the provider's default effort would be recorded under the effort the run is
    labelled with. ``model``: the endpoint as the message names it."""
    if effort is None or (a := refused_effort(adapted)) is None:
        return
    raise LLMFatalError(f"{model} refused the effort {effort!r} ({a['field']}: {one_line(str(a.get('reason') or ''))}); "
                        f"no {unit} is recorded, as its effort would be the provider's default, not the run's "
                        f"(set by {flag})", remedy=f"choose another {flag} ({model} refuses {effort!r})")


__all__ = ["PRESETS", "refuse_unsent_effort", "refused_effort", "sent_fields", "shows_reasoning"]
