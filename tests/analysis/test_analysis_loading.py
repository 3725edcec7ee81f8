"""Reading run directories: resume semantics, partial data, scoring rules, globbing."""

from __future__ import annotations

import math
import re

import pandas as pd
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis.loading import load_runs, main_subset, resolve_run_dirs


def test_last_record_per_item_wins_on_resume(tmp_path):
    write_run(
        tmp_path / "run_en",
        [
            record("a", status="error", em_strict=None, em_lenient=None),
            record("b", em_strict=True, em_lenient=True, judge="CORRECT"),
            record("a", em_strict=True, em_lenient=True, judge="CORRECT"),  # the retry supersedes the error
        ],
    )
    rs = load_runs(str(tmp_path / "*"))
    df = rs.responses.set_index("id")
    assert len(df) == 2
    assert df.loc["a", "status"] == "ok" and df.loc["a", "judge"] == 1.0
    run = rs.runs.iloc[0]
    assert (run["n_lines"], run["n_records"], run["n_superseded"], run["n_error"]) == (3, 2, 1, 0)


def test_scoring_rules_errors_and_unscored_unknown(tmp_path):
    write_run(
        tmp_path / "r",
        [
            record("ok", em_strict=False, em_lenient=True, judge="CORRECT"),
            record("err", status="error", em_strict=None, em_lenient=None),
            record("uns", em_strict=False, em_lenient=False, judge_status="unscored"),
            record("notrun", em_strict=True, em_lenient=True),
        ],
    )
    df = load_runs(tmp_path / "r").responses.set_index("id")
    assert math.isnan(df.loc["err", "em_strict"]) and math.isnan(df.loc["err", "judge"])  # no answer: no value
    assert math.isnan(df.loc["uns", "judge"]) and math.isnan(df.loc["notrun", "judge"])
    assert df.loc["ok", "em_lenient"] == 1.0 and df.loc["ok", "em_strict"] == 0.0
    assert df["judge"].mean() == 1.0  # CORRECT; the error, unscored and not_run left out


def test_errors_in_an_unjudged_run_leave_the_judge_empty(tmp_path):
    write_run(tmp_path / "r", [record("err", status="error", em_strict=None), record("ok", em_strict=True)])
    rs = load_runs(tmp_path / "r")
    assert rs.responses["judge"].isna().all() and not rs.has_judge()
    assert rs.responses["em_strict"].fillna(-1).tolist() == [-1, 1.0]


def test_manifest_gives_config_and_thinking(tmp_path):
    write_run(
        tmp_path / "x",
        [record("a", model="gpt-5.4", effort="medium")],
        model="gpt-5.4",
        effort="medium",
        thinking=True,
        judge={"model": "gpt-4o"},
    )
    rs = load_runs(tmp_path / "x")
    run = rs.runs.iloc[0]
    assert run["config"] == "gpt-5.4 (medium)" and bool(run["thinking"]) and run["judge_model"] == "gpt-4o"
    assert rs.responses["config"].tolist() == ["gpt-5.4 (medium)"]


def test_missing_manifest_falls_back_to_records(tmp_path):
    write_run(tmp_path / "nomani", [record("a", lang="ru", model="llama", effort=None)], manifest=False)
    rs = load_runs(tmp_path / "nomani")
    run = rs.runs.iloc[0]
    assert (run["model"], run["lang"], bool(run["thinking"])) == ("llama", "ru", False)


def test_duplicate_configuration_keeps_the_later_run(tmp_path):
    write_run(tmp_path / "old", [record("a", em_strict=False)], finished_at="2026-01-01T00:00:00")
    write_run(tmp_path / "new", [record("a", em_strict=True)], finished_at="2026-02-01T00:00:00")
    rs = load_runs(str(tmp_path / "*"))
    assert rs.runs["run_id"].tolist() == ["new"]
    assert rs.responses["em_strict"].tolist() == [1.0]
    assert any("`old`" in n and "kept the later run `new`" in n for n in rs.notes)


