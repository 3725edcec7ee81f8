"""The report sections shared by notebooks 02 (one run) and 03 (many): rows, fallbacks, messages."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis import report
from cresowlve_core.analysis.loading import load_runs


@pytest.fixture
def shown(monkeypatch):
    """Collect what the sections display (Markdown text and HTML) instead of needing a kernel."""
    out: list[str] = []
    monkeypatch.setattr(report, "say", lambda md: out.append(md))
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **_: out.append(getattr(obj, "data", str(obj))))
    return out


def test_setup_raises_the_pandas_row_limit():
    from cresowlve_core.notebooks import setup

    with pd.option_context("display.max_rows", 60):
        setup()
        assert pd.get_option("display.max_rows") is None


def _thin_judge_run(tmp_path):
    # the demo's shape: the judge scored 3 answers and found them all correct; EM says most are wrong
    recs = [record(f"i{k}", em_strict=False, em_lenient=k == 0, answer="Adieu", prediction=f"guess {k}") for k in range(10)]
    for k in range(3):
        recs[k].update(judge_status="scored", judge_verdict="CORRECT")
    recs.append(record("err", status="error", em_strict=None, em_lenient=None))
    return write_run(tmp_path / "demo_en", recs, judge={"model": "j", "protocol": "nonce-verdict", "seed": 7}, seed=3)


def test_example_errors_fall_back_to_em_when_the_judge_is_thin(tmp_path, shown):
    rs = load_runs(_thin_judge_run(tmp_path))
    out = report.example_errors_section(rs, n=4)
    res = out["m/en"]
    assert res["metric"] == "em_lenient" and res["n_wrong"] == 9 and res["n_error"] == 1
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "judge scored only 3 of 10 answers (30% < 90%)" in text and "4 of 9 shown" in text
    assert "1 errored item(s)" in text


def test_example_errors_show_a_refusal_as_a_refusal(tmp_path, shown):
    # as the replay server's recorded OpenAI refusal leaves it: no prediction, EM false, no judge. Before, the
    # table showed the two refusals as wrong answers with an empty prediction and nothing saying they were refusals
    recs = [record(f"i{k}", answer="Jaws", prediction=f"guess {k}", outcome="answer") for k in range(3)]
    recs += [record(f"r{k}", answer="Jaws", prediction=None, outcome="refused", refusal="I can't help with that.")
             for k in range(2)]
    write_run(tmp_path / "r_en", recs)
    out = report.example_errors_section(load_runs(tmp_path / "r_en"), n=5)
    assert out["m/en"]["n_wrong"] == 5
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "of the 5 not correct, 2 refused (no answer given, counted not correct: `outcome`)" in text
    table = next(s for s in shown if isinstance(s, str) and "<table" in s)
    assert "<th>outcome</th>" in table and table.count('"t">refused<') == 2 and table.count('"t">answer<') == 3


def test_example_errors_of_a_run_without_a_judge_do_not_say_a_judge_scored_it(tmp_path, shown):
    # before: "wrong by lenient exact match, because the LLM judge scored only 0 of 4 answers (0% < 90%)", of a
    # run no judge was ever asked about
    write_run(tmp_path / "r_en", [record(f"i{k}", em_lenient=k == 0) for k in range(4)])
    out = report.example_errors_section(load_runs(tmp_path / "r_en"))
    assert out["m/en"]["metric"] == "em_lenient" and out["m/en"]["n_wrong"] == 3
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "**m / en** — wrong by lenient exact match (this run has no LLM judge): 3 of 3 shown." in text
    assert "judge scored" not in text


def test_example_errors_are_the_same_whatever_order_the_answers_finished_in(tmp_path, shown):
    """responses.jsonl is in the order the calls finished (concurrency): two evaluations with the same
    answers and seed write it in different orders. Before, each showed other wrong answers (four evals
    of the demo items against the replay server, seed 0: four different sets of 5 of 9)."""
    recs = [record(f"i{k:02d}", answer="Jaws", prediction=f"guess {k}") for k in range(20)]
    write_run(tmp_path / "a" / "r_en", recs)
    write_run(tmp_path / "b" / "r_en", recs[::-1])
    ids = []
    for folder in ("a", "b"):
        shown.clear()
        report.example_errors_section(load_runs(tmp_path / folder / "r_en"), n=5, seed=0)
        table = next(s for s in shown if isinstance(s, str) and "<table" in s)
        ids.append(re.findall(r">(i\d\d)<", table))
    assert len(ids[0]) == 5 and ids[0] == ids[1]


def test_example_errors_never_show_an_empty_table_without_saying_why(tmp_path, shown):
    write_run(tmp_path / "r_en", [record(f"i{k}", em_strict=True, em_lenient=True, judge="CORRECT") for k in range(5)])
    out = report.example_errors_section(load_runs(tmp_path / "r_en"))
    assert out["m/en"] == {"metric": "judge", "n_wrong": 0, "n_error": 0, "judge_coverage": 1.0}
    assert any("No item is wrong by this measure" in s for s in shown if isinstance(s, str))
    assert not any("<table" in s for s in shown if isinstance(s, str))


@pytest.mark.parametrize("paper", ["nope.csv", ""])
def test_a_paper_table_given_that_is_no_file_is_an_input_error(tmp_path, shown, paper):
    from cresowlve_core.failures import MissingInput

    rs = load_runs(_thin_judge_run(tmp_path))
    given = str(tmp_path / paper) if paper else paper
    with pytest.raises(MissingInput, match="^paper_table: .* is not a file"):  # never Table 1 without the paper's numbers
        report.table1_section(rs, given, export=False)


def test_single_run_sections_for_notebook_02(tmp_path, shown):
    rs = load_runs(_thin_judge_run(tmp_path))
    t = report.table1_section(rs, export=False)
    assert "csv" not in t and t["low_coverage"] == ["m/en/judge"]
    row = t["rows"][0]
    assert (row["en_llm_judge_n"], row["en_llm_judge_n_all"]) == (3, 11)  # 3 verdicts of 11 items; the error has none
    assert (row["en_exact_match_n"], row["en_exact_match_n_all"]) == (10, 11)
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "† m / en / LLM Judge: scored 3 of 11" in text and "1 errored items count against it" in text  # errors count against coverage
    d = report.difficulty_section(rs)
    assert d["interval"] == "wilson" and d["n_small_cells"] > 0
    seeds = report.seeds_section(rs, seed=0)
    assert seeds["runs"]["demo_en"] == {"seed": 3, "judge_seed": 7}


def test_heatmap_prints_each_cells_interval_and_marks_only_bh_cells():
    from cresowlve_core.analysis.charts import group_heatmap

    table = pd.DataFrame(
        {
            "config": ["a", "a"],
            "lang": ["en", "en"],
            "group": ["G1", "G2"],
            "n": [40, 50],
            "n_items": [40, 50],
            "acc": [25.0, 60.0],
            "low": [14.2, 46.2],
            "high": [40.2, 72.4],
            "overall": [45.0, 45.0],
            "q": [0.2, 0.01],
            "flagged": [False, True],
        }
    )
    spec = group_heatmap(table, "Domain", "LLM judge").to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["ci"] for r in rows] == ["14–40", "46–72"]  # the interval is drawn in the cell, not only on hover
    assert [r["label"] for r in rows] == ["25", "60*"]
    texts = [layer for layer in spec["spec"]["layer"] if layer["mark"]["type"] == "text"]
    assert any(layer["encoding"]["text"]["field"] == "ci" for layer in texts)


def test_runs_section_warns_when_a_thinking_run_shows_no_reasoning(tmp_path, monkeypatch):
    import json

    from test_analysis_fixtures import record, write_run

    from cresowlve_core.analysis import load_runs, report

    run = write_run(tmp_path / "r", [record(f"i{i}") for i in range(3)], model="m", effort="high", thinking=True)
    (run / "summary.json").write_text(json.dumps({"n_no_reasoning": 3}))
    rs = load_runs(str(run))
    assert rs.runs["n_no_reasoning"].iloc[0] == 3
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda obj: None)
    report.runs_section(rs)
    assert any("Thinking not verified" in s for s in said)



def test_the_runs_sections_reasoning_notes_state_their_population_and_skip_effort_none(tmp_path, monkeypatch):
    """"3 answers show no reasoning" named no population; and an effort-none run (filed thinking) whose
    summary was written before effort none was checked for reasoning shown (n_no_reasoning 3) was
    called "Thinking not verified", though no reasoning is what effort none asks for."""
    import json

    from test_analysis_fixtures import record, write_run

    from cresowlve_core.analysis import load_runs, report

    high = write_run(tmp_path / "runs" / "high", [record(f"i{i}") for i in range(4)], model="m", effort="high",
                     thinking=True)
    (high / "summary.json").write_text(json.dumps({"n_no_reasoning": 3, "n_ok": 4, "n_refused": 1, "n_filtered": 0}))
    none = write_run(tmp_path / "runs" / "none", [record(f"i{i}") for i in range(4)], model="m", effort="none",
                     thinking=True)
    (none / "summary.json").write_text(json.dumps({"n_no_reasoning": 4, "n_ok": 4}))  # an older summary
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda obj: None)
    report.runs_section(load_runs(str(tmp_path / "runs" / "*")))
    notes = [s for s in said if "Thinking not verified" in s]
    assert len(notes) == 1 and "`m (high)`" in notes[0]
    assert "3 of 3 answers (refused and filtered ones left out) show no reasoning" in notes[0]


def test_the_difficulty_breakdown_names_the_items_it_leaves_out_for_want_of_a_rating(tmp_path, shown):
    """An item without a difficulty rating counts in Table 1 but has no cell here: the section said
    "n = 4 items" while its cells summed to 3, and named none."""
    recs = [record(f"q{i}", difficulty=1 + i % 2, judge="CORRECT") for i in range(3)]
    recs.append(record("unrated", difficulty=None, judge="INCORRECT"))
    write_run(tmp_path / "r", recs)
    out = report.difficulty_section(load_runs(str(tmp_path / "r")))
    assert out["n_unrated_items"] == 1
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "**Left out: 1 item(s) without a difficulty rating** (1 response(s): `unrated`)" in text


def test_example_errors_do_not_call_items_without_a_value_right(tmp_path, shown):
    """A judge-only run (no exact-match fields) the judge half scored falls back to lenient EM, which has no
    value for any answer. Before: "No item is wrong by this measure (12 answered items)", beside 6 items
    the judge found wrong."""
    write_run(tmp_path / "r_en", [record(f"i{k}", em_strict=None, em_lenient=None, judge="INCORRECT" if k < 6 else None)
                                  for k in range(12)])
    out = report.example_errors_section(load_runs(tmp_path / "r_en"))
    assert out["m/en"]["metric"] == "em_lenient" and out["m/en"]["n_wrong"] == 0
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "Exact match (lenient) has no value for any of the 12 answered items" in text
    assert "No item is wrong" not in text


def test_creative_vs_factual_names_the_runs_it_cannot_compare(tmp_path, shown):
    """A run with creative items only has no gap to show. Before, it was simply absent from the table."""
    kinds = ["creative", "factual"] * 4
    write_run(tmp_path / "a", [record(f"i{k}", reasoning_type=t, em_strict=k % 3 == 0, judge="CORRECT")
                               for k, t in enumerate(kinds)], model="a")
    write_run(tmp_path / "b", [record(f"i{k}", model="b", em_strict=True, judge="CORRECT") for k in range(8)], model="b")
    out = report.creative_factual_section(load_runs(str(tmp_path / "*")))
    assert {g["config"] for g in out["gaps"]} == {"a"}
    assert any(s.startswith("**Not in this comparison** (no factual item, or none at a difficulty level of its "
                            "creative items, with a value): b / en.") for s in shown if isinstance(s, str))


def test_table1_headline_counts_errored_items_of_table1s_population(tmp_path, shown):
    """Two errored factual items are outside Table 1 (creative items). Before, its headline read "Table 1: 1
    configuration, 0 matched to a published row; 2 items without an answer (errored)" beside cells showing
    no errored item."""
    recs = [record(f"i{k}", em_strict=True) for k in range(4)]
    recs += [record(f"f{k}", reasoning_type="factual", status="error", em_strict=None, em_lenient=None) for k in range(2)]
    rs = load_runs(write_run(tmp_path / "r_en", recs))
    t = report.table1_section(rs, export=False)
    assert t["n_error"] == 0
    assert report.table1_headline(t) == "Table 1: 1 configuration, 0 matched to a published row"


def test_example_errors_of_a_run_with_only_errored_items_say_nothing_is_answered(tmp_path, shown):
    write_run(tmp_path / "r_en", [record(f"i{k}", status="error", em_strict=None, em_lenient=None) for k in range(3)])
    out = report.example_errors_section(load_runs(tmp_path / "r_en"))
    assert out["m/en"]["n_error"] == 3
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert text == "**m / en** — no answered items; 3 errored item(s) (no answer, left out) not shown: nothing to show."


def test_a_difficulty_off_the_1_to_5_scale_is_left_out_of_the_breakdown_and_named(tmp_path, monkeypatch):
    """Hand-edited ratings 0 and 7 became levels of the chart and scores of the trend test, whose text
    says "Cochran–Armitage over difficulty 1–5", without a word; the ChGK reader calls them invalid."""
    import pandas as pd
    from test_analysis_fixtures import record, write_run

    from cresowlve_core.analysis import breakdowns, load_runs, report

    recs = [record(f"i{k}", difficulty=d, em_strict=k % 2 == 0) for k, d in enumerate([1, 2, 3, 4, 5, 0, 7, 7])]
    rs = load_runs(str(write_run(tmp_path / "r", recs)))
    said: list[str] = []
    shown: list[object] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda obj, *a: shown.append(obj))
    trend: list[object] = []
    monkeypatch.setattr(breakdowns, "difficulty_trend", lambda res: trend.append(res) or pd.DataFrame(columns=["falls"]))
    out = report.difficulty_section(rs)
    assert out["n_off_scale_items"] == 3
    assert sorted(trend[0]["difficulty"].unique()) == [1, 2, 3, 4, 5]
    assert any("**Left out: 3 item(s) rated off the 1–5 scale** (difficulty 0, 7; `i5`, `i6`, `i7`)" in s for s in said)


def test_the_trend_text_counts_only_the_rows_tested_in_holms_family(tmp_path, shown, monkeypatch):
    """Strict EM wrong on every item has no Cochran–Armitage test (p NaN, out of Holm's family); the judge,
    right on the easy items only, has one. Holm adjusts over 1 test (statsmodels' multipletests on the one
    p gives it back unchanged); the text said "Holm-corrected over 2 tests"."""
    from statsmodels.stats.multitest import multipletests

    recs = [record(f"q{i}", difficulty=1 + i % 5, em_strict=False, em_lenient=False,
                   judge="CORRECT" if i % 5 < 2 else "INCORRECT") for i in range(30)]
    write_run(tmp_path / "r", recs)
    from cresowlve_core.analysis import breakdowns

    trends: list[pd.DataFrame] = []
    real = breakdowns.difficulty_trend
    monkeypatch.setattr(breakdowns, "difficulty_trend", lambda res: trends.append(real(res)) or trends[-1])
    report.difficulty_section(load_runs(str(tmp_path / "r")))
    trend = trends[0]
    tested = trend[trend["p"].notna()]
    assert len(tested) < len(trend)
    assert tested["p_holm"].tolist() == pytest.approx(multipletests(tested["p"], method="holm")[1].tolist())
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert f"Holm-corrected over {len(tested)} tests" in text
    assert f"({len(trend) - len(tested)} not tested: every answer alike, or one difficulty level)" in text


def test_the_correctness_correlation_text_counts_only_the_rows_tested_in_holms_family(tmp_path, shown, monkeypatch):
    """Model b is right on every item: its correlation with correctness is undefined (constant outcome, p NaN),
    out of Holm's family; model a's is tested. The text said "Holm over all 2 tests" where Holm adjusted over 1."""
    from cresowlve_core.analysis import complexity

    domains = [["History"], ["History", "Art"], ["History", "Art", "Music"]]
    recs_a = [record(f"q{i}", model="a", knowledge_domains=domains[i % 3], judge="CORRECT" if i % 3 else "INCORRECT")
              for i in range(12)]
    recs_b = [record(f"q{i}", model="b", knowledge_domains=domains[i % 3], judge="CORRECT") for i in range(12)]
    write_run(tmp_path / "a", recs_a, model="a")
    write_run(tmp_path / "b", recs_b, model="b")
    tables: list[pd.DataFrame] = []
    real = complexity.performance_correlations
    monkeypatch.setattr(complexity, "performance_correlations", lambda *a, **k: tables.append(real(*a, **k)) or tables[-1])
    report.complexity_section(load_runs(str(tmp_path / "*")), semantic_distance=False)
    corr = tables[0]
    assert len(corr) == 2 and corr["spearman_p"].notna().sum() == 1
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "Holm over all 1 tests (1 row(s) not tested: a constant feature or outcome)" in text


def test_a_reasoning_check_of_an_earlier_pass_is_not_shown_as_the_runs(tmp_path, monkeypatch):
    """A colleague's thinking run resumed from 3 to 6 answers and stopped before its summary was written: the
    summary.json of the first pass says 3 of 3 answers show no reasoning. The runs section does not give that as
    the run's (6 answers); a note names the run and how to recompute it. Before: "Thinking not verified for
    `m (high)`: 3 of 3 answers ... show no reasoning"."""
    import json

    from test_analysis_fixtures import record, write_run

    from cresowlve_core.analysis import load_runs, report

    run = write_run(tmp_path / "r", [record(f"i{i}") for i in range(6)], model="m", effort="high", thinking=True,
                    finished_at=None)
    (run / "summary.json").write_text(json.dumps({"n_items": 3, "n_ok": 3, "n_no_reasoning": 3, "n_refused": 0}))
    rs = load_runs(str(run))
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda obj: None)
    report.runs_section(rs)
    assert not [s for s in said if "Thinking not verified" in s]
    assert (f"- `r`: its summary.json counts 3 answers, its records 6 (a summary of an earlier pass, or records added "
            f"since): its reasoning check is not shown; `cresowlve rescore --run-dir {run.resolve()}` recomputes it "
            "from the records.") in said


