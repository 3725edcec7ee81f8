"""Every recorded provider body (tests/replay/fixtures) read by the project's wire functions.

Expectations: the one-line message is the provider's own inner
message; rate limits are retried and never counted as a dead endpoint; a problem of one request
(context length in any wording, content filter) fails that item; auth, unknown model and
unsupported parameters are fatal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cresowlve_core.llm import openai_wire as wire

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ALL = sorted(p.relative_to(FIXTURES).with_suffix("").as_posix() for p in FIXTURES.glob("*/*.json"))


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def body_of(name: str) -> str:
    fx = load(name)
    return fx["body_text"] if "body_text" in fx else json.dumps(fx["body"], ensure_ascii=False)


# --------------------------------------------------------------------------- the fixtures themselves


def test_at_least_thirty_recorded_bodies_with_a_named_source():
    with_body = [n for n in ALL if body_of(n).strip()]
    assert len(with_body) >= 30, with_body
    for name in ALL:
        fx = load(name)
        assert fx["provider"] == name.split("/")[0] or name.startswith("generic/"), name
        assert fx["api"].startswith("/") and 200 <= fx["status"] < 600, name
        if fx["source"].get("doc_shaped"):  # built from the provider's documentation, said so in the note
            assert fx["source"]["url"].startswith("https://") and fx["note"].startswith("DOC-SHAPED"), name
        else:
            assert fx["source"]["url"].startswith("https://github.com/"), name
        assert fx["note"].strip(), name
        if body_of(name).strip():
            json.loads(body_of(name))  # every recorded body is valid JSON (objects, lists)


def test_sources_md_lists_every_fixture():
    table = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    missing = [n for n in ALL if f"`{n}.json`" not in table]
    assert not missing


# --------------------------------------------------------------------------- successes

SUCCESSES = [
    # fixture, text starts with, thoughts start with (None: no thoughts), (input, output, reasoning) tokens, finish
    ("openai/chat_gpt4o_mini_success", "Hello! How can I assist you today?", None, (8, 9, 0), "stop"),
    ("openai/chat_o3_mini_reasoning_tokens", "The capital of Mexico is Mexico City.", None, (13, 238, 192), "stop"),
    ("openai/chat_gpt5_success", "Paris.", None, (13, 11, 0), "stop"),
    ("openai/responses_gpt5_reasoning_summary", "Here’s a simple, safe way to cross a street",
     "**Considering street crossing safety**", (13, 2199, 1920), "stop"),
    # completion_tokens 6, total_tokens 100: the 28 thinking tokens Gemini leaves out are output (and reasoning) tokens
    ("gemini/chat_success", "The current time is Noon.", None, (66, 34, 28), "stop"),
    ("openrouter/chat_gpt5_mini_cost_reasoning", "Here’s a concise but thorough overview of Mars",
     "**Exploring Mars Overview**", (17, 2177, 960), "stop"),
    ("openrouter/chat_glm46_reasoning_text", "Of course. This is an excellent question",
     "1.  **Deconstruct the User's Prompt:**", (24, 2801, 0), "stop"),
    ("openrouter/chat_length_with_cost", "I'll solve this step by step!", None, (2572, 100, 0), "length"),
    ("ollama/chat_qwen3_reasoning", '{ "city": "Paris", "country": "France" }',
     "Okay, the user is asking for the capital of France.", (136, 15, None), "stop"),
    ("llamacpp/chat_gpt_oss_timings", "Hello! 👋 How can I help you today?", "Need friendly greeting.", (68, 25, None), "stop"),
    ("azure/chat_gpt4o_prompt_filter_results", "The capital of France is **Paris**.", None, (14, 9, 0), "stop"),
    ("generic/chat_deepseek_reasoner_reasoning_content", "Crossing the street safely",
     "Okay, the user is asking how to cross the street.", (12, 789, 415), "stop"),
    ("ollama/chat_lone_surrogate", '{ "city": "Paris", "country": "France" }',
     "Okay, the user is asking for the capital of France.", (136, 15, None), "stop"),
]


def test_every_success_fixture_is_covered():
    covered = [s[0] for s in SUCCESSES] + [o[0] for o in OUTCOMES]
    assert sorted(covered) == sorted(n for n in ALL if load(n)["status"] == 200)


@pytest.mark.parametrize(("name", "text", "thoughts", "tokens", "finish"), SUCCESSES, ids=[s[0] for s in SUCCESSES])
def test_success_bodies_parse(name, text, thoughts, tokens, finish):
    fx = load(name)
    completion = wire.parse_success(fx["api"], body_of(name))
    assert completion.text.lstrip().startswith(text)
    if thoughts is None:
        assert completion.thoughts is None
    else:
        assert completion.thoughts is not None and completion.thoughts.startswith(thoughts)
    u = completion.usage
    assert (u.input_tokens, u.output_tokens, u.reasoning_tokens) == tokens
    assert completion.raw["finish_reason"] == finish


# --------------------------------------------------------------------------- errors

ERRORS = [
    # fixture, kind, the provider's inner message (start)
    ("openai/err_400_context_length_exceeded", "item", "This model's maximum context length is 4097 tokens."),
    ("openai/err_400_max_tokens_unsupported_gpt5", "fatal", "Unsupported parameter: 'max_tokens' is not supported"),
    ("openai/err_400_max_tokens_unsupported_o1", "fatal", "Unsupported parameter: 'max_tokens' is not supported"),
    ("openai/err_400_temperature_unsupported_gpt5", "fatal", "Unsupported value: 'temperature' does not support 0"),
    ("openai/err_400_invalid_temperature_value", "fatal", "Invalid 'temperature': decimal below minimum value."),
    ("openai/err_401_invalid_api_key", "fatal", "Incorrect API key provided: sk-VKMIs"),
    ("openai/err_404_model_not_found", "fatal", "The model `gpt-5.2-proo` does not exist"),
    ("azure/err_400_content_filter", "item", "The response was filtered due to the prompt triggering Azure OpenAI"),
    ("azure/err_400_content_filter_innererror", "item", "The response was filtered due to the prompt triggering"),
    ("azure/err_400_temperature_unsupported_gpt5", "fatal", "Unsupported value: 'temperature' does not support 0"),
    ("openai/err_400_reasoning_summary_unverified_org", "fatal", "Your organization must be verified to generate"),
    ("generic/err_400_data_inspection_failed", "item", "Input data may contain inappropriate content."),
    ("generic/err_400_content_filter_type_moonshot", "item", "The request was rejected because it was considered"),
    ("openrouter/err_403_moderation_flagged", "fatal", "Your chosen model requires moderation and your input"),
    # 6048 tokens asked for the completion of a 6048-token context: no prompt fits, a wrong --max-tokens
    ("vllm/err_400_context_length", "fatal", "This model's maximum context length is 6048 tokens."),
    ("vllm/err_400_max_tokens_negative", "fatal", "max_tokens must be at least 1, got -186."),
    ("vllm/err_400_max_tokens_over_context", "fatal", "'max_tokens' (2049) cannot be greater than the model's"),
    ("openai/err_429_rate_limit_reset_headers", "retry", "Rate limit reached for gpt-4 in organization"),
    ("openrouter/err_429_upstream_rate_limited", "retry", "Provider returned error"),
    ("ollama/err_404_model_not_found_native", "fatal", "model 'custom-phi3-32k-Q4_K_M' not found"),
]


@pytest.mark.parametrize(("name", "kind", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_bodies_classify(name, kind, message):
    fx = load(name)
    failure = wire.classify_status(fx["status"], fx["headers"], body_of(name))
    assert failure.kind == kind
    assert failure.status == fx["status"]
    assert failure.message.startswith(f"HTTP {fx['status']}: {message}")
    assert failure.dead_sign is None  # a provider's JSON error is never a sign of a dead endpoint


# --------------------------------------------------------------------------- errors in every provider's shape

SHAPES = [
    # fixture, kind, the provider's inner message (start): never the raw JSON list
    ("gemini/err_400_unknown_field_seed_list", "fatal",
     'Invalid JSON payload received. Unknown name "frequency_penalty": Cannot find field. Invalid JSON payload received. '
     'Unknown name "seed"'),
    ("gemini/err_400_unknown_field_google_list", "fatal", 'Invalid JSON payload received. Unknown name "google"'),
    ("gemini/err_400_unknown_fields_reasoning_top_k_list", "fatal",
     'Invalid JSON payload received. Unknown name "extra_body" at \'extra_body\''),
    ("gemini/err_429_resource_exhausted_list", "retry", "Resource has been exhausted (e.g. check quota)."),
    ("gemini/err_429_resource_exhausted_try_later_list", "retry", "Resource exhausted. Please try again later."),
    ("gemini/err_404_responses_not_served", "fatal", "(empty body)"),
    # billing exhausted: retrying cannot help, the run stops at once
    ("openai/err_429_insufficient_quota", "fatal", "You exceeded your current quota"),
    ("openai/err_429_insufficient_quota_docs_link", "fatal", "You exceeded your current quota"),
    # llama.cpp's context overflow, in both wordings and as the 500 of PR #15780's builds, fails one item
    ("llamacpp/err_400_exceed_context_size", "item", "request (8708 tokens) exceeds the available context size (8192 tokens)"),
    ("llamacpp/err_400_exceed_context_size_older_wording", "item", "the request exceeds the available context size."),
    ("llamacpp/err_500_exceed_context_size_pr15780", "item", "the request exceeds the available context size."),
]


@pytest.mark.parametrize(("name", "kind", "message"), SHAPES, ids=[s[0] for s in SHAPES])
def test_error_shapes_give_the_inner_message_and_class(name, kind, message):
    fx = load(name)
    failure = wire.classify_status(fx["status"], fx["headers"], body_of(name))
    assert failure.kind == kind
    assert message in failure.message and "[{" not in failure.message and '"details"' not in failure.message
    if body_of(name).strip():
        assert failure.dead_sign is None  # a list-wrapped 429 is a rate limit, never "looks down"


def test_every_error_fixture_has_an_expectation():
    covered = {e[0] for e in ERRORS} | {s[0] for s in SHAPES} | set(NOT_ASSERTED)
    assert covered == {n for n in ALL if load(n)["status"] >= 400}


#: error fixtures whose class no expectation above pins (kept for the replay server and the record)
NOT_ASSERTED = {
    "gemini/err_501_unimplemented_list": "a 5xx that cannot succeed (wrong base URL); no expected class",
}


# --------------------------------------------------------------------------- reported cost and truncation (17.3, 17.4)


def test_openrouter_reported_cost_is_read_from_usage_cost():
    from cresowlve_core.llm.profiles import get_profile

    openrouter = get_profile("openrouter")
    for name, cost in (("openrouter/chat_gpt5_mini_cost_reasoning", 0.00435825),
                       ("openrouter/chat_length_with_cost", 0.00341475),
                       ("openrouter/chat_glm46_reasoning_text", None)):  # usage.include not requested: no cost
        assert wire.parse_success("/chat/completions", body_of(name), openrouter).reported_cost == cost
    # other providers report none
    assert wire.parse_success("/chat/completions", body_of("openai/chat_gpt5_success"),
                              get_profile("openai")).reported_cost is None


def test_gemini_thinking_tokens_outside_completion_tokens_are_priced_as_output():
    """Gemini's recorded usage (66 prompt, 6 completion, 100 total) leaves 28 thinking tokens out of
    ``completion_tokens``; they are billed as output, so the price table's cost counts them."""
    from cresowlve_core.llm.pricing import PriceTable
    from cresowlve_core.llm.profiles import get_profile

    completion = wire.parse_success("/chat/completions", body_of("gemini/chat_success"), get_profile("gemini"))
    assert (completion.usage.output_tokens, completion.raw["uncounted_output_tokens"]) == (34, 28)
    table = PriceTable.load()
    price = table.get("gemini-3-flash-preview")
    assert price is not None
    assert table.cost("gemini-3-flash-preview", completion.usage) == pytest.approx(
        (66 * price.input_per_mtok + 34 * price.output_per_mtok) / 1e6)
    # a reply whose total is input + output (OpenAI's) is unchanged and unflagged
    openai = wire.parse_success("/chat/completions", body_of("openai/chat_o3_mini_reasoning_tokens"))
    assert openai.usage.output_tokens == 238 and "uncounted_output_tokens" not in openai.raw


