"""The OpenAI wire format as pure functions: request bodies (effort on every API, extra_body),
and the classification of failures (per-item request problems vs. fatal configuration errors)."""

from __future__ import annotations

import json

import pytest

from cresowlve_core.llm.http import ConnectFailed, ProtocolFailure, ReadTimeout, ResponseTooLarge
from cresowlve_core.llm.openai_wire import (
    build_request,
    classify_exception,
    classify_status,
    deep_merge,
    interpret,
)
from cresowlve_core.llm.types import GenParams, LLMConfigError
from cresowlve_core.llm.wire import AttemptFailed, get_wire

MSGS = [{"role": "user", "content": "q"}]


def err(message: str, code: str | None = None, type_: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "code": code, "type": type_}}).encode()


# ------------------------------------------------------------------ effort is never dropped


def test_chat_sends_reasoning_effort() -> None:
    path, body = build_request("m", MSGS, GenParams(effort="high", api="chat", max_tokens=300))
    assert path == "/chat/completions"
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body and "temperature" not in body


def test_responses_sends_reasoning_effort() -> None:
    from cresowlve_core.llm.profiles import get_profile

    # OpenAI's profile takes an effort on the Responses API by default; a generic server gets chat
    path, body = build_request("m", MSGS, GenParams(effort="low"), get_profile("openai"))
    assert path == "/responses" and body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert build_request("m", MSGS, GenParams(effort="low"))[0] == "/chat/completions"


def test_completions_refuses_an_effort_it_cannot_send() -> None:
    with pytest.raises(LLMConfigError, match="cannot be sent"):
        build_request("m", MSGS, GenParams(effort="high", api="completions"))
    # the server's own form in extra_body carries it
    _, body = build_request("m", MSGS, GenParams(effort="high", api="completions",
                                                  extra_body={"chat_template_kwargs": {"enable_thinking": True}}))
    assert body["chat_template_kwargs"] == {"enable_thinking": True}


def test_extra_body_is_merged_recursively_and_last() -> None:
    _, body = build_request("m", MSGS, GenParams(effort="low", api="responses", extra={"top_p": 0.5},
                                                  extra_body={"reasoning": {"max_tokens": 100}, "top_p": 0.9}))
    assert body["reasoning"] == {"effort": "low", "summary": "auto", "max_tokens": 100}
    assert body["top_p"] == 0.9
    assert deep_merge({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_several_answers_per_call_are_refused_before_sending(api: str) -> None:
    """One answer is read per call: n > 1 would pay for answers that are dropped."""
    with pytest.raises(LLMConfigError, match=r"n=3 asks for several answers per call.*--extra-body"):
        build_request("m", MSGS, GenParams(api=api, extra_body={"n": 3}))
    with pytest.raises(LLMConfigError, match="n=2"):
        build_request("m", MSGS, GenParams(api=api, extra={"n": 2}))
    assert build_request("m", MSGS, GenParams(api=api, extra_body={"n": 1}))[1]["n"] == 1


def test_no_effort_chat_body_is_unchanged() -> None:
    _, body = build_request("m", MSGS, GenParams())
    assert body == {"model": "m", "messages": MSGS, "temperature": 0.0, "seed": 0, "max_tokens": 1024}


# ------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, err("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens",
                  "context_length_exceeded", "invalid_request_error")),
        (400, err("The response was filtered due to the prompt triggering content management policy",
                  "content_filter")),
        (400, err("Invalid prompt: your prompt was flagged as potentially violating our usage policy",
                  "invalid_prompt")),
        (400, json.dumps({"object": "error", "message": "Input is too long for this model", "code": 400}).encode()),
        (413, b"Request Entity Too Large"),
    ],
)
def test_request_problems_are_per_item(status: int, body: bytes) -> None:
    f = classify_status(status, {}, body)
    assert f.kind == "item" and f"HTTP {status}" in f.message


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, err("Invalid value for 'temperature'", "invalid_value", "invalid_request_error")),
        (400, err("Bad request: invalid parameter", "400", "fake_error")),
        (401, err("Incorrect API key provided", "invalid_api_key")),
        (403, err("You are not allowed to use this model")),
        (404, err("The model `gpt-x` does not exist", "model_not_found")),
        (404, b"<html><body><h1>404 Not Found</h1></body></html>"),
    ],
)
def test_configuration_problems_are_fatal(status: int, body: bytes) -> None:
    assert classify_status(status, {}, body).kind == "fatal"


