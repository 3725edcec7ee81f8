"""`cresowlve runs`, `cresowlve diff`, `eval` with environment defaults and an automatic run
directory, and `serve-reports`, as a user calls them."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from fakeserver import FakeServer
from test_eval_run import answer_for, cfg_for, make_items

from cresowlve_core.evaluation.listing import diff_runs, find_runs, run_row
from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, load_eval_items

REPO = Path(__file__).resolve().parents[2]


def _cli(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cresowlve_core.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})}, cwd=cwd or REPO)


def _everything_wrong(req):
    if "candidate_answer" in req.prompt:
        return answer_for(req)
    return "<Answer>nothing</Answer>"


def test_runs_lists_each_run_and_diff_finds_the_disagreements(tmp_path):
    items = make_items(8)
    with FakeServer(answers=answer_for) as srv:  # even items right: 4/8
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "a", tmp_path), items, progress=False))
    with FakeServer(answers=_everything_wrong) as srv:  # 0/8
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "b", tmp_path, model="other"), items, progress=False))
    dirs = find_runs(str(tmp_path / "runs" / "*"))
    assert [d.name for d in dirs] == ["a", "b"]
    row = run_row(dirs[0])
    assert (row.done, row.planned, row.k, row.n, row.metric, row.state) == (8, 8, 4, 8, "EM", "done")
    assert "EM  50.0% [21.5, 78.5]" in row.line() and row.n == 8 and row.mark == ""
    out = _cli(["runs", str(tmp_path / "runs" / "*")])
    assert out.returncode == 0 and "2 run(s)" in out.stdout and "fake-model" in out.stdout and "other" in out.stdout
    header = out.stdout.splitlines()[0].split()
    assert header[:5] == ["configuration", "effort", "lang", "n", "done/plan"] and "refused" in header

    d = diff_runs(dirs[0], dirs[1])
    assert (d.metric, d.n_both, d.only_a, d.only_b, len(d.disagreements)) == ("em_strict", 8, 4, 0, 4)
    assert d.method == "exact" and round(d.p, 3) == 0.125  # 2 * 0.5**4
    out = _cli(["diff", str(dirs[0]), str(dirs[1])])
    assert out.returncode == 0 and "4 disagreements" in out.stdout and "p = 0.1250" in out.stdout
    assert "A (right): 'Answer0'" in out.stdout and "B (wrong): 'nothing'" in out.stdout


def test_diff_leaves_items_without_an_answer_out_of_mcnemar_never_counting_them_wrong(tmp_path):
    """B's calls for the four items A got right failed: those items are no evidence either way, so
    they are left out and named, not four wins for A."""
    items = make_items(8)
    with FakeServer(answers=answer_for) as srv:  # even items right: 4/8
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path), items, progress=False))
    with FakeServer(answers=_everything_wrong) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, model="other"), items, progress=False))
    with (tmp_path / "b" / "responses.jsonl").open("a", encoding="utf-8") as f:
        for it in items[::2]:  # the latest record of each even item: a call that failed
            f.write(json.dumps({"id": it.id, "lang": "en", "status": "error", "outcome": "failed",
                                "error": "LLMError: the provider says: server_error"}) + "\n")
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert (d.n_both, d.only_a, d.only_b, d.n_errored, len(d.disagreements)) == (4, 0, 0, 4, 0)
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert "items scored in both: 4; 4 without an answer in A or B (errored or not run: left out, never wrong)" in out.stdout
    assert "McNemar (exact) p = 1.0000 over 4 items" in out.stdout


def test_diff_counts_an_item_b_never_ran_as_without_an_answer_not_as_scored_in_one_run(tmp_path):
    """B ran 4 of A's 6 items; A's sixth call failed. Neither missing item is scored in both runs, and the
    sixth is scored in neither: both are items without an answer in A or B. Before: "2 scored in one run
    only", and n_errored 0."""
    items = make_items(6)
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path), items, progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, model="other"), items[:4], progress=False))
    with (tmp_path / "a" / "responses.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": items[5].id, "lang": "en", "status": "error", "outcome": "error",
                            "error": "LLMError: HTTP 500"}) + "\n")
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert (d.n_both, d.n_errored, d.n_missing) == (4, 2, 0)
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert d.n_one_run == 2  # items 4 and 5 have no record in B
    assert ("items scored in both: 4; 2 without an answer in A or B (errored or not run: left out, never wrong; 2 of "
            "them recorded in one run only: not run in the other, or not in its item set)") in out.stdout.splitlines()[2]
    assert "scored in one run" not in out.stdout and "not scored in A or B" not in out.stdout


def test_runs_lists_a_run_whose_judge_errored_as_incomplete(tmp_path):
    """Every item answered, the judge errored on 2 of them (as `eval` exits 1 for): the run is not done.
    Before: "done"."""
    from replay.server import ReplayServer
    from replay.test_replay_cli import demo_prompt_words

    with ReplayServer("llamacpp-overflow", context_limit=max(demo_prompt_words(2))) as srv:
        cfg = EvalConfig(model="qwen3-8b", base_url=srv.base_url("llama-cpp"), run_dir=str(tmp_path / "run"),
                         items="demo", limit=2, judge_model="qwen3-8b", provider="llama-cpp", cache=False)
        asyncio.run(evaluate_async(cfg, load_eval_items(cfg), progress=False))
    row = run_row(tmp_path / "run")
    assert (row.done, row.planned, row.state) == (2, 2, "incomplete (judge: 2 errored, 0 not judged)")


