"""The contamination verdict on the item as the unit: n = 1 per set, BCQ repeats, one metric per configuration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.contamination.itemstats import MIN_ITEMS, bcq_items, majority_test, matched_diff
from cresowlve_core.contamination.pipeline import ConfigResult
from cresowlve_core.contamination.quiz import bcq_table
from cresowlve_core.contamination.select import paired_sets
from cresowlve_core.contamination.verdict import verdict_lines, verdict_table
from cresowlve_core.reporting import jsonable, table
from cresowlve_core.stats import zero_width

BDQ = {"A": 40, "B": 5, "C": 5, "D": 50, "invalid": 0}
COMP_COLUMNS = ["set", "id", "mode", "rouge_l", "prefix_match", "continuation"]
MAJORITY = "BCQ target: items right in a majority of repeats (exact binomial vs 25%)"
DID = "Completion guided − general ROUGE-L: target − wrong_both (difference in differences)"


def result(bcq: list[dict], comp: list[dict] | None = None, levels: dict[str, float] | None = None) -> ConfigResult:
    b = pd.DataFrame(bcq, columns=["set", "id", "repeat", "choice", "correct"])
    c = pd.DataFrame(comp or [], columns=COMP_COLUMNS)
    ids = pd.concat([b[["id", "set"]], c[["id", "set"]]]).drop_duplicates("id")
    items = ids.assign(difficulty=[(levels or {}).get(i, 3.0) for i in ids["id"]])
    return ConfigResult("m", {}, pd.DataFrame(columns=["set", "id", "reason"]), [], pd.DataFrame(columns=["set", "id", "choice"]),
                        BDQ, ["B", "C"], True, b, c, items=items)


def quiz(set_name: str, item: str, right: int, repeats: int = 3) -> list[dict]:
    return [{"set": set_name, "id": item, "repeat": r, "correct": "B", "choice": "B" if r < right else "A"}
            for r in range(repeats)]


def completions(set_name: str, item: str, guided: float, general: float) -> list[dict]:
    return [{"set": set_name, "id": item, "mode": m, "rouge_l": v, "prefix_match": False, "continuation": "x"}
            for m, v in (("guided", guided), ("general", general))]


# ------------------------------------------------------------------ n = 1 per set


def test_one_item_per_set_is_not_tested():
    # before: "likely contaminated: the quiz and the completion test agree", every interval (1, 1), MWU p 0.5
    bcq = quiz("target", "t", 3) + quiz("wrong_both", "w", 0) + quiz("right_both", "r", 0)
    comp = completions("target", "t", 1.0, 0.1) + completions("wrong_both", "w", 0.1, 0.1)
    v = verdict_table(result(bcq, comp), n_boot=200).set_index("test")
    assert v.loc["overall", "reading"] == "not tested: too few items (n = 1; at least 20 per set)"
    assert v.loc["overall", "signal"] is None
    for test in (MAJORITY, "BCQ per-item accuracy, target − wrong_both", DID):
        assert v.loc[test, "reading"].startswith("too few items (n = 1): not tested")
        assert v.loc[test, "signal"] is None and np.isnan(v.loc[test, "p"])
    # a row not tested shows no interval and no test statistic, only its estimate (the report says so)
    paired = v.loc["Completion guided − general ROUGE-L, wrong_both (paired)"]
    assert paired["reading"].endswith("too few items (n = 1): not tested") and paired["statistic"] == 0.0
    assert np.isnan(paired["low"]) and np.isnan(paired["high"])
    few_bdq = result(bcq, comp)
    few_bdq.bdq_counts = {"A": 0, "B": 0, "C": 0, "D": 2, "invalid": 0}  # the main job's: χ² 6.000 was shown
    bdq = verdict_table(few_bdq, n_boot=200).set_index("test").loc["BDQ position bias (χ² vs uniform)"]
    assert "χ² too few items (n = 2): not tested" in bdq["reading"] and np.isnan(bdq["statistic"])


def test_the_floor_is_per_set():
    """25 target items, but only 5 in the control: the majority test runs, nothing that needs the control."""
    bcq = [r for i in range(25) for r in quiz("target", f"t{i}", 3)] + [r for i in range(5) for r in quiz("wrong_both", f"w{i}", 0)]
    v = verdict_table(result(bcq), n_boot=200).set_index("test")
    assert v.loc[MAJORITY, "signal"] and v.loc[MAJORITY, "p"] == pytest.approx(0.25 ** 25)
    assert v.loc["BCQ per-item accuracy, target − wrong_both", "reading"] == "too few items (n = 5): not tested"
    assert v.loc["overall", "reading"] == "not tested: too few items (n = 5; at least 20 per set)"
    assert MIN_ITEMS == 20


# ------------------------------------------------------------------ BCQ repeats


def test_bcq_14_of_40_items_not_42_of_120_trials():
    bcq = [r for i in range(40) for r in quiz("target", f"t{i}", 3 if i < 14 else 0)]
    # before: the pooled row, 42 of 120 "trials", p = 0.0093: "picks the original above chance"
    assert sps.binomtest(42, 120, 0.25, alternative="greater").pvalue == pytest.approx(0.00928, abs=1e-5)
    items = bcq_items(pd.DataFrame(bcq))
    test = majority_test(items)
    assert (test["k"], test["n"]) == (14, 40)
    assert test["p"] == pytest.approx(sps.binomtest(14, 40, 0.25, alternative="greater").pvalue)
    assert test["p"] == pytest.approx(0.1032, abs=1e-4)
    t = bcq_table(pd.DataFrame(bcq), 3)
    row = t[t["repeat"] == "items"].iloc[0]
    assert (row["k"], row["n"], row["accuracy"]) == (14, 40, 0.35) and row["p"] == pytest.approx(0.1032, abs=1e-4)
    assert 120 not in set(t["n"]) and t[t["repeat"] != "items"]["p"].isna().all()  # no pooled test, no per-repeat p
    v = verdict_table(result(bcq), n_boot=200).set_index("test")
    assert v.loc[MAJORITY, "n"] == 40 and not v.loc[MAJORITY, "signal"]
    assert v.loc[MAJORITY, "reading"].startswith("not above chance: 14 of 40 items right in a majority of their 3")


def test_majority_needs_more_than_half_the_repeats():
    bcq = quiz("target", "a", 2) + quiz("target", "b", 1) + quiz("target", "c", 1, repeats=2)
    items = bcq_items(pd.DataFrame(bcq)).set_index("id")
    assert items["majority"].tolist() == [True, False, False]  # 2/3 yes, 1/3 no, 1/2 (a tie) no
    assert items["accuracy"].tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 2])


# ------------------------------------------------------------------ zero-width intervals


def test_zero_width_interval_never_decides():
    assert zero_width(1.0, 1.0) and zero_width(float("nan"), 1.0) and not zero_width(0.1, 0.2)
    same = matched_diff(np.ones(25), [3] * 25, np.ones(25), [3] * 25, n_boot=200, seed=0)
    assert (same.low, same.high) == (0.0, 0.0) and same.p == 1.0  # all items alike, no difference: p decides, no
    bcq = [r for i in range(25) for r in quiz("target", f"t{i}", 1)] + [r for i in range(25) for r in quiz("wrong_both", f"w{i}", 1)]
    v = verdict_table(result(bcq), n_boot=200).set_index("test")
    row = v.loc["BCQ per-item accuracy, target − wrong_both"]
    assert (row["low"], row["high"]) == (0.0, 0.0) and row["signal"] is False and "zero width" in row["reading"]


# ------------------------------------------------------------------ difference in differences


def test_completion_is_a_difference_in_differences():
    """The target's questions are simply more predictable (general ROUGE high too): no signal."""
    rng = np.random.default_rng(3)
    comp = []
    for i in range(30):  # the same gain, 0.05–0.15, in both sets
        base = 0.7 + 0.1 * rng.random()
        comp += completions("target", f"t{i}", base + 0.05 + 0.1 * rng.random(), base)
        low = 0.2 + 0.1 * rng.random()
        comp += completions("wrong_both", f"w{i}", low + 0.05 + 0.1 * rng.random(), low)
    frame = pd.DataFrame(comp)
    guided = frame[frame["mode"] == "guided"].groupby("set")["rouge_l"].mean()
    # before: raw guided ROUGE, target − control, 0.5 (its interval above 0), and guided − general on the
    # target above 0: the completion signal was on
    assert guided["target"] - guided["wrong_both"] == pytest.approx(0.5, abs=0.03)
    v = verdict_table(result([], comp), n_boot=500, seed=1).set_index("test")
    did = v.loc[DID]
    assert abs(did["statistic"]) < 0.02 and did["low"] < 0 < did["high"] and did["signal"] is False
    assert v.loc["Completion guided − general ROUGE-L, target (paired)", "low"] > 0  # a gain, but not a target's own
    assert did["sets"] == "target (n = 30) vs wrong_both (n = 30), matched on difficulty (levels 3)"
    again = verdict_table(result([], comp), n_boot=500, seed=1).set_index("test")
    assert (again.loc[DID, "low"], again.loc[DID, "high"]) == (did["low"], did["high"])  # seeded


