"""The client's budget against OpenRouter's recorded answers, in process: what a call in flight
holds of ``max_cost`` when the provider reports its own costs, and what is said when calls in
flight still cost more than they held."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from replay.server import ReplayServer

from cresowlve_core.evaluation.runner import over_budget, summarize, summary_line
from cresowlve_core.exitcodes import EXIT_STOPPED, stage_exit
from cresowlve_core.llm import Endpoint, GenParams, LLMClient
from cresowlve_core.llm.pricing import CostMeter, PriceTable
from cresowlve_core.llm.types import BudgetExceeded


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_calls_in_flight_that_cost_more_than_they_held_are_kept_as_over_budget(monkeypatch, caplog):
    """The first answer costs $0.0125, six times its call's bound from prices.csv, so each later call
    holds about $0.0125 of a $0.06 budget and three go out at once. The route then charges $0.05 a call
    (OpenRouter may serve a model from a dearer upstream): they spend $0.15, and the meter and one
    WARNING say by how much."""
    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    meter = CostMeter()
    with ReplayServer("openrouter-cost") as srv:
        client = LLMClient(Endpoint(srv.base_url("openrouter"), "openai/gpt-5-mini", "REPLAY_KEY", provider="openrouter"),
                           concurrency=8, max_cost=0.06, cost_meter=meter, backoff_base_s=0.001)

        async def go() -> list[Any]:
            async with client:
                await client.complete(ask("first"), GenParams(), prompt_version="v")
                srv.scenario.cost = 0.05
                return await asyncio.gather(*(client.complete(ask(f"q{i}"), GenParams(), prompt_version="v")
                                              for i in range(8)), return_exceptions=True)

        with caplog.at_level(logging.WARNING, logger="cresowlve_core.llm.client"):
            out = asyncio.run(go())
        reported = [e["cost"] for e in srv.requests("openrouter")]
    assert reported == [0.0125, 0.05, 0.05, 0.05]
    assert sum(isinstance(o, BudgetExceeded) for o in out) == 5
    assert meter.spent == pytest.approx(0.1625) and meter.over_budget == pytest.approx(0.1025)
    assert meter.summary()["max_cost"] == 0.06
    over = [r.getMessage() for r in caplog.records if "over the budget" in r.getMessage()]
    assert len(over) == 1 and "over the budget of $0.0600" in over[0]  # once, when the spending first passed it

    # what a stopped eval then prints: its summary line and its last line both name the spending
    summary = summarize([], n_items=9, model_meter=meter.summary(), judge_meter=CostMeter().summary())
    summary["stopped"] = "max_cost reached: budget of $0.0600 would be exceeded"
    said = "the model spent $0.1625 against its budget of $0.0600 (calls in flight cost more than they held)"
    assert summary_line(summary).endswith(f" | OVER BUDGET: {said}")
    assert over_budget({**summary, "spent_now": {"model": CostMeter(budget=1.0).summary()}}) is None


def test_a_stopped_stage_names_the_spending_past_its_budget_in_its_last_line(capsys):
    summary = {"n_items": 9, "n_ok": 4, "n_error": 0, "n_not_run": 5, "stopped": "max_cost reached: ...",
               "over_budget": "the judge spent $0.2000 against its budget of $0.1500 (calls in flight cost more than they held)"}
    assert stage_exit(summary) == EXIT_STOPPED
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("stopped early (max_cost reached: ...; the judge spent $0.2000 against its budget of $0.1500")


def test_a_filtered_reply_at_no_cost_does_not_let_the_calls_of_an_unpriced_model_go_at_once(monkeypatch):
    """OpenRouter's recorded filtered reply reports ``usage.cost: 0``. Before: that $0 counted as the provider's
    charge seen, so the 8 calls that followed went at once, each holding $0 of a $0.03 budget, and spent $0.10
    at $0.0125 a call. Now a refused or filtered reply shows nothing of what an answer costs: the calls go one at
    a time until an answer's cost is reported, then each holds it, and the budget stops them within it."""
    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    meter = CostMeter()
    with ReplayServer("openrouter-cost", filter_fraction=1.0, cost=0.0125) as srv:  # every solve prompt filtered, at cost 0
        client = LLMClient(Endpoint(srv.base_url("openrouter"), "z-ai/glm-4.6", "REPLAY_KEY", provider="openrouter"),
                           concurrency=8, max_cost=0.03, cost_meter=meter, backoff_base_s=0.001, prices=PriceTable({}))

        async def go() -> tuple[Any, list[Any]]:
            async with client:
                first = await client.complete(ask("first"), GenParams(), prompt_version="v")
                srv.scenario.filter_fraction = 0.0  # then answers, at usage.cost 0.0125
                return first, await asyncio.gather(*(client.complete(ask(f"q{i}"), GenParams(), prompt_version="v")
                                                     for i in range(8)), return_exceptions=True)

        first, out = asyncio.run(go())
        answered = [e.get("cost") for e in srv.requests("openrouter")][1:]
    assert first.outcome == "filtered" and first.reported_cost == 0.0
    assert answered == [0.0125, 0.0125] and sum(isinstance(o, BudgetExceeded) for o in out) == 6
    assert meter.spent == pytest.approx(0.025) and meter.over_budget == 0.0
