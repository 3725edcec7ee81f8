"""The error distribution per model: proportions with Wilson 95% intervals, and χ² tests.

Proportions are over the *labelled* errors of a configuration (the seven categories plus every
``other: …`` label, pooled as ``other``); unlabelled answers and labeller errors are counted in
their own columns, never folded into a category.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from cresowlve_core.errors.taxonomy import BY_SLUG, OTHER_PREFIX, SLUGS
from cresowlve_core.stats import wilson_interval

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
    ``low``/``high``, and the group's ``n_unlabelled``, ``n_error``, ``n_not_run``."""
    cols = [by, "category", "k", "n", "p", "low", "high", "n_unlabelled", "n_error", "n_not_run"]
    if labels.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for group, part in labels.groupby(by, sort=True):
        labelled = part[part["state"] == "labelled"]
        n = len(labelled)
        counts = labelled["bucket"].value_counts()
        for cat in (*SLUGS, OTHER):
            k = int(counts.get(cat, 0))
            low, high = wilson_interval(k, n) if n else (float("nan"), float("nan"))
            out.append({by: group, "category": cat, "k": k, "n": n, "p": k / n if n else float("nan"),
                        "low": low, "high": high, "n_unlabelled": int((part["state"] == "unlabelled").sum()),
                        "n_error": int((part["state"] == "error").sum()),
                        "n_not_run": int((part["state"] == "not_run").sum())})
    return pd.DataFrame(out, columns=cols)


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


def chi2_all_pairs(dist: pd.DataFrame, by: str = "config") -> pd.DataFrame:
    """:func:`chi2_between` for every pair of configurations."""
    groups = sorted(dist[by].unique().tolist()) if not dist.empty else []
    rows = [chi2_between(dist, a, b, by) for a, b in itertools.combinations(groups, 2)]
    return pd.DataFrame(rows, columns=["a", "b", "n_a", "n_b", "categories", "chi2", "dof", "p", "min_expected",
                                       "warning"])


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
