"""Agreement between annotators, and between the annotators and the automatic labeller.

* Cohen's κ for two raters and Fleiss' κ for several, each with a seeded percentile-bootstrap
  95% interval over items;
* a confusion matrix and per-category precision and recall of the labeller, taking the
  annotators' majority label as the reference (items without a strict majority are counted and
  left out).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.stats import cohen_kappa, percentile_interval, stable_seed


@dataclass(frozen=True)
class Kappa:
    """A κ with its bootstrap 95% interval over ``n`` items."""

    kappa: float
    low: float
    high: float
    n: int


def fleiss_kappa(ratings: np.ndarray | list[list[Any]]) -> float:
    """Fleiss' κ for an ``items × raters`` array of labels (every item rated by every rater).

    κ = (P̄ − P̄e) / (1 − P̄e) with P̄ the mean per-item agreement and P̄e the sum of squared
    overall category shares. NaN for fewer than 2 raters, no items, or one label used by everyone
    (chance agreement 1: nothing beyond chance to measure, as :func:`cresowlve_core.stats.cohen_kappa`).
    """
    arr = np.asarray(ratings, dtype=object)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        return float("nan")
    cats = sorted({v for v in arr.ravel().tolist()}, key=str)
    index = {c: i for i, c in enumerate(cats)}
    counts = np.zeros((arr.shape[0], len(cats)))
    for i, row in enumerate(arr.tolist()):
        for v in row:
            counts[i, index[v]] += 1
    return _fleiss_from_counts(counts)


def _fleiss_from_counts(counts: np.ndarray) -> float:
    n_items, _ = counts.shape
    m = counts.sum(axis=1)[0]
    p_i = ((counts * counts).sum(axis=1) - m) / (m * (m - 1))
    p_bar = p_i.mean()
    share = counts.sum(axis=0) / (n_items * m)
    pe = float((share * share).sum())
    if pe >= 1.0:
        return float("nan")
    return float((p_bar - pe) / (1.0 - pe))


def _boot(stat: Any, arrays: list[np.ndarray], n_boot: int, seed: int, key: str) -> Kappa:
    n = len(arrays[0])
    if n == 0:
        return Kappa(float("nan"), float("nan"), float("nan"), 0)
    point = stat(*arrays)
    gen = stable_seed(seed, "kappa", key)
    reps = np.empty(n_boot)
    for b in range(n_boot):
        idx = gen.integers(0, n, size=n)
        reps[b] = stat(*(a[idx] for a in arrays))
    low, high = percentile_interval(reps)
    return Kappa(float(point), low, high, n)


def cohen_kappa_ci(a: list[Any], b: list[Any], *, n_boot: int = 1000, seed: int = 0) -> Kappa:
    """Cohen's κ of two raters with a percentile-bootstrap 95% interval over items."""
    if len(a) != len(b):
        raise ValueError("raters must label the same items")
    return _boot(cohen_kappa, [np.asarray(a, dtype=object), np.asarray(b, dtype=object)], n_boot, seed,
                 f"cohen{len(a)}")


def fleiss_kappa_ci(ratings: list[list[Any]], *, n_boot: int = 1000, seed: int = 0) -> Kappa:
    """Fleiss' κ with a percentile-bootstrap 95% interval over items."""
    arr = np.asarray(ratings, dtype=object)
    if arr.ndim != 2:
        return Kappa(float("nan"), float("nan"), float("nan"), 0)
    return _boot(fleiss_kappa, [arr], n_boot, seed, f"fleiss{len(arr)}")


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
        pairs.append({"a": x, "b": y, "n": k.n, "kappa": k.kappa, "low": k.low, "high": k.high})
    full = wide.dropna()
    fleiss = (fleiss_kappa_ci(full.to_numpy().tolist(), n_boot=n_boot, seed=seed)
              if len(annotators) >= 2 and len(full) else Kappa(float("nan"), float("nan"), float("nan"), 0))
    return {"annotators": annotators, "pairs": pd.DataFrame(pairs, columns=["a", "b", "n", "kappa", "low", "high"]),
            "fleiss": fleiss, "n_items_all_raters": int(len(full))}


def labeller_agreement(ann: pd.DataFrame, labels: dict[str, str | None], *, n_boot: int = 1000,
                       seed: int = 0) -> dict[str, Any]:
    """The labeller against the annotators' majority label (by item ``key``).

    Returns Cohen κ with CI, the confusion matrix, per-category precision/recall, and the counts
    of items left out (no majority; unlabelled by the labeller).
    """
    ref, pred = [], []
    no_majority = unlabelled = 0
    for key, part in ann.groupby("key"):
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
            "n": len(ref), "n_no_majority": no_majority, "n_unlabelled": unlabelled}