def test_completion_did_signals_a_memorised_target():
    comp = []
    for i in range(25):
        comp += completions("target", f"t{i}", 0.9 - 0.01 * i, 0.2)
        comp += completions("wrong_both", f"w{i}", 0.2 + 0.004 * i, 0.2)
    row = verdict_table(result([], comp), n_boot=500).set_index("test").loc[DID]
    assert row["statistic"] == pytest.approx(np.mean([0.7 - 0.01 * i for i in range(25)]) - np.mean([0.004 * i for i in range(25)]))
    assert row["low"] > 0 and row["p"] < 0.01 and row["signal"]


# ------------------------------------------------------------------ difficulty matching


def test_controls_are_matched_on_difficulty():
    """Easy items are recognised more often in every set; the target is mostly easy, the control mostly
    hard. The raw difference is large, the matched one is 0."""
    x = [1.0] * 16 + [0.0] * 4 + [1.0] * 1 + [0.0] * 4  # level 1: 16/20 right; level 5: 1/5
    xl = [1] * 20 + [5] * 5
    y = [1.0] * 4 + [0.0] * 1 + [1.0] * 4 + [0.0] * 16  # level 1: 4/5; level 5: 4/20
    yl = [1] * 5 + [5] * 20
    assert np.mean(x) - np.mean(y) == pytest.approx(0.36)
    m = matched_diff(x, xl, y, yl, n_boot=500, seed=0)
    assert m.diff == pytest.approx(0.0) and m.low < 0 < m.high and m.p > 0.3
    assert (m.n_target, m.n_control, m.levels) == (25, 25, ["1", "5"])
    lone = matched_diff(x + [1.0], xl + [4], y, yl, n_boot=100)
    assert lone.dropped_target == 1 and "left out: 1 target item(s) at levels the other set lacks" in lone.sets_text("target", "wrong_both")


