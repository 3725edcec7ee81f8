"""Accuracy broken down by difficulty, by annotation group, and creative vs factual items.

* :func:`by_difficulty` — accuracy per configuration × language × metric × difficulty level
  with 95 % Wilson intervals and a ``small`` flag for cells under ``min_cell_n`` items
  (paper Fig. 3 and 13); :func:`difficulty_trend` — Cochran–Armitage test that accuracy
  falls with difficulty, Holm-corrected across configurations;
* :func:`by_group` — accuracy per configuration × language × knowledge domain / creative
  concept / culture, for groups with enough items (paper Fig. 7–12), each cell tested
  against the rest of that model's items with Benjamini–Hochberg control over the heatmap,
  plus a per-model homogeneity test (:attr:`GroupBreakdown.homogeneity`);
* :func:`creative_vs_factual` — the difficulty-standardised gap between creative and
  factual items with a stratified Newcombe/Wilson-score interval of the same estimator (paper
  Fig. 4 and 14); the procedure is in its docstring.

Accuracies are in % (0–100). Every random draw comes from its own stream seeded by ``seed``
and the group key (:func:`~cresowlve_core.stats.stable_seed`), so results are
reproducible and do not change when other runs are added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import METRIC_LABELS, reasoning_is
from cresowlve_core.stats import (
    NOT_TESTED,
    Homogeneity,
    asymptotic_homogeneity_applies,
    asymptotic_homogeneity_shared,
    benjamini_hochberg,
    cochran_armitage,
    holm,
    linear_combination_interval,
    permutation_homogeneity_shared,
    permutation_indices,
    stable_seed,
    two_proportion_z,
    wilson_interval,
)
from cresowlve_core.untrusted import one_line

MIN_CELL_N = 30  # below this many items a cell's interval is flagged as small-sample
ALPHA = 0.05

GROUP_COLUMNS = {
    "knowledge_domains": "Knowledge domain",
    "creative_domains": "Creative concept",
    "cultures": "Culture",
}


# ------------------------------------------------------------------ difficulty


def by_difficulty(
    responses: pd.DataFrame,
    metrics: Sequence[str] = ("em_strict", "judge"),
    confidence: float = 0.95,
    min_cell_n: int = MIN_CELL_N,
) -> pd.DataFrame:
    """Accuracy (%) per config × lang × metric × difficulty with Wilson intervals.

    Wilson, as everywhere else in the report (a percentile bootstrap gives [0, 0] at 0/384).
    Rows with no difficulty or an unknown outcome for the metric are left out of that cell.
    Columns: config, thinking, lang, metric, metric_label, difficulty, n, k, acc, low, high,
    small (``n < min_cell_n``).
    """
    cols = ["config", "thinking", "lang", "metric", "difficulty", "n", "k", "acc", "low", "high", "small"]
    keys = ["config", "thinking", "lang", "difficulty"]
    df = responses.loc[responses["difficulty"].notna(), [*keys, *dict.fromkeys(metrics)]]  # the columns counted
    parts = []
    for metric in metrics:
        sub = df[df[metric].notna()]
        if sub.empty:
            continue
        g = sub.groupby(["config", "thinking", "lang", "difficulty"], sort=True)[metric].agg(["size", "sum"])
        g = g.reset_index().rename(columns={"size": "n", "sum": "k"})
        g["metric"] = metric
        parts.append(g)
    if not parts:
        out = pd.DataFrame(columns=[*cols, "metric_label"])
        return out
    out = pd.concat(parts, ignore_index=True)
    out["k"] = out["k"].astype(int)
    out["difficulty"] = out["difficulty"].astype(int)
    low, high = wilson_interval(out["k"].to_numpy(), out["n"].to_numpy(), confidence)
    out["acc"] = 100.0 * out["k"] / out["n"]
    out["low"], out["high"] = 100.0 * low, 100.0 * high
    out["small"] = out["n"] < min_cell_n
    out = out[cols]
    out["metric_label"] = out["metric"].map(METRIC_LABELS)
    return out


def difficulty_cells_without_value(responses: pd.DataFrame, by_diff: pd.DataFrame, metrics: Sequence[str],
                                   shown: int = 6) -> list[str]:
    """A note naming each run × metric × difficulty level without a cell of :func:`by_difficulty`: the run has
    values of the metric, and items rated at that level, but no value on any of them (every one errored or
    unscored), so its line has a gap there, which is no accuracy at all (not 0 %)."""
    rated = responses[responses["difficulty"].notna()]
    held = rated.groupby(["config", "lang", "difficulty"], sort=True)["id"].nunique()
    parts = []
    for metric in metrics:
        valued = set(map(tuple, rated.loc[rated[metric].notna(), ["config", "lang"]].drop_duplicates().to_numpy()))
        cells = by_diff[by_diff["metric"] == metric]
        have = set(zip(cells["config"], cells["lang"], cells["difficulty"].astype(int), strict=True))
        parts += [f"{one_line(c)} / {lang} / {METRIC_LABELS.get(metric, metric)} at difficulty {int(d)} ({int(k)} "
                  "item(s), none with a value)"
                  for (c, lang, d), k in held.items() if (c, lang) in valued and (c, lang, int(d)) not in have]
    if not parts:
        return []
    more = f", and {len(parts) - shown} more" if len(parts) > shown else ""
    return [f"**No cell** for {len(parts)} run × metric × difficulty level(s) (a gap in the line, absent from the "
            f"table and the trend test; no accuracy, not 0 %): {'; '.join(parts[:shown])}{more}. Errored and unscored "
            "items have no value."]


def difficulty_trend(by_diff: pd.DataFrame) -> pd.DataFrame:
    """Cochran–Armitage trend of accuracy over difficulty (scores 1–5) per config × lang × metric.

    ``z < 0``: accuracy falls as difficulty rises. ``p_holm`` controls the family-wise error
    over every row of the result. Columns: config, thinking, lang, metric, n, levels, z, p,
    p_holm, falls (``z < 0`` and ``p_holm < 0.05``).
    """
    rows = []
    for (config, thinking, lang, metric), g in by_diff.groupby(["config", "thinking", "lang", "metric"], sort=True):
        t = cochran_armitage(g["k"].to_numpy(), g["n"].to_numpy(), g["difficulty"].to_numpy(float))
        rows.append(
            {"config": config, "thinking": thinking, "lang": lang, "metric": metric, "n": t.n, "levels": len(g), "z": t.z, "p": t.p}
        )
    out = pd.DataFrame(rows, columns=["config", "thinking", "lang", "metric", "n", "levels", "z", "p"])
    out["p_holm"] = holm(out["p"].to_numpy()) if not out.empty else []
    out["falls"] = (out["z"] < 0) & (out["p_holm"] < ALPHA)
    return out


# ------------------------------------------------------------------ annotation groups


@dataclass
class GroupBreakdown:
    """Accuracy per configuration × group, with the metric actually used and notes."""

    table: pd.DataFrame
    metric: str
    column: str
    notes: list[str] = field(default_factory=list)
    homogeneity: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def n_cells(self) -> int:
        return int(self.table["p"].notna().sum()) if "p" in self.table else 0

    @property
    def expected_by_chance(self) -> float:
        """Cells expected to 'differ' at p < 0.05 with no real difference at all (m × α)."""
        return ALPHA * self.n_cells

    @property
    def n_uncorrected(self) -> int:
        return int((self.table["p"] < ALPHA).sum()) if "p" in self.table else 0

    @property
    def n_flagged(self) -> int:
        return int(self.table["flagged"].sum()) if "flagged" in self.table else 0

    def chance_text(self) -> str:
        """What the marks mean, in numbers, for the report text."""
        return (
            f"{self.n_cells} cells tested (each group against the rest of that model's items). With no real "
            f"difference anywhere, about **{self.expected_by_chance:.1f}** cells would still reach p < 0.05 by "
            f"chance; {self.n_uncorrected} do before correction. After Benjamini–Hochberg control (FDR 5 %), "
            f"**{self.n_flagged}** cell(s) are marked (outlined, `*`)."
        )

    @property
    def metric_label(self) -> str:
        label = METRIC_LABELS[self.metric]
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
    n_perm: int = 1000,
    seed: int = 0,
    fdr: float = ALPHA,
    homogeneity_test: str = "auto",
) -> GroupBreakdown:
    """Accuracy (%) per config × lang × label of a multi-label annotation ``column``.

    An item counts towards every label it carries, once per label (a label repeated within
    one item's annotation counts once). Only labels carried by at least
    ``min_group_size`` distinct items (in that language) are kept. Columns: config,
    thinking, lang, group, n, k, acc, low, high (Wilson 95 %), n_items, overall (the
    model's accuracy over all its items), p (two-proportion z test of the group against the
    model's other items), q (Benjamini–Hochberg over every cell of this table), flagged
    (``q <= fdr``).

    ``homogeneity`` holds one row per config × lang: the χ² statistic for "every shown group
    has the same accuracy" with its p-value and its BH q over models. The groups overlap, so the
    χ² distribution itself does not apply; the p-value is that of the permutation test, computed
    (``test``) from the statistic's large-sample permutation distribution where every expected count
    is at least 5 (:func:`~cresowlve_core.stats.asymptotic_homogeneity_shared`) and from ``n_perm``
    seeded permutations elsewhere, or from permutations everywhere with
    ``homogeneity_test="permutation"``. The runs of one language share one set of permutations (see
    :func:`_homogeneity`). A run with fewer than two shown groups, or every answer alike, is
    ``"not tested"`` (no p, no q, no permutations).
    """
    if homogeneity_test not in HOMOGENEITY_TESTS:
        raise ValueError(f"homogeneity_test must be one of {', '.join(HOMOGENEITY_TESTS)}, not {homogeneity_test!r}")
    notes: list[str] = []
    if metric is None:
        metric, notes = choose_metric(responses)
    sub = responses.loc[responses[metric].notna(), ["id", "config", "thinking", "lang", column, metric]]
    # a label repeated within one item counts once for that item ("History" twice is one History item)
    exploded = sub.explode(column).dropna(subset=[column]).drop_duplicates(["config", "lang", "id", column])
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
    totals = sub.groupby(["config", "lang"])[metric].agg(["size", "sum"])
    tot = table.join(totals, on=["config", "lang"])
    table["overall"] = 100.0 * tot["sum"] / tot["size"]
    table["p"] = two_proportion_z(tot["k"], tot["n"], tot["sum"] - tot["k"], tot["size"] - tot["n"])
    table["q"] = benjamini_hochberg(table["p"].to_numpy())
    table["flagged"] = table["q"] <= fdr
    notes.extend(_cells_without_value(responses, sub, table, big, column))
    homogeneity = _homogeneity(keep, metric, n_perm, seed, column, homogeneity_test == "auto")
    return GroupBreakdown(table, metric, column, notes, homogeneity)


def _cells_without_value(responses: pd.DataFrame, sub: pd.DataFrame, table: pd.DataFrame, big: pd.Series,
                         column: str, shown: int = 6) -> list[str]:
    """A note naming each run × shown group without a cell: the run has values (``sub``), but none on an
    item of that group (every one errored or unscored, or the run has no item of it), so its heatmap cell
    is blank, which is no accuracy at all (not 0 %)."""
    expected = sub[["config", "lang"]].drop_duplicates().merge(big.reset_index()[["lang", "group"]], on="lang")
    cells = expected.merge(table[["config", "lang", "group"]], on=["config", "lang", "group"], how="left",
                           indicator=True)
    blank = cells[cells["_merge"] == "left_only"].sort_values(["config", "lang", "group"])
    if blank.empty:
        return []
    records = (responses[["config", "lang", "id", column]].explode(column).dropna(subset=[column])
               .drop_duplicates(["config", "lang", "id", column]))
    held = records.groupby(["config", "lang", column])["id"].size()
    parts = [f"{one_line(c)} / {lang} × {one_line(g)} ({int(held.get((c, lang, g), 0))} item(s) of the group, none "
             "with a value)" for c, lang, g in blank[["config", "lang", "group"]].itertuples(index=False)]
    more = f", and {len(parts) - shown} more" if len(parts) > shown else ""
    return [f"**No cell** for {len(parts)} run × group pair(s) (blank in the chart, absent from the table; no "
            f"accuracy, not 0 %): {'; '.join(parts[:shown])}{more}. Errored and unscored items have no value."]


#: how :func:`by_group` computes the homogeneity p-values: ``auto`` (large-sample where every expected
#: count is at least 5, permutations elsewhere) or ``permutation`` (permutations everywhere)
HOMOGENEITY_TESTS = ("auto", "permutation")


def _homogeneity(keep: pd.DataFrame, metric: str, n_perm: int, seed: int, column: str,
                 asymptotic: bool = True) -> pd.DataFrame:
    """Per config × lang: χ² test that every shown group has the same accuracy.

    With ``asymptotic``, a run where :func:`~cresowlve_core.stats.asymptotic_homogeneity_applies`
    gets its p-value from the statistic's large-sample permutation distribution; the other runs are
    tested with permutations, exactly as without it (the same draws, so the same p-values).

    One set of ``n_perm`` permutations is drawn per language over the union of the items of
    its runs (seeded by ``seed``, the language, the column and that union). A run with every
    item uses them as drawn; a run with fewer items uses the permutation each draw induces on
    its own items, which is a uniformly random permutation of them
    (:func:`~cresowlve_core.stats.permutation_homogeneity_shared`). The runs that agree on the
    labels of their items are tested together, in one pass over the permutations.
    """
    rows = []
    for lang, lang_rows in keep.groupby("lang", sort=True):
        item_code, universe = pd.factorize(lang_rows["id"], sort=True)
        group_code, group_names = pd.factorize(lang_rows["group"], sort=True)
        config_code, configs = pd.factorize(lang_rows["config"], sort=True)
        labels = np.zeros((len(configs), len(universe), len(group_names)), dtype=bool)
        labels[config_code, item_code, group_code] = True
        outcomes = np.full((len(configs), len(universe)), np.nan)
        outcomes[config_code, item_code] = lang_rows[metric].to_numpy(float)
        # the labels of the union; a run whose own labels differ on its items is tested with its own
        union = np.asarray(labels.any(axis=0))
        has = ~np.isnan(outcomes)
        agrees = [bool((labels[c][has[c]] == union[has[c]]).all()) for c in range(len(configs))]
        large = np.zeros(len(configs), dtype=bool)
        if asymptotic:
            for c in range(len(configs)):
                member = (union if agrees[c] else labels[c]).astype(float)
                large[c] = bool(asymptotic_homogeneity_applies(outcomes[c : c + 1], member)[0])
        tests: dict[int, Homogeneity] = {}
        big = [c for c in range(len(configs)) if large[c] and agrees[c]]
        if big:
            tests.update(zip(big, asymptotic_homogeneity_shared(outcomes[big], union.astype(float)), strict=True))
        for c in range(len(configs)):
            if large[c] and not agrees[c]:
                tests[c] = asymptotic_homogeneity_shared(outcomes[c : c + 1], labels[c].astype(float))[0]
        small = [c for c in range(len(configs)) if not large[c]]
        batches = [[c for c in small if agrees[c]]] + [[c] for c in small if not agrees[c]]
        if small:  # the same draws whichever runs need them (the seed does not depend on the runs tested)
            perms = permutation_indices(len(universe), n_perm,
                                        stable_seed(seed, lang, column, len(universe), *universe[:3]))
        for batch in batches:
            if batch:
                member = (union if agrees[batch[0]] else labels[batch[0]]).astype(float)
                tests.update(zip(batch, permutation_homogeneity_shared(outcomes[batch], member, perms), strict=True))
        for c, config in enumerate(configs):
            h = tests[c]
            # fewer than two groups, or every answer alike: no statistic, so neither test was run
            method = NOT_TESTED if np.isnan(h.p) else h.method
            rows.append({"config": config, "lang": lang, "n_items": int(has[c].sum()),
                         "groups": int(labels[c].any(axis=0).sum()), "chi2": h.statistic, "df": h.df, "p": h.p,
                         "test": method, "n_perm": n_perm if method == "permutation" else None})
    out = pd.DataFrame(rows, columns=["config", "lang", "n_items", "groups", "chi2", "df", "p", "test", "n_perm"])
    out.insert(7, "q", benjamini_hochberg(out["p"].to_numpy()) if not out.empty else [])
    out["n_perm"] = out["n_perm"].astype("Int64")
    return out


# ------------------------------------------------------------------ creative vs factual


def creative_vs_factual(
    responses: pd.DataFrame,
    metrics: Sequence[str] = ("judge", "em_strict"),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Creative − factual accuracy gap per config × lang × metric, standardised for difficulty.

    Procedure, for each configuration × language × metric (the estimate and its interval come
    from the **same** estimator and the same items):

    1. Take the items with a known outcome; *creative* / *factual* = ``reasoning_type``
       compared case-insensitively (anything else is ignored).
    2. Keep only difficulty levels present in both groups.
    3. The smaller group is the reference: its difficulty distribution gives the weights
       ``w_d = n_d / n`` (``n_matched`` = its size).
    4. ``gap`` = Σ_d w_d (c̄_d − f̄_d): the creative − factual difference within each level,
       averaged over the reference distribution, using **every** item of both groups.
    5. Interval: the stratified Newcombe/Wilson-score (MOVER-Wilson) interval of that linear
       combination of 2 × levels independent proportions, coefficients ``+w_d`` (creative) and
       ``−w_d`` (factual): :func:`~cresowlve_core.stats.linear_combination_interval` (Zou, Huang &
       Zhang, 2009). Each stratum contributes its Wilson width, so a stratum at 0/50 (or 50/50)
       still carries uncertainty; a percentile bootstrap gave such strata none (factual 0/50 at
       every level vs creative 6/300: 2.0 pp [1.33, 2.67] there, [−1.23, 3.03] here).

    Deterministic (no resampling). Negative gaps mean creative items are harder. Columns:
    config, thinking, lang, metric, gap, low, high, n_matched, n_creative, n_factual (items
    used), creative_acc, factual_acc (raw, unbalanced), all in %.
    """
    rows = []
    kind = np.where(reasoning_is(responses, "creative"), "creative", np.where(reasoning_is(responses, "factual"), "factual", ""))
    # only the columns the counts need: filtering every column of the responses costs seconds at 360 runs
    df = responses[["config", "thinking", "lang", "difficulty", *dict.fromkeys(metrics)]].assign(_kind=kind)
    df = df[(df["_kind"] != "") & df["difficulty"].notna()]
    for metric in metrics:
        sub = df[df[metric].notna()]
        # every count the estimator needs, in one group-by: (configuration, kind, difficulty) -> size, sum
        counts = sub.groupby(["config", "thinking", "lang", "_kind", "difficulty"], sort=True)[metric].agg(["size", "sum"])
        # sorted, so each configuration × language is one contiguous block of rows (kind, difficulty)
        run = counts.index.droplevel(["_kind", "difficulty"])
        kinds = counts.index.get_level_values("_kind").to_numpy()
        levels = counts.index.get_level_values("difficulty").to_numpy()
        sizes, sums = counts["size"].to_numpy(), counts["sum"].to_numpy(float)
        starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]]) if len(run) else np.array([], dtype=int)
        for a, b in zip(starts, [*starts[1:], len(run)], strict=True):
            row = _standardised_gap(kinds[a:b], levels[a:b], sizes[a:b], sums[a:b], confidence)
            if row is not None:
                config, thinking, lang = run[a]
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
    out["metric_label"] = out["metric"].map(METRIC_LABELS)
    return out


