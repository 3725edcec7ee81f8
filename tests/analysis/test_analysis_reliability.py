"""Judge reliability (agreement with EM, repeatability, coverage) and cost tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cresowlve_core.analysis.reliability import (
    agreement_display,
    cost_display,
    cost_table,
    format_cost,
    format_kappa,
    judge_coverage,
    judge_repeatability,
    judge_vs_em,
)
from cresowlve_core.stats import binary_agreement


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {
        "config": "m",
        "lang": "en",
        "status": "ok",
        "judge": np.nan,
        "em_lenient": np.nan,
        "em_strict": np.nan,
        "reasoning_type": "creative",
        "judge_repeat": np.nan,
        "judge_status": "not_run",
        "cached": False,
        "input_tokens": np.nan,
        "output_tokens": np.nan,
        "reasoning_tokens": np.nan,
        "judge_input_tokens": np.nan,
        "judge_output_tokens": np.nan,
        "cost": np.nan,
        "judge_cost": np.nan,
    }
    return pd.DataFrame([{**base, **r} for r in rows])


def _wikipedia_pairs() -> list[tuple[float, float]]:
    # Wikipedia "Cohen's kappa" example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no → κ = 0.4
    return [(1.0, 1.0)] * 20 + [(1.0, 0.0)] * 5 + [(0.0, 1.0)] * 10 + [(0.0, 0.0)] * 15


def test_judge_vs_em_kappa_and_confusion():
    rows = [{"judge": j, "em_strict": e, "judge_status": "scored"} for j, e in _wikipedia_pairs()]
    rows.append({"judge_status": "unscored", "em_strict": 1.0})  # no verdict: excluded
    out = judge_vs_em(_frame(rows)).set_index("config")
    m = out.loc["m"]
    assert (m["n"], m["both_correct"], m["judge_only"], m["em_only"], m["both_wrong"]) == (50, 20, 5, 10, 15)
    assert m["agreement"] == pytest.approx(0.7) and m["kappa"] == pytest.approx(0.4)
    assert m["kappa_low"] < 0.4 < m["kappa_high"]
    assert out.loc["all runs", "kappa"] == pytest.approx(0.4)


def test_judge_vs_em_uses_table1_population_strict_em_creative_subset():
    rows = [{"judge": j, "em_strict": e, "em_lenient": 1.0, "judge_status": "scored"} for j, e in _wikipedia_pairs()]
    rows.append({"status": "error", "judge": 0.0, "em_strict": 0.0, "em_lenient": 0.0})  # no answer: left out
    rows += [{"judge": 1.0, "em_strict": 0.0, "reasoning_type": "Factual", "judge_status": "scored"}] * 7
    df = _frame(rows)
    m = judge_vs_em(df).set_index("config").loc["m"]
    assert (m["n"], m["n_error"], m["both_wrong"], m["judge_only"]) == (50, 1, 15, 5)  # strict EM; factual left out
    # the identity that makes it the same population as Table 1: judge % - EM % = (judge_only - em_only) / n
    creative = df[(df["reasoning_type"] != "Factual") & (df["status"] != "error")]
    assert creative["judge"].mean() - creative["em_strict"].mean() == pytest.approx((m["judge_only"] - m["em_only"]) / m["n"])


def test_kappa_is_undefined_not_one_when_chance_agreement_is_one():
    rows = [{"judge": 1.0, "em_strict": 1.0, "judge_status": "scored"}] * 2
    out = judge_vs_em(_frame(rows))
    assert math.isnan(out.iloc[0]["kappa"])
    assert agreement_display(out).iloc[0]["kappa [95% CI]"] == "undefined"
    assert format_kappa(0.4, 0.15, 0.65) == "0.40 [0.15, 0.65]"


def test_judge_repeatability_from_repeat_verdicts():
    rows = [{"judge": a, "judge_repeat": b, "judge_status": "scored"} for a, b in _wikipedia_pairs()]
    rows += [{"judge": 1.0, "judge_status": "scored"}]  # not re-judged
    rep = judge_repeatability(_frame(rows)).set_index("config")
    assert rep.loc["m", "n"] == 50 and rep.loc["m", "kappa"] == pytest.approx(0.4)
    assert judge_repeatability(_frame([{"judge": 1.0}])).empty



def test_judge_repeatability_leaves_an_answer_with_one_verdict_out_and_counts_it():
    """A second verdict that errored or gave none is no disagreement: the pair is left out of n and κ and
    counted (``n_unpaired``); a model error is counted in ``n_error`` (before: always 0 here); a refused
    answer, never judged, is neither."""
    rows = [{"judge": a, "judge_repeat": b, "judge_status": "scored"} for a, b in _wikipedia_pairs()]
    rows += [{"judge": 1.0, "judge_status": "scored"}] * 3  # the repeat errored or was unscored
    rows += [{"judge_repeat": 0.0, "judge_status": "unscored"}]  # the first gave no verdict
    rows += [{"status": "error", "judge_status": "not_run"}, {"judge": 0.0, "judge_status": "not_an_answer",
                                                             "outcome": "refused"}]
    rep = judge_repeatability(_frame(rows)).set_index("config")
    assert (rep.loc["m", "n"], rep.loc["m", "n_unpaired"], rep.loc["m", "n_error"]) == (50, 4, 1)
    assert rep.loc["m", "kappa"] == pytest.approx(0.4)  # as with the 50 pairs alone
    assert (rep.loc["all runs", "n"], rep.loc["all runs", "n_unpaired"]) == (50, 4)


def test_coverage_counts():
    rows = [{"judge_status": "scored", "judge": 1.0}] * 3 + [{"judge_status": "unscored"}] * 2
    rows += [{"judge_status": "not_run", "status": "error"}]
    cov = judge_coverage(_frame(rows)).iloc[0]
    assert (cov["scored"], cov["unscored"], cov["judge_error"], cov["not_run"], cov["model_error"]) == (3, 2, 0, 1, 1)


def test_cost_unknown_is_never_zero():
    rows = [
        {
            "config": "priced",
            "cost": 0.5,
            "input_tokens": 10,
            "output_tokens": 3,
            "judge_status": "scored",
            "judge_cost": 0.01,
        },
        {
            "config": "priced",
            "cost": 0.25,
            "input_tokens": 20,
            "output_tokens": 4,
            "judge_status": "scored",
            "judge_cost": 0.01,
        },
        {"config": "partly", "cost": 1.0, "input_tokens": 5},
        {"config": "partly", "cost": np.nan, "input_tokens": 5},
        {"config": "unpriced", "cost": np.nan, "input_tokens": 7, "judge_status": "scored"},
    ]
    costs = cost_table(_frame(rows)).set_index("config")
    assert costs.loc["priced", "cost"] == 0.75 and costs.loc["priced", "input_tokens"] == 30
    assert math.isnan(costs.loc["unpriced", "cost"]) and costs.loc["unpriced", "cost_unknown"] == 1
    shown = cost_display(costs.reset_index()).set_index("config")
    assert shown.loc["priced", "cost"] == "$0.75" and shown.loc["priced", "judge_cost"] == "$0.02"
    assert shown.loc["unpriced", "cost"] == "unknown" and shown.loc["unpriced", "judge_cost"] == "unknown"
    assert shown.loc["partly", "cost"] == "≥ $1.00 (1 of 2 unknown)"
    assert shown.loc["partly", "judge_cost"] == "no judge"
    assert shown.loc["partly", "reasoning_tokens"] == "unknown"
    # neither answer has an output count; both have an input count
    assert (shown.loc["partly", "input_tokens"], shown.loc["partly", "output_tokens"]) == ("10", "unknown")
    assert shown.loc["priced", "output_tokens"] == "7"


def test_a_token_sum_over_only_some_answers_is_shown_as_a_lower_bound():
    rows = [{"config": "c", "cost": 0.5, "input_tokens": 10, "output_tokens": 3},
            {"config": "c", "cost": np.nan, "input_tokens": np.nan, "output_tokens": np.nan},
            {"config": "c", "status": "error", "cost": np.nan}]  # no answer: no count is missing
    costs = cost_table(_frame(rows)).set_index("config")
    assert (costs.loc["c", "input_tokens"], costs.loc["c", "input_tokens_unknown"]) == (10, 1)
    shown = cost_display(costs.reset_index()).set_index("config")
    assert (shown.loc["c", "input_tokens"], shown.loc["c", "output_tokens"]) == ("≥ 10 (1 unknown)", "≥ 3 (1 unknown)")


def test_a_call_without_an_answer_is_no_unknown_cost():
    """Errored calls carry no cost: counted apart (``n_no_answer``), never "≥ $x (k unknown)" on a
    priced model; a judge call that errored is no unknown judge cost either."""
    rows = [
        {"config": "priced", "cost": 0.5, "judge_status": "scored", "judge_cost": 0.01},
        {"config": "priced", "cost": 0.25, "judge_status": "error", "judge_cost": np.nan},
        {"config": "priced", "status": "error", "cost": np.nan, "judge_status": "not_run"},
        {"config": "failed", "status": "error", "cost": np.nan},
    ]
    costs = cost_table(_frame(rows)).set_index("config")
    assert (costs.loc["priced", "cost_unknown"], costs.loc["priced", "n_no_answer"]) == (0, 1)
    assert costs.loc["priced", "judge_cost_unknown"] == 0
    shown = cost_display(costs.reset_index()).set_index("config")
    assert (shown.loc["priced", "cost"], shown.loc["priced", "judge_cost"]) == ("$0.75", "$0.01")
    assert (shown.loc["failed", "cost"], shown.loc["failed", "n_no_answer"]) == ("–", 1)


def test_format_cost():
    assert format_cost(float("nan"), 3, 3) == "unknown"
    assert format_cost(2.0, 0, 3) == "$2.00"
    assert format_cost(0.0, 0, 3) == "$0.00"


def test_a_cost_below_a_cent_is_not_shown_as_zero():
    """03's cost table showed a run that cost $0.00059 (and its judge $0.00099) as "$0.00", as a free run reads."""
    assert format_cost(0.000594, 0, 9) == "$0.0006"
    assert format_cost(0.0000594, 0, 9) == "$0.0000594"
    assert format_cost(0.00099, 2, 9) == "≥ $0.0010 (2 of 9 unknown)"
    assert format_cost(0.01, 0, 9) == "$0.01"