def test_openrouter_byok_cost_adds_the_upstream_charge_to_the_fee():
    """DOC-SHAPED (OpenRouter's usage-accounting page: with your own key, ``usage.cost`` is OpenRouter's
    fee and ``cost_details.upstream_inference_cost`` what the provider charged the key): the recorded
    gpt-5-mini body, marked BYOK, costs the fee plus the upstream charge; a BYOK call without an upstream
    charge has an unknown cost, named. Recorded non-BYOK bodies are unchanged (is_byok false)."""
    from cresowlve_core.llm.profiles import get_profile

    openrouter = get_profile("openrouter")
    body = load("openrouter/chat_gpt5_mini_cost_reasoning")["body"]
    body["usage"].update(is_byok=True, cost=0.0002179125)
    body["usage"]["cost_details"]["upstream_inference_cost"] = 0.00435825
    byok = wire.parse_success("/chat/completions", json.dumps(body), openrouter)
    assert byok.reported_cost == pytest.approx(0.0002179125 + 0.00435825)
    body["usage"]["cost_details"]["upstream_inference_cost"] = None
    unknown = wire.parse_success("/chat/completions", json.dumps(body), openrouter)
    assert unknown.reported_cost is None
    assert unknown.raw["unusable_numbers"] == ["usage.cost_details.upstream_inference_cost=None (usage.is_byok=True)"]
    recorded = wire.parse_success("/chat/completions", body_of("openrouter/chat_gemini_content_filter"), openrouter)
    assert recorded.reported_cost == 0 and "unusable_numbers" not in recorded.raw


