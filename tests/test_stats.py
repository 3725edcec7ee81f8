"""Statistics in cresowlve_core.stats against textbook values."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cresowlve_core.stats import (
    asymptotic_homogeneity_applies,
    asymptotic_homogeneity_shared,
    benjamini_hochberg,
    binary_agreement,
    bootstrap_ci,
    bootstrap_mean_ci,
    bootstrap_means,
    cochran_armitage,
    cohen_kappa,
    correlation,
    diff_proportions,
    fisher_z_interval,
    format_p,
    holm,
    kappa_interval,
    mcnemar,
    pearson_exact_p,
    percentile_interval,
    permutation_homogeneity,
    permutation_homogeneity_shared,
    permutation_indices,
    spearman_exact_p,
    stable_seed,
    two_proportion_z,
    weighted_chi2_sf,
    wilson_interval,
)

# ---------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),  # Brown, Cai & DasGupta (2001); z = 1.96
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),  # cross-checked with statsmodels proportion_confint(method="wilson")
    ],
)
def test_wilson_textbook_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=5e-5)
    assert hi == pytest.approx(high, abs=5e-5)


def test_wilson_vectorised_and_empty() -> None:
    lo, hi = wilson_interval(np.array([0, 5, 10]), np.array([10, 10, 10]))
    assert lo == pytest.approx([0.0, 0.2366, 0.7225], abs=5e-5)
    assert hi == pytest.approx([0.2775, 0.7634, 1.0], abs=5e-5)
    lo0, hi0 = wilson_interval(0, 0)
    assert math.isnan(lo0) and math.isnan(hi0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_estimate(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


# ---------------------------------------------------------------- bootstrap


def test_percentile_interval_of_known_replicates() -> None:
    lo, hi = percentile_interval(np.arange(0, 1001, dtype=float))
    assert (lo, hi) == pytest.approx((25.0, 975.0))


def test_bootstrap_is_seeded_and_matches_normal_theory() -> None:
    rng = np.random.default_rng(1)
    x = (rng.random(400) < 0.3).astype(float)
    a = bootstrap_mean_ci(x, n_boot=1000, seed=7)
    assert a == bootstrap_mean_ci(x, n_boot=1000, seed=7)
    reps7 = bootstrap_means(x, 1000, 7)
    assert np.array_equal(reps7, bootstrap_means(x, 1000, 7))
    assert not np.array_equal(reps7, bootstrap_means(x, 1000, 8))
    assert reps7.mean() == pytest.approx(x.mean(), abs=0.003)
    p = x.mean()
    half = 1.96 * math.sqrt(p * (1 - p) / x.size)  # ≈ 0.045
    assert a.value == pytest.approx(p)
    assert a.low == pytest.approx(p - half, abs=0.01)
    assert a.high == pytest.approx(p + half, abs=0.01)
    assert a.n == 400


def test_bootstrap_constant_and_nan_handling() -> None:
    est = bootstrap_mean_ci([1.0, 1.0, float("nan"), 1.0], n_boot=200, seed=0)
    assert (est.value, est.low, est.high, est.n) == (1.0, 1.0, 1.0, 3)
    empty = bootstrap_mean_ci([], n_boot=10)
    assert empty.n == 0 and math.isnan(empty.value)


def test_bootstrap_generic_statistic() -> None:
    x = np.arange(1, 102, dtype=float)  # median 51
    est = bootstrap_ci(x, lambda a: np.median(a, axis=1), n_boot=500, seed=0)
    assert est.value == 51.0
    assert est.low < 51.0 < est.high


def test_stable_seed_depends_only_on_key() -> None:
    a = stable_seed(0, "gpt", "en", 3).random(3)
    b = stable_seed(0, "gpt", "en", 3).random(3)
    c = stable_seed(0, "gpt", "ru", 3).random(3)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


# ---------------------------------------------------------------- difference of proportions


def test_newcombe_textbook_example() -> None:
    # Newcombe (1998), Stat Med 17:873-890, Table II example (a): 56/70 - 48/80, method 10.
    d = diff_proportions(56, 70, 48, 80)
    assert d.diff == pytest.approx(0.2)
    assert d.low == pytest.approx(0.0524, abs=5e-5)
    assert d.high == pytest.approx(0.3339, abs=5e-5)
    # example (e): 9/10 - 3/10 → 0.1705, 0.8090
    e = diff_proportions(9, 10, 3, 10)
    assert (e.low, e.high) == pytest.approx((0.1705, 0.8090), abs=5e-5)


def test_difference_is_antisymmetric() -> None:
    a = diff_proportions(12, 40, 30, 50)
    b = diff_proportions(30, 50, 12, 40)
    assert a.diff == pytest.approx(-b.diff)
    assert (a.low, a.high) == pytest.approx((-b.high, -b.low))


# ---------------------------------------------------------------- correlations


def test_pearson_anscombe_quartet() -> None:
    x = [10, 8, 13, 9, 11, 14, 6, 4, 12, 7, 5]
    y = [8.04, 6.95, 7.58, 8.81, 8.33, 9.96, 7.24, 4.26, 10.84, 4.82, 5.68]
    c = correlation(x, y)
    assert c.n == 11
    assert c.pearson_r == pytest.approx(0.81642, abs=1e-4)  # Anscombe (1973), set I
    assert c.pearson_p == pytest.approx(0.00217, abs=5e-5)


def test_spearman_wikipedia_iq_tv() -> None:
    # Wikipedia "Spearman's rank correlation coefficient", worked example: ρ = -29/165.
    iq = [106, 100, 86, 101, 99, 103, 97, 113, 112, 110]
    tv = [7, 27, 2, 50, 28, 29, 20, 12, 6, 17]
    c = correlation(iq, tv)
    assert c.spearman_rho == pytest.approx(-29 / 165, abs=1e-9)
    # n = 10: the exact p over all 10! pairings (scipy.stats.permutation_test with n_resamples=inf
    # gives 0.632142); the asymptotic t approximation gave 0.6272
    assert c.spearman_p_method == "exact"
    assert c.spearman_p == pytest.approx(0.6321417548500882, abs=1e-12)


def test_spearman_exact_p_at_tiny_n() -> None:
    # ρ = 1 with n = 3 gave p = 0 (asymptotic); exactly it is 2/6 (two-sided)
    c = correlation([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    assert c.spearman_rho == pytest.approx(1.0)
    assert c.spearman_p_method == "exact" and c.spearman_p == pytest.approx(1 / 3)
    assert spearman_exact_p([1, 2, 3, 4], [1, 2, 3, 4]) == pytest.approx(2 / 24)
    # ties: average ranks; the permutation distribution itself (brute force over 5! pairings: 32/120)
    assert spearman_exact_p([1, 1, 2, 3, 4], [2, 1, 1, 3, 3]) == pytest.approx(_brute_spearman_p([1, 1, 2, 3, 4], [2, 1, 1, 3, 3]))
    big = correlation(np.arange(11.0), np.arange(11.0) ** 2)
    assert big.spearman_p_method == "asymptotic"  # n > 10
    with pytest.raises(ValueError):
        spearman_exact_p(np.arange(11.0), np.arange(11.0))


def test_pearson_exact_p_at_tiny_n() -> None:
    """Pearson's p had the failure Spearman's had: r = ±1 with n = 3 gave p = 0 (the t test), printed
    "< 0.0001" (and Holm "< 0.0001") in 03's complexity table next to "significant: no". Exactly it is
    the share of the n! pairings with |r| at least as large."""
    c = correlation([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    assert c.pearson_p_method == "exact" and c.pearson_p == pytest.approx(1 / 3)
    c = correlation([3.0, 4.0, 4.0], [1.0, 0.0, 0.0])  # a 0/1 outcome: the point-biserial r = -1
    assert c.pearson_r == pytest.approx(-1.0) and c.pearson_p == pytest.approx(1 / 3)
    rng = np.random.default_rng(3)
    for n in (5, 7, 8):
        x, y = rng.normal(size=n), (rng.random(n) > 0.5).astype(float)
        assert pearson_exact_p(x, y) == pytest.approx(_brute_pearson_p(x, y))
        x, y = rng.integers(1, 6, size=n).astype(float), rng.normal(size=n)
        assert pearson_exact_p(x, y) == pytest.approx(_brute_pearson_p(x, y))
    assert correlation(np.arange(10.0), np.arange(10.0) ** 3).pearson_p_method == "asymptotic"  # 10! orders
    assert correlation(np.arange(11.0), np.arange(11.0) ** 2).pearson_p_method == "asymptotic"  # n > 10


def _brute_pearson_p(x: np.ndarray, y: np.ndarray) -> float:
    """Share of all n! pairings with |Σ x·y − n x̄ ȳ| at least the observed (|r| at least the observed)."""
    orders = np.array(list(itertools.permutations(range(len(y)))))
    centre = len(x) * x.mean() * y.mean()
    return float(np.mean(np.abs(y[orders] @ x - centre) >= abs(x @ y - centre) - 1e-9))


def _brute_spearman_p(x: list[float], y: list[float]) -> float:
    from itertools import permutations

    from scipy import stats as sps

    rho = sps.spearmanr(x, y).statistic
    rhos = [sps.spearmanr(x, [y[i] for i in p]).statistic for p in permutations(range(len(y)))]
    return sum(abs(r) >= abs(rho) - 1e-12 for r in rhos) / len(rhos)


@pytest.mark.parametrize(
    "p,text",
    [(0.0, "< 0.0001"), (1e-12, "< 0.0001"), (9.99e-5, "< 0.0001"), (1e-4, "0.0001"), (0.04321, "0.0432"),
     (1.0, "1.0000"), (float("nan"), "–"), (None, "–")],
)
def test_format_p(p, text) -> None:
    # tiny p-values used to print as 0.0
    assert format_p(p) == text


def test_spearman_monotone_is_one() -> None:
    x = np.arange(1, 30, dtype=float)
    c = correlation(x, np.exp(x / 5))  # monotone, non-linear
    assert c.spearman_rho == pytest.approx(1.0)
    assert c.pearson_r < 1.0
    assert correlation(x, -(x**3)).spearman_rho == pytest.approx(-1.0)


def test_correlation_degenerate_inputs_give_nan() -> None:
    assert math.isnan(correlation([1, 2], [3, 4]).pearson_r)
    assert math.isnan(correlation([1, 1, 1, 1], [1, 2, 3, 4]).spearman_rho)
    c = correlation([1, 2, float("nan"), 4, 5], [2, 4, 6, 8, float("nan")])
    assert c.n == 3 and c.pearson_r == pytest.approx(1.0)


def test_a_correlation_with_no_p_names_no_method() -> None:
    """A constant variable (scipy's pearsonr and spearmanr give NaN there) or fewer than 3 pairs: no p, so
    neither "exact" nor "asymptotic"; the complexity tables printed "asymptotic" beside a missing p."""
    from scipy import stats as sps

    with pytest.warns(sps.ConstantInputWarning):
        assert math.isnan(sps.pearsonr([1, 2, 3, 4], [1, 1, 1, 1]).pvalue)
    for x, y in (([1, 2, 3, 4], [1, 1, 1, 1]), ([1, 2], [3, 4])):
        c = correlation(x, y)
        assert math.isnan(c.pearson_p) and math.isnan(c.spearman_p)
        assert c.pearson_p_method == c.spearman_p_method == "not tested"


# ---------------------------------------------------------------- Cohen's kappa


def test_kappa_wikipedia_example() -> None:
    # Wikipedia "Cohen's kappa": 50 proposals, yes/yes 20, A yes B no 5, A no B yes 10, no/no 15.
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    agr = binary_agreement(np.array(a) == "yes", np.array(b) == "yes")
    assert (agr.n, agr.both_yes, agr.a_yes_b_no, agr.a_no_b_yes, agr.both_no) == (50, 20, 5, 10, 15)
    assert agr.observed == pytest.approx(0.7)
    assert agr.expected == pytest.approx(0.5)
    assert agr.kappa == pytest.approx(0.4)


def test_kappa_edge_cases() -> None:
    assert cohen_kappa([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa([1, 1], [1, 1]))  # chance agreement is 1: kappa undefined, not 1.0
    assert math.isnan(binary_agreement(np.array([1.0, 1.0]), np.array([1.0, 1.0])).kappa)
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])


# ---------------------------------------------------------------- cross-checks with statsmodels / scipy



@pytest.mark.parametrize("table", [[[20, 5], [10, 15]], [[40, 3], [7, 2]], [[5, 0], [1, 30]]])
def test_kappa_interval_matches_statsmodels(table) -> None:
    from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

    ref = sm_kappa(np.array(table, dtype=float))
    low, high = kappa_interval(np.array(table))
    assert low == pytest.approx(max(-1.0, ref.kappa_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, ref.kappa_upp), abs=1e-12)
    agr = binary_agreement(
        np.repeat([1.0, 1.0, 0.0, 0.0], np.ravel(table)), np.repeat([1.0, 0.0, 1.0, 0.0], np.ravel(table))
    )
    assert (agr.kappa_low, agr.kappa_high) == pytest.approx((low, high))


@pytest.mark.parametrize(("b", "c", "n"), [(3, 10, 50), (0, 6, 20), (30, 50, 200), (12, 12, 40), (0, 0, 10)])
def test_mcnemar_matches_statsmodels(b: int, c: int, n: int) -> None:
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    res = mcnemar(b, c, n)
    table = [[n - b - c, b], [c, 0]]
    exact = b + c < 25
    ref = sm_mcnemar(table, exact=exact, correction=True)
    assert res.method == ("exact" if exact else "chi2-cc")
    assert res.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert res.diff == pytest.approx((b - c) / n)
    assert res.low <= res.diff <= res.high


def test_mcnemar_interval_bonett_price() -> None:
    # Bonett & Price (2012): p12* = (b+1)/(n+2), p21* = (c+1)/(n+2), Wald on the adjusted difference
    res = mcnemar(30, 50, 200)
    p12, p21 = 31 / 202, 51 / 202
    se = math.sqrt((p12 + p21 - (p12 - p21) ** 2) / 202)
    assert res.low == pytest.approx(p12 - p21 - 1.959964 * se, abs=1e-6)
    assert res.high == pytest.approx(p12 - p21 + 1.959964 * se, abs=1e-6)


def test_multiple_testing_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(0).random(30) ** 3
    assert np.allclose(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1])
    assert np.allclose(holm(p), multipletests(p, method="holm")[1])
    with_nan = np.array([0.01, np.nan, 0.04, 0.03])
    q = benjamini_hochberg(with_nan)
    assert math.isnan(q[1]) and np.allclose(q[[0, 2, 3]], multipletests([0.01, 0.04, 0.03], method="fdr_bh")[1])


def test_cochran_armitage_matches_linear_by_linear() -> None:
    from statsmodels.stats.contingency_tables import Table

    k, n = np.array([30, 25, 20, 12, 5]), np.full(5, 50)
    res = cochran_armitage(k, n)
    ref = Table(np.vstack([k, n - k]).T).test_ordinal_association(row_scores=np.arange(1, 6), col_scores=np.array([1, 0]))
    total = n.sum()  # the linear-by-linear statistic uses N - 1 where Cochran-Armitage uses N
    assert res.z == pytest.approx(ref.zscore * math.sqrt(total / (total - 1)), rel=1e-9)
    assert res.z < 0 and res.p < 1e-6
    assert math.isnan(cochran_armitage([0, 0], [5, 5]).z)


def test_fisher_z_interval_pearson_textbook() -> None:
    # r = 0.5, n = 30: z = 0.5493 ± 1.96/sqrt(27) = (0.1721, 0.9265) -> tanh -> (0.1704, 0.7290)
    assert fisher_z_interval(0.5, 30) == pytest.approx((0.1704, 0.7290), abs=1e-4)
    lo, hi = fisher_z_interval(0.5, 30, spearman=True)
    assert lo < 0.1704 and hi > 0.7290  # Bonett-Wright variance is larger
    c = correlation(np.arange(50.0), np.arange(50.0) + np.random.default_rng(1).normal(0, 20, 50))
    assert c.pearson_low < c.pearson_r < c.pearson_high and c.spearman_low < c.spearman_rho < c.spearman_high


def test_two_proportion_z_equals_chi2_without_correction() -> None:
    from scipy.stats import chi2_contingency

    p = two_proportion_z(np.array([30]), np.array([100]), np.array([200]), np.array([500]))[0]
    ref = chi2_contingency([[30, 70], [200, 300]], correction=False)[1]
    assert p == pytest.approx(ref, rel=1e-9)


def test_permutation_homogeneity_agrees_with_chi2_for_disjoint_groups() -> None:
    from scipy.stats import chi2_contingency

    rng = np.random.default_rng(1)
    g = rng.integers(0, 4, 2000)
    y = (rng.random(2000) < 0.3 + 0.03 * g).astype(float)
    res = permutation_homogeneity(y, np.eye(4)[g], n_perm=4000, rng=0)
    table = [[((g == i) & (y == 1)).sum(), ((g == i) & (y == 0)).sum()] for i in range(4)]
    stat, p_chi2 = chi2_contingency(table, correction=False)[:2]
    assert res.statistic == pytest.approx(stat, rel=1e-9) and res.df == 3
    assert res.p == pytest.approx(p_chi2, abs=0.006)
    assert permutation_homogeneity(y, np.eye(4)[g], n_perm=200, rng=5) == permutation_homogeneity(
        y, np.eye(4)[g], n_perm=200, rng=5
    )


def _labels(rng: np.random.Generator, n_items: int, n_groups: int) -> np.ndarray:
    """Overlapping 0/1 group labels: every item in one group, some in a second."""
    m = np.eye(n_groups)[rng.integers(0, n_groups, n_items)]
    m[np.arange(n_items), rng.integers(0, n_groups, n_items)] = 1.0
    return m


def test_shared_homogeneity_equals_one_test_per_run_with_every_item() -> None:
    rng = np.random.default_rng(3)
    m = _labels(rng, 300, 5)
    ys = (rng.random((4, 300)) < np.array([[0.2], [0.4], [0.5], [0.7]]) + 0.05 * m[:, 0]).astype(float)
    ys[3] = 1.0  # a run that got everything right: no test
    perms = permutation_indices(300, 400, 7)
    shared = permutation_homogeneity_shared(ys, m, perms)
    for y, h in zip(ys[:3], shared[:3], strict=True):
        assert h == permutation_homogeneity(y, m, perms=perms)  # same statistic, same p, bit for bit
    assert np.isnan(shared[3].p) and shared[3].n_perm == 0


def _induced(perm: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """The permutation ``perm`` induces on the items ``inside`` (walk the cycle to the next one inside)."""
    out = np.full(perm.size, -1)
    for a in np.flatnonzero(inside):
        b = perm[a]
        while not inside[b]:
            b = perm[b]
        out[a] = b
    return out


def test_shared_homogeneity_of_a_partial_run_uses_the_induced_permutations() -> None:
    rng = np.random.default_rng(4)
    m = _labels(rng, 120, 4)
    y = (rng.random(120) < 0.3 + 0.1 * m[:, 1]).astype(float)
    inside = rng.random(120) > 0.3
    perms = permutation_indices(120, 300, 2)
    h = permutation_homogeneity_shared(np.where(inside, y, np.nan)[None, :], m, perms)[0]
    # the same test computed directly: each draw's induced permutation applied to the run's own items
    own = np.flatnonzero(inside)
    position = np.full(120, -1)
    position[own] = np.arange(own.size)
    induced = np.stack([position[_induced(p, inside)[own]] for p in perms])
    assert h == permutation_homogeneity(y[own], m[own], perms=induced)


def test_induced_permutations_are_uniform() -> None:
    from itertools import permutations

    inside = np.array([True, False, True, True])
    draws = [np.array(p) for p in permutations(range(4))]
    induced = [tuple(_induced(p, inside)[inside]) for p in draws]
    # each of the 3! permutations of the three items inside comes from exactly 4! / 3! draws
    assert sorted(Counter(induced).values()) == [4] * 6


def test_shared_homogeneity_p_agrees_with_scipy_permutation_test() -> None:
    from scipy.stats import permutation_test

    rng = np.random.default_rng(5)
    m = _labels(rng, 400, 4)
    y = (rng.random(400) < 0.35 + 0.08 * m[:, 2]).astype(float)
    inside = rng.random(400) > 0.1
    h = permutation_homogeneity_shared(np.where(inside, y, np.nan)[None, :], m, permutation_indices(400, 4000, 1))[0]
    own_m = m[inside]

    def chi2(v: np.ndarray) -> float:
        n = own_m.sum(axis=0)
        k = own_m.T @ v
        pbar = k.sum() / n.sum()
        return float((((k - n * pbar) ** 2) / (n * pbar * (1 - pbar))).sum())

    ref = permutation_test((y[inside],), chi2, permutation_type="pairings", n_resamples=4000,
                           alternative="greater", random_state=0)
    assert h.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert 0.005 < ref.pvalue < 0.5  # a p-value the two Monte Carlo estimates can disagree on
    assert h.p == pytest.approx(ref.pvalue, abs=0.03)  # four standard errors of two 4,000-draw estimates


# ---------------------------------------------------------------- large-sample homogeneity


def test_weighted_chi2_sf_is_chi2_for_equal_weights_and_matches_simulation_otherwise() -> None:
    from scipy.stats import chi2

    x = np.array([0.5, 3.0, 10.0, 25.0, 60.0])
    equal = weighted_chi2_sf(x, np.tile([2.0, 2.0, 2.0, 0.0], (5, 1)))  # zero weights add nothing
    assert equal == pytest.approx(chi2.sf(x / 2.0, 3), rel=1e-12)
    # the integral (weights not all equal) against the closed form it must reach as they become equal
    near = weighted_chi2_sf(x, np.tile([1.0, 1.0, 1.0 + 1e-6, 1.0, 1.0], (5, 1)))
    assert near == pytest.approx(chi2.sf(x, 5), abs=1e-6)
    w = np.array([3.0, 1.0, 0.5, 0.2])
    z = np.random.default_rng(0).standard_normal((400_000, 4))
    simulated = np.array([((z**2) @ w >= v).mean() for v in x])
    got = weighted_chi2_sf(x, np.tile(w, (5, 1)))
    assert (np.abs(got - simulated) <= 4 * np.sqrt(simulated * (1 - simulated) / 400_000) + 1e-5).all()
    assert weighted_chi2_sf(np.array([0.0, -1.0]), np.tile(w, (2, 1))).tolist() == [1.0, 1.0]


def test_asymptotic_homogeneity_of_disjoint_groups_is_the_chi2_test_up_to_n_over_n_minus_1() -> None:
    from scipy.stats import chi2, chi2_contingency

    rng = np.random.default_rng(1)
    g = rng.integers(0, 4, 2000)
    y = (rng.random(2000) < 0.3 + 0.03 * g).astype(float)
    h = asymptotic_homogeneity_shared(y[None, :], np.eye(4)[g])[0]
    table = [[((g == i) & (y == 1)).sum(), ((g == i) & (y == 0)).sum()] for i in range(4)]
    stat = chi2_contingency(table, correction=False)[0]
    assert h.method == "asymptotic" and h.n_perm == 0 and h.df == 3
    assert h.statistic == pytest.approx(stat, rel=1e-9)
    assert h.p == pytest.approx(chi2.sf(stat * 1999 / 2000, 3), rel=1e-9)
    assert h.statistic == permutation_homogeneity(y, np.eye(4)[g], n_perm=10, rng=0).statistic  # the same χ²


@pytest.mark.parametrize("effect", [0.0, 0.06, 0.1])
def test_asymptotic_homogeneity_agrees_with_many_permutations_for_overlapping_groups(effect: float) -> None:
    rng = np.random.default_rng(int(effect * 100))
    m = _labels(rng, 800, 6)
    y = (rng.random(800) < 0.35 + effect * m[:, 0] - effect * m[:, 1]).astype(float)
    inside = rng.random(800) > 0.1  # a run with only some of the items, as the shared permutations allow
    ys = np.where(inside, y, np.nan)[None, :]
    assert asymptotic_homogeneity_applies(ys, m).all()
    h = asymptotic_homogeneity_shared(ys, m)[0]
    perm = permutation_homogeneity(y[inside], m[inside], n_perm=20_000, rng=2)
    assert h.statistic == pytest.approx(perm.statistic, rel=1e-12)
    se = math.sqrt(max(perm.p * (1 - perm.p), 1e-4) / 20_000)
    assert h.p == pytest.approx(perm.p, abs=4 * se)


def test_asymptotic_homogeneity_is_calibrated_under_the_null() -> None:
    rng = np.random.default_rng(9)
    m = _labels(rng, 500, 10)
    ys = (rng.random((400, 500)) < 0.4).astype(float)  # 400 runs without any group effect
    p = np.array([h.p for h in asymptotic_homogeneity_shared(ys, m)])
    assert abs((p < 0.05).mean() - 0.05) < 3 * math.sqrt(0.05 * 0.95 / 400)
    assert abs((p < 0.5).mean() - 0.5) < 3 * math.sqrt(0.25 / 400)


def test_asymptotic_homogeneity_applies_only_with_enough_expected_answers() -> None:
    rng = np.random.default_rng(4)
    m = _labels(rng, 600, 4)
    common = (rng.random(600) < 0.4).astype(float)
    rare = np.zeros(600)
    rare[:8] = 1.0  # 8 right answers of 600: a group of about 260 items expects fewer than 5
    constant = np.ones(600)
    one_group = np.eye(4)[np.zeros(600, dtype=int)]
    assert asymptotic_homogeneity_applies(np.stack([common, rare, constant]), m).tolist() == [True, False, False]
    assert not asymptotic_homogeneity_applies(common[None, :], one_group).any()
    h = asymptotic_homogeneity_shared(np.stack([constant, common]), m)
    assert np.isnan(h[0].p) and np.isnan(h[0].statistic) and 0.0 <= h[1].p <= 1.0
