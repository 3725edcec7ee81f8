"""Provider profiles: what each provider is sent, how its errors are read, its reported cost.

The recorded real bodies these rules answer are replayed in ``tests/replay/``; here each rule is
checked on its own, with the error bodies in the providers' shapes."""

from __future__ import annotations

import json

import pytest
from fakeserver import FakeServer

from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.openai_wire import (
    build_request,
    classify_status,
    parse_chat,
    parse_responses,
    request_headers,
)
from cresowlve_core.llm.pricing import PriceTable
from cresowlve_core.llm.profiles import PROFILES, PROVIDERS_ENV, UnknownProvider, detect, get_profile
from cresowlve_core.llm.types import Endpoint, GenParams, LLMConfigError, LLMFatalError

MSGS = [{"role": "user", "content": "q"}]


@pytest.mark.parametrize("url,name", [
    ("https://api.openai.com/v1", "openai"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "gemini"),
    ("https://openrouter.ai/api/v1", "openrouter"),
    ("https://my-res.openai.azure.com/openai/v1", "azure"),
    ("https://x.services.ai.azure.com/openai/v1?api-version=preview", "azure"),
    ("https://ollama.com/v1", "ollama"),
    ("http://127.0.0.1:8765/v1", "generic"),
    ("https://evil-api.openai.com.example.org/v1", "generic"),  # a suffix match must be a real domain suffix
])
def test_profile_is_detected_from_the_host(url: str, name: str) -> None:
    assert detect(url).name == name


def test_own_hosts_are_mapped_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROVIDERS_ENV, "gpu-box:8000=vllm, localhost=ollama")
    assert detect("http://gpu-box:8000/v1").name == "vllm"
    assert detect("http://gpu-box:9000/v1").name == "generic"
    assert detect("http://localhost:11434/v1").name == "ollama"
    monkeypatch.setenv(PROVIDERS_ENV, "gpu-box=nonsense")
    with pytest.raises(UnknownProvider, match="unknown provider 'nonsense'"):
        detect("http://gpu-box/v1")


def test_every_documented_profile_exists() -> None:
    assert {"openai", "azure", "gemini", "openrouter", "vllm", "llama-cpp", "ollama", "generic"} <= set(PROFILES)
    assert get_profile("vllm-qwen3").name == "vllm"  # the old --preset names keep working


def test_gemini_is_sent_no_seed_and_takes_its_effort_on_chat() -> None:
    gemini = get_profile("gemini")
    path, body = build_request("gemini-3-flash-preview", MSGS, GenParams(effort="minimal", max_tokens=100), gemini)
    assert path == "/chat/completions" and "seed" not in body
    assert body["reasoning_effort"] == "minimal" and "temperature" not in body
    _, plain = build_request("gemini-3-flash-preview", MSGS, GenParams(), gemini)
    assert "seed" not in plain and plain["temperature"] == 0.0
    with pytest.raises(LLMConfigError, match="does not serve the Responses API"):
        build_request("gemini-3-flash-preview", MSGS, GenParams(effort="low", api="responses"), gemini)


def test_openai_reasoning_models_get_no_temperature_and_max_completion_tokens() -> None:
    openai = get_profile("openai")
    _, judge = build_request("gpt-5-mini", MSGS, GenParams(temperature=0.0, max_tokens=512), openai)
    assert "temperature" not in judge and judge["max_completion_tokens"] == 512 and "max_tokens" not in judge
    _, classic = build_request("gpt-4.1", MSGS, GenParams(temperature=0.0, max_tokens=512), openai)
    assert classic["temperature"] == 0.0 and classic["seed"] == 0 and classic["max_completion_tokens"] == 512
    path, thinking = build_request("gpt-5.4", MSGS, GenParams(effort="medium", max_tokens=900), openai)
    assert path == "/responses" and thinking["reasoning"]["effort"] == "medium" and "seed" not in thinking
    assert not openai.is_reasoning_model("gpt-5-chat-latest") and openai.is_reasoning_model("o4-mini")


