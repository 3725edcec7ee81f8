"""Every reply is an outcome: the wire format parses each body into ``Completion.outcome``
(answer, truncated, refused, filtered; failed and error through ``LLMError.outcome``), and the
client's policy counts the requests each outcome costs (a refusal or a filter: exactly one)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cresowlve_core.llm import openai_wire as wire
from cresowlve_core.llm.cache import ResponseCache
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.http import Response
from cresowlve_core.llm.pricing import ModelPrice, PriceTable
from cresowlve_core.llm.profiles import get_profile
from cresowlve_core.llm.types import (
    BudgetExceeded,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMError,
    LLMFatalError,
)
from cresowlve_core.llm.wire import AttemptFailed

MSGS = [{"role": "user", "content": "q"}]


def chat(message: dict[str, Any], finish: str | None = "stop", **choice: Any) -> dict[str, Any]:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                                   "finish_reason": finish, **choice}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}}


def responses(status: str, output: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"id": "r1", "object": "response", "model": "m", "status": status, "output": output, **top,
            "usage": {"input_tokens": 5, "output_tokens": 2}}


def message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": list(parts)}


def parse(path: str, body: dict[str, Any], provider: str = "generic") -> Completion:
    return wire.interpret(path, 200, {}, json.dumps(body).encode(), get_profile(provider))


# ------------------------------------------------------------------ the wire format: one outcome per body


def test_chat_refusal_is_refused_with_its_text() -> None:
    c = parse("/chat/completions", chat({"content": None, "refusal": "I'm sorry, I can't help with that."}))
    assert (c.outcome, c.text, c.refusal) == ("refused", "", "I'm sorry, I can't help with that.")
    assert c.raw["refusal"] == c.refusal and c.raw["finish_reason"] == "stop"
    assert not c.is_answer and not c.truncated


@pytest.mark.parametrize("text", ["The first half of an answer", None])
def test_chat_content_filter_is_filtered_with_any_partial_text(text: str | None) -> None:
    c = parse("/chat/completions", chat({"content": text}, finish="content_filter"))
    assert c.outcome == "filtered" and c.text == (text or "") and c.raw["finish_reason"] == "content_filter"
    assert not c.is_answer


def test_openrouter_native_finish_reason_decides_and_is_kept() -> None:
    c = parse("/chat/completions", chat({"content": ""}, finish="stop", native_finish_reason="SAFETY"), "openrouter")
    assert c.outcome == "filtered" and c.raw["native_finish_reason"] == "SAFETY"
    c = parse("/chat/completions", chat({"content": "ok"}, finish="stop", native_finish_reason="STOP"), "openrouter")
    assert c.outcome == "answer" and c.raw["native_finish_reason"] == "STOP"
    c = parse("/chat/completions", chat({"content": ""}, finish="stop", native_finish_reason="refusal"), "openrouter")
    assert c.outcome == "refused"


def test_gemini_native_finish_reason_passed_through_is_filtered() -> None:
    assert parse("/chat/completions", chat({"content": None}, finish="SAFETY"), "gemini").outcome == "filtered"
    assert parse("/chat/completions", chat({"content": None}, finish="RECITATION"), "gemini").outcome == "filtered"


@pytest.mark.parametrize(("error", "kind", "status"), [
    ({"code": 502, "message": "upstream down"}, "retry", 502),
    ({"code": 429, "message": "slow down"}, "retry", 429),
    ({"code": 403, "message": "flagged by moderation"}, "item", 403),  # the request was accepted: never the config
    ({"code": 402, "message": "Insufficient credits"}, "fatal", 402),  # billing still stops the run
    (None, "retry", 502),  # finish_reason "error" with no error object
], ids=["502", "429", "403", "402", "bare"])
def test_an_error_on_the_choice_is_a_failed_attempt_whatever_text_came_first(error, kind, status) -> None:
    body = chat({"content": "The answer is"}, finish="error", **({"error": error} if error else {}))
    with pytest.raises(AttemptFailed) as exc:
        parse("/chat/completions", body, "openrouter")
    f = exc.value.failure
    assert (f.kind, f.status, f.outcome) == (kind, status, "failed")
    assert (error or {"message": "with no error object"})["message"] in f.message


def test_an_error_on_the_choice_decides_only_where_the_choice_did_not_stop_cleanly() -> None:
    """With no finish_reason the error object is why; beside a clean stop the answer stands as it finished."""
    with pytest.raises(AttemptFailed) as exc:
        parse("/chat/completions", chat({"content": "partial"}, finish=None, error={"message": "stream cut"}))
    assert exc.value.failure.outcome == "failed" and "stream cut" in exc.value.failure.message
    c = parse("/chat/completions", chat({"content": "<Answer>Paris</Answer>"}, finish="stop", error={"message": "x"}))
    assert (c.outcome, c.text) == ("answer", "<Answer>Paris</Answer>")


def test_an_error_beside_the_choices_decides_as_one_on_the_choice() -> None:
    """OpenRouter: an error while the answer was produced is in the response body; at the top beside a choice that
    never finished, the partial text is no answer; beside a clean stop the answer stands."""
    body = {**chat({"content": "The answer is"}, finish=None), "error": {"code": 502, "message": "upstream failed"}}
    with pytest.raises(AttemptFailed) as exc:
        parse("/chat/completions", body, "openrouter")
    f = exc.value.failure
    assert (f.kind, f.status, f.outcome) == ("retry", 502, "failed") and "upstream failed" in f.message
    body["choices"][0]["finish_reason"] = "stop"
    assert parse("/chat/completions", body, "openrouter").outcome == "answer"


@pytest.mark.parametrize(("finish", "outcome"), [
    ("sensitive", "filtered"),  # Z.AI's filter
    ("model_context_window_exceeded", "truncated"),  # the context window, through Anthropic- and Bedrock-compatible layers
    ("model_length", "truncated"),  # Mistral's
    ("LANGUAGE", "filtered"),  # Gemini's: the text flagged for an unsupported language
    ("guardrail_intervened", "filtered"), ("content_filtered", "filtered"),  # Bedrock's guardrail and filter
    ("refusal", "refused"),  # Anthropic's stop reason passed on as the finish reason
])
def test_other_providers_finish_reasons_give_their_outcome(finish, outcome) -> None:
    c = parse("/chat/completions", chat({"content": "The answer is"}, finish=finish))
    assert (c.outcome, c.text, c.raw["finish_reason"]) == (outcome, "The answer is", finish)
    assert c.is_answer == (outcome == "truncated")  # a cut-off answer is scored as the text it is; a filtered one never


@pytest.mark.parametrize("finish", ["insufficient_system_resource", "network_error",  # DeepSeek's, Z.AI's
                                    "abort"])  # vLLM's: the engine ended the request (shut down, paused, scaled down)
def test_an_answer_the_provider_interrupted_is_a_failed_attempt(finish) -> None:
    with pytest.raises(AttemptFailed) as exc:
        parse("/chat/completions", chat({"content": "The answer is"}, finish=finish))
    f = exc.value.failure
    assert (f.kind, f.outcome) == ("retry", "failed") and f"finish_reason {finish!r}" in f.message


@pytest.mark.parametrize("incomplete", [{"reason": "max_output_tokens"}, {"reason": "something_new"}, None])
def test_an_incomplete_response_is_truncated_whatever_its_reason_unless_filtered(incomplete) -> None:
    body = responses("incomplete", [message({"type": "output_text", "text": "The answer is"})],
                     **({"incomplete_details": incomplete} if incomplete else {}))
    c = parse("/responses", body)
    assert (c.outcome, c.text, c.raw["status"]) == ("truncated", "The answer is", "incomplete")


@pytest.mark.parametrize("status", ["queued", "in_progress", "cancelled"])
def test_a_response_not_finished_is_no_answer_and_says_its_status(status) -> None:
    with pytest.raises(AttemptFailed) as exc:
        parse("/responses", responses(status, []))
    assert f"the response is {status}, not completed" in exc.value.failure.message


@pytest.mark.parametrize(("content", "text"), [
    ([{"type": "text", "text": None}, {"type": "text", "text": "<Answer>Paris</Answer>"}], "<Answer>Paris</Answer>"),
    ({"type": "text", "text": "<Answer>Paris</Answer>"}, "<Answer>Paris</Answer>"),  # one typed part, not in a list
], ids=["a part with no text", "one part"])
def test_typed_content_parts_give_their_text_strings_only(content: Any, text: str) -> None:
    assert parse("/chat/completions", chat({"content": content})).text == text


@pytest.mark.parametrize(("content", "kind"), [(1543, "number"), (True, "boolean")])
def test_content_that_is_not_text_is_no_answer_never_its_repr(content: Any, kind: str) -> None:
    with pytest.raises(AttemptFailed) as exc:
        parse("/chat/completions", chat({"content": content}))
    f = exc.value.failure
    assert (f.kind, f.reason, f.dead_sign) == ("retry", "bad 200 answer", None)
    assert f.message == f"the answer's message.content is a JSON {kind}, not text"
    with pytest.raises(AttemptFailed):
        parse("/completions", {"id": "x", "choices": [{"text": content, "finish_reason": "stop"}]})


def test_length_is_truncated_even_when_empty() -> None:
    c = parse("/chat/completions", chat({"content": ""}, finish="length"))
    assert c.outcome == "truncated" and c.truncated and c.is_answer


def test_legacy_completions_content_filter_and_length() -> None:
    body = {"id": "x", "choices": [{"text": "half", "finish_reason": "content_filter"}]}
    assert parse("/completions", body).outcome == "filtered"
    body["choices"][0]["finish_reason"] = "length"
    assert parse("/completions", body).outcome == "truncated"


def test_responses_refusal_part_is_refused() -> None:
    c = parse("/responses", responses("completed", [message({"type": "refusal", "refusal": "I can't assist."})]))
    assert (c.outcome, c.text, c.refusal) == ("refused", "", "I can't assist.")
    assert c.raw["status"] == "completed"


def test_responses_incomplete_content_filter_is_filtered_and_keeps_its_details() -> None:
    body = responses("incomplete", [message({"type": "output_text", "text": "Partial"})],
                     incomplete_details={"reason": "content_filter"})
    c = parse("/responses", body)
    assert (c.outcome, c.text) == ("filtered", "Partial")
    assert c.raw["status"] == "incomplete" and c.raw["incomplete_details"] == {"reason": "content_filter"}
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    assert parse("/responses", body).outcome == "truncated"


def test_responses_failed_is_retried_like_a_5xx_with_the_providers_reason() -> None:
    body = responses("failed", [message({"type": "output_text", "text": "some text"})],
                     error={"code": "server_error", "message": "The model produced invalid content."})
    with pytest.raises(AttemptFailed) as exc:
        parse("/responses", body)
    f = exc.value.failure
    assert (f.kind, f.outcome) == ("retry", "failed") and f.dead_sign is None
    assert "The model produced invalid content." in f.message and "server_error" in f.message


@pytest.mark.parametrize(("code", "kind", "status"), [(402, "fatal", 402), ("429", "retry", 429), (502, "retry", 502),
                                                      ("upstream_error", "retry", 502)])
def test_an_error_inside_a_200_is_classified_by_its_code(code: Any, kind: str, status: int) -> None:
    body = {"error": {"code": code, "message": "Provider returned error",
                      "metadata": {"raw": "upstream says no", "provider_name": "X"}}, "user_id": "u"}
    with pytest.raises(AttemptFailed) as exc:
        parse("/chat/completions", body, "openrouter")
    f = exc.value.failure
    assert (f.kind, f.status) == (kind, status) and f.dead_sign is None
    assert "Provider returned error: upstream says no" in f.message and "inside HTTP 200" in f.message
    assert f.message.startswith("quota or billing exhausted") == (code == 402)


def test_only_a_403_naming_what_moderation_flagged_is_filtered() -> None:
    """OpenRouter's moderation 403 names its reasons and the flagged input; any other 403 is the key's or the
    model's (fatal)."""
    flagged = {"error": {"code": 403, "message": "Your chosen model requires moderation and your input was flagged",
                         "metadata": {"reasons": ["violence"], "flagged_input": "q", "provider_name": "OpenAI"}}}
    c = wire.interpret("/chat/completions", 403, {}, json.dumps(flagged).encode(), get_profile("openrouter"))
    assert (c.outcome, c.raw["status_code"]) == ("filtered", 403) and not c.is_answer
    forbidden = {"error": {"code": 403, "message": "You are not allowed to use this model"}}
    with pytest.raises(AttemptFailed) as exc:
        wire.interpret("/chat/completions", 403, {}, json.dumps(forbidden).encode(), get_profile("openrouter"))
    assert exc.value.failure.kind == "fatal"