@pytest.mark.parametrize("flag", ["true", 1, None], ids=["a string", "a number", "null"])
def test_a_byok_flag_that_is_not_a_boolean_leaves_the_cost_unknown(flag):
    """The recorded gpt-5-mini body with ``usage.is_byok`` not a boolean: before, only ``true`` counted, so "true" (a
    string) or 1 read ``usage.cost`` as the whole cost though it may be OpenRouter's fee alone (the upstream charge
    to the key left out). Now such a flag leaves the cost unknown, named; null (no flag) keeps the recorded cost."""
    from cresowlve_core.llm.profiles import get_profile

    body = load("openrouter/chat_gpt5_mini_cost_reasoning")["body"]
    body["usage"]["is_byok"] = flag
    c = wire.parse_success("/chat/completions", json.dumps(body), get_profile("openrouter"))
    if flag is None:
        assert c.reported_cost == 0.00435825 and "unusable_numbers" not in c.raw
    else:
        assert c.reported_cost is None and c.raw["unusable_numbers"] == [f"usage.is_byok={flag!r}"]


def test_truncation_is_visible_on_the_completion():
    assert wire.parse_success("/chat/completions", body_of("openrouter/chat_length_with_cost")).truncated
    assert not wire.parse_success("/chat/completions", body_of("openrouter/chat_gpt5_mini_cost_reasoning")).truncated
    assert not wire.parse_success("/responses", body_of("openai/responses_gpt5_reasoning_summary")).truncated


