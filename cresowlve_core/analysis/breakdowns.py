"""Accuracy broken down by difficulty, by annotation group, and creative vs factual items.

* :func:`by_difficulty` — accuracy per configuration × language × metric × difficulty level
  with seeded percentile-bootstrap 95 % intervals (paper Fig. 3 and 13);
* :func:`by_group` — accuracy per configuration × language × knowledge domain / creative
  concept / culture, for groups with enough items (paper Fig. 7–12);
* :func:`creative_vs_factual` — the difficulty-balanced, size-matched bootstrap gap between
  creative and factual items (paper Fig. 4 and 14); the procedure is in its docstring.

Accuracies are in % (0–100). Every bootstrap draws from its own stream seeded by ``seed``
and the group key (:func:`~cresowlve_core.stats.stable_seed`), so results are
reproducible and do not change when other runs are added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import METRICS
from cresowlve_core.stats import bootstrap_means, percentile_interval, stable_seed, wilson_interval

GROUP_COLUMNS = {
    "knowledge_domains": "Knowledge domain",
    "creative_domains": "Creative concept",
    "cultures": "Culture",
}


# ------------------------------------------------------------------ difficulty


def by_difficulty(
    responses: pd.DataFrame,
    metrics: Sequence[str] = ("em_strict", "judge"),
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Accuracy (%) per config × lang × metric × difficulty with bootstrap CIs.

    Rows with no difficulty or an unknown outcome for the metric are left out of that cell.
    Columns: config, thinking, lang, metric, metric_label, difficulty, n, acc, low, high.
    """
    rows = []
    df = responses[responses["difficulty"].notna()]
    for metric in metrics:
        sub = df[df[metric].notna()]
        for (config, thinking, lang, diff), grp in sub.groupby(["config", "thinking", "lang", "difficulty"], sort=True):
            values = grp[metric].to_numpy(dtype=float)
            reps = bootstrap_means(values, n_boot, stable_seed(seed, config, lang, metric, int(diff)))
            low, high = percentile_interval(reps, confidence)
            rows.append((config, thinking, lang, metric, int(diff), values.size, values.mean(), low, high))
    out = pd.DataFrame(rows, columns=["config", "thinking", "lang", "metric", "difficulty", "n", "acc", "low", "high"])
    out[["acc", "low", "high"]] *= 100.0
    out["metric_label"] = out["metric"].map(METRICS)
    return out


# ------------------------------------------------------------------ annotation groups


@dataclass
class GroupBreakdown:
    """Accuracy per configuration × group, with the metric actually used and notes."""

    table: pd.DataFrame
    metric: str
    column: str
    notes: list[str] = field(default_factory=list)

    @property
    def metric_label(self) -> str:
        label = METRICS[self.metric]
        return label if self.metric == "judge" else f"{label} (no LLM-judge scores)"


def choose_metric(responses: pd.DataFrame) -> tuple[str, list[str]]:
    """``"judge"`` when any run has judge scores, else ``"em_lenient"``; notes say which configs lack it."""
    has = responses.groupby(["config", "lang"])["judge"].count()
    if (has > 0).any():
        missing = [f"{c} / {lang}" for (c, lang), k in has.items() if k == 0]
        notes = (
            [f"No LLM-judge scores for {', '.join(missing)}; left out of the judge-based breakdowns."]
            if missing
            else []
        )
        return "judge", notes
    return "em_lenient", ["No run has LLM-judge scores: breakdowns use **lenient exact match** instead."]


def by_group(
    responses: pd.DataFrame,
    column: str,
    min_group_size: int = 30,
    metric: str | None = None,
) -> GroupBreakdown:
    """Accuracy (%) per config × lang × label of a multi-label annotation ``column``.

    An item counts towards every label it carries. Only labels carried by at least
    ``min_group_size`` distinct items (in that language) are kept. Columns: config,
    thinking, lang, group, n, k, acc, low, high (Wilson 95 %), n_items.
    """
    notes: list[str] = []
    if metric is None:
        metric, notes = choose_metric(responses)
    sub = responses.loc[responses[metric].notna(), ["id", "config", "thinking", "lang", column, metric]]
    exploded = sub.explode(column).dropna(subset=[column])
    empty = pd.DataFrame(columns=["config", "thinking", "lang", "group", "n", "k", "acc", "low", "high", "n_items"])
    if exploded.empty:
        notes.append(f"No `{column}` annotations in these runs.")
        return GroupBreakdown(empty, metric, column, notes)
    exploded = exploded.rename(columns={column: "group"})
    sizes = exploded.groupby(["lang", "group"])["id"].nunique().rename("n_items")
    big = sizes[sizes >= min_group_size]
    if big.empty:
        notes.append(
            f"No {GROUP_COLUMNS.get(column, column).lower()} has at least {min_group_size} items "
            f"(largest: {int(sizes.max())}); lower `min_group_size` to see small groups."
        )
        return GroupBreakdown(empty, metric, column, notes)
    dropped = int((sizes < min_group_size).sum())
    if dropped:
        notes.append(f"{dropped} group(s) with fewer than {min_group_size} items hidden.")
    keep = exploded.join(big, on=["lang", "group"], how="inner")
    table = (
        keep.groupby(["config", "thinking", "lang", "group"], sort=True)
        .agg(n=(metric, "size"), k=(metric, "sum"), n_items=("n_items", "first"))
        .reset_index()
    )
    table["k"] = table["k"].astype(int)
    low, high = wilson_interval(table["k"].to_numpy(), table["n"].to_numpy())
    table["acc"] = 100.0 * table["k"] / table["n"]
    table["low"], table["high"] = 100.0 * low, 100.0 * high
    return GroupBreakdown(table, metric, column, notes)


