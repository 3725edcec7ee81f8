"""The difficulty score's predictive analysis: AUC and point-biserial r with intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from cresowlve_core.synthetic.difficulty import auc, difficulty_scores, predictiveness


def test_auc_matches_mann_whitney():
    rng = np.random.default_rng(1)
    s = rng.normal(size=40)
    y = rng.random(40) < 0.4
    u = sps.mannwhitneyu(s[y], s[~y]).statistic
    assert auc(s, y) == pytest.approx(u / (y.sum() * (~y).sum()))
    assert auc([1, 2, 3], [False, True, True]) == 1.0 and auc([1, 1], [True, False]) == 0.5
    assert np.isnan(auc([1, 2], [True, True]))


def test_predictiveness_intervals_and_point_biserial():
    rng = np.random.default_rng(0)
    y = rng.random(60) < 0.5
    s = y * 0.3 + rng.normal(scale=0.2, size=60)
    p = predictiveness(s, y, n_boot=500, seed=0)
    assert p.n == 60 and p.n_failed == int(y.sum())
    assert p.auc_low < p.auc < p.auc_high and p.auc > 0.7
    assert p.point_biserial == pytest.approx(sps.pointbiserialr(y, s).statistic)
    assert p.pb_low < p.point_biserial < p.pb_high
    assert predictiveness(s, y, n_boot=500, seed=0) == p  # seeded


def test_one_class_gives_no_numbers_rather_than_guesses():
    p = predictiveness([0.1, 0.2, 0.3], [True, True, True])
    rec = p.to_record()
    assert rec["auc"] is None and rec["auc_low"] is None and rec["point_biserial"] is None and rec["n"] == 3


@pytest.mark.embeddings
def test_difficulty_score_is_a_cosine_distance(tmp_path):
    same, far = difficulty_scores(["X won the Nobel Prize in Physics.", "X won the Nobel Prize in Physics."],
                                  ["X won the Nobel Prize in Physics.", "A recipe for apple pie with cinnamon."],
                                  cache_path=str(tmp_path / "e.sqlite"))
    assert same == pytest.approx(0.0, abs=1e-5) and 0.5 < far <= 2.0
    with pytest.raises(ValueError):
        difficulty_scores(["a"], [])


def test_perfect_separation_gives_no_zero_width_auc_interval():
    """Failed items all score above solved ones: AUC = 1 (sklearn's roc_auc_score agrees) and every
    resample with both classes gives 1 too. Before, the interval was reported as [1.00, 1.00]
    (certainty from 6 items); a zero-width interval is not an interval."""
    from sklearn.metrics import roc_auc_score

    s, y = [0.1, 0.2, 0.3, 0.8, 0.9, 0.95], [False, False, False, True, True, True]
    p = predictiveness(s, y, n_boot=500, seed=0)
    assert p.auc == roc_auc_score(y, s) == 1.0
    assert np.isnan(p.auc_low) and np.isnan(p.auc_high)
    assert p.to_record()["auc_low"] is None


def test_auc_interval_is_the_percentile_interval_of_the_resamples_with_both_classes():
    rng = np.random.default_rng(2)
    y = rng.random(30) < 0.3
    s = y * 0.2 + rng.normal(scale=0.2, size=30)
    p = predictiveness(s, y, n_boot=300, seed=4)
    gen, reps = np.random.default_rng(4), []
    for _ in range(300):
        idx = gen.integers(0, 30, 30)
        if 0 < y[idx].sum() < 30:
            reps.append(auc(s[idx], y[idx]))
    assert (p.auc_low, p.auc_high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])))
