"""The error distribution per model: shares per answer with 95% intervals, and χ² tests.

**Unit: the answer** (configuration × language × item; :data:`UNIT`). Shares are over the
*labelled* wrong answers of a group (the seven categories plus every ``other: …`` label, pooled as
``other``); unlabelled answers and labeller errors are counted in their own columns, never folded
into a category. Pooling a model's languages (``by="config"``), an item's En and Ru answers are
two answers: ``n`` counts answers, ``n_items`` items. The same answer loaded twice counts once.

Intervals: per configuration × language (``by="group"``) each item has one answer, so Wilson's
interval on the answers holds. Pooled over languages, an item's two answers are not independent:
the interval is Wilson's on Kish's effective sample size ``n / deff``, with the design effect
``deff`` from the item-clustered (ratio-estimator) variance, at least 1 and at most the largest
number of answers per item; with a share of 0 or 1 (no variance to estimate) ``n_eff`` is the
number of items.

Tests between two configurations: the Pearson χ² statistic of their configuration × category
table, with the p-value from a seeded permutation of the configuration labels **within each
item** (answers of one item are exchanged only among themselves, so shared items are accounted
for; an item only one side answered wrong carries no information about the configuration and is
never moved). ``n_shared_items`` says how many items both sides have. Holm-adjusted across every
pair tested (``p_holm``). Per configuration and language (``by="group"``) only groups in the same
language are compared; a model's En vs Ru is listed descriptively, not tested.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.error_analysis.taxonomy import BY_SLUG, OTHER_PREFIX, SLUGS, category_of
from cresowlve_core.runtime.outcomes import record_withheld
from cresowlve_core.stats import holm, wilson_interval

OTHER = "other"
UNIT = "answer (configuration × language × item)"
N_PERM = 2000


def bucket(label: str | None) -> str | None:
    """The distribution bucket of a label: a slug, ``other``, or None for unlabelled."""
    if label is None:
        return None
    return OTHER if label.startswith(OTHER_PREFIX) or label not in BY_SLUG else label


def stored_label(label: object) -> str | None:
    """A label record's ``label`` read by the labeller's own rule (:func:`~.label.parse_label`): a slug or
    ``other: …`` as stored; else the category it names (``Overthinking``, ``3``: a hand edit); else
    ``other: <text>`` (a slug this taxonomy does not have), so it is counted and listed as other, with its text.
    None when there is no label."""
    text = "" if label is None else str(label).strip()
    if not text or text in BY_SLUG or text.startswith(OTHER_PREFIX):
        return text or None
    return category_of(text) or OTHER_PREFIX + text[:120]


def label_frame(units: list[Any], records: dict[Any, dict[str, Any]]) -> pd.DataFrame:
    """One row per wrong answer: its configuration, language, id, basis and label state.

    ``state`` is ``labelled``, ``unlabelled`` (no category line), ``withheld`` (the labeller refused
    or its provider's filter stopped it: nothing to read), ``error`` (the call failed) or ``not_run``
    (no record yet, e.g. a stopped run).
    """
    rows = []
    for u in units:
        rec = records.get(u.key)
        if rec is None:
            state, label = "not_run", None
        elif rec.get("status") != "ok":
            state, label = "error", None
        elif record_withheld(rec):
            state, label = "withheld", None
        else:
            label = stored_label(rec.get("label"))
            state = "labelled" if label else "unlabelled"
        rows.append({"key": u.key, "config": u.config, "group": f"{u.config} · {u.lang}", "model": u.model,
                     "lang": u.lang, "id": u.id,
                     "basis": u.basis, "state": state, "label": label, "bucket": bucket(label),
                     "rationale": (rec or {}).get("rationale"), "question": u.question, "answer": u.answer,
                     "prediction": u.prediction, "reasoning": u.reasoning})
    return pd.DataFrame(rows, columns=["key", "config", "group", "model", "lang", "id", "basis", "state", "label", "bucket",
                                       "rationale", "question", "answer", "prediction", "reasoning"])


def distribution(labels: pd.DataFrame, by: str = "config") -> pd.DataFrame:
    """Long table: one row per ``by`` value × bucket with ``k``, ``n`` (labelled answers), ``p``,
    ``low``/``high`` (95%; see the module text), ``n_eff``, the group's ``n_items`` (distinct items
    labelled), ``n_unlabelled``, ``n_withheld``, ``n_error``, ``n_not_run``, its ``config`` and ``lang`` (``mixed``
    when pooled) and the ``unit``."""
    cols = [*dict.fromkeys([by, "config", "lang"]), "category", "k", "n", "p", "low", "high", "n_eff", "n_items",
            "n_unlabelled", "n_withheld", "n_error", "n_not_run", "unit"]
    if labels.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for group, part in labels.groupby(by, sort=True):
        labelled = _answers(part[part["state"] == "labelled"])
        n = len(labelled)
        item = labelled["id"].astype(str).to_numpy() if "id" in labelled else np.arange(n).astype(str)
        n_items = int(len(set(item)))
        config = _one(part, "config", group)
        lang = _one(part, "lang", "mixed")
        for cat in (*SLUGS, OTHER):
            hit = (labelled["bucket"] == cat).to_numpy(dtype=float)
            k = int(hit.sum())
            n_eff = _effective_n(hit, item)
            low, high = wilson_interval(np.asarray(k / n * n_eff), np.asarray(n_eff)) if n else (float("nan"), float("nan"))
            out.append({"config": config, "lang": lang, by: group, "category": cat, "k": k, "n": n,
                        "p": k / n if n else float("nan"), "low": low, "high": high, "n_eff": n_eff, "n_items": n_items,
                        "n_unlabelled": int((part["state"] == "unlabelled").sum()),
                        "n_withheld": int((part["state"] == "withheld").sum()),
                        "n_error": int((part["state"] == "error").sum()),
                        "n_not_run": int((part["state"] == "not_run").sum()), "unit": UNIT})
    return pd.DataFrame(out, columns=cols)


def _answers(labelled: pd.DataFrame) -> pd.DataFrame:
    """One row per answer: the same configuration × language × item loaded twice counts once."""
    keys = [c for c in ("config", "lang", "id") if c in labelled]
    return labelled.drop_duplicates(keys, keep="last") if "id" in keys else labelled


def _effective_n(hit: np.ndarray, item: np.ndarray) -> float:
    """Kish's effective sample size of a share over answers clustered by ``item``."""
    n = hit.size
    if n == 0:
        return 0.0
    _, cluster, sizes = np.unique(item, return_inverse=True, return_counts=True)
    m = sizes.size
    if sizes.max() == 1:
        return float(n)  # one answer per item: independent answers
    p = hit.mean()
    if p in (0.0, 1.0) or m < 2:
        return float(m)
    k_i = np.bincount(cluster, weights=hit, minlength=m)
    var_cluster = m / (m - 1) * float(((k_i - p * sizes) ** 2).sum()) / n**2
    deff = float(np.clip(var_cluster / (p * (1 - p) / n), 1.0, sizes.max()))
    return n / deff


