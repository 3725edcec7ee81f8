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
    results_long,
    table1_display,
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
    assert (
        disp.loc[("Non-thinking models", "openai/gpt-4.1", "-"), ("CresOWLve-En", "Exact Match", "ours % [95% CI]")]
        == "50.0 [23.7, 76.3]"
    )
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


def test_missing_paper_table_gives_a_message(tmp_path):
    df, msg = load_paper_table(tmp_path / "nope.csv")
    assert df is None and "not found" in msg


def test_empty_runset_gives_empty_table(tmp_path):
    rs = load_runs(str(tmp_path / "none" / "*"))
    long = results_long(rs)
    assert long.empty and table1_wide(long).empty and table1_display(long).empty
