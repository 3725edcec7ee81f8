"""One population per comparison, judge coverage in every section, labels counted once per item,
p-values and missing values printed one way."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis import report
from cresowlve_core.analysis.breakdowns import by_group
from cresowlve_core.analysis.coverage import coverage_line, judge_coverage_by_run
from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.reporting import show


@pytest.fixture
def shown(monkeypatch):
    out: list[str] = []
    monkeypatch.setattr(report, "say", lambda md: out.append(md))
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **_: out.append(getattr(obj, "data", str(obj))))
    return out


def test_a_label_repeated_within_an_item_counts_once():
    # 60 items each annotated ["History", "History"] and 40 with ["Art"]: History has n = 60, not 100
    rows = [{"id": f"h{i}", "knowledge_domains": ["History", "History"], "judge": float(i < 30)} for i in range(60)]
    rows += [{"id": f"a{i}", "knowledge_domains": ["Art"], "judge": float(i < 10)} for i in range(40)]
    df = pd.DataFrame(rows).assign(config="c", thinking=False, lang="en")
    t = by_group(df, "knowledge_domains", min_group_size=30).table.set_index("group")
    assert t.loc["History", "n"] == 60 and t.loc["History", "k"] == 30 and t.loc["History", "acc"] == 50.0
    assert t.loc["Art", "n"] == 40
    assert t.loc["History", "p"] == t.loc["History", "p"]  # a real comparison group (40 items): p is a number


def _en_ru(tmp_path, n_creative=40, n_factual=30):
    """En and Ru runs: creative items differ between languages, factual items are right in both."""
    for lang in ("en", "ru"):
        recs = [
            record(f"c{i}", lang=lang, judge="CORRECT" if (i < 10 if lang == "en" else i < 20) else "INCORRECT",
                   difficulty=1 + i % 5, knowledge_domains=["History"] + (["Art"] if i % 2 else []))
            for i in range(n_creative)
        ]
        recs += [record(f"f{i}", lang=lang, reasoning_type="factual", judge="CORRECT", difficulty=1 + i % 5)
                 for i in range(n_factual)]
        write_run(tmp_path / f"g_{lang}", recs, lang=lang)
    return load_runs(str(tmp_path / "g_*"))


def test_paired_tests_run_on_table_1s_population(tmp_path, shown):
    # En vs Ru used to include the 30 factual items (n = 70, Ru − En = 14.3 pp); Table 1 is
    # the creative subset, and so is the paired test now (n = 40, Ru − En = 25.0 pp)
    rs = _en_ru(tmp_path)
    out = report.paired_section(rs)
    row = out["cross_lingual"][0]
    assert row["n"] == 40 and row["diff"] == pytest.approx(25.0)
    assert out["population"].startswith("creative items") and out["n_items"] == 40
    text = "\n".join(map(str, shown))
    assert "60 factual responses are left out" in text and "Population: **creative items" in text
    assert "Judge coverage: **100.0%**" in text


def test_every_judge_section_shows_its_population_and_coverage(tmp_path, shown):
    rs = _en_ru(tmp_path)
    for section in (report.difficulty_section, report.groups_section, report.complexity_section,
                    report.creative_factual_section, report.paired_section):
        shown.clear()
        kwargs = {"semantic_distance": False} if section is report.complexity_section else {}
        out = section(rs, **kwargs)
        text = "\n".join(map(str, shown))
        assert "Population: **" in text, section.__name__
        assert "Judge coverage:" in text and out["judge_coverage"] == 1.0, section.__name__


def test_coverage_counts_errored_items_against_it(tmp_path):
    recs = [record(f"i{i}", judge="CORRECT") for i in range(18)]
    recs += [record("e0", status="error", em_strict=None), record("e1", status="error", em_strict=None)]
    write_run(tmp_path / "r_en", recs)
    rs = load_runs(str(tmp_path / "r_en"))
    cov = judge_coverage_by_run(rs.responses).iloc[0]
    assert (cov["n_items"], cov["n_verdict"], cov["n_error"]) == (20, 18, 2) and cov["coverage"] == 0.9
    assert "90.0%" in coverage_line(rs.responses) and "2 errored item(s) count against it" in coverage_line(rs.responses)


def test_a_run_whose_judge_gave_no_verdict_is_in_the_coverage_at_zero(tmp_path):
    """The judge errored on all 50 answers of run c: the coverage sentence left c out as "never judged" and read
    "100.0% (50 verdicts of 50 responses over 1 judged runs ...); lowest a / en 100.0%". A run the judge was
    never asked about (``not_run``) is still left out."""
    write_run(tmp_path / "a", [record(f"i{k}", model="a", judge="CORRECT") for k in range(50)], model="a")
    write_run(tmp_path / "c", [record(f"i{k}", model="c", judge_status="error") for k in range(50)], model="c")
    write_run(tmp_path / "n", [record(f"i{k}", model="n") for k in range(50)], model="n")  # no judge
    rs = load_runs(str(tmp_path / "*"))
    cov = judge_coverage_by_run(rs.responses).set_index("config")
    assert sorted(cov.index) == ["a", "c"] and (cov.loc["c", "n_verdict"], cov.loc["c", "coverage"]) == (0, 0.0)
    line = coverage_line(rs.responses)
    assert "50 verdicts of 100 responses over 2 judged runs" in line and "lowest c / en 0.0% (0 of 50)" in line


def test_the_coverage_sentence_does_not_call_refusals_judge_verdicts(tmp_path):
    """Refused and filtered answers have a judge value (not correct) without a judge call (``not_an_answer``,
    as a replayed refusal-scenario run writes them). Before, 6 judged and 4 withheld answers read "10 verdicts
    of 10 responses" beside a judge-vs-EM agreement over 6."""
    recs = [record(f"i{k}", judge="CORRECT", outcome="answer") for k in range(6)]
    recs += [record(f"r{k}", outcome="refused", judge="INCORRECT", judge_status="not_an_answer") for k in range(3)]
    recs += [record("f", outcome="filtered", judge="INCORRECT", judge_status="not_an_answer")]
    write_run(tmp_path / "r_en", recs)
    line = coverage_line(load_runs(str(tmp_path / "r_en")).responses)
    assert ("100.0%** (10 values of 10 responses: 6 judge verdicts and 4 refused or filtered answers counted not "
            "correct, over 1 judged runs;") in line


