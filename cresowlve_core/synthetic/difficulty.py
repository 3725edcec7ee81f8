"""The difficulty score (paper App. D, future work) and whether it predicts the solver's failure.

``difficulty_score = 1 - cos(literal, obfuscated)`` under the bundled all-MiniLM-L6-v2
(:func:`cresowlve_core.embeddings.embed`): how far the obfuscation moved away from the plain
statement of the facts. Its predictive value is measured over the items the solver answered
literally (it has the knowledge), with *failure on the obfuscated version* as the outcome:

* **AUC** (probability that a failed item scores higher than a solved one; ties count 1/2),
  with a seeded percentile-bootstrap 95 % interval (resamples with one class only are left out; no
  interval when more than half are, or when every defined resample gives the same AUC, e.g. 1.0 at
  perfect separation: a zero-width interval is not an interval);
* **point-biserial r** (Pearson's r between the score and the 0/1 failure), with the Fisher-z
  95 % interval from :func:`cresowlve_core.stats.correlation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cresowlve_core.stats import correlation, interval_from_replicates


def difficulty_scores(literals: Sequence[str], obfuscated: Sequence[str], *, cache_path: str | None = None) -> list[float]:
    """``1 - cosine`` per pair (MiniLM vectors are L2-normalised)."""
    if len(literals) != len(obfuscated):
        raise ValueError("literals and obfuscated texts must pair up")
    if not literals:
        return []
    from cresowlve_core.embeddings import embed

    a = embed(list(literals), cache_path=cache_path)
    b = embed(list(obfuscated), cache_path=cache_path)
    return [round(float(1.0 - np.dot(x, y)), 6) for x, y in zip(a, b)]


def auc(scores: Sequence[float] | np.ndarray, positive: Sequence[bool] | np.ndarray) -> float:
    """Mann–Whitney AUC of ``scores`` for the positive class (NaN without both classes)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


@dataclass(frozen=True)
class Predictiveness:
    n: int
    n_failed: int
    auc: float
    auc_low: float
    auc_high: float
    point_biserial: float
    pb_low: float
    pb_high: float
    n_boot: int

    def to_record(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in asdict(self).items()}


def predictiveness(scores: Sequence[float], failed: Sequence[bool], *, n_boot: int = 2000, seed: int = 0) -> Predictiveness:
    """AUC and point-biserial correlation of the score with failure, each with a 95 % interval."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(failed, dtype=bool)
    n, k = int(s.size), int(y.sum())
    point = auc(s, y)
    lo = hi = float("nan")
    if 0 < k < n:
        rng = np.random.default_rng(seed)
        reps = np.full(n_boot, np.nan)  # a resample with one class only has no AUC: NaN, counted
        for b in range(n_boot):
            idx = rng.integers(0, n, n)
            if 0 < y[idx].sum() < n:
                reps[b] = auc(s[idx], y[idx])
        # no interval when every defined resample gives the same AUC (1.0 at perfect separation)
        iv = interval_from_replicates(point, reps, n)
        lo, hi = iv.low, iv.high
    corr = correlation(s, y.astype(float))
    return Predictiveness(n, k, point, lo, hi, corr.pearson_r, corr.pearson_low, corr.pearson_high, n_boot)