def test_runs_names_configurations_as_the_analysis_does_and_marks_the_embedded_model(tmp_path, capsys):
    """A grid.json (as `report -p runs` takes it, relative to the project): the grid's label with the
    effort; refused/filtered counts read with defaults; the embedded model marked; diff warns En vs Ru."""
    from cresowlve_core.cli import main

    items = make_items(4)
    with FakeServer(answers=answer_for) as srv:
        for name in ("a__en", "a__ru"):  # the test items are English only: the second is relabelled Russian below
            asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "grid" / name, tmp_path, effort="medium"),
                                       items, progress=False))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "cresowlve-core"\n')
    (tmp_path / "grid" / "grid.json").write_text(json.dumps({
        "cells": [{"run_dir": "grid/a__en"}, {"run_dir": "grid/a__ru"}], "aliases": {"fake-model": "Fake 1"}}))
    summary = json.loads((tmp_path / "grid" / "a__ru" / "summary.json").read_text())
    (tmp_path / "grid" / "a__ru" / "summary.json").write_text(json.dumps({**summary, "n_refused": 2}))
    manifest = json.loads((tmp_path / "grid" / "a__ru" / "manifest.json").read_text())
    (tmp_path / "grid" / "a__ru" / "manifest.json").write_text(json.dumps({**manifest, "provider": "embedded",
                                                                                        "lang": "ru"}))
    out = _cli(["runs", "grid/grid.json"], cwd=tmp_path)  # relative to the project it is run in
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()[1:3]
    assert all(r.startswith("Fake 1 (medium)") for r in rows), out.stdout
    en, ru = sorted(rows, key=lambda r: " ru " in r)
    assert " embedded " in ru and " embedded " not in en
    assert (run_row(tmp_path / "grid" / "a__ru").n_refused, run_row(tmp_path / "grid" / "a__en").n_refused) == (2, 0)
    assert main(["diff", str(tmp_path / "grid" / "a__en"), str(tmp_path / "grid" / "a__ru")]) == 0
    assert "warning: A is 'en' and B is 'ru'" in capsys.readouterr().err


def test_runs_marks_a_run_that_spent_past_its_budget(tmp_path):
    """summary.json's spent_now keeps each role's max_cost and how far its spending passed it."""
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), make_items(2), progress=False))
    assert run_row(tmp_path / "run").mark == ""
    path = tmp_path / "run" / "summary.json"
    summary = json.loads(path.read_text())
    judge = {**summary["spent_now"]["judge"], "max_cost": 0.01, "over_budget": 0.004}
    path.write_text(json.dumps({**summary, "spent_now": {**summary["spent_now"], "judge": judge}}))
    row = run_row(tmp_path / "run")
    assert row.mark == "over budget" and " over budget " in row.line()


def test_runs_names_money_spent_outside_the_costs_and_keeps_an_unknown_part_unknown(tmp_path):
    """Billed answers with no text (the run's unusable_spent, as runner.unusable_spent writes it; in a summary
    written before it, spent_now's, as pricing.CostMeter.summary writes it) and replaced answers (replaced_cost) are
    named beside the cost column; a part of unknown cost makes the amount a lower bound, or unknown, never $0; a
    summary of a version that recorded neither adds nothing."""
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), make_items(2), progress=False))
    path = tmp_path / "run" / "summary.json"
    summary = json.loads(path.read_text())
    assert run_row(tmp_path / "run").spent_elsewhere == ""

    def row_with(**fields):
        path.write_text(json.dumps({**summary, **fields}))
        return run_row(tmp_path / "run")

    model = {"n_unusable": 2, "unusable_cost": 0.03, "n_unusable_unknown_cost": 0}
    spent = {**summary["unusable_spent"], "model": model}
    row = row_with(unusable_spent=spent, n_replaced=1, replaced_cost=0.02)
    assert row.spent_elsewhere == ("+ $0.0500 spent on 1 answer(s) replaced (--retry-truncated), 2 answer(s) billed "
                                   "with no text, not in cost")
    assert row.spent_elsewhere in row.line()
    row = row_with(unusable_spent=spent, n_replaced=1, replaced_cost=None)
    assert row.spent_elsewhere.startswith("+ ≥ $0.0300 spent on ")
    unpriced = {**model, "unusable_cost": 0.0, "n_unusable_unknown_cost": 2}
    assert row_with(unusable_spent={**spent, "model": unpriced}).spent_elsewhere == (
        "+ unknown spent on 2 answer(s) billed with no text, not in cost")
    older = {k: v for k, v in summary.items() if k not in ("unusable_spent", "n_replaced", "n_verdicts_replaced",
                                                            "replaced_cost")}
    path.write_text(json.dumps({**older, "spent_now": {**summary["spent_now"], "model": {
        **summary["spent_now"]["model"], **model}}}))
    assert run_row(tmp_path / "run").spent_elsewhere == "+ $0.0300 spent on 2 answer(s) billed with no text, not in cost"
    path.write_text(json.dumps({k: v for k, v in older.items() if k != "spent_now"}))
    assert run_row(tmp_path / "run").spent_elsewhere == ""
    row = row_with(n_replaced=1, replaced_cost="0.02")  # a hand-edited amount: the summary is not used
    assert row.spent_elsewhere == "" and "replaced_cost is" in row.state


def test_diff_warns_when_the_languages_differ(tmp_path, capsys):
    from cresowlve_core.evaluation.listing import language_warning

    for name, lang in (("en", "en"), ("ru", "ru"), ("en2", "en")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"kind": "eval", "lang": lang}))
    assert "'en' and B is 'ru'" in language_warning(tmp_path / "en", tmp_path / "ru")
    assert language_warning(tmp_path / "en", tmp_path / "en2") is None


def test_runs_on_nothing_says_where_it_looked(tmp_path):
    out = _cli(["runs", str(tmp_path / "none*")])
    assert out.returncode == 1 and "no evaluation runs found" in out.stderr


