"""Difficulty vs complexity (paper §6, Fig. 16 and 17).

Three per-item complexity features:

* ``n_domains`` — number of knowledge domains annotated on the item;
* ``max_domain_distance`` — the largest cosine distance (1 − cosine similarity) between
  the embeddings of any two of the item's domain names. An item with a **single** domain has
  distance **0** by definition (all its knowledge lies in one domain: the low-complexity tail;
  leaving it out would drop about 16 % of items). Only items with no domain annotation at all
  are NaN. ``n`` is shown with every correlation;
* ``n_atomic_facts`` — the number of atomic facts from the decomposition annotation.

Each feature is correlated (Pearson and Spearman, two-sided p) with the difficulty label
over items (:func:`difficulty_correlations`) and with per-item correctness of each
configuration × language (:func:`performance_correlations`; Pearson on a 0/1 outcome is the
point-biserial correlation). Every coefficient carries a 95 % Fisher-z interval
(Bonett–Wright variance for Spearman) and Holm-adjusted p-values over its family (all rows of
the table): ``significant`` = Holm p < 0.05. :func:`correlation_verdict` words a result from its
interval, so "no significant correlation" always comes with the range of ρ the data allow.

Embeddings come from :func:`cresowlve_core.embeddings.embed` (cached on disk), imported
lazily so the rest of the analysis works without it; any callable with the same signature
can be passed instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from cresowlve_core.stats import correlation, format_p, holm, zero_width

FEATURES = {
    "n_domains": "Number of knowledge domains",
    "max_domain_distance": "Max semantic distance between domains",
    "n_atomic_facts": "Number of atomic facts",
}
EmbedFn = Callable[[list[str]], np.ndarray]


def _default_embed(texts: list[str]) -> np.ndarray:
    from cresowlve_core.embeddings import embed

    return embed(texts)


def per_item(responses: pd.DataFrame) -> pd.DataFrame:
    """One row per item id (annotations from its English record when there is one)."""
    order = responses.assign(_en=responses["lang"].ne("en")).sort_values(["_en"], kind="stable")
    items = order.drop_duplicates("id")[["id", "difficulty", "knowledge_domains", "n_atomic_facts"]]
    return items.reset_index(drop=True)


def max_pairwise_distance(items: pd.DataFrame, embed_fn: EmbedFn) -> pd.Series:
    """Max cosine distance between the item's domain-name embeddings.

    0 for an item with a single (distinct) domain, NaN for an item without domains.

    Only the distinct domain names are embedded; item pairs are formed with a self-join on
    the exploded (item, domain) table, so no Python loop over items is needed.
    """
    pairs = items[["id", "knowledge_domains"]].explode("knowledge_domains").dropna()
    pairs = pairs.drop_duplicates()
    if pairs.empty:
        return pd.Series(np.nan, index=items.index)
    names = sorted(pairs["knowledge_domains"].unique().tolist())
    vectors = np.asarray(embed_fn(names), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms > 0, norms, 1.0)
    distance = 1.0 - vectors @ vectors.T
    code = {n: i for i, n in enumerate(names)}
    pairs["k"] = pairs["knowledge_domains"].map(code).astype(int)
    joined = pairs[["id", "k"]].merge(pairs[["id", "k"]], on="id", suffixes=("_a", "_b"))
    joined = joined[joined["k_a"] < joined["k_b"]]
    joined["d"] = distance[joined["k_a"].to_numpy(), joined["k_b"].to_numpy()]
    best = joined.groupby("id")["d"].max()
    out = items["id"].map(best).astype(float)
    single = items["id"].map(pairs.groupby("id").size()).eq(1).to_numpy()
    return out.where(~single, 0.0).clip(lower=0.0)


def item_features(
    responses: pd.DataFrame, embed_fn: EmbedFn | None = None, semantic_distance: bool = True
) -> tuple[pd.DataFrame, list[str]]:
    """Per-item features (columns id, difficulty and :data:`FEATURES`) plus notes on what is missing."""
    notes: list[str] = []
    items = per_item(responses)
    # distinct domains, as the distance and the group breakdowns count them ("History" twice is one domain)
    n_dom = items["knowledge_domains"].map(lambda v: len({str(d) for d in v if d is not None}) if v is not None else 0)
    items["n_domains"] = n_dom.where(n_dom > 0).astype(float)
    if items["n_domains"].isna().all():
        notes.append("**Number of domains / semantic distance:** no `knowledge_domains` annotations in these runs.")
    items["max_domain_distance"] = np.nan
    if not semantic_distance:
        notes.append("**Semantic distance:** switched off (`semantic_distance=False`).")
    elif items["n_domains"].notna().any():
        try:
            items["max_domain_distance"] = max_pairwise_distance(items, embed_fn or _default_embed)
        except Exception as exc:  # the embedding model is optional: say why it is missing
            notes.append(f"**Semantic distance:** unavailable ({type(exc).__name__}: {exc}).")
    if items["n_atomic_facts"].isna().all():
        notes.append(
            "**Number of atomic facts:** `n_atomic_facts` is empty in every record (the decomposition "
            "annotation has not been run), so this feature is left out."
        )
    return items[["id", "difficulty", *FEATURES]], notes


CORR_COLUMNS = [
    "n",
    "pearson_r",
    "pearson_low",
    "pearson_high",
    "pearson_p",
    "pearson_p_method",
    "pearson_p_holm",
    "spearman_rho",
    "spearman_low",
    "spearman_high",
    "spearman_p",
    "spearman_p_method",
    "spearman_p_holm",
    "significant",
]

_ROW_COLUMNS = [c for c in CORR_COLUMNS if c not in ("pearson_p_holm", "spearman_p_holm", "significant")]


def _interval(low: float, high: float) -> tuple[float, float]:
    """A Fisher-z interval as the table shows it: NaN where it has no width (|ρ| = 1 gives (ρ, ρ), which is
    no 95 % interval: the p-value of 4 items in perfect order is 0.08), as below 4 items."""
    nan = float("nan")
    return (nan, nan) if zero_width(low, high) else (low, high)


def _corr_row(x: pd.Series, y: pd.Series) -> dict[str, float | str]:
    c = correlation(x.to_numpy(float), y.to_numpy(float))
    pearson_low, pearson_high = _interval(c.pearson_low, c.pearson_high)
    spearman_low, spearman_high = _interval(c.spearman_low, c.spearman_high)
    return {
        "n": c.n,
        "pearson_r": c.pearson_r,
        "pearson_low": pearson_low,
        "pearson_high": pearson_high,
        "pearson_p": c.pearson_p,
        "pearson_p_method": c.pearson_p_method,  # exact (all pairings) for n <= 10 where enumerable
        "spearman_rho": c.spearman_rho,
        "spearman_low": spearman_low,
        "spearman_high": spearman_high,
        "spearman_p": c.spearman_p,
        "spearman_p_method": c.spearman_p_method,  # exact (all pairings) for n <= 10
    }


def _family(df: pd.DataFrame) -> pd.DataFrame:
    """Holm-adjust p-values over every row (the family of tests of one table)."""
    if df.empty:
        return df.assign(pearson_p_holm=[], spearman_p_holm=[], significant=[])
    df["pearson_p_holm"] = holm(df["pearson_p"].to_numpy(float))
    df["spearman_p_holm"] = holm(df["spearman_p"].to_numpy(float))
    df["significant"] = df["spearman_p_holm"] < 0.05
    return df


def _p_text(p: float) -> str:
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def correlation_verdict(row: pd.Series | dict, what: str = "difficulty") -> str:
    """One sentence on a Spearman result that rests on its 95 % interval and the Holm p."""
    rho, lo, hi, n = row["spearman_rho"], row["spearman_low"], row["spearman_high"], int(row["n"])
    if pd.isna(rho):
        return f"not computable (n = {n})."
    if pd.isna(lo) or pd.isna(hi) or hi - lo <= 1e-9:
        # Fisher's z gives no interval below 4 items, and a zero-width one at |ρ| = 1: nothing to bound ρ with
        why = f"n = {n} is too few for an interval" if n < 4 else "no interval at |ρ| = 1"
        ci = f"ρ = {rho:+.2f}, n = {n} ({why})"
        if row["significant"]:
            return (f"{ci}: a {'positive' if rho > 0 else 'negative'} correlation with {what} "
                    f"(Holm p {_p_text(row['spearman_p_holm'])}).")
        return f"{ci}: no significant correlation with {what} (Holm p {_p_text(row['spearman_p_holm'])})."
    ci = f"ρ = {rho:+.2f}, 95% CI [{lo:+.2f}, {hi:+.2f}], n = {n}"
    if row["significant"]:
        return f"{ci}: a {'positive' if rho > 0 else 'negative'} correlation with {what} (Holm p {_p_text(row['spearman_p_holm'])})."
    bound = max(abs(lo), abs(hi)) if not pd.isna(lo) else float("nan")
    if not pd.isna(lo) and lo <= 0 <= hi:
        return (
            f"{ci}: no significant correlation with {what}; the interval includes 0 and rules out "
            f"|ρ| > {bound:.2f}."
        )
    return f"{ci}: the 95% interval excludes 0 but the Holm-corrected p ({format_p(row['spearman_p_holm'])}) is not below 0.05."


def difficulty_correlations(features: pd.DataFrame) -> pd.DataFrame:
    """Correlation of each available feature with the difficulty label, over items."""
    rows = []
    for f, label in FEATURES.items():
        if features[f].notna().any():
            rows.append({"feature": f, "feature_label": label, **_corr_row(features[f], features["difficulty"])})
    return _family(pd.DataFrame(rows, columns=["feature", "feature_label", *_ROW_COLUMNS]))


def performance_correlations(
    responses: pd.DataFrame, features: pd.DataFrame, metric: str, feature_names: Sequence[str] | None = None
) -> pd.DataFrame:
    """Correlation of each feature with per-item correctness, per configuration × language."""
    names = [f for f in (feature_names or FEATURES) if features[f].notna().any()]
    merged = responses.loc[responses[metric].notna(), ["id", "config", "thinking", "lang", metric]].merge(
        features[["id", *names]], on="id", how="left"
    )
    rows = []
    for (config, thinking, lang), grp in merged.groupby(["config", "thinking", "lang"], sort=True):
        for f in names:
            rows.append(
                {
                    "config": config,
                    "thinking": thinking,
                    "lang": lang,
                    "feature": f,
                    "feature_label": FEATURES[f],
                    **_corr_row(grp[f], grp[metric]),
                }
            )
    cols = ["config", "thinking", "lang", "feature", "feature_label", *_ROW_COLUMNS]
    return _family(pd.DataFrame(rows, columns=cols))


def features_long(features: pd.DataFrame) -> pd.DataFrame:
    """Features in long form (id, difficulty, feature, value) for box plots; NaNs dropped."""
    long = features.melt(id_vars=["id", "difficulty"], value_vars=list(FEATURES), var_name="feature")
    long = long.dropna(subset=["value", "difficulty"])
    long["feature_label"] = long["feature"].map(FEATURES)
    long["difficulty"] = long["difficulty"].astype(int)
    return long
