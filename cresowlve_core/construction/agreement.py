"""Inter-annotator agreement (paper App. B, and the error analysis' annotators): Fleiss' kappa
and Gwet's AC1, each with a seeded item-bootstrap 95% interval.

In :func:`fleiss_kappa`, :func:`gwet_ac1` and their ``*_ci`` forms, ``ratings[i][j]`` is rater
``j``'s label for item ``i``: any hashable, every item rated by every rater (a ragged table is an
error).

- Fleiss' kappa (Fleiss 1971) on the items x categories count table, from :mod:`cresowlve_core.stats`
  (the project's one Fleiss' kappa, the error analysis uses it too; checked against statsmodels).
- Gwet's AC1 (Gwet 2008, 2014) for several raters: ``pa`` = mean over items of
  ``sum_k r_ik (r_ik - 1) / (r (r - 1))``, ``pi_k`` = mean over items of ``r_ik / r``,
  ``pe = sum_k pi_k (1 - pi_k) / (q - 1)``, ``AC1 = (pa - pe) / (1 - pe)``, with ``q`` the number of
  categories (those observed, or the ``categories`` given). Tested against irrCAC's values.

Both return ``nan`` where the statistic is undefined (e.g. kappa when every rating is the same
category). Intervals resample items (all raters' labels of an item together) with a seeded
generator; resamples where the statistic is undefined are counted and shown, and a zero-width
interval is not shown (:func:`cresowlve_core.stats.interval_from_replicates`).
:func:`multilabel_agreement` scores multi-label fields label by label (present / absent; a label
repeated within one rater's labels of an item counts once) and weights the per-label AC1 by
support, as the paper does.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from cresowlve_core.failures import InputError
from cresowlve_core.stats import (
    BootstrapInterval,
    fleiss_kappa,
    fleiss_kappa_ci,
    fleiss_kappa_table,
    interval_from_replicates,
    item_bootstrap,
    rating_table,
    stable_seed,
)

__all__ = ["fleiss_kappa", "fleiss_kappa_ci", "fleiss_kappa_table", "format_ci", "gwet_ac1", "gwet_ac1_ci",
           "gwet_ac1_table", "interval_json", "multilabel_agreement", "rating_table", "raw_agreement"]


def gwet_ac1_table(table: np.ndarray) -> float:
    """Gwet's AC1 of an items x categories count table (``q`` = its number of columns)."""
    table = np.asarray(table, dtype=float)
    n_items, q = table.shape
    if q < 2 or n_items == 0:
        return math.nan
    r = table.sum(axis=1)
    pa = float(np.mean((table * (table - 1)).sum(axis=1) / (r * (r - 1))))
    pi = (table / r[:, None]).mean(axis=0)
    pe = float((pi * (1 - pi)).sum() / (q - 1))
    if pe >= 1:
        return math.nan
    return (pa - pe) / (1 - pe)


def gwet_ac1(ratings: Sequence[Sequence[Hashable]], categories: Iterable[Hashable] | None = None) -> float:
    """Gwet's AC1 of a ratings table. Give ``categories`` when the label set is fixed (for
    present/absent scoring: ``(True, False)``); ``nan`` if fewer than two categories."""
    return gwet_ac1_table(rating_table(ratings, categories))


def gwet_ac1_ci(ratings: Sequence[Sequence[Hashable]], categories: Iterable[Hashable] | None = None, *,
                n_boot: int = 1000, seed: int = 0) -> BootstrapInterval:
    """Gwet's AC1 with a seeded item-bootstrap 95% interval (``n`` = items)."""
    return item_bootstrap(gwet_ac1_table, rating_table(ratings, categories), n_boot, seed, "ac1")


