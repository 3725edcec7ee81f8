"""A dead role stops its stage with exit 3 and a last line that says so:
the labeller (``errors label``) and the judge (``eval``). The perturber and quiz-taker are tested in
tests/contamination/test_contamination_stop.py, the verbaliser and solver in
tests/synthetic/test_synth_stop.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fakeserver import FakeServer

from cresowlve_core.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent / "error_analysis"))
from test_errors_label import _items, write_run  # noqa: E402


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def _wrong_runs(tmp_path, monkeypatch, n):
    """A run directory under tmp_path/runs whose ``n`` answers are all wrong (a private cache)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = _items(n)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})


def _label(tmp_path, base_url, model="lab"):
    return main(["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                 "--labeller-model", model, "--labeller-base-url", base_url, "--concurrency", "2"])


def test_a_dead_labeller_stops_errors_label_with_exit_3(tmp_path, capsys, monkeypatch):
    _wrong_runs(tmp_path, monkeypatch, 6)
    with FakeServer(faults=lambda r: "404") as srv:
        rc = _label(tmp_path, srv.base_url, model="gone")
        sent = srv.total
    err = capsys.readouterr().err
    assert rc == 3, err
    assert last_line(err).startswith("stopped early (fatal: ") and "HTTP 404" in last_line(err)
    assert "0 of 6 wrong answers done" in last_line(err) and sent <= 2  # stopped at the first answers


def test_a_dead_judge_stops_eval_with_exit_3_and_no_accuracy_from_missing_verdicts(tmp_path, capsys):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"chgk_{i:010x}", "difficulty": 1,
                                         "en": {"question": f"Puzzle {i}?", "answer": "Copernicus"}}) + "\n"
                             for i in range(4)), encoding="utf-8")

    def judge_dead(req):
        return "404" if req.body.get("model") == "gone-judge" else None

    with FakeServer(answers=lambda r: "<Answer>Copernicus</Answer>", faults=judge_dead) as srv:
        rc = main(["eval", "--items", str(items), "--model", "m", "--base-url", srv.base_url, "--judge-model",
                   "gone-judge", "--run-dir", str(tmp_path / "run"), "--concurrency", "1", "--no-cache"])
    out = capsys.readouterr()
    assert rc == 3, out.err
    assert last_line(out.err).startswith("stopped early (fatal: ") and "gone-judge" in last_line(out.err)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"] and not summary.get("n_judged")
    assert "judge accuracy" not in out.out.lower()




def test_errors_label_prints_one_line_and_says_nothing_sent_on_a_rerun(tmp_path, capsys, monkeypatch):
    _wrong_runs(tmp_path, monkeypatch, 3)
    with FakeServer(answers=lambda r: "RATIONALE: x\nCATEGORY: overthinking") as srv:
        assert _label(tmp_path, srv.base_url) == 0
        first = capsys.readouterr().out.strip().splitlines()
        assert _label(tmp_path, srv.base_url) == 0
        second = capsys.readouterr().out.strip().splitlines()
        assert srv.total == 3
    assert len(first) == 1 and first[0].startswith("labelled 3 of 3 wrong answers") and "3 sent" in first[0]
    assert len(second) == 1 and "nothing sent" in second[0]


def test_errors_label_in_which_no_reply_parses_exits_1(tmp_path, capsys, monkeypatch):
    _wrong_runs(tmp_path, monkeypatch, 3)
    with FakeServer(answers=lambda r: "I am not sure.") as srv:
        rc = _label(tmp_path, srv.base_url)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert last_line(err) == "incomplete: no label parsed: 3 of 3 replies unlabelled; the model's output is kept " \
                             "in the run directory"
