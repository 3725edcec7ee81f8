"""The error distribution per model: proportions with Wilson 95% intervals, and χ² tests.

Proportions are over the *labelled* errors of a configuration (the seven categories plus every
``other: …`` label, pooled as ``other``); unlabelled answers and labeller errors are counted in
their own columns, never folded into a category. A category counts once per item within a
group: pooling a model's languages (``by="config"``), an item whose En and Ru answers got the
same label adds 1, not 2 (``n`` counts distinct item × category pairs, ``n_items`` the items).

χ² tests compare two *configurations* (independent answers) and are Holm-adjusted across every
pair tested (``p_holm``). Per configuration and language (``by="group"``) only groups in the same
language are tested; a model's En vs Ru answer the same items, so they are not independent
samples: that pair is listed as descriptive, not tested.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from cresowlve_core.errors.taxonomy import BY_SLUG, OTHER_PREFIX, SLUGS
from cresowlve_core.stats import holm, wilson_interval

OTHER = "other"


def bucket(label: str | None) -> str | None:
    """The distribution bucket of a label: a slug, ``other``, or None for unlabelled."""
    if label is None:
        return None
    return OTHER if label.startswith(OTHER_PREFIX) or label not in BY_SLUG else label


def label_frame(units: list[Any], records: dict[Any, dict[str, Any]]) -> pd.DataFrame:
    """One row per wrong answer: its configuration, language, id, basis and label state.

    ``state`` is ``labelled``, ``unlabelled`` (no category line), ``error`` (the call failed) or
    ``not_run`` (no record yet, e.g. a stopped run).
    """
    rows = []
    for u in units:
        rec = records.get(u.key)
        if rec is None:
            state, label = "not_run", None
        elif rec.get("status") != "ok":
            state, label = "error", None
        else:
            label = rec.get("label")
            state = "labelled" if label else "unlabelled"
        rows.append({"key": u.key, "config": u.config, "group": f"{u.config} · {u.lang}", "model": u.model,
                     "lang": u.lang, "id": u.id,
                     "basis": u.basis, "state": state, "label": label, "bucket": bucket(label),
                     "rationale": (rec or {}).get("rationale"), "question": u.question, "answer": u.answer,
                     "prediction": u.prediction, "reasoning": u.reasoning})
    return pd.DataFrame(rows, columns=["key", "config", "group", "model", "lang", "id", "basis", "state", "label", "bucket",
                                       "rationale", "question", "answer", "prediction", "reasoning"])


def distribution(labels: pd.DataFrame, by: str = "config") -> pd.DataFrame:
    """Long table: one row per ``by`` value × bucket with ``k``, ``n`` (labelled), ``p``, Wilson
    ``low``/``high``, the group's ``n_items`` (distinct items labelled), ``n_unlabelled``,
    ``n_error``, ``n_not_run``, and its ``config`` and ``lang`` (``mixed`` when pooled).

    A category repeated within one item of a group (its En and Ru answers, or a run loaded twice)
    counts once."""
    cols = [*dict.fromkeys([by, "config", "lang"]), "category", "k", "n", "p", "low", "high", "n_items", "n_unlabelled", "n_error",
            "n_not_run"]
    if labels.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for group, part in labels.groupby(by, sort=True):
        labelled = part[part["state"] == "labelled"]
        if "id" in labelled:
            labelled = labelled.drop_duplicates(["id", "bucket"])
        n = len(labelled)
        n_items = int(labelled["id"].nunique()) if "id" in labelled else n
        config = _one(part, "config", group)
        lang = _one(part, "lang", "mixed")
        counts = labelled["bucket"].value_counts()
        for cat in (*SLUGS, OTHER):
            k = int(counts.get(cat, 0))
            low, high = wilson_interval(k, n) if n else (float("nan"), float("nan"))
            out.append({"config": config, "lang": lang, by: group, "category": cat, "k": k, "n": n,
                        "p": k / n if n else float("nan"), "low": low, "high": high, "n_items": n_items,
                        "n_unlabelled": int((part["state"] == "unlabelled").sum()),
                        "n_error": int((part["state"] == "error").sum()),
                        "n_not_run": int((part["state"] == "not_run").sum())})
    return pd.DataFrame(out, columns=cols)


def _one(part: pd.DataFrame, col: str, default: Any) -> Any:
    """The column's single value in ``part``, ``"mixed"`` if several, ``default`` if absent."""
    if col not in part:
        return default
    vals = part[col].dropna().unique().tolist()
    return vals[0] if len(vals) == 1 else "mixed"


