"""Statistics used by every analysis section: intervals, bootstrap, correlations, agreement.

All functions are plain numpy and scipy.special (not scipy.stats: its import costs a kernel about a second of CPU), vectorised, and deterministic given a seed.

* :func:`wilson_interval` — score interval for a binomial proportion (Wilson, 1927).
* :func:`bootstrap_mean_ci` / :func:`bootstrap_ci` — percentile bootstrap with a seeded,
  vectorised resample-index matrix.
* :func:`diff_proportions` — difference of two independent proportions with Newcombe's
  hybrid score interval (Newcombe, 1998, method 10).
* :func:`linear_combination_interval` — a weighted sum of independent proportions (e.g. a
  difficulty-standardised difference) with the MOVER-Wilson interval (Zou, Huang & Zhang, 2009).
* :func:`correlation` — Pearson and Spearman coefficients with two-sided p-values (Spearman's
  exact permutation p for n ≤ 10, :func:`spearman_exact_p`).
* :func:`format_p` — how every report prints a p-value (``< 0.0001``, ``–`` for none).
* :func:`cohen_kappa` — Cohen's κ for two raters over the same items (NaN = undefined when
  chance agreement is 1); :func:`binary_agreement` adds its asymptotic 95 % interval.
* :func:`mcnemar` — paired test of two binary outcomes on the same items (exact binomial for
  few discordant pairs), with the Bonett–Price interval for the paired difference.
* :func:`benjamini_hochberg` / :func:`holm` — adjusted p-values for a family of tests.
* :func:`cochran_armitage` — trend test for proportions over ordered groups (difficulty).
* :func:`two_proportion_z` — vectorised z test of one group's proportion against the rest.
* :func:`permutation_homogeneity` — χ² homogeneity across (possibly overlapping) groups with a
  seeded permutation p-value; :func:`permutation_homogeneity_shared` the same test for many
  runs over one set of items and permutations at once.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cresowlve_core.failures import InputError


def average_ranks(v: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``v`` (flattened), ties given the average of the ranks they span: what
    ``scipy.stats.rankdata(v)`` returns (its ``"average"`` method), with the same arithmetic, for
    input without NaN. The analysis uses these few lines instead of importing ``scipy.stats``,
    whose import costs about a second of CPU per kernel (scipy 1.17 rebuilds docstrings)."""
    x = np.asarray(v).reshape(-1)
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    first = np.flatnonzero(np.concatenate(([True], ordered[:-1] != ordered[1:]))) if x.size else np.arange(0)
    counts = np.diff(first, append=x.size)
    ranks = np.empty(x.size, dtype=float)
    ranks[order] = np.repeat((first + 1.0) + (counts.astype(float) - 1.0) / 2.0, counts)
    return ranks


def _pearson(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Pearson's r and its two-sided p (r's null distribution: Beta(n/2 − 1, n/2 − 1) on [−1, 1]) for
    two float vectors of n ≥ 2 values: ``scipy.stats.pearsonr``'s steps (centre, scale by the largest
    deviation, norm, dot product, clip; r = ±1 and p = 1 at n = 2), through ``scipy.special`` only.
    A constant vector gives NaN, NaN."""
    from scipy.special import betaincc

    n = a.size
    if n < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan"), float("nan")
    # along an axis, as scipy does: np.linalg.norm without one sums in another order (last bits differ)
    xm, ym = a - np.mean(a, keepdims=True), b - np.mean(b, keepdims=True)
    xmax, ymax = np.max(np.abs(xm), keepdims=True), np.max(np.abs(ym), keepdims=True)
    normxm = xmax * np.linalg.norm(xm / xmax, axis=-1, keepdims=True)
    normym = ymax * np.linalg.norm(ym / ymax, axis=-1, keepdims=True)
    r = float(np.clip(np.vecdot(xm / normxm, ym / normym), -1.0, 1.0))
    if n == 2:
        return float(round(r)), 1.0
    ab = n / 2.0 - 1.0
    return r, float(2.0 * betaincc(ab, ab, (abs(r) - -1.0) / 2.0))


def _spearman(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Spearman's ρ (Pearson's r of the average ranks, by ``np.corrcoef``) and its two-sided p from
    the t approximation with n − 2 df: ``scipy.stats.spearmanr``'s steps, through ``scipy.special``
    only. A constant vector, or fewer than 2 values, gives NaN, NaN."""
    from scipy.special import stdtr

    n = a.size
    if n < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan"), float("nan")
    rs = np.corrcoef(np.column_stack((average_ranks(a), average_ranks(b))), rowvar=False)[1, 0]
    dof = n - 2
    with np.errstate(divide="ignore"):
        t = rs * np.sqrt((dof / ((rs + 1.0) * (1.0 - rs))).clip(0))
    return float(rs), float(2.0 * stdtr(dof, -np.abs(t)))


def binom_half_cdf(k: int, m: int) -> float:
    """``P[X ≤ k]`` for X ~ Bin(m, ½), exactly: the integer count ``Σ_{i ≤ k} C(m, i)`` over ``2^m``,
    rounded once to a float. ``scipy.stats.binom.cdf(k, m, 0.5)`` (Boost) is within 1e-15 of it; below
    m = 25 (McNemar's exact range) it differs in the last bit at m = 15, k = 5, 6, 7 only, and there
    ``2·P`` prints the same p."""
    if k < 0:
        return 0.0
    if k >= m:
        return 1.0
    return sum(math.comb(m, i) for i in range(k + 1)) / (1 << m)  # int / int: correctly rounded


def chi2_sf(x: Any, df: Any) -> Any:
    """``P[χ²_df ≥ x]`` (``scipy.stats.chi2.sf``: ``scipy.special.chdtrc``, 1 at and below 0, NaN stays NaN)."""
    from scipy.special import chdtrc

    xs = np.asarray(x, dtype=float)
    return np.where(xs <= 0, 1.0, chdtrc(df, xs))


def norm_sf(x: Any) -> Any:
    """``P[Z ≥ x]`` for a standard normal Z (``scipy.stats.norm.sf``: ``scipy.special.ndtr(−x)``)."""
    from scipy.special import ndtr

    return ndtr(-np.asarray(x, dtype=float))


_CHUNK_CELLS = 4_000_000  # cap on resample-matrix size (cells) held in memory at once


# scipy.special.ndtri(0.975), bit for bit (the float nearest 1.95996398454005423552...): the 95% level
# every caller uses, so an eval's summary never imports scipy (about half a second of CPU).
# statistics.NormalDist().inv_cdf(0.975) is one ulp below it.
_Z95 = 1.959963984540054


def _z(confidence: float) -> float:
    if confidence == 0.95:
        return _Z95
    from scipy.special import ndtri  # what scipy.stats.norm.ppf computes, without importing scipy.stats

    return float(ndtri(0.5 + confidence / 2.0))


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


def zero_width(low: float, high: float) -> bool:
    """True when an interval has zero width or is undefined: no interval to show, and it cannot decide
    a signal (every resample gave one value, or |ρ| = 1 under Fisher's z)."""
    return bool(math.isnan(low) or math.isnan(high) or high - low <= 1e-12)


def seeded_rank(seed: int, *key: object) -> str:
    """A unit's place in a seeded draw without replacement (sort by it, take the first n): a digest of the
    seed and the unit's own key alone. Unlike a draw from a generator over the list, a unit's place does not
    depend on the other units, so a sample stays as it is when the list grows or loses units (only a
    sampled unit that left is replaced, by the next in rank)."""
    return hashlib.sha256("\0".join(map(str, (seed, *key))).encode()).hexdigest()


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