def test_azure_content_filter_400_is_filtered_not_an_error() -> None:
    body = {"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's content "
                                 "management policy.", "code": "content_filter", "status": 400, "param": "prompt"}}
    c = wire.interpret("/chat/completions", 400, {}, json.dumps(body).encode(), get_profile("azure"))
    assert c.outcome == "filtered" and c.text == "" and "content management policy" in c.raw["error"]


# ------------------------------------------------------------------ the client: what each outcome costs


class Scripted:
    """A transport answering from ``reply(n, body) -> (status, headers, body)``; counts requests."""

    def __init__(self, reply: Callable[[int, dict[str, Any]], tuple[int, dict[str, str], Any]]):
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []

    def factory(self, base_url: str, **_: Any) -> Scripted:
        return self

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
        self.bodies.append(json.loads(body))
        status, h, out = self.reply(len(self.bodies), self.bodies[-1])
        return Response(status, h, out if isinstance(out, bytes) else json.dumps(out).encode())

    async def aclose(self) -> None:
        pass


def run(script: Scripted, n: int = 1, cache: ResponseCache | None = None, provider: str | None = None,
        params: GenParams | None = None, **kw: Any) -> list[Completion | BaseException]:
    client = LLMClient(Endpoint("http://127.0.0.1:9/v1", "m", provider=provider), transport_factory=script.factory,
                       backoff_base_s=0.001, cache=cache, **kw)

    async def go() -> list[Completion | BaseException]:
        out: list[Completion | BaseException] = []
        async with client:
            for _ in range(n):
                try:
                    out.append(await client.complete(MSGS, params or GenParams(), prompt_version="v1"))
                except LLMError as exc:
                    out.append(exc)
        return out

    return asyncio.run(go())


