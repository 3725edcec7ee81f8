"""What a model call came to, in the form every stage's records carry it (docs/providers.md, "Outcomes").

A record of a finished call has ``outcome`` (``Completion.outcome``) and ``refusal`` (the model's
refusal text). ``refused`` and ``filtered`` (:data:`~cresowlve_core.llm.types.NOT_AN_ANSWER`) are
the model's final behaviour on the unit: the record is ``status: "ok"`` (so a resume does not ask
again), the text is kept in the stage's raw field but never parsed as content, and the stage counts
it (:func:`outcome_counts`). A call that raised (:class:`~cresowlve_core.llm.types.LLMError`) is
``status: "error"`` with ``outcome`` ``failed`` (the provider said the response failed) or ``error``
(:func:`error_outcome`), and is retried on resume.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from cresowlve_core.llm.types import NOT_AN_ANSWER, Completion, Outcome
from cresowlve_core.untrusted import one_line


def outcome_fields(c: Completion) -> dict[str, Any]:
    """The outcome fields of a record made from ``c``: ``outcome``, ``refusal``, ``served_model`` (the
    model the provider's reply says answered, ``None`` when it names none), and ``invalid_utf8: true``
    when the body was not valid UTF-8 (decoded with U+FFFD, kept)."""
    fields: dict[str, Any] = {"outcome": c.outcome, "refusal": c.refusal, "served_model": c.model or None}
    if c.raw.get("invalid_utf8"):
        fields["invalid_utf8"] = True
    return fields


def call_outcome(c: Completion) -> Outcome:
    """``c``'s outcome, ``truncated`` also when only its ``finish_reason`` says it was cut off at the
    token limit (:attr:`~cresowlve_core.llm.types.Completion.truncated`)."""
    return "truncated" if c.truncated else c.outcome


def is_withheld(c: Completion) -> bool:
    """``c`` is a refusal or a filtered answer: recorded as it is, never parsed as content."""
    return c.outcome in NOT_AN_ANSWER


def withheld_record(c: Completion, raw_field: str = "raw") -> dict[str, Any]:
    """The fields of a stage record for a refused or filtered call: ``status: ok`` (final, not asked
    again), its outcome and refusal text, the (partial) text under ``raw_field``, usage and cost.
    The stage adds its unit's key and leaves its parsed content out."""
    return {"status": "ok", **outcome_fields(c), raw_field: c.text, "usage": c.usage.model_dump(), "cost": c.cost}


def error_outcome(exc: BaseException) -> Outcome:
    """The outcome of a call that raised: ``failed`` when the provider said the response failed, else ``error``."""
    outcome = getattr(exc, "outcome", "error")
    return "failed" if outcome == "failed" else "error"


def record_withheld(record: Mapping[str, Any]) -> bool:
    """A stored record (or sub-record) of a refused or filtered call."""
    return record.get("outcome") in NOT_AN_ANSWER


def outcome_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``n_refused`` and ``n_filtered`` among finished records (``status: ok``)."""
    done = [r.get("outcome") for r in records if r.get("status") == "ok"]
    return {"n_refused": done.count("refused"), "n_filtered": done.count("filtered")}


def outcome_note(counts: Mapping[str, Any]) -> str:
    """`` (1 refused, 1 filtered)`` for a summary line, or ``""`` when there is neither."""
    parts = [f"{counts[k]} {word}" for k, word in (("n_refused", "refused"), ("n_filtered", "filtered"))
             if counts.get(k)]
    return f" ({', '.join(parts)})" if parts else ""


def count_models(names: Iterable[str | None]) -> dict[str, int]:
    """How many calls each model the provider named answered (``names``: one per call; None, a call whose
    reply named none, left out), by name."""
    return dict(sorted(Counter(str(name) for name in names if name).items()))


def served_models(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """:func:`count_models` of the finished ``records`` (``status: ok``) by their ``served_model``; records
    that name none (older records, replies without a model) are left out."""
    return count_models(r.get("served_model") for r in records if r.get("status") == "ok")


def served_note(served: Mapping[str, int] | None, what: str = "answers") -> str:
    """`` | WARNING: answers from 2 models the provider named: a (3), b (2)`` when ``served``
    (:func:`served_models`) names more than one model (an alias that moved to another snapshot, a
    router's fallback): one label, two models; else ``""``."""
    if not served or len(served) < 2:
        return ""
    shown = ", ".join(f"{one_line(str(name), 60)} ({n})" for name, n in list(served.items())[:4])
    return (f" | WARNING: {what} from {len(served)} models the provider named: {shown}"
            + (", ..." if len(served) > 4 else ""))


def served_as(requested: str | None, served: Mapping[str, int] | None, n_calls: int | None = None) -> str:
    """What a report writes next to the label ``requested`` when the provider named other models
    (``served``: :func:`count_models`): ``"served as gpt-4o-2024-08-06"``, or with several
    ``"served as a (3), b (6)"``; ``""`` when its replies named only ``requested`` or none. ``n_calls``: the
    calls ``served`` counts the names of; when some of them named none (records of a version that did not
    record it, a server that names none), the names are counted and so are those:
    ``"served as a (3); 6 named none"``. Each name is one line (:func:`one_line`); the caller escapes it
    for HTML or Markdown."""
    names = dict(served or {})
    if not names or set(names) == {requested}:
        return ""
    unnamed = max(0, n_calls - sum(names.values())) if n_calls is not None else 0
    if len(names) == 1 and not unnamed:
        return f"served as {one_line(next(iter(names)), 60)}"
    shown = ", ".join(f"{one_line(name, 60)} ({n})" for name, n in list(names.items())[:4])
    return (f"served as {shown}" + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            + (f"; {unnamed} named none" if unnamed else ""))


def served_label(label: str, requested: str | None, served: Mapping[str, int] | None) -> str:
    """``label`` with :func:`served_as` in brackets after it when there is one:
    ``"gpt-4o (served as gpt-4o-2024-08-06)"``."""
    note = served_as(requested, served)
    return f"{label} ({note})" if note else label