def interval_json(iv: BootstrapInterval) -> dict[str, Any]:
    """An interval as JSON-safe fields (NaN -> None) for ``agreement.json`` and notebook records."""
    def num(v: float) -> float | None:
        return None if v is None or math.isnan(v) else float(v)

    return {"value": num(iv.value), "low": num(iv.low), "high": num(iv.high), "n": iv.n, "n_boot": iv.n_boot,
            "n_undefined": iv.n_undefined, "note": iv.note}


def format_ci(iv: dict[str, Any] | None, digits: int = 3) -> str:
    """``"[0.210, 0.600]"`` from :func:`interval_json`; ``–`` with the note when there is none;
    ``"k of B resamples undefined"`` appended when some were."""
    if not iv:
        return "–"
    if iv.get("low") is None or iv.get("high") is None:
        return "– (" + (iv.get("note") or "no interval") + ")"
    text = f"[{iv['low']:.{digits}f}, {iv['high']:.{digits}f}]"
    return text + (f" ({iv['note']})" if iv.get("note") else "")


def raw_agreement(ratings: Sequence[Sequence[Hashable]]) -> float:
    """Share of items on which every rater gave the same label."""
    rows = [list(r) for r in ratings]
    if not rows:
        raise InputError("no items to rate")
    return sum(len(set(r)) == 1 for r in rows) / len(rows)


def multilabel_agreement(label_sets: Sequence[Sequence[Iterable[str]]],
                         labels: Iterable[str] | None = None, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per-label AC1 (each label present/absent) and the support-weighted overall AC1, each
    with a seeded item-bootstrap 95% interval (``overall_ci``, ``per_label[lab]["ci"]``).

    ``label_sets[i][j]`` is rater ``j``'s labels for item ``i`` (a label repeated in one rater's
    labels of an item counts once). ``labels`` fixes the label list (default: every label any
    rater used). Support = how many (item, rater) ratings mark the label present; labels nobody
    used have no support and no weight. A resample recomputes the weights from its own items.
    """
    sets = [[set(s) for s in row] for row in label_sets]
    vocab = list(labels) if labels is not None else sorted({x for row in sets for s in row for x in s})
    present: dict[str, np.ndarray] = {}  # label -> (items, 2) counts of present / absent
    for lab in vocab if sets else ():  # no items (e.g. the model labelled none of them): nothing is present
        marks = np.array([[lab in s for s in row] for row in sets], dtype=float).reshape(len(sets), -1)
        if marks.sum() == 0:
            continue
        present[lab] = np.stack([marks.sum(axis=1), (1.0 - marks).sum(axis=1)], axis=1)

    def stats_of(idx: np.ndarray | None) -> tuple[dict[str, float], float]:
        per, weighted, total = {}, 0.0, 0.0
        for lab, t in present.items():
            tt = t if idx is None else t[idx]
            support = float(tt[:, 0].sum())
            ac1 = gwet_ac1_table(tt) if support else math.nan
            per[lab] = ac1
            if support and not math.isnan(ac1):
                weighted += ac1 * support
                total += support
        return per, (weighted / total if total else math.nan)

    per_point, overall = stats_of(None)
    n = len(sets)
    gen = stable_seed(seed, "multilabel", n)
    reps_overall = np.full(n_boot, np.nan)
    reps_label = {lab: np.full(n_boot, np.nan) for lab in present}
    for b in range(n_boot if n and present else 0):
        per_b, overall_b = stats_of(gen.integers(0, n, size=n))
        reps_overall[b] = overall_b
        for lab, v in per_b.items():
            reps_label[lab][b] = v
    reason = "undefined: no label present"
    per_label = {lab: {"ac1": per_point[lab], "support": int(present[lab][:, 0].sum()),
                       "ci": interval_json(interval_from_replicates(per_point[lab], reps_label[lab], n,
                                                                    undefined_reason=reason))}
                 for lab in present}
    return {"per_label": per_label, "overall": overall, "n_items": n, "n_labels": len(per_label),
            "overall_ci": interval_json(interval_from_replicates(overall, reps_overall, n, undefined_reason=reason))}