def test_retryable_statuses_and_html_is_a_dead_sign_only_on_a_200() -> None:
    f = classify_status(429, {"retry-after": "2"}, err("slow down"))
    assert (f.kind, f.retry_after, f.dead_sign) == ("retry", 2.0, None)
    # a gateway's HTML error page on a 5xx is a retryable 5xx (its backend restarts), not a dead endpoint
    f = classify_status(502, {}, b"<!DOCTYPE html><html><title>502 Bad Gateway</title></html>")
    assert (f.kind, f.dead_sign) == ("retry", None) and "HTML page" in f.message
    with pytest.raises(AttemptFailed) as exc:
        interpret("/chat/completions", 200, {}, b"<html>login page</html>")
    assert exc.value.failure.dead_sign == "not_json" and exc.value.failure.kind == "retry"
    with pytest.raises(AttemptFailed) as exc:
        interpret("/chat/completions", 200, {}, json.dumps({"choices": []}).encode())
    assert exc.value.failure.dead_sign is None


def test_refused_and_dns_failures_are_signs_of_a_dead_endpoint() -> None:
    refused = classify_exception(ConnectFailed("connection refused by 127.0.0.1:1", refused=True))
    dns = classify_exception(ConnectFailed("DNS lookup failed for x.invalid", dns=True))
    assert (refused.dead_sign, refused.message, refused.kind) == ("unreachable", "connection refused by 127.0.0.1:1", "retry")
    assert dns.dead_sign == "unreachable" and "DNS" in dns.message
    assert classify_exception(ConnectFailed("TLS handshake failed", tls=True)).kind == "fatal"
    assert classify_exception(ConnectFailed("connect timed out", timed_out=True)).dead_sign == "unreachable"
    # connected or not, no byte of an answer: counted by the breaker (with its time window)
    assert classify_exception(ConnectFailed("network unreachable")).dead_sign == "no_answer"
    assert classify_exception(ReadTimeout("slow")).reason == "timeout"
    assert classify_exception(ReadTimeout("slow")).dead_sign is None  # an answer had begun
    assert classify_exception(ReadTimeout("silent", no_answer=True)).dead_sign == "no_answer"
    assert classify_exception(ProtocolFailure("closed early")).kind == "retry"
    assert classify_exception(ProtocolFailure("closed early")).dead_sign is None
    assert classify_exception(ProtocolFailure("closed at once", no_answer=True)).dead_sign == "no_answer"
    assert classify_exception(ResponseTooLarge("1 GB")).kind == "item"
    proxy_auth = classify_exception(ConnectFailed("the proxy wants credentials", proxy="http://p:3128", status=407))
    assert proxy_auth.kind == "fatal" and "proxy" in proxy_auth.reason
    dead_proxy = classify_exception(ConnectFailed("cannot connect to the proxy", proxy="http://p:3128", refused=True))
    assert (dead_proxy.kind, dead_proxy.dead_sign, dead_proxy.reason) == ("retry", "unreachable", "proxy unreachable")
    assert classify_exception(RuntimeError("bug")).kind == "item"


def test_wire_registry() -> None:
    assert get_wire("openai").build_request is build_request
    with pytest.raises(LLMConfigError, match="unknown wire format"):
        get_wire("carrier-pigeon")


def test_adaptive_effort_is_a_thinking_label_that_sends_no_effort_field():
    from cresowlve_core.llm.openai_wire import build_request
    from cresowlve_core.llm.profiles import get_profile
    from cresowlve_core.llm.types import GenParams

    p = GenParams(effort="adaptive")
    path, body = build_request("m", [{"role": "user", "content": "q"}], p)
    assert path == "/chat/completions" and "reasoning_effort" not in body and "reasoning" not in body
    assert build_request("m", [], p, get_profile("openrouter"))[1]["reasoning"] == {"enabled": True}
    assert build_request("m", [], p, get_profile("vllm"))[1]["chat_template_kwargs"] == {"enable_thinking": True}
