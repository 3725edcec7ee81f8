"""Every metric of an evaluation run, declared once.

A metric has a name (the key in a record's ``scores``), a label for tables and charts, the
column of the paper's Table 1 it corresponds to (if any), and a function of the prediction and
the reference. A ``None`` function marks a metric that a model computes (the LLM judge): its value
comes from the judge's verdict, never from a formula. A record's ``scores[name]`` is ``True``,
``False``, or ``None`` (not scored). Loading, tables, the summary and ``cresowlve rescore``
iterate over :data:`METRICS`: adding a metric is one entry here, and ``cresowlve rescore`` gives
old runs the new metric without a model call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cresowlve_core.evaluation.scoring import exact_match, exact_match_strict


@dataclass(frozen=True)
class Reference:
    """What a prediction is scored against."""

    answer: str
    other_answers: str | None = None


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    paper_column: str | None = None  # the Table-1 column of the paper this metric reproduces
    score: Callable[[str | None, Reference], bool | None] | None = None  # None: computed by a model

    @property
    def model_based(self) -> bool:
        return self.score is None


METRICS: tuple[Metric, ...] = (
    Metric("em_strict", "Exact match (strict)", "exact_match",
           lambda pred, ref: exact_match_strict(pred, ref.answer)),
    Metric("em_lenient", "Exact match (lenient)", None,
           lambda pred, ref: exact_match(pred, ref.answer, ref.other_answers)),
    Metric("judge", "LLM judge", "llm_judge", None),
)
LABELS: dict[str, str] = {m.name: m.label for m in METRICS}


def formula_scores(prediction: str | None, ref: Reference) -> dict[str, bool | None]:
    """Every formula metric of one prediction (the judge is filled in by the judge call)."""
    return {m.name: m.score(prediction, ref) for m in METRICS if m.score is not None}