# --------------------------------------------------------------------------- every reply is an outcome

OUTCOMES = [
    # fixture, provider profile, outcome, text, refusal (None: none), raw fields that decided it
    ("openai/chat_gpt4o_refusal", "openai", "refused", "", "I'm sorry, but I can't assist with that request.",
     {"finish_reason": "stop"}),
    ("openai/responses_refusal_part", "openai", "refused", "", "I'm sorry, but I can't assist with that request.",
     {"status": "completed"}),
    ("openai/responses_incomplete_content_filter", "openai", "filtered", "The first part of the answer is", None,
     {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}),
    ("azure/chat_finish_content_filter", "azure", "filtered", "", None, {"finish_reason": "content_filter"}),
    ("gemini/chat_safety_block_content_filter", "gemini", "filtered", "", None, {"finish_reason": "content_filter"}),
    ("openrouter/chat_gemini_content_filter", "openrouter", "filtered", "", None, {"finish_reason": "content_filter"}),
]
#: 200 bodies that are no completion: (fixture, kind, status classified as, the provider's message)
NOT_COMPLETIONS = [
    ("vllm/err_200_400_context_length_flat", "fatal", 400, "This model's maximum context length is 6048 tokens."),
    ("openai/responses_failed_server_error", "retry", 200, "The model produced invalid content."),
    ("openrouter/err_200_402_insufficient_credits", "fatal", 402, "Insufficient credits. This account never purchased"),
    ("openrouter/chat_choice_error_502", "retry", 502, "This model is currently experiencing high demand."),
]
OUTCOMES += [(n, "", "", "", None, {}) for n, *_ in NOT_COMPLETIONS]  # covered below


@pytest.mark.parametrize(("name", "provider", "outcome", "text", "refusal", "raw"),
                         [o for o in OUTCOMES if o[2]], ids=[o[0] for o in OUTCOMES if o[2]])
def test_outcome_bodies_parse_into_their_outcome(name, provider, outcome, text, refusal, raw):
    from cresowlve_core.llm.profiles import get_profile

    fx = load(name)
    c = wire.interpret(fx["api"], fx["status"], fx["headers"], body_of(name).encode(), get_profile(provider))
    assert (c.outcome, c.text, c.refusal) == (outcome, text, refusal)
    assert {k: c.raw.get(k) for k in raw} == raw
    assert not c.is_answer