def test_a_null_in_extra_body_removes_a_field() -> None:
    _, body = build_request("m", MSGS, GenParams(extra_body={"seed": None, "top_k": 3}))
    assert "seed" not in body and body["top_k"] == 3 and "null" not in json.dumps(body)


def test_azure_key_goes_in_the_api_key_header() -> None:
    assert request_headers("k", get_profile("azure")) == {"api-key": "k", "Content-Type": "application/json"}
    assert request_headers("k", get_profile("openai"))["Authorization"] == "Bearer k"


# ---------------------------------------------------------------- errors in every provider's shape

GEMINI_429 = json.dumps([{"error": {
    "code": 429, "status": "RESOURCE_EXHAUSTED",
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                 "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}])
GEMINI_400 = json.dumps([{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                    "message": "Invalid JSON payload received. Unknown name \"seed\": Cannot find field."}}])


def test_gemini_list_wrapped_429_is_a_rate_limit_with_its_retry_delay() -> None:
    f = classify_status(429, {}, GEMINI_429)
    assert (f.kind, f.dead_sign, f.retry_after, f.reason) == ("retry", None, 7.0, "rate limit")
    assert "You exceeded your current quota" in f.message and "RESOURCE_EXHAUSTED" in f.message


def test_gemini_daily_quota_stops() -> None:
    daily = GEMINI_429.replace("PerMinute", "PerDay")
    assert classify_status(429, {}, daily).kind == "fatal"


def test_list_wrapped_400_shows_its_inner_message() -> None:
    f = classify_status(400, {}, GEMINI_400)
    assert f.kind == "fatal" and f.message.startswith('HTTP 400: Invalid JSON payload received. Unknown name "seed"')
    assert "[{" not in f.message


def test_insufficient_quota_stops_while_the_same_words_from_gemini_are_a_rate_limit() -> None:
    body = json.dumps({"error": {"message": "You exceeded your current quota, please check your plan and billing "
                                            "details.", "type": "insufficient_quota", "param": None,
                                 "code": "insufficient_quota"}})
    f = classify_status(429, {}, body)
    assert f.kind == "fatal" and f.reason == "quota" and f.message.startswith("quota or billing exhausted")
    assert classify_status(402, {}, json.dumps({"error": {"message": "Insufficient credits", "code": 402}})).kind == "fatal"


def test_llama_cpp_context_overflow_is_a_per_item_error() -> None:
    body = json.dumps({"error": {"code": 400, "message": "request (9000 tokens) exceeds the available context size "
                                 "(8192 tokens), try increasing it", "type": "exceed_context_size_error",
                                 "n_prompt_tokens": 9000, "n_ctx": 8192}})
    assert classify_status(400, {}, body).kind == "item"
    # the 500 of llama.cpp builds from 2025-09 (tests/replay/fixtures/llamacpp/err_500_exceed_context_size_pr15780)
    assert classify_status(500, {}, body).kind == "item"


@pytest.mark.parametrize("body,message", [
    ('"model is overloaded"', "model is overloaded"),
    ("upstream connect error", "upstream connect error"),
    (json.dumps({"detail": "Not Found"}), "Not Found"),
])
def test_string_text_and_detail_bodies(body: str, message: str) -> None:
    assert message in classify_status(404, {}, body).message


def test_a_burst_of_six_rate_limits_is_ridden_out() -> None:
    with FakeServer(faults=["429"] * 6, retry_after="0") as srv:
        with LLMClient(Endpoint(srv.base_url, "m"), max_attempts=6, backoff_base_s=0.001) as cl:
            c = cl.complete_sync(MSGS, GenParams(), prompt_version="v")
        assert srv.total == 7
    assert c.text


def test_quota_exhausted_stops_after_one_request() -> None:
    with FakeServer(faults=["402"] * 3) as srv:
        with LLMClient(Endpoint(srv.base_url, "m"), backoff_base_s=0.001) as cl:
            with pytest.raises(LLMFatalError, match="quota or billing exhausted"):
                cl.complete_sync(MSGS, GenParams(), prompt_version="v")
        assert srv.total == 1


# ---------------------------------------------------------------- truncation and reported cost


def test_truncation_is_read_from_chat_and_responses() -> None:
    chat = parse_chat({"choices": [{"message": {"content": "Let me think"}, "finish_reason": "length"}]})
    assert chat.truncated
    resp = parse_responses({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                            "output": [{"type": "reasoning", "summary": []}]})
    assert resp.truncated and resp.text == ""
    assert not parse_chat({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}).truncated


def test_openrouter_reported_cost_is_read_and_preferred() -> None:
    body = {"choices": [{"message": {"content": "x", "reasoning": "hm"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.00042}}
    c = parse_chat(body, get_profile("openrouter"))
    assert c.reported_cost == 0.00042 and c.thoughts == "hm"
    assert parse_chat(body).reported_cost is None  # only where the profile says a cost is reported


def test_prices_are_found_with_and_without_a_vendor_prefix() -> None:
    table = PriceTable.load()
    assert table.get("mistralai/mistral-large-2512") == table.get("mistral-large-2512") is not None
    assert table.get("openai/gpt-4.1-2025-04-14") == table.get("gpt-4.1")
    assert table.get("nobody/unknown-model") is None


def test_every_paper_model_has_a_dated_sourced_price() -> None:
    import csv
    from pathlib import Path

    import yaml

    cfg = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs" / "paper_table1.yaml").read_text())
    table = PriceTable.load()
    rows = {r["model"]: r for r in csv.DictReader(
        ln for ln in (Path(__file__).resolve().parents[2] / "cresowlve_core" / "llm" / "prices.csv")
        .read_text().splitlines() if ln.strip() and not ln.startswith("#"))}
    models = [m["model"] for m in cfg["models"]] + [cfg["judge"]["model"]]
    missing = [m for m in models if table.get(m) is None]
    assert not missing
    for m in models:
        row = next(r for name, r in rows.items() if table.prices[name] is table.get(m))
        assert row["as_of"] and row["source"], m


def test_stage_provider_flag_maps_every_endpoint_the_command_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from cresowlve_core.cli import build_parser
    from cresowlve_core.cli.roles import apply_stage_provider

    monkeypatch.delenv(PROVIDERS_ENV, raising=False)
    args = build_parser().parse_args(["create", "score", "--run-dir", "r", "--judge-model", "j",
                                      "--judge-base-url", "http://gpu-box:8000/v1", "--provider", "vllm"])
    apply_stage_provider(args)
    import os

    assert os.environ[PROVIDERS_ENV] == "gpu-box:8000=vllm"
    assert detect("http://gpu-box:8000/v1").name == "vllm" and detect("http://other:8000/v1").name == "generic"
    # every stage command that takes a base URL has the flag
    for cmd in (["build"], ["synth", "--build-dir", "b"], ["create", "generate", "--run-dir", "r"],
                ["errors", "label", "--runs", "x"], ["contamination", "run"]):
        try:
            parsed = build_parser().parse_args([*cmd, "--provider", "ollama"])
        except SystemExit as exc:  # a required argument of that command: the flag itself parsed
            raise AssertionError(cmd) from exc
        assert parsed.stage_provider == "ollama"


def test_openrouter_upstream_reason_and_a_501_path_that_is_not_served() -> None:
    import pathlib

    fixtures = pathlib.Path(__file__).resolve().parents[1] / "replay" / "fixtures"
    upstream = json.loads((fixtures / "openrouter" / "err_429_upstream_rate_limited.json").read_text())
    f = classify_status(429, {}, json.dumps(upstream["body"]))
    assert f.kind == "retry" and "Provider returned error: google/gemini-2.0-flash-exp:free is temporarily" in f.message
    unimplemented = json.loads((fixtures / "gemini" / "err_501_unimplemented_list.json").read_text())
    body = unimplemented.get("body", unimplemented.get("body_text"))
    f = classify_status(501, {}, body if isinstance(body, str) else json.dumps(body))
    assert f.kind == "fatal" and "check the base URL" in f.message