def test_a_run_of_the_same_model_with_another_setting_is_named_as_such_not_as_a_duplicate(tmp_path):
    """The same model on another endpoint at another temperature is another configuration: the note
    names each setting that differs instead of calling the earlier run a duplicate."""
    write_run(tmp_path / "vllm", [record("a", em_strict=False)], finished_at="2026-01-01T00:00:00",
              base_url="http://gpu-box:8000/v1", temperature=0.7)
    write_run(tmp_path / "hosted", [record("a", em_strict=True)], finished_at="2026-02-01T00:00:00",
              base_url="https://api.together.xyz/v1", temperature=0)
    rs = load_runs(str(tmp_path / "*"))
    assert rs.runs["run_id"].tolist() == ["hosted"]
    (note,) = [n for n in rs.notes if "`vllm`" in n]
    assert "duplicates" not in note and "only `hosted` is analysed" in note
    assert "base_url http://gpu-box:8000/v1 → https://api.together.xyz/v1" in note and "temperature 0.7 → 0" in note


def test_malformed_and_off_schema_lines_are_tolerated(tmp_path):
    d = write_run(tmp_path / "r", [record("a", em_strict=True), record("b")])
    with (d / "responses.jsonl").open("a") as fh:
        fh.write('{"id": "c", "lang": "en", "status": "o')  # killed mid-write
    rs = load_runs(d)
    assert sorted(rs.responses["id"]) == ["a", "b"]
    assert any("malformed" in n for n in rs.notes)

    e = write_run(
        tmp_path / "s", [record("a", difficulty=2.0, extra={"judge_repeat": ["CORRECT", "INCORRECT"]}, judge="CORRECT")]
    )
    df = load_runs(e).responses
    assert df["difficulty"].tolist() == [2.0] and df["judge_repeat"].tolist() == [1.0]


def test_judge_repeat_read_from_extra(tmp_path):
    write_run(
        tmp_path / "r",
        [
            record("a", judge="CORRECT", extra={"judge_repeat": "INCORRECT", "other": 1}),
            record("b", judge="INCORRECT"),
        ],
    )
    df = load_runs(tmp_path / "r").responses.set_index("id")
    assert df.loc["a", "judge_repeat"] == 0.0 and math.isnan(df.loc["b", "judge_repeat"])


def test_partial_data_no_judge_single_language_empty_run(tmp_path):
    write_run(tmp_path / "r_en", [record("a", em_strict=True), record("b")])
    write_run(tmp_path / "empty_ru", [], lang="ru")
    rs = load_runs(str(tmp_path / "*"))
    assert not rs.has_judge() and rs.langs == ["en"] and not rs.synthetic
    assert any("no response records" in n for n in rs.notes)
    assert set(rs.runs["n_records"]) == {0, 2}


def test_no_runs_is_empty_not_an_error(tmp_path):
    rs = load_runs(str(tmp_path / "nothing" / "*"))
    assert rs.empty and rs.runs.empty and rs.langs == [] and not rs.synthetic
    assert {"judge", "em_strict", "config", "difficulty"} <= set(rs.responses.columns)


def test_resolve_relative_to_root_directory_and_lists(tmp_path):
    write_run(tmp_path / "runs" / "a", [record("x")])
    write_run(tmp_path / "runs" / "b", [record("x")])
    (tmp_path / "runs" / "not_a_run").mkdir()
    by_glob = resolve_run_dirs("runs/*", root=tmp_path)
    by_parent = resolve_run_dirs("runs", root=tmp_path)
    by_list = resolve_run_dirs([tmp_path / "runs" / "b", "runs/a"], root=tmp_path)
    assert [p.name for p in by_glob] == ["a", "b"] == [p.name for p in by_parent]
    assert [p.name for p in by_list] == ["b", "a"]
    assert resolve_run_dirs(None) == []


def test_synthetic_flag_from_records_or_manifest(tmp_path):
    write_run(tmp_path / "a", [record("x", synthetic=True)])
    assert load_runs(tmp_path / "a").synthetic
    write_run(tmp_path / "b", [record("x")], synthetic=True)
    assert load_runs(tmp_path / "b").synthetic


def test_main_subset_drops_factual_only(tmp_path):
    write_run(tmp_path / "r", [record("a"), record("b", reasoning_type="factual"), record("c", reasoning_type=None)])
    sub, dropped = main_subset(load_runs(tmp_path / "r").responses)
    assert dropped == 1 and sorted(sub["id"]) == ["a", "c"]
    assert isinstance(sub, pd.DataFrame)