@pytest.mark.parametrize(("name", "kind", "status", "message"), NOT_COMPLETIONS, ids=[n[0] for n in NOT_COMPLETIONS])
def test_a_200_that_is_no_completion_is_classified_with_the_providers_message(name, kind, status, message):
    from cresowlve_core.llm.profiles import get_profile
    from cresowlve_core.llm.wire import AttemptFailed

    fx = load(name)
    with pytest.raises(AttemptFailed) as exc:
        wire.interpret(fx["api"], fx["status"], fx["headers"], body_of(name).encode(), get_profile("openrouter"))
    f = exc.value.failure
    assert (f.kind, f.status) == (kind, status) and message in f.message and f.dead_sign is None


@pytest.mark.parametrize("name", ["azure/err_400_content_filter_innererror", "generic/err_400_data_inspection_failed",
                                  "generic/err_400_content_filter_type_moonshot", "openrouter/err_403_moderation_flagged"])
def test_the_providers_filter_refusing_a_request_is_filtered_not_an_error(name):
    """Azure's, Alibaba Model Studio's, Moonshot's and OpenRouter's moderation refusing one request: that item is
    filtered, the run goes on."""
    from cresowlve_core.llm.profiles import get_profile

    fx = load(name)
    c = wire.interpret(fx["api"], fx["status"], fx["headers"], body_of(name).encode(), get_profile("generic"))
    assert (c.outcome, c.text, c.raw["finish_reason"]) == ("filtered", "", "content_filter")
    assert c.raw["status_code"] == fx["status"]
    assert json.loads(body_of(name))["error"]["message"].split(".")[0] in c.raw["error"] and not c.is_answer


@pytest.mark.parametrize(("name", "outcome"), [("azure/err_400_content_filter_innererror", "filtered"),
                                               ("openai/err_429_insufficient_quota", "quota"),
                                               ("openrouter/err_429_upstream_rate_limited", "rate limit")])
def test_a_byte_order_mark_before_an_error_body_changes_nothing(name, outcome):
    """An error body led by a UTF-8 byte-order mark is read as the same JSON (as a 200's is): its filter, quota
    or rate limit, with the provider's own message, never the raw text of a body that is not the API's."""
    from cresowlve_core.llm.wire import AttemptFailed

    fx = load(name)
    content = b"\xef\xbb\xbf" + body_of(name).encode()
    try:
        got = wire.interpret(fx["api"], fx["status"], fx["headers"], content).outcome
    except AttemptFailed as exc:
        failure = exc.failure
        assert failure.dead_sign is None and "\ufeff" not in failure.message and '{"error"' not in failure.message
        got = failure.reason
    assert got == outcome


def test_vllm_budget_over_the_context_is_fatal_naming_max_tokens():
    fx = load("vllm/err_400_max_tokens_over_context")
    f = wire.classify_status(fx["status"], fx["headers"], body_of("vllm/err_400_max_tokens_over_context"))
    assert f.kind == "fatal" and "--max-tokens" in f.message
    assert "'max_tokens' (2049) cannot be greater than the model's maximum context length (2048)" in f.message


def test_the_recorded_unsupported_temperature_and_max_tokens_are_adaptable():
    for name, field, action, to in (("openai/err_400_temperature_unsupported_gpt5", "temperature", "drop", None),
                                    ("azure/err_400_temperature_unsupported_gpt5", "temperature", "drop", None),
                                    ("openai/err_400_max_tokens_unsupported_gpt5", "max_tokens", "rename",
                                     "max_completion_tokens"),
                                    ("openai/err_400_max_tokens_unsupported_o1", "max_tokens", "rename",
                                     "max_completion_tokens"),
                                    ("openai/err_400_reasoning_summary_unverified_org", "reasoning.summary", "drop",
                                     None)):
        f = wire.classify_status(400, {}, body_of(name))
        assert f.kind == "fatal" and f.adaptation is not None, name
        assert (f.adaptation["field"], f.adaptation["action"], f.adaptation["to"]) == (field, action, to), name
    invalid = wire.classify_status(400, {}, body_of("openai/err_400_invalid_temperature_value"))
    assert invalid.adaptation is None and "--temperature" in invalid.message


def test_the_rate_limit_reset_headers_set_the_wait():
    fx = load("openai/err_429_rate_limit_reset_headers")
    f = wire.classify_status(fx["status"], fx["headers"], body_of("openai/err_429_rate_limit_reset_headers"))
    assert f.kind == "retry" and f.retry_after == pytest.approx(26.604)  # the tokens limit is the one exhausted


