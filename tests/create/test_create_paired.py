"""The CREATE leaderboard compares adjacent configurations paired by query."""

from __future__ import annotations

import math

import numpy as np
import pytest
from create_fakes import one_hot
from scipy import stats as sps

from cresowlve_core.create.report import analyse
from cresowlve_core.create.scored import ScoredSet

LEVELS = [1, 1, 2, 2, 3, 3, 4, 4, 1, 2, 3, 4]  # how much utility each of 12 queries allows
BONUS = [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0]  # model a is one strength point better on 9 of them


def _set(config: str, q: int, strength: int) -> ScoredSet:
    path = [["Alpha", "knows", f"X{q}"], [f"X{q}", "born in", "Beta"]]
    return ScoredSet(config=config, query_id=f"q{q}", query=f"query {q}", entity_a="Alpha", entity_b="Beta",
                     rel_b="born in", paths=[path], specificity=[[float(strength), 5.0]], factuality=[[1.0, 1.0]],
                     validity=[1])


def _report():
    sets = [_set("a__original", q, lv + b) for q, (lv, b) in enumerate(zip(LEVELS, BONUS))]
    sets += [_set("b__original", q, lv) for q, lv in enumerate(LEVELS)]
    sets += [_set("c__original", q, lv) for q, lv in enumerate(LEVELS) if q != 0]  # c skipped query q0
    return analyse(sets, embedder=one_hot)


def test_adjacent_models_are_compared_paired_by_query():
    """Ranked a, c, b. a − c over the 11 queries both answered = 8/11 = 0.73: paired, its interval
    excludes 0 and the exact sign-flip p of the mean = 2/2⁸ = 0.0078 (8 equal non-zero differences); yet the unpaired leaderboard intervals of a and b
    overlap (a's low < b's high), so the leaderboard alone could not rank them."""
    rep = _report()
    board = rep.leaderboard((0.9,), n_boot=1000, seed=0).set_index("config")
    assert board.loc["a__original", "ci_low@0.9"] < board.loc["b__original", "ci_high@0.9"]  # unpaired: no verdict
    assert board.loc["b__original", "sd@0.9"] == pytest.approx(np.std(LEVELS, ddof=1))  # the paper's (sd)
    cmp = rep.comparisons((0.9,), n_boot=1000, seed=0)
    assert cmp[["a", "b"]].values.tolist() == [["a__original", "c__original"], ["c__original", "b__original"]]
    ac = cmp.iloc[0]
    assert (ac["n_queries"], ac["n_a_only"], ac["n_b_only"]) == (11, 1, 0)  # q0: only a answered
    a_minus_c = np.array([lv + b for lv, b in zip(LEVELS, BONUS)])[1:] - np.array(LEVELS)[1:]
    assert ac["diff"] == pytest.approx(a_minus_c.mean()) and ac["ci_low"] > 0
    exact = sps.permutation_test((a_minus_c,), np.mean, permutation_type="samples", n_resamples=10**5).pvalue
    assert ac["p_sign_flip"] == pytest.approx(exact) == pytest.approx(2 / 2**8)
    cb = cmp.iloc[1]  # identical utilities on the 11 shared queries: no test, no interval, and why
    assert cb["diff"] == 0.0 and math.isnan(cb["p_sign_flip"]) and math.isnan(cb["ci_low"])
    assert "every difference is 0" in cb["note"]
    assert ac["p_holm"] == pytest.approx(ac["p_sign_flip"])  # Holm over the one testable pair
    ab = rep.comparisons((0.9,), n_boot=1000, seed=0)  # seeded: the same again
    assert ab.equals(cmp)