def test_a_homogeneity_row_without_two_groups_is_not_tested_and_not_counted_as_a_test(tmp_path, shown, monkeypatch):
    """Model a errored on every Music item, so only History has a value for it: no χ² over one group, and
    no permutation was drawn for it. Its row said ``test = permutation, n_perm = 1000`` and the text counted
    it among the rows tested "from 1000 seeded permutations"; model b (both groups) is the one test."""
    def rec(i: str, model: str, domain: str, right: bool | None):
        if right is None:
            return record(i, model=model, status="error", outcome="error", em_strict=None, em_lenient=None,
                          knowledge_domains=[domain])
        return record(i, model=model, knowledge_domains=[domain], judge="CORRECT" if right else "INCORRECT")

    write_run(tmp_path / "a", [rec(f"h{k}", "a", "History", k % 2 == 0) for k in range(40)]
              + [rec(f"m{k}", "a", "Music", None) for k in range(40)], model="a")
    write_run(tmp_path / "b", [rec(f"h{k}", "b", "History", k % 3 == 0) for k in range(40)]
              + [rec(f"m{k}", "b", "Music", k % 4 == 0) for k in range(40)], model="b")
    from cresowlve_core.analysis import breakdowns

    got: list[breakdowns.GroupBreakdown] = []
    real = breakdowns.by_group
    monkeypatch.setattr(breakdowns, "by_group", lambda *a, **k: got.append(real(*a, **k)) or got[-1])
    recorded = report.groups_section(load_runs(str(tmp_path / "*")), min_group_size=30)
    h = got[0].homogeneity.set_index("config")
    assert h.loc["a", "test"] == "not tested" and pd.isna(h.loc["a", "n_perm"]) and pd.isna(h.loc["a", "p"])
    assert h.loc["b", "test"] == "asymptotic" and h.loc["b", "p"] == pytest.approx(h.loc["b", "q"])
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert "of 1 tested model × language rows (1 not tested: fewer than two groups with a value" in text
    assert "permutations of the items" not in text
    assert recorded["knowledge_domains"]["homogeneity_tests"] == {"asymptotic": 1, "not tested": 1}


