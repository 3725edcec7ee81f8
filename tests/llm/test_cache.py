"""ResponseCache: keys, hits without requests, what is never stored, two processes at once."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer, Reply
from hypothesis import given
from hypothesis import strategies as st

from cresowlve_core.llm.cache import ResponseCache, cache_key
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.pricing import CostMeter, ModelPrice, PriceTable
from cresowlve_core.llm.types import (
    Completion,
    Endpoint,
    GenParams,
    LLMFatalError,
    Usage,
)

MODEL = "test-model"
PRICES = PriceTable({MODEL: ModelPrice(1_000_000.0, 2_000_000.0)})
EP = Endpoint("http://127.0.0.1:1/v1", MODEL)
MSGS = [{"role": "user", "content": "q"}]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def run(cl: LLMClient, texts: list[str], params: GenParams | None = None, pv: str = "v1") -> list[Completion]:
    async def go() -> list[Completion]:
        async with cl:
            return [await cl.complete(user(t), params or GenParams(), prompt_version=pv) for t in texts]

    return asyncio.run(go())


# ------------------------------------------------------------------ keys


def test_key_is_deterministic_and_independent_of_dict_order() -> None:
    a = cache_key(EP, [{"role": "user", "content": "q"}], GenParams(extra={"a": 1, "b": 2}), prompt_version="v")
    b = cache_key(EP, [{"content": "q", "role": "user"}], GenParams(extra={"b": 2, "a": 1}), prompt_version="v")
    assert a == b and len(a) == 64


@pytest.mark.parametrize(
    ("endpoint", "params", "pv", "messages"),
    [
        (EP, GenParams(), "v2", MSGS),
        (EP, GenParams(temperature=0.7), "v1", MSGS),
        (EP, GenParams(seed=1), "v1", MSGS),
        (EP, GenParams(seed=None), "v1", MSGS),
        (EP, GenParams(max_tokens=10), "v1", MSGS),
        (EP, GenParams(effort="low"), "v1", MSGS),
        (EP, GenParams(api="completions"), "v1", MSGS),
        (EP, GenParams(extra={"top_p": 0.9}), "v1", MSGS),
        (EP, GenParams(), "v1", [{"role": "user", "content": "Q"}]),
        (Endpoint(EP.base_url, "other-model"), GenParams(), "v1", MSGS),
        (Endpoint("http://elsewhere/v1", MODEL), GenParams(), "v1", MSGS),
    ],
)
def test_key_changes_with_everything_that_changes_an_answer(
    endpoint: Endpoint, params: GenParams, pv: str, messages: list[dict[str, Any]]
) -> None:
    assert cache_key(endpoint, messages, params, prompt_version=pv) != cache_key(EP, MSGS, GenParams(), prompt_version="v1")


def test_key_ignores_the_api_key_variable_and_trailing_slash() -> None:
    base = cache_key(EP, MSGS, GenParams(), prompt_version="v1")
    assert cache_key(Endpoint(EP.base_url + "/", MODEL, "SOME_KEY"), MSGS, GenParams(), prompt_version="v1") == base


@given(st.text(max_size=40), st.text(max_size=40), st.floats(0, 2), st.integers(0, 10))
def test_distinct_prompts_or_versions_give_distinct_keys(p1: str, p2: str, temp: float, seed: int) -> None:
    params = GenParams(temperature=temp, seed=seed)
    k1 = cache_key(EP, user(p1), params, prompt_version="v1")
    assert (k1 == cache_key(EP, user(p2), params, prompt_version="v1")) == (p1 == p2)
    assert k1 != cache_key(EP, user(p1), params, prompt_version="v2")


# ------------------------------------------------------------------ store


def test_put_get_roundtrip_stats_and_clear(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    c = Completion(text="hi", thoughts="t", usage=Usage(input_tokens=1, output_tokens=2, reasoning_tokens=0),
                   cost=0.5, latency_s=1.25, model="m-2025", raw={"id": "x"})
    cache.put("k1", c, model="m")
    cache.put("k2", c)
    cache.put("k3", Completion(text="   "), model="m")  # empty: refused
    got = cache.get("k1")
    assert got is not None and got.cached and not c.cached
    assert (got.text, got.thoughts, got.usage, got.cost, got.latency_s, got.model, got.raw) == (
        "hi", "t", c.usage, 0.5, 1.25, "m-2025", {"id": "x"})
    assert cache.get("missing") is None and "k3" not in cache
    stats = cache.stats()
    assert stats["entries"] == 2 and stats["per_model"] == {"m": 1, "m-2025": 1} and stats["bytes"] > 0
    assert cache.clear("m") == 1 and len(cache) == 1
    assert cache.clear() == 1 and len(cache) == 0


def test_deferred_puts_are_hits_at_once_and_written_in_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.sqlite"
    cache, other = ResponseCache(path), ResponseCache(path)
    cache.put("k0", Completion(text="first"), model="m", deferred=True)  # no write for GROUP_S: written at once
    assert other.get("k0") is not None
    monkeypatch.setattr(ResponseCache, "GROUP_S", 3600.0)
    for i in range(1, 4):
        cache.put(f"k{i}", Completion(text=f"a{i}"), model="m", deferred=True)
    assert cache.get("k3") is not None and "k3" in cache  # a hit in this process while it waits
    assert other.get("k3") is None  # not yet written
    cache.put("k3", Completion(text="newer"), model="m", deferred=True)
    cache.flush()
    assert [other.get(f"k{i}").text for i in range(4)] == ["first", "a1", "a2", "newer"]  # type: ignore[union-attr]
    monkeypatch.setattr(ResponseCache, "GROUP_ROWS", 3)
    for i in range(4, 7):
        cache.put(f"k{i}", Completion(text=f"a{i}"), model="m", deferred=True)
    assert other.get("k6") is not None  # the third waiting put wrote the group
    cache.put("k7", Completion(text="a7"), model="m", deferred=True)
    cache.close()  # what still waits is written on close
    assert len(other) == 8


def test_the_client_writes_its_waiting_answers_when_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ResponseCache, "GROUP_S", 3600.0)
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeServer() as srv:
        run(LLMClient(Endpoint(srv.base_url, MODEL), cache=cache, prices=PRICES), ["a", "b", "c"])
    assert len(ResponseCache(tmp_path / "c.sqlite")) == 3


def test_hit_sends_no_request_and_keeps_the_original_cost(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    meter = CostMeter()
    with FakeServer(answers={"q": Reply("four", reasoning="r")}) as srv:
        first = run(LLMClient(Endpoint(srv.base_url, MODEL), cache=cache, prices=PRICES, cost_meter=meter), ["q"])[0]
        assert srv.total == 1
        srv.reset()
        again = run(LLMClient(Endpoint(srv.base_url, MODEL), cache=cache, prices=PRICES, cost_meter=meter), ["q"])[0]
        assert srv.total == 0
        run(LLMClient(Endpoint(srv.base_url, MODEL), cache=cache, prices=PRICES), ["q"], pv="v2")
        assert srv.total == 1  # a new prompt version is a new request
    assert not first.cached and again.cached
    assert (again.text, again.thoughts, again.usage) == (first.text, first.thoughts, first.usage)
    assert again.cost == first.cost and first.cost is not None
    assert meter.spent == pytest.approx(first.cost) and meter.run_cost == pytest.approx(2 * first.cost)
    assert (meter.n_calls, meter.n_cached) == (2, 1)


def test_errors_and_empty_answers_are_never_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    answers = {"cut": Reply("", reasoning="long thinking", finish_reason="length")}
    with FakeServer(answers=answers, faults={"bad": ["401"], "flaky": ["500", None]}) as srv:
        cl = LLMClient(Endpoint(srv.base_url, MODEL), cache=cache, prices=PRICES, backoff_base_s=0.001)
        with pytest.raises(LLMFatalError):
            run(cl, ["bad"])
        assert run(cl, ["cut"])[0].text == ""
        assert len(cache) == 0
        run(cl, ["flaky"])  # recovered after a 500: only the good answer is stored
        assert len(cache) == 1 and srv.by_prompt["flaky"] == 2
        run(cl, ["cut"])
        assert srv.by_prompt["cut"] == 2  # empty answer was asked again


def test_api_key_never_reaches_the_cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-cache-SECRET-1122334455"
    monkeypatch.setenv("CRESOWLVE_TEST_KEY", secret)
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeServer() as srv:
        run(LLMClient(Endpoint(srv.base_url, MODEL, "CRESOWLVE_TEST_KEY"), cache=cache, prices=PRICES), ["a", "b"])
    cache.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert secret.encode() not in blob and len(blob) > 0


# ------------------------------------------------------------------ two processes


def _worker(path: str, name: str, other: str, n: int, barrier: Any, out: Any) -> None:
    cache = ResponseCache(path)
    barrier.wait()
    for i in range(n):
        cache.put(f"{name}-{i}", Completion(text=f"{name} answer {i}", model=name))
        cache.get(f"{other}-{i}")  # interleaved reads while the other process writes
    barrier.wait()
    seen = sum(1 for i in range(n) if (c := cache.get(f"{other}-{i}")) is not None and c.text == f"{other} answer {i}")
    out.put((name, seen))


def test_two_processes_share_one_cache(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    n = 300
    procs = [ctx.Process(target=_worker, args=(path, a, b, n, barrier, out)) for a, b in (("A", "B"), ("B", "A"))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert dict(out.get(timeout=5) for _ in procs) == {"A": n, "B": n}
    stats = ResponseCache(path).stats()
    assert stats["entries"] == 2 * n and stats["per_model"] == {"A": n, "B": n}


@pytest.mark.parametrize(("usage", "reported", "named", "cost"), [
    (Usage(input_tokens=0, output_tokens=0), None, ["input_tokens=0 (a prompt has tokens)", "output_tokens=0 (for a reply)"],
     None),
    (Usage(input_tokens=12, output_tokens=374, reasoning_tokens=415), None,
     ["output_tokens=374 (below its reasoning_tokens=415)"], None),
    (Usage(input_tokens=12, output_tokens=7), 1e300, ["reported_cost=1e+300"], 12 * 1.0 + 7 * 2.0),  # the price table's
], ids=["zero counts", "output below reasoning", "a cost no call reaches"])
def test_a_hit_holds_numbers_an_earlier_version_stored_to_todays_rules(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, usage: Usage, reported: float | None, named: list[str],
        cost: float | None) -> None:
    """An entry written before the wire made such numbers unknown (a server that reported 0 tokens for an answer,
    an output count below its reasoning, a cost of 1e300): before, the hit replayed them, the answer priced $0 (or
    $1e300) as the run's cost. Now they are unknown and named, as a reply's are, with one WARNING; the stored
    cost goes with them (the price table prices what is left, as for a reply) and no request is sent."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    key = cache_key(EP, MSGS, GenParams(), prompt_version="v1")
    cache.put(key, Completion(text="<Answer>Paris</Answer>", usage=usage, cost=0.0 if reported is None else reported,
                              reported_cost=reported, model=MODEL, raw={"id": "c1", "api": "chat"}))
    with caplog.at_level("WARNING"):
        (hit,) = run(LLMClient(EP, cache=cache, prices=PRICES), ["q"])
    assert hit.cached and hit.text == "<Answer>Paris</Answer>"
    assert hit.cost == cost and hit.reported_cost is None and hit.raw["unusable_numbers"] == named
    assert len([r for r in caplog.records if "not a usable number" in r.getMessage()]) == 1


@pytest.mark.parametrize("stored", [-5.0, 1e300], ids=["negative", "no call reaches it"])
def test_a_hit_of_a_model_no_longer_priced_does_not_replay_a_stored_cost_that_is_not_a_cost(
        tmp_path: Path, stored: float) -> None:
    """An entry priced by a table an earlier version read (before prices were held to finite amounts >= 0, a
    negative one in $CRESOWLVE_PRICES priced calls below $0), replayed where the model has no price: before, the
    hit kept the stored cost, and a 3-item eval of such hits printed 'cost $-15.0000'. Now that cost is unknown
    and named, as a stored reported cost that is not a cost is."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    key = cache_key(EP, MSGS, GenParams(), prompt_version="v1")
    cache.put(key, Completion(text="<Answer>Paris</Answer>", usage=Usage(input_tokens=12, output_tokens=7), cost=stored,
                              model=MODEL, raw={"id": "c1", "api": "chat"}))
    (hit,) = run(LLMClient(EP, cache=cache, prices=PriceTable({})), ["q"])
    assert hit.cached and hit.cost is None and hit.raw["unusable_numbers"] == [f"cost={stored!r}"]
