"""Agreement between annotators, and between the annotators and the automatic labeller.

* Cohen's κ for two raters and Fleiss' κ for several (the project's one Fleiss' κ,
  :func:`cresowlve_core.stats.fleiss_kappa`, statsmodels), each with a seeded
  percentile-bootstrap 95% interval over items. Resamples where κ is undefined (one label only)
  are counted (``n_undefined`` of ``n_boot``); an undefined κ, a zero-width interval or a
  majority of undefined resamples gives a NaN interval with a ``note`` saying why;
* a confusion matrix and per-category precision and recall of the labeller, taking the
  annotators' majority label as the reference (items without a strict majority are counted and
  left out).

One label per annotator and item: the latest save wins, so a label saved twice counts once.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.failures import InputError
from cresowlve_core.stats import (
    BootstrapInterval,
    bootstrap_statistic,
    cohen_kappa,
    fleiss_kappa,
    fleiss_kappa_ci,
    rating_table,
    stable_seed,
)

Kappa = BootstrapInterval  # κ in ``value``, its interval, n items, and how many resamples were undefined

__all__ = ["Kappa", "annotator_agreement", "cohen_kappa_ci", "confusion", "fleiss_kappa", "fleiss_kappa_ci",
           "format_interval", "labeller_agreement", "majority", "precision_recall", "rating_table"]

ONE_RATER = "one rater used a single category: κ = 0 by construction, no interval"
NO_KAPPA = BootstrapInterval(float("nan"), float("nan"), float("nan"), 0, 0, 0, "no items")


def cohen_kappa_ci(a: list[Any], b: list[Any], *, n_boot: int = 1000, seed: int = 0) -> BootstrapInterval:
    """Cohen's κ of two raters with a seeded percentile-bootstrap 95% interval over items.

    When one rater used a single category (and the other more), κ = 0 by construction: it is
    returned with no interval and a note saying so, not as a measured chance-level agreement.

    Example: two raters who agree on 9 × "x" and 1 × "y" have κ = 1, but about 0.9¹⁰ ≈ 35% of
    the resamples miss the "y" item and κ is undefined there; every defined resample gives 1.
    The result is κ = 1 with no interval and a note counting the undefined resamples, not
    1.0 [1.0, 1.0].
    """
    if len(a) != len(b):
        raise InputError("raters must label the same items")
    n = len(a)
    if n == 0:
        return NO_KAPPA
    pairs = np.empty((n, 2), dtype=object)
    pairs[:, 0], pairs[:, 1] = a, b
    point = cohen_kappa(a, b)
    if not np.isnan(point) and min(len(set(a)), len(set(b))) == 1:
        # one rater used a single category: observed and chance agreement are equal, κ = 0 whatever the other did
        return BootstrapInterval(point, float("nan"), float("nan"), n, 0, 0, ONE_RATER)
    return bootstrap_statistic(lambda u: cohen_kappa(u[:, 0], u[:, 1]), pairs, n_boot=n_boot,
                               rng=stable_seed(seed, "kappa", f"cohen{n}"),
                               undefined_reason="undefined: both raters used one identical label")


def format_interval(iv: BootstrapInterval, digits: int = 3) -> str:
    """``"0.412 [0.210, 0.600] (n = 40)"``; ``–`` for a missing number; the note, if any, after it."""
    def f(v: float) -> str:
        return "–" if v is None or np.isnan(v) else f"{v:.{digits}f}"

    text = f"{f(iv.value)} [{f(iv.low)}, {f(iv.high)}] (n = {iv.n})" if not np.isnan(iv.low) else \
        f"{f(iv.value)} (no interval; n = {iv.n})"
    return text + (f" — {iv.note}" if iv.note else "")


def confusion(reference: list[str], predicted: list[str], categories: list[str] | None = None) -> pd.DataFrame:
    """Counts with the reference (humans) in rows and the prediction (labeller) in columns."""
    cats = categories or sorted(set(reference) | set(predicted))
    table = pd.DataFrame(0, index=pd.Index(cats, name="reference"), columns=pd.Index(cats, name="labeller"))
    for r, p in zip(reference, predicted):
        if r not in table.index:
            table.loc[r] = 0
        if p not in table.columns:
            table[p] = 0
        table.loc[r, p] += 1
    return table


def precision_recall(reference: list[str], predicted: list[str]) -> pd.DataFrame:
    """Per category: ``support`` (reference count), ``predicted`` count, precision and recall
    (NaN where undefined)."""
    cats = sorted(set(reference) | set(predicted))
    rows = []
    for c in cats:
        tp = sum(r == c and p == c for r, p in zip(reference, predicted))
        n_pred = sum(p == c for p in predicted)
        n_ref = sum(r == c for r in reference)
        rows.append({"category": c, "support": n_ref, "predicted": n_pred, "tp": tp,
                     "precision": tp / n_pred if n_pred else float("nan"),
                     "recall": tp / n_ref if n_ref else float("nan")})
    return pd.DataFrame(rows, columns=["category", "support", "predicted", "tp", "precision", "recall"])


def majority(labels: list[str]) -> str | None:
    """The label more than half of the raters gave, else None."""
    if not labels:
        return None
    label, k = Counter(labels).most_common(1)[0]
    return label if k * 2 > len(labels) else None


def annotator_agreement(ann: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Agreement among annotators. ``ann`` has columns ``key``, ``annotator``, ``category``
    (latest label per annotator and item). Returns pairwise Cohen κ and Fleiss κ over the items
    every annotator labelled."""
    wide = ann.pivot_table(index="key", columns="annotator", values="category", aggfunc="last")
    annotators = list(wide.columns)
    pairs = []
    for x, y in itertools.combinations(annotators, 2):
        both = wide[[x, y]].dropna()
        k = cohen_kappa_ci(both[x].tolist(), both[y].tolist(), n_boot=n_boot, seed=seed)
        pairs.append({"a": x, "b": y, "n": k.n, "kappa": k.value, "low": k.low, "high": k.high,
                      "n_undefined": k.n_undefined, "n_boot": k.n_boot, "note": k.note})
    full = wide.dropna()
    fleiss = (fleiss_kappa_ci(full.to_numpy().tolist(), n_boot=n_boot, seed=seed)
              if len(annotators) >= 2 and len(full) else NO_KAPPA)
    return {"annotators": annotators,
            "pairs": pd.DataFrame(pairs, columns=["a", "b", "n", "kappa", "low", "high", "n_undefined", "n_boot", "note"]),
            "fleiss": fleiss, "n_items_all_raters": int(len(full))}


