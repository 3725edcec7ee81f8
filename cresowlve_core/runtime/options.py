"""How every stage builds its model client: one set of options, one factory, one fallback.

:class:`ClientOptions` holds the only defaults of the project for the settings that shape a model
call (each documented beside its field); a stage that needs another value passes it explicitly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cresowlve_core.failures import InputError, UsageError
from cresowlve_core.llm.cache import CacheError, ResponseCache
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.pricing import CostMeter, PriceTable
from cresowlve_core.llm.profiles import get_profile
from cresowlve_core.llm.types import Endpoint, GenParams


class ClientOptions(BaseModel):
    """Settings of a model client and its calls. Recorded in every run manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int | None = Field(4096, description="output budget per call (thinking models need room)")
    temperature: float | None = Field(0.0, ge=0, allow_inf_nan=False, description="sampling temperature; 0 is as "
                                      "repeatable as the provider allows; None sends none (the provider's default "
                                      "decoding, as in the paper)")
    seed: int = Field(0, description="sampling seed sent to the provider (where supported)")
    concurrency: int = Field(8, ge=1, description="calls in flight at once")
    rpm: int | None = Field(None, ge=1, description="requests per minute limit (None: no limit)")
    tpm: int | None = Field(None, ge=1, description="tokens per minute limit (None: no limit)")
    timeout_s: float = Field(300.0, gt=0, description="read timeout of one HTTP attempt, seconds")
    deadline_s: float | None = Field(600.0, gt=0, description="total deadline of one HTTP attempt, seconds, on top of "
                                     "the read timeout (a server dripping bytes is cut off; None: none)")
    max_attempts: int = Field(6, ge=1, description="HTTP attempts per call, first one included")
    backoff_base_s: float = Field(0.5, ge=0, description="first retry delay; doubles per attempt, jittered")
    down_after: int = Field(5, ge=1, description="consecutive dead-endpoint signs (refused, DNS, connect timeout, "
                            "non-JSON/HTML answers) that stop the run; the first three before any answer stop at once")
    down_window_s: float = Field(10.0, ge=0, description="connection-level silence (accepted then closed, no "
                                 "first byte in time) stops the run only after down_after signs spanning this long")
    first_byte_timeout_s: float | None = Field(None, gt=0, description="give up an attempt when no byte of the "
                                               "answer arrives within this (None: timeout_s); counts as a dead sign")
    provider: str | None = Field(None, description="provider profile (llm/profiles.py: openai, azure, gemini, "
                                 "openrouter, vllm, llama-cpp, ollama, generic): what is sent and how the answer is "
                                 "read; None: detected from the base URL's host")
    provider_preset: str | None = Field(None, description="old name of `provider` (vllm-qwen3 = vllm, llama-cpp, "
                                        "openrouter, openai); kept so old configs and manifests still read")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="JSON merged into every request body, "
                                       "last; a null removes a field the profile would send; part of the cache key")
    max_cost: float | None = Field(None, ge=0, description="stop cleanly before spending more USD than this")
    cache: bool = Field(True, description="use the SQLite response cache")
    cache_path: str | None = Field(None, description="cache file (None: data/cache/responses.sqlite)")

    @field_validator("provider", "provider_preset")
    @classmethod
    def _known_provider(cls, v: str | None) -> str | None:
        if v is not None:
            get_profile(v)  # UnknownProvider (a ValueError) names the known ones
        return v

    @model_validator(mode="after")
    def _preset_is_provider(self) -> ClientOptions:
        if self.provider_preset and not self.provider:
            object.__setattr__(self, "provider", get_profile(self.provider_preset).name)
        return self

    def endpoint(self, base_url: str, model: str, api_key_env: str | None = None) -> Endpoint:
        """The endpoint of ``model`` at ``base_url`` with these options' provider profile."""
        return Endpoint(base_url, model, api_key_env, provider=self.provider)

    def gen_params(self, *, effort: str | None = None, api: str | None = None, **extra: Any) -> GenParams:
        """The generation parameters for one call made with these options (``extra_body`` goes into
        ``GenParams.extra_body``; the provider profile shapes the request when it is sent)."""
        return GenParams(temperature=self.temperature, seed=self.seed, max_tokens=self.max_tokens,
                         effort=effort, api=api, extra=extra, extra_body=dict(self.extra_body))  # type: ignore[arg-type]

    def open_cache(self) -> ResponseCache | None:
        """The response cache, or None (``cache=False``, or a cache that cannot be opened: then a
        WARNING, and the run goes on uncached; the run directory is the source of truth)."""
        if not self.cache:
            return None
        try:
            return ResponseCache(Path(self.cache_path)) if self.cache_path else ResponseCache()
        except CacheError as exc:
            logging.getLogger(__name__).warning("%s; going on without the cache", str(exc).split("; ")[0])
            return None


def open_client(endpoint: Endpoint, options: ClientOptions, *, meter: CostMeter | None = None,
                prices: PriceTable | None = None, cache: ResponseCache | None = None) -> LLMClient:
    """The one way a stage builds its client. ``cache`` shares one cache between two clients.
    ``options.provider`` names the endpoint's profile unless the endpoint names one itself."""
    if options.provider and not endpoint.provider:
        endpoint = dataclasses.replace(endpoint, provider=options.provider)
    return LLMClient(
        endpoint,
        concurrency=options.concurrency,
        rpm=options.rpm,
        tpm=options.tpm,
        max_attempts=options.max_attempts,
        timeout_s=options.timeout_s,
        cache=cache if cache is not None else options.open_cache(),
        prices=prices,
        max_cost=options.max_cost,
        cost_meter=meter,
        backoff_base_s=options.backoff_base_s,
        deadline_s=options.deadline_s,
        down_after=options.down_after,
        down_window_s=options.down_window_s,
        first_byte_timeout_s=options.first_byte_timeout_s,
    )


class UnservedModel(UsageError, ValueError):
    """A role names a model but no base URL to reach it. Refused: running the embedded model in its
    place would file the embedded model's output under the name asked for."""


def check_served(model: str | None, base_url: str | None, what: str = "a base URL") -> None:
    """Refuse ``model`` without ``base_url`` (:class:`UnservedModel`, naming ``what`` is missing)."""
    if model and not base_url:
        raise UnservedModel(f"model {model!r} is named but {what} is not given; refusing to run the embedded "
                            "model in its place (give its base URL, or name no model for the embedded one); "
                            "nothing was run")


@dataclass(frozen=True)
class ModelRole:
    """Where one role's model lives (the solver, the judge, a construction step, a quiz-taker...).

    Neither ``model`` nor ``base_url`` means the embedded Gemma 3 270M (:func:`endpoint_or_embedded`);
    a model without a base URL is refused."""

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def name(self) -> str:
        return self.model or "embedded"


@contextlib.contextmanager
def endpoint_or_embedded(model: str | None, base_url: str | None,
                         api_key_env: str | None = None) -> Iterator[tuple[Endpoint, bool]]:
    """The endpoint named, or (with neither ``model`` nor ``base_url``) the embedded Gemma 3 270M
    for the block. A model without a base URL is refused (:class:`UnservedModel`).

    Yields ``(endpoint, embedded)``. The embedded model is a tiny *base* model: anything built on
    it demonstrates the pipeline, not a result, and reports say so.
    """
    check_served(model, base_url)
    if base_url:
        if not model:
            raise InputError("a model name is required when a base URL is given")
        yield Endpoint(base_url, model, api_key_env), False
        return
    from cresowlve_core.llm.local import local_server

    with local_server() as srv:
        yield Endpoint(srv.base_url, srv.model, None), True