def test_tiny_p_values_and_missing_values_in_section_tables(tmp_path, shown):
    # a steep fall over difficulty: the trend p is about 1e-30; it printed as 0.0
    recs = [record(f"d{d}_{i}", difficulty=d, judge="CORRECT" if i < 100 - 20 * d else "INCORRECT")
            for d in range(1, 6) for i in range(100)]
    write_run(tmp_path / "r_en", recs)
    report.difficulty_section(load_runs(str(tmp_path / "r_en")))
    html = "\n".join(s for s in shown if isinstance(s, str) and "<table" in s)
    trend = next(s for s in shown if isinstance(s, str) and "<th>p (Holm)</th>" in s)
    assert trend.count("<td>&lt; 0.0001</td>") == 2  # p and p_holm (before: 0.0 and 0.0)
    assert ">nan<" not in html and ">None<" not in html
    shown.clear()
    frame = pd.DataFrame({"x": [1.0, float("nan")], "p": [0.5, float("nan")], "y": ["a", None],
                          "z": pd.Series([None, None], dtype=object), "w": pd.array([pd.NA, 1], dtype="Int64")})
    show(frame)
    assert len(re.findall(r"<td[^>]*>–</td>", shown[-1])) == 6 and "<td>0.5000</td>" in shown[-1]
    assert "None" not in shown[-1] and "&lt;NA&gt;" not in shown[-1]  # the runs table showed None in 144 cells


def test_creative_vs_factual_counts_items_under_item_headers(tmp_path, shown):
    """The shared column labels read ``n_factual`` as CREATE's "factual paths": the table here counts items."""
    report.creative_factual_section(_en_ru(tmp_path))
    html = "\n".join(s for s in map(str, shown) if "<table" in s)
    assert ">creative items<" in html and ">factual items<" in html and "factual paths" not in html


def test_the_paired_table_names_items_not_run_on_one_side_as_items(tmp_path, shown):
    """``n_a_only`` / ``n_b_only`` are items one configuration ran and the other did not; the table headed them
    "queries (a only)" / "queries (b only)", the CREATE report's header for the same field names."""
    write_run(tmp_path / "a", [record(f"i{k}", model="m", effort="low", judge="CORRECT") for k in range(6)],
              model="m", effort="low")
    write_run(tmp_path / "b", [record(f"i{k}", model="m", effort="high", judge="INCORRECT") for k in range(4)],
              model="m", effort="high")
    report.paired_section(load_runs(str(tmp_path / "*")))
    html = next(s for s in shown if isinstance(s, str) and "<table" in s and "dropped" in s)
    assert "<th>not run in b</th>" in html and "<th>not run in a</th>" in html and "queries" not in html


def test_the_repeatability_table_says_it_counts_factual_items_too(tmp_path, shown):
    """The line above the agreement tables names the creative items (Table 1's population); the repeatability
    table below counts every response with two verdicts, factual ones included (n = 6 here, 4 creative), and
    did not say so."""
    recs = [record(f"c{k}", judge="CORRECT", extra={"judge_repeat": "CORRECT"}) for k in range(4)]
    recs += [record(f"f{k}", reasoning_type="factual", judge="CORRECT", extra={"judge_repeat": "INCORRECT"})
             for k in range(2)]
    write_run(tmp_path / "r_en", recs)
    out = report.reliability_section(load_runs(str(tmp_path / "r_en")), n_boot=20)
    assert out["n_repeat_pairs"] == 6
    text = "\n".join(s for s in shown if isinstance(s, str) and "Judge repeatability" in s)
    assert "over all responses (creative and factual" in text
