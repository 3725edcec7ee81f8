"""Breakdowns by difficulty, annotation group, and creative vs factual."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cresowlve_core.analysis.breakdowns import (
    by_difficulty,
    by_group,
    creative_vs_factual,
    difficulty_cells_without_value,
    difficulty_distribution,
    difficulty_trend,
)
from cresowlve_core.stats import wilson_interval


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


def test_by_difficulty_accuracy_and_wilson():
    rng = np.random.default_rng(0)
    rows = [{"id": f"e{i}", "difficulty": 1.0, "judge": 1.0, "em_strict": 1.0} for i in range(40)]
    rows += [{"id": f"h{i}", "difficulty": 5.0, "judge": 0.0, "em_strict": 0.0} for i in range(384)]
    rows += [
        {"id": f"m{i}", "difficulty": 3.0, "judge": float(rng.random() < 0.5), "em_strict": 0.0} for i in range(200)
    ]
    df = _frame(rows)
    out = by_difficulty(df, ("judge", "em_strict"))
    j = out[out["metric"] == "judge"].set_index("difficulty")
    lo, hi = wilson_interval(40, 40)
    assert j.loc[1, ["acc", "low", "high"]].tolist() == pytest.approx([100.0, 100 * lo, 100.0])
    # 0/384: Wilson gives [0, 0.99], not the bootstrap's degenerate [0, 0]
    assert j.loc[5, "low"] == 0.0 and j.loc[5, "high"] == pytest.approx(100 * wilson_interval(0, 384)[1])
    assert j.loc[5, "high"] > 0.9
    mid = j.loc[3]
    lo, hi = wilson_interval(int(mid["k"]), 200)
    assert (mid["low"], mid["high"]) == pytest.approx((100 * lo, 100 * hi))
    assert mid["n"] == 200 and mid["metric_label"] == "LLM judge"
    assert not j["small"].any()


def test_by_difficulty_flags_small_cells():
    df = _frame([{"id": f"x{i}", "judge": 1.0, "difficulty": float(1 + i % 2)} for i in range(50)])
    out = by_difficulty(df, ("judge",), min_cell_n=30).set_index("difficulty")
    assert out["n"].tolist() == [25, 25] and out["small"].all()
    assert not by_difficulty(df, ("judge",), min_cell_n=20)["small"].any()


def test_difficulty_trend_cochran_armitage():
    rows = []
    for d, acc in {1: 0.8, 2: 0.6, 3: 0.4, 4: 0.3, 5: 0.1}.items():
        rows += [{"id": f"{d}_{i}", "difficulty": float(d), "judge": float(i < acc * 60)} for i in range(60)]
    rows += [{"id": f"flat{i}", "config": "flat", "difficulty": float(1 + i % 5), "judge": float(i % 2)} for i in range(300)]
    trend = difficulty_trend(by_difficulty(_frame(rows), ("judge",))).set_index("config")
    assert trend.loc["m", "z"] < -8 and trend.loc["m", "falls"]
    assert trend.loc["flat", "p_holm"] > 0.05 and not trend.loc["flat", "falls"]
    assert trend.loc["m", "levels"] == 5 and trend.loc["m", "n"] == 300


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
    out = creative_vs_factual(df, ("judge",)).iloc[0]
    assert out["creative_acc"] - out["factual_acc"] == pytest.approx(32.0 - 68.0)
    assert out["gap"] == pytest.approx(0.0, abs=1e-9)
    assert out["low"] < 0 < out["high"]
    assert (out["n_matched"], out["n_creative"], out["n_factual"]) == (100, 500, 100)


def test_creative_vs_factual_detects_a_real_gap():
    df = _cvf_items({1: 0.4, 3: 0.2}, {1: 0.9, 3: 0.7}, creative_n={1: 300, 3: 300}, factual_n={1: 60, 3: 60})
    out = creative_vs_factual(df, ("judge",)).iloc[0]
    assert out["gap"] == pytest.approx(-50.0)
    assert out["high"] < -35 and out["low"] > -65
    assert out["n_matched"] == 120


def test_creative_vs_factual_drops_levels_missing_in_a_group_and_is_deterministic():
    df = _cvf_items({1: 0.5, 2: 0.5}, {1: 1.0}, creative_n={1: 50, 2: 50}, factual_n={1: 30})
    a = creative_vs_factual(df, ("judge",))
    assert a.iloc[0]["gap"] == pytest.approx(-50.0) and a.iloc[0]["n_matched"] == 30
    pd.testing.assert_frame_equal(a, creative_vs_factual(df, ("judge",)))
    assert creative_vs_factual(_cvf_items({1: 1}, {}, {1: 5}, {}), ("judge",)).empty


def test_difficulty_distribution_shares():
    df = _cvf_items({1: 0.5, 2: 0.5}, {1: 1.0}, creative_n={1: 30, 2: 10}, factual_n={1: 5})
    dist = difficulty_distribution(df).set_index(["reasoning_type", "difficulty"])
    assert dist.loc[("creative", 1), "share"] == 0.75 and dist.loc[("factual", 1), "share"] == 1.0


def test_creative_vs_factual_interval_does_not_collapse_with_zero_strata():
    # factual 0/50 at every level, creative 6/300 (2%) at every level. The
    # bootstrap gave 2.0 pp [1.33, 2.67] (a 0/50 stratum resamples to 0/50 only); the
    # stratified Wilson-score interval keeps each stratum's width and includes 0.
    levels = range(1, 6)
    df = _cvf_items({d: 0.02 for d in levels}, {d: 0.0 for d in levels}, {d: 300 for d in levels}, {d: 50 for d in levels})
    out = creative_vs_factual(df, ("judge",)).iloc[0]
    assert out["gap"] == pytest.approx(2.0)
    assert out["low"] < 0 < out["high"]
    assert (out["low"], out["high"]) == pytest.approx((-1.2271, 3.0259), abs=1e-3)
    # every level at 0/50 on both sides: the gap is 0 with an interval of real width, not [0, 0]
    zero = creative_vs_factual(_cvf_items({d: 0.0 for d in levels}, {d: 0.0 for d in levels},
                                          {d: 50 for d in levels}, {d: 50 for d in levels}), ("judge",)).iloc[0]
    assert zero["gap"] == 0.0 and zero["low"] < -3 and zero["high"] > 3


def test_stratified_interval_is_newcombe_with_one_stratum():
    from cresowlve_core.stats import diff_proportions, linear_combination_interval

    est, low, high = linear_combination_interval([56, 48], [70, 80], [1, -1])
    d = diff_proportions(56, 70, 48, 80)
    assert (est, low, high) == pytest.approx((d.diff, d.low, d.high))
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)  # Newcombe (1998), Table II


def test_creative_vs_factual_interval_uses_the_same_procedure_as_the_estimate():
    # the estimate uses every creative item, so its interval must too: compare with the analytic
    # standard error of the standardised difference, Σ w_d² (p_c(1-p_c)/n_c + p_f(1-p_f)/n_f)
    cn, fn = {1: 600, 3: 600}, {1: 60, 3: 60}
    cp, fp = {1: 0.4, 3: 0.2}, {1: 0.9, 3: 0.7}
    out = creative_vs_factual(_cvf_items(cp, fp, cn, fn), ("judge",)).iloc[0]
    var = sum(0.25 * (cp[d] * (1 - cp[d]) / cn[d] + fp[d] * (1 - fp[d]) / fn[d]) for d in (1, 3))
    half = 100 * 1.96 * np.sqrt(var)
    assert (out["high"] - out["low"]) / 2 == pytest.approx(half, rel=0.08)
    # Wilson-score intervals lean away from 0 and 1 (factual 90%): the centre sits a little off the estimate
    assert (out["low"] + out["high"]) / 2 == pytest.approx(out["gap"], abs=1.5)
    assert (out["n_creative"], out["n_factual"], out["n_matched"]) == (1200, 120, 120)


def test_reasoning_type_is_compared_case_insensitively():
    lower = _cvf_items({1: 0.4}, {1: 0.9}, creative_n={1: 50}, factual_n={1: 40})
    mixed = lower.assign(reasoning_type=lower["reasoning_type"].map({"creative": "Creative", "factual": " FACTUAL"}))
    a = creative_vs_factual(lower, ("judge",))
    b = creative_vs_factual(mixed, ("judge",))
    assert len(b) == 1
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(difficulty_distribution(lower), difficulty_distribution(mixed))


def _domain_frame(rng, n_items: int, effect: dict[str, float], configs=("a", "b")) -> pd.DataFrame:
    labels = [f"D{i:02d}" for i in range(12)]
    rows = []
    doms = [list(rng.choice(labels, size=rng.integers(1, 3), replace=False)) for _ in range(n_items)]
    for config in configs:
        for i, d in enumerate(doms):
            p = 0.3 + sum(effect.get(x, 0.0) for x in d)
            rows.append({"id": f"i{i}", "config": config, "knowledge_domains": d, "judge": float(rng.random() < p)})
    return _frame(rows)


def test_group_cells_are_marked_only_after_benjamini_hochberg():
    from cresowlve_core.stats import benjamini_hochberg

    null = by_group(_domain_frame(np.random.default_rng(0), 1500, {}), "knowledge_domains", min_group_size=30, seed=0)
    t = null.table
    assert {"overall", "p", "q", "flagged"} <= set(t.columns)
    assert np.allclose(t["q"], benjamini_hochberg(t["p"].to_numpy()))
    assert null.n_cells == len(t) == 24 and null.expected_by_chance == pytest.approx(1.2)
    assert null.n_flagged <= null.n_uncorrected and null.n_flagged == 0  # no effect: nothing survives BH
    assert "would still reach p < 0.05 by chance" in null.chance_text()
    assert (null.homogeneity["p"] > 0.01).all() and set(null.homogeneity["config"]) == {"a", "b"}

    real = by_group(_domain_frame(np.random.default_rng(1), 1500, {"D03": 0.35}), "knowledge_domains", seed=0)
    flagged = real.table[real.table["flagged"]]
    assert "D03" in set(flagged["group"]) and real.table.loc[real.table["q"].idxmin(), "group"] == "D03"
    assert (real.homogeneity["p"] < 0.01).all() and (real.homogeneity["df"] == 11).all()


def test_homogeneity_is_large_sample_where_counts_allow_and_permutation_elsewhere():
    df = _domain_frame(np.random.default_rng(2), 1500, {"D03": 0.35}, configs=("a", "b", "rare"))
    df.loc[(df["config"] == "rare"), "judge"] = 0.0
    df.loc[(df["config"] == "rare") & (df["id"].isin([f"i{i}" for i in range(12)])), "judge"] = 1.0  # 12 of 1500 right
    auto = by_group(df, "knowledge_domains", min_group_size=30, seed=0).homogeneity.set_index("config")
    perm = by_group(df, "knowledge_domains", min_group_size=30, seed=0,
                    homogeneity_test="permutation").homogeneity.set_index("config")
    assert auto.loc[["a", "b"], "test"].tolist() == ["asymptotic"] * 2 and auto.loc[["a", "b"], "n_perm"].isna().all()
    assert perm["test"].tolist() == ["permutation"] * 3 and (perm["n_perm"] == 1000).all()
    # a run with too few right answers for the large-sample test keeps its permutation p, the same draws
    assert auto.loc["rare", "test"] == "permutation" and auto.loc["rare", "p"] == perm.loc["rare", "p"]
    assert (auto["chi2"] == perm["chi2"]).all()  # the same statistic either way
    both = auto.loc[["a", "b"]]
    assert (both["p"] - perm.loc[["a", "b"], "p"]).abs().max() < 0.03  # within the 1,000 permutations' error
    assert (both["p"] < 0.01).all()  # the group effect is found either way
    with pytest.raises(ValueError, match="homogeneity_test"):
        by_group(df, "knowledge_domains", homogeneity_test="chi2")


def test_a_run_without_a_value_in_a_shown_group_is_named_not_left_a_silent_blank():
    """Model a errored on all 40 Music items (no value), model b answered them: the Music × a cell had no row
    and no note, a blank in the heatmap that reads as nothing at all rather than "no answer here"."""
    rows = [{"id": f"h{k}", "config": c, "knowledge_domains": ["History"], "judge": float(k % 2)}
            for c in ("a", "b") for k in range(40)]
    rows += [{"id": f"m{k}", "config": "a", "knowledge_domains": ["Music"], "status": "error"} for k in range(40)]
    rows += [{"id": f"m{k}", "config": "b", "knowledge_domains": ["Music"], "judge": float(k % 4 == 0)}
             for k in range(40)]
    res = by_group(_frame(rows), "knowledge_domains", min_group_size=30, metric="judge", n_perm=20)
    assert set(zip(res.table["config"], res.table["group"])) == {("a", "History"), ("b", "History"), ("b", "Music")}
    assert res.notes == ["**No cell** for 1 run × group pair(s) (blank in the chart, absent from the table; no "
                         "accuracy, not 0 %): a / en × Music (40 item(s) of the group, none with a value). Errored "
                         "and unscored items have no value."]


def test_a_difficulty_level_without_a_value_is_named_not_left_a_silent_gap():
    """Model a errored on its 10 items at difficulty 5: by_difficulty has no a × 5 cell, so the line stopped at 4
    and the trend ran over 4 levels beside a text saying "over difficulty 1–5", with nothing naming the gap."""
    rows = [{"id": f"i{k}", "config": c, "difficulty": float(1 + k % 5), "judge": float(k % 2)}
            for c in ("a", "b") for k in range(50)]
    for r in rows:
        if r["config"] == "a" and r["difficulty"] == 5.0:
            r.update(status="error", judge=np.nan)
    df = _frame(rows)
    res = by_difficulty(df, ["judge"])
    assert sorted(res.loc[res["config"] == "a", "difficulty"]) == [1, 2, 3, 4]
    assert difficulty_cells_without_value(df, res, ["judge"]) == [
        "**No cell** for 1 run × metric × difficulty level(s) (a gap in the line, absent from the table and the trend "
        "test; no accuracy, not 0 %): a / en / LLM judge at difficulty 5 (10 item(s), none with a value). Errored and "
        "unscored items have no value."]
    # a run without any value of the metric is not listed level by level (the section says it has no judge)
    assert difficulty_cells_without_value(df, by_difficulty(df, ["judge"]), ["em_strict"]) == []
