"""The small vocabulary of the LLM layer: where a model lives, how to sample it, what came back,
how a call can fail, and the :class:`ChatModel` seam every stage calls through."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from cresowlve_core.failures import StoppedError, UsageError
from cresowlve_core.secrets import looks_like_key, strip_url_credentials

if TYPE_CHECKING:
    from cresowlve_core.llm.profiles import Profile


class Usage(BaseModel):
    """Token counts exactly as the API reported them (``None`` where it did not report)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


def summed_usage(usages: list[Usage]) -> Usage:
    """Token counts of several calls making one record, added up: ``None`` where any call did not
    report that count (no calls: 0)."""
    def total(name: str) -> int | None:
        values = [getattr(u, name) for u in usages]
        return None if any(v is None for v in values) else sum(values)
    return Usage(input_tokens=total("input_tokens"), output_tokens=total("output_tokens"),
                 reasoning_tokens=total("reasoning_tokens"))


def summed_cost(costs: list[float | None]) -> float | None:
    """The cost of several calls making one record: ``None`` when any call's cost is unknown (no calls: 0)."""
    return None if any(c is None for c in costs) else float(sum(c or 0.0 for c in costs))


#: calls in flight at once, unless the run's options say otherwise: the one default (ClientOptions, LLMClient,
#: map_with_resume, the transport); an endpoint whose profile decodes fewer at once is sent no more than it decodes
CONCURRENCY = 8  # concurrency: its one default value (llm/profiles.py max_in_flight caps it per endpoint)


Effort = Literal["none", "minimal", "low", "medium", "high"]
EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "adaptive")
#: "adaptive" labels a model that decides by itself how long to think (the paper's Qwen3.5,
#: Qwen3-Thinking, DeepSeek-V3.2, GLM-5 rows): the run is a thinking run, but no effort field is
#: sent (``GenParams.sent_effort`` is None), as ``Manifest.sent`` shows.
ADAPTIVE = "adaptive"


@dataclass(frozen=True)
class Endpoint:
    """Where a model is served. ``api_key_env`` is the *name* of an environment variable.

    ``wire`` names the wire format (``"openai"``: Chat Completions / Responses / legacy
    completions over HTTP+JSON); see :mod:`cresowlve_core.llm.wire`.
    """

    base_url: str
    model: str
    api_key_env: str | None = None
    wire: str = "openai"
    provider: str | None = None  # a profile name (llm/profiles.py); None: detected from the base URL

    def __post_init__(self) -> None:
        if self.api_key_env and looks_like_key(self.api_key_env):
            # never repeat the value: it is probably the key itself
            raise LLMConfigError(
                "api_key_env must be the NAME of an environment variable (e.g. OPENAI_API_KEY), "
                f"not the key itself; the value given ({len(self.api_key_env)} characters) "
                "looks like a key and was not used"
            )

    def api_key(self) -> str:
        """Read the key from the environment at call time. Local servers accept any key."""
        if not self.api_key_env:
            return "not-needed"
        value = os.environ.get(self.api_key_env)
        if not value:
            raise LLMConfigError(
                f"environment variable {self.api_key_env!r} is not set "
                f"(needed for model {self.model!r} at {strip_url_credentials(self.base_url)})"
            )
        if not value.isascii() or any(c in value for c in "\r\n\0"):
            raise LLMConfigError(f"environment variable {self.api_key_env!r} holds a line break or a non-ASCII "
                                 "character: not a usable API key")
        return value

    @property
    def profile(self) -> Profile:
        """The provider profile: ``provider`` if named, else the one of the base URL's host."""
        from cresowlve_core.llm.profiles import resolve

        return resolve(self.provider, self.base_url)

    def describe(self) -> str:
        """``model 'x' at URL`` for messages, with any credentials in the URL stripped."""
        return f"model {self.model!r} at {strip_url_credentials(self.base_url)}"


@dataclass(frozen=True)
class GenParams:
    """Every generation parameter that can change an answer; all of them go into the cache key.

    ``extra`` (sampling extras such as ``top_p``) and ``extra_body`` (provider-specific fields,
    e.g. a field a provider profile does not send) are merged into the request body,
    ``extra_body`` last and recursively (so ``{"reasoning": {...}}`` extends, not replaces).
    """

    temperature: float | None = 0.0  # None: not sent, the provider's default decoding
    seed: int | None = 0
    max_tokens: int | None = 1024
    effort: str | None = None  # set => the profile's effort API unless ``api`` says otherwise
    api: Literal["chat", "responses", "completions"] | None = None  # None => chat, or responses if effort
    extra: dict[str, Any] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)

    def resolved_api(self, profile: Profile | None = None) -> str:
        """The API named, else the profile's default (chat; its effort API when an effort is sent)."""
        if self.api:
            return self.api
        if profile is None:
            from cresowlve_core.llm.profiles import PROFILES

            profile = PROFILES["generic"]
        return profile.default_api(bool(self.sent_effort))

    @property
    def sent_effort(self) -> str | None:
        """The effort that goes over the wire (None for no effort and for ``adaptive``)."""
        return None if self.effort in (None, ADAPTIVE) else self.effort