def test_reads_what_the_evaluation_runner_writes(tmp_path):
    """Integration: a run directory written by the real evaluation runner (fake HTTP server)."""
    import asyncio

    from fakeserver import FakeServer

    from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async
    from cresowlve_core.items import Item, ItemView

    items = [
        Item(
            id=f"chgk_{i:010x}",
            difficulty=1 + i % 5,
            reasoning_type="creative",
            en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}"),
        )
        for i in range(10)
    ]

    def answers(req):
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"VERDICT-{nonce}: CORRECT"
        n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
        return f"<Answer>{'Answer' if n % 2 == 0 else 'Wrong'}{n}</Answer>"

    with FakeServer(answers=answers) as srv:
        cfg = EvalConfig(
            model="fake-model",
            base_url=srv.base_url,
            run_dir=str(tmp_path / "run"),
            items="test",
            lang="en",
            judge_model="fake-judge",
            cache_path=str(tmp_path / "c.sqlite"),
            max_tokens=32,
        )
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
    rs = load_runs(tmp_path / "run")
    df = rs.responses
    assert len(df) == 10 and rs.runs.iloc[0]["config"] == "fake-model" and rs.langs == ["en"]
    assert df["em_strict"].mean() == out.summary["em_strict"] == 0.5
    assert df["judge"].mean() == 1.0 and rs.has_judge()
    assert sorted(df["difficulty"].unique()) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (df["input_tokens"] > 0).all()


def test_an_answer_written_before_its_verdict_is_not_counted_as_superseded(tmp_path):
    from test_analysis_fixtures import record, write_run

    from cresowlve_core.analysis import load_runs

    answered = record("a")  # ok, judge not run yet
    judged = record("a", judge="CORRECT")
    errored = record("b", status="error")
    retried = record("b", judge="INCORRECT")
    run = write_run(tmp_path / "r", [answered, judged, errored, retried])
    rs = load_runs(str(run))
    assert rs.runs["n_superseded"].iloc[0] == 1  # only the errored line of "b" was replaced
    assert len(rs.responses) == 2


def test_two_run_directories_of_one_name_in_two_folders_stay_two_runs(tmp_path):
    """``--run-dir gpt41/run`` and ``--run-dir gpt4o/run``: both manifests say ``run_id: run``. Each run
    keeps its own records and counts (they were pooled under one id, and 03 stopped with
    ``InvalidIndexError``), and the report's run column tells them apart by their folders."""
    write_run(tmp_path / "gpt41" / "run", [record("a", model="gpt-4.1", em_strict=True), record("b", model="gpt-4.1")],
              model="gpt-4.1")
    write_run(tmp_path / "gpt4o" / "run", [record("a", model="gpt-4o", outcome="refused", prediction=None)],
              model="gpt-4o")
    rs = load_runs(str(tmp_path / "*" / "run"))
    runs = rs.runs.set_index("model")
    assert runs.loc["gpt-4.1", "n_records"] == 2 and runs.loc["gpt-4.1", "n_refused"] == 0
    assert runs.loc["gpt-4o", "n_records"] == 1 and runs.loc["gpt-4o", "n_refused"] == 1
    assert sorted(rs.runs["run_id"]) == ["gpt41/run", "gpt4o/run"]
    assert rs.responses.groupby("run_id")["model"].nunique().eq(1).all()
    assert any("`run`" in n and "gpt41/run" in n and "gpt4o/run" in n for n in rs.notes)