def _standardised_gap(kinds: np.ndarray, levels: np.ndarray, sizes: np.ndarray, sums: np.ndarray,
                      confidence: float) -> dict[str, float] | None:
    """The gap of one configuration × language × metric from its counts, one row per (kind, difficulty)
    in sorted order: the kind, the difficulty level, the items (size) and the right answers (sum)."""
    creative, factual = kinds == "creative", kinds == "factual"
    if not creative.any() or not factual.any():
        return None
    shared = np.isin(levels, np.intersect1d(levels[creative], levels[factual]))
    c, f = creative & shared, factual & shared  # each in ascending difficulty
    if not c.any():
        return None
    n_c, n_f = int(sizes[c].sum()), int(sizes[f].sum())
    ref = sizes[f] if n_f <= n_c else sizes[c]
    w = ref / ref.sum()
    k = np.concatenate([sums[c], sums[f]])
    n = np.concatenate([sizes[c], sizes[f]])
    point, low, high = linear_combination_interval(k, n, np.concatenate([w, -w]), confidence)
    return {
        "gap": 100.0 * point,
        "low": 100.0 * low,
        "high": 100.0 * high,
        "n_matched": min(n_c, n_f),
        "n_creative": n_c,
        "n_factual": n_f,
        "creative_acc": 100.0 * float(sums[creative].sum() / sizes[creative].sum()),
        "factual_acc": 100.0 * float(sums[factual].sum() / sizes[factual].sum()),
    }


def difficulty_distribution(responses: pd.DataFrame) -> pd.DataFrame:
    """Share of creative and factual items per difficulty level (paper Fig. 15), over unique items."""
    items = responses.drop_duplicates("id").copy()
    items["reasoning_type"] = items["reasoning_type"].astype("string").str.strip().str.lower()
    items = items[items["reasoning_type"].isin(["creative", "factual"]) & items["difficulty"].notna()]
    counts = items.groupby(["reasoning_type", "difficulty"]).size().rename("n").reset_index()
    counts["share"] = counts["n"] / counts.groupby("reasoning_type")["n"].transform("sum")
    counts["difficulty"] = counts["difficulty"].astype(int)
    return counts
