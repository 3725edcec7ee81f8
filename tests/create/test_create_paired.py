"""The CREATE leaderboard compares adjacent configurations paired by query (issue 18 build 6)."""

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
    excludes 0 and Wilcoxon p = 2/2⁸ = 0.0078; yet the unpaired leaderboard intervals of a and b
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
    assert ac["p_wilcoxon"] == pytest.approx(sps.wilcoxon(a_minus_c).pvalue) == pytest.approx(2 / 2**8)
    cb = cmp.iloc[1]  # identical utilities on the 11 shared queries: no test, no interval, and why
    assert cb["diff"] == 0.0 and math.isnan(cb["p_wilcoxon"]) and math.isnan(cb["ci_low"])
    assert "every difference is 0" in cb["note"]
    assert ac["p_holm"] == pytest.approx(ac["p_wilcoxon"])  # Holm over the one testable pair
    ab = rep.comparisons((0.9,), n_boot=1000, seed=0)  # seeded: the same again
    assert ab.equals(cmp)
