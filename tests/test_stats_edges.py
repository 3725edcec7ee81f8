"""Intervals honest at the edges: undefined resamples are
counted, degenerate intervals are NaN with a note, pooled κ is clustered by item, and paired
differences are paired. Cross-checked against sklearn, statsmodels and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from cresowlve_core.stats import (
    binary_agreement,
    binary_kappa_counts,
    clustered_binary_kappa,
    format_p,
    interval_from_replicates,
    one_rater_constant,
    paired_difference,
)


def test_interval_from_replicates_edges():
    reps = np.r_[np.linspace(0.2, 0.8, 960), [np.nan] * 40]
    iv = interval_from_replicates(0.5, reps, 30)
    assert iv.low == pytest.approx(np.quantile(np.linspace(0.2, 0.8, 960), 0.025))
    assert iv.n_undefined == 40 and iv.note == "40 of 1000 resamples undefined (left out)"
    # more undefined resamples than the 5 % a 95 % interval leaves outside: they could hold a whole tail
    tail = interval_from_replicates(0.5, np.r_[np.linspace(0.2, 0.8, 900), [np.nan] * 100], 30)
    assert math.isnan(tail.low) and tail.note == "100 of 1000 resamples undefined: no interval"
    zero = interval_from_replicates(1.0, np.r_[np.ones(653), [np.nan] * 347], 10)
    assert math.isnan(zero.low) and math.isnan(zero.high) and zero.value == 1.0
    assert zero.note == "347 of 1000 resamples undefined: no interval"
    most = interval_from_replicates(0.3, np.r_[np.linspace(0, 1, 400), [np.nan] * 600], 8)
    assert math.isnan(most.low) and most.note == "600 of 1000 resamples undefined: no interval"
    undefined = interval_from_replicates(float("nan"), np.full(10, np.nan), 5, undefined_reason="one label only")
    assert math.isnan(undefined.value) and undefined.note == "one label only"
    assert interval_from_replicates(0.1, np.empty(0), 0).note == "no units"


def test_binary_kappa_counts_matches_sklearn():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(1)
    a = rng.random(200) < 0.6
    b = np.where(rng.random(200) < 0.8, a, ~a)
    counts = [(a & b).sum(), (a & ~b).sum(), (~a & b).sum(), (~a & ~b).sum()]
    assert float(binary_kappa_counts(np.array(counts))) == pytest.approx(cohen_kappa_score(a, b))
    assert math.isnan(float(binary_kappa_counts(np.array([5, 0, 0, 0]))))  # chance agreement 1


def test_one_rater_constant_kappa_has_no_interval_where_statsmodels_test_is_nan():
    """The judge says "correct" to all 8, EM to 5 of them. κ = 0 (sklearn and statsmodels
    agree), but statsmodels' z test is NaN (null SE 0); we showed 0.0 [0.0, 0.0] as if certain."""
    import warnings

    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import cohens_kappa

    judge = np.ones(8)
    em = np.r_[np.ones(5), np.zeros(3)]
    agr = binary_agreement(judge, em)
    table = np.array([[agr.both_yes, agr.a_yes_b_no], [agr.a_no_b_yes, agr.both_no]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = cohens_kappa(table)
    assert agr.kappa == sm.kappa == cohen_kappa_score(judge, em) == 0.0
    assert math.isnan(sm.z_value) and (agr.kappa_low, agr.kappa_high) == (0.0, 0.0)  # before: shown as certain
    assert one_rater_constant(table) and not one_rater_constant(np.array([[8, 0], [0, 0]]))  # that one is undefined
    iv = clustered_binary_kappa(judge, em, np.arange(8))
    assert iv.value == 0.0 and math.isnan(iv.low) and math.isnan(iv.high) and "κ = 0 by construction" in iv.note


def _shared_items(n_items: int = 40, m: int = 25):
    """``n_items`` items, each answered by ``m`` responses that all get the item's (judge, EM) pair."""
    rng = np.random.default_rng(0)
    pairs = rng.choice(4, size=n_items, p=[0.4, 0.1, 0.1, 0.4])
    judge = np.repeat(np.isin(pairs, [0, 1]), m).astype(float)
    em = np.repeat(np.isin(pairs, [0, 2]), m).astype(float)
    return judge, em, np.repeat(np.arange(n_items), m)


def test_pooled_kappa_clustered_by_item_is_wider_than_naive_by_the_design_effect():
    """40 items × 25 responses with identical verdicts within an item: the design effect is 25, so
    the clustered interval should be about √25 = 5 times as wide as the naive one (measured: 4.72),
    and the naive bootstrap agrees with statsmodels' asymptotic interval (as if 1,000 independent)."""
    from statsmodels.stats.inter_rater import cohens_kappa

    judge, em, items = _shared_items()
    clustered = clustered_binary_kappa(judge, em, items, n_boot=1000, rng=0)
    naive = clustered_binary_kappa(judge, em, np.arange(judge.size), n_boot=1000, rng=0)
    assert clustered.value == naive.value == pytest.approx(0.7423, abs=1e-4)
    assert clustered.n == 40 and naive.n == 1000
    ratio = (clustered.high - clustered.low) / (naive.high - naive.low)
    assert 4.0 < ratio < 6.0
    agr = binary_agreement(judge, em)
    sm = cohens_kappa(np.array([[agr.both_yes, agr.a_yes_b_no], [agr.a_no_b_yes, agr.both_no]]))
    assert (naive.high - naive.low) == pytest.approx(sm.kappa_upp - sm.kappa_low, rel=0.15)
    # the clustered interval is the bootstrap of the 40 items themselves (κ is scale-free)
    per_item = clustered_binary_kappa(judge[::25], em[::25], np.arange(40), n_boot=1000, rng=0)
    assert (per_item.low, per_item.high) == pytest.approx((clustered.low, clustered.high))


def test_paired_difference_against_scipy_and_narrower_than_unpaired():
    rng = np.random.default_rng(2)
    query = rng.gamma(2.0, 4.0, size=20)  # queries differ a lot in how much utility they allow
    x = query + 1.0 + rng.normal(0, 0.5, 20)
    y = query + rng.normal(0, 0.5, 20)
    d = paired_difference(x, y, n_boot=1000, rng=0)
    assert d.n == 20 and d.diff == pytest.approx(float(np.mean(x - y)))
    ref = sps.permutation_test((x - y,), np.mean, permutation_type="samples", n_resamples=20000, random_state=0)
    assert d.p_sign_flip < 0.01 and abs(d.p_sign_flip - ref.pvalue) < 0.005  # the sign-flip test of the mean
    assert d.low < d.diff < d.high and d.low > 0  # paired: the +1 is clear
    se_unpaired = math.sqrt(x.var(ddof=1) / 20 + y.var(ddof=1) / 20)
    assert (d.high - d.low) < 0.3 * (2 * 1.96 * se_unpaired)  # an unpaired interval would straddle 0
    none = paired_difference([1.0, 2.0, np.nan], [1.0, 2.0, 3.0])
    assert none.n == 2 and none.diff == 0.0 and math.isnan(none.p_sign_flip) and "every difference is 0" in none.note
    assert "one pair" in paired_difference([1.0], [2.0]).note


def test_format_p():
    assert format_p(3e-7) == "< 0.0001" and format_p(0.01234) == "0.0123" and format_p(float("nan")) == "–"
    assert format_p(None) == "–"