def test_eval_takes_model_and_base_url_from_the_environment_and_names_its_run_dir(tmp_path):
    data = tmp_path / "data"
    with FakeServer() as srv:  # echoes the prompt
        env = {"CRESOWLVE_MODEL": "env-model", "CRESOWLVE_BASE_URL": srv.base_url, "CRESOWLVE_DATA_DIR": str(data),
               "CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")}
        out = _cli(["eval", "--items", "demo", "--limit", "2"], env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (data / "runs" / "env-model__en" / "summary.json").exists()
    assert f"run directory: {data / 'runs' / 'env-model__en'}" in out.stderr
    missing = _cli(["eval", "--items", "demo"], env={"CRESOWLVE_MODEL": "", "CRESOWLVE_BASE_URL": ""})
    assert missing.returncode == 2 and "CRESOWLVE_MODEL" in missing.stderr


def test_serve_reports_serves_the_reports_directory(tmp_path):
    (tmp_path / "index.html").write_text("<html>the index</html>")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "cresowlve_core.cli", "serve-reports", "--reports-dir",
                             str(tmp_path), "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert f"http://127.0.0.1:{port}/index.html" in line
        deadline = time.monotonic() + 20
        while True:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=5).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert body == "<html>the index</html>"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_relative_run_paths_resolve_in_the_current_project_not_the_package_checkout(tmp_path, monkeypatch):
    """A second clone sharing one venv: relative `-p runs` globs find that clone's runs."""
    from cresowlve_core.analysis.loading import resolve_run_dirs

    with FakeServer(answers=answer_for) as srv:
        clone = tmp_path / "clone"
        (clone).mkdir()
        (clone / "pyproject.toml").write_text('[project]\nname = "cresowlve-core"\n')
        asyncio.run(evaluate_async(cfg_for(srv, clone / "data" / "runs" / "x__en", tmp_path), make_items(2),
                                   progress=False))
    monkeypatch.chdir(clone / "data")  # anywhere inside the clone
    assert resolve_run_dirs("data/runs/x__*") == [(clone / "data" / "runs" / "x__en").resolve()]
    monkeypatch.chdir(tmp_path)  # outside any clone: the package's own checkout, where no such run is
    assert resolve_run_dirs("data/runs/x__*") == []


def test_an_empty_report_says_so_on_the_terminal_and_exits_1(tmp_path):
    out = _cli(["report", "03_analysis", "-p", "runs", str(tmp_path / "nowhere" / "x__*"), "--reports-dir",
                str(tmp_path / "reports")], env={"CRESOWLVE_DATA_DIR": str(tmp_path / "data"),
                                                 "CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 1, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("empty report: no runs found") and "nowhere" in last and "0 run directories" in last
    assert (tmp_path / "reports" / "03_analysis_nowhere.html").exists()  # still written, named by its input


def test_two_renders_of_03_keep_their_own_exports_and_the_index_links_each(tmp_path):
    """An analysis render and a grid render (another output name) used to share 03_analysis_table1.csv."""
    import json

    from cresowlve_core.analysis.synthetic_runs import write_synthetic_runs
    from cresowlve_core.notebooks import run_notebook

    reports = tmp_path / "reports"
    write_synthetic_runs(tmp_path / "one", n_items=40, configs=1, seed=1)
    write_synthetic_runs(tmp_path / "two", n_items=40, configs=2, seed=2)
    fast = {"n_boot": 50, "semantic_distance": False}
    run_notebook("03_analysis", {"runs": str(tmp_path / "one" / "*"), **fast}, reports)
    run_notebook("03_analysis", {"runs": str(tmp_path / "two" / "*"), **fast}, reports, output_name="03_analysis_grid")
    one = (reports / "03_analysis_table1.csv").read_text().splitlines()
    two = (reports / "03_analysis_grid_table1.csv").read_text().splitlines()
    assert len(one) == 1 + 1 and len(two) == 1 + 2  # header + one row per configuration
    index = json.loads((reports / "index.json").read_text())
    by_key = {k: v for k, v in (index.get("reports") or index).items()}
    assert "03_analysis_table1.csv" in by_key["03_analysis"]["exports"]
    assert "03_analysis_grid_table1.csv" in by_key["03_analysis_grid"]["exports"]
    assert "03_analysis_table1.csv" not in by_key["03_analysis_grid"]["exports"]


def test_runs_counts_the_answers_of_a_run_killed_before_its_summary(tmp_path):
    """A kill -9 leaves records and no summary.json: the listing counts what is on disk, not 0."""
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), make_items(4), progress=False))
    (tmp_path / "run" / "summary.json").unlink()
    row = run_row(tmp_path / "run")
    assert (row.done, row.planned, row.n) == (4, 4, 0)
    assert row.state == "running or killed (no summary yet: accuracy not computed)"


def test_runs_does_not_call_a_synthetic_run_running_or_killed(tmp_path):
    """The main job's data/runs/synthetic (write_synthetic_runs: records and manifest, never a summary)
    were listed by `cresowlve runs` as "running or killed (no summary yet ...)", 36 runs nothing was
    running in or had killed."""
    from cresowlve_core.analysis import write_synthetic_runs

    (run,) = write_synthetic_runs(tmp_path / "synthetic", n_items=20, configs=1, langs=("en",))
    row = run_row(run)
    assert row.mark == "synthetic" and row.planned == 20 and row.n == 0
    assert row.state == "synthetic: written without a summary (accuracy not computed)"