def test_openrouter_reasoning_details_alone_give_the_thoughts():
    from cresowlve_core.llm.profiles import get_profile

    body = json.loads(body_of("openrouter/chat_gpt5_mini_cost_reasoning"))
    del body["choices"][0]["message"]["reasoning"]  # only reasoning_details (reasoning.summary, reasoning.encrypted)
    c = wire.parse_success("/chat/completions", json.dumps(body), get_profile("openrouter"))
    assert c.thoughts is not None and c.thoughts.startswith("**Exploring Mars Overview**")


def test_a_lone_surrogate_is_replaced_kept_flagged_and_can_be_written(tmp_path):
    """A lone surrogate escape (half a UTF-16 pair) in the model's text: before, the record writer and the
    cache failed with "surrogates not allowed" (a traceback, the run directory left without records)."""
    from cresowlve_core.llm.cache import ResponseCache, cache_key
    from cresowlve_core.llm.types import Endpoint, GenParams

    c = wire.interpret("/chat/completions", 200, {}, body_of("ollama/chat_lone_surrogate").encode())
    assert (c.outcome, c.text, c.raw["invalid_utf8"]) == ("answer", '{ "city": "Paris", "country": "France" }\ufffd', True)
    c.text.encode("utf-8")
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        key = cache_key(Endpoint("http://x/v1", "m"), [{"role": "user", "content": "q"}], GenParams(), prompt_version="v")
        cache.put(key, c)
        hit = cache.get(key)
    assert hit is not None and hit.text == c.text
    # a valid pair sent as two escapes is one character, never flagged
    pair = body_of("ollama/chat_lone_surrogate").replace("\\udcaf", "\\ud83d\\ude00")
    c = wire.interpret("/chat/completions", 200, {}, pair.encode())
    assert c.text.endswith("}\U0001f600") and "invalid_utf8" not in c.raw


@pytest.mark.parametrize(("charset", "answer"), [("windows-1251", "Москва"), ("iso-8859-1", "Café"),
                                                ("utf-16", "Москва"), ("utf-16-le", "Москва")])
def test_a_body_in_its_declared_charset_is_read_by_it(charset, answer):
    """The recorded gpt-4o-mini answer, its text ``answer``, sent in ``charset`` with ``Content-Type: application/json;
    charset=...`` (a Russian proxy's windows-1251). Before: read as UTF-8, "Москва" became "������" (kept, flagged
    invalid_utf8, scored as a wrong answer); a UTF-16 body was "unparseable" until the endpoint "looked down"."""
    body = load("openai/chat_gpt4o_mini_success")["body"]
    body["choices"][0]["message"]["content"] = f"<Answer>{answer}</Answer>"
    sent = json.dumps(body, ensure_ascii=False).encode(charset)
    c = wire.interpret("/chat/completions", 200, {"content-type": f"application/json; charset={charset}"}, sent)
    assert (c.outcome, c.text, "invalid_utf8" in c.raw) == ("answer", f"<Answer>{answer}</Answer>", False)


@pytest.mark.parametrize("charset", ["ISO-8859-1", "no-such-charset", "undefined", "\udce9\udce9"])
def test_a_utf8_body_labelled_otherwise_stays_utf8(charset):
    """JSON is UTF-8 (RFC 8259): a UTF-8 body some server labels ISO-8859-1 is not read as Latin-1 ("ÐœÐ¾..."), and
    a label Python knows no charset by (or its "undefined", which decodes nothing; or bytes that are not UTF-8, which
    aiohttp hands on as lone surrogates) leaves the answer as it is, never an error of the item."""
    body = load("openai/chat_gpt4o_mini_success")["body"]
    body["choices"][0]["message"]["content"] = "<Answer>Москва</Answer>"
    sent = json.dumps(body, ensure_ascii=False).encode("utf-8")
    c = wire.interpret("/chat/completions", 200, {"content-type": f"application/json; charset={charset}"}, sent)
    assert (c.text, "invalid_utf8" in c.raw) == ("<Answer>Москва</Answer>", False)


