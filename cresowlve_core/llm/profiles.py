"""Provider profiles: what each OpenAI-compatible provider accepts, in one table.

The OpenAI wire format (:mod:`cresowlve_core.llm.openai_wire`) writes every request through the
endpoint's profile. A profile states:

* which sampling fields are sent: ``seed``, ``temperature``, and the token limit as ``max_tokens``
  or ``max_completion_tokens``;
* how a thinking effort is sent: ``reasoning_effort`` (Chat) / ``reasoning.effort`` (Responses),
  OpenRouter's ``reasoning`` object, or a chat-template switch (``chat_template_kwargs.enable_thinking``);
* which API is used when an effort is set and no ``--api`` is given;
* where the reported cost and the reasoning text are found in a response;
* how the key is sent (``Authorization: Bearer`` or Azure's ``api-key`` header).

The profile is chosen from the base URL's host (:func:`detect`), or named with ``--provider``
(``--judge-provider``, a grid model's ``provider:``). For servers on your own hosts, every stage
and role also reads ``CRESOWLVE_PROVIDERS``, a comma-separated list of ``host[:port]=profile``
(``CRESOWLVE_PROVIDERS="gpu-box:8000=vllm,localhost:11434=ollama"``).
Every rule here is backed by a recorded provider response in ``tests/replay/`` where one was
found; ``docs/providers.md`` lists what is verified and what is not.

``extra_body`` still has the last word: ``{"field": null}`` removes a field the profile would send.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from cresowlve_core.failures import UsageError

EffortStyle = Literal["reasoning_effort", "openrouter", "template_switch"]
TokenField = Literal["max_tokens", "max_completion_tokens"]


#: requests the embedded server decodes at once: llama.cpp's parallel slots, each with its own context
#: (llm/local.py starts it with as many); its profile's max_in_flight, so no client sends it more at once
EMBEDDED_SLOTS = 4


@dataclass(frozen=True)
class Profile:
    """What one provider accepts (see the module docstring)."""

    name: str
    hosts: tuple[str, ...] = ()  # host suffixes that select this profile
    sends_seed: bool = True
    token_field: TokenField = "max_tokens"
    #: models that only take the provider's default temperature and ``max_completion_tokens``
    reasoning_models: str | None = None
    effort_style: EffortStyle = "reasoning_effort"
    effort_api: Literal["chat", "responses"] = "chat"  # the API used when an effort is set
    serves_responses: bool = True
    cost_field: str | None = None  # dotted path of a reported USD cost in a response
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    auth_header: Literal["bearer", "api-key"] = "bearer"
    #: a base model (no chat template): stages speak to it with few-shot completion prompts over
    #: ``/v1/completions`` (:mod:`cresowlve_core.llm.base_model`), as harnesses do for base models
    base_model: bool = False
    #: calls the server decodes at once, where it is known (the embedded server's parallel slots): a
    #: client sends no more, whatever its concurrency (more would wait in the server's queue, their
    #: wait counted against the read timeout)
    max_in_flight: int | None = None
    note: str = ""

    def is_reasoning_model(self, model: str) -> bool:
        """True when ``model`` is one of this provider's reasoning models (default temperature only)."""
        bare = model.rsplit("/", 1)[-1].lower()
        return bool(self.reasoning_models and re.match(self.reasoning_models, bare))

    def default_api(self, effort_sent: bool) -> str:
        """The API used when none is named: chat, or the profile's effort API when an effort is sent."""
        return self.effort_api if effort_sent else "chat"


#: OpenAI's reasoning models: the o-series and gpt-5 (not the gpt-5-chat snapshots)
_OPENAI_REASONING = r"^(o\d|gpt-5(?!-chat))"

PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("openai", hosts=("api.openai.com",), token_field="max_completion_tokens",
            reasoning_models=_OPENAI_REASONING, effort_api="responses",
            note="reasoning models (o-series, gpt-5*) take max_completion_tokens and only the default temperature"),
    Profile("azure", hosts=(".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"),
            token_field="max_completion_tokens", reasoning_models=_OPENAI_REASONING, effort_api="responses",
            auth_header="api-key", note="the key goes in the api-key header; content filters fail one item"),
    Profile("gemini", hosts=("generativelanguage.googleapis.com",), sends_seed=False, serves_responses=False,
            note="OpenAI-compatible endpoint: no seed field, no /responses; errors come wrapped in a JSON list"),
    Profile("openrouter", hosts=("openrouter.ai",), effort_style="openrouter", serves_responses=False,
            cost_field="usage.cost", note="reports each call's cost in usage.cost; model ids carry a vendor/ prefix"),
    Profile("vllm", effort_style="template_switch",
            note="effort as chat_template_kwargs.enable_thinking (Qwen3-style templates); reasoning_content"),
    Profile("llama-cpp", effort_style="template_switch", serves_responses=False,
            note="llama.cpp server: template switch for thinking; context overflow fails one item"),
    Profile("embedded", effort_style="template_switch", serves_responses=False, base_model=True,
            max_in_flight=EMBEDDED_SLOTS,
            note="the embedded Gemma 3 270M, a base model served by llama.cpp on 127.0.0.1: stages send few-shot "
                 "completion prompts over /v1/completions (llm/base_model.py); chosen by the server itself"),
    Profile("ollama", hosts=("ollama.com",), serves_responses=False,
            note="OpenAI-compatible /v1: reasoning_effort for thinking models; reasoning in message.reasoning"),
    Profile("generic", note="any other OpenAI-compatible server: every field sent, chat unless --api responses"),
)}

#: the old ``--preset`` names, kept working: each is now a profile
PRESET_ALIASES: dict[str, str] = {"openai": "openai", "openrouter": "openrouter", "vllm-qwen3": "vllm",
                                  "llama-cpp": "llama-cpp"}


class UnknownProvider(UsageError, ValueError):
    """A provider name that is not in :data:`PROFILES` (nor an old preset name)."""


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (an old ``--preset`` name works too)."""
    key = PRESET_ALIASES.get(name, name)
    try:
        return PROFILES[key]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise UnknownProvider(f"unknown provider {name!r}; known: {known}") from None


PROVIDERS_ENV = "CRESOWLVE_PROVIDERS"


def _env_map(setting: str) -> dict[str, str]:
    """``CRESOWLVE_PROVIDERS`` (its value ``setting``) as ``{host or host:port: profile}`` (a bad entry
    is an error, not ignored)."""
    out: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in setting.split(","))):
        where, sep, name = entry.partition("=")
        if not sep or not where.strip():
            raise UnknownProvider(f"{PROVIDERS_ENV}: {entry!r} is not host[:port]=profile")
        out[where.strip().lower()] = get_profile(name.strip()).name
    return out


def check_env() -> None:
    """Refuse (:class:`UnknownProvider`) a ``CRESOWLVE_PROVIDERS`` with an entry that is not
    ``host[:port]=profile`` of a known profile (the message names the variable): what every request
    would meet, found before the first."""
    try:
        _env_map(os.environ.get(PROVIDERS_ENV, ""))
    except UnknownProvider as exc:
        message = str(exc)
        raise UnknownProvider(message if message.startswith(PROVIDERS_ENV) else f"{PROVIDERS_ENV}: {message}") from None


def detect(base_url: str) -> Profile:
    """The profile of ``base_url``'s host (``CRESOWLVE_PROVIDERS`` first); ``generic`` when none claims it.

    Asked for every request (through ``Endpoint.profile``), so the answer is remembered per base URL
    and value of ``CRESOWLVE_PROVIDERS``: a changed variable is read afresh."""
    return _detect(base_url, os.environ.get(PROVIDERS_ENV, ""))


@functools.lru_cache(maxsize=256)
def _detect(base_url: str, setting: str) -> Profile:
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    mapped = _env_map(setting)
    for where in (f"{host}:{parts.port}" if parts.port else None, host):
        if where and where in mapped:
            return PROFILES[mapped[where]]
    for profile in PROFILES.values():
        if any(host == h.lstrip(".") or host.endswith(h if h.startswith(".") else "." + h) for h in profile.hosts):
            return profile
    return PROFILES["generic"]


def resolve(provider: str | None, base_url: str) -> Profile:
    """``provider`` if named, else the profile detected from ``base_url``."""
    return get_profile(provider) if provider else detect(base_url)


__all__ = ["PRESET_ALIASES", "PROFILES", "PROVIDERS_ENV", "Profile", "UnknownProvider", "check_env", "detect", "get_profile", "resolve"]