def test_the_difficulty_section_names_a_level_a_run_has_no_value_at(tmp_path, shown):
    """Model a errored on its 10 items at difficulty 5: its line stopped at 4 with no word of why."""
    recs = [record(f"i{k}", model="a", difficulty=1 + k % 5, judge="CORRECT" if k % 2 else "INCORRECT")
            if k % 5 != 4 else record(f"i{k}", model="a", difficulty=5, status="error", outcome="error",
                                      em_strict=None, em_lenient=None) for k in range(50)]
    write_run(tmp_path / "a", recs, model="a")
    report.difficulty_section(load_runs(str(tmp_path / "a")))
    text = "\n".join(s for s in shown if isinstance(s, str))
    assert ("a / en / Exact match (strict) at difficulty 5 (10 item(s), none with a value); a / en / LLM judge at "
            "difficulty 5 (10 item(s), none with a value)") in text


def test_the_difficulty_section_names_a_run_without_judge_values(tmp_path, shown):
    """Run c was never judged: its LLM-judge cells were absent from the chart, the table and the trend with no
    word, beside a coverage line over "1 judged runs" (the group breakdowns already named it)."""
    write_run(tmp_path / "a", [record(f"i{k}", model="a", difficulty=1 + k % 5, judge="CORRECT" if k % 2 else "INCORRECT")
                               for k in range(50)], model="a")
    write_run(tmp_path / "c", [record(f"i{k}", model="c", difficulty=1 + k % 5, em_strict=k % 3 == 0)
                               for k in range(50)], model="c")
    report.difficulty_section(load_runs(str(tmp_path / "*")))
    assert "No LLM-judge scores for c / en; left out of the judge-based breakdowns." in [
        s for s in shown if isinstance(s, str)]