def linear_combination_interval(
    k: Sequence[int] | np.ndarray,
    n: Sequence[int] | np.ndarray,
    coef: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """``Σ c_i k_i/n_i`` over independent binomial proportions, with the MOVER-Wilson interval.

    Zou, Huang & Zhang (2009), "A note on confidence interval estimation for a linear function of
    binomial proportions" (Comput. Stat. Data Anal. 53:1080–1085): with each proportion's Wilson
    interval ``(l_i, u_i)``,
    ``low = Σ c_i p_i − sqrt(Σ (c_i p_i − min(c_i l_i, c_i u_i))²)`` and
    ``high = Σ c_i p_i + sqrt(Σ (max(c_i l_i, c_i u_i) − c_i p_i)²)``. With one proportion on
    each side and coefficients ±1 this is Newcombe's hybrid score interval
    (:func:`diff_proportions`). A stratum at 0/n or n/n keeps its Wilson width, so an all-zero
    group never collapses the interval (a bootstrap of 0/50 has none). Returns
    ``(estimate, low, high)``; NaN when a stratum has ``n == 0``.
    """
    kk = np.asarray(k, dtype=float)
    nn = np.asarray(n, dtype=float)
    cc = np.asarray(coef, dtype=float)
    if kk.size == 0 or np.any(nn <= 0):
        nan = float("nan")
        return nan, nan, nan
    p = kk / nn
    lo, hi = wilson_interval(kk, nn, confidence)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    est = float((cc * p).sum())
    below = np.minimum(cc * lo, cc * hi)
    above = np.maximum(cc * lo, cc * hi)
    low = est - float(np.sqrt(((cc * p - below) ** 2).sum()))
    high = est + float(np.sqrt(((above - cc * p) ** 2).sum()))
    return est, low, high


def _ranks2(v: np.ndarray) -> np.ndarray:
    """Twice the average ranks (integers, also with ties)."""
    return np.rint(2.0 * average_ranks(v)).astype(np.int64)


EXACT_SPEARMAN_MAX_N = 10


def spearman_exact_p(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Two-sided exact permutation p of Spearman's ρ: the share of all ``n!`` pairings whose
    |ρ| is at least the observed |ρ| (ties: average ranks, the permutation distribution itself).

    Counted, not sampled, by a dynamic programme over subsets of ``y``'s ranks (``2^n`` states
    of the statistic ``Σ r_x r_y``, exact integers), so n = 10 takes milliseconds. Example:
    ρ = 1 with n = 3 gives 2/6 = 0.3333 (the asymptotic t approximation gives 0). Only for
    ``n ≤`` :data:`EXACT_SPEARMAN_MAX_N`; NaN for a constant variable.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    n = int(a.size)
    if n != b.size:
        raise ValueError("x and y must have the same length")
    if n > EXACT_SPEARMAN_MAX_N:
        raise ValueError(f"exact Spearman p is for n <= {EXACT_SPEARMAN_MAX_N}, got n = {n}")
    if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    ra, rb = _ranks2(a), _ranks2(b)
    observed = int((ra * rb).sum())
    # Σ ra·rb over every pairing; centre = n · mean(ra) · mean(rb), kept integral by scaling by n
    centre_n = int(ra.sum()) * int(rb.sum())
    top = int(ra.max()) * int(rb.max()) * n + 1
    dist = {0: np.zeros(top, dtype=np.int64)}
    dist[0][0] = 1
    for mask in range(1 << n):
        cur = dist.pop(mask, None)
        if cur is None:
            continue
        i = bin(mask).count("1")
        if i == n:
            counts = cur
            break
        for j in range(n):
            if mask & (1 << j):
                continue
            shift = int(ra[i] * rb[j])
            nxt = dist.setdefault(mask | (1 << j), np.zeros(top, dtype=np.int64))
            nxt[shift:] += cur[: top - shift]
    values = np.arange(top, dtype=np.int64)
    extreme = np.abs(n * values - centre_n) >= abs(n * observed - centre_n)
    return float(counts[extreme].sum() / counts.sum())


#: the most distinct arrangements :func:`pearson_exact_p` enumerates (a 0/1 outcome of 10 items has at most 252,
#: difficulty levels 1-5 of 10 items at most 113,400); above it Pearson's p stays the asymptotic t test's
EXACT_PEARSON_MAX_ARRANGEMENTS = 200_000


def _arrangements(counts: np.ndarray) -> int:
    """The number of distinct orders of a multiset with these value counts: n! / Π c!."""
    return math.factorial(int(counts.sum())) // math.prod(math.factorial(int(c)) for c in counts)


def pearson_exact_p(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Two-sided exact permutation p of Pearson's r: the share of all ``n!`` pairings whose |r| is at
    least the observed |r|. Example: r = 1 with n = 3 gives 2/6 = 0.3333 (the t test gives 0).

    Pearson's r is increasing in ``Σ x·y`` (the means and spreads do not change under a pairing), so the
    distinct orders of the variable with more ties are enumerated (each stands for the same number of
    pairings): a 0/1 outcome of 10 items has 252. NaN for a constant variable; a ``ValueError`` above
    :data:`EXACT_PEARSON_MAX_ARRANGEMENTS` orders.
    """
    from itertools import combinations

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = int(a.size)
    if n != b.size:
        raise ValueError("x and y must have the same length")
    if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    if _arrangements(np.unique(a, return_counts=True)[1]) < _arrangements(np.unique(b, return_counts=True)[1]):
        a, b = b, a  # permute the variable with fewer distinct orders
    values, code, counts = np.unique(b, return_inverse=True, return_counts=True)
    if _arrangements(counts) > EXACT_PEARSON_MAX_ARRANGEMENTS:
        raise ValueError(f"exact Pearson p enumerates at most {EXACT_PEARSON_MAX_ARRANGEMENTS} orders, "
                         f"got {_arrangements(counts)}")
    rows = np.full((1, n), -1, dtype=np.int64)  # each row: one distinct order of b, as codes of its values
    for value, count in enumerate(counts):
        free = np.nonzero(rows < 0)[1].reshape(len(rows), -1)
        picks = np.array(list(combinations(range(free.shape[1]), int(count))), dtype=np.int64)
        grown = np.repeat(rows, len(picks), axis=0)
        at = free[:, picks].reshape(len(grown), int(count))
        grown[np.arange(len(grown))[:, None], at] = value
        rows = grown
    sums = values[rows] @ a
    centre = n * a.mean() * b.mean()
    observed = abs(float(values[code] @ a) - centre)
    tolerance = 1e-9 * max(1.0, float(np.abs(sums).max()))
    return float(np.mean(np.abs(sums - centre) >= observed - tolerance))


def complete_pairs(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as float arrays, keeping only the positions where both are known (not NaN)."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep], b[keep]


def format_p(p: float | None) -> str:
    """A p-value as every report prints it: ``< 0.0001`` below 1e-4, else four decimals
    (``0.0123``; ``1.0000``); ``–`` when there is none (NaN/None)."""
    if p is None:
        return "–"
    v = float(p)
    if np.isnan(v):
        return "–"
    return "< 0.0001" if v < 1e-4 else f"{v:.4f}"


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman coefficients with two-sided p-values and 95 % intervals over ``n`` pairs.

    Intervals use Fisher's z: standard error ``1/sqrt(n-3)`` for Pearson and the Bonett–Wright
    (2000) ``sqrt((1 + rho²/2)/(n-3))`` for Spearman. NaN below 4 pairs.
    """

    n: int
    pearson_r: float
    pearson_p: float
    spearman_rho: float
    spearman_p: float
    pearson_low: float = float("nan")
    pearson_high: float = float("nan")
    spearman_low: float = float("nan")
    spearman_high: float = float("nan")
    spearman_p_method: str = "asymptotic"  # "exact" (all pairings) for n <= EXACT_SPEARMAN_MAX_N; "not tested" (no p)
    pearson_p_method: str = "asymptotic"  # "exact" (all pairings) for n <= EXACT_SPEARMAN_MAX_N, as far as enumerable


def fisher_z_interval(r: float, n: int, confidence: float = 0.95, spearman: bool = False) -> tuple[float, float]:
    """Interval for a correlation coefficient through Fisher's z transform.

    ``spearman=True`` uses the Bonett–Wright variance ``(1 + r²/2)/(n − 3)``; otherwise
    ``1/(n − 3)``. NaN for ``n < 4`` or a NaN coefficient; ±1 gives the degenerate (r, r).
    """
    nan = float("nan")
    if n < 4 or r is None or np.isnan(r):
        return nan, nan
    if abs(r) >= 1.0:
        return float(r), float(r)
    var = (1.0 + r * r / 2.0) / (n - 3) if spearman else 1.0 / (n - 3)
    z = float(np.arctanh(r))
    half = _z(confidence) * float(np.sqrt(var))
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def correlation(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> Correlation:
    """Pearson and Spearman correlation of paired samples (pairs with a NaN are dropped).

    Fewer than 3 complete pairs, or a constant variable, give NaN coefficients rather than
    an exception, so a section over partial data still renders. Spearman's p is exact
    (:func:`spearman_exact_p`) for n ≤ 10, where the asymptotic t approximation fails (ρ = 1
    with n = 3 gives p = 0 there; exactly it is 0.33); ``spearman_p_method`` says which. So is
    Pearson's (:func:`pearson_exact_p`, the same failure: r = 1 with n = 3), where its distinct
    orders can be enumerated (always for a 0/1 outcome); ``pearson_p_method`` says which.
    """
    a, b = complete_pairs(x, y)
    n = int(a.size)
    nan = float("nan")
    if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:  # no coefficient, so no p: neither method was used
        return Correlation(n, nan, nan, nan, nan, spearman_p_method=NOT_TESTED, pearson_p_method=NOT_TESTED)
    r, r_p = _pearson(a, b)
    rho, rho_p = _spearman(a, b)
    p_lo, p_hi = fisher_z_interval(r, n)
    s_lo, s_hi = fisher_z_interval(rho, n, spearman=True)
    if n <= EXACT_SPEARMAN_MAX_N:
        s_p, method = spearman_exact_p(a, b), "exact"
    else:
        s_p, method = rho_p, "asymptotic"
    r_method = "asymptotic"
    if n <= EXACT_SPEARMAN_MAX_N and min(_arrangements(np.unique(v, return_counts=True)[1]) for v in (a, b)) \
            <= EXACT_PEARSON_MAX_ARRANGEMENTS:
        r_p, r_method = pearson_exact_p(a, b), "exact"
    return Correlation(n, r, r_p, rho, s_p, p_lo, p_hi, s_lo, s_hi, method, r_method)


@dataclass(frozen=True)
class Agreement:
    """Agreement of two raters on binary labels: counts, raw agreement, Cohen's κ and its 95 % CI."""

    n: int
    both_yes: int
    a_yes_b_no: int
    a_no_b_yes: int
    both_no: int
    observed: float
    expected: float
    kappa: float
    kappa_low: float = float("nan")
    kappa_high: float = float("nan")


def cohen_kappa(a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray) -> float:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) for two raters' labels on the same items.

    Works for any hashable label set. κ is **undefined** (NaN) when chance agreement p_e is 1
    (both raters used a single, identical category: there is nothing beyond chance to measure)
    and for no items.
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
    if pe >= 1.0 - 1e-12:
        return float("nan")
    return float((po - pe) / (1.0 - pe))


def kappa_interval(table: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Asymptotic interval for Cohen's κ of a square contingency ``table`` (raters a × b).

    Standard error of Fleiss, Cohen & Everitt (1969), the one statsmodels' ``cohens_kappa``
    reports; NaN when κ is undefined. The bounds are clipped to [−1, 1].
    """
    t = np.asarray(table, dtype=float)
    n = t.sum()
    nan = float("nan")
    kappa = _kappa_from_table(t)
    if n == 0 or np.isnan(kappa):
        return nan, nan
    p = t / n
    row, col = p.sum(axis=1), p.sum(axis=0)
    pe = float((row * col).sum())
    diag = np.diag(p)
    a = float((diag * (1.0 - (row + col) * (1.0 - kappa)) ** 2).sum())
    cross = p * (col[:, None] + row[None, :]) ** 2
    np.fill_diagonal(cross, 0.0)
    b = (1.0 - kappa) ** 2 * float(cross.sum())
    c = (kappa - pe * (1.0 - kappa)) ** 2
    var = max(0.0, (a + b - c) / ((1.0 - pe) ** 2 * n))
    half = _z(confidence) * float(np.sqrt(var))
    return max(-1.0, kappa - half), min(1.0, kappa + half)


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
    lo, hi = kappa_interval(table)
    return Agreement(n, tt, tf, ft, ff, (tt + ff) / n, pe, _kappa_from_table(table), lo, hi)


# ---------------------------------------------------------------- paired and multiple tests


@dataclass(frozen=True)
class McNemar:
    """McNemar's test of two binary outcomes on the same items.

    ``b`` = first right and second wrong, ``c`` = first wrong and second right, ``n`` = all
    pairs. ``diff`` = (b − c)/n = accuracy(first) − accuracy(second), with the Bonett–Price
    (2012) adjusted-Wald interval for a paired difference of proportions.
    """

    n: int
    b: int
    c: int
    statistic: float
    p: float
    method: str
    diff: float
    low: float
    high: float


EXACT_BELOW = 25  # discordant pairs below which McNemar uses the exact binomial test
NOT_TESTED = "not tested"  # the ``method`` of a test that had no data: no p, no interval


def mcnemar(b: int, c: int, n: int | None = None, exact_below: int = EXACT_BELOW, confidence: float = 0.95) -> McNemar:
    """McNemar's test from the discordant counts ``b`` and ``c`` (``n`` = all pairs).

    With fewer than ``exact_below`` discordant pairs the two-sided exact binomial test
    (``min(1, 2·P[X ≤ min(b, c)])``, X ~ Bin(b + c, ½)) is used; otherwise the χ² statistic
    ``(|b − c| − 1)² / (b + c)`` with continuity correction, 1 df. Pairs that all agree give
    p = 1; **no pair at all is no test**: ``method == "not tested"`` with p, difference and
    interval NaN (so it stays out of every Holm / BH family, which ignore NaN).
    """
    b, c = int(b), int(c)
    n = int(n) if n is not None else b + c
    m = b + c
    nan = float("nan")
    if n <= 0 and m == 0:
        return McNemar(0, 0, 0, nan, nan, NOT_TESTED, nan, nan, nan)
    if m == 0:
        stat, p, method = 0.0, 1.0, "exact"
    elif m < exact_below:
        stat = float(min(b, c))
        p = float(min(1.0, 2.0 * binom_half_cdf(min(b, c), m)))
        method = "exact"
    else:
        stat = (abs(b - c) - 1.0) ** 2 / m
        p = float(chi2_sf(stat, 1))
        method = "chi2-cc"
    if n <= 0:
        return McNemar(0, b, c, stat, p, method, nan, nan, nan)
    p12, p21 = (b + 1.0) / (n + 2.0), (c + 1.0) / (n + 2.0)
    d_adj = p12 - p21
    se = float(np.sqrt(max(0.0, p12 + p21 - d_adj * d_adj) / (n + 2.0)))
    half = _z(confidence) * se
    return McNemar(n, b, c, float(stat), p, method, (b - c) / n, max(-1.0, d_adj - half), min(1.0, d_adj + half))


def _adjust_ignoring_nan(p: Sequence[float] | np.ndarray, adjust: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply a p-value adjustment to the non-NaN entries only; NaNs stay NaN and do not count in ``m``."""
    x = np.asarray(p, dtype=float)
    out = np.full(x.shape, np.nan)
    ok = ~np.isnan(x)
    if ok.any():
        out[ok] = adjust(x[ok])
    return out


def _bh(v: np.ndarray) -> np.ndarray:
    m = len(v)
    order = np.argsort(v)
    scaled = v[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    res = np.empty(m)
    res[order] = np.minimum(q, 1.0)
    return res


def _holm(v: np.ndarray) -> np.ndarray:
    m = len(v)
    order = np.argsort(v)
    scaled = v[order] * (m - np.arange(m))
    res = np.empty(m)
    res[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return res


def benjamini_hochberg(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values); NaNs stay NaN and do not count.

    Reject at false-discovery rate α every test with ``q <= α``.
    """
    return _adjust_ignoring_nan(p, _bh)


def holm(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values (family-wise error control); NaNs ignored."""
    return _adjust_ignoring_nan(p, _holm)


@dataclass(frozen=True)
class Trend:
    """Cochran–Armitage trend test: ``z`` < 0 means the proportion falls as the score rises."""

    n: int
    z: float
    p: float


def cochran_armitage(k: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray | None = None) -> Trend:
    """Cochran–Armitage test for a linear trend of ``k_i / n_i`` over ordered ``scores``.

    ``z = Σ s_i (k_i − n_i p̄) / sqrt(p̄ (1 − p̄) [Σ n_i s_i² − (Σ n_i s_i)² / N])``, two-sided
    normal p. Scores default to 1, 2, ... . NaN when every outcome is the same or one group.
    """
    kk = np.asarray(k, dtype=float)
    nn = np.asarray(n, dtype=float)
    s = np.arange(1.0, kk.size + 1) if scores is None else np.asarray(scores, dtype=float)
    total = float(nn.sum())
    nan = float("nan")
    if total == 0:
        return Trend(0, nan, nan)
    pbar = float(kk.sum()) / total
    sxx = float((nn * s * s).sum() - (nn * s).sum() ** 2 / total)
    var = pbar * (1.0 - pbar) * sxx
    if var <= 0:
        return Trend(int(total), nan, nan)
    z = float((s * (kk - nn * pbar)).sum() / np.sqrt(var))
    return Trend(int(total), z, float(2.0 * norm_sf(abs(z))))


def two_proportion_z(k1: np.ndarray, n1: np.ndarray, k2: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """Two-sided p of the pooled two-proportion z test (= 2×2 χ² without correction), vectorised.

    NaN where a group is empty or the pooled proportion is 0 or 1.
    """
    k1, n1, k2, n2 = (np.asarray(v, dtype=float) for v in (k1, n1, k2, n2))
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = (k1 + k2) / (n1 + n2)
        se = np.sqrt(pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2))
        z = (k1 / n1 - k2 / n2) / se
        p = 2.0 * norm_sf(np.abs(z))
    return np.where((n1 > 0) & (n2 > 0) & (se > 0), p, np.nan)


@dataclass(frozen=True)
class Homogeneity:
    """χ² statistic for equal proportions across groups, with its p-value: from ``n_perm`` permutations
    (``method == "permutation"``) or from the statistic's large-sample permutation distribution
    (``"asymptotic"``, ``n_perm == 0``; :func:`asymptotic_homogeneity_shared`)."""

    statistic: float
    df: int
    p: float
    n_perm: int
    method: str = "permutation"


def _chi2_groups(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Pearson χ² of a groups × {right, wrong} table; ``k`` may be (groups, reps)."""
    n_col = n.reshape((-1,) + (1,) * (k.ndim - 1))
    total = n.sum()
    pbar = k.sum(axis=0) / total
    expected = n_col * pbar
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = ((k - expected) ** 2 / (expected * (1.0 - pbar))).sum(axis=0)
    return stat


def permutation_indices(n_items: int, n_perm: int = 1000, rng: np.random.Generator | int = 0) -> np.ndarray:
    """``n_perm`` seeded permutations of ``range(n_items)``, one per row (int32)."""
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return gen.permuted(np.tile(np.arange(n_items, dtype=np.int32), (n_perm, 1)), axis=1)


def permutation_homogeneity(
    outcome: np.ndarray,
    membership: np.ndarray,
    n_perm: int = 1000,
    rng: np.random.Generator | int = 0,
    perms: np.ndarray | None = None,
) -> Homogeneity:
    """Are the groups' proportions equal? ``outcome`` (items,) 0/1, ``membership`` (items, groups) 0/1.

    The statistic is Pearson's χ² of the groups × {right, wrong} table (an item counts in every
    group it belongs to). Because groups may overlap (multi-label annotations), the χ²
    reference distribution does not hold; the p-value is ``(1 + #{χ²_perm ≥ χ²}) / (1 + n_perm)``
    over ``n_perm`` seeded permutations of the outcomes across items, which keeps each item's
    labels together. For disjoint groups it agrees with the χ² test (``df`` = groups − 1).
    ``perms`` (from :func:`permutation_indices`) lets several tests over the same items share
    one set of permutations; it overrides ``n_perm`` and ``rng``.
    """
    y = np.asarray(outcome, dtype=float)
    m = np.asarray(membership, dtype=float)
    n = m.sum(axis=0)
    keep = n > 0
    m, n = m[:, keep], n[keep]
    nan = float("nan")
    if m.shape[1] < 2 or y.size == 0 or y.min() == y.max():
        return Homogeneity(nan, max(0, int(m.shape[1]) - 1), nan, 0)
    observed = float(_chi2_groups(m.T @ y, n))
    idx = perms if perms is not None else permutation_indices(y.size, n_perm, rng)
    if idx.shape[1] != y.size:
        raise ValueError(f"permutations are over {idx.shape[1]} items, the outcome has {y.size}")
    return _homogeneity_result(observed, y.astype(np.float32)[idx] @ m.astype(np.float32), n)


def _homogeneity_result(observed: float, counts: np.ndarray, n: np.ndarray) -> Homogeneity:
    """The test from the observed χ² and the permuted right-counts ``counts`` (n_perm, groups)."""
    stats = _chi2_groups(counts.T.astype(float), n)  # (groups, n_perm)
    p = (1.0 + float((stats >= observed - 1e-9).sum())) / (1.0 + counts.shape[0])
    return Homogeneity(observed, int(counts.shape[1]) - 1, p, int(counts.shape[0]))


def permutation_homogeneity_shared(outcomes: np.ndarray, membership: np.ndarray, perms: np.ndarray) -> list[Homogeneity]:
    """:func:`permutation_homogeneity` for many runs over one set of items, groups and permutations.

    ``outcomes`` (runs, items) holds each run's 0/1 outcomes, NaN for an item the run does not
    have; ``membership`` (items, groups) 0/1 (the rows of an item a run lacks are never read);
    ``perms`` (from :func:`permutation_indices`) permutes all the items. A run with every item gets
    exactly ``permutation_homogeneity(outcomes[r], membership, perms=perms)``, bit for bit.

    A run with only some items (its set ``S``) is permuted by the **induced** permutation of each
    draw ``π`` on ``S``: item ``a`` of ``S`` takes the outcome of the first item of ``S`` among
    ``π(a), π(π(a)), …`` (cycle walking). That is a uniformly random permutation of ``S``: removing one
    item from its cycle maps the ``N!`` permutations of ``N`` items onto the ``(N−1)!`` of the rest,
    ``N`` to one, and induction removes the items outside ``S`` one by one. So the test is the same
    permutation test, on other (equally random) draws than one drawn for ``S`` alone.

    How: in draw ``π`` the label row of item ``a`` takes the outcome of item ``π(a)``, so the right-count
    of group ``g`` is ``Σ_{a in g} y_π(a)``: one sparse matrix (a 1 per label and draw) times every
    run's outcomes (0 outside ``S``); a partial run then corrects only the pairs that touch its
    missing items. Counts are sums of 0/1 values, exact in floating point, so no rounding enters.
    """
    from scipy import sparse

    ys = np.asarray(outcomes, dtype=float)
    m = np.asarray(membership, dtype=float)
    if ys.ndim != 2 or ys.shape[1] != m.shape[0] or perms.shape[1] != m.shape[0]:
        raise ValueError(f"outcomes {ys.shape}, membership {m.shape} and permutations {perms.shape} disagree")
    present = ~np.isnan(ys)
    y0 = np.where(present, ys, 0.0)
    n_items, n_groups, n_perm = m.shape[0], m.shape[1], perms.shape[0]
    nan = float("nan")
    out: list[Homogeneity] = []
    testable: list[int] = []
    for r in range(ys.shape[0]):
        n = m[present[r]].sum(axis=0)
        y = ys[r, present[r]]
        groups = int((n > 0).sum())
        out.append(Homogeneity(nan, max(0, groups - 1), nan, 0))
        if groups >= 2 and y.size and y.min() != y.max():
            testable.append(r)
    if not testable:
        return out
    label_group, label_item = np.nonzero(m.T > 0)  # the labels, group by group
    # (items, runs) in float32: a count is a sum of at most n_items 0/1 values, exact in float32 below 2**24
    runs_y = np.ascontiguousarray(y0[testable].T, dtype=np.float32)
    counts = np.empty((len(testable), n_perm, n_groups))
    step = max(1, _CHUNK_CELLS // max(1, label_item.size, n_groups * len(testable)))
    group_sizes = np.bincount(label_group, minlength=n_groups)
    ones = np.ones(min(step, n_perm) * label_item.size, dtype=np.float32)
    for start in range(0, n_perm, step):
        draws = perms[start : start + step]
        c = draws.shape[0]
        # one row per (draw, group): the items whose outcomes that group's label rows take in that draw
        indptr = np.concatenate([[0], np.cumsum(np.tile(group_sizes, c))])
        pairs = sparse.csr_matrix((ones[: c * label_item.size], draws[:, label_item].ravel(), indptr),
                                  shape=(c * n_groups, n_items))
        counts[:, start : start + c, :] = (pairs @ runs_y).reshape(c, n_groups, -1).transpose(2, 0, 1)
    transposed: tuple[np.ndarray, np.ndarray] | None = None  # the permutations and their inverses, (items, n_perm)
    member = sparse.csr_matrix(m)
    for j, r in enumerate(testable):
        inside = present[r]
        n = m[inside].sum(axis=0)
        keep = n > 0
        observed = float(_chi2_groups(m[inside][:, keep].T @ ys[r, inside], n[keep]))
        k = counts[j]
        if not inside.all():
            if transposed is None:
                inverse = np.empty_like(perms)
                np.put_along_axis(inverse, perms, np.arange(n_items, dtype=perms.dtype)[None, :], axis=1)
                transposed = np.ascontiguousarray(perms.T), np.ascontiguousarray(inverse.T)
            k = k + _induced_correction(*transposed, inside, y0[r], member)
        out[r] = _homogeneity_result(observed, k[:, keep], n[keep])
    return out


#: the asymptotic homogeneity test applies to a run when each of its groups, and the items outside each,
#: expect at least this many right and this many wrong answers (Cochran's rule for χ² approximations)
ASYMPTOTIC_MIN_EXPECTED = 5.0


def asymptotic_homogeneity_applies(outcomes: np.ndarray, membership: np.ndarray,
                                   min_expected: float = ASYMPTOTIC_MIN_EXPECTED) -> np.ndarray:
    """Per run (row of ``outcomes``, NaN = item absent): whether :func:`asymptotic_homogeneity_shared`
    applies. With ``N`` items, a share ``p`` right and group sizes ``n_g``: at least two groups, and
    ``min(n_g, N − n_g) · min(p, 1 − p) ≥ min_expected`` for every group the run has items in."""
    ys = np.asarray(outcomes, dtype=float)
    m = np.asarray(membership, dtype=float)
    present = ~np.isnan(ys)
    n_items = present.sum(axis=1)
    share = np.where(present, ys, 0.0).sum(axis=1) / np.maximum(n_items, 1)
    sizes = present.astype(float) @ m  # (runs, groups)
    smaller = np.minimum(sizes, n_items[:, None] - sizes)
    expected = np.where(sizes > 0, smaller, np.inf) * np.minimum(share, 1.0 - share)[:, None]
    return ((sizes > 0).sum(axis=1) >= 2) & (expected.min(axis=1, initial=np.inf) >= min_expected)


def asymptotic_homogeneity_shared(outcomes: np.ndarray, membership: np.ndarray) -> list[Homogeneity]:
    """:func:`permutation_homogeneity_shared`'s χ² (the same value) with a p-value from its large-sample
    permutation distribution instead of permutations.

    Under the permutation null a run's outcomes ``y`` (``N`` items, a share ``p`` right) are a uniformly
    random permutation, so the right-counts ``K = Mᵀ y`` of its groups (``M`` the items × groups 0/1
    labels, ``n = Mᵀ 1``) have the exact mean ``n p`` and covariance
    ``V = p (1 − p) · N/(N − 1) · (MᵀM − n nᵀ/N)`` (sampling without replacement; overlapping groups
    enter through ``MᵀM``). The statistic is ``Σ_g (K_g − n_g p̄)² / (n_g p̄ (1 − p̄))`` with the pooled
    ``p̄ = Σ K / Σ n``: its residuals are ``r = (I − n 1ᵀ/Σn) K``, and ``p̄`` tends to ``p``. By the
    combinatorial central limit theorem (Hoeffding, 1951) ``K`` is asymptotically normal, so the
    statistic tends to ``Σ_i λ_i Z_i²`` (``Z_i`` independent standard normals), ``λ`` the eigenvalues of
    ``W^½ Cov(r) W^½`` with ``W = diag(1 / (n_g p (1 − p)))``: :func:`weighted_chi2_sf` gives the
    p-value. For disjoint groups every non-zero ``λ`` is ``N/(N − 1)``: the statistic is
    ``N/(N − 1) · χ²`` with groups − 1 degrees of freedom, the classical test up to that factor.

    Use it where :func:`asymptotic_homogeneity_applies` (every expected count at least 5); a run with
    fewer than two groups or a constant outcome gets no test (NaN), as with permutations.
    """
    ys = np.asarray(outcomes, dtype=float)
    m = np.asarray(membership, dtype=float)
    if ys.ndim != 2 or ys.shape[1] != m.shape[0]:
        raise ValueError(f"outcomes {ys.shape} and membership {m.shape} disagree")
    present = ~np.isnan(ys)
    y0 = np.where(present, ys, 0.0)
    n_groups = m.shape[1]
    nan = float("nan")
    out: list[Homogeneity] = []
    testable: list[int] = []
    observed: list[float] = []
    for r in range(ys.shape[0]):
        inside = present[r]
        n = m[inside].sum(axis=0)
        y = ys[r, inside]
        keep = n > 0
        out.append(Homogeneity(nan, max(0, int(keep.sum()) - 1), nan, 0, "asymptotic"))
        if int(keep.sum()) >= 2 and y.size and y.min() != y.max():
            testable.append(r)
            # the statistic exactly as the permutation test computes it
            observed.append(float(_chi2_groups(m[inside][:, keep].T @ y, n[keep])))
    if not testable:
        return out
    rows = np.asarray(testable)
    weight = present[rows].astype(float)
    n_items = weight.sum(axis=1)
    share = y0[rows].sum(axis=1) / n_items
    sizes = weight @ m  # (runs, groups)
    both = (weight @ (m[:, :, None] * m[:, None, :]).reshape(m.shape[0], -1)).reshape(-1, n_groups, n_groups)
    var = share * (1.0 - share) * n_items / (n_items - 1.0)
    cov_k = var[:, None, None] * (both - sizes[:, :, None] * sizes[:, None, :] / n_items[:, None, None])
    residual = np.eye(n_groups)[None] - sizes[:, :, None] / sizes.sum(axis=1)[:, None, None]
    cov_r = residual @ cov_k @ residual.transpose(0, 2, 1)
    with np.errstate(divide="ignore"):
        scale = np.where(sizes > 0, 1.0 / np.sqrt(sizes * (share * (1.0 - share))[:, None]), 0.0)
    weights = np.linalg.eigvalsh(scale[:, :, None] * cov_r * scale[:, None, :])
    p = weighted_chi2_sf(np.asarray(observed), np.clip(weights, 0.0, None))
    for j, r in enumerate(testable):
        out[r] = Homogeneity(observed[j], out[r].df, float(p[j]), 0, "asymptotic")
    return out


def weighted_chi2_sf(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``P(Σ_i w_i Z_i² ≥ x)`` for independent standard normals ``Z_i``, one value per row of ``weights``
    (``x`` (rows,), ``weights`` (rows, k), every ``w_i ≥ 0``).

    Rows whose non-zero weights are all equal (``w``, ``d`` of them) are exactly ``χ²_d.sf(x / w)``; the
    others are Imhof's (1961) integral ``½ + (1/π) ∫₀^∞ sin θ(u) / (u ρ(u)) du`` with
    ``θ(u) = ½ Σ arctan(w_i u) − ½ x u`` and ``ρ(u) = Π (1 + w_i² u²)^¼``, to an absolute error of about
    1e-9 (a p-value under that prints as 0). Where Imhof's truncation bound ``2 / (k u^{k/2} Π w_i^½)``
    falls below 1e-10 within ``u ≤ 1000`` (many groups: every row of a report with more than a handful),
    the rows are integrated together up to there; a row with few weights, whose integrand decays slowly,
    is integrated on its own, its tail beyond ``u = 1`` as a Fourier integral (QUADPACK's QAWF)."""
    xs = np.asarray(x, dtype=float).reshape(-1)
    w = np.asarray(weights, dtype=float).reshape(xs.size, -1)
    top = w.max(axis=1, initial=0.0)
    w = np.where(w > 1e-9 * top[:, None], w, 0.0)  # rounding noise of a zero eigenvalue is zero
    k = (w > 0).sum(axis=1)
    low = np.where(w > 0, w, np.inf).min(axis=1, initial=np.inf)
    equal = (k > 0) & (top - low <= 1e-9 * top)
    out = np.ones(xs.size)
    if equal.any():
        out[equal] = chi2_sf(xs[equal] / top[equal], k[equal])
    rest = np.flatnonzero(~equal & (k > 0) & (xs > 0))
    if not rest.size:
        return out
    from scipy.integrate import quad_vec

    # the tail beyond u is at most 2 / (k u^{k/2} Π w^½): where that is below 1e-10
    log_w = np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), 0.0).sum(axis=1)
    with np.errstate(divide="ignore"):
        end = np.exp((2.0 / np.maximum(k, 1)) * (np.log(2.0 / (np.maximum(k, 1) * 1e-10)) - 0.5 * log_w))
    together = rest[end[rest] <= 1000.0]
    if together.size:
        wr, xr = w[together], xs[together]

        def integrand(u: float) -> np.ndarray:
            if u == 0.0:
                return np.asarray(0.5 * (wr.sum(axis=1) - xr))
            wu = wr * u
            theta = 0.5 * (np.arctan(wu).sum(axis=1) - xr * u)
            return np.asarray(np.sin(theta) / (u * np.exp(0.25 * np.log1p(wu * wu).sum(axis=1))))

        integral = quad_vec(integrand, 0.0, float(end[together].max()), epsabs=1e-10, epsrel=1e-8, limit=20_000)[0]
        out[together] = 0.5 + np.asarray(integral) / math.pi
    for r in rest[end[rest] > 1000.0]:
        out[r] = _imhof_fourier(w[r][w[r] > 0], float(xs[r]))
    return np.asarray(np.clip(out, 0.0, 1.0))


def _imhof_fourier(w: np.ndarray, x: float) -> float:
    """Imhof's ``P(Σ w_i Z_i² ≥ x)`` for one row of few weights: ``[0, 1]`` directly, the slowly decaying
    tail beyond as two Fourier integrals (QUADPACK's QAWF), ``sin(φ − ωu) = sin φ cos ωu − cos φ sin ωu``."""
    from scipy.integrate import quad

    def phase(u: float) -> float:
        return 0.5 * float(np.arctan(w * u).sum())

    def amplitude(u: float) -> float:
        return 1.0 / (u * math.exp(0.25 * float(np.log1p((w * u) ** 2).sum())))

    def whole(u: float) -> float:
        return 0.5 * (float(w.sum()) - x) if u == 0.0 else math.sin(phase(u) - 0.5 * x * u) * amplitude(u)

    head = quad(whole, 0.0, 1.0, epsabs=1e-11, limit=200)[0]
    cos_part = quad(lambda u: math.sin(phase(u)) * amplitude(u), 1.0, np.inf, weight="cos", wvar=0.5 * x)[0]
    sin_part = quad(lambda u: math.cos(phase(u)) * amplitude(u), 1.0, np.inf, weight="sin", wvar=0.5 * x)[0]
    return 0.5 + (head + cos_part - sin_part) / math.pi


def _induced_correction(perms_t: np.ndarray, inverse_t: np.ndarray, inside: np.ndarray, y0: np.ndarray,
                        membership: Any) -> np.ndarray:
    """What turns the counts under the full permutations into the counts under their induced
    permutations on the items ``inside`` (see :func:`permutation_homogeneity_shared`), (n_perm, groups).

    ``perms_t`` and ``inverse_t`` are the permutations and their inverses transposed, (items, n_perm),
    so that a missing item's draws are one contiguous row; ``membership`` is the (items, groups) 0/1
    matrix as a scipy CSR matrix (an item carries a few labels)."""
    n_items, n_perm = perms_t.shape
    missing = np.flatnonzero(~inside)
    partner = perms_t[missing]  # (missing, n_perm): the outcome a missing item's label row was paired with
    dropped = y0[partner] == 1.0  # a missing item's label row takes no outcome
    row = inverse_t[missing]  # the label row paired with a missing item's outcome...
    valid = inside[row]  # ...takes, when it is inside, the outcome of the next item inside on the cycle
    reached = partner.copy()
    # walk the cycles only where an item outside is reached
    flat = perms_t.ravel()
    at, draw = np.nonzero(valid & ~inside[reached])
    while at.size:
        step = flat[reached[at, draw] * n_perm + draw]
        reached[at, draw] = step
        still = ~inside[step]
        at, draw = at[still], draw[still]
    taken = valid & (y0[reached] == 1.0)
    # +1 in each group of a label row that takes an outcome, -1 in each group of one that gives it up
    up_at, up_draw = np.nonzero(taken)
    down_at, down_draw = np.nonzero(dropped)
    draws = np.concatenate([up_draw, down_draw])
    rows = np.concatenate([row[up_at, up_draw], missing[down_at]])
    signs = np.repeat([1.0, -1.0], [up_at.size, down_at.size])
    starts, ends = membership.indptr[rows], membership.indptr[rows + 1]
    lengths = ends - starts
    label = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
    n_groups = membership.shape[1]
    cells = np.repeat(draws, lengths) * n_groups + membership.indices[label]
    change = np.bincount(cells, weights=np.repeat(signs, lengths) * membership.data[label], minlength=n_perm * n_groups)
    return change.reshape(n_perm, n_groups)


# ---------------------------------------------------------------- intervals honest at the edges


@dataclass(frozen=True)
class BootstrapInterval:
    """A statistic with a bootstrap interval that says when it has none.

    ``n`` is the number of units resampled (items, or clusters of responses), ``n_boot`` the
    resamples drawn and ``n_undefined`` how many of them gave an undefined (NaN) statistic.
    ``low``/``high`` are NaN, and ``note`` says why, when the value is undefined, when too many
    resamples are undefined, or when every defined resample gives the same value (a zero-width
    interval is shown as certain, so it is not shown). With some undefined resamples and an
    interval, ``note`` says "k of B resamples undefined (left out)".
    """

    value: float
    low: float
    high: float
    n: int
    n_boot: int = 0
    n_undefined: int = 0
    note: str = ""


#: above this share of undefined resamples no interval is shown: the share a 95 % percentile interval
#: leaves outside itself. The undefined resamples are not random: κ is undefined where every rater used
#: one category, which is perfect agreement, so leaving out more than a tail's worth of them moves the
#: interval (Fleiss' κ on 5 items: 88 of 1,000 undefined gave [−0.36, −0.07] around −0.15)
MAX_UNDEFINED_SHARE = 0.05


def interval_from_replicates(value: float, replicates: np.ndarray, n: int, *, confidence: float = 0.95,
                             undefined_reason: str = "undefined",
                             max_undefined_share: float = MAX_UNDEFINED_SHARE) -> BootstrapInterval:
    """The percentile interval of ``replicates`` around ``value``, honest at the edges.

    * ``n == 0`` or an undefined ``value``: NaN, with ``undefined_reason`` in the note;
    * more than ``max_undefined_share`` of the resamples undefined: NaN ("k of B resamples
      undefined: no interval");
    * every defined resample equal (zero width, e.g. κ = 1 on perfect agreement): NaN, noted;
    * otherwise the interval over the defined resamples, noting how many were left out.
    """
    reps = np.asarray(replicates, dtype=float).ravel()
    n_boot = int(reps.size)
    bad = int(np.isnan(reps).sum())
    nan = float("nan")
    undefined = f"{bad} of {n_boot} resamples undefined"
    if n == 0:
        return BootstrapInterval(nan, nan, nan, 0, n_boot, bad, "no units")
    if value is None or np.isnan(value):
        return BootstrapInterval(nan, nan, nan, n, n_boot, bad, undefined_reason)
    if n_boot == 0 or bad > max_undefined_share * n_boot:
        return BootstrapInterval(float(value), nan, nan, n, n_boot, bad, f"{undefined}: no interval")
    low, high = percentile_interval(reps, confidence)
    if high - low <= 1e-12:
        note = f"every defined resample gives {low:.3g}: a zero-width interval is not an interval"
        return BootstrapInterval(float(value), nan, nan, n, n_boot, bad, note + (f"; {undefined}" if bad else ""))
    return BootstrapInterval(float(value), low, high, n, n_boot, bad, f"{undefined} (left out)" if bad else "")


def bootstrap_statistic(statistic: Callable[[np.ndarray], float], units: np.ndarray, *, n_boot: int = 1000,
                        rng: np.random.Generator | int = 0, confidence: float = 0.95,
                        undefined_reason: str = "undefined") -> BootstrapInterval:
    """Any statistic of the rows of ``units`` with a seeded bootstrap over rows (items).

    ``statistic`` gets a resampled ``units[idx]`` and may return NaN (undefined): those
    resamples are counted, never silently dropped (:func:`interval_from_replicates`).
    """
    arr = np.asarray(units)
    n = len(arr)
    if n == 0:
        return interval_from_replicates(float("nan"), np.empty(0), 0)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    point = float(statistic(arr))
    reps = np.array([statistic(arr[gen.integers(0, n, size=n)]) for _ in range(n_boot)], dtype=float)
    return interval_from_replicates(point, reps, n, confidence=confidence, undefined_reason=undefined_reason)


def cluster_sums(counts: np.ndarray, n_boot: int = 1000, rng: np.random.Generator | int = 0) -> np.ndarray:
    """``(n_boot, k)`` bootstrap sums of per-cluster sufficient statistics ``counts`` ``(clusters, k)``.

    Each resample draws as many clusters as there are, with replacement, and adds up their rows:
    the bootstrap clustered by the cluster (e.g. the item shared by many responses). Drawn as
    multinomial cluster weights, in chunks, so memory stays bounded.
    """
    c = np.asarray(counts, dtype=float)
    m = c.shape[0]
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    out = np.zeros((n_boot, c.shape[1]))
    if m == 0:
        return out
    rows = max(1, _CHUNK_CELLS // m)
    probs = np.full(m, 1.0 / m)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        weights = gen.multinomial(m, probs, size=stop - start)
        out[start:stop] = weights @ c
    return out


def binary_kappa_counts(counts: np.ndarray) -> np.ndarray:
    """Cohen's κ from ``[..., 4]`` counts ``(both yes, a yes b no, a no b yes, both no)``, vectorised.

    NaN where there are no pairs or chance agreement is 1 (as :func:`cohen_kappa`).
    """
    t = np.asarray(counts, dtype=float)
    tt, tf, ft, ff = t[..., 0], t[..., 1], t[..., 2], t[..., 3]
    n = tt + tf + ft + ff
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (tt + ff) / n
        pa, pb = (tt + tf) / n, (tt + ft) / n
        pe = pa * pb + (1.0 - pa) * (1.0 - pb)
        kappa = (po - pe) / (1.0 - pe)
    return np.where((n > 0) & (pe < 1.0 - 1e-12), kappa, np.nan)


def one_rater_constant(table: np.ndarray) -> bool:
    """Whether one rater of a square 2-rater ``table`` used a single category while κ is defined
    (chance agreement below 1): κ is then 0 by construction (p_o = p_e), and statsmodels' test of
    it is NaN (its null standard error is 0): a κ that measures nothing, with no interval."""
    t = np.asarray(table, dtype=float)
    n = t.sum()
    if n == 0:
        return False
    rows, cols = (t.sum(axis=1) > 0).sum(), (t.sum(axis=0) > 0).sum()
    pe = float((t.sum(axis=1) * t.sum(axis=0)).sum() / (n * n))
    return bool(min(rows, cols) == 1 and pe < 1.0 - 1e-12)


def clustered_binary_kappa(a: np.ndarray, b: np.ndarray, clusters: np.ndarray, *, n_boot: int = 1000,
                           rng: np.random.Generator | int = 0, confidence: float = 0.95) -> BootstrapInterval:
    """Cohen's κ of two binary raters with a bootstrap **clustered by** ``clusters`` (e.g. item id).

    Pooled over responses that share items (every model answers every item), the responses of
    one item are not independent; resampling items keeps them together, and the interval is
    wider than one treating every response as independent (``clusters = arange(n)``). Rows with
    a NaN are dropped; ``n`` in the result is the number of clusters.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    g = np.asarray(clusters)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y, g = x[keep].astype(bool), y[keep].astype(bool), g[keep]
    if x.size == 0:
        return interval_from_replicates(float("nan"), np.empty(0), 0)
    _, inverse = np.unique(g.astype(str), return_inverse=True)
    cells = np.stack([x & y, x & ~y, ~x & y, ~x & ~y], axis=1).astype(float)
    per_cluster = np.zeros((int(inverse.max()) + 1, 4))
    np.add.at(per_cluster, inverse, cells)
    point = float(binary_kappa_counts(per_cluster.sum(axis=0)))
    reps = binary_kappa_counts(cluster_sums(per_cluster, n_boot, rng))
    table = per_cluster.sum(axis=0).reshape(2, 2)
    reason = ("one rater used a single category: κ = 0 by construction, no interval" if one_rater_constant(table)
              else "chance agreement is 1 (both raters used one identical category)")
    if one_rater_constant(table):
        return BootstrapInterval(point, float("nan"), float("nan"), len(per_cluster), n_boot,
                                 int(np.isnan(reps).sum()), reason)
    return interval_from_replicates(point, reps, len(per_cluster), confidence=confidence, undefined_reason=reason)


@dataclass(frozen=True)
class PairedDifference:
    """Mean of ``x − y`` over paired units (e.g. queries both models answered), with a seeded
    percentile-bootstrap interval over pairs and the two-sided paired sign-flip permutation p of
    the same mean: one estimand, the mean difference, for the interval and the test."""

    n: int
    mean_x: float
    mean_y: float
    diff: float
    low: float
    high: float
    p_sign_flip: float
    note: str = ""


#: up to this many pairs the sign-flip test enumerates all 2^n sign patterns (exact)
EXACT_SIGN_FLIP = 16


def sign_flip_p(d: np.ndarray, n_perm: int = 10_000, rng: np.random.Generator | int = 0) -> float:
    """Two-sided paired permutation p of ``mean(d) = 0``: each difference's sign flipped at random
    (H0: the differences are symmetric about 0), ``P(|mean of flipped| ≥ |mean(d)|)``. Exact over
    all ``2^n`` patterns up to :data:`EXACT_SIGN_FLIP` pairs, else ``(1 + #) / (1 + n_perm)`` over
    ``n_perm`` seeded patterns. Zero differences stay in (they are part of the mean)."""
    d = np.asarray(d, dtype=float)
    n = d.size
    obs = abs(float(d.mean()))
    tol = 1e-12 * max(1.0, obs)
    if n <= EXACT_SIGN_FLIP:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        means = (1 - 2 * bits) @ d / n
        return float(np.mean(np.abs(means) >= obs - tol))
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    hits = 0
    for start in range(0, n_perm, 1000):  # chunks bound the memory
        signs = gen.choice(np.array([-1.0, 1.0]), size=(min(1000, n_perm - start), n))
        hits += int((np.abs(signs @ d / n) >= obs - tol).sum())
    return (1.0 + hits) / (1.0 + n_perm)


def paired_difference(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, n_boot: int = 1000,
                      rng: np.random.Generator | int = 0, confidence: float = 0.95) -> PairedDifference:
    """``mean(x − y)`` over the pairs where both are known, bootstrap CI over pairs, and the
    sign-flip permutation p of the same mean (:func:`sign_flip_p`, ``n_boot`` patterns, the same
    generator after the bootstrap). NaN p, with a note, when every difference is 0; fewer than 2
    pairs give no interval and no test.
    """
    a, b = complete_pairs(x, y)
    n = int(a.size)
    nan = float("nan")
    if n == 0:
        return PairedDifference(0, nan, nan, nan, nan, nan, nan, "no pairs")
    d = a - b
    if n < 2:
        return PairedDifference(n, float(a.mean()), float(b.mean()), float(d.mean()), nan, nan, nan,
                                "one pair: no interval, no test")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    iv = interval_from_replicates(float(d.mean()), bootstrap_means(d, n_boot, gen), n, confidence=confidence)
    notes = [iv.note] if iv.note else []
    if np.all(d == 0):
        p = nan
        notes.append("every difference is 0: no test")
    else:
        p = sign_flip_p(d, n_boot, gen)
    return PairedDifference(n, float(a.mean()), float(b.mean()), float(d.mean()), iv.low, iv.high, p, "; ".join(notes))


def mean_run_kappa(a: np.ndarray, b: np.ndarray, runs: np.ndarray, items: np.ndarray, *, n_boot: int = 1000,
                   rng: np.random.Generator | int = 0, confidence: float = 0.95) -> BootstrapInterval:
    """The mean of per-run Cohen's κ of two binary raters, with a seeded **two-level** bootstrap.

    Reliability is a property of each run (a model's answers judged by one judge), so the summary
    over runs is the mean of the per-run κ (runs where κ is undefined left out), not the κ of
    the pooled table, which mixes runs of different accuracy. The interval speaks of runs and
    items in general: each resample draws the runs with replacement and, independently, the items
    (shared by every run, so one draw of items serves all runs), recomputes each drawn run's κ on
    the drawn items and averages them. Rows with a NaN are dropped; ``n`` is the number of runs.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep].astype(bool), y[keep].astype(bool)
    r_codes, run_index = np.unique(np.asarray(runs)[keep].astype(str), return_inverse=True)
    _, item_index = np.unique(np.asarray(items)[keep].astype(str), return_inverse=True)
    n_runs, n_items = len(r_codes), int(item_index.max()) + 1 if x.size else 0
    if n_runs == 0:
        return interval_from_replicates(float("nan"), np.empty(0), 0)
    cells = np.stack([x & y, x & ~y, ~x & y, ~x & ~y], axis=1).astype(float)
    per_item = np.zeros((n_items, n_runs, 4))  # item × run × confusion cell
    np.add.at(per_item, (item_index, run_index), cells)
    kappas = binary_kappa_counts(per_item.sum(axis=0))
    point = float(np.nanmean(kappas)) if np.isfinite(kappas).any() else float("nan")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    flat = per_item.reshape(n_items, n_runs * 4)
    reps = np.full(n_boot, np.nan)
    step = max(1, _CHUNK_CELLS // max(1, n_items + n_runs * 4))
    for start in range(0, n_boot, step):
        stop = min(n_boot, start + step)
        item_w = gen.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=stop - start)
        run_w = gen.multinomial(n_runs, np.full(n_runs, 1.0 / n_runs), size=stop - start).astype(float)
        k = binary_kappa_counts((item_w @ flat).reshape(stop - start, n_runs, 4))
        run_w[np.isnan(k)] = 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            reps[start:stop] = np.nansum(k * run_w, axis=1) / run_w.sum(axis=1)
    return interval_from_replicates(point, reps, n_runs, confidence=confidence,
                                    undefined_reason="κ undefined in every run")


# --------------------------------------------------------------------------- Fleiss' kappa


def rating_table(ratings: Sequence[Sequence[Hashable]], categories: Iterable[Hashable] | None = None) -> np.ndarray:
    """Items x categories counts; checks every item has the same number (>= 2) of ratings."""
    rows = [list(r) for r in ratings]
    if not rows:
        raise InputError("no items to rate")
    n_raters = len(rows[0])
    if n_raters < 2:
        raise InputError("agreement needs at least two raters per item")
    bad = [i for i, r in enumerate(rows) if len(r) != n_raters]
    if bad:
        raise InputError(f"every item must be rated by all {n_raters} raters; item(s) {bad[:5]} are not")
    cats = list(dict.fromkeys(categories)) if categories is not None else []
    for r in rows:
        for x in r:
            if x not in cats:
                if categories is not None:
                    raise InputError(f"label {x!r} is not among the categories {cats}")
                cats.append(x)
    index = {c: k for k, c in enumerate(cats)}
    table = np.zeros((len(rows), len(cats)), dtype=float)
    for i, r in enumerate(rows):
        for x in r:
            table[i, index[x]] += 1
    return table


def fleiss_kappa_table(table: np.ndarray) -> float:
    """Fleiss' kappa (Fleiss 1971) of an items x categories count table, every item rated by the
    same number of raters; ``nan`` if undefined (fewer than two categories used: chance agreement
    1). The suite checks it against statsmodels' ``fleiss_kappa``."""
    t = np.asarray(table, dtype=float)
    if t.shape[0] == 0 or (t.sum(axis=0) > 0).sum() < 2:
        return math.nan
    raters = t.sum(axis=1)
    if not np.all(raters == raters[0]) or raters[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (at least two) of raters for every item")
    n = raters[0]
    observed = ((t * t).sum(axis=1) - n) / (n * (n - 1))  # P_i: agreement within item i
    shares = t.sum(axis=0) / t.sum()  # p_j: share of all ratings in category j
    chance = float((shares * shares).sum())
    return float((observed.mean() - chance) / (1 - chance))


def fleiss_kappa(ratings: Sequence[Sequence[Hashable]]) -> float:
    """Fleiss' kappa of a ratings table (:func:`fleiss_kappa_table`); ``nan`` if undefined."""
    return fleiss_kappa_table(rating_table(ratings))


def item_bootstrap(statistic: Any, table: np.ndarray, n_boot: int, seed: int, key: str) -> BootstrapInterval:
    """``statistic(table)`` with a seeded percentile bootstrap over the table's rows (items)."""
    return bootstrap_statistic(statistic, table, n_boot=n_boot, rng=stable_seed(seed, "agreement", key, len(table)),
                               undefined_reason="undefined: fewer than two categories used (chance agreement 1)")


def fleiss_kappa_ci(ratings: Sequence[Sequence[Hashable]], *, n_boot: int = 1000, seed: int = 0) -> BootstrapInterval:
    """Fleiss' kappa with a seeded item-bootstrap 95% interval (``n`` = items)."""
    return item_bootstrap(fleiss_kappa_table, rating_table(ratings), n_boot, seed, "fleiss")
