"""Breakdowns by difficulty, annotation group, and creative vs factual."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cresowlve_core.analysis.breakdowns import (
    by_difficulty,
    by_group,
    creative_vs_factual,
    difficulty_distribution,
)


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {
        "config": "m",
        "thinking": False,
        "lang": "en",
        "status": "ok",
        "reasoning_type": "creative",
        "difficulty": 3.0,
        "em_strict": np.nan,
        "em_lenient": np.nan,
        "judge": np.nan,
        "knowledge_domains": [],
        "creative_domains": [],
        "cultures": [],
    }
    return pd.DataFrame([{**base, **r} for r in rows])


def test_by_difficulty_accuracy_and_bootstrap():
    rng = np.random.default_rng(0)
    rows = [{"id": f"e{i}", "difficulty": 1.0, "judge": 1.0, "em_strict": 1.0} for i in range(40)]
    rows += [{"id": f"h{i}", "difficulty": 5.0, "judge": 0.0, "em_strict": 0.0} for i in range(40)]
    rows += [
        {"id": f"m{i}", "difficulty": 3.0, "judge": float(rng.random() < 0.5), "em_strict": 0.0} for i in range(200)
    ]
    df = _frame(rows)
    out = by_difficulty(df, ("judge", "em_strict"), n_boot=1000, seed=3)
    j = out[out["metric"] == "judge"].set_index("difficulty")
    assert j.loc[1, ["acc", "low", "high"]].tolist() == [100.0, 100.0, 100.0]
    assert j.loc[5, ["acc", "low", "high"]].tolist() == [0.0, 0.0, 0.0]
    mid = j.loc[3]
    p = mid["acc"] / 100
    half = 196 * np.sqrt(p * (1 - p) / 200)  # normal-theory half-width in %
    assert mid["low"] == pytest.approx(mid["acc"] - half, abs=1.5)
    assert mid["high"] == pytest.approx(mid["acc"] + half, abs=1.5)
    assert mid["n"] == 200 and mid["metric_label"] == "LLM judge"
    again = by_difficulty(df, ("judge", "em_strict"), n_boot=1000, seed=3)
    pd.testing.assert_frame_equal(out, again)


def test_by_difficulty_does_not_depend_on_other_runs():
    a = _frame([{"id": f"x{i}", "judge": float(i % 3 == 0)} for i in range(90)])
    b = pd.concat([a, a.assign(config="other", judge=1.0)], ignore_index=True)
    ra = by_difficulty(a, ("judge",), n_boot=500, seed=0)
    rb = by_difficulty(b, ("judge",), n_boot=500, seed=0)
    pd.testing.assert_frame_equal(ra, rb[rb["config"] == "m"].reset_index(drop=True))


def test_by_group_counts_multi_label_items_and_filters_small_groups():
    rows = []
    for i in range(40):
        rows.append(
            {
                "id": f"a{i}",
                "knowledge_domains": ["History", "Music"] if i < 10 else ["History"],
                "judge": float(i < 20),
                "em_lenient": 0.0,
            }
        )
    res = by_group(_frame(rows), "knowledge_domains", min_group_size=30)
    assert res.metric == "judge" and res.metric_label == "LLM judge"
    t = res.table.set_index("group")
    assert list(t.index) == ["History"]  # Music has only 10 items
    assert (t.loc["History", "n"], t.loc["History", "k"], t.loc["History", "acc"]) == (40, 20, 50.0)
    assert any("fewer than 30" in n for n in res.notes)
    small = by_group(_frame(rows), "knowledge_domains", min_group_size=5).table.set_index("group")
    assert small.loc["Music", "acc"] == 100.0 and small.loc["Music", "n_items"] == 10


def test_by_group_falls_back_to_lenient_em_without_judge():
    rows = [{"id": f"a{i}", "cultures": ["French"], "em_lenient": float(i < 3)} for i in range(30)]
    res = by_group(_frame(rows), "cultures")
    assert res.metric == "em_lenient" and "no LLM-judge" in res.metric_label
    assert any("lenient exact match" in n for n in res.notes)
    assert res.table["acc"].tolist() == [10.0]


def test_by_group_without_annotations_says_so():
    res = by_group(_frame([{"id": "a", "judge": 1.0}]), "creative_domains")
    assert res.table.empty and any("No `creative_domains` annotations" in n for n in res.notes)


def _cvf_items(
    creative_acc: dict[int, float], factual_acc: dict[int, float], creative_n: dict[int, int], factual_n: dict[int, int]
) -> pd.DataFrame:
    rows = []
    for kind, accs, ns in (("creative", creative_acc, creative_n), ("factual", factual_acc, factual_n)):
        for d, n in ns.items():
            k = round(accs[d] * n)
            rows += [
                {"id": f"{kind}{d}_{i}", "reasoning_type": kind, "difficulty": float(d), "judge": float(i < k)}
                for i in range(n)
            ]
    return _frame(rows)


def test_creative_vs_factual_balances_difficulty():
    # Same accuracy per level for both kinds, but creative items are mostly hard and factual mostly easy:
    # the raw gap is large (a Simpson-style artefact); the difficulty-balanced gap is ~0.
    acc = {1: 0.8, 5: 0.2}
    df = _cvf_items(acc, acc, creative_n={1: 100, 5: 400}, factual_n={1: 80, 5: 20})
    out = creative_vs_factual(df, ("judge",), n_boot=1000, seed=0).iloc[0]
    assert out["creative_acc"] - out["factual_acc"] == pytest.approx(32.0 - 68.0)
    assert out["gap"] == pytest.approx(0.0, abs=1e-9)
    assert out["low"] < 0 < out["high"]
    assert (out["n_matched"], out["n_creative"], out["n_factual"]) == (100, 500, 100)


def test_creative_vs_factual_detects_a_real_gap():
    df = _cvf_items({1: 0.4, 3: 0.2}, {1: 0.9, 3: 0.7}, creative_n={1: 300, 3: 300}, factual_n={1: 60, 3: 60})
    out = creative_vs_factual(df, ("judge",), n_boot=1000, seed=1).iloc[0]
    assert out["gap"] == pytest.approx(-50.0)
    assert out["high"] < -35 and out["low"] > -65
    assert out["n_matched"] == 120


def test_creative_vs_factual_drops_levels_missing_in_a_group_and_is_seeded():
    df = _cvf_items({1: 0.5, 2: 0.5}, {1: 1.0}, creative_n={1: 50, 2: 50}, factual_n={1: 30})
    a = creative_vs_factual(df, ("judge",), n_boot=200, seed=4)
    assert a.iloc[0]["gap"] == pytest.approx(-50.0) and a.iloc[0]["n_matched"] == 30
    pd.testing.assert_frame_equal(a, creative_vs_factual(df, ("judge",), n_boot=200, seed=4))
    assert creative_vs_factual(_cvf_items({1: 1}, {}, {1: 5}, {}), ("judge",)).empty


def test_difficulty_distribution_shares():
    df = _cvf_items({1: 0.5, 2: 0.5}, {1: 1.0}, creative_n={1: 30, 2: 10}, factual_n={1: 5})
    dist = difficulty_distribution(df).set_index(["reasoning_type", "difficulty"])
    assert dist.loc[("creative", 1), "share"] == 0.75 and dist.loc[("factual", 1), "share"] == 1.0
