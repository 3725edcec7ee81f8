"""The small vocabulary of the LLM client: where a model lives, how to sample it, what came back."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

class Usage(BaseModel):
    """Token counts exactly as the API reported them (``None`` where it did not report)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


Effort = Literal["none", "minimal", "low", "medium", "high"]
EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high")


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint. ``api_key_env`` is the *name* of an environment variable."""

    base_url: str
    model: str
    api_key_env: str | None = None

    def api_key(self) -> str:
        """Read the key from the environment at call time. Local servers accept any key."""
        if not self.api_key_env:
            return "not-needed"
        value = os.environ.get(self.api_key_env)
        if not value:
            raise LLMConfigError(
                f"environment variable {self.api_key_env!r} is not set "
                f"(needed for model {self.model!r} at {self.base_url})"
            )
        return value

    def describe(self) -> str:
        return f"model {self.model!r} at {self.base_url}"


@dataclass(frozen=True)
class GenParams:
    """Every generation parameter that can change an answer; all of them go into the cache key."""

    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int | None = 1024
    effort: str | None = None  # set => Responses API
    api: Literal["chat", "responses", "completions"] | None = None  # None => chat, or responses if effort
    extra: dict[str, Any] = field(default_factory=dict)

    def resolved_api(self) -> str:
        if self.api:
            return self.api
        return "responses" if self.effort else "chat"


@dataclass
class Completion:
    text: str
    thoughts: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None  # USD; None when the price is unknown
    latency_s: float = 0.0
    cached: bool = False
    model: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


class LLMError(RuntimeError):
    """A model call failed after the retry policy gave up."""


class LLMFatalError(LLMError):
    """A non-retryable failure (400/401/403/404): the message names endpoint and model."""


class LLMConfigError(LLMError):
    """The call could not be made as configured (e.g. a missing API-key variable)."""


class BudgetExceeded(LLMError):
    """``--max-cost`` would be exceeded by further calls."""