#: What one model call came to (docs/providers.md, "Outcomes"):
#: ``answer``: text to score; ``truncated``: cut off by the token limit (scored, flagged);
#: ``refused``: the model declined (its refusal text in ``refusal``); ``filtered``: the provider's
#: filter stopped it (partial text kept, never scored as an answer). ``refused`` and ``filtered`` are
#: the model's final behaviour on that item: one call, never re-asked, counted as not correct.
#: ``failed`` (the provider says the response failed) and ``error`` (transport/HTTP) are not answers:
#: they are retried, then recorded as errors, and an errored item is left out of paired statistics.
Outcome = Literal["answer", "truncated", "refused", "filtered", "failed", "error"]
#: the outcomes that are the model's behaviour on the item and count as not correct
NOT_AN_ANSWER: frozenset[str] = frozenset({"refused", "filtered"})


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
    #: USD the provider itself reported for this call (OpenRouter's ``usage.cost``); preferred over the price table
    reported_cost: float | None = None
    #: the closed set above; the raw fields that decided it stay in ``raw`` (``finish_reason``,
    #: ``native_finish_reason``, Responses ``status`` and ``incomplete_details``, ``refusal``)
    outcome: Outcome = "answer"
    refusal: str | None = None  # the model's refusal text (``outcome == "refused"``)

    @property
    def truncated(self) -> bool:
        """The answer was cut off by the token limit (``finish_reason: length``, Responses ``incomplete``)."""
        return self.outcome == "truncated" or (self.outcome == "answer" and self.raw.get("finish_reason") == "length")

    @property
    def is_answer(self) -> bool:
        """Text that is scored as an answer (``answer`` or ``truncated``)."""
        return self.outcome in ("answer", "truncated")


@runtime_checkable
class ChatModel(Protocol):
    """What a stage needs from a model: :class:`~cresowlve_core.llm.client.LLMClient` is one;
    a native-API client or a test double is another."""

    @property
    def endpoint(self) -> Endpoint: ...

    async def complete(
        self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str
    ) -> Completion: ...

    async def aclose(self) -> None: ...


class LLMError(UsageError, RuntimeError):
    """A model call failed (for this unit only): retries gave up, or the provider rejected this
    one request (context too long).

    ``outcome`` is ``failed`` when the provider itself said the response failed (a Responses body
    with ``status: "failed"``, retried like a 5xx), else ``error`` (transport or HTTP)."""

    def __init__(self, message: str = "", *, outcome: Outcome = "error") -> None:
        super().__init__(message)
        self.outcome: Outcome = outcome


class LLMFatalError(StoppedError, LLMError):
    """A non-retryable failure of the configuration (wrong key, model or endpoint): stops a run.

    ``remedy``: what to change before the same command can get further (``"set a valid key in
    $OPENAI_API_KEY"``), for the run's last line; None when the message itself says it."""

    def __init__(self, message: str = "", *, remedy: str | None = None) -> None:
        super().__init__(message)
        self.remedy = remedy


class LLMEndpointDown(LLMFatalError):
    """The endpoint is unreachable or not an API (connection refused, DNS failure, HTML pages)."""


class LLMConfigError(LLMError):
    """The call could not be made as configured (e.g. a missing API-key variable)."""


class BudgetUnenforceable(LLMFatalError, LLMConfigError):
    """``max_cost`` is set and an answer came back whose cost is not known (no price, no reported cost, no
    usable token counts): the budget cannot hold it, so the run stops (exit 3), its finished work kept.
    ``remedy``: what to change before the same command can get further."""

    def __init__(self, message: str, remedy: str) -> None:
        super().__init__(message, remedy=remedy)


class BudgetExceeded(StoppedError, LLMError):
    """``--max-cost`` would be exceeded by further calls. ``remedy``: what to change before the run can
    get further (raise the budget; a re-run may also spend it again), for the run's last line."""

    def __init__(self, message: str = "", *, remedy: str | None = None) -> None:
        super().__init__(message)
        self.remedy = remedy