def chi2_between(dist: pd.DataFrame, a: str, b: str, by: str = "config") -> dict[str, Any]:
    """χ² test of independence: do configurations ``a`` and ``b`` have the same distribution?

    Categories with no errors in either are dropped. ``min_expected`` is reported: below 5 the
    χ² approximation is rough and ``warning`` says so.
    """
    ta = dist[dist[by] == a].set_index("category")["k"]
    tb = dist[dist[by] == b].set_index("category")["k"]
    table = pd.DataFrame({a: ta, b: tb}).fillna(0).astype(int)
    table = table[(table.sum(axis=1) > 0)]
    res: dict[str, Any] = {"a": a, "b": b, "n_a": int(table[a].sum()) if a in table else 0,
                           "n_b": int(table[b].sum()) if b in table else 0, "categories": int(len(table))}
    if len(table) < 2 or res["n_a"] == 0 or res["n_b"] == 0:
        return {**res, "chi2": float("nan"), "dof": 0, "p": float("nan"), "min_expected": float("nan"),
                "warning": "too few labelled errors or categories for a test"}
    chi2, p, dof, expected = sps.chi2_contingency(table.to_numpy().T, correction=False)
    min_exp = float(np.min(expected))
    return {**res, "chi2": float(chi2), "dof": int(dof), "p": float(p), "min_expected": min_exp,
            "warning": "expected counts below 5: the χ² approximation is rough" if min_exp < 5 else ""}


CHI2_COLUMNS = ["a", "b", "n_a", "n_b", "categories", "chi2", "dof", "p", "p_holm", "min_expected", "test", "warning"]
PAIRED_LANGS = "descriptive: the same model's En and Ru answer the same items (not independent samples); not tested"


def chi2_all_pairs(dist: pd.DataFrame, by: str = "config") -> pd.DataFrame:
    """:func:`chi2_between` for every pair of configurations, with Holm-adjusted p (``p_holm``)
    across the pairs tested.

    With ``config``/``lang`` columns (``by="group"``): groups of different configurations are
    tested only within one language; the same configuration's two languages are listed with
    ``test`` = descriptive and no p; pairs differing in both are left out (model and language
    confounded)."""
    groups = sorted(dist[by].unique().tolist()) if not dist.empty else []
    meta = dist.drop_duplicates(by).set_index(by) if not dist.empty else pd.DataFrame()
    rows = []
    for a, b in itertools.combinations(groups, 2):
        same_config = "config" in meta and meta.loc[a, "config"] == meta.loc[b, "config"] and by != "config"
        same_lang = "lang" not in meta or meta.loc[a, "lang"] == meta.loc[b, "lang"] or by == "config"
        res = chi2_between(dist, a, b, by)
        if same_config:
            rows.append({**res, "chi2": float("nan"), "dof": 0, "p": float("nan"), "min_expected": float("nan"),
                         "test": PAIRED_LANGS, "warning": ""})
        elif same_lang:
            rows.append({**res, "test": "χ² (independent configurations)"})
    out = pd.DataFrame(rows, columns=[c for c in CHI2_COLUMNS if c != "p_holm"])
    out.insert(out.columns.get_loc("p") + 1, "p_holm", holm(out["p"].to_numpy(dtype=float)) if len(out) else [])
    return out


def distribution_chart(dist: pd.DataFrame, by: str = "config") -> Any:
    """Bars per category and configuration with visible Wilson 95% error bars (altair)."""
    import altair as alt

    d = dist.dropna(subset=["p"]).copy()
    d["name"] = d["category"].map(lambda c: BY_SLUG[c].name if c in BY_SLUG else "Other")
    base = alt.Chart(d).encode(
        y=alt.Y("name:N", title=None, sort=[BY_SLUG[s].name for s in SLUGS] + ["Other"]),
        yOffset=alt.YOffset(f"{by}:N"), color=alt.Color(f"{by}:N", title="configuration"))
    bars = base.mark_bar().encode(
        x=alt.X("p:Q", title="share of labelled errors", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        tooltip=[by, "name", "k", "n", alt.Tooltip("p:Q", format=".1%"), alt.Tooltip("low:Q", format=".1%"),
                 alt.Tooltip("high:Q", format=".1%")])
    rules = base.mark_rule(color="black").encode(x="low:Q", x2="high:Q")
    return (bars + rules).properties(width=460, title="Error categories (Wilson 95% CI)")
