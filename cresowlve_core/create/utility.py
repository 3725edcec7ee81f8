"""Creative utility of a set of paths, its patience curve, and distinctiveness against a population.

**Creative utility** (paper eq. 1-2, as computed by the released scoring code):

1. Keep the structurally valid paths, then the factual ones (mean per-triple factuality
   ``>= factuality_threshold``). Paths without a strength (one-triple paths under the reference
   strength rule) are dropped too and flagged ``no_strength``.
2. Greedy order (:func:`greedy_order`): first the path with the highest strength (lowest index on
   ties); then repeatedly the remaining path maximising ``min_d(selected) * strength``, where a
   candidate replaces the current best only if *strictly* greater, scanning remaining paths in
   ascending index (so ties go to the lowest index).
3. Marginal scores: ``m_0 = strength`` of the first path; later ``m_i = min_d * strength``.
4. Discounting with patience ``p`` (:func:`discounted_sum`):

   * ``discount="reference"`` (default; the released code): ``u = m_0 + sum_{i>=1} m_i p^(i-1)``
     — the second path is not discounted;
   * ``discount="paper"`` (eq. 1 read literally, positions ``i = 1..|U|``, the first item at
     distance 1 from the empty set): ``u = sum_{i>=0} m_i p^i``, i.e. ``m_0 + m_1 p + m_2 p^2 ...``.

   ``p = 0`` uses ``0^0 = 1``: reference gives ``m_0 + m_1``, paper gives ``m_0``.

5. The empty set (nothing valid and factual) has utility **0**. The released code returns 1 for
   it; we chose 0 because an answer with no usable path should not outscore one whose only path
   has strength below 1 and because 1 is an artefact of a default, not a score.

The paper's quality ``f(u)`` (eq. 7) takes the minimum over all triples; pass
``strength_scope="paper"`` for that. Everything is deterministic: same inputs, same utility.

**Distinctiveness** (eq. 3, :func:`distinctiveness`): each path's minimum distance to a population
of paths (for a model: the other models' paths for the same query); a set's distinctiveness is the
maximum over its paths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Literal

import numpy as np

from cresowlve_core.create.distance import Embedder, cross_distances, distance_matrix
from cresowlve_core.create.judges import StrengthScope, is_factual, path_strength
from cresowlve_core.create.paths import Path
from cresowlve_core.failures import InputError

Discount = Literal["reference", "paper"]
PATIENCE_GRID: tuple[float, ...] = tuple(round(x, 2) for x in np.linspace(0.0, 1.0, 21))


@dataclass
class GreedyOrder:
    """The greedy ordering of a kept set: positions into it, and each step's marginal score."""

    order: list[int]
    marginals: list[float]


