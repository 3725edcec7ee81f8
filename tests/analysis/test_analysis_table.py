"""Table 1: counts, Wilson intervals, paper overlay, CSV and LaTeX export."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.analysis.table import (
    latex_escape,
    load_paper_table,
    match_paper,
    model_key,
    paper_notes,
    results_long,
    style_table1,
    table1_display,
    table1_footnotes,
    table1_latex,
    table1_wide,
    write_table1_csv,
)

PAPER_CSV = """model,thinking,en_exact_match,en_llm_judge,ru_exact_match,ru_llm_judge
GPT-4.1,,13.44,24.99,17.03,26.06
GPT-5.4,none,9.41,20.96,15.38,26.54
GPT-5.4,medium,17.81,53.47,26.88,68.22
Qwen3.5-397B-A17B,adaptive,19.36,31.25,26.15,35.71
"""


def _runs(tmp_path):
    # gpt-4.1 (no effort), en: 10 creative items, 5 EM-strict correct, 8 judge-correct of 9 scored; + 1 factual
    recs = [
        record(
            f"i{i}",
            model="openai/gpt-4.1",
            em_strict=i < 5,
            em_lenient=i < 6,
            judge="CORRECT" if i < 8 else "INCORRECT",
        )
        for i in range(9)
    ]
    recs.append(record("i9", model="openai/gpt-4.1", judge_status="unscored"))
    recs.append(record("f0", model="openai/gpt-4.1", reasoning_type="factual", em_strict=True, judge="CORRECT"))
    write_run(tmp_path / "g41_en", recs, model="openai/gpt-4.1")
    # gpt-5.4 medium, ru only
    write_run(
        tmp_path / "g54_ru",
        [record(f"i{i}", lang="ru", em_strict=i < 2, judge="CORRECT") for i in range(4)],
        model="GPT-5.4",
        effort="Medium",
        lang="ru",
        thinking=True,
    )
    # unknown model
    write_run(tmp_path / "other_en", [record("i0", em_strict=True)], model="my-model", effort="high", thinking=True)
    paper = tmp_path / "paper.csv"
    paper.write_text(PAPER_CSV)
    return load_runs(str(tmp_path / "*_*")), load_paper_table(paper)[0]


def _cell(long, config, lang, metric):
    return long[(long["config"] == config) & (long["lang"] == lang) & (long["metric"] == metric)].iloc[0]


def test_counts_wilson_and_paper_overlay(tmp_path):
    rs, paper = _runs(tmp_path)
    long = results_long(rs, paper)
    em = _cell(long, "openai/gpt-4.1", "en", "em_strict")
    assert (em["k"], em["n"]) == (5, 10)  # the factual item is left out
    assert em["pct"] == 50.0
    assert em["low"] == pytest.approx(23.66, abs=0.01) and em["high"] == pytest.approx(76.34, abs=0.01)
    assert em["paper"] == 13.44 and em["delta"] == pytest.approx(50.0 - 13.44)
    judge = _cell(long, "openai/gpt-4.1", "en", "judge")
    assert (judge["k"], judge["n"]) == (8, 9)  # unscored left out of the denominator
    lenient = _cell(long, "openai/gpt-4.1", "en", "em_lenient")
    assert lenient["k"] == 6 and math.isnan(lenient["paper"])
    # case-insensitive model and effort match
    g54 = _cell(long, "GPT-5.4 (medium)", "ru", "judge")
    assert g54["paper"] == 68.22 and g54["pct"] == 100.0 and g54["group"] == "Thinking models"
    # unmatched model: blank paper
    assert long.loc[long["config"] == "my-model (high)", "paper"].isna().all()


def test_creative_only_can_be_switched_off(tmp_path):
    rs, paper = _runs(tmp_path)
    em = _cell(results_long(rs, paper, creative_only=False), "openai/gpt-4.1", "en", "em_strict")
    assert (em["k"], em["n"]) == (6, 11)


def test_rows_ordered_non_thinking_first_then_paper_order(tmp_path):
    rs, paper = _runs(tmp_path)
    wide = table1_wide(results_long(rs, paper))
    assert wide["config"].tolist() == ["openai/gpt-4.1", "GPT-5.4 (medium)", "my-model (high)"]
    assert wide.loc[0, "effort"] == "-" and wide.loc[0, "group"] == "Non-thinking models"
    assert wide.loc[0, "en_exact_match"] == 50.0 and wide.loc[0, "en_exact_match_paper"] == 13.44
    assert pd.isna(wide.loc[0, "ru_exact_match"])  # single-language run: blank Ru cells


def test_display_and_exports(tmp_path):
    rs, paper = _runs(tmp_path)
    long = results_long(rs, paper)
    disp = table1_display(long)
    row = ("Non-thinking models", "openai/gpt-4.1", "-")
    assert disp.loc[row, ("CresOWLve-En", "Exact Match", "% [95% CI]")] == "50.0 [23.7, 76.3]"
    assert disp.loc[row, ("CresOWLve-En", "Exact Match", "n scored/all")] == "10/10 (100%)"
    assert disp.loc[row, ("CresOWLve-En", "LLM Judge", "n scored/all")] == "9/10 (90%)"
    assert disp.loc[row, ("CresOWLve-En", "LLM Judge", "bounds")] == "[80.0, 90.0]"
    assert disp.loc[("Non-thinking models", "openai/gpt-4.1", "-"), ("CresOWLve-En", "Exact Match", "paper")] == "13.44"
    out = write_table1_csv(long, tmp_path / "out" / "t.csv", synthetic=True)
    back = pd.read_csv(out)
    assert {"en_exact_match", "en_llm_judge", "ru_exact_match", "ru_llm_judge", "en_em_lenient"} <= set(back.columns)
    assert back["synthetic"].all()
    tex = table1_latex(long, synthetic=True)
    assert tex.startswith("% SYNTHETIC DATA")
    assert r"\toprule" in tex and r"\textit{Non-thinking models}" in tex and r"\textit{Thinking models}" in tex
    assert r"50.00 {\scriptsize [23.7, 76.3]} {\scriptsize (13.44)}" in tex
    assert tex.count(r"\\") >= 6


def test_latex_escaping():
    assert latex_escape("A&B_50%#") == r"A\&B\_50\%\#"


def test_latex_rows_of_two_configurations_sharing_a_name_keep_their_own_numbers(tmp_path):
    # the model "m (low)" and the model "m" at effort low are both named "m (low)": the LaTeX showed one row,
    # under the first one's name and effort, with the other's accuracy (33.33 for a run at 66.67)
    write_run(tmp_path / "named_en", [record(f"i{k}", model="m (low)", em_strict=k < 2, outcome="refused" if k == 2
                                             else "answer") for k in range(3)], model="m (low)")
    write_run(tmp_path / "effort_en", [record(f"i{k}", model="m", effort="low", em_strict=k < 1) for k in range(3)],
              model="m", effort="low", thinking=True)
    tex = table1_latex(results_long(load_runs(str(tmp_path / "*_en"))))
    assert r"m (low) & - & 66.67 {\scriptsize" in tex and r"m & low & 33.33 {\scriptsize" in tex
    assert "m (low) / en: 1 refused" in tex


def test_missing_paper_table_gives_a_message(tmp_path):
    df, msg = load_paper_table(tmp_path / "nope.csv")
    assert df is None and "not found" in msg


def test_empty_runset_gives_empty_table(tmp_path):
    rs = load_runs(str(tmp_path / "none" / "*"))
    long = results_long(rs)
    assert long.empty and table1_wide(long).empty and table1_display(long).empty


# ---------------------------------------------------------------- denominators, coverage, overlay


def _judge_run(tmp_path, n_scored: int, n_all: int, name: str = "j_en", **manifest):
    recs = [record(f"i{i}", judge="CORRECT" if i % 2 == 0 else "INCORRECT", em_strict=i % 3 == 0) for i in range(n_scored)]
    recs += [record(f"u{i}", judge_status="unscored") for i in range(n_all - n_scored)]
    return write_run(tmp_path / name, recs, **manifest)


def test_every_cell_carries_n_coverage_and_bounds(tmp_path):
    _judge_run(tmp_path, 6, 20)
    long = results_long(load_runs(tmp_path / "j_en"))
    judge = _cell(long, "m", "en", "judge")
    assert (judge["k"], judge["n"], judge["n_all"]) == (3, 6, 20)
    assert judge["coverage"] == pytest.approx(0.3)
    assert judge["bound_low"] == pytest.approx(15.0) and judge["bound_high"] == pytest.approx(85.0)
    em = _cell(long, "m", "en", "em_strict")
    assert (em["n"], em["n_all"], em["coverage"]) == (20, 20, 1.0) and not em["low_coverage"]


def test_judge_below_coverage_threshold_is_greyed_and_footnoted(tmp_path):
    _judge_run(tmp_path, 6, 20)
    long = results_long(load_runs(tmp_path / "j_en"))
    assert bool(_cell(long, "m", "en", "judge")["low_coverage"])
    disp = table1_display(long)
    cell = disp.iloc[0][("CresOWLve-En", "LLM Judge", "% [95% CI]")]
    assert cell.startswith("†") and "(50.0" in cell  # never a plain number
    notes = table1_footnotes(long)
    assert any(n.startswith("†") and "scored 6 of 20" in n and "15.0%" in n and "85.0%" in n for n in notes)
    html = style_table1(disp).to_html()
    assert "color: #9e9e9e" in html
    assert "\\textcolor{gray}" in table1_latex(long)
    # the threshold is a parameter
    assert not _cell(results_long(load_runs(tmp_path / "j_en"), coverage_threshold=0.25), "m", "en", "judge")[
        "low_coverage"
    ]


def test_unfinished_run_is_flagged_in_table1(tmp_path):
    write_run(tmp_path / "part_en", [record(f"i{i}", em_strict=True) for i in range(3)], n_items=10)
    write_run(tmp_path / "done_ru", [record("i0", lang="ru")], lang="ru", finished_at="2026-01-01T00:00:00")
    rs = load_runs(str(tmp_path / "*"))
    runs = rs.runs.set_index("run_id")
    assert (runs.loc["part_en", "n_planned"], runs.loc["part_en", "n_records"]) == (10, 3)
    assert not runs.loc["part_en", "complete"] and runs.loc["done_ru", "complete"]
    long = results_long(rs)
    disp = table1_display(long)
    assert disp.iloc[0][("CresOWLve-En", "Exact Match", "% [95% CI]")].startswith("‡")
    assert not disp.iloc[0][("CresOWLve-Ru", "Exact Match", "% [95% CI]")].startswith("‡")
    assert any("did not finish (3 of 10 planned items)" in n for n in table1_footnotes(long))
    assert table1_wide(long).loc[0, "complete"] == False  # noqa: E712


def test_a_stopped_run_beside_finished_ones_marks_only_itself_unfinished(tmp_path):
    """A grid where one cell stopped (its manifest has ``stopped``, the others none): the finished
    runs stay finished. The runs frame holds NaN, not None, for a missing reason once another run
    has one, and NaN is truthy: every run was marked ‡ and noted "did not finish ... stopped: nan"."""
    write_run(tmp_path / "done_en", [record(f"i{i}") for i in range(3)])
    write_run(tmp_path / "done_ru", [record(f"i{i}", lang="ru") for i in range(3)], lang="ru")
    write_run(tmp_path / "typo_en", [], model="typo", n_items=3, stopped="fatal: model 'typo' failed with HTTP 404")
    write_run(tmp_path / "killed_ru", [record("i0", lang="ru")], model="typo", lang="ru", n_items=None, finished_at=None)
    rs = load_runs(str(tmp_path / "*"))
    complete = rs.runs.set_index("run_id")["complete"].to_dict()
    assert complete == {"done_en": True, "done_ru": True, "typo_en": False, "killed_ru": False}
    assert not any("nan" in n or "done_" in n for n in rs.notes), rs.notes
    assert "`typo_en`: no response records (stopped: fatal: model 'typo' failed with HTTP 404)." in rs.notes
    assert "`killed_ru` did not finish: 1 items; never marked finished." in rs.notes
    disp = table1_display(results_long(rs))
    row = disp.xs("m", level="Model").iloc[0]
    assert row[("CresOWLve-En", "Exact Match", "% [95% CI]")] == "0.0 [0.0, 56.1]"
    assert not any(str(v).startswith("‡") for v in row.values), row


def test_run_without_effort_never_matches_a_paper_row_with_one(tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text("model,thinking,en_exact_match,en_llm_judge,ru_exact_match,ru_llm_judge\nDeepSeek-V3.2,adaptive,15.33,25.47,10.48,26.44\n")
    table, _ = load_paper_table(paper)
    configs = pd.DataFrame({"model": ["deepseek/DeepSeek-V3.2", "DeepSeek-V3.2"], "effort": ["", "adaptive"]})
    assert match_paper(configs, table).isna().tolist() == [True, False]


def test_model_aliases_and_duplicate_paper_rows(tmp_path):
    assert model_key("openai/gpt-4.1") == model_key("GPT-4.1") == model_key("gpt-4.1-2025-04-14")
    assert model_key("google/gemini-3.1-pro-preview") == model_key("Gemini-3.1-Pro")
    assert model_key("my model", {"my-model": "GPT-4.1"}) == "gpt-4.1"
    paper = tmp_path / "paper.csv"
    paper.write_text(PAPER_CSV + "gpt-4.1,,99.0,99.0,99.0,99.0\n")
    table, _ = load_paper_table(paper)
    write_run(tmp_path / "a_en", [record("i0", model="openai/gpt-4.1", em_strict=True)], model="openai/gpt-4.1")
    write_run(tmp_path / "b_en", [record("i0", model="gpt-4.1-2025-04-14")], model="gpt-4.1-2025-04-14")
    long = results_long(load_runs(str(tmp_path / "*_en")), table)
    assert set(long.loc[long["metric"] == "em_strict", "paper"]) == {13.44}  # the first paper row wins
    notes = paper_notes(long, table)
    assert any("2 rows for GPT-4.1" in n for n in notes)
    assert any("same paper row" in n and "gpt-4.1-2025-04-14" in n and "openai/gpt-4.1" in n for n in notes)


def test_delta_carries_both_sides_uncertainty(tmp_path):
    from cresowlve_core.stats import diff_proportions

    rs, paper = _runs(tmp_path)
    em = _cell(results_long(rs, paper), "openai/gpt-4.1", "en", "em_strict")
    k_paper = round(13.44 * 2061 / 100)
    ref = diff_proportions(5, 10, k_paper, 2061)
    assert em["delta_low"] == pytest.approx(100 * ref.low) and em["delta_high"] == pytest.approx(100 * ref.high)
    assert em["paper_low"] < 13.44 < em["paper_high"]
    ours_only = 50.0 - 100 * 0.2366  # the half-width of our own interval
    assert em["delta"] - em["delta_low"] > ours_only  # wider than our side alone


def test_delta_uses_the_paper_comparable_accuracy(tmp_path):
    # the paper counted every response without "yes" as wrong. gpt-4.1 / en judge:
    # 8 right of 9 scored, 1 unscored, 10 items: ours 88.9%, paper-comparable 8/10 = 80.0%.
    from cresowlve_core.stats import diff_proportions

    rs, paper = _runs(tmp_path)
    judge = _cell(results_long(rs, paper), "openai/gpt-4.1", "en", "judge")
    assert judge["pct"] == pytest.approx(800 / 9)
    assert judge["pct_comparable"] == pytest.approx(80.0)
    assert judge["delta"] == pytest.approx(80.0 - 24.99)  # before: 88.89 - 24.99 = 63.90
    d = diff_proportions(8, 10, round(24.99 * 2061 / 100), 2061)
    assert (judge["delta_low"], judge["delta_high"]) == pytest.approx((100 * d.low, 100 * d.high))
    shown = table1_display(results_long(rs, paper))
    assert "paper-comparable %" in shown.columns.get_level_values(2)


def test_errored_items_count_against_coverage(tmp_path):
    # 10 items: 8 judged, 1 unscored, 1 errored (no answer). The judge's n is 8 (the error has no
    # value, like the unscored item), and only 8 items carry a verdict: coverage 80%.
    recs = [record(f"i{i}", judge="CORRECT" if i < 4 else "INCORRECT") for i in range(8)]
    recs += [record("i8", judge_status="unscored"), record("i9", status="error", em_strict=None, em_lenient=None)]
    write_run(tmp_path / "r_en", recs)
    judge = _cell(results_long(load_runs(str(tmp_path / "r_en"))), "m", "en", "judge")
    assert (judge["k"], judge["n"], judge["n_scored"], judge["n_error"]) == (4, 8, 8, 1)
    assert (judge["bound_low"], judge["bound_high"]) == pytest.approx((40.0, 60.0))
    assert judge["coverage"] == pytest.approx(0.8)
    assert judge["low_coverage"] and "1 errored items count against it" in table1_footnotes(
        results_long(load_runs(str(tmp_path / "r_en")))
    )[0]


def test_latex_says_what_the_unfinished_mark_means_and_how_many_items_the_run_did(tmp_path):
    # 10 of 2,061 planned items: the LaTeX showed "50.00 [23.7, 76.3]$^\ddagger$" and nothing else about the run
    write_run(tmp_path / "a_en", [record(f"i{k}", model="gpt-4.1", em_strict=k < 5) for k in range(10)],
              model="gpt-4.1", n_items=2061, finished_at=None)
    tex = table1_latex(results_long(load_runs(str(tmp_path / "a_en"))))
    assert r"50.00 {\scriptsize [23.7, 76.3]}$^\ddagger$" in tex
    assert (r"\par\smallskip{\footnotesize $^\ddagger$ The run did not finish; its numbers cover only the items done: "
            "gpt-4.1 / en: 10 of 2061 planned items.}") in tex
    write_run(tmp_path / "b_en", [record(f"i{k}", model="gpt-4.1", em_strict=k < 5) for k in range(10)], model="gpt-4.1")
    assert "did not finish" not in table1_latex(results_long(load_runs(str(tmp_path / "b_en"))))


def test_the_notebooks_table1_keeps_both_configurations_sharing_a_name(tmp_path):
    # the display's rows were the first configuration of each name: "m" at effort low vanished behind "m (low)"
    write_run(tmp_path / "named_en", [record(f"i{k}", model="m (low)", em_strict=k < 2) for k in range(3)], model="m (low)")
    write_run(tmp_path / "effort_en", [record(f"i{k}", model="m", effort="low", em_strict=k < 1) for k in range(3)],
              model="m", effort="low", thinking=True)
    display = table1_display(results_long(load_runs(str(tmp_path / "*_en"))))
    cells = display[("CresOWLve-En", "Exact Match", "% [95% CI]")]
    assert cells.to_dict() == {("Non-thinking models", "m (low)", "-"): "66.7 [20.8, 93.9]",
                               ("Thinking models", "m", "low"): "33.3 [6.1, 79.2]"}


def test_the_unfinished_footnote_names_each_configuration_sharing_a_name(tmp_path):
    write_run(tmp_path / "named_en", [record(f"i{k}", model="m (low)") for k in range(3)], model="m (low)", n_items=9,
              finished_at=None)
    write_run(tmp_path / "effort_en", [record(f"i{k}", model="m", effort="low") for k in range(2)], model="m",
              effort="low", thinking=True, n_items=8, finished_at=None)
    notes = [n for n in table1_footnotes(results_long(load_runs(str(tmp_path / "*_en")))) if "did not finish" in n]
    assert sorted(notes) == ["‡ m (low) / en: the run did not finish (2 of 8 planned items); its numbers cover only the "
                             "items done so far.", "‡ m (low) / en: the run did not finish (3 of 9 planned items); its "
                             "numbers cover only the items done so far."]