def test_a_status_or_outcome_this_version_does_not_know_is_no_value_and_named(tmp_path):
    """A record edited by hand, or written by a newer cresowlve: ``status: pending`` and
    ``outcome: content_policy`` carrying ``scores`` of True. What they are is unknown, so they are
    neither right nor wrong (they were counted right: 2 of 3), and a note names them."""
    all_right = {"em_strict": True, "em_lenient": True, "judge": True}
    write_run(tmp_path / "r", [
        record("a", em_strict=True, em_lenient=True, judge="CORRECT"),
        record("b", status="pending", scores=all_right),
        record("c", outcome="content_policy", scores=all_right),
    ])
    rs = load_runs(tmp_path / "r")
    df = rs.responses.set_index("id")
    for metric in ("em_strict", "em_lenient", "judge"):
        assert df.loc["a", metric] == 1.0
        assert math.isnan(df.loc["b", metric]) and math.isnan(df.loc["c", metric])
    assert rs.runs.iloc[0]["n_error"] == 2
    (note,) = [n for n in rs.notes if "does not know" in n]
    assert "`r`" in note and "status 'pending'" in note and "outcome 'content_policy'" in note


def test_runs_judged_by_different_judges_or_asked_with_another_prompt_version_are_named(tmp_path):
    """Three models in one report: one judged under the paper's protocol, one asked with an older
    version of the solve prompt. Each row of Table 1 then measures a different judge or prompt as
    well as its model; nothing said so (the judge protocol was a column, the prompts not shown)."""
    nonce = {"model": "gpt-4.1", "protocol": "nonce-verdict"}
    write_run(tmp_path / "a", [record("x", model="a", judge="CORRECT")], model="a", judge=nonce,
              prompts=["judge@2", "solve_cot_en@2"])
    write_run(tmp_path / "b", [record("x", model="b", judge="CORRECT")], model="b",
              judge={"model": "gpt-4.1", "protocol": "paper"}, prompts=["judge_paper@1", "solve_cot_en@2"])
    write_run(tmp_path / "c", [record("x", model="c", judge="CORRECT")], model="c", judge=nonce,
              prompts=["judge@2", "solve_cot_en@1"])
    write_run(tmp_path / "d", [record("x", model="d", lang="ru")], model="d", lang="ru", judge=nonce,
              prompts=["judge@2", "solve_cot_ru@2"])
    notes = load_runs(str(tmp_path / "*")).notes
    (judges,) = [n for n in notes if "judged differently" in n]
    assert "gpt-4.1, protocol nonce-verdict (`a` / en, `c` / en, `d` / ru)" in judges
    assert "gpt-4.1, protocol paper (`b` / en)" in judges
    (prompts,) = [n for n in notes if "versions of one prompt" in n]
    assert "solve_cot_en@1 (`c` / en)" in prompts and "solve_cot_en@2 (`a` / en, `b` / en)" in prompts
    assert "solve_cot_ru" not in prompts and "judge" not in prompts  # one version each: nothing to say


def test_runs_of_one_judge_and_one_prompt_version_get_no_such_note(tmp_path):
    for model in ("a", "b"):
        write_run(tmp_path / model, [record("x", model=model, judge="CORRECT")], model=model,
                  judge={"model": "gpt-4.1", "protocol": "nonce-verdict"}, prompts=["judge@2", "solve_cot_en@2"])
    notes = load_runs(str(tmp_path / "*")).notes
    assert not [n for n in notes if "judged differently" in n or "versions of one prompt" in n]


def test_a_manifest_this_version_cannot_read_says_why(tmp_path):
    """A run directory from a newer cresowlve (``format_version`` 3), and one whose manifest was cut
    short: the note said only ``(ValidationError)`` / ``(JSONDecodeError)``."""
    write_run(tmp_path / "newer", [record("a", em_strict=True)], format_version=3)
    (write_run(tmp_path / "cut", [record("a", model="other")], model="other") / "manifest.json").write_text('{"kind": "ev')
    notes = load_runs(str(tmp_path / "*")).notes
    (newer,) = [n for n in notes if n.startswith("`newer`")]
    assert "format_version 3 is newer than this cresowlve reads (2); upgrade cresowlve" in newer
    assert "its settings (judge, temperature, items planned) are unknown here" in newer
    (cut,) = [n for n in notes if n.startswith("`cut`")]
    assert "not JSON (Unterminated string" in cut