def _one(part: pd.DataFrame, col: str, default: Any) -> Any:
    """The column's single value in ``part``, ``"mixed"`` if several, ``default`` if absent."""
    if col not in part:
        return default
    vals = part[col].dropna().unique().tolist()
    return vals[0] if len(vals) == 1 else "mixed"


def chi2_between(labels: pd.DataFrame, a: str, b: str, by: str = "config", *, n_perm: int = N_PERM,
                 seed: int = 0) -> dict[str, Any]:
    """Do groups ``a`` and ``b`` (values of ``by`` in the answer-level ``labels``) have the same
    category distribution? Pearson's χ² statistic, p from a seeded permutation of the group labels
    within each item (module text). Categories with no errors in either are dropped;
    ``min_expected`` is reported."""
    lab = _answers(labels[(labels["state"] == "labelled") & labels[by].isin([a, b])])
    # one answer per row in a fixed order (item, group, language), not the order the runs' calls finished
    # in: the seeded permutations are drawn per row, so the p-value depends on it
    lab = lab.sort_values(list(dict.fromkeys(c for c in ("id", by, "lang") if c in lab)), kind="stable")
    side = (lab[by] == b).to_numpy(dtype=int)
    cats, cat = np.unique(lab["bucket"].astype(str).to_numpy(), return_inverse=True)
    items = lab["id"].astype(str).to_numpy() if "id" in lab else np.arange(len(lab)).astype(str)
    shared = set(items[side == 0]) & set(items[side == 1])
    res: dict[str, Any] = {"a": a, "b": b, "n_a": int((side == 0).sum()), "n_b": int((side == 1).sum()),
                           "categories": int(cats.size), "n_shared_items": len(shared)}
    if cats.size < 2 or res["n_a"] == 0 or res["n_b"] == 0:
        return {**res, "chi2": float("nan"), "dof": 0, "p": float("nan"), "min_expected": float("nan"),
                "warning": "too few labelled errors or categories for a test"}
    onehot = np.eye(cats.size)[cat]
    observed, expected = _chi2(side[None, :] @ onehot, onehot.sum(axis=0), res["n_b"])
    exceed = 0
    if shared:
        item_code = np.unique(items, return_inverse=True)[1].astype(float)
        base = side[np.argsort(item_code, kind="stable")]
        rng = np.random.default_rng(seed)
        for start in range(0, n_perm, 250):  # chunks bound the memory
            reps = min(250, n_perm - start)
            # sorting by item plus a uniform key shuffles the answers within each item only
            order = np.argsort(item_code[None, :] + rng.random((reps, side.size)), axis=1)
            perm = np.empty_like(order)
            np.put_along_axis(perm, order, np.broadcast_to(base, order.shape), axis=1)
            exceed += int((_chi2(perm @ onehot, onehot.sum(axis=0), res["n_b"])[0] >= observed[0] - 1e-9).sum())
    p = (1.0 + exceed) / (1.0 + n_perm) if shared else 1.0
    return {**res, "chi2": float(observed[0]), "dof": int(cats.size - 1), "p": float(p),
            "min_expected": float(np.min(expected)),
            "warning": "" if shared else "no item shared by both sides: nothing to compare within an item"}


