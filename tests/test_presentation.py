"""Values as a reader sees them: no raw ``None``, ``nan``, ``1 configurations``
or ``2.0`` shares in reports and headlines."""

from __future__ import annotations

from types import SimpleNamespace

from cresowlve_core.evaluation.runner import summary_line
from cresowlve_core.notebooks import report_headline
from cresowlve_core.text import plural, shown


def test_plural_and_shown():
    assert plural(1, "configuration") == "1 configuration"
    assert plural(3, "configuration") == "3 configurations"
    assert plural(2, "query", "queries") == "2 queries"
    assert [shown(None), shown(float("nan")), shown(2.0), shown(2.5), shown(7)] == ["–", "–", "2", "2.5", "7"]


def test_summary_line_has_no_none_in_token_counts():
    s = {"n_items": 9, "n_ok": 9, "n_error": 0, "n_not_run": 0, "em_strict": 0.0, "em_lenient": 0.111,
         "judge_accuracy": None, "n_unscored": 0, "cost": None, "input_tokens": 1249, "output_tokens": 9,
         "reasoning_tokens": None}
    line = summary_line(s)
    assert "tokens in/out/reasoning 1249/9/n/a" in line and "None" not in line


def test_token_sums_over_some_answers_say_they_are_a_lower_bound():
    from cresowlve_core.evaluation.entries import SummaryEntry
    from cresowlve_core.evaluation.runner import summarize

    known = {"status": "ok", "usage": {"input_tokens": 100, "output_tokens": 50}, "cost": 0.001}
    unknown = {"status": "ok", "usage": {"input_tokens": None, "output_tokens": None}, "cost": None}
    s = summarize([SummaryEntry(known), SummaryEntry(unknown)], n_items=2)
    assert (s["input_tokens"], s["n_usage_unknown"]) == (100, 1)
    assert "tokens in/out/reasoning 100/50/n/a (≥: 1 of 2 answers' counts unknown)" in summary_line(s)
    every = summarize([SummaryEntry(unknown)], n_items=1)
    assert "tokens in/out/reasoning n/a/n/a/n/a |" in summary_line(every)  # nothing known: n/a says it


def test_headlines_count_configurations_and_candidates_as_numbers():
    import pandas as pd

    from cresowlve_core.analysis.report import table1_headline
    from cresowlve_core.create.report import headline as create_headline
    from cresowlve_core.synthetic.report import headline as synthetic_headline

    assert table1_headline({"n_rows": 1}) == "Table 1: 1 configuration, 0 matched to a published row"
    # the reports index shows this line: a stopped run or a failed call is never left out of it
    assert table1_headline({"n_rows": 6, "matched_paper": 2, "unfinished": ["a/en"], "n_error": 2}) == (
        "Table 1: 6 configurations, 2 matched to a published row; 1 run did not finish (‡), "
        "2 items without an answer (errored)")
    assert table1_headline({"skipped": "no runs"}) == "Table 1: no runs"
    board = pd.DataFrame({"config": ["gpt-x"], "utility@0.7": [0.4], "utility@0.9": [0.5]})
    assert create_headline(board, [0.7, 0.9]) == "highest mean creative utility@0.9: gpt-x 0.500; 1 configuration"
    # the top configuration answered fewer queries than another: its interval and both counts are said
    board = pd.DataFrame({"config": ["a", "b"], "utility@0.9": [20.5, 18.3], "ci_low@0.9": [9.84, 15.0],
                          "ci_high@0.9": [31.21, 21.0], "n_queries": [2, 4]})
    assert create_headline(board, [0.9]) == ("highest mean creative utility@0.9: a 20.500 [9.84, 31.21] over 2 queries "
                                             "(others up to 4); 2 configurations")
    result = SimpleNamespace(summary={"yield": {"kept": 0, "of_candidates": 2.0, "paper_kept": 7, "paper_of": 100}})
    assert synthetic_headline(result) == "kept 0 of 2 synthetic candidates (the paper: 7 of 100)"  # type: ignore[arg-type]


def test_the_index_reads_a_reports_own_headline_and_nothing_else():
    assert report_headline({"headline": "EM 11.1%"}) == "EM 11.1%"
    assert report_headline({"table1": {"n_rows": 1}, "summary": {"n_items": 9}}) is None  # no stage's shapes


def test_synthetic_yield_table_gives_anchors_no_share_of_candidates():
    from cresowlve_core.synthetic.report import yield_section

    stages = {"anchors_tried": 4, "candidates": 2, "verbalised": 2, "parsed": 1, "leak_free": 1, "scored_both": 1,
              "solved_literal": 1, "kept": 0}
    result = SimpleNamespace(summary={"stages": stages, "outcomes": {}, "yield": {}}, stopped=None)
    table = yield_section(result).table  # type: ignore[arg-type]
    share = dict(zip(table["stage"], table["of candidates"], strict=True))
    assert share["anchors tried (in band, labelled)"] == "–"  # was 2.0: anchors precede candidates
    assert share["verbalisation parsed"] == "0.50"