def test_a_language_written_in_capitals_is_the_same_language(tmp_path):
    """A co-author's run in "EN" is the En run. Before, Table 1 said "No En runs: those columns are empty"
    beside its 6 records in the runs table, and En vs Ru found no configuration in both languages."""
    from cresowlve_core.analysis import paired, table

    write_run(tmp_path / "m__en", [record(f"i{i}", lang=" EN", em_strict=i % 2 == 0) for i in range(4)], lang="EN")
    write_run(tmp_path / "m__ru", [record(f"i{i}", lang="ru", em_strict=True) for i in range(4)], lang="ru")
    rs = load_runs(str(tmp_path / "*"))
    assert sorted(rs.runs["lang"]) == ["en", "ru"] and set(rs.responses["lang"]) == {"en", "ru"}
    display = table.table1_display(table.results_table(rs)[0])
    assert ("CresOWLve-En", "Exact Match", "% [95% CI]") in display.columns
    cross = paired.cross_lingual(rs, "em_strict")
    assert cross["n"].tolist() == [4] and cross["ru_right_en_wrong"].tolist() == [2]


def test_a_run_without_a_language_or_of_another_language_is_named_not_dropped_in_silence(tmp_path):
    """No language anywhere: every table groups by language and leaves the run out; French: Table 1 has no
    column for it. Each is named in a note; Table 1 of French runs alone is empty, not a crash (before:
    "ValueError: No objects to concatenate")."""
    from cresowlve_core.analysis import table

    recs = [record("a", em_strict=True), record("b")]
    for r in recs:
        del r["lang"]
    write_run(tmp_path / "nolang", recs, manifest=False)
    write_run(tmp_path / "m__fr", [record("a", lang="fr"), record("b", lang="fr")], lang="fr", model="f")
    rs = load_runs(str(tmp_path / "*"))
    assert ("`nolang`: no language recorded (neither its manifest nor its records name one): its 2 records are "
            "left out of every table below.") in rs.notes
    assert any(n.startswith("`m__fr`: language 'fr' is neither en nor ru") for n in rs.notes)
    assert table.table1_display(table.results_table(rs)[0]).empty


def test_a_value_not_of_its_fields_type_is_no_value_and_named_never_a_guess(tmp_path):
    """Hand-made records with strings where booleans and numbers belong. Before, the string "false" for
    strict EM read as correct (1.0), and a difficulty "hard" or a cost "n/a" crashed the load with a
    traceback (ValueError: invalid literal for int())."""
    d = write_run(tmp_path / "r", [record("a", em_strict="false", em_lenient=False),
                                   record("b", em_strict=True, difficulty="hard"),
                                   record("c", em_strict=0, difficulty=2.0, cost="n/a", scores={"judge": "yes"}),
                                   record("d", em_strict=1, difficulty="4")])
    rs = load_runs(d)
    df = rs.responses.set_index("id")
    assert math.isnan(df.at["a", "em_strict"]) and df.at["a", "em_lenient"] == 0.0
    assert df["em_strict"].tolist()[1:] == [1.0, 0.0, 1.0]
    assert math.isnan(df.at["b", "difficulty"]) and df.loc[["c", "d"], "difficulty"].tolist() == [2.0, 4.0]
    assert math.isnan(df.at["c", "cost"]) and math.isnan(df.at["c", "judge"])
    assert rs.notes == ["`r`: 4 values in responses.jsonl not of the field's type, read as no value (never guessed): "
                        "line 1 `em_strict` 'false'; line 2 `difficulty` 'hard'; line 3 `cost` 'n/a'; 1 more."]


def test_records_without_an_item_id_are_left_out_and_named_not_taken_for_retries(tmp_path):
    """Before, records without an id were one "item" whose last line won, and a blank id was an item: of
    5 records (3 without an id) 4 were kept, ids ['a', 'b', nan, '  '], one dropped with no note ("did not
    finish: 4 of 5 planned items"), and not counted as superseded either."""
    recs = [record("a", em_strict=True), record("b"), record("x"), record("y"), record("z")]
    del recs[2]["id"]
    recs[3]["id"] = None
    recs[4]["id"] = "  "
    rs = load_runs(write_run(tmp_path / "r", recs))
    assert sorted(rs.responses["id"]) == ["a", "b"]
    run = rs.runs.iloc[0]
    assert (run["n_records"], run["n_superseded"]) == (2, 0)
    assert ("`r`: 3 records without an item `id` left out: an answer is counted, scored and paired by its item."
            in rs.notes)


