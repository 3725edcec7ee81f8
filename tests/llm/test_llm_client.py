"""LLMClient against the fake server: APIs, thinking capture, usage, retries, failures, budget."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from fakeserver import FakeServer, Reply

from cresowlve_core.llm.client import (
    LLMClient,
    messages_to_prompt,
    parse_retry_after,
    split_think,
)
from cresowlve_core.llm.pricing import CostMeter, ModelPrice, PriceTable
from cresowlve_core.llm.ratelimit import AsyncTokenBucket
from cresowlve_core.llm.types import (
    BudgetExceeded,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMError,
    LLMFatalError,
)

MODEL = "test-model"
PRICES = PriceTable({MODEL: ModelPrice(input_per_mtok=1_000_000.0, output_per_mtok=2_000_000.0)})  # $1/$2 per token


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def client_for(srv: FakeServer, **kw: Any) -> LLMClient:
    kw.setdefault("backoff_base_s", 0.001)
    kw.setdefault("prices", PRICES)
    return LLMClient(Endpoint(srv.base_url, MODEL, kw.pop("api_key_env", None)), **kw)


def ask(client: LLMClient, text: str = "q", params: GenParams | None = None, pv: str = "v1") -> Any:
    async def go() -> Any:
        async with client:
            return await client.complete(user(text), params or GenParams(), prompt_version=pv)

    return asyncio.run(go())


# ------------------------------------------------------------------ the three APIs


def test_chat_answer_usage_and_cost_as_reported() -> None:
    with FakeServer(answers={"two words": "the answer is four"}) as srv:
        c = ask(client_for(srv), "two words")
        body = srv.requests[0].body
    assert c.text == "the answer is four" and c.thoughts is None and not c.cached
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.reasoning_tokens) == (2, 4, None)
    assert c.cost == pytest.approx(2 * 1.0 + 4 * 2.0)
    assert c.model == MODEL and c.raw["finish_reason"] == "stop"
    assert body["messages"] == user("two words")
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["max_tokens"] == 1024


def test_usage_absent_is_none_and_cost_unknown() -> None:
    with FakeServer(report_usage=False) as srv:
        c = ask(client_for(srv))
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.reasoning_tokens) == (None, None, None)
    assert c.cost is None


def test_reasoning_content_and_think_block_go_to_thoughts() -> None:
    answers = {
        "rc": Reply("final", reasoning="step one. step two.", reasoning_tokens=7),
        "tag": "<think>let me see</think>\n\nforty-two",
        "both": Reply("<think>inner</think>ok", reasoning="outer"),
    }
    with FakeServer(answers=answers) as srv:
        cl = client_for(srv)
        rc, tag, both = (ask(cl, p) for p in ("rc", "tag", "both"))
    assert (rc.text, rc.thoughts, rc.usage.reasoning_tokens) == ("final", "step one. step two.", 7)
    assert rc.usage.output_tokens == 1 + 7
    assert (tag.text, tag.thoughts) == ("forty-two", "let me see")
    assert (both.text, both.thoughts) == ("ok", "outer\n\ninner")


@pytest.mark.parametrize(
    ("raw", "text", "thoughts"),
    [
        ("plain", "plain", None),
        ("  <think>a</think> b", "b", "a"),
        ("<think>never closed", "", "never closed"),
        ("opened in prompt</think>answer", "answer", "opened in prompt"),
        ("x <think>not leading</think> y", "x <think>not leading</think> y", None),
    ],
)
def test_split_think(raw: str, text: str, thoughts: str | None) -> None:
    assert split_think(raw) == (text, thoughts)


def test_responses_api_when_effort_is_set() -> None:
    reply = Reply("Paris", reasoning="The capital of France is Paris.", reasoning_tokens=12)
    with FakeServer(answers={"capital?": reply}) as srv:
        c = ask(client_for(srv), "capital?", GenParams(effort="low", max_tokens=500, api="responses"))
        req = srv.requests[0]
    assert req.path == "/responses"
    assert req.body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert req.body["max_output_tokens"] == 500 and "temperature" not in req.body
    assert c.text == "Paris" and c.thoughts == "The capital of France is Paris."
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.reasoning_tokens) == (1, 13, 12)
    assert c.raw["api"] == "responses"


def test_legacy_completions_prompt_building() -> None:
    system_and_user = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    assert messages_to_prompt(user("just this")) == "just this"
    assert messages_to_prompt(system_and_user) == "System: Be brief.\n\nUser: Hi?\n\nAssistant:"
    with FakeServer(answers=lambda r: "<think>hm</think>done") as srv:
        cl = client_for(srv)

        async def go() -> Any:
            async with cl:
                return await cl.complete(system_and_user, GenParams(api="completions"), prompt_version="v")

        c = asyncio.run(go())
        body = srv.requests[0].body
    assert srv.requests[0].path == "/completions"
    assert body["prompt"] == "System: Be brief.\n\nUser: Hi?\n\nAssistant:"
    assert (c.text, c.thoughts) == ("done", "hm")


def test_extra_params_are_sent_and_max_completion_tokens_replaces_max_tokens() -> None:
    with FakeServer() as srv:
        ask(client_for(srv), params=GenParams(extra={"top_p": 0.5, "max_completion_tokens": 99}))
        body = srv.requests[0].body
    assert body["top_p"] == 0.5 and body["max_completion_tokens"] == 99 and "max_tokens" not in body


def test_truncated_empty_answer_is_returned_not_retried() -> None:
    with FakeServer(answers={"q": Reply("", reasoning="thinking...", finish_reason="length")}) as srv:
        c = ask(client_for(srv))
        assert srv.total == 1
    assert c.text == "" and c.thoughts == "thinking..." and c.raw["finish_reason"] == "length"


def test_complete_sync_and_its_guard() -> None:
    with FakeServer() as srv:
        with client_for(srv) as cl:
            a = cl.complete_sync(user("one"), GenParams(), prompt_version="v")
            b = cl.complete_sync(user("two"), GenParams(), prompt_version="v")  # same loop, same pool

            async def inside() -> None:
                cl.complete_sync(user("x"), GenParams(), prompt_version="v")

            with pytest.raises(RuntimeError, match="running event loop"):
                asyncio.run(inside())
    assert (a.text, b.text) == ("echo: one", "echo: two")


def test_concurrency_really_reaches_the_configured_level() -> None:
    with FakeServer(latency_s=0.5) as srv:
        cl = client_for(srv, concurrency=64)

        async def go() -> list[Any]:
            async with cl:
                return await asyncio.gather(*(cl.complete(user(f"p{i}"), GenParams(), prompt_version="v") for i in range(128)))

        out = asyncio.run(go())
        assert srv.max_in_flight == 64 and srv.total == 128
    assert [c.text for c in out] == [f"echo: p{i}" for i in range(128)]


# ------------------------------------------------------------------ retries


@pytest.mark.parametrize(
    "fault", ["429", "500", "503", "408", "409", "timeout", "garbage", "empty", "no_choices", "empty_text", "disconnect"]
)
def test_retryable_faults_recover(fault: str) -> None:
    with FakeServer(faults=[fault, None], timeout_sleep_s=1.5) as srv:
        c = ask(client_for(srv, timeout_s=0.5))
        assert srv.total == 2
    assert c.text == "echo: q"


def test_seeded_fault_mix_recovers() -> None:
    with FakeServer(fault_rate=0.4, seed=3, fault_kinds=("429", "500", "503", "garbage", "empty")) as srv:
        cl = client_for(srv, concurrency=8, max_attempts=10)

        async def go() -> list[Any]:
            async with cl:
                return await asyncio.gather(*(cl.complete(user(f"p{i}"), GenParams(), prompt_version="v") for i in range(40)))

        out = asyncio.run(go())
        assert srv.total > 40  # some faults were injected and retried
    assert [c.text for c in out] == [f"echo: p{i}" for i in range(40)]


@pytest.mark.parametrize("status", ["400", "401", "403", "404"])
def test_fatal_statuses_fail_fast_with_one_clear_message(status: str) -> None:
    with FakeServer(faults=[status, None]) as srv:
        with pytest.raises(LLMFatalError) as err:
            ask(client_for(srv))
        assert srv.total == 1
    msg = str(err.value)
    assert MODEL in msg and srv.base_url in msg and f"HTTP {status}" in msg
    assert msg.count("\n") == 0 and err.value.__cause__ is None


def test_exhausted_attempts_raise_llm_error_naming_everything() -> None:
    with FakeServer(faults=["500"] * 10) as srv:
        with pytest.raises(LLMError) as err:
            ask(client_for(srv, max_attempts=3))
        assert srv.total == 3
    assert not isinstance(err.value, LLMFatalError)
    msg = str(err.value)
    assert MODEL in msg and srv.base_url in msg and "3 attempts" in msg and "HTTP 500" in msg


def test_retry_after_seconds_is_honoured() -> None:
    with FakeServer(faults=["429", None], retry_after="1") as srv:
        start = time.monotonic()
        c = ask(client_for(srv))
        elapsed = time.monotonic() - start
        assert srv.total == 2
    assert c.text == "echo: q" and elapsed >= 0.9


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= (parse_retry_after({"retry-after": future}) or 0) <= 31
    assert parse_retry_after({"retry-after": "Mon, 01 Jan 2001 00:00:00 GMT"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None


# ------------------------------------------------------------------ keys


SECRET = "sk-test-SECRET-value-1234567890"


def test_missing_key_variable_is_a_config_error_without_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRESOWLVE_TEST_KEY", raising=False)
    with FakeServer() as srv:
        with pytest.raises(LLMConfigError, match="CRESOWLVE_TEST_KEY"):
            ask(client_for(srv, api_key_env="CRESOWLVE_TEST_KEY"))
        assert srv.total == 0


def test_key_is_sent_but_never_appears_in_errors_or_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CRESOWLVE_TEST_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    with FakeServer(api_key="the-right-key", echo_key_in_errors=True) as srv:
        with pytest.raises(LLMFatalError) as err:
            ask(client_for(srv, api_key_env="CRESOWLVE_TEST_KEY"))
        assert srv.requests[0].authorization == f"Bearer {SECRET}"
    assert "HTTP 401" in str(err.value) and "***" in str(err.value)
    for text in (str(err.value), repr(err.value), caplog.text):
        assert SECRET not in text


def test_key_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRESOWLVE_TEST_KEY", "first")
    with FakeServer() as srv:
        with client_for(srv, api_key_env="CRESOWLVE_TEST_KEY") as cl:
            cl.complete_sync(user("a"), GenParams(), prompt_version="v")
            monkeypatch.setenv("CRESOWLVE_TEST_KEY", "second")
            cl.complete_sync(user("b"), GenParams(), prompt_version="v")
        assert [r.authorization for r in srv.requests] == ["Bearer first", "Bearer second"]


# ------------------------------------------------------------------ budget


def test_max_cost_stops_cleanly_and_keeps_spend_within_budget() -> None:
    # each call: estimate = ceil(len("pN")/3)=1 input token ($1) + max_tokens 2 ($4) = $5; actual 1 + 2*2 = $5
    meter = CostMeter()
    with FakeServer() as srv:
        cl = client_for(srv, max_cost=12.0, cost_meter=meter)
        done: list[str] = []

        async def go() -> None:
            async with cl:
                for i in range(5):
                    c = await cl.complete(user(f"p{i}"), GenParams(max_tokens=2), prompt_version="v")
                    done.append(c.text)

        with pytest.raises(BudgetExceeded, match="budget"):
            asyncio.run(go())
        assert srv.total == 2
    assert done == ["echo: p0", "echo: p1"]
    assert meter.spent == pytest.approx(10.0) and meter.spent <= 12.0 and meter.reserved == 0


def test_max_cost_counts_in_flight_calls() -> None:
    meter = CostMeter()
    with FakeServer(latency_s=0.2) as srv:
        cl = client_for(srv, max_cost=12.0, cost_meter=meter, concurrency=8)

        async def go() -> list[Any]:
            async with cl:
                coros = (cl.complete(user(f"p{i}"), GenParams(max_tokens=2), prompt_version="v") for i in range(6))
                return await asyncio.gather(*coros, return_exceptions=True)

        out = asyncio.run(go())
        assert srv.total == 2
    assert sum(isinstance(o, BudgetExceeded) for o in out) == 4
    assert meter.spent <= 12.0


def test_max_cost_with_unknown_price_is_a_config_error() -> None:
    with FakeServer() as srv:
        with pytest.raises(LLMConfigError, match="no price"):
            ask(client_for(srv, max_cost=1.0, prices=PriceTable({})))
        assert srv.total == 0


def test_max_cost_with_no_price_stops_once_an_answer_reports_no_cost() -> None:
    """A provider that reports costs (OpenRouter's profile) but did not for this answer: the answer is
    kept, and the next call is refused, since the budget cannot be checked any more."""
    with FakeServer() as srv:  # a generic body: no usage.cost
        cl = LLMClient(Endpoint(srv.base_url, "vendor/unpriced", provider="openrouter"), max_cost=1.0,
                       prices=PriceTable({}), backoff_base_s=0.001)

        async def go() -> tuple[str, BaseException | None]:
            async with cl:
                first = await cl.complete(user("a"), GenParams(), prompt_version="v")
                try:
                    await cl.complete(user("b"), GenParams(), prompt_version="v")
                except LLMConfigError as exc:
                    return first.text, exc
                return first.text, None

        text, stop = asyncio.run(go())
        assert srv.total == 1
    assert text == "echo: a"
    assert stop is not None and "reported no cost" in str(stop) and "cannot be enforced" in str(stop)


def test_max_cost_with_no_price_sends_no_call_that_waited_for_an_answer_reporting_no_cost() -> None:
    """Calls sent at once go one at a time until the provider's charge is seen; when the first answer
    reports no cost, the calls that waited for it are refused too (they were all sent, and the run
    exited 0 with --max-cost set and every cost unknown)."""
    with FakeServer() as srv:  # a generic body: no usage.cost
        cl = LLMClient(Endpoint(srv.base_url, "vendor/unpriced", provider="openrouter"), max_cost=1.0,
                       prices=PriceTable({}), backoff_base_s=0.001, concurrency=8)

        async def go() -> list[Any]:
            async with cl:
                return await asyncio.gather(*(cl.complete(user(f"q{i}"), GenParams(), prompt_version="v")
                                              for i in range(4)), return_exceptions=True)

        out = asyncio.run(go())
        assert srv.total == 1
    assert sum(isinstance(o, LLMConfigError) and "cannot be enforced" in str(o) for o in out) == 3


# ------------------------------------------------------------------ limits and loops


def test_token_bucket_charges_refunds_and_caps() -> None:
    async def go() -> list[float]:
        bucket = AsyncTokenBucket(per_minute=6000)  # 100 per second
        await bucket.acquire(6000)
        after_take = bucket.available
        bucket.adjust(-1000)  # refund: the call used less than estimated
        after_refund = bucket.available
        bucket.adjust(-1_000_000)  # never above capacity
        return [after_take, after_refund, bucket.available]

    take, refund, capped = asyncio.run(go())
    assert take < 10 and 1000 <= refund < 1010 and capped == 6000


def test_oversized_request_drives_the_bucket_into_debt() -> None:
    async def go() -> float:
        bucket = AsyncTokenBucket(per_minute=600)
        await bucket.acquire(5000)  # larger than the bucket: allowed once it is full
        return bucket.available

    assert asyncio.run(go()) < -4000


def test_rate_limited_client_still_answers() -> None:
    with FakeServer() as srv:
        cl = client_for(srv, rpm=6000, tpm=10_000_000, concurrency=4)

        async def go() -> list[Any]:
            async with cl:
                return await asyncio.gather(*(cl.complete(user(f"p{i}"), GenParams(), prompt_version="v") for i in range(10)))

        out = asyncio.run(go())
    assert [c.text for c in out] == [f"echo: p{i}" for i in range(10)]


def test_one_client_across_event_loops() -> None:
    with FakeServer() as srv:
        cl = client_for(srv)
        first = asyncio.run(cl.complete(user("a"), GenParams(), prompt_version="v"))
        second = asyncio.run(cl.complete(user("b"), GenParams(), prompt_version="v"))
        assert (first.text, second.text) == ("echo: a", "echo: b") and cl.requests_sent == 2


def test_queued_calls_do_not_hold_budget() -> None:
    # each call is estimated at $11 (1 input + 5 output tokens) but costs $5; with concurrency 1
    # the $25 budget admits calls while spent + 11 <= 25, i.e. three; upfront reservation would allow two
    with FakeServer() as srv:
        cl = client_for(srv, max_cost=25.0, concurrency=1)

        async def go() -> list[Any]:
            async with cl:
                coros = (cl.complete(user(f"p{i}"), GenParams(max_tokens=5), prompt_version="v") for i in range(10))
                return await asyncio.gather(*coros, return_exceptions=True)

        out = asyncio.run(go())
    assert [isinstance(o, BudgetExceeded) for o in out] == [False] * 3 + [True] * 7
