"""The replay server answers each provider's rules with the recorded bodies, and its scenario knobs work."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from replay.server import FIXTURES, PROVIDERS, REASONING_SUCCESS, RULES, ReplayServer, fixture_text

from cresowlve_core.evaluation.scoring import judge_request
from cresowlve_core.llm import openai_wire as wire

KEY = "replay-test-key"
BEARER = {"Authorization": f"Bearer {KEY}"}
PUZZLE = [{"role": "user", "content": "Puzzle: HE wrote the novel about a white whale. Name HIM."}]


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()


@pytest.fixture
def srv():
    with ReplayServer() as server:
        yield server


def test_every_rule_and_success_template_names_a_recorded_fixture():
    named = {r.fixture for rules in RULES.values() for r in rules}
    named |= {f for _, apis in PROVIDERS.values() for f in apis.values()} | {REASONING_SUCCESS}
    assert named and all((FIXTURES / f"{n}.json").is_file() for n in named)
    assert set(RULES) == set(PROVIDERS)


def test_gemini_refuses_seed_with_its_list_wrapped_400_and_has_no_responses(srv):
    url = srv.base_url("gemini")
    status, _, text = post(f"{url}/chat/completions", {"model": "gemini-3-flash-preview", "messages": PUZZLE,
                                                       "seed": 0, "temperature": 0.0}, BEARER)
    assert status == 400
    body = json.loads(text)
    assert isinstance(body, list) and body[0]["error"]["status"] == "INVALID_ARGUMENT"
    assert body[0]["error"]["message"] == 'Invalid JSON payload received. Unknown name "seed": Cannot find field.'
    # two refused fields: one line each, in the recorded form
    _, _, text = post(f"{url}/chat/completions", {"model": "g", "messages": PUZZLE, "seed": 1,
                                                  "reasoning": {"effort": "low"}}, BEARER)
    assert [v["description"] for v in json.loads(text)[0]["error"]["details"][0]["fieldViolations"]] == [
        'Invalid JSON payload received. Unknown name "seed": Cannot find field.',
        'Invalid JSON payload received. Unknown name "reasoning": Cannot find field.']
    status, _, text = post(f"{url}/responses", {"model": "g", "input": PUZZLE}, BEARER)
    assert (status, text) == (404, "")
    status, _, text = post(f"{url}/chat/completions", {"model": "gemini-3-flash-preview", "messages": PUZZLE,
                                                       "reasoning_effort": "minimal", "max_tokens": 64}, BEARER)
    assert status == 200
    assert wire.parse_success("/chat/completions", text).text.endswith("</Answer>")
    assert [e["rule"] for e in srv.requests("gemini")] == [
        "unknown fields refused (seed, frequency_penalty, reasoning, top_k, google, extra_body)"] * 2 + [
        "no /responses on the OpenAI-compatible endpoint", "success"]


def test_openai_reasoning_model_rules_answer_the_recorded_400s(srv):
    url = srv.base_url("openai") + "/chat/completions"
    status, _, text = post(url, {"model": "gpt-5-mini", "messages": PUZZLE, "max_tokens": 100}, BEARER)
    assert status == 400 and text == fixture_text("openai/err_400_max_tokens_unsupported_gpt5")
    status, _, text = post(url, {"model": "gpt-5-mini", "messages": PUZZLE, "temperature": 0.0}, BEARER)
    assert status == 400
    assert json.loads(text)["error"]["message"].startswith("Unsupported value: 'temperature' does not support 0.0 with")
    status, _, text = post(url, {"model": "gpt-5-mini", "messages": PUZZLE, "max_completion_tokens": 100}, BEARER)
    assert status == 200 and wire.parse_success("/chat/completions", text).usage.reasoning_tokens == 192
    # a non-reasoning model takes both older fields
    status, _, _ = post(url, {"model": "gpt-4.1", "messages": PUZZLE, "temperature": 0, "max_tokens": 100}, BEARER)
    assert status == 200
    status, _, text = post(url, {"model": "gpt-4.1-typo", "messages": PUZZLE}, BEARER)
    assert status == 404 and "The model `gpt-4.1-typo` does not exist" in text
    status, _, _ = post(url, {"model": "gpt-4.1", "messages": PUZZLE})
    assert status == 401


def test_openai_key_must_match_when_the_server_is_given_one():
    with ReplayServer(api_key=KEY) as srv:
        url = srv.base_url("openai") + "/chat/completions"
        assert post(url, {"model": "gpt-4.1", "messages": PUZZLE}, {"Authorization": "Bearer wrong"})[0] == 401
        assert post(url, {"model": "gpt-4.1", "messages": PUZZLE}, BEARER)[0] == 200
        assert KEY not in json.dumps(srv.log) and "wrong" not in json.dumps(srv.log)


def test_azure_wants_the_api_key_header(srv):
    url = srv.base_url("azure") + "/chat/completions"
    assert post(url, {"model": "gpt-4o", "messages": PUZZLE}, BEARER)[0] == 401
    status, _, text = post(url, {"model": "gpt-4o", "messages": PUZZLE}, {"api-key": KEY})
    assert status == 200 and "prompt_filter_results" in json.loads(text)
    assert srv.requests("azure")[-1]["headers"]["api-key"] == "<redacted>"


def test_judge_prompts_get_a_parseable_verdict_with_their_nonce(srv):
    url = srv.base_url("openai") + "/chat/completions"
    for prediction, expected in (("Herman Melville", "CORRECT"), ("Jules Verne", "INCORRECT")):
        jr = judge_request("item-1", "Who wrote Moby-Dick?", "Melville", prediction, other_answers="Herman Melville")
        _, _, text = post(url, {"model": "gpt-5-mini", "messages": jr.messages}, BEARER)
        assert jr.parse(wire.parse_success("/chat/completions", text).text) == expected
    paper = judge_request("item-1", "Who wrote Moby-Dick?", "Melville", "melville", protocol="paper")
    _, _, text = post(url, {"model": "gpt-4o", "messages": paper.messages}, BEARER)
    assert paper.parse(wire.parse_success("/chat/completions", text).text) == "CORRECT"


def test_solve_answers_come_from_the_answers_map():
    with ReplayServer(answers={"white whale": "Herman Melville"}) as srv:
        _, _, text = post(srv.base_url("vllm") + "/chat/completions", {"model": "qwen", "messages": PUZZLE})
        completion = wire.parse_success("/chat/completions", text)
        assert completion.text.endswith("<Answer>Herman Melville</Answer>") and completion.thoughts


def test_gemini_burst_of_list_wrapped_429s_then_success():
    with ReplayServer("gemini-burst") as srv:
        url = srv.base_url("gemini") + "/chat/completions"
        answers = [post(url, {"model": "g", "messages": PUZZLE}, BEARER) for _ in range(7)]
    assert [a[0] for a in answers] == [429] * 6 + [200]
    assert answers[0][2] == fixture_text("gemini/err_429_resource_exhausted_list")
    assert answers[0][1]["retry-after"] == "0"


def test_truncation_knob_cuts_chat_and_responses_answers():
    with ReplayServer(truncate_fraction=1.0, truncate_below=1000) as srv:
        chat = post(srv.base_url("openrouter") + "/chat/completions", {"model": "x/y", "messages": PUZZLE,
                                                                       "max_tokens": 100}, BEARER)[2]
        resp = post(srv.base_url("openai") + "/responses", {"model": "gpt-5-mini", "input": PUZZLE,
                                                            "max_output_tokens": 100}, BEARER)[2]
        roomy = post(srv.base_url("openai") + "/responses", {"model": "gpt-5-mini", "input": PUZZLE,
                                                             "max_output_tokens": 4000}, BEARER)[2]
    assert json.loads(chat)["choices"][0]["finish_reason"] == "length"
    assert json.loads(resp)["status"] == "incomplete"
    assert wire.parse_success("/responses", resp).raw["finish_reason"] == "length"
    assert wire.parse_success("/responses", roomy).text.endswith("</Answer>")
    assert [e["truncated"] for e in srv.log] == [True, True, False]


def test_openrouter_reports_the_scenario_cost_on_every_answer():
    with ReplayServer("openrouter-cost") as srv:
        for _ in range(3):
            text = post(srv.base_url("openrouter") + "/chat/completions", {"model": "qwen/q", "messages": PUZZLE},
                        BEARER)[2]
            assert json.loads(text)["usage"]["cost"] == 0.0125
        assert [e["cost"] for e in srv.log] == [0.0125] * 3


def test_quota_and_llamacpp_overflow_scenarios():
    with ReplayServer("quota") as srv:
        status, _, text = post(srv.base_url("openai") + "/chat/completions", {"model": "gpt-4.1", "messages": PUZZLE},
                               BEARER)
        assert status == 429 and text == fixture_text("openai/err_429_insufficient_quota")
    with ReplayServer(context_limit=5) as srv:
        status, _, text = post(srv.base_url("llama-cpp") + "/chat/completions", {"model": "m", "messages": PUZZLE})
        err = json.loads(text)["error"]
        assert status == 400 and (err["n_prompt_tokens"], err["n_ctx"]) == (11, 5)
        assert err["message"] == "request (11 tokens) exceeds the available context size (5 tokens), try increasing it"
        short = [{"role": "user", "content": "Hi"}]
        assert post(srv.base_url("llama-cpp") + "/chat/completions", {"model": "m", "messages": short})[0] == 200


def test_content_filter_scenario_on_azure():
    with ReplayServer(content_filter_fraction=1.0) as srv:
        status, _, text = post(srv.base_url("azure") + "/chat/completions", {"model": "gpt-4o", "messages": PUZZLE},
                               {"api-key": KEY})
    assert status == 400 and text == fixture_text("azure/err_400_content_filter_innererror")


def test_standalone_server_prints_ready_and_serves(tmp_path: Path):
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("server.py")), "--scenario", "quota"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[0] == "READY"
        status, _, _ = post(line[1] + "/openai/v1/chat/completions", {"model": "gpt-4.1", "messages": PUZZLE}, BEARER)
        assert status == 429
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_readme_names_every_rule_fixture():
    readme = (FIXTURES.parent / "README.md").read_text(encoding="utf-8")
    assert all(f"`{r.fixture}`" in readme for rules in RULES.values() for r in rules)