def test_a_judge_verdict_is_read_case_insensitively_and_any_other_text_is_no_value(tmp_path):
    """Before: a verdict "correct" or "Correct" (a hand-made or another tool's record) was scored wrong, and
    "maybe" was scored wrong too, with no note; extra.judge_repeat was already read case-insensitively."""
    recs = [record("a", judge="correct"), record("b", judge=" Correct "), record("c", judge="CORRECT"),
            record("d", judge="incorrect"), record("e", judge="maybe")]
    rs = load_runs(write_run(tmp_path / "r", recs))
    judge = rs.responses.set_index("id")["judge"]
    assert judge[["a", "b", "c", "d"]].tolist() == [1.0, 1.0, 1.0, 0.0] and math.isnan(judge["e"])
    assert rs.notes == ["`r`: 1 judged record with a verdict that is neither CORRECT nor INCORRECT ('maybe'): no judge "
                        "value (as if unscored), never wrong."]


def test_a_verdict_without_a_judged_status_is_named_not_dropped_in_silence(tmp_path):
    """Hand-made judge-only records that give the verdict but no judge_status: the status says whether the
    verdict is a judgment, so it is not read; before, nothing said so ("No LLM-judge scores" in the report)."""
    recs = [record("a", judge="CORRECT"), record("b", judge="CORRECT"), record("c", judge="INCORRECT")]
    recs[1]["judge_status"] = None
    del recs[2]["judge_status"]
    rs = load_runs(write_run(tmp_path / "r", recs))
    assert rs.responses["judge"].tolist()[0] == 1.0 and rs.responses["judge"].isna().sum() == 2
    assert rs.notes == ["`r`: 2 records with a `judge_verdict` but `judge_status` none, not scored or not_an_answer: "
                        "the verdict is not read (no judge value)."]


def test_a_grid_summary_that_is_damaged_or_another_json_file_is_one_error_naming_it(tmp_path):
    """``runs`` naming a ``grid.json`` that is torn, a list, or cells without a run directory: one InputError naming
    the file (a report's exit 2). Before: a bare JSONDecodeError or AttributeError naming no file (exit 1)."""
    import pytest

    from cresowlve_core.failures import InputError

    grid = tmp_path / "grid.json"
    for text in ('{"cells": [{"run_dir": "a"', "[1, 2]", '{"cells": [{"status": "done"}]}', '{"cells": "a"}'):
        grid.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=f"^{re.escape(str(grid))}: not a"):
            resolve_run_dirs(str(grid), root=tmp_path)
    grid.write_text('{"cells": [{"run_dir": "runs/x"}]}', encoding="utf-8")
    assert resolve_run_dirs(str(grid), root=tmp_path) == []  # readable: its cells' directories, none of them a run


def test_a_line_that_is_not_utf8_is_a_skipped_malformed_line_not_a_decode_error(tmp_path):
    """One corrupted byte in responses.jsonl made load_runs (and so 03_analysis and the explorer) raise
    UnicodeDecodeError ('utf-8' codec can't decode byte 0xff in position ...), naming no file or line."""
    d = write_run(tmp_path / "r", [record("a", em_strict=True), record("b")])
    with (d / "responses.jsonl").open("ab") as fh:
        fh.write(b'\xff\n')
    rs = load_runs(d)
    assert sorted(rs.responses["id"]) == ["a", "b"]
    assert "`r`: skipped 1 malformed line(s) in responses.jsonl." in rs.notes


def test_a_value_that_is_not_utf8_in_a_record_json_reads_is_a_skipped_malformed_line(tmp_path):
    """pyarrow's JSON reader took a prediction holding the byte 0xff into the table: every later use of the
    column raised (the explorer's text search: 'ArrowException: Unknown error: Wrapping ... failed')."""
    d = write_run(tmp_path / "r", [record("a", em_strict=True), record("b")])
    with (d / "responses.jsonl").open("ab") as fh:
        fh.write(b'{"id": "c", "lang": "en", "status": "ok", "prediction": "Quar\xfftz"}\n')
    rs = load_runs(d)
    assert sorted(rs.responses["id"]) == ["a", "b"]
    assert rs.responses["prediction"].fillna("").str.casefold().tolist()  # the column reads
    assert "`r`: skipped 1 malformed line(s) in responses.jsonl." in rs.notes


