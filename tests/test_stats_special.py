"""cresowlve_core.stats computes its ranks, correlations and tail probabilities without scipy.stats
(scipy.special and numpy only, so an analysis kernel does not pay scipy.stats' import). Each
replacement is compared here with the scipy.stats function it replaces, over seeded inputs with
ties, the smallest sizes, r = ±1 and constant inputs."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from cresowlve_core import stats as S


def _samples(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs of float vectors: continuous, heavily tied, exactly linear (r = ±1), binary, rounded."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(2, 60)) if i % 7 else int(rng.integers(2, 4))  # n = 2 and 3 often
        kind = i % 6
        if kind == 0:
            a, b = rng.normal(size=n), rng.normal(size=n)
        elif kind == 1:
            a, b = rng.integers(0, 4, n).astype(float), rng.integers(0, 3, n).astype(float)
        elif kind == 2:
            a = rng.normal(size=n)
            b = 2.0 * a + 1.0
        elif kind == 3:
            a = rng.normal(size=n)
            b = -0.5 * a
        elif kind == 4:
            a = rng.integers(0, 2, n).astype(float)
            b = -3.0 * a + rng.integers(0, 2, n)
        else:
            a = rng.integers(1, 6, n).astype(float)
            b = np.round(rng.normal(size=n) * a, 1)
        out.append((a, b))
    return out


def _same(ours: float, theirs: float) -> bool:
    if math.isnan(theirs):
        return math.isnan(ours)
    return abs(ours - theirs) <= 1e-12 * max(1.0, abs(theirs))


def test_average_ranks_equal_rankdata():
    rng = np.random.default_rng(1)
    cases = [np.array([]), np.array([3.0]), np.array([2.0, 2.0]), np.array([1.0, 2.0, 2.0]), np.ones(5)]
    cases += [rng.integers(0, k, int(rng.integers(1, 40))).astype(float) for k in (1, 2, 3, 10, 1000) for _ in range(40)]
    cases += [rng.normal(size=50), np.array([-np.inf, 0.0, np.inf, 0.0])]
    for v in cases:
        ours = S.average_ranks(v)
        assert ours.dtype == np.float64
        assert np.array_equal(ours, sps.rankdata(v)), v
    assert S.average_ranks(np.array([[3, 1], [1, 2]])).tolist() == [4.0, 1.5, 1.5, 3.0]  # flattened


def test_pearson_and_spearman_equal_scipy():
    for a, b in _samples(2, 1500):
        r, p = S._pearson(a, b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns for a constant sample
            ref = sps.pearsonr(a, b)
        assert _same(r, float(ref.statistic)) and _same(p, float(ref.pvalue)), (a, b)
        rho, rho_p = S._spearman(a, b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = sps.spearmanr(a, b)
        assert _same(rho, float(ref.statistic)) and _same(rho_p, float(ref.pvalue)), (a, b)


def test_correlations_at_the_edges():
    # n = 2: r is ±1 and p is 1, as scipy returns
    assert S._pearson(np.array([1.0, 2.0]), np.array([5.0, 3.0])) == (-1.0, 1.0)
    assert sps.pearsonr([1.0, 2.0], [5.0, 3.0]).pvalue == 1.0
    # n = 3, r = +-1 (to rounding): p about 0
    for sign in (1.0, -1.0):
        x = np.array([1.0, 2.0, 4.0])
        r, p = S._pearson(x, sign * x)
        ref = sps.pearsonr(x, sign * x)
        assert (r, p) == (float(ref.statistic), float(ref.pvalue))
        assert abs(r - sign) < 1e-15 and p < 1e-7
        rho, rho_p = S._spearman(x, sign * x)
        ref = sps.spearmanr(x, sign * x)
        assert (rho, rho_p) == (float(ref.statistic), float(ref.pvalue))
    # a constant input: NaN for both, where scipy warns and gives NaN
    const, x = np.full(5, 2.0), np.arange(5.0)
    for ours_fn, theirs_fn in ((S._pearson, sps.pearsonr), (S._spearman, sps.spearmanr)):
        for a, b in ((const, x), (x, const)):
            with pytest.warns(sps.ConstantInputWarning):
                ref = theirs_fn(a, b)
            assert math.isnan(float(ref.statistic)) and math.isnan(float(ref.pvalue))
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                ours = ours_fn(a, b)
            assert all(math.isnan(v) for v in ours)
    # correlation() keeps its own NaN result for constant input and fewer than 3 pairs
    c = S.correlation(const, x)
    assert math.isnan(c.pearson_r) and math.isnan(c.spearman_p)


def test_binom_half_cdf_is_exact_and_matches_scipy():
    for m in range(0, 120):
        ks = np.arange(-1, m + 2)
        theirs = sps.binom.cdf(ks, m, 0.5)
        for k, ref in zip(ks.tolist(), theirs.tolist()):
            ours = S.binom_half_cdf(k, m)
            exact = Fraction(sum(math.comb(m, i) for i in range(min(k, m) + 1)), 1 << m)
            assert ours == float(exact)
            assert abs(ours - ref) <= 1e-15
    # McNemar's exact range: every p prints as scipy's did
    for m in range(1, S.EXACT_BELOW):
        for k in range(0, m // 2 + 1):
            ours = min(1.0, 2.0 * S.binom_half_cdf(k, m))
            assert S.format_p(ours) == S.format_p(min(1.0, 2.0 * float(sps.binom.cdf(k, m, 0.5))))


def test_chi2_and_normal_tails_equal_scipy():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.exponential(5.0, 2000), [0.0, -1.0, 1e-300, 1e3, np.inf, np.nan]])
    for df in (1, 2, 3, 7, 30):
        assert np.array_equal(S.chi2_sf(x, df), sps.chi2.sf(x, df), equal_nan=True)
    dfs = rng.integers(1, 20, x.size)
    assert np.array_equal(S.chi2_sf(x, dfs), sps.chi2.sf(x, dfs), equal_nan=True)
    assert float(S.chi2_sf(3.2, 1)) == float(sps.chi2.sf(3.2, 1))
    z = np.concatenate([rng.normal(0.0, 4.0, 2000), [0.0, 40.0, -40.0, np.inf, -np.inf, np.nan]])
    assert np.array_equal(S.norm_sf(z), sps.norm.sf(z), equal_nan=True)
    assert float(S.norm_sf(1.96)) == float(sps.norm.sf(1.96))


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (its own sys.modules); its stdout, after it exited 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_analysis_does_not_import_scipy_stats():
    code = (
        "import sys, numpy as np\n"
        "from cresowlve_core.analysis import report\n"
        "from cresowlve_core import stats as S\n"
        "print(report.self_checks())\n"
        "S.correlation(np.arange(30.0), np.arange(30.0) % 7); S.correlation([1, 2, 3, 5], [2, 1, 4, 3])\n"
        "S.mcnemar(3, 9); S.mcnemar(30, 9); S.cochran_armitage([1, 4, 8], [10, 10, 10])\n"
        "S.two_proportion_z(np.array([3.0]), np.array([10.0]), np.array([7.0]), np.array([12.0]))\n"
        "S.weighted_chi2_sf(np.array([3.0, 4.0]), np.array([[1.0, 1.0], [1.0, 0.5]]))\n"
        "assert 'scipy.stats' not in sys.modules, 'scipy.stats was imported'\n"
    )
    assert "all ok: True" in _python(code)


def test_z_equals_ndtri_and_the_95_level_imports_no_scipy():
    from scipy.special import ndtri

    for c in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        assert S._z(c) == float(ndtri(0.5 + c / 2.0))  # bit for bit, the 95% constant included
    code = (
        "import sys\n"
        "from cresowlve_core import stats as S\n"
        "print(S.wilson_interval(5, 10), S.wilson_interval(0, 0), S.fisher_z_interval(0.3, 40))\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'scipy'], 'scipy was imported'\n"
    )
    _python(code)