def test_a_refusal_costs_exactly_one_request_and_a_rerun_hits_the_cache(tmp_path: Path) -> None:
    script = Scripted(lambda n, b: (200, {}, chat({"content": None, "refusal": "I can't help with that."})))
    cache = ResponseCache(tmp_path / "c.sqlite")
    (c,) = run(script, cache=cache)
    assert isinstance(c, Completion) and c.outcome == "refused" and len(script.bodies) == 1
    (again,) = run(script, cache=cache)
    assert isinstance(again, Completion) and again.cached
    assert (again.outcome, again.refusal) == ("refused", "I can't help with that.")
    assert len(script.bodies) == 1  # nothing sent again


def test_a_gemini_safety_block_costs_one_request() -> None:
    script = Scripted(lambda n, b: (200, {}, chat({}, finish="content_filter")))
    (c,) = run(script, provider="gemini")
    assert isinstance(c, Completion) and c.outcome == "filtered" and len(script.bodies) == 1


def test_a_failed_response_is_retried_then_errors_with_the_providers_reason() -> None:
    body = responses("failed", [], error={"code": "server_error", "message": "An error occurred while processing."})
    script = Scripted(lambda n, b: (200, {}, body))
    (exc,) = run(script, params=GenParams(api="responses"), max_attempts=3)
    assert isinstance(exc, LLMError) and not isinstance(exc, LLMFatalError)
    assert exc.outcome == "failed" and "An error occurred while processing." in str(exc)
    assert len(script.bodies) == 3