def _chi2(b_counts: np.ndarray, totals: np.ndarray, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Pearson's χ² of 2 × categories tables given side ``b``'s counts per category (reps ×
    categories), the category totals and ``n_b``; and the expected counts (same for every rep)."""
    n = totals.sum()
    a_counts = totals[None, :] - b_counts
    exp_b, exp_a = totals * n_b / n, totals * (n - n_b) / n
    stat = ((b_counts - exp_b) ** 2 / exp_b).sum(axis=1) + ((a_counts - exp_a) ** 2 / exp_a).sum(axis=1)
    return stat, np.vstack([exp_a, exp_b])


CHI2_COLUMNS = ["a", "b", "n_a", "n_b", "n_shared_items", "categories", "chi2", "dof", "p", "p_holm", "min_expected",
                "test", "warning"]
PAIRED_LANGS = "descriptive: the same model's En and Ru answer the same items (not independent samples); not tested"
CLUSTERED_TEST = "χ² statistic, p by permuting configurations within each item"


def chi2_all_pairs(labels: pd.DataFrame, by: str = "config", *, n_perm: int = N_PERM, seed: int = 0) -> pd.DataFrame:
    """:func:`chi2_between` for every pair of groups of the answer-level ``labels``, with
    Holm-adjusted p (``p_holm``) across the pairs tested.

    With ``by="group"``: groups of different configurations are tested only within one language;
    the same configuration's two languages are listed with ``test`` = descriptive and no p; pairs
    differing in both are left out (model and language confounded)."""
    lab = labels[labels["state"] == "labelled"] if not labels.empty else labels
    groups = sorted(lab[by].unique().tolist()) if not lab.empty else []
    meta = lab.drop_duplicates(by).set_index(by) if not lab.empty else pd.DataFrame()
    rows = []
    for a, b in itertools.combinations(groups, 2):
        same_config = "config" in meta and meta.loc[a, "config"] == meta.loc[b, "config"] and by != "config"
        same_lang = "lang" not in meta or meta.loc[a, "lang"] == meta.loc[b, "lang"] or by == "config"
        if same_config:
            res = chi2_between(lab, a, b, by, n_perm=0)
            rows.append({**res, "chi2": float("nan"), "dof": 0, "p": float("nan"), "min_expected": float("nan"),
                         "test": PAIRED_LANGS, "warning": ""})
        elif same_lang:
            rows.append({**chi2_between(lab, a, b, by, n_perm=n_perm, seed=seed), "test": CLUSTERED_TEST})
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
        yOffset=alt.YOffset(f"{by}:N"))
    bars = base.mark_bar().encode(
        x=alt.X("p:Q", title="Share of labelled errors", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        color=alt.Color(f"{by}:N", title="Configuration", scale=alt.Scale(scheme="category10")),
        tooltip=[by, "name", "k", "n", alt.Tooltip("p:Q", format=".1%"), alt.Tooltip("low:Q", format=".1%"),
                 alt.Tooltip("high:Q", format=".1%")])
    # the intervals in black over every bar (a colour encoding on them would win over the mark's colour)
    rules = base.mark_rule(color="black", strokeWidth=1.5).encode(x="low:Q", x2="high:Q")
    return (bars + rules).properties(width=460, title="Error categories (Wilson 95% CI)")
