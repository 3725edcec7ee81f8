"""The settings of a model client and its calls: :class:`ClientOptions`.

It holds the only defaults of the project for the settings that shape a model call, each with its
description; the command line's client flags are made from these fields (``cli/options.py``), so
each flag has this one default and help. A stage that needs another value passes it explicitly.
Light to import (the command-line parser reads the fields): the cache opens on first use.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cresowlve_core.jsontext import non_finite_at
from cresowlve_core.llm.profiles import get_profile
from cresowlve_core.llm.types import CONCURRENCY, Endpoint, GenParams

if TYPE_CHECKING:
    from cresowlve_core.llm.cache import ResponseCache


def finite_extra_body(body: dict[str, Any]) -> dict[str, Any]:
    """An extra body that is strict JSON: a NaN or Infinity (YAML's ``.nan``) would be sent as is and
    recorded in the manifest as null, so it raises ``ValueError`` naming where it is."""
    if (at := non_finite_at(body)) is not None:
        raise ValueError(f"{at}: must be a finite number (NaN and Infinity are not JSON)")
    return body


class ClientOptions(BaseModel):
    """Settings of a model client and its calls. Recorded in every run manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int | None = Field(4096, ge=1, description="output budget per call; thinking models need room")
    temperature: float | None = Field(0.0, ge=0, allow_inf_nan=False, description="sampling temperature, finite and "
                                      ">= 0 (0 is as repeatable as the provider allows), or none ('default' on the "
                                      "command line): the provider's default decoding, as in the paper")
    # 0 .. 2**63-1, as --seed takes it (argtypes.MAX_SEED): providers take a signed 64-bit seed, and the
    # stages' own draws a non-negative one
    seed: int = Field(0, ge=0, le=2**63 - 1, description="sampling seed sent to the provider (where supported)")
    concurrency: int = Field(CONCURRENCY, ge=1, description="calls in flight at once")
    http_workers: int = Field(0, ge=0, description="processes that make the HTTP calls (0: the run's own event "
                              "loop); 1 or 2 lift the ceiling of one core against a fast local server (hundreds of "
                              "calls per second), and cost a little more CPU per call")
    rpm: int | None = Field(None, ge=1, description="requests-per-minute limit")
    tpm: int | None = Field(None, ge=1, description="tokens-per-minute limit")
    timeout_s: float = Field(300.0, gt=0, allow_inf_nan=False, description="read timeout of one HTTP attempt, seconds")
    deadline_s: float | None = Field(600.0, gt=0, allow_inf_nan=False, description="total deadline of one HTTP attempt, seconds, on top of "
                                     "the read timeout: a server dripping bytes is cut off")
    max_attempts: int = Field(6, ge=1, description="HTTP attempts per call, first one included")
    backoff_base_s: float = Field(0.5, ge=0, allow_inf_nan=False, description="first retry delay; doubles per attempt, jittered")
    down_after: int = Field(5, ge=1, description="consecutive dead-endpoint signs (refused, DNS, connect timeout, "
                            "non-JSON/HTML answers) that stop the run; the first three before any answer stop at once")
    down_window_s: float = Field(10.0, ge=0, allow_inf_nan=False, description="connection-level silence (accepted then closed, no "
                                 "first byte in time) stops the run only after down_after signs spanning this long")
    first_byte_timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="give up an attempt when no byte of the "
                                               "answer arrives within this (None: timeout_s); counts as a dead sign")
    provider: str | None = Field(None, description="provider profile: which fields are sent and how the effort, "
                                 "cost and reasoning are read (llm/profiles.py, docs/providers.md; none: detected "
                                 "from the base URL's host, generic otherwise)")
    provider_preset: str | None = Field(None, description="old name of the provider profile: vllm-qwen3 = vllm, "
                                        "llama-cpp, openrouter, openai (kept so old configs and manifests still read)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="JSON object merged into every request body, "
                                       "last; {\"field\": null} removes a field the profile would send; part of the "
                                       "cache key, recorded in the manifest's 'sent'")
    max_cost: float | None = Field(None, ge=0, allow_inf_nan=False, description="stop cleanly before spending more than this many USD")
    cache: bool = Field(True, description="use the SQLite response cache")
    cache_path: str | None = Field(None, description="cache file (None: data/cache/responses.sqlite)")

    @field_validator("extra_body")
    @classmethod
    def _strict_json(cls, v: dict[str, Any]) -> dict[str, Any]:
        return finite_extra_body(v)

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
        from cresowlve_core.llm.cache import CacheError, ResponseCache

        if not self.cache:
            return None
        try:
            return ResponseCache(Path(self.cache_path)) if self.cache_path else ResponseCache()
        except CacheError as exc:
            logging.getLogger(__name__).warning("%s; going on without the cache", str(exc).split("; ")[0])
            return None