def greedy_order(strengths: Sequence[float], distances: np.ndarray) -> GreedyOrder:
    """Greedy ordering of paths with ``strengths`` under the square transformed ``distances``."""
    n = len(strengths)
    if n == 0:
        return GreedyOrder([], [])
    s = np.asarray(strengths, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    first = 0
    for j in range(1, n):
        if s[j] > s[first]:
            first = j
    order, marginals = [first], [float(s[first])]
    remaining = [j for j in range(n) if j != first]
    min_d = d[first].copy()
    while remaining:
        best, best_value = remaining[0], float(min_d[remaining[0]] * s[remaining[0]])
        for j in remaining[1:]:
            value = float(min_d[j] * s[j])
            if value > best_value:
                best, best_value = j, value
        order.append(best)
        marginals.append(best_value)
        remaining.remove(best)
        min_d = np.minimum(min_d, d[best])
    return GreedyOrder(order, marginals)


def fraction(value: object, name: str) -> float:
    """``value`` when it is a number from 0 to 1 (a patience, a factuality threshold), else an
    :class:`~cresowlve_core.failures.InputError` naming ``name``: a patience above 1 would weigh
    later paths more, a negative one alternate their signs, NaN make every utility NaN."""
    number = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
    if not 0 <= number <= 1:  # NaN too
        raise InputError(f"{name} must be a fraction 0..1, got {value!r}")
    return number


def discounted_sum(marginals: Sequence[float], patience: float, discount: Discount = "reference") -> float:
    """Sum of marginal scores discounted by ``patience`` (see module docstring for the two modes)."""
    fraction(patience, "patience")
    if not marginals:
        return 0.0
    if discount == "reference":
        exponents = [0] + list(range(len(marginals) - 1))
    elif discount == "paper":
        exponents = list(range(len(marginals)))
    else:
        raise InputError(f"discount must be 'reference' or 'paper', not {discount!r}")
    return float(sum(m * patience**e for m, e in zip(marginals, exponents)))


@dataclass
class KeptSet:
    """Which paths of a set enter the utility, with their strengths and why others did not."""

    indices: list[int]
    strengths: list[float]
    dropped: dict[str, int] = field(default_factory=dict)


def kept_paths(
    specificity: Sequence[Sequence[float]],
    factuality: Sequence[Sequence[float]],
    validity: Sequence[float | int | bool],
    factuality_threshold: float = 1.0,
    strength_scope: StrengthScope = "reference",
) -> KeptSet:
    """Valid, then factual, paths that have a strength (in original order)."""
    kept = KeptSet([], [], {"invalid": 0, "not_factual": 0, "no_strength": 0})
    for i, (spec, fact, valid) in enumerate(zip(specificity, factuality, validity)):
        if not valid:
            kept.dropped["invalid"] += 1
            continue
        if not is_factual(list(fact), factuality_threshold):
            kept.dropped["not_factual"] += 1
            continue
        strength = path_strength(list(spec), strength_scope)
        if strength is None:
            kept.dropped["no_strength"] += 1
            continue
        kept.indices.append(i)
        kept.strengths.append(strength)
    return kept


@dataclass
class UtilityBreakdown:
    """Everything behind one set's utility; :meth:`utility` evaluates any patience cheaply."""

    kept: KeptSet
    greedy: GreedyOrder

    def utility(self, patience: float = 0.9, discount: Discount = "reference") -> float:
        return discounted_sum(self.greedy.marginals, patience, discount)

    def curve(self, grid: Sequence[float] = PATIENCE_GRID, discount: Discount = "reference") -> list[float]:
        return [self.utility(p, discount) for p in grid]


def _check_lengths(paths: Sequence[Path], *per_path: Sequence[object]) -> None:
    for seq in per_path:
        if len(seq) != len(paths):
            raise InputError(f"per-path lists must match the {len(paths)} paths, got {len(seq)}")


def utility_breakdown(
    paths: Sequence[Path],
    specificity: Sequence[Sequence[float]],
    factuality: Sequence[Sequence[float]],
    validity: Sequence[float | int | bool],
    factuality_threshold: float = 1.0,
    *,
    distances: np.ndarray | None = None,
    embedder: Embedder | None = None,
    strength_scope: StrengthScope = "reference",
) -> UtilityBreakdown:
    """Filter, then order greedily. ``distances``: optional ``(n, n)`` matrix over *all* ``paths``."""
    fraction(factuality_threshold, "factuality_threshold")
    _check_lengths(paths, specificity, factuality, validity)
    kept = kept_paths(specificity, factuality, validity, factuality_threshold, strength_scope)
    if not kept.indices:
        return UtilityBreakdown(kept, GreedyOrder([], []))
    if distances is not None:
        sub = np.asarray(distances, dtype=np.float64)[np.ix_(kept.indices, kept.indices)].copy()
        np.fill_diagonal(sub, 1.0)
    else:
        sub = distance_matrix([paths[i] for i in kept.indices], embedder)
    return UtilityBreakdown(kept, greedy_order(kept.strengths, sub))


def creative_utility(
    paths: Sequence[Path],
    specificity: Sequence[Sequence[float]],
    factuality: Sequence[Sequence[float]],
    validity: Sequence[float | int | bool],
    patience: float = 0.9,
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    *,
    distances: np.ndarray | None = None,
    embedder: Embedder | None = None,
    strength_scope: StrengthScope = "reference",
) -> float:
    """The creative utility of one query's path set (see module docstring).

    ``specificity``/``factuality``: per path, per-triple scores (1-5 or 0; 1.0/0.0).
    ``validity``: per path 0/1. Distances come from ``distances`` (an ``(n, n)`` transformed
    matrix over all ``paths``) or are computed with ``embedder`` (default: all-MiniLM-L6-v2).
    """
    b = utility_breakdown(
        paths,
        specificity,
        factuality,
        validity,
        factuality_threshold,
        distances=distances,
        embedder=embedder,
        strength_scope=strength_scope,
    )
    return b.utility(patience, discount)


def utility_curve(
    paths: Sequence[Path],
    specificity: Sequence[Sequence[float]],
    factuality: Sequence[Sequence[float]],
    validity: Sequence[float | int | bool],
    grid: Sequence[float] = PATIENCE_GRID,
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    *,
    distances: np.ndarray | None = None,
    embedder: Embedder | None = None,
    strength_scope: StrengthScope = "reference",
) -> list[tuple[float, float]]:
    """``(patience, utility)`` for each patience in ``grid`` (default 0, 0.05, ..., 1)."""
    b = utility_breakdown(
        paths,
        specificity,
        factuality,
        validity,
        factuality_threshold,
        distances=distances,
        embedder=embedder,
        strength_scope=strength_scope,
    )
    return [(float(p), b.utility(p, discount)) for p in grid]


@dataclass
class Distinctiveness:
    """Per-path minimum distance to the population, and the set's value (their maximum)."""

    per_path: list[float]

    @property
    def value(self) -> float | None:
        return max(self.per_path) if self.per_path else None


def distinctiveness(
    paths: Sequence[Path],
    population: Sequence[Path],
    *,
    distances: np.ndarray | None = None,
    embedder: Embedder | None = None,
) -> Distinctiveness:
    """ν(u) = min distance from ``u`` to ``population``; ν(U) = max over ``paths``.

    ``population`` should exclude the set's own paths. ``distances``: optional precomputed
    ``(len(paths), len(population))`` transformed matrix. An empty population gives ν = 1
    (nothing to be close to); an empty set has no value (``None``).
    """
    if not paths:
        return Distinctiveness([])
    if not population:
        return Distinctiveness([1.0] * len(paths))
    d = distances if distances is not None else cross_distances(list(paths), list(population), embedder)
    return Distinctiveness([float(x) for x in np.asarray(d).min(axis=1)])
