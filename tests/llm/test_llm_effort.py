"""Thinking effort: presets, exactly what was sent, whether an answer shows reasoning, the cache key."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest
from fakeserver import FakeServer, Reply

from cresowlve_core.llm.cache import cache_key, canonical_json
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.effort import preset_body, sent_fields, shows_reasoning
from cresowlve_core.llm.types import Completion, Endpoint, GenParams, Usage
from cresowlve_core.runtime.options import ClientOptions

EP = Endpoint("http://127.0.0.1:1/v1", "m")
MSGS = [{"role": "user", "content": "q"}]


def test_presets() -> None:
    assert preset_body("vllm-qwen3", "high") == {"chat_template_kwargs": {"enable_thinking": True}}
    assert preset_body("vllm-qwen3", "none") == {"chat_template_kwargs": {"enable_thinking": False}}
    assert preset_body("openrouter", "medium") == {"reasoning": {"effort": "medium"}}
    assert preset_body("openai", "high") == {}
    with pytest.raises(ValueError, match="unknown provider preset"):
        preset_body("nope", "high")


def test_sent_fields_is_exactly_the_body_without_messages() -> None:
    p = GenParams(effort="high", api="chat", max_tokens=64, extra_body=preset_body("vllm-qwen3", "high"))
    with FakeServer() as srv:
        with LLMClient(Endpoint(srv.base_url, "m")) as cl:
            cl.complete_sync(MSGS, p, prompt_version="v")
        sent = {k: v for k, v in srv.requests[0].body.items() if k not in ("model", "messages")}
    assert sent_fields(p) == sent
    assert sent == {"reasoning_effort": "high", "seed": 0, "max_completion_tokens": 64,
                    "chat_template_kwargs": {"enable_thinking": True}}


def test_client_options_carry_preset_and_extra_body() -> None:
    o = ClientOptions(provider_preset="openrouter", extra_body={"top_k": 5})
    p = o.gen_params(effort="low", api="chat")
    assert p.extra_body == {"reasoning": {"effort": "low"}, "top_k": 5}
    assert sent_fields(p)["reasoning"] == {"effort": "low"} and sent_fields(p)["reasoning_effort"] == "low"
    with pytest.raises(ValueError, match="unknown provider preset"):
        ClientOptions(provider_preset="nope")


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
