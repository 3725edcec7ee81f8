"""A body that was not valid UTF-8 is flagged in every stage's record (runtime/outcomes.py)."""

from __future__ import annotations

from cresowlve_core.evaluation.records import ResponseRecord
from cresowlve_core.llm.types import Completion
from cresowlve_core.runtime.outcomes import outcome_fields


def test_an_invalid_utf8_body_is_flagged_in_the_record() -> None:
    cut = Completion(text="Ответ: Моск\ufffd", raw={"finish_reason": "stop", "invalid_utf8": True})
    fields = outcome_fields(cut)
    assert fields == {"outcome": "answer", "refusal": None, "served_model": None, "invalid_utf8": True}
    rec = ResponseRecord(id="q1", lang="ru", status="ok", model="m", **fields)
    assert rec.invalid_utf8 is True and rec.model_dump()["invalid_utf8"] is True


def test_a_clean_body_adds_no_flag() -> None:
    fields = outcome_fields(Completion(text="Moscow", raw={"finish_reason": "stop"}))
    assert "invalid_utf8" not in fields
    assert ResponseRecord(id="q1", lang="en", status="ok", model="m", **fields).invalid_utf8 is False
