"""Statistics used by every analysis section: intervals, bootstrap, correlations, agreement.

All functions are plain numpy/scipy, vectorised, and deterministic given a seed.

* :func:`wilson_interval` — score interval for a binomial proportion (Wilson, 1927).
* :func:`bootstrap_mean_ci` / :func:`bootstrap_ci` — percentile bootstrap with a seeded,
  vectorised resample-index matrix.
* :func:`diff_proportions` — difference of two independent proportions with Newcombe's
  hybrid score interval (Newcombe, 1998, method 10).
* :func:`correlation` — Pearson and Spearman coefficients with two-sided p-values.
* :func:`cohen_kappa` — Cohen's κ for two raters over the same items.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

Z95 = float(sps.norm.ppf(0.975))
_CHUNK_CELLS = 4_000_000  # cap on resample-matrix size (cells) held in memory at once


def _z(confidence: float) -> float:
    return float(sps.norm.ppf(0.5 + confidence / 2.0))


def wilson_interval(k: int | np.ndarray, n: int | np.ndarray, confidence: float = 0.95) -> tuple[Any, Any]:
    """Wilson score interval for ``k`` successes out of ``n`` (scalars or arrays).

    Returns ``(low, high)`` as proportions in [0, 1]; ``n == 0`` gives NaN.
    Example: 5/10 → (0.2366, 0.7634).
    """
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    z = _z(confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k_arr / n_arr
        denom = 1.0 + z * z / n_arr
        centre = (p + z * z / (2.0 * n_arr)) / denom
        half = z * np.sqrt(p * (1.0 - p) / n_arr + z * z / (4.0 * n_arr * n_arr)) / denom
        low = np.clip(centre - half, 0.0, 1.0)
        high = np.clip(centre + half, 0.0, 1.0)
    # exact bounds at the edges (avoid 1e-17 rounding noise)
    low = np.where(k_arr == 0, 0.0, low)
    high = np.where(k_arr == n_arr, 1.0, high)
    low = np.where(n_arr > 0, low, np.nan)
    high = np.where(n_arr > 0, high, np.nan)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def stable_seed(seed: int, *key: object) -> np.random.Generator:
    """A generator seeded by ``seed`` and a stable hash of ``key``.

    Each group (e.g. one model × language × difficulty) gets its own stream, so adding or
    removing other runs never changes a group's bootstrap interval.
    """
    digest = zlib.crc32("\x1f".join(map(str, key)).encode("utf-8"))
    return np.random.default_rng([int(seed), digest])


def bootstrap_means(values: np.ndarray, n_boot: int = 1000, rng: np.random.Generator | int = 0) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the mean of ``values`` (1-D, NaN-free).

    Each replicate draws ``len(values)`` indices with replacement; the index matrix is built
    in chunks of at most a few million cells so memory stays bounded.
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if n == 0:
        return np.full(n_boot, np.nan)
    out = np.empty(n_boot)
    rows = max(1, _CHUNK_CELLS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        idx = gen.integers(0, n, size=(stop - start, n))
        out[start:stop] = x[idx].mean(axis=1)
    return out


def percentile_interval(replicates: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates (NaN if there are none)."""
    r = np.asarray(replicates, dtype=float)
    r = r[~np.isnan(r)]
    if r.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(r, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval and the sample size behind it."""

    value: float
    low: float
    high: float
    n: int


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    seed: int | np.random.Generator = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Mean of ``values`` with a seeded percentile-bootstrap interval (NaNs are dropped)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    low, high = percentile_interval(bootstrap_means(x, n_boot, seed), confidence)
    return Estimate(float(x.mean()), low, high, int(x.size))


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Any statistic with a seeded percentile-bootstrap interval.

    ``statistic`` must be vectorised over rows: it receives an ``(m, n)`` array of resamples
    (and, for the point estimate, a ``(1, n)`` array) and returns ``m`` values, e.g.
    ``lambda a: np.median(a, axis=1)``.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = x.size
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    gen = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    rows = max(1, _CHUNK_CELLS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        reps[start:stop] = statistic(x[gen.integers(0, n, size=(stop - start, n))])
    low, high = percentile_interval(reps, confidence)
    return Estimate(float(statistic(x[None, :])[0]), low, high, n)


@dataclass(frozen=True)
class Difference:
    """``p1 - p2`` with a confidence interval."""

    diff: float
    low: float
    high: float
    p1: float
    p2: float


def diff_proportions(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95) -> Difference:
    """Difference of two independent proportions, ``k1/n1 - k2/n2``, Newcombe hybrid score CI.

    Newcombe (1998) method 10: combine the Wilson intervals ``(l1, u1)`` and ``(l2, u2)`` as
    ``low = d - sqrt((p1-l1)² + (u2-p2)²)`` and ``high = d + sqrt((u1-p1)² + (p2-l2)²)``.
    Example (Newcombe's Table II): 56/70 − 48/80 → 0.2 (0.0524, 0.3339).
    """
    if n1 <= 0 or n2 <= 0:
        nan = float("nan")
        return Difference(nan, nan, nan, nan, nan)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    d = p1 - p2
    low = d - float(np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2))
    high = d + float(np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))
    return Difference(d, low, high, p1, p2)


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman coefficients with two-sided p-values over ``n`` complete pairs."""

    n: int
    pearson_r: float
    pearson_p: float
    spearman_rho: float
    spearman_p: float


def correlation(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> Correlation:
    """Pearson and Spearman correlation of paired samples (pairs with a NaN are dropped).

    Fewer than 3 complete pairs, or a constant variable, give NaN coefficients rather than
    an exception, so a section over partial data still renders.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    n = int(a.size)
    nan = float("nan")
    if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return Correlation(n, nan, nan, nan, nan)
    pr = sps.pearsonr(a, b)
    sr = sps.spearmanr(a, b)
    return Correlation(n, float(pr.statistic), float(pr.pvalue), float(sr.statistic), float(sr.pvalue))


@dataclass(frozen=True)
class Agreement:
    """Agreement of two raters on binary labels: counts, raw agreement and Cohen's κ."""

    n: int
    both_yes: int
    a_yes_b_no: int
    a_no_b_yes: int
    both_no: int
    observed: float
    expected: float
    kappa: float


def cohen_kappa(a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray) -> float:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) for two raters' labels on the same items.

    Works for any hashable label set. Returns 1.0 when both raters agree perfectly on a
    single category (p_e = 1), NaN for no items.
    """
    la = np.asarray(a, dtype=object)
    lb = np.asarray(b, dtype=object)
    if la.shape != lb.shape:
        raise ValueError("raters must label the same items")
    n = la.size
    if n == 0:
        return float("nan")
    cats = sorted(set(la.tolist()) | set(lb.tolist()), key=str)
    index = {c: i for i, c in enumerate(cats)}
    ia = np.fromiter((index[v] for v in la.tolist()), dtype=int, count=n)
    ib = np.fromiter((index[v] for v in lb.tolist()), dtype=int, count=n)
    table = np.zeros((len(cats), len(cats)))
    np.add.at(table, (ia, ib), 1)
    return _kappa_from_table(table)


def _kappa_from_table(table: np.ndarray) -> float:
    n = table.sum()
    if n == 0:
        return float("nan")
    po = np.trace(table) / n
    pe = float((table.sum(axis=1) * table.sum(axis=0)).sum() / (n * n))
    if pe >= 1.0:
        return 1.0 if po >= 1.0 else float("nan")
    return float((po - pe) / (1.0 - pe))


def binary_agreement(a: np.ndarray, b: np.ndarray) -> Agreement:
    """Confusion counts, raw agreement and κ for two boolean raters (rows with NaN dropped)."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep].astype(bool), y[keep].astype(bool)
    tt = int(np.sum(x & y))
    tf = int(np.sum(x & ~y))
    ft = int(np.sum(~x & y))
    ff = int(np.sum(~x & ~y))
    n = tt + tf + ft + ff
    table = np.array([[tt, tf], [ft, ff]], dtype=float)
    if n == 0:
        nan = float("nan")
        return Agreement(0, 0, 0, 0, 0, nan, nan, nan)
    pe = float((table.sum(axis=1) * table.sum(axis=0)).sum() / (n * n))
    return Agreement(n, tt, tf, ft, ff, (tt + ff) / n, pe, _kappa_from_table(table))