def test_judge_vs_em_one_rater_constant_has_no_interval():
    """The judge accepts all 8, EM 5 of them: κ = 0.0 (statsmodels too), but its
    test is NaN there; the interval was shown as 0.0 [0.0, 0.0], now NaN with a note."""
    rows = [{"judge": 1.0, "em_strict": e, "judge_status": "scored", "id": f"i{k}"}
            for k, e in enumerate([1.0] * 5 + [0.0] * 3)]
    m = judge_vs_em(_frame(rows)).set_index("config").loc["m"]
    assert m["kappa"] == 0.0 and math.isnan(m["kappa_low"]) and math.isnan(m["kappa_high"])
    assert "κ = 0 by construction" in m["kappa_note"]
    shown = agreement_display(judge_vs_em(_frame(rows))).set_index("config").loc["m", "kappa [95% CI]"]
    assert shown.startswith("0.00 [–] (one rater used a single category")
    perfect = [{"judge": v, "em_strict": v, "judge_status": "scored", "id": f"i{k}"} for k, v in enumerate([1.0, 0.0] * 5)]
    p = judge_vs_em(_frame(perfect)).set_index("config").loc["m"]
    assert p["kappa"] == 1.0 and math.isnan(p["kappa_low"]) and "zero-width" in p["kappa_note"]  # was 1.0 [1.0, 1.0]