def test_the_correctness_correlations_name_a_run_without_judge_values(tmp_path, shown):
    """Run c was never judged: it had no row among the correlations with per-item correctness (LLM judge), and
    nothing said so."""
    domains = [["A"], ["A", "B"], ["A", "B", "C"]]
    write_run(tmp_path / "a", [record(f"i{k}", model="a", knowledge_domains=domains[k % 3],
                                      judge="CORRECT" if k % 2 else "INCORRECT") for k in range(30)], model="a")
    write_run(tmp_path / "c", [record(f"i{k}", model="c", knowledge_domains=domains[k % 3], em_strict=k % 3 == 0)
                               for k in range(30)], model="c")
    out = report.complexity_section(load_runs(str(tmp_path / "*")), semantic_distance=False)
    assert out["metric"] == "judge" and out["n_performance_rows"] == 1
    assert "No LLM-judge scores for c / en; left out of the judge-based breakdowns." in [
        s for s in shown if isinstance(s, str)]


def test_creative_vs_factual_names_a_run_without_judge_values(tmp_path, shown):
    """Run c was never judged: its gap had an exact-match row and no LLM-judge row, and nothing said why (the
    "Not in this comparison" line names only runs with no row at all)."""
    kind = ["factual", "creative", "creative", "creative"]
    write_run(tmp_path / "a", [record(f"i{k}", model="a", difficulty=1 + k % 3, reasoning_type=kind[k % 4],
                                      judge="CORRECT" if k % 2 else "INCORRECT") for k in range(40)], model="a")
    write_run(tmp_path / "c", [record(f"i{k}", model="c", difficulty=1 + k % 3, reasoning_type=kind[k % 4],
                                      em_strict=k % 3 == 0) for k in range(40)], model="c")
    out = report.creative_factual_section(load_runs(str(tmp_path / "*")))
    assert sorted((g["config"], g["metric"]) for g in out["gaps"]) == [("a", "em_strict"), ("a", "judge"),
                                                                       ("c", "em_strict")]
    assert "No LLM-judge scores for c / en; left out of the judge-based breakdowns." in [
        s for s in shown if isinstance(s, str)]