def test_diff_reads_a_status_or_outcome_it_does_not_know_as_no_answer_as_03_does(tmp_path):
    """B's records say ``status: pending`` and ``outcome: content_policy`` (hand-edited, or a newer
    cresowlve): neither is an answer this version can score, so both are left out and counted, as in
    03_analysis; the outcome was scored as B's win."""
    items = make_items(4)
    with FakeServer(answers=_everything_wrong) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path), items, progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, model="other"), items, progress=False))
    recs = [json.loads(line) for line in (tmp_path / "b" / "responses.jsonl").read_text().splitlines()]
    right = {"em_strict": True, "em_lenient": True, "judge": None}
    with (tmp_path / "b" / "responses.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({**recs[0], "status": "pending", "scores": right}) + "\n")
        f.write(json.dumps({**recs[1], "outcome": "content_policy", "scores": right}) + "\n")
    d = diff_runs(tmp_path / "a", tmp_path / "b")
    assert (d.n_both, d.only_a, d.only_b, d.n_errored, d.n_unknown) == (2, 0, 0, 2, 2)
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert "2 without an answer in A or B" in out.stdout
    assert "2 with a status or outcome this version does not know" in out.stdout


def test_runs_does_not_call_a_run_killed_while_resuming_done(tmp_path):
    """A resume (``--retry-truncated``, or a second ``eval``) rewrites the manifest with
    ``finished_at: null`` and a ``resumed_at``, and leaves the earlier pass's summary.json until it
    finishes; killed in between (kill -9, observed), the run was listed ``done`` with the earlier
    pass's accuracy. It is listed as running or killed, its answers counted on disk."""
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), make_items(4), progress=False))
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    resumed = {**manifest, "finished_at": None, "resumed_at": "2026-12-07T03:13:05+00:00"}
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(resumed))
    row = run_row(tmp_path / "run")
    assert (row.done, row.planned, row.n) == (4, 4, 0)
    assert row.state == ("running or killed (resumed 2026-12-07T03:13:05+00:00, not finished: summary.json is of an "
                         "earlier pass; accuracy not computed)")


def test_diff_warns_when_the_judges_or_a_prompt_version_differ(tmp_path, capsys):
    """A judged under our protocol, B under the paper's: a judge-metric McNemar between them measures
    the two judges as well as the two runs, and said nothing of it."""
    items = make_items(4)
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path, judge_model="fake-judge"), items,
                                   progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, model="other", judge_model="fake-judge",
                                           judge_protocol="paper"), items, progress=False))
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert out.returncode == 0 and "metric: judge" in out.stdout
    assert "warning: A and B were judged differently: fake-judge, protocol nonce-verdict (A);" in out.stderr
    assert "fake-judge, protocol paper (B)" in out.stderr
    assert "versions of one prompt" not in out.stderr  # judge@2 and judge_paper@1 are two prompts
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "em_strict"])
    assert "judged differently" not in out.stderr  # the judge is not the metric compared

    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    prompts = [p.replace("solve_cot_en@2", "solve_cot_en@1") for p in manifest["prompts"]]
    (tmp_path / "b" / "manifest.json").write_text(json.dumps({**manifest, "prompts": prompts}))
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "em_strict"])
    assert "warning: A and B used different versions of one prompt: solve_cot_en@1 (B); solve_cot_en@2 (A)" in out.stderr


def test_diff_names_a_run_directory_of_a_hostile_name_on_one_plain_line(tmp_path):
    """A co-author's run directory named with an escape sequence and a line break: `runs` already
    printed it as one plain line; diff's ``A = ...`` / ``B = ...`` printed it raw."""
    items = make_items(2)
    hostile = tmp_path / "r\x1b[31mRED\nx"
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path), items, progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, hostile, tmp_path, model="other"), items, progress=False))
    out = _cli(["diff", str(tmp_path / "a"), str(hostile)])
    assert out.returncode == 0 and "\x1b" not in out.stdout
    assert out.stdout.splitlines()[1] == f"B = {tmp_path}/r [31mRED x"


def test_a_record_without_its_language_is_one_line_naming_the_file_in_eval_and_diff(tmp_path, capsys):
    """A line of responses.jsonl without ``lang`` (another tool's, or edited by hand): resuming the run and
    diffing it are refused with one line naming the file, the field and the record (exit 2), nothing sent.
    Before: KeyError: 'lang', a traceback and "bug"."""
    from cresowlve_core.cli import main

    items = make_items(2)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(it.model_dump_json() + "\n" for it in items))
    with FakeServer(answers=answer_for) as srv:
        args = ["eval", "--items", str(path), "--lang", "en", "--model", "m", "--base-url", srv.base_url,
                "--run-dir", str(tmp_path / "run"), "--no-cache"]
        assert main(args) == 0
        with (tmp_path / "run" / "responses.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"id": items[0].id, "status": "ok"}) + "\n")
        capsys.readouterr()
        sent = srv.total
        assert main(args) == 2
        assert srv.total == sent
        assert main(["diff", str(tmp_path / "run"), str(tmp_path / "run")]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 2
    for line in lines:
        assert line == (f"error: {tmp_path / 'run' / 'responses.jsonl'}: a record without 'lang' (every evaluation "
                        f"record has 'id' and 'lang'): {{\"id\": \"{items[0].id}\", \"status\": \"ok\"}}")


def _rewrite_records(run_dir: Path, edit) -> None:
    """``responses.jsonl`` of ``run_dir`` with its records passed through ``edit`` (a list in, a list out)."""
    path = run_dir / "responses.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in edit(recs)))


def test_runs_flags_a_summary_that_disagrees_with_the_records_it_describes(tmp_path):
    """A co-author's run directory: summary.json says 6 answered, while responses.jsonl holds 4 records (cut)
    or 2 errors in place of answers (records of another pass). Before: both listed "6/6 ... done"."""
    import shutil

    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "a", tmp_path), make_items(6), progress=False))
    for name in ("cut", "errored"):
        shutil.copytree(tmp_path / "runs" / "a", tmp_path / "runs" / name)
    _rewrite_records(tmp_path / "runs" / "cut", lambda recs: recs[:4])
    _rewrite_records(tmp_path / "runs" / "errored",
                     lambda recs: [{**r, "status": "error", "error": "HTTP 500"} if i < 2 else r for i, r in enumerate(recs)])
    rows = {d.name: run_row(d) for d in find_runs(str(tmp_path / "runs" / "*"))}
    assert rows["a"].state == "done"
    says = "summary disagrees with records: summary.json says ok 6, error 0, with a record 6; responses.jsonl holds "
    assert rows["cut"].state == says + "ok 4, error 0, with a record 4"
    assert rows["errored"].state == says + "ok 4, error 2, with a record 6"
    out = _cli(["runs", str(tmp_path / "runs" / "*")])
    assert out.returncode == 0 and out.stdout.count("summary disagrees with records") == 2, out.stdout
    assert out.stdout.splitlines()[-1] == ("3 run(s); 2 whose summary.json disagrees with its records: "
                                           "`cresowlve rescore --run-dir RUN_DIR` recomputes it from them")


