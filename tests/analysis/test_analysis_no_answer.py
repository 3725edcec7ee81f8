"""One rule for an item without an answer, and no test without data.

An errored, failed or not-run item is left out of every paired and agreement statistic (never
counted wrong); a refused or filtered answer is the model's own behaviour: not correct, kept in n.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.analysis.paired import compare_configs, cross_lingual
from cresowlve_core.analysis.reliability import judge_coverage, judge_repeatability, judge_vs_em
from cresowlve_core.analysis.table import (
    results_long,
    table1_display,
    table1_latex,
    table1_wide,
)
from cresowlve_core.stats import mcnemar


def _rec(i: str, right: bool | None, lang: str = "en", model: str = "m", **kw):
    """A judged answer (right / wrong), or an errored call when ``right`` is None."""
    if right is None:
        return record(i, lang=lang, model=model, status="error", outcome="error", em_strict=None, em_lenient=None, **kw)
    return record(i, lang=lang, model=model, em_strict=right, em_lenient=right,
                  judge="CORRECT" if right else "INCORRECT", outcome="answer", **kw)


def _refused(i: str, lang: str = "en", model: str = "m", outcome: str = "refused"):
    return record(i, lang=lang, model=model, outcome=outcome, em_strict=False, em_lenient=False,
                  judge="INCORRECT", judge_status="not_an_answer", prediction=None,
                  scores={"em_strict": False, "em_lenient": False, "judge": False})


def test_errored_and_failed_items_have_no_value_refusals_count_not_correct(tmp_path):
    write_run(tmp_path / "r", [
        _rec("ok", True), _rec("err", None),
        record("failed", status="error", outcome="failed", em_strict=None, em_lenient=None),
        _refused("ref"), _refused("fil", outcome="filtered"),
        record("old", em_strict=True, em_lenient=True, judge="CORRECT"),  # an older record without ``outcome``
    ])
    rs = load_runs(tmp_path / "r")
    df = rs.responses.set_index("id")
    for metric in ("em_strict", "em_lenient", "judge"):
        assert math.isnan(df.loc["err", metric]) and math.isnan(df.loc["failed", metric])  # no answer: no value
        assert df.loc["ref", metric] == 0.0 and df.loc["fil", metric] == 0.0  # the model's behaviour: not correct
        assert df.loc["old", metric] == 1.0
    run = rs.runs.iloc[0]
    assert (run["n_error"], run["n_refused"], run["n_filtered"]) == (2, 1, 1)


def test_en_vs_ru_leaves_errored_items_out_and_says_how_many(tmp_path):
    # Ru right on 0-19; En right on 0-9 and errored on 10-19: counting the errors as wrong made
    # 10 "Ru right / En wrong" pairs out of nothing (exact p = 0.002). They are not pairs.
    write_run(tmp_path / "en", [_rec(f"i{k:02d}", True if k < 10 else None if k < 20 else False) for k in range(40)])
    write_run(tmp_path / "ru", [_rec(f"i{k:02d}", k < 20, lang="ru") for k in range(39)]
              + [_rec("i39", None, lang="ru")], lang="ru")
    row = cross_lingual(load_runs(str(tmp_path / "*"))).iloc[0]
    assert row["n"] == 29 and row["ru_right_en_wrong"] == 0 and row["en_right_ru_wrong"] == 0
    assert (row["n_error_en"], row["n_error_ru"], row["n_error_both"], row["n_unscored"]) == (10, 1, 0, 0)
    assert row["p"] == 1.0 and row["diff"] == 0.0
    assert "10 errored in En" in row["dropped"] and "1 errored in Ru" in row["dropped"]


def test_compare_configs_counts_dropped_pairs_per_side(tmp_path):
    write_run(tmp_path / "a", [_rec(f"i{k}", None if k < 3 else True, model="x") for k in range(10)], model="x")
    write_run(tmp_path / "b", [_rec(f"i{k}", None if k in (0, 5) else False, model="y") for k in range(10)]
              + [_rec("extra", True, model="y")], model="y")
    row = compare_configs(load_runs(str(tmp_path / "*")), [("x", "y")], include_defaults=False).iloc[0]
    assert (row["n_error_a"], row["n_error_b"], row["n_error_both"], row["n_b_only"]) == (2, 1, 1, 1)
    assert row["n"] == 6 and row["acc_a"] == 100.0 and row["acc_b"] == 0.0
    assert "1 not run in x" in row["dropped"]


def test_table1_bounds_stay_apart_at_40_percent_errors(tmp_path):
    # 10 items: 4 errored, 6 answered (3 right). Errors are unknown, not wrong: 30% if all were wrong,
    # 70% if all were right; the accuracy of the answered items is 50% over n = 6.
    write_run(tmp_path / "r_en", [_rec(f"i{k}", None if k < 4 else k < 7) for k in range(10)])
    long = results_long(load_runs(tmp_path / "r_en"))
    judge = long[long["metric"] == "judge"].iloc[0]
    assert (judge["k"], judge["n"], judge["n_error"], judge["n_all"]) == (3, 6, 4, 10)
    assert (judge["bound_low"], judge["bound_high"]) == pytest.approx((30.0, 70.0))
    assert judge["pct"] == pytest.approx(50.0) and judge["pct_comparable"] == pytest.approx(30.0)


def test_table1_and_exports_show_refused_and_filtered(tmp_path):
    recs = [_rec(f"i{k}", k < 5) for k in range(7)] + [_refused("r1"), _refused("r2"), _refused("f1", outcome="filtered")]
    write_run(tmp_path / "r_en", recs)
    long = results_long(load_runs(tmp_path / "r_en"))
    judge = long[long["metric"] == "judge"].iloc[0]
    assert (judge["k"], judge["n"], judge["n_refused"], judge["n_filtered"]) == (5, 10, 2, 1)  # in n, not correct
    cell = table1_display(long).xs("n scored/all", axis=1, level=2).iloc[0, 0]
    assert "2 refused" in cell and "1 filtered" in cell
    wide = table1_wide(long)
    assert wide["en_llm_judge_n_refused"].iloc[0] == 2 and wide["en_llm_judge_n_filtered"].iloc[0] == 1
    assert "refused" in table1_latex(long) and "filtered" in table1_latex(long)


def test_kappa_on_answered_items_only():
    # 50 answered items (κ = 0.4, the Wikipedia example) plus 20 errored ones that both "raters" call wrong
    judge = [1.0] * 20 + [1.0] * 5 + [0.0] * 10 + [0.0] * 15 + [0.0] * 20
    em = [1.0] * 20 + [0.0] * 5 + [1.0] * 10 + [0.0] * 15 + [0.0] * 20
    status = ["ok"] * 50 + ["error"] * 20
    df = pd.DataFrame({"config": "m", "lang": "en", "id": [f"i{k}" for k in range(70)], "judge": judge,
                       "em_strict": em, "status": status, "reasoning_type": "creative"})
    row = judge_vs_em(df).set_index("config").loc["m"]
    assert row["n"] == 50 and row["n_error"] == 20 and row["kappa"] == pytest.approx(0.4)


def _kappa_frame(rng: np.random.Generator, config: str, acc: float, n: int = 300) -> pd.DataFrame:
    truth = rng.random(n) < acc
    em = truth & (rng.random(n) < 0.7)
    judge = truth ^ (rng.random(n) < 0.05)
    return pd.DataFrame({"config": config, "lang": "en", "id": [f"i{k}" for k in range(n)], "judge": judge.astype(float),
                         "em_strict": em.astype(float), "status": "ok", "reasoning_type": "creative"})


def test_pooled_kappa_summarises_per_run_values_with_a_two_level_interval():
    rng = np.random.default_rng(5)
    df = pd.concat([_kappa_frame(rng, c, a) for c, a in (("a", 0.1), ("b", 0.4), ("c", 0.7), ("d", 0.85))])
    out = judge_vs_em(df, n_boot=300, seed=1).set_index("config")
    per_run = out.loc[["a", "b", "c", "d"], "kappa"]
    pooled = out.loc["all runs"]
    assert pooled["kappa"] == pytest.approx(per_run.mean())  # a summary of per-run values, not a pooled table
    assert "runs and items" in pooled["kappa_note"] and "4 runs" in pooled["kappa_note"]
    assert pooled["kappa_low"] < pooled["kappa"] < pooled["kappa_high"]
    again = judge_vs_em(df, n_boot=300, seed=1).set_index("config").loc["all runs"]
    assert (again["kappa_low"], again["kappa_high"]) == (pooled["kappa_low"], pooled["kappa_high"])  # seeded


def test_mcnemar_without_pairs_is_not_tested():
    t = mcnemar(0, 0, 0)
    assert t.method == "not tested" and math.isnan(t.p) and math.isnan(t.low) and math.isnan(t.high)
    assert mcnemar(0, 0, 5).p == 1.0  # pairs that all agree are a test with p = 1


def test_a_run_without_verdicts_is_not_tested_and_outside_holm(tmp_path):
    ids = [f"i{k:02d}" for k in range(40)]
    write_run(tmp_path / "a_en", [_rec(i, k < 10, model="a") for k, i in enumerate(ids)], model="a")
    write_run(tmp_path / "a_ru", [_rec(i, k < 25, lang="ru", model="a") for k, i in enumerate(ids)], model="a", lang="ru")
    write_run(tmp_path / "b_en", [_rec(i, k < 10, model="b") for k, i in enumerate(ids)], model="b")
    write_run(tmp_path / "b_ru", [record(i, lang="ru", model="b", em_strict=k < 9) for k, i in enumerate(ids)],
              model="b", lang="ru")  # the Ru run was never judged
    rs = load_runs(str(tmp_path / "*"))
    cross = cross_lingual(rs, "judge").set_index("config")
    b, a = cross.loc["b"], cross.loc["a"]
    assert b["n"] == 0 and b["method"] == "not tested" and math.isnan(b["p"]) and math.isnan(b["p_holm"])
    assert math.isnan(b["low"]) and math.isnan(b["high"]) and math.isnan(b["diff"])
    assert a["p_holm"] == a["p"]  # a family of one: the untested row does not count
    judge = results_long(rs).query("metric == 'judge' and config == 'b' and lang == 'ru'").iloc[0]
    assert judge["n"] == 0 and bool(judge["low_coverage"])


def test_judge_coverage_counts_refusals_the_judge_was_not_asked_about(tmp_path):
    write_run(tmp_path / "r", [_rec("a", True), _refused("b"), _refused("c", outcome="filtered"), _rec("d", None)])
    cov = judge_coverage(load_runs(tmp_path / "r").responses).iloc[0]
    assert (cov["scored"], cov["not_an_answer"], cov["not_run"], cov["model_error"]) == (1, 2, 1, 1)


def test_table1_upper_bound_never_counts_a_refusal_right(tmp_path):
    """A run the judge never scored: its judge cell has no value, and its bounds say what every missing value
    could be. Refused and filtered answers are not correct whatever the judge would say. Before, a run of 12
    refusals had judge bounds [0.0, 100.0]; 2 of 4 refusals [0.0, 100.0] too."""
    from cresowlve_core.analysis import table

    write_run(tmp_path / "judged", [record(f"i{k}", model="j", judge="CORRECT") for k in range(4)], model="j")
    write_run(tmp_path / "refuses", [record(f"i{k}", model="r", outcome="refused") for k in range(4)], model="r")
    write_run(tmp_path / "half", [record(f"i{k}", model="h", outcome="filtered" if k < 2 else None, em_strict=k == 3)
                                  for k in range(4)], model="h")
    long = table.results_table(load_runs(str(tmp_path / "*")))[0].set_index(["config", "metric"])
    assert (long.at[("r", "judge"), "bound_low"], long.at[("r", "judge"), "bound_high"]) == (0.0, 0.0)
    assert (long.at[("h", "judge"), "bound_low"], long.at[("h", "judge"), "bound_high"]) == (0.0, 50.0)
    assert long.at[("j", "judge"), "bound_high"] == 100.0


def test_latex_table1_says_how_many_items_each_accuracy_is_over(tmp_path):
    # 2 of 22 items errored: coverage 91% (no †), so without a note the LaTeX cell read as an accuracy over
    # all 22 items, beside the paper's value, which counts such items wrong
    write_run(tmp_path / "r", [_rec(f"i{k}", k < 10) for k in range(20)] + [_rec("e1", None), _rec("e2", None)])
    long = results_long(load_runs(tmp_path / "r"))
    tex = table1_latex(long)
    assert "50.00" in tex and r"$^\dagger$" not in tex
    note = next(line for line in tex.splitlines() if "items with a value" in line)
    assert "m / en: Exact Match n = 20 of 22, LLM Judge n = 20 of 22 (2 errored)" in note
    full = [_rec(f"i{k}", k < 10) for k in range(20)]
    write_run(tmp_path / "full", full)
    assert "items with a value" not in table1_latex(results_long(load_runs(tmp_path / "full")))
    unjudged = [record(f"i{k}", em_strict=k < 10) for k in range(20)]  # no judge: its column shows "--", no n
    write_run(tmp_path / "unjudged", unjudged)
    assert "items with a value" not in table1_latex(results_long(load_runs(tmp_path / "unjudged")))


def _graded(i: str, judge: bool, em: bool, model: str = "m"):
    return record(i, model=model, em_strict=em, em_lenient=em, judge="CORRECT" if judge else "INCORRECT",
                  outcome="answer", scores={"em_strict": em, "em_lenient": em, "judge": judge})


def test_judge_vs_em_covers_only_answers_both_graders_graded(tmp_path):
    """Refused and filtered answers (the judge is not asked; loading sets both graders' value to not correct)
    and answers without a verdict are no agreement: left out of n and κ, counted, and named. Before: the
    10 refusals and 2 filtered answers below were 12 more "both wrong", n = 62, agreement 0.758, κ 0.51
    instead of n = 50, 0.70 and 0.40 (the Wikipedia example)."""
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    recs = [_graded(f"i{k}", j, e) for k, (j, e) in enumerate(pairs)]
    recs += [_refused(f"r{k}") for k in range(10)] + [_refused(f"f{k}", outcome="filtered") for k in range(2)]
    recs += [record("u", outcome="answer", em_strict=True, judge_status="unscored"), _rec("e", None)]
    write_run(tmp_path / "m_en", recs)
    write_run(tmp_path / "all_refused_en", [_refused(f"i{k}", model="x") for k in range(4)], model="x")
    out = judge_vs_em(load_runs(str(tmp_path / "*")).responses, n_boot=200).set_index("config")
    m = out.loc["m"]
    assert (m["n"], m["both_wrong"], m["agreement"]) == (50, 15, pytest.approx(0.7))
    assert m["kappa"] == pytest.approx(0.4)
    assert (m["n_refused"], m["n_filtered"], m["n_unjudged"], m["n_error"]) == (10, 2, 1, 1)
    assert m["left_out"] == "10 refused, 2 filtered, 1 unjudged answer(s) and 1 errored response(s) left out"
    x = out.loc["x"]  # a run of refusals keeps its row: nothing graded, nothing agreed on
    assert (x["n"], x["n_refused"], x["both_wrong"]) == (0, 4, 0) and math.isnan(x["kappa"])
    summary = out.loc["all runs"]
    assert (summary["n"], summary["n_refused"], summary["n_filtered"]) == (50, 14, 2)
    assert summary["kappa"] == pytest.approx(0.4)


def test_judge_repeatability_counts_every_answer_it_leaves_out(tmp_path):
    """Shapes as a replayed ``--judge-repeat`` run writes them (judge-choice-error scenario): an answer whose
    first judge call errored gets no repeat, so it has neither verdict. Before, such answers and the refused
    ones were in no column (9 answers of a replayed run: n = 2, n_unpaired = 3, the other 4 nowhere)."""
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    recs = [_graded(f"i{k}", a, True) | {"extra": {"judge_repeat": "CORRECT" if b else "INCORRECT"}}
            for k, (a, b) in enumerate(pairs)]
    recs += [record(f"e{k}", outcome="answer", judge_status="error") for k in range(4)]  # the first judge call errored
    recs += [_graded("u", True, True) | {"extra": {"judge_repeat": None, "judge_repeat_status": "error"}}]
    recs += [_refused("r0"), _refused("r1"), _rec("x", None)]
    write_run(tmp_path / "m_en", recs)
    row = judge_repeatability(load_runs(tmp_path / "m_en").responses, n_boot=100).set_index("config").loc["m"]
    assert (row["n"], row["kappa"]) == (50, pytest.approx(0.4))
    assert (row["n_unjudged"], row["n_unpaired"], row["n_refused"], row["n_error"]) == (4, 1, 2, 1)
    assert row["left_out"] == "2 refused, 4 unjudged, 1 unpaired answer(s) and 1 errored response(s) left out"


def test_judge_coverage_counts_a_judge_status_it_does_not_know(tmp_path):
    """A hand-edited ``judge_status`` ("pending") was in no column of "Judge calls by status": 4 records read
    as 1 scored and 1 not run."""
    write_run(tmp_path / "r", [_rec("a", True), record("b", judge_status="pending"),
                               record("c", judge_status="pending", judge="CORRECT"), record("d")])
    cov = judge_coverage(load_runs(tmp_path / "r").responses).iloc[0]
    assert (cov["scored"], cov["not_run"], cov["unknown_status"]) == (1, 1, 2)


def test_judge_vs_em_of_runs_with_nothing_graded_names_what_it_left_out(tmp_path):
    """Every answer refused: no agreement, but a row that says why (n = 0, 5 refused), never an empty table."""
    write_run(tmp_path / "r_en", [_refused(f"r{k}") for k in range(5)])
    out = judge_vs_em(load_runs(tmp_path / "r_en").responses)
    assert out[["config", "n", "n_refused", "left_out"]].values.tolist() == [["m", 0, 5, "5 refused answer(s) left out"]]