def labeller_agreement(ann: pd.DataFrame, labels: dict[str, str | None], *, n_boot: int = 1000,
                       seed: int = 0) -> dict[str, Any]:
    """The labeller against the annotators' majority label (by item ``key``).

    Returns Cohen κ with CI, the confusion matrix, per-category precision/recall, how many of the
    ``n`` items the labeller agrees on (``n_agree``), and the counts of items left out (no majority; unlabelled by the labeller). Each annotator counts once per
    item (their latest label), however often they saved it.
    """
    ref, pred = [], []
    no_majority = unlabelled = 0
    latest = ann.drop_duplicates(["key", "annotator"], keep="last") if "annotator" in ann else ann
    for key, part in latest.groupby("key"):
        m = majority(part["category"].tolist())
        if m is None:
            no_majority += 1
            continue
        lab = labels.get(str(key))
        if lab is None:
            unlabelled += 1
            continue
        ref.append(m)
        pred.append(lab)
    k = cohen_kappa_ci(ref, pred, n_boot=n_boot, seed=seed)
    return {"kappa": k, "confusion": confusion(ref, pred), "precision_recall": precision_recall(ref, pred),
            "n": len(ref), "n_agree": sum(r == p for r, p in zip(ref, pred)), "n_no_majority": no_majority,
            "n_unlabelled": unlabelled}