def test_pooled_kappa_is_clustered_by_item():
    """Four configurations × two languages answer the same 30 items with the same verdicts: the
    summary row's interval (two-level bootstrap: runs, and the 30 items every run shares) is about √8 ≈ 2.8 times as wide
    as the asymptotic interval over the 240 responses treated as independent (measured 2.87:
    [0.201, 0.842] against [0.395, 0.619])."""
    rng = np.random.default_rng(4)
    pairs = rng.choice(4, size=30, p=[0.4, 0.1, 0.1, 0.4])
    rows = [{"config": c, "lang": lang, "id": f"i{k}", "judge": float(p in (0, 1)), "em_strict": float(p in (0, 2)),
             "judge_status": "scored"} for c in "abcd" for lang in ("en", "ru") for k, p in enumerate(pairs)]
    out = judge_vs_em(_frame(rows), n_boot=1000, seed=0).set_index("config")
    pooled = out.loc["all runs"]
    assert pooled["n"] == 240 and pooled["n_items"] == 30
    assert "two-level bootstrap over runs and items (8 runs, 30 items" in pooled["kappa_note"]
    naive = binary_agreement(_frame(rows)["judge"].to_numpy(), _frame(rows)["em_strict"].to_numpy())
    ratio = (pooled["kappa_high"] - pooled["kappa_low"]) / (naive.kappa_high - naive.kappa_low)
    assert 2.0 < ratio < 3.6


def test_the_cost_table_says_no_judge_only_for_a_run_whose_judge_was_never_asked(tmp_path, monkeypatch):
    """Two judged runs against OpenRouter's recorded error on the choice (HTTP 200, finish_reason "error"): every
    judge call of one errored, about half of the other's. Before: the first run's judge cost read "no judge" (a
    judge was asked, 6 attempts per verdict)."""
    import asyncio

    from replay.server import ReplayServer

    from cresowlve_core.analysis.loading import load_runs
    from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, load_eval_items

    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    for model, fraction in (("openai/gpt-4o-mini", 1.0), ("openai/gpt-4.1-mini", 0.5)):
        with ReplayServer("judge-choice-error", judge_choice_error_fraction=fraction) as srv:
            cfg = EvalConfig(model=model, base_url=srv.base_url("openrouter"), provider="openrouter",
                             api_key_env="REPLAY_KEY", judge_model=model, run_dir=str(tmp_path / model.split("/")[1]),
                             items="demo", limit=4, concurrency=1, cache=False, backoff_base_s=0)
            summary = asyncio.run(evaluate_async(cfg, load_eval_items(cfg), progress=False)).summary
        assert summary["n_judge_error"] == 4 if fraction == 1.0 else 0 < summary["n_judge_error"] < 4
    rs = load_runs(str(tmp_path / "*"))
    costs = cost_table(rs.responses, rs.runs).set_index("config")
    shown = cost_display(costs.reset_index()).set_index("config")["judge_cost"]
    assert shown["openai/gpt-4o-mini"] == "– (4 judge call(s) errored: no cost recorded)"
    assert 0 < costs.at["openai/gpt-4.1-mini", "n_judge_error"] < 4
    assert shown["openai/gpt-4.1-mini"].startswith("$")  # the replies' cost (the errors: judge_coverage's judge_error)