def test_a_utf8_body_with_a_character_cut_and_labelled_latin1_is_kept_flagged_never_read_as_latin1():
    """A UTF-8 answer whose last Cyrillic letter is cut in half, labelled ISO-8859-1: not Latin-1 as a whole
    ("ÐœÐ¾ÑÐºÐ²..." unflagged), but UTF-8 with the cut byte U+FFFD, flagged, as with no label."""
    body = load("openai/chat_gpt4o_mini_success")["body"]
    body["choices"][0]["message"]["content"] = "<Answer>Москва</Answer>"
    sent = json.dumps(body, ensure_ascii=False).encode("utf-8").replace("а<".encode(), "а<".encode()[:1] + b"<")
    c = wire.interpret("/chat/completions", 200, {"content-type": "application/json; charset=ISO-8859-1"}, sent)
    assert (c.text, c.raw["invalid_utf8"]) == ("<Answer>Москв\ufffd</Answer>", True)


@pytest.mark.parametrize("charset", ["undefined", "no-such-charset", "base64"])
def test_a_body_neither_utf8_nor_in_a_charset_python_decodes_is_kept_flagged(charset):
    """A Latin-1 body labelled with a charset Python cannot decode it by (its "undefined" codec raises a bare
    UnicodeError; base64 is no text encoding): read as UTF-8 as before, the bad byte U+FFFD, flagged; never an error."""
    body = load("openai/chat_gpt4o_mini_success")["body"]
    body["choices"][0]["message"]["content"] = "<Answer>Café</Answer>"
    sent = json.dumps(body, ensure_ascii=False).encode("latin-1")
    c = wire.interpret("/chat/completions", 200, {"content-type": f"application/json; charset={charset}"}, sent)
    assert (c.text, c.raw["invalid_utf8"]) == ("<Answer>Caf\ufffd</Answer>", True)


def test_a_lone_surrogate_in_an_error_message_is_replaced():
    text = body_of("openai/err_404_model_not_found").replace("does not exist", "does not exist \\ud800")
    failure = wire.classify_status(404, {}, text.encode())
    assert "does not exist \ufffd" in failure.message
    failure.message.encode("utf-8")


@pytest.mark.parametrize(("value", "kind"), [(1543, "number"), (True, "boolean")])
def test_a_responses_text_part_that_is_not_text_is_no_answer_never_its_repr(value, kind):
    """The recorded gpt-5 Responses body with its ``output_text`` part's text (and a reasoning summary's) a JSON
    number or boolean: before, the answer was its repr ("1543", "True"), scored as the model's answer,
    while Chat Completions retried such a body; a message whose ``content`` is not a list raised a TypeError.
    Now both are unusable answers (retried), and a summary that is no text is no thought."""
    from cresowlve_core.llm.wire import AttemptFailed

    body = load("openai/responses_gpt5_reasoning_summary")["body"]
    message = next(o for o in body["output"] if o["type"] == "message")
    message["content"][0]["text"] = value
    with pytest.raises(AttemptFailed) as err:
        wire.interpret("/responses", 200, {}, json.dumps(body).encode())
    failure = err.value.failure
    assert (failure.kind, failure.reason) == ("retry", "bad 200 answer")
    assert failure.message == f"the answer's output_text part's text is a JSON {kind}, not text"

    message["content"] = value
    with pytest.raises(AttemptFailed) as err:
        wire.interpret("/responses", 200, {}, json.dumps(body).encode())
    assert err.value.failure.message == "response has empty text"

    message["content"] = [{"type": "output_text", "text": "<Answer>Paris</Answer>"}]
    reasoning = next(o for o in body["output"] if o["type"] == "reasoning")
    reasoning["summary"] = [{"type": "summary_text", "text": value}]
    c = wire.interpret("/responses", 200, {}, json.dumps(body).encode())
    assert (c.outcome, c.text, c.thoughts) == ("answer", "<Answer>Paris</Answer>", None)


@pytest.mark.parametrize("details", [5, True, [{"violations": 3}]], ids=["number", "boolean", "violations a number"])
def test_an_error_whose_details_are_no_array_is_still_classified_by_its_status(details):
    """Gemini's recorded list-wrapped 429 (and its recorded 400 for unknown fields, classified as recorded) with ``details`` (or a detail's
    ``violations``) that is not an array: before, reading them raised a TypeError, which the client recorded as
    the item's error ("rejected this request: TypeError: 'int' object is not iterable"), the rate limit never
    retried. Now the details are read only when they are an array: the 429 is a rate limit, retried."""
    fx = json.loads(body_of("gemini/err_429_resource_exhausted_try_later_list"))
    fx[0]["error"]["details"] = details
    failure = wire.classify_status(429, {}, json.dumps(fx).encode())
    assert (failure.kind, failure.reason, failure.status) == ("retry", "rate limit", 429)
    assert failure.message.startswith("HTTP 429: Resource exhausted. Please try again later.")
    refused = json.loads(body_of("gemini/err_400_unknown_field_seed_list"))
    as_recorded = wire.classify_status(400, {}, json.dumps(refused).encode())
    refused[0]["error"]["details"] = details
    assert wire.classify_status(400, {}, json.dumps(refused).encode()) == as_recorded