def test_a_failed_response_then_an_answer_is_the_answer() -> None:
    failed = responses("failed", [], error={"code": "server_error", "message": "try again"})
    ok = responses("completed", [message({"type": "output_text", "text": "Paris"})])
    script = Scripted(lambda n, b: (200, {}, failed if n == 1 else ok))
    (c,) = run(script, params=GenParams(api="responses"))
    assert isinstance(c, Completion) and (c.outcome, c.text) == ("answer", "Paris") and len(script.bodies) == 2


def test_openrouter_402_inside_a_200_stops_at_once_with_the_providers_message() -> None:
    body = {"error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/credits"}}
    script = Scripted(lambda n, b: (200, {}, body))
    (exc,) = run(script, provider="openrouter")
    assert isinstance(exc, LLMFatalError) and "Insufficient credits" in str(exc)
    assert len(script.bodies) == 1  # not retried (a run stops on the fatal error: tests/replay)


def test_an_empty_answer_is_still_retried_and_is_an_error() -> None:
    script = Scripted(lambda n, b: (200, {}, chat({"content": ""})))
    (exc,) = run(script, max_attempts=2)
    assert isinstance(exc, LLMError) and exc.outcome == "error" and len(script.bodies) == 2


# ------------------------------------------------------------------ bytes and numbers


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -3, True, "12", 1e999, 1e300, 2**32 - 1 + 10**10,
                                   pytest.param(10**400, id="an integer no float holds")])
