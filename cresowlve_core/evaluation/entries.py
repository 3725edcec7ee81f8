"""What an evaluation run keeps in memory per item: a :class:`SummaryEntry`, not the whole record.

A run of 61,830 judged items writes some 2 KB per item (the answer, the judge's reasoning, the
item's annotations); holding every record as a dict took 12 KiB per item, twice on resume. The run
keeps only what deciding "done?" and writing the summary need (statuses, scores, token counts,
costs), a few hundred bytes, and reads a whole record again from disk by its offset when it has
to (the judge pass of a resumed run: :func:`~cresowlve_core.runtime.mapping.map_with_resume`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, get_args

from cresowlve_core.evaluation.records import Status, repeat_fields, repeat_status
from cresowlve_core.failures import error_line
from cresowlve_core.llm.types import Outcome
from cresowlve_core.untrusted import one_line

_STATUSES = frozenset(get_args(Status))
_OUTCOMES = frozenset(get_args(Outcome))

def _is_amount(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


#: one shared read-only mapping per distinct set of scores (a run has only a handful of them)
_SCORES: dict[tuple[tuple[str, Any], ...], Mapping[str, bool | None]] = {}


def _shared_scores(scores: dict[str, Any] | None) -> Mapping[str, bool | None]:
    items = tuple((scores or {}).items())
    found = _SCORES.get(items)
    if found is None:
        found = _SCORES[items] = MappingProxyType(dict(items))
    return found


class SummaryEntry:
    """The fields of one response record that the run's resume test and :func:`summarize` read.

    Attributes have the record's names (``usage`` is three token counts), and :meth:`get` reads
    them as a dict's ``get`` does, so the tests written for records (``needs_judge``) take entries.
    Values are those of :class:`~cresowlve_core.evaluation.records.ResponseRecord` (its defaults for
    a field an older record lacks); ``error`` is the error's first line, cut to 160 characters, and
    ``judge_error`` that of a judge call that errored (``judge_status: error``; its message is the record's
    ``judge_raw``); ``judge_repeat_status`` and ``judge_repeat_error`` are those of the second verdict of a
    ``--judge-repeat`` run (:func:`~cresowlve_core.evaluation.records.repeat_status`)."""

    __slots__ = ("status", "outcome", "error", "scores", "judge_status", "judge_error", "judge_outcome", "extraction",
                 "truncated", "max_tokens", "cost_source", "input_tokens", "output_tokens", "reasoning_tokens",
                 "cost", "judge_cost", "shows_reasoning", "judge_repeat_status", "judge_repeat_error", "served_model",
                 "dropped_fields", "judge_served_model", "n_replaced", "n_verdicts_replaced", "replaced_cost",
                 "invalid_utf8", "item_sha256")

    def __init__(self, rec: dict[str, Any]):
        get = rec.get
        usage = get("usage") or {}
        self.status: str | None = get("status")
        self.outcome: str = get("outcome") or "answer"
        error = get("error")
        self.error: str | None = error_line(error) if error else None
        self.scores = _shared_scores(get("scores"))
        self.judge_status: str = get("judge_status") or "not_run"
        judge_raw = get("judge_raw") if self.judge_status == "error" else None
        self.judge_error: str | None = error_line(judge_raw) if judge_raw else None
        self.judge_outcome: str | None = get("judge_outcome")
        self.extraction: str | None = get("extraction")
        truncated = get("truncated")  # None: written by a version that did not flag it
        self.truncated: bool | None = truncated if isinstance(truncated, bool) else None
        self.invalid_utf8: bool = bool(get("invalid_utf8"))
        self.max_tokens: int | None = get("max_tokens")
        self.cost_source: str | None = get("cost_source")
        self.input_tokens: int | None = usage.get("input_tokens")
        self.output_tokens: int | None = usage.get("output_tokens")
        self.reasoning_tokens: int | None = usage.get("reasoning_tokens")
        self.cost: float | None = get("cost")
        self.judge_cost: float | None = get("judge_cost")
        self.n_replaced: int = get("n_replaced") or 0
        self.n_verdicts_replaced: int = get("n_verdicts_replaced") or 0
        self.replaced_cost: float | None = get("replaced_cost")
        self.shows_reasoning = (self.reasoning_tokens or 0) > 0 or bool((get("thoughts") or "").strip())
        self.judge_repeat_status: str = repeat_status(rec)
        repeat_raw = repeat_fields(rec).get("judge_repeat_raw") if self.judge_repeat_status == "error" else None
        self.judge_repeat_error: str | None = error_line(repeat_raw) if repeat_raw else None
        # a run's few model names and field names, interned: one string each, not one per entry
        self.served_model: str | None = _interned(get("served_model"))
        item_sha256 = get("item_sha256")  # None: written by a version that did not record it
        self.item_sha256: str | None = item_sha256 if isinstance(item_sha256, str) else None
        self.judge_served_model: str | None = _interned(get("judge_served_model"))
        fields = get("dropped_fields")  # None: written by a version that did not record it
        self.dropped_fields: tuple[str, ...] | None = (tuple(sys.intern(str(f)) for f in fields)
                                                       if isinstance(fields, list) else None)

    def unknown_value(self) -> str | None:
        """``status 'x'``, ``outcome 'x'``, ``cost -5.0`` or ``usage.input_tokens '12'`` when the record has a value
        this version does not write (:data:`~cresowlve_core.evaluation.records.Status`,
        :data:`~cresowlve_core.llm.types.Outcome`; a cost that is not an amount of USD >= 0, a token count that is not
        a count: an earlier version priced by a negative price, a hand edit), else None."""
        if self.status not in _STATUSES:
            return f"status {one_line(repr(self.status), 40)}"
        if self.outcome not in _OUTCOMES:
            return f"outcome {one_line(repr(self.outcome), 40)}"
        for name in ("cost", "judge_cost", "replaced_cost"):  # what the client records: unknown (null), or an amount of USD
            if (value := getattr(self, name)) is not None and not _is_amount(value):
                return f"{name} {one_line(repr(value), 40)}"
        for name in ("n_replaced", "n_verdicts_replaced"):
            if not _is_count(value := getattr(self, name)):
                return f"{name} {one_line(repr(value), 40)}"
        for name in ("input_tokens", "output_tokens", "reasoning_tokens"):  # unknown (null), or a count
            if (value := getattr(self, name)) is not None and not _is_count(value):
                return f"usage.{name} {one_line(repr(value), 40)}"
        return None

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)

    def __repr__(self) -> str:
        return f"SummaryEntry({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"


def _interned(value: Any) -> str | None:
    """A string field's value as one shared string object (None when it is not a string)."""
    return sys.intern(value) if isinstance(value, str) else None


__all__ = ["SummaryEntry"]
