"""Inter-annotator agreement (paper App. B): Fleiss' kappa and Gwet's AC1.

In both :func:`fleiss_kappa` and :func:`gwet_ac1`, ``ratings[i][j]`` is rater ``j``'s label for
item ``i``: any hashable, every item rated by every rater (a ragged table is an error).

- Fleiss' kappa is statsmodels' ``fleiss_kappa`` (method ``"fleiss"``) on the items x categories
  count table.
- Gwet's AC1 (Gwet 2008, 2014) for several raters: ``pa`` = mean over items of
  ``sum_k r_ik (r_ik - 1) / (r (r - 1))``, ``pi_k`` = mean over items of ``r_ik / r``,
  ``pe = sum_k pi_k (1 - pi_k) / (q - 1)``, ``AC1 = (pa - pe) / (1 - pe)``, with ``q`` the number of
  categories (those observed, or the ``categories`` given). Tested against irrCAC's values.

Both return ``nan`` where the statistic is undefined (e.g. kappa when every rating is the same
category). :func:`multilabel_agreement` scores multi-label fields label by label (present /
absent) and weights the per-label AC1 by support, as the paper does.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np


def _table(ratings: Sequence[Sequence[Hashable]], categories: Iterable[Hashable] | None = None) -> np.ndarray:
    """Items x categories counts; checks every item has the same number (>= 2) of ratings."""
    rows = [list(r) for r in ratings]
    if not rows:
        raise ValueError("no items to rate")
    n_raters = len(rows[0])
    if n_raters < 2:
        raise ValueError("agreement needs at least two raters per item")
    bad = [i for i, r in enumerate(rows) if len(r) != n_raters]
    if bad:
        raise ValueError(f"every item must be rated by all {n_raters} raters; item(s) {bad[:5]} are not")
    cats = list(dict.fromkeys(categories)) if categories is not None else []
    for r in rows:
        for x in r:
            if x not in cats:
                if categories is not None:
                    raise ValueError(f"label {x!r} is not among the categories {cats}")
                cats.append(x)
    index = {c: k for k, c in enumerate(cats)}
    table = np.zeros((len(rows), len(cats)), dtype=float)
    for i, r in enumerate(rows):
        for x in r:
            table[i, index[x]] += 1
    return table


def fleiss_kappa(ratings: Sequence[Sequence[Hashable]]) -> float:
    """Fleiss' kappa of a ratings table (statsmodels' implementation); ``nan`` if undefined."""
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    table = _table(ratings)
    if table.shape[1] < 2:
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(sm_fleiss(table, method="fleiss"))


def gwet_ac1(ratings: Sequence[Sequence[Hashable]], categories: Iterable[Hashable] | None = None) -> float:
    """Gwet's AC1 of a ratings table. Give ``categories`` when the label set is fixed (for
    present/absent scoring: ``(True, False)``); ``nan`` if fewer than two categories."""
    table = _table(ratings, categories)
    n_items, q = table.shape
    if q < 2:
        return math.nan
    r = table.sum(axis=1)
    pa = float(np.mean((table * (table - 1)).sum(axis=1) / (r * (r - 1))))
    pi = (table / r[:, None]).mean(axis=0)
    pe = float((pi * (1 - pi)).sum() / (q - 1))
    if pe >= 1:
        return math.nan
    return (pa - pe) / (1 - pe)


def raw_agreement(ratings: Sequence[Sequence[Hashable]]) -> float:
    """Share of items on which every rater gave the same label."""
    rows = [list(r) for r in ratings]
    if not rows:
        raise ValueError("no items to rate")
    return sum(len(set(r)) == 1 for r in rows) / len(rows)


def multilabel_agreement(label_sets: Sequence[Sequence[Iterable[str]]],
                         labels: Iterable[str] | None = None) -> dict[str, Any]:
    """Per-label AC1 (each label present/absent) and the support-weighted overall AC1.

    ``label_sets[i][j]`` is rater ``j``'s set of labels for item ``i``. ``labels`` fixes the label
    list (default: every label any rater used). Support = how many (item, rater) ratings mark the
    label present; labels nobody used have no support and no weight.
    """
    sets = [[set(s) for s in row] for row in label_sets]
    vocab = list(labels) if labels is not None else sorted({x for row in sets for s in row for x in s})
    per_label: dict[str, dict[str, float]] = {}
    weighted, total = 0.0, 0
    for lab in vocab:
        ratings = [[lab in s for s in row] for row in sets]
        support = sum(sum(r) for r in ratings)
        if support == 0:
            continue
        ac1 = gwet_ac1(ratings, categories=(True, False))
        per_label[lab] = {"ac1": ac1, "support": support}
        if not math.isnan(ac1):
            weighted += ac1 * support
            total += support
    return {"per_label": per_label, "overall": weighted / total if total else math.nan, "n_items": len(sets),
            "n_labels": len(per_label)}