def test_a_usage_count_or_cost_that_is_not_a_number_is_unknown(value: Any) -> None:
    body = chat({"content": "Paris"})
    body["usage"] = {"prompt_tokens": value, "completion_tokens": 2, "cost": value,
                     "completion_tokens_details": {"reasoning_tokens": value}}
    text = json.dumps(body)  # NaN and Infinity as the literals a broken provider sends
    c = wire.interpret("/chat/completions", 200, {}, text.encode(), get_profile("openrouter"))
    assert (c.outcome, c.text) == ("answer", "Paris")
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.reasoning_tokens) == (None, 2, None)
    assert c.reported_cost is None and len(c.raw["unusable_numbers"]) == 3


def test_a_fractional_token_count_is_unknown_not_rounded() -> None:
    body = chat({"content": "Paris"})
    body["usage"] = {"prompt_tokens": 12.7, "completion_tokens": 2}
    c = wire.interpret("/chat/completions", 200, {}, json.dumps(body).encode(), get_profile("openrouter"))
    assert (c.usage.input_tokens, c.usage.output_tokens) == (None, 2) and c.raw["unusable_numbers"] == ["prompt_tokens=12.7"]


def test_whole_and_plausible_numbers_are_kept() -> None:
    body = chat({"content": "Paris"})
    body["usage"] = {"prompt_tokens": 12.0, "completion_tokens": 10**7, "cost": 9.5}  # 12.0: a JSON number from JavaScript
    c = wire.interpret("/chat/completions", 200, {}, json.dumps(body).encode(), get_profile("openrouter"))
    assert (c.usage.input_tokens, c.usage.output_tokens, c.reported_cost) == (12, 10**7, 9.5)
    assert "unusable_numbers" not in c.raw


def test_odd_numbers_warn_once_per_client(caplog: pytest.LogCaptureFixture) -> None:
    body = chat({"content": "Paris"})
    body["usage"] = {"prompt_tokens": float("nan"), "completion_tokens": -1}
    script = Scripted(lambda n, b: (200, {}, json.dumps(body).encode()))
    with caplog.at_level("WARNING"):
        out = run(script, n=3)
    assert all(isinstance(c, Completion) and c.text == "Paris" and c.cost is None for c in out)
    assert len([r for r in caplog.records if "not a usable number" in r.getMessage()]) == 1


def test_a_body_with_invalid_utf8_is_kept_flagged_and_never_looks_down(caplog: pytest.LogCaptureFixture) -> None:
    good = json.dumps(chat({"content": "Москва"}), ensure_ascii=False).encode()
    cut = good.replace("Москва".encode(), "Москва".encode()[:-1])  # the last Cyrillic letter cut in half
    assert cut != good
    script = Scripted(lambda n, b: (200, {}, cut))
    with caplog.at_level("WARNING"):
        out = run(script, n=8, down_after=2)
    assert len(script.bodies) == 8  # one request each, none retried, the breaker never trips
    assert all(isinstance(c, Completion) and c.text == "Москв\ufffd" and c.raw["invalid_utf8"] for c in out)
    assert len([r for r in caplog.records if "not UTF-8" in r.getMessage()]) == 1
    assert "looks down" not in caplog.text


def test_an_html_page_with_status_200_says_so_and_asks_about_the_base_url() -> None:
    page = b'<!DOCTYPE html><html><head><title>Open WebUI</title></head><body>Loading</body></html>'
    with pytest.raises(AttemptFailed) as err:
        wire.interpret("/chat/completions", 200, {"content-type": "text/html"}, page, get_profile("generic"))
    message = err.value.failure.message
    assert message.startswith("unparseable response body: an HTML page, not an API response (Open WebUI Loading)")
    assert "is the base URL the API's" in message and err.value.failure.dead_sign == "not_json"