def test_the_record_count_of_runs_agrees_with_the_runs_own_reader(tmp_path):
    """Records the runner appended over several passes (errors, then answers; the judge's verdicts), one
    rewritten by hand in another key order with an escaped id, and a torn last line: ``runs`` counts each
    item's latest record as the run reads them, and finds no disagreement with the summary."""
    from collections import Counter

    from cresowlve_core.evaluation.listing import record_counts
    from cresowlve_core.evaluation.runner import latest_records
    from cresowlve_core.runtime import RunDir

    items = make_items(6)
    items[0] = items[0].model_copy(update={"id": 'chgk_"quoted"\u00e9'})
    first_pass = [True]
    faults = lambda req: "500" if first_pass[0] and "Puzzle number 3:" in req.prompt else None  # noqa: E731
    with FakeServer(answers=answer_for, faults=faults) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, judge_model="fake-judge", max_attempts=1, cache=False)
        asyncio.run(evaluate_async(cfg, items, progress=False))
        assert Counter(r["status"] for r in latest_records(RunDir(tmp_path / "run")).values()) == Counter(ok=5, error=1)
        first_pass[0] = False  # the resume answers item 3
        asyncio.run(evaluate_async(cfg, items, progress=False))
    _rewrite_records(tmp_path / "run", lambda recs: [dict(reversed(list(r.items()))) if i == 0 else r
                                                     for i, r in enumerate(recs)])
    with (tmp_path / "run" / "responses.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"id": "chgk_0000000004", "lang": "en", "status": "error", "err')  # a write cut by a kill
    counts = record_counts(tmp_path / "run")
    assert counts.by_status == Counter(r.get("status") for r in latest_records(RunDir(tmp_path / "run")).values())
    assert (counts.by_status, counts.unreadable) == (Counter(ok=6), 0)
    assert run_row(tmp_path / "run").state == "done"


def test_runs_lists_a_run_whose_summary_or_manifest_was_hand_edited_into_another_shape(tmp_path):
    """A count that is not a number, a summary that is not a JSON object (cut by a failed copy), a judge section
    that is not an object. Before: a traceback ("invalid literal for int()", "'str' object has no attribute
    'get'") that ended the whole listing, or, for the cut summary, "running or killed (no summary yet)"."""
    import shutil

    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "a", tmp_path), make_items(4), progress=False))
    edits = {"count": ("summary.json", {"n_items": "four"}), "metric": ("summary.json", {"metrics": {"em_strict": {"k": "x"}}}),
             "judge": ("manifest.json", {"judge": "yes", "n_items": -1})}
    for name, (file, fields) in edits.items():
        shutil.copytree(tmp_path / "runs" / "a", tmp_path / "runs" / name)
        path = tmp_path / "runs" / name / file
        path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))
    shutil.copytree(tmp_path / "runs" / "a", tmp_path / "runs" / "cut")
    summary = tmp_path / "runs" / "cut" / "summary.json"
    summary.write_text(summary.read_text()[:40])
    rows = {d.name: run_row(d) for d in find_runs(str(tmp_path / "runs" / "*"))}
    on_disk = "answers counted on disk, accuracy not computed"
    assert rows["count"].state == f'summary.json unusable (n_items is "four", not a count): {on_disk}'
    assert rows["metric"].state == f'summary.json unusable (metrics.em_strict.k is "x", not a count): {on_disk}'
    assert rows["cut"].state == f"summary.json unusable (not a JSON object): {on_disk}"
    assert all((rows[n].done, rows[n].planned, rows[n].n) == (4, 4, 0) for n in ("count", "metric", "cut"))
    assert rows["judge"].state == ('manifest.json unusable (n_items is -1, not a count; judge is "yes", not an '
                                   "object); done")
    out = _cli(["runs", str(tmp_path / "runs" / "*")])
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == (
        "5 run(s); 4 with a manifest.json or summary.json that cannot be used (its row says why)"), out.stdout + out.stderr