def test_zero_token_counts_for_a_reply_with_text_are_unknown_not_free():
    """The recorded gpt-5 Responses body with the usage vLLM's Responses API gave gpt-oss answers
    (vllm-project/vllm#23007: ``input_tokens`` 0, ``output_tokens`` 0, the answer there): before, the
    answer was 0 tokens and, priced, $0, so ``--max-cost`` could never be reached. Now both counts are
    unknown and named; a filtered reply with no text keeps its recorded 0 output tokens."""
    from cresowlve_core.llm.pricing import PriceTable

    body = load("openai/responses_gpt5_reasoning_summary")["body"]
    body["usage"] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    c = wire.interpret("/responses", 200, {}, json.dumps(body).encode())
    assert c.outcome == "answer" and c.text
    assert (c.usage.input_tokens, c.usage.output_tokens) == (None, None)
    assert c.raw["unusable_numbers"] == ["input_tokens=0 (a prompt has tokens)", "output_tokens=0 (for a reply)"]
    assert PriceTable.load().cost("gpt-5", c.usage) is None
    chat = json.loads(body_of("openai/chat_gpt4o_mini_success"))
    chat["usage"].update(completion_tokens=0)
    assert wire.interpret("/chat/completions", 200, {}, json.dumps(chat).encode()).usage.output_tokens is None
    filtered = wire.interpret("/chat/completions", 200, {}, body_of("gemini/chat_safety_block_content_filter").encode())
    assert filtered.outcome == "filtered" and (filtered.usage.input_tokens, filtered.usage.output_tokens) == (66, 0)
    assert "unusable_numbers" not in filtered.raw


def test_an_output_count_below_its_reasoning_count_is_unknown_not_priced():
    """The recorded DeepSeek reasoner body (789 completion tokens, 415 of them reasoning) with its output counted
    apart from its reasoning, as LiteLLM did (BerriAI/litellm#10691: 374 completion, total 386): billed output
    holds the reasoning, so 374 under-counts it. Before, the answer was priced at 374 output tokens; now
    that count is unknown and named. The recorded counts are kept as they are."""
    from cresowlve_core.llm.pricing import PriceTable

    recorded = wire.interpret("/chat/completions", 200, {}, body_of("generic/chat_deepseek_reasoner_reasoning_content").encode())
    assert (recorded.usage.output_tokens, recorded.usage.reasoning_tokens) == (789, 415)
    assert "unusable_numbers" not in recorded.raw
    body = load("generic/chat_deepseek_reasoner_reasoning_content")["body"]
    body["usage"].update(completion_tokens=374, total_tokens=386)
    c = wire.interpret("/chat/completions", 200, {}, json.dumps(body).encode())
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.reasoning_tokens) == (12, None, 415)
    assert c.raw["unusable_numbers"] == ["completion_tokens=374 (below its reasoning_tokens=415)"]
    assert PriceTable.load().cost("deepseek-reasoner", c.usage) is None


def test_answers_with_bytes_that_are_not_utf8_are_counted_in_the_summary_and_named_on_its_line(tmp_path, capsys):
    """The recorded Ollama answer with a lone surrogate, served to ``cresowlve eval`` for two items: each
    answer is kept with U+FFFD and scored. Before, only the record's ``invalid_utf8`` said so: the summary and
    its line read like those of clean answers."""
    from hostile import Conn, HostileServer, http_response

    from cresowlve_core import cli
    from cresowlve_core.items import Item, ItemView

    body = body_of("ollama/chat_lone_surrogate").encode()

    async def handle(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.write(http_response(body))

    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle {i}?", answer="Paris"))
                                        .model_dump()) + "\n" for i in range(2)), encoding="utf-8")
    with HostileServer(handle) as srv:
        code = cli.main(["eval", "--items", str(items), "--model", "m", "--base-url", srv.url, "--provider", "ollama",
                         "--no-cache", "--run-dir", str(tmp_path / "run")])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    assert (code, summary["n_ok"], summary["n_invalid_utf8"]) == (0, 2, 2)
    assert "WARNING: 2 answer(s) had bytes that were not UTF-8 (U+FFFD in their place" in capsys.readouterr().out