def test_a_run_directory_of_another_stage_is_left_out_with_a_note(tmp_path):
    """load_runs read any folder with a manifest as an evaluation run: a CREATE generation run's records
    (here with an id and a language, the shape of the rescore test) were counted as answers to items, and
    a synth run's records were noted as 'records without an item `id`' of a run with 'no response records yet'."""
    import json

    write_run(tmp_path / "eval", [record("a", em_strict=True)])
    create = tmp_path / "create"
    create.mkdir()
    (create / "manifest.json").write_text(json.dumps({"kind": "create_generate", "format_version": 2, "run_id": "create",
                                                      "model": "m", "lang": "en", "items": "test", "n_items": 1}))
    (create / "responses.jsonl").write_text(json.dumps({"id": "q1", "lang": "en", "status": "ok", "model": "m",
                                                        "raw_output": "a path"}) + "\n")
    rs = load_runs(str(tmp_path / "*"))
    assert rs.responses["id"].tolist() == ["a"] and rs.runs["run_id"].tolist() == ["eval"]
    assert ("`create`: a run directory of 'create_generate', not of `cresowlve eval`: left out (its records are not "
            "answers to items).") in rs.notes


def test_two_configurations_sharing_a_name_are_named_in_a_note(tmp_path):
    """The model ``m (low)`` and the model ``m`` at effort low are both ``m (low)``: the breakdowns by
    configuration pool their answers, which no note said."""
    write_run(tmp_path / "named_en", [record(f"i{k}", model="m (low)") for k in range(3)], model="m (low)")
    write_run(tmp_path / "effort_en", [record(f"i{k}", model="m", effort="low") for k in range(3)],
              model="m", effort="low", thinking=True)
    notes = [n for n in load_runs(str(tmp_path / "*_en")).notes if "names 2 configurations" in n]
    assert notes == ["`m (low)` (en) names 2 configurations (model 'm', effort low; model 'm (low)', effort -): Table 1 "
                     "gives each its row, but the breakdowns by configuration pool their answers; rename a model (a "
                     "grid's `label`) to keep them apart."]
    write_run(tmp_path / "other_en", [record(f"i{k}", model="n") for k in range(3)], model="n")
    assert not [n for n in load_runs(str(tmp_path / "other_en")).notes if "configurations (" in n]


def test_truncated_answers_are_counted_on_the_records_not_on_a_summary_of_an_earlier_pass(tmp_path):
    """A colleague's run: 3 answers finished, then resumed to 6 on a server that cut every new answer off at the
    token limit, and killed before its summary was written (summary.json of the first pass, manifest unfinished).
    03_analysis counts the 3 cut-off answers on the records. Before: "Truncated answers (cut off by the token
    limit): none.", from the first pass's summary.json."""
    import asyncio
    import json

    from replay.server import ReplayServer

    from cresowlve_core.analysis.report import truncation_note
    from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, load_eval_items

    run = tmp_path / "run"

    def evaluate(srv: ReplayServer, limit: int) -> None:
        cfg = EvalConfig(model="qwen3-8b", base_url=srv.base_url("llama-cpp"), run_dir=str(run), items="demo",
                         limit=limit, max_tokens=100, provider="llama-cpp", cache=False)
        asyncio.run(evaluate_async(cfg, load_eval_items(cfg), progress=False))

    with ReplayServer("default") as srv:
        evaluate(srv, 3)
    first_pass = (run / "summary.json").read_text()
    with ReplayServer("truncate", truncate_fraction=1.0) as srv:
        evaluate(srv, 6)
    assert json.loads((run / "summary.json").read_text())["n_truncated"] == 3
    (run / "summary.json").write_text(first_pass)  # what a kill before the end of the second pass leaves
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "finished_at": None}))

    rs = load_runs(str(run))
    assert rs.runs.loc[0, "n_truncated"] == 3 and int(rs.responses["truncated"].sum()) == 3
    assert truncation_note(rs).startswith("**Truncated answers** (cut off by the token limit, scored wrong as in the "
                                          "paper): `qwen3-8b` (en) 3.")