def test_runs_names_an_unreadable_record_line_in_its_row_and_lists_the_other_runs(tmp_path):
    """A run killed before its summary, whose responses.jsonl holds a line that is not JSON (a hand edit): before,
    `runs` stopped after its header with "error: .../responses.jsonl:3: not JSON" (exit 2), listing no run."""
    import shutil

    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "a", tmp_path), make_items(4), progress=False))
    shutil.copytree(tmp_path / "runs" / "a", tmp_path / "runs" / "b")
    (tmp_path / "runs" / "b" / "summary.json").unlink()
    records = tmp_path / "runs" / "b" / "responses.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:2] + ["{not json\n"] + lines[2:]))
    row = run_row(tmp_path / "runs" / "b")
    assert (row.done, row.planned) == (4, 4)
    assert row.state == ("running or killed (no summary yet: accuracy not computed); 1 unreadable line(s) in "
                         "responses.jsonl (the first: line 3)")
    out = _cli(["runs", str(tmp_path / "runs" / "*")])
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "2 run(s)", out.stdout + out.stderr


def test_diff_shows_a_refusal_or_a_filtered_answer_as_what_it_is_not_as_the_answer_none(tmp_path):
    """B's model refused (the recorded OpenAI refusal) or its provider's filter stopped the answer (the recorded
    ``finish_reason: content_filter``): both are in n and not correct, and `diff` printed each as the answer
    ``'None'``, as if the model had answered "None"."""
    from replay.server import ReplayServer

    from cresowlve_core.sources.sample import load_items

    items = load_items("demo", "en")[:2]
    right = {it.view("en").question: it.view("en").answer for it in items}  # the reference, as every answer

    def run(scenario: str, name: str, model: str, **knobs) -> Path:
        with ReplayServer(scenario, answers=right, **knobs) as srv:
            cfg = EvalConfig(model=model, base_url=srv.base_url("openai"), run_dir=str(tmp_path / name), items="demo",
                             limit=2, provider="openai", cache=False)
            asyncio.run(evaluate_async(cfg, load_eval_items(cfg), progress=False))
        return tmp_path / name

    a = run("default", "a", "gpt-4.1")
    refused, filtered = run("refusal", "r", "gpt-4o", refusal_fraction=1.0), run("filtered", "f", "gpt-4o", filter_fraction=1.0)
    out = _cli(["diff", str(a), str(refused)]).stdout
    assert "2 disagreements: right only in A 2" in out and "'None'" not in out
    assert out.count("B (wrong): [refused: I'm sorry, but I can't assist with that request.]") == 2, out
    out = _cli(["diff", str(a), str(filtered)]).stdout
    assert "2 disagreements: right only in A 2" in out and "'None'" not in out
    assert out.count("B (wrong): [filtered by the provider: no answer]") == 2, out


def test_diff_of_runs_asked_different_item_sets_says_so(tmp_path):
    """Two English runs of other item sets (4 items each, none shared): nothing is compared, and a warning
    says why instead of leaving the 8 items as "errored or not run" alone. Runs of one set: no warning."""
    items = make_items(8)
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path, items="set-a.jsonl"), items[:4], progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, items="set-b.jsonl"), items[4:], progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "c", tmp_path, items="set-b.jsonl", model="other"),
                                   items[4:], progress=False))
    out = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    assert out.returncode == 0, out.stderr
    assert "items scored in both: 0; 8 without an answer in A or B" in out.stdout
    assert out.stderr.strip().splitlines() == [
        "warning: A and B were asked different item sets ('set-a.jsonl', 'set-b.jsonl'): only the items of both are "
        "compared; an item of one set only counts as without an answer in the run that never asked it"]
    assert _cli(["diff", str(tmp_path / "b"), str(tmp_path / "c")]).stderr == ""


def grid_stopped_before_its_second_cell(tmp_path):
    """tmp_path/grid/grid.json of two cells: model-a__en run (2 items), model-b__en not run, no run directory."""
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "grid" / "model-a__en", tmp_path), make_items(2),
                                   progress=False))
    cells = [{"cell": "model-a__en", "run_dir": str(tmp_path / "grid" / "model-a__en"), "status": "done"},
             {"cell": "model-b__en", "run_dir": str(tmp_path / "grid" / "model-b__en"), "status": "not_run"}]
    (tmp_path / "grid" / "grid.json").write_text(json.dumps({"name": "g", "cells": cells, "aliases": {}}))


def test_runs_of_a_grid_names_the_cells_without_a_run_directory(tmp_path):
    """`cresowlve runs grid.json` of a grid stopped before its second cell started: the last line names that
    cell. Before: "1 run(s)", the grid's other cell unmentioned."""
    grid_stopped_before_its_second_cell(tmp_path)
    out = _cli(["runs", str(tmp_path / "grid" / "grid.json")])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "1 run(s); 1 cell(s) of the grid without a run directory: " \
                                                  "model-b__en (not_run)"


