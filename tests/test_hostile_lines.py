"""A provider's error text and a co-author's run directory drive no terminal and restructure no
report: terminal escapes, carriage returns and line breaks in them become spaces wherever they
become a terminal line or part of a Markdown sentence (``untrusted.one_line``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "analysis"))
from test_analysis_fixtures import record, write_run  # noqa: E402

from cresowlve_core.analysis.loading import load_runs  # noqa: E402
from cresowlve_core.evaluation.listing import RunDiff, diff_report, run_row  # noqa: E402
from cresowlve_core.llm.openai_wire import error_details  # noqa: E402

PAYLOAD = "\x1b[2J\x1b]0;pwned\x07\x1b[31mRED\rOVR\n\n# FAKE HEADING\n\n- fake bullet"


def _clean(text: str) -> bool:
    return not any(c in text for c in "\x1b\x07\r") and "\n#" not in text and "\n-" not in text


def test_an_error_bodys_code_and_message_are_one_plain_line():
    body = json.dumps({"error": {"message": "bad key" + PAYLOAD, "code": "invalid" + PAYLOAD}}).encode()
    message, code, is_api = error_details(body)
    assert is_api and _clean(message) and _clean(code)
    assert "# FAKE HEADING - fake bullet" in code


def test_a_hostile_model_name_and_stop_reason_become_one_line_in_the_notes_and_the_listing(tmp_path):
    write_run(tmp_path / "a", [record("i1", model="m")], model="m" + PAYLOAD, n_items=3,
              stopped="fatal: HTTP 401" + PAYLOAD)
    write_run(tmp_path / "b", [], model="m2", n_items=3, stopped="fatal: HTTP 401" + PAYLOAD)
    rs = load_runs(str(tmp_path / "*"))
    assert all(_clean(n) for n in rs.notes) and any("stopped: fatal: HTTP 401" in n for n in rs.notes)
    assert all(_clean(str(m)) for m in rs.runs["model"]) and all(_clean(str(c)) for c in rs.runs["config"])
    (tmp_path / "a" / "summary.json").write_text(json.dumps({"n_items": 3, "n_ok": 1, "stopped": "x" + PAYLOAD}))
    assert _clean(run_row(tmp_path / "a").line())


def test_diff_prints_a_hostile_item_id_as_one_plain_line(tmp_path):
    rows = [{"id": "chgk_1" + PAYLOAD, "answer": "A" + PAYLOAD, "a": "x" + PAYLOAD, "a_correct": True, "b": "y",
             "b_correct": False}]
    out = diff_report(tmp_path / "a", tmp_path / "b", RunDiff("em_strict", 1, 1, 0, rows, 1.0, "exact", 0))
    assert "\x1b" not in out and "\r" not in out and "\n#" not in out and "chgk_1 [2J" in out