def test_an_event_stream_answered_to_a_plain_request_is_named() -> None:
    stream = b'data: {"choices": [{"delta": {"content": "Pa"}}]}\n\ndata: {"choices": [{"delta": {"content": "ris"}}]}\n\ndata: [DONE]\n\n'
    with pytest.raises(AttemptFailed) as err:
        wire.interpret("/chat/completions", 200, {"content-type": "text/event-stream"}, stream, get_profile("generic"))
    assert err.value.failure.message.startswith("unparseable response body: a server-sent event stream, not one JSON answer")


# ------------------------------------------------------------------ the budget: an answer of unknown cost


def unpriced_usage(reply: dict[str, Any], usage: Any) -> dict[str, Any]:
    return {**reply, "usage": usage} if usage is not None else {k: v for k, v in reply.items() if k != "usage"}


@pytest.mark.parametrize("usage", [None, {"prompt_tokens": None, "completion_tokens": None},
                                   {"prompt_tokens": "12", "completion_tokens": 7},
                                   # a server that does not count (vllm-project/vllm#23007): before, $0 a call
                                   {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}])
def test_a_priced_answer_without_usable_token_counts_stops_a_budgeted_run(usage: Any) -> None:
    """Before: its cost was unknown, counted as nothing spent, and ``max_cost`` never stopped the run
    (3 of 3 answered under a budget below their bounds, exit 0, no word of it)."""
    script = Scripted(lambda n, b: (200, {}, unpriced_usage(chat({"content": "<Answer>Paris</Answer>"}), usage)))
    out = run(script, n=3, max_cost=1.0, prices=PriceTable({"m": ModelPrice(1.0, 2.0)}))
    assert len(script.bodies) == 1  # the answer is kept; nothing more is sent
    assert isinstance(out[0], Completion) and out[0].text == "<Answer>Paris</Answer>" and out[0].cost is None
    assert all(isinstance(e, LLMConfigError) and "reported no usable token counts" in str(e)
               and "the budget cannot be enforced" in str(e) for e in out[1:])


def test_a_budgeted_run_goes_on_past_a_request_the_provider_refused_with_its_filter() -> None:
    """Azure's content-filter 400 (recorded) has no usage: no answer was generated, none is missing a cost."""
    fixture = json.loads((Path(__file__).parents[1] / "replay/fixtures/azure/err_400_content_filter_innererror.json")
                         .read_text(encoding="utf-8"))
    filtered = (400, {}, fixture["body_text"].encode())
    script = Scripted(lambda n, b: filtered if n == 1 else (200, {}, chat({"content": "<Answer>Paris</Answer>"})))
    out = run(script, n=2, provider="azure", max_cost=1.0, prices=PriceTable({"m": ModelPrice(1.0, 2.0)}))
    assert [c.outcome for c in out if isinstance(c, Completion)] == ["filtered", "answer"] and len(script.bodies) == 2


# ------------------------------------------------------------------ an answer billed with no text