# ------------------------------------------------------------------ one metric per configuration


def _write(root: Path, rows: dict[str, list[dict]]) -> str:
    for lang, recs in rows.items():
        d = root / f"m__{lang}"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"run_id": d.name, "kind": "eval", "model": "m", "lang": lang,
                                                     "n_items": len(recs), "finished_at": "2026-01-01T00:00:00Z"}))
        (d / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(root / "*")


def _rec(i: int, lang: str, em: bool, judge: str | None, status: str = "ok") -> dict:
    r = {"id": f"q{i}", "lang": lang, "status": status, "model": "m", "prediction": "x", "em_strict": em,
         "em_lenient": em, "difficulty": 1 + i % 5}
    if judge:
        r |= {"judge_status": "scored", "judge_verdict": judge}
    else:
        r |= {"judge_status": "unscored"}
    return r


def test_sets_use_one_metric_for_both_languages(tmp_path):
    """q0: judged right in Ru, unscored by the judge in En and wrong there by strict EM. Before, it
    was graded by the judge in Ru and by EM in En, and landed in the target set."""
    n = 20
    en = [_rec(0, "en", False, None)] + [_rec(i, "en", False, "INCORRECT") for i in range(1, n)]
    ru = [_rec(0, "ru", False, "CORRECT")] + [_rec(i, "ru", False, "INCORRECT") for i in range(1, n)]
    members, counts = paired_sets(load_runs(_write(tmp_path / "a", {"en": en, "ru": ru})))
    row = counts.iloc[0]
    assert (row["basis"], row["judge_coverage_en"], row["judge_coverage_ru"]) == ("judge", 0.95, 1.0)
    assert (row["target"], row["wrong_both"], row["unknown"]) == (0, 19, 1)  # q0: no judge value in En
    assert set(members["basis"]) == {"judge"} and "q0" not in set(members["id"])
    # the judge covers only half the English items: strict EM in both languages
    en_low = [_rec(i, "en", False, None if i < 10 else "INCORRECT") for i in range(n)]
    members, counts = paired_sets(load_runs(_write(tmp_path / "b", {"en": en_low, "ru": ru})))
    row = counts.iloc[0]
    assert (row["basis"], row["judge_coverage_en"]) == ("em_strict", 0.5)
    assert (row["target"], row["wrong_both"]) == (0, 20)  # q0 is wrong in Ru by strict EM
    assert set(members["basis"]) == {"em_strict"}


def test_errored_items_count_against_coverage_and_go_into_no_set(tmp_path):
    n = 20
    en = [_rec(i, "en", False, "INCORRECT", status="error" if i < 3 else "ok") for i in range(n)]
    ru = [_rec(i, "ru", i < 3, "CORRECT" if i < 3 else "INCORRECT") for i in range(n)]
    members, counts = paired_sets(load_runs(_write(tmp_path, {"en": en, "ru": ru})))
    row = counts.iloc[0]
    assert row["judge_coverage_en"] == pytest.approx(17 / 20) and row["basis"] == "em_strict"
    assert (row["no_answer"], row["target"], row["wrong_both"]) == (3, 0, 17)  # no answer is not "wrong in En"
    assert members["difficulty"].notna().all()


# ------------------------------------------------------------------ presentation


def test_missing_values_print_as_a_dash_and_record_as_null():
    v = verdict_table(result(quiz("target", "t", 3)), n_boot=50)
    text = "\n".join(verdict_lines(v))
    assert "nan" not in text.lower().replace("financ", "") and "None" not in text and "–" in text
    rec = jsonable({"rows": v, "x": float("nan"), "y": np.float64(0.5), "z": (1, float("inf"))})
    assert json.loads(json.dumps(rec, allow_nan=False))["x"] is None and rec["z"] == [1, None] and rec["y"] == 0.5
    shown = table(pd.DataFrame({"p": [3e-7, float("nan")], "x": [None, 0.25], "ok": [True, None]})).html
    import re

    assert re.findall(r"<td[^>]*>([^<]*)</td>", shown) == ["&lt; 0.0001", "–", "yes", "–", "0.25", "–"]


def test_a_refusal_in_one_language_puts_the_item_in_no_set(tmp_path):
    """Refused in English, right in Russian: not "right in Ru, wrong in En" (a target, the
    contamination evidence); counted as withheld. Refused in both: not a "wrong in both" control."""
    n = 20
    en = [_rec(i, "en", False, "INCORRECT") | ({"outcome": "refused", "prediction": ""} if i < 4 else {})
          for i in range(n)]
    ru = [_rec(i, "ru", i < 3, "CORRECT" if i < 3 else "INCORRECT") | ({"outcome": "filtered"} if i == 3 else {})
          for i in range(n)]
    members, counts = paired_sets(load_runs(_write(tmp_path, {"en": en, "ru": ru})))
    row = counts.iloc[0]
    assert (row["withheld"], row["target"], row["wrong_both"], row["no_answer"]) == (4, 0, 16, 0)
    assert not set(members["id"]) & {"q0", "q1", "q2", "q3"}


def test_an_answer_cut_off_at_the_token_limit_is_no_wrong_answer_for_the_sets(tmp_path):
    """Cut off in English before an answer, right in Russian: it was a target ("right in Ru, wrong in
    En"). Against the replay server's `truncate` scenario (tests/replay: half the solve prompts end
    with finish_reason length), a model right on every uncut answer had 17 targets, all 17 cut off
    in English, and 17 "wrong in both" controls cut off in both. A cut-off answer that is right
    still counts as right."""
    n = 20
    en = [_rec(i, "en", i in (8, 9), None) | ({"truncated": True} if i < 3 or i in (5, 8) else {}) for i in range(n)]
    ru = [_rec(i, "ru", i < 3 or i in (8, 9), None) | ({"truncated": True} if i in (5, 9) else {}) for i in range(n)]
    members, counts = paired_sets(load_runs(_write(tmp_path, {"en": en, "ru": ru})))
    row = counts.iloc[0]
    # q0-q2: cut off in En, right in Ru; q5: cut off in both; q8, q9: right though cut off
    assert (row["cut_off"], row["target"], row["wrong_both"], row["right_both"]) == (4, 0, 14, 2)
    assert not set(members["id"]) & {"q0", "q1", "q2", "q5"}
    assert set(members.loc[members["set"] == "right_both", "id"]) == {"q8", "q9"}


def test_a_bdq_without_a_valid_answer_measured_no_position_bias():
    """Every BDQ reply refused or without an option letter: each of A, B, C is "chosen fewer than N/4
    times", and the row read "non-preferred positions: A, B, C" as if the bias had been measured."""
    res = result(quiz("target", "i0", 1))
    res.bdq_counts = {"A": 0, "B": 0, "C": 0, "D": 0, "invalid": 7, "withheld": 5}
    res.non_preferred, res.truly_non_preferred = ["A", "B", "C"], True
    row = verdict_table(res, n_boot=50).iloc[0]
    assert row["n"] == 0 and row["reading"].startswith(
        "no valid BDQ answer: position bias not measured; the BCQ placed the original at any of A, B, C")


def test_a_bcq_none_of_whose_replies_named_an_option_tests_nothing():
    """Every BCQ reply names no option (invalid), the completion test signals. Invalid answers count
    as wrong, so the quiz read "not above chance: 0 of 22 items right", "no signal", and the overall
    "inconclusive: the completion test shows a signal, the other does not", a quiz result from
    replies none of which was a choice. Now the quiz is not tested and the rows say why."""
    sizes = (("target", 22), ("wrong_both", 21), ("right_both", 20))
    bcq = [{"set": s, "id": f"{s}{i}", "repeat": r, "correct": "B", "choice": None}
           for s, n in sizes for i in range(n) for r in range(3)]
    comp = [c for s, n in sizes for i in range(n)
            for c in completions(s, f"{s}{i}", 0.5 if s == "target" else 0.1, 0.1 + 0.001 * i)]
    v = verdict_table(result(bcq, comp), n_boot=200).set_index("test")
    for test in (MAJORITY, "BCQ per-item accuracy, target − wrong_both", "BCQ per-item accuracy, target − right_both"):
        assert v.loc[test, "reading"] == "not tested: none of the 189 BCQ replies named an option"
        assert v.loc[test, "signal"] is None and np.isnan(v.loc[test, "p"])
    assert v.loc[DID, "signal"] is True
    assert v.loc["overall", "reading"].startswith(
        "inconclusive: the completion test shows a signal, the other was not tested (no BCQ reply named an option)")