def test_interval_and_test_share_one_estimand():
    """35 queries where A is slightly ahead, 5 where it is far behind: the mean difference is
    −0.028 with a bootstrap interval containing 0, while Wilcoxon (a pseudo-median, signed
    ranks) calls A ahead at p = 0.0025; the row's p is the sign-flip test of the mean, and agrees
    with its interval (before: the row showed the Wilcoxon p beside the interval of the mean)."""
    from cresowlve_core.stats import paired_difference

    d = np.array([0.01] * 35 + [-0.3] * 5) + np.linspace(0, 0.001, 40)
    assert sps.wilcoxon(d).pvalue < 0.005 and d.mean() < 0
    r = paired_difference(0.5 + d, np.full(40, 0.5), n_boot=4000, rng=0)
    ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=20000, random_state=1).pvalue
    assert r.low < 0 < r.high and r.p_sign_flip > 0.05
    assert abs(r.p_sign_flip - ref) < 0.015  # Monte Carlo, 4000 vs 20000 sign patterns
    again = paired_difference(0.5 + d, np.full(40, 0.5), n_boot=4000, rng=0)
    assert again.p_sign_flip == r.p_sign_flip  # seeded


def test_a_configuration_has_one_colour_in_every_chart_and_each_legend_reads_highest_first():
    """The two line charts ordered their colours by their own ranking: gpt-5.4 (medium) was orange in
    one and red in the next, and 'your runs are orange' then named a recorded configuration."""
    import pandas as pd

    from cresowlve_core.create.report import patience_chart, tradeoff_chart

    curves = pd.DataFrame({"config": ["b", "b", "a", "a", "c", "c"], "patience": [0, 1] * 3, "utility": [1, 5, 1, 2, 1, 9]})
    trade = pd.DataFrame({"config": ["b", "b", "a", "a", "c", "c"], "threshold": [0, 1] * 3, "utility": [1, 1, 1, 7, 1, 3]})
    colours = [chart.to_dict()["encoding"]["color"] for chart in (patience_chart(curves), tradeoff_chart(trade))]
    assert colours[0]["scale"] == colours[1]["scale"] == {"domain": ["a", "b", "c"], "scheme": "tableau10"}
    assert [c["legend"]["values"] for c in colours] == [["c", "b", "a"], ["a", "c", "b"]]


def test_a_configuration_of_one_query_has_no_interval_over_queries():
    """A bootstrap over one query resamples that query: its "95% CI [5.00, 5.00]" (also in the
    headline) claimed certainty no sample gives. It has none, as it has no sd."""
    from cresowlve_core.create.report import headline, leaderboard_display

    sets = [_set("a__original", 0, 5)] + [_set("b__original", q, 3) for q in range(3)]
    board = analyse(sets, embedder=one_hot).leaderboard((0.9,), n_boot=50).set_index("config")
    assert math.isnan(board.loc["a__original", "ci_low@0.9"]) and math.isnan(board.loc["a__original", "sd@0.9"])
    assert math.isnan(board.loc["b__original", "ci_low@0.9"])  # three queries of one utility: no spread to bound
    shown = leaderboard_display(board.reset_index(), (0.9,)).set_index("config")
    assert shown.loc["a__original", "95% CI (p = 0.9)"] == "–"
    assert headline(board.reset_index(), (0.9,)).startswith("highest mean creative utility@0.9: a__original 5.000 over 1 query")



def test_queries_of_one_utility_give_no_zero_width_interval_shown_as_certain():
    """Three queries each of utility 3.0: every resample's mean is 3.0, and the leaderboard showed
    "[3.00, 3.00]" (in the headline too) as if three queries pinned the mean down. No interval
    ("–"), as for one query; a configuration whose queries differ keeps its interval."""
    from cresowlve_core.create.report import headline, leaderboard_display

    sets = [_set("a__original", q, 3) for q in range(3)] + [_set("b__original", q, s) for q, s in enumerate((2, 4))]
    board = analyse(sets, embedder=one_hot).leaderboard((0.9,), n_boot=200)
    shown = leaderboard_display(board, (0.9,)).set_index("config")
    assert shown.loc["a__original", "95% CI (p = 0.9)"] == "–" and shown.loc["a__original", "utility (p = 0.9)"] == 3.0
    assert shown.loc["b__original", "95% CI (p = 0.9)"] == "[2.00, 4.00]"
    assert headline(board, (0.9,)) == "highest mean creative utility@0.9: a__original 3.000 over 3 queries; 2 configurations"