#: a reasoning model's answer with its reasoning and no content on a clean stop, as hermes-agent#109205
#: quotes it (NVIDIA Nemotron on vLLM: finish_reason stop, content None, the answer in ``reasoning``,
#: prompt_tokens 1017932). DOC-SHAPED: the issue gives these fields, not the whole body; completion_tokens
#: is ours. kekzl/imp#1442 and lmstudio-bug-tracker#1602 report the same shape (content "", finish stop).
REASONING_ONLY = {"id": "c1", "object": "chat.completion", "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                       "reasoning": "VAULT-DELTA-77315"}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 1017932, "completion_tokens": 9}}
PER_ATTEMPT = 1017932 * 1.0 / 1e6 + 9 * 2.0 / 1e6


def test_answers_billed_with_no_text_are_spent_money_and_a_budget_stops_them(caplog: pytest.LogCaptureFixture) -> None:
    """Before: each of the 6 attempts was billed and none reached the meter (spent 0.0), so a budget
    never stopped the retries."""
    script = Scripted(lambda n, b: (200, {}, REASONING_ONLY))
    prices = PriceTable({"m": ModelPrice(1.0, 2.0)})
    client = LLMClient(Endpoint("http://127.0.0.1:9/v1", "m"), transport_factory=script.factory,
                       backoff_base_s=0.001, prices=prices)

    async def once(c: LLMClient) -> BaseException:
        async with c:
            with pytest.raises(LLMError) as exc:
                await c.complete(MSGS, GenParams(), prompt_version="v1")
        return exc.value

    err = asyncio.run(once(client))
    assert "response has empty text" in str(err) and len(script.bodies) == 6
    meter = client.cost_meter.summary()
    assert meter["n_unusable"] == 6 and meter["spent"] == pytest.approx(6 * PER_ATTEMPT)
    assert meter["unusable_cost"] == pytest.approx(6 * PER_ATTEMPT) and meter["n_calls"] == 0
    assert "answered with no text (finish_reason stop, 9 output token(s)" in caplog.text

    budgeted = Scripted(lambda n, b: (200, {}, REASONING_ONLY))
    client = LLMClient(Endpoint("http://127.0.0.1:9/v1", "m"), transport_factory=budgeted.factory,
                       backoff_base_s=0.001, prices=prices, max_cost=3.0)
    err = asyncio.run(once(client))
    assert isinstance(err, BudgetExceeded) and len(budgeted.bodies) == 3  # 3 x $1.02 > $3: no fourth
    assert client.cost_meter.spent == pytest.approx(3 * PER_ATTEMPT)


#: the same answer with the usage Gemini reports for an empty answer: prompt and total counts, no output count
#: (google/generative-ai-docs#235 quotes ``usageMetadata: {promptTokenCount: 171, totalTokenCount: 171}`` and no
#: ``candidatesTokenCount``). DOC-SHAPED: that body is Gemini's own API, put in the Chat Completions names.
REASONING_ONLY_UNCOUNTED = {**REASONING_ONLY, "usage": {"prompt_tokens": 171, "total_tokens": 171}}


def test_an_answer_billed_with_no_text_at_an_unknown_cost_stops_a_budgeted_run() -> None:
    """Before: each attempt was billed at an unknown cost (no output count), the meter counted it as unknown
    and spent nothing, and ``max_cost`` went on admitting attempts (a 9-item eval under a $1 budget: 12 billed, exit 1); an
    answer with text and no usable counts stops the run. Now the first such attempt stops it, as that answer
    does: the budget cannot hold what it cost."""
    script = Scripted(lambda n, b: (200, {}, REASONING_ONLY_UNCOUNTED))
    out = run(script, n=2, max_cost=1.0, prices=PriceTable({"m": ModelPrice(1.0, 2.0)}))
    assert len(script.bodies) == 1
    assert all(isinstance(e, LLMConfigError) and "billed an answer with no text whose cost is unknown" in str(e)
               and "input_tokens=171, output_tokens=None" in str(e) for e in out)


def test_thinking_tokens_only_total_tokens_counts_are_spent_and_named_once(caplog: pytest.LogCaptureFixture) -> None:
    """Gemini's recorded usage (66 prompt, 6 completion, 100 total): the 28 thinking tokens left out of
    ``completion_tokens`` are billed output, so they count against the budget, with one WARNING."""
    fixture = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "gemini" / "chat_success.json"
    body = json.loads(fixture.read_text(encoding="utf-8"))["body"]
    script = Scripted(lambda n, b: (200, {}, body))
    prices = PriceTable({"m": ModelPrice(input_per_mtok=1.0, output_per_mtok=10.0)})
    with caplog.at_level("WARNING"):
        out = run(script, n=2, provider="gemini", prices=prices, max_cost=1.0)
    assert all(isinstance(c, Completion) and c.usage.output_tokens == 34 and c.cost == pytest.approx(406e-6)
               for c in out)
    assert len([r for r in caplog.records if "total_tokens above" in r.getMessage()]) == 1


def test_an_unusable_reported_cost_replaced_by_the_price_tables_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """OpenRouter's usage.cost as a string: the cost recorded is the price table's (cost_source
    price_table), and the WARNING says so rather than that the cost is unknown."""
    body = chat({"content": "Paris"})
    body["usage"] = {"prompt_tokens": 10, "completion_tokens": 2, "cost": "0.004"}
    script = Scripted(lambda n, b: (200, {}, body))
    with caplog.at_level("WARNING"):
        (c,) = run(script, provider="openrouter", prices=PriceTable({"m": ModelPrice(1.0, 2.0)}))
    assert isinstance(c, Completion) and c.reported_cost is None and c.cost == pytest.approx(14e-6)
    (warning,) = [r.getMessage() for r in caplog.records if "not a usable number" in r.getMessage()]
    assert "usage.cost='0.004'" in warning and "the cost is the price table's in place of usage.cost" in warning
