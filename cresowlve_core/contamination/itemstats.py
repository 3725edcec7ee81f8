"""Statistics of the contamination tests, with the **item** as the unit throughout.

* :data:`MIN_ITEMS` — the floor of items per set below which no signal is tested;
* :func:`bcq_items` / :func:`majority_test` — per-item BCQ accuracy across repeats, and the
  exact binomial test over items of the per-item majorities (repeats are never pooled as
  independent trials: they share the item);
* :func:`matched_diff` — a difference of set means matched on difficulty (the paper's levels
  1–5), with a stratified t interval whose variance is pooled within each set (so a 1-item level
  keeps its width) and a stratified permutation p-value;
* :func:`~cresowlve_core.stats.zero_width` — an interval of zero width decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from cresowlve_core.llm.types import NOT_AN_ANSWER
from cresowlve_core.stats import stable_seed, wilson_interval

MIN_ITEMS = 20
"""Items per set below which a signal is not tested ("too few items (n = k): not tested")."""
CHANCE = 0.25
"""The quiz's chance rate: one of four options (the paper's random baseline)."""
UNRATED = -1.0  # the stratum of items without a difficulty rating


def too_few(*ns: int, min_items: int = MIN_ITEMS) -> str | None:
    """``"too few items (n = k): not tested"`` for the smallest ``n`` below ``min_items``, else None."""
    low = [n for n in ns if n < min_items]
    return f"too few items (n = {min(low)}): not tested" if low else None



def withheld_mask(records: pd.DataFrame) -> pd.Series:
    """Per quiz or completion record: refused or filtered (its ``outcome``; False where records carry none)."""
    if "outcome" not in records:
        return pd.Series(False, index=records.index)
    return records["outcome"].isin(NOT_AN_ANSWER)


def cut_off_mask(records: pd.DataFrame) -> pd.Series:
    """Per quiz or completion record: cut off at the token limit before it named an option or
    continued anything (``outcome`` truncated, no ``choice`` / ``continuation``): the model stopped
    before an answer (False where records carry no such fields)."""
    content = "choice" if "choice" in records else "continuation" if "continuation" in records else None
    if "outcome" not in records or content is None:
        return pd.Series(False, index=records.index)
    return (records["outcome"] == "truncated") & records[content].isna()


def no_answer_mask(records: pd.DataFrame) -> pd.Series:
    """Per quiz or completion record: no answer, withheld (refused or filtered) or cut off before any
    content (:func:`cut_off_mask`)."""
    return withheld_mask(records) | cut_off_mask(records)


def bcq_items(bcq: pd.DataFrame) -> pd.DataFrame:
    """One row per (set, item): repeats answered, right, accuracy across repeats and whether the
    item was right in a strict majority of its repeats. Invalid answers count as wrong; withheld
    ones (refused or filtered) and replies cut off before naming an option are no answer: not among
    the repeats answered, and an item with no answered repeat has no row."""
    cols = ["set", "id", "repeats", "right", "accuracy", "majority"]
    bcq = bcq[~no_answer_mask(bcq)]
    if bcq.empty:
        return pd.DataFrame(columns=cols)
    ok = (bcq["choice"] == bcq["correct"]).astype(int)
    g = bcq.assign(ok=ok).groupby(["set", "id"], sort=True)["ok"]
    out = pd.DataFrame({"repeats": g.size(), "right": g.sum()}).reset_index()
    out["accuracy"] = out["right"] / out["repeats"]
    out["majority"] = 2 * out["right"] > out["repeats"]
    return out[cols]


def majority_test(items: pd.DataFrame, chance: float = CHANCE) -> dict[str, Any]:
    """Exact one-sided binomial test (:func:`scipy.stats.binomtest`) of the items right in a
    majority of their repeats, ``k`` of ``n`` items, against ``chance``.

    H0: an item's majority answer picks the original with probability ``chance`` (25 %, the
    quiz's chance rate); H1: more often. For a model that guesses independently in each of 3
    repeats the majority's chance rate is lower (15.6 %), so 25 % is the conservative null.
    Also the Wilson 95 % interval of ``k/n`` and the mean per-item accuracy."""
    n = len(items)
    k = int(items["majority"].sum()) if n else 0
    if n == 0:
        nan = float("nan")
        return {"k": 0, "n": 0, "share": nan, "low": nan, "high": nan, "p": nan, "mean_accuracy": nan}
    low, high = wilson_interval(k, n)
    p = float(sps.binomtest(k, n, chance, alternative="greater").pvalue)
    return {"k": k, "n": n, "share": k / n, "low": float(low), "high": float(high), "p": p,
            "mean_accuracy": float(items["accuracy"].mean())}


@dataclass(frozen=True)
class Matched:
    """A difficulty-matched difference of means, target − control."""

    diff: float
    low: float
    high: float
    p: float  # one-sided (target > control), stratified permutation
    n_target: int  # items used (in levels both sets have)
    n_control: int
    levels: list[str] = field(default_factory=list)
    dropped_target: int = 0  # target items at levels the control lacks
    dropped_control: int = 0

    def sets_text(self, target: str, control: str) -> str:
        lv = ", ".join(self.levels) or "none"
        text = f"{target} (n = {self.n_target}) vs {control} (n = {self.n_control}), matched on difficulty (levels {lv})"
        drops = [f"{k} {name} item(s) at levels the other set lacks"
                 for k, name in ((self.dropped_target, target), (self.dropped_control, control)) if k]
        return text + ("; left out: " + ", ".join(drops) if drops else "")


def _level(d: Any) -> float:
    return UNRATED if d is None or (isinstance(d, float) and np.isnan(d)) else float(d)


def level_name(level: float) -> str:
    """A difficulty level as shown: ``"3"``, or ``"unrated"``."""
    return "unrated" if level == UNRATED else f"{level:g}"


def _pooled_variance(groups: list[np.ndarray]) -> tuple[float, int]:
    """A set's variance pooled over its levels and its degrees of freedom; the overall variance
    when every level has one item; NaN with one item."""
    df = sum(g.size - 1 for g in groups)
    if df > 0:
        return float(sum(((g - g.mean()) ** 2).sum() for g in groups)) / df, df
    values = np.concatenate(groups)
    return (float(values.var(ddof=1)), values.size - 1) if values.size > 1 else (float("nan"), 0)


def _stratified_t_interval(weights: np.ndarray, strata: list[tuple[np.ndarray, np.ndarray]],
                           confidence: float = 0.95) -> tuple[float, float]:
    """The t interval of ``Σ w_h (mean x_h − mean y_h)`` (see :func:`matched_diff`)."""
    diff = float(sum(w * (a.mean() - b.mean()) for w, (a, b) in zip(weights, strata, strict=True)))
    var_x, df_x = _pooled_variance([a for a, _ in strata])
    var_y, df_y = _pooled_variance([b for _, b in strata])
    v_x = var_x * float(sum(w**2 / a.size for w, (a, _) in zip(weights, strata, strict=True)))
    v_y = var_y * float(sum(w**2 / b.size for w, (_, b) in zip(weights, strata, strict=True)))
    if not (np.isfinite(v_x) and np.isfinite(v_y)):
        return float("nan"), float("nan")
    total = v_x + v_y
    if total <= 1e-20:  # rounding noise of a zero variance
        return diff, diff  # every item alike: zero width, decides nothing (zero_width)
    df = total**2 / (v_x**2 / df_x + v_y**2 / df_y)
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * float(np.sqrt(total))
    return diff - half, diff + half


def matched_diff(x: Sequence[float] | np.ndarray, x_levels: Sequence[Any], y: Sequence[float] | np.ndarray,
                 y_levels: Sequence[Any], *, n_boot: int = 1000, seed: int = 0, key: str = "") -> Matched:
    """``mean(x) − mean(y)`` standardised to x's difficulty distribution: within each level both
    sets have, the difference of means, weighted by x's share of items at that level. Items at a
    level only one set has are left out (and counted). Unrated items form their own level.

    Interval: the stratified difference's t interval, ``Σ w_h² (s_x²/n_xh + s_y²/n_yh)`` with
    each set's variance pooled over its levels (``s²`` from the deviations from each level's mean,
    ``Σ (n_h − 1)`` degrees of freedom), Welch–Satterthwaite degrees of freedom for the two sets.
    A level with one or two items thus carries its sampling variance (a bootstrap within such a
    level has none: 1 item resamples to itself). A set whose every level has one item uses its
    overall variance (``n − 1`` df); a set of one item has no variance: no interval. p: one-sided
    permutation test of the same statistic, the set labels shuffled within each level
    (``n_boot`` permutations, seeded by ``seed`` and ``key``)."""
    xv, yv = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xl = np.array([_level(d) for d in x_levels])
    yl = np.array([_level(d) for d in y_levels])
    keep_x, keep_y = ~np.isnan(xv), ~np.isnan(yv)
    xv, xl, yv, yl = xv[keep_x], xl[keep_x], yv[keep_y], yl[keep_y]
    shared = sorted(set(xl) & set(yl))
    used_x, used_y = np.isin(xl, shared), np.isin(yl, shared)
    nan = float("nan")
    names = [level_name(v) for v in shared]
    dropped = (int((~used_x).sum()), int((~used_y).sum()))
    if not shared:
        return Matched(nan, nan, nan, nan, 0, 0, names, *dropped)
    nx = int(used_x.sum())
    weights = np.array([(xl == lv).sum() / nx for lv in shared])
    strata = [(xv[xl == lv], yv[yl == lv]) for lv in shared]
    diff = float(sum(w * (a.mean() - b.mean()) for w, (a, b) in zip(weights, strata, strict=True)))
    low, high = _stratified_t_interval(weights, strata)
    perms = np.zeros(n_boot)
    for w, (a, b), lv in zip(weights, strata, shared, strict=True):
        pooled = np.concatenate([a, b])
        rng = stable_seed(seed, "matched-perm", key, lv)
        shuffled = rng.permuted(np.tile(pooled, (n_boot, 1)), axis=1)
        perms += w * (shuffled[:, :a.size].mean(axis=1) - shuffled[:, a.size:].mean(axis=1))
    p = float((1 + np.sum(perms >= diff - 1e-12)) / (1 + n_boot))
    return Matched(diff, low, high, p, nx, int(used_y.sum()), names, *dropped)