# ------------------------------------------------------------------ creative vs factual


def creative_vs_factual(
    responses: pd.DataFrame,
    metrics: Sequence[str] = ("judge", "em_strict"),
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Creative − factual accuracy gap per config × lang × metric, difficulty-balanced and size-matched.

    Procedure, for each configuration × language × metric:

    1. Take the items with a known outcome; *creative* = ``reasoning_type == "creative"``,
       *factual* = ``reasoning_type == "factual"`` (anything else is ignored).
    2. Keep only difficulty levels present in both groups.
    3. The smaller group is the reference: ``n`` = its size and ``n_d`` = its number of items at
       difficulty ``d``. Both groups will be sampled to exactly ``n_d`` items per level, so the
       two samples have the same size ``n`` and the same difficulty distribution.
    4. Each of ``n_boot`` (default 1,000) iterations draws, for every level ``d``, ``n_d`` items
       **with replacement** from the creative items at ``d`` and ``n_d`` from the factual items
       at ``d``; the iteration's gap is mean(creative sample) − mean(factual sample).
       The draws are vectorised: one ``(n_boot, n_d)`` index matrix per level and group.
    5. ``gap`` is the difficulty-standardised difference Σ_d (n_d / n)(c̄_d − f̄_d), the expected
       value of the iteration gaps; ``low``/``high`` are their 2.5th/97.5th percentiles.

    The random stream is seeded by ``seed`` and the (config, lang, metric) key. Negative gaps
    mean creative items are harder. Columns: config, thinking, lang, metric, gap, low, high,
    n_matched, n_creative, n_factual, creative_acc, factual_acc (raw, unbalanced), all in %.
    """
    rows = []
    df = responses[responses["reasoning_type"].isin(["creative", "factual"]) & responses["difficulty"].notna()]
    for metric in metrics:
        sub = df[df[metric].notna()]
        for (config, thinking, lang), grp in sub.groupby(["config", "thinking", "lang"], sort=True):
            row = _balanced_gap(grp, metric, n_boot, stable_seed(seed, config, lang, metric), confidence)
            if row is not None:
                rows.append({"config": config, "thinking": thinking, "lang": lang, "metric": metric, **row})
    cols = [
        "config",
        "thinking",
        "lang",
        "metric",
        "gap",
        "low",
        "high",
        "n_matched",
        "n_creative",
        "n_factual",
        "creative_acc",
        "factual_acc",
    ]
    out = pd.DataFrame(rows, columns=cols)
    out["metric_label"] = out["metric"].map(METRICS)
    return out


def _balanced_gap(
    grp: pd.DataFrame, metric: str, n_boot: int, rng: np.random.Generator, confidence: float
) -> dict[str, float] | None:
    creative = grp[grp["reasoning_type"] == "creative"]
    factual = grp[grp["reasoning_type"] == "factual"]
    if creative.empty or factual.empty:
        return None
    levels = sorted(set(creative["difficulty"]) & set(factual["difficulty"]))
    if not levels:
        return None
    c_by = {d: creative.loc[creative["difficulty"] == d, metric].to_numpy(float) for d in levels}
    f_by = {d: factual.loc[factual["difficulty"] == d, metric].to_numpy(float) for d in levels}
    n_c = sum(v.size for v in c_by.values())
    n_f = sum(v.size for v in f_by.values())
    ref = f_by if n_f <= n_c else c_by
    n = min(n_c, n_f)
    sums = np.zeros(n_boot)
    point = 0.0
    for d in levels:
        n_d = ref[d].size
        c, f = c_by[d], f_by[d]
        sums += c[rng.integers(0, c.size, size=(n_boot, n_d))].sum(axis=1)
        sums -= f[rng.integers(0, f.size, size=(n_boot, n_d))].sum(axis=1)
        point += n_d * (c.mean() - f.mean())
    gaps = sums / n
    low, high = percentile_interval(gaps, confidence)
    return {
        "gap": 100.0 * point / n,
        "low": 100.0 * low,
        "high": 100.0 * high,
        "n_matched": n,
        "n_creative": int(creative.shape[0]),
        "n_factual": int(factual.shape[0]),
        "creative_acc": 100.0 * float(creative[metric].mean()),
        "factual_acc": 100.0 * float(factual[metric].mean()),
    }


def difficulty_distribution(responses: pd.DataFrame) -> pd.DataFrame:
    """Share of creative and factual items per difficulty level (paper Fig. 15), over unique items."""
    items = responses.drop_duplicates("id")
    items = items[items["reasoning_type"].isin(["creative", "factual"]) & items["difficulty"].notna()]
    counts = items.groupby(["reasoning_type", "difficulty"]).size().rename("n").reset_index()
    counts["share"] = counts["n"] / counts.groupby("reasoning_type")["n"].transform("sum")
    counts["difficulty"] = counts["difficulty"].astype(int)
    return counts