def test_runs_shows_the_judges_cost_beside_the_answers(tmp_path):
    """summary.json's ``cost`` is the answers' alone; the judge's is ``judge_cost`` (None: unknown, as when some
    judge calls errored). Before, a judged run's cost column showed "$0.0392 reported" and nothing of the judge."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"kind": "eval", "model": "m", "lang": "en", "n_items": 1,
                                                   "finished_at": "2026-01-01T00:00:00"}))
    (run / "responses.jsonl").write_text(json.dumps({"id": "a", "lang": "en", "status": "ok"}) + "\n")
    summary = {"n_items": 1, "n_ok": 1, "n_error": 0, "n_not_run": 0, "cost": 0.0392, "n_cost_reported": 1}
    for judge, shown in (({"judged": True, "judge_cost": None}, "$0.0392 reported (judge unknown)"),
                         ({"judged": True, "judge_cost": 0.0131}, "$0.0392 reported (judge $0.0131)"),
                         ({"judged": False, "judge_cost": None}, "$0.0392 reported ")):
        (run / "summary.json").write_text(json.dumps({**summary, **judge}))
        row = run_row(run)
        assert row.state == "done" and shown in row.line(), row.line()
    assert "(judge" not in run_row(run).line()
    (run / "summary.json").write_text(json.dumps({**summary, "judged": True, "judge_cost": "free"}))
    assert run_row(run).state.startswith("summary.json unusable (judge_cost is \"free\", not an amount)")


def test_diff_reads_runs_this_user_may_not_write(tmp_path, monkeypatch, capsys):
    """A colleague's runs copied read-only (chmod -R a-w, a read-only mount): `diff` only reads them.
    Before: "error: run directory .../a is not writable", exit 2 (it opened A as a run to write)."""
    from cresowlve_core.cli import main

    items = make_items(4)
    with FakeServer(answers=answer_for) as srv:  # even items right: 2/4
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path), items, progress=False))
    with FakeServer(answers=_everything_wrong) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, model="other"), items, progress=False))
    real_access = os.access
    # what a read-only copy answers (the suite may run as root, whom chmod does not stop)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode & os.W_OK else real_access(p, mode, **kw))
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr()
    assert "2 disagreements: right only in A 2, right only in B 0" in out.out and "not writable" not in out.err


def _layout_1_run(path: Path, model: str, right: list[bool]) -> None:
    """A run directory as cresowlve wrote it before ``scores`` (layout 1: no ``kind``, ``prompt`` instead of
    ``prompts``, each record's formula metrics as top-level booleans and the judge's verdict alone)."""
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({
        "run_id": path.name, "model": model, "base_url": "http://x/v1", "lang": "en", "items": "demo",
        "n_items": len(right), "prompt": {"name": "solve_cot_en", "version": "1"},
        "judge": {"model": "judge-model", "prompt_version": "1", "seed": 0}}))
    (path / "responses.jsonl").write_text("".join(json.dumps({
        "id": f"chgk_{i}", "lang": "en", "status": "ok", "model": model, "answer": "Copernicus",
        "prediction": "Copernicus" if ok else "Galileo", "em_strict": ok, "em_lenient": ok,
        "judge_status": "scored", "judge_verdict": "CORRECT" if ok else "INCORRECT"}) + "\n"
        for i, ok in enumerate(right)))


def test_diff_reads_the_scores_of_runs_written_before_scores_existed_as_03_does(tmp_path):
    """Two layout-1 runs (manifest.py's FORMAT_VERSION 1), a colleague's older copies: their answers are
    scored by their top-level em_strict and judge verdict, as 03_analysis reads them. Before: "items scored
    in both: 0; 4 answered in both but not scored in A or B (left out)"."""
    from cresowlve_core.analysis.loading import load_runs

    _layout_1_run(tmp_path / "a", "old-a", [True, True, False, True])
    _layout_1_run(tmp_path / "b", "old-b", [False, False, False, True])
    loaded = load_runs(str(tmp_path / "*")).responses.groupby("model")[["judge", "em_strict"]].sum()
    assert loaded.loc["old-a"].tolist() == [3, 3] and loaded.loc["old-b"].tolist() == [1, 1]
    for metric in ("judge", "em_strict"):
        d = diff_runs(tmp_path / "a", tmp_path / "b", None if metric == "judge" else metric)
        assert (d.metric, d.n_both, d.only_a, d.only_b, d.n_missing) == (metric, 4, 2, 0, 0)


def test_a_grid_copied_from_another_machine_finds_its_cells_beside_its_grid_json(tmp_path):
    """A colleague's grid folder: grid.json names each cell by its absolute path on their machine, which does
    not exist here; the cells sit beside grid.json, where `cresowlve grid` writes them. `runs` and the analysis
    read them there; a cell the copy left out is still named as without a run directory. Before: "no evaluation
    runs found (.../grid.json); 2 cell(s) of the grid without a run directory: model-a__en (done), ...", exit 1."""
    from cresowlve_core.analysis.loading import load_runs

    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "copy" / "model-a__en", tmp_path), make_items(2),
                                   progress=False))
    theirs = "/home/alice/cresowlve/data/runs/grid/g"
    cells = [{"cell": name, "run_dir": f"{theirs}/{name}", "status": "done"} for name in ("model-a__en", "model-b__en")]
    (tmp_path / "copy" / "grid.json").write_text(json.dumps({"name": "g", "cells": cells, "aliases": {}}))
    out = _cli(["runs", str(tmp_path / "copy" / "grid.json")])
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "copy" / "model-a__en") in out.stdout.splitlines()[1]
    assert out.stdout.strip().splitlines()[-1] == "1 run(s); 1 cell(s) of the grid without a run directory: " \
                                                  "model-b__en (done)"
    runs = load_runs(str(tmp_path / "copy" / "grid.json"))
    assert runs.runs["path"].tolist() == [str((tmp_path / "copy" / "model-a__en").resolve())]
    assert len(runs.responses) == 2


def test_runs_shows_the_accuracy_of_a_summary_written_before_it_had_metrics(tmp_path):
    """A layout-1 run (records and summary.json from before ``metrics``): strict EM from the summary's
    ``em_strict`` fraction of the answered items, the judge's from ``judge_accuracy`` of the judged ones when it
    covers them. Before: "n 0", "EM –" beside "done 4/4", as if nothing had been scored."""
    _layout_1_run(tmp_path / "a", "old-a", [True, True, False, True])
    old = {"n_items": 4, "n_ok": 4, "n_error": 0, "n_not_run": 0, "em_strict": 0.75, "em_lenient": 0.75,
           "n_judged": 4, "judge_accuracy": 0.75, "judge_ci95": [0.3, 0.95], "cost": None, "judge_cost": None}
    (tmp_path / "a" / "summary.json").write_text(json.dumps(old))
    row = run_row(tmp_path / "a")
    assert (row.metric, row.k, row.n, row.done, row.state) == ("judge", 3, 4, 4, "done")
    assert "judge  75.0% [30.1, 95.4]" in row.line()
    (tmp_path / "a" / "summary.json").write_text(json.dumps({**old, "n_judged": 2, "judge_accuracy": 1.0}))
    row = run_row(tmp_path / "a")  # the judge covers half the answers: strict EM, as Table 1 falls back to it
    assert (row.metric, row.k, row.n) == ("EM", 3, 4)


def test_runs_and_diff_do_not_read_a_newer_layouts_run_as_their_own(tmp_path, capsys):
    """A colleague's run written by a newer cresowlve (``format_version`` 3, which manifest.py refuses):
    `runs` says so and computes no accuracy from its summary; `diff` refuses it in one line, exit 2. Before:
    listed as "done" with its summary's accuracy, and compared as if its records were of this layout."""
    from cresowlve_core.cli import main

    items = make_items(2)
    with FakeServer(answers=answer_for) as srv:
        for name in ("a", "b"):
            asyncio.run(evaluate_async(cfg_for(srv, tmp_path / name, tmp_path, model=name), items, progress=False))
    for name in ("manifest.json", "summary.json"):
        path = tmp_path / "a" / name
        path.write_text(json.dumps({**json.loads(path.read_text()), "format_version": 3}))
    newer = "format_version 3 is newer than this cresowlve reads (2); upgrade cresowlve to read it"
    row = run_row(tmp_path / "a")
    assert row.state == (f"manifest.json unusable ({newer}); summary.json unusable ({newer}): answers counted on "
                         "disk, accuracy not computed") and (row.n, row.done) == (0, 2)
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path / 'a'}: a run directory of a newer layout ({newer}); "
                                               "nothing was compared")


