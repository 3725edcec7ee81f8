"""Thinking effort: provider forms, exactly what was sent, whether an answer shows reasoning, the cache key."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest
from fakeserver import FakeServer, Reply

from cresowlve_core.llm.cache import cache_key, canonical_json
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.effort import sent_fields, shows_reasoning
from cresowlve_core.llm.profiles import UnknownProvider, get_profile
from cresowlve_core.llm.types import Completion, Endpoint, GenParams, Usage
from cresowlve_core.runtime.options import ClientOptions

EP = Endpoint("http://127.0.0.1:1/v1", "m")
MSGS = [{"role": "user", "content": "q"}]


def _effort_fields(provider: str, effort: str | None) -> dict[str, Any]:
    sent = sent_fields(GenParams(effort=effort, api="chat"), profile=get_profile(provider))
    return {k: v for k, v in sent.items() if k in ("reasoning_effort", "reasoning", "chat_template_kwargs")}


def test_each_profile_sends_the_effort_in_its_own_form() -> None:
    assert _effort_fields("vllm", "high") == {"chat_template_kwargs": {"enable_thinking": True}}
    assert _effort_fields("vllm-qwen3", "none") == {"chat_template_kwargs": {"enable_thinking": False}}  # old preset name
    assert _effort_fields("openrouter", "medium") == {"reasoning": {"effort": "medium"}}
    assert _effort_fields("openrouter", "adaptive") == {"reasoning": {"enabled": True}}
    assert _effort_fields("openai", "high") == {"reasoning_effort": "high"}
    assert _effort_fields("gemini", "minimal") == {"reasoning_effort": "minimal"}
    with pytest.raises(UnknownProvider, match="unknown provider"):
        get_profile("nope")


def test_sent_fields_is_exactly_the_body_without_messages() -> None:
    p = GenParams(effort="high", api="chat", max_tokens=64)
    with FakeServer() as srv:
        with LLMClient(Endpoint(srv.base_url, "m", provider="vllm")) as cl:
            cl.complete_sync(MSGS, p, prompt_version="v")
        sent = {k: v for k, v in srv.requests[0].body.items() if k not in ("model", "messages")}
    assert sent_fields(p, profile=get_profile("vllm")) == sent
    assert sent == {"seed": 0, "max_completion_tokens": 64, "chat_template_kwargs": {"enable_thinking": True}}


def test_client_options_carry_provider_and_extra_body() -> None:
    o = ClientOptions(provider_preset="openrouter", extra_body={"top_k": 5, "seed": None})
    assert o.provider == "openrouter"  # the old preset name selects the profile
    p = o.gen_params(effort="low", api="chat")
    sent = sent_fields(p, profile=get_profile(o.provider))
    assert sent["reasoning"] == {"effort": "low"} and "reasoning_effort" not in sent
    assert sent["top_k"] == 5 and "seed" not in sent  # a null in extra_body removes the field
    with pytest.raises(ValueError, match="unknown provider"):
        ClientOptions(provider="nope")


def test_shows_reasoning() -> None:
    assert shows_reasoning(Completion("a", thoughts="because"))
    assert shows_reasoning(Completion("a", usage=Usage(reasoning_tokens=12)))
    assert not shows_reasoning(Completion("a", thoughts="  ", usage=Usage(reasoning_tokens=0)))
    assert not shows_reasoning(Completion("a"))
    with FakeServer(answers={"q": Reply("x", reasoning="hm", reasoning_tokens=3)}) as srv:
        with LLMClient(Endpoint(srv.base_url, "m")) as cl:
            assert shows_reasoning(cl.complete_sync(MSGS, GenParams(effort="low"), prompt_version="v"))


def test_extra_body_keys_the_cache_and_an_empty_one_keeps_old_keys() -> None:
    base = cache_key(EP, MSGS, GenParams(), prompt_version="v1")
    assert cache_key(EP, MSGS, GenParams(extra_body={"a": 1}), prompt_version="v1") != base
    # the key as computed before extra_body existed: cached answers of earlier runs still hit
    old_params: dict[str, Any] = {f.name: getattr(GenParams(), f.name) for f in dataclasses.fields(GenParams)}
    del old_params["extra_body"]
    material = {"base_url": EP.base_url, "model": "m", "api": "chat", "messages": MSGS,
                "params": old_params, "prompt_version": "v1"}
    assert base == hashlib.sha256(canonical_json(material).encode()).hexdigest()