def test_runs_names_a_manifest_it_cannot_read(tmp_path):
    """A colleague's manifest.json cut by a failed copy, or saved with a byte-order mark by an editor: the row
    says the manifest is unusable (its model, language and plan are unknown: "?"). Before: a row of "?" whose
    state was "done", the manifest not named."""
    items = make_items(2)
    with FakeServer(answers=answer_for) as srv:
        for name in ("cut", "bom"):
            asyncio.run(evaluate_async(cfg_for(srv, tmp_path / name, tmp_path), items, progress=False))
    manifest = (tmp_path / "cut" / "manifest.json").read_text()
    (tmp_path / "cut" / "manifest.json").write_text(manifest[:40])
    (tmp_path / "bom" / "manifest.json").write_text(manifest, encoding="utf-8-sig")
    for name in ("cut", "bom"):
        row = run_row(tmp_path / name)
        assert (row.model, row.lang, row.state) == ("?", "?", "manifest.json unusable (not a JSON object); done")
    (tmp_path / "bom" / "manifest.json").unlink()  # sent without it: a run no command can resume or diff
    assert run_row(tmp_path / "bom").state == "manifest.json unusable (missing); done"


def test_a_copied_grid_never_reads_the_runs_its_recorded_paths_name_here(tmp_path):
    """The same grid run on two machines at the same path (two clones in one place, a container): the colleague's
    copy, elsewhere here, records the paths of this machine's own cells. Its listing and analysis read the cells
    beside it, and name the one the copy lacks. Before: this machine's runs, all four, under the copy's grid.json."""
    import shutil

    from cresowlve_core.analysis.loading import load_runs

    mine = tmp_path / "data" / "runs" / "grid" / "g"
    with FakeServer(answers=answer_for) as srv:
        for name in ("model-a__en", "model-b__en"):
            asyncio.run(evaluate_async(cfg_for(srv, mine / name, tmp_path, model=name[:7]), make_items(2),
                                       progress=False))
    cells = [{"cell": name, "run_dir": str(mine / name), "status": "done"} for name in ("model-a__en", "model-b__en")]
    (mine / "grid.json").write_text(json.dumps({"name": "g", "cells": cells, "aliases": {}}))
    theirs = tmp_path / "from-alice" / "g"
    shutil.copytree(mine, theirs)
    shutil.rmtree(theirs / "model-b__en")  # the copy lacks one cell
    out = _cli(["runs", str(theirs / "grid.json")])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3 and str(theirs / "model-a__en") in lines[1] and str(mine) not in out.stdout
    assert lines[-1] == "1 run(s); 1 cell(s) of the grid without a run directory: model-b__en (done)"
    assert load_runs(str(theirs / "grid.json")).runs["path"].tolist() == [str((theirs / "model-a__en").resolve())]
    assert len(load_runs(str(mine / "grid.json")).runs) == 2  # a grid where it was run reads its own cells


def test_the_analysis_names_a_grid_cell_without_a_run_directory(tmp_path):
    """03_analysis (and errors, contamination, explore: load_runs) over a grid.json one of whose cells has no run
    directory (the grid stopped before it, or a copy of its folder lacks it): a note names the cell, as `runs`
    does. Before: the cell was left out of every table without a word."""
    from cresowlve_core.analysis.loading import load_runs

    grid_stopped_before_its_second_cell(tmp_path)
    notes = load_runs(str(tmp_path / "grid" / "grid.json")).notes
    assert "1 cell of the grid without a run directory, so not in any table below: model-b__en (not_run)." in notes


def test_diff_compares_items_files_by_content_not_path(tmp_path):
    """Two runs of one items file copied to another path: no warning (before: "A and B were asked different
    item sets ('.../alice/items.jsonl', '.../bob/items.jsonl')"). Two runs of one path whose file was edited
    between them: a warning naming both SHA-256 (before: none, the references of one text paired with the other's)."""
    items = make_items(3)
    alice, bob = tmp_path / "alice.jsonl", tmp_path / "bob.jsonl"
    for path in (alice, bob):
        path.write_text("".join(it.model_dump_json() + "\n" for it in items))
    with FakeServer(answers=answer_for) as srv:
        for run, path, model in (("a", alice, "fake-model"), ("b", bob, "other")):
            asyncio.run(evaluate_async(cfg_for(srv, tmp_path / run, tmp_path, items=str(path), model=model), items,
                                       progress=False))
        alice.write_text(alice.read_text().replace('"Answer1"', '"Corrected1"'))
        cfg = cfg_for(srv, tmp_path / "c", tmp_path, items=str(alice), model="other")
        asyncio.run(evaluate_async(cfg, load_eval_items(cfg), progress=False))
    assert _cli(["diff", str(tmp_path / "a"), str(tmp_path / "b")]).stderr == ""
    (warning,) = _cli(["diff", str(tmp_path / "a"), str(tmp_path / "c")]).stderr.strip().splitlines()
    assert warning.startswith(f"warning: A and B were asked different contents of an items file ({str(alice)!r}, "
                              "SHA-256 "), warning


def test_runs_names_the_model_the_provider_said_answered_as_the_analysis_does(tmp_path):
    """A run of ``fake-model`` whose replies name the dated snapshot OpenAI's recorded reply names: the row's
    name says so, as the analysis's runs table and Table 1 do. Before: the requested name alone."""
    recorded = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "openai" / "chat_gpt4o_mini_success.json"
    snapshot = json.loads(recorded.read_text(encoding="utf-8"))["body"]["model"]

    class Snapshot(FakeServer):
        def build_body(self, req, reply, *, empty_text: bool = False):
            return {**super().build_body(req, reply, empty_text=empty_text), "model": snapshot}

    with Snapshot(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "a", tmp_path), make_items(3), progress=False))
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "runs" / "b", tmp_path, model="other"), make_items(3),
                                   progress=False))
    rows = {d.name: run_row(d) for d in find_runs(str(tmp_path / "runs" / "*"))}
    assert rows["a"].name == f"fake-model (served as {snapshot})"
    assert rows["a"].line().startswith(f"fake-model (served as {snapshot})")
    assert rows["b"].name == "other"  # its replies named the requested model: nothing to say
