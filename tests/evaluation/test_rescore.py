"""``cresowlve rescore``: every metric recomputed from stored raw outputs, with no model call."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakeserver import FakeServer

from cresowlve_core.evaluation.metrics import METRICS
from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, rescore
from cresowlve_core.items import Item, ItemView


def items(n: int) -> list[Item]:
    return [Item(id=f"chgk_{i:010x}", difficulty=1, en=ItemView(question=f"Puzzle number {i}: who?", answer=f"[Big] Answer{i}",
                                                               other_answers=f"Alt{i}; Other{i}")) for i in range(n)]


def reply(req) -> str:
    n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
    return f"<Answer>{['Big Answer', 'Answer', 'Alt', 'Nope'][n % 4]}{n}</Answer>"


def fake_config(srv: FakeServer, run_dir: Path, tmp_path: Path, **options: Any) -> EvalConfig:
    """The configuration of a run of ``fake-model`` on ``srv`` into ``run_dir`` (its cache in ``tmp_path``)."""
    return EvalConfig(model="fake-model", base_url=srv.base_url, run_dir=str(run_dir), items="test",
                      cache_path=str(tmp_path / "c.sqlite"), max_tokens=32, **options)


def test_rescore_sends_nothing_and_keeps_the_summary(tmp_path):
    run_dir = tmp_path / "run"
    with FakeServer(answers=reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path)
        out = asyncio.run(evaluate_async(cfg, items(8), progress=False))
        sent = srv.total
        summary = rescore(run_dir)
        assert srv.total == sent == 8  # rescoring made no request
    for key in ("n_items", "n_ok", "em_strict", "em_lenient", "n_judged"):
        assert summary[key] == out.summary[key], key
    assert out.summary["em_strict"] == 0.25 and out.summary["em_lenient"] == 0.75
    assert summary["metrics"]["em_strict"]["n"] == 8


def test_old_runs_get_every_metric_of_the_registry(tmp_path):
    """A record written before ``scores`` existed gets them from its raw output."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"run_id": "old", "model": "m", "base_url": "http://x/v1", "lang": "en",
                                                        "items": "test", "n_items": 1, "prompt": {"name": "solve_cot_en", "version": "2"}}))
    old = {"id": "chgk_1", "lang": "en", "status": "ok", "model": "m", "answer": "Copernicus", "other_answers": "Kopernik",
           "prediction": "stale", "raw_output": "I think <Answer>Kopernik</Answer>", "em_strict": False, "em_lenient": False}
    (run_dir / "responses.jsonl").write_text(json.dumps(old) + "\n")
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "0 requests" in proc.stdout
    rec = json.loads((run_dir / "responses.jsonl").read_text().splitlines()[0])
    assert set(rec["scores"]) == {m.name for m in METRICS}
    assert rec["prediction"] == "Kopernik" and rec["scores"]["em_lenient"] is True and rec["scores"]["judge"] is None
    assert (run_dir / "responses.jsonl.bak").exists()


#: a record as e980689 (2026-11-30) wrote it: no ``truncated``, no ``max_tokens``, no ``outcome``
E980689_RECORD = {"id": "chgk_1", "lang": "en", "status": "ok", "error": None, "model": "gpt-4o-mini", "effort": None,
    "difficulty": 1, "reasoning_type": "creative", "knowledge_domains": [], "creative_domains": [], "cultures": [],
    "n_atomic_facts": None, "answer": "Copernicus", "other_answers": "Kopernik", "prediction": "Kopernik",
    "extraction": "answer_tag", "raw_output": "Putting the clues together.\n<Answer>Kopernik</Answer>",
    "thoughts": None, "usage": {"input_tokens": 8, "output_tokens": 9, "reasoning_tokens": 0}, "cost": 6.6e-06,
    "latency_s": 0.005, "cached": False, "scores": {"em_strict": False, "em_lenient": True}, "em_strict": False,
    "em_lenient": True, "judge_status": "not_run", "judge_verdict": None, "judge_raw": None, "judge_model": None,
    "judge_usage": None, "judge_cost": None, "synthetic": False, "extra": {}}


def test_rescoring_a_record_written_before_truncation_was_flagged_keeps_it_unknown(tmp_path):
    """A record as e980689 wrote it (:data:`E980689_RECORD`). 03_analysis shows the run's
    truncated count as unknown (–). Before, the rescored record said ``"truncated": false`` and the runs
    table then said 0 answers were cut off."""
    from cresowlve_core.analysis.loading import load_runs

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"kind": "eval", "run_id": "old", "model": "gpt-4o-mini",
                                                        "base_url": "http://x/v1", "lang": "en", "items": "test",
                                                        "n_items": 1, "prompts": ["solve_cot_en@2"]}))
    old = E980689_RECORD
    (run_dir / "responses.jsonl").write_text(json.dumps(old) + "\n")
    assert load_runs(str(run_dir)).runs["n_truncated"].tolist() == [None]
    rescore(run_dir)
    rec = json.loads((run_dir / "responses.jsonl").read_text().splitlines()[0])
    assert rec["truncated"] is None and rec["scores"]["em_lenient"] is True
    assert load_runs(str(run_dir)).runs["n_truncated"].tolist() == [None]


def test_the_summary_of_answers_not_flagged_either_way_says_the_truncated_count_is_a_lower_bound(tmp_path):
    """The record e980689 wrote and one of this version, cut off at the token limit. Before, summary.json said
    n_truncated 1 and the line "truncated 1", as if the older answer were known not to be cut off."""
    from cresowlve_core.evaluation.runner import summary_line

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"kind": "eval", "run_id": "old", "model": "gpt-4o-mini",
                                                        "base_url": "http://x/v1", "lang": "en", "items": "test",
                                                        "n_items": 2, "prompts": ["solve_cot_en@2"]}))
    newer = {**E980689_RECORD, "id": "chgk_2", "truncated": True, "max_tokens": 16,
             "raw_output": "Putting the clues together.\n<Answer>Kop"}
    (run_dir / "responses.jsonl").write_text(json.dumps(E980689_RECORD) + "\n" + json.dumps(newer) + "\n")
    summary = rescore(run_dir)
    assert (summary["n_truncated"], summary["n_truncated_unknown"]) == (1, 1)
    assert "| truncated 1 (≥: 1 of 2 answers not flagged either way) |" in summary_line(summary)


def test_rescore_keeps_a_thinking_runs_reasoning_checks(tmp_path):
    """A thinking run whose answers show no reasoning stays flagged after a rescore, and is not
    taken for a non-thinking run (before, the rescored summary lost the run's thinking label)."""
    run_dir = tmp_path / "run"
    with FakeServer(answers=reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path, effort="high")
        out = asyncio.run(evaluate_async(cfg, items(4), progress=False))
    assert (out.summary["n_no_reasoning"], out.summary["n_unlabelled_reasoning"]) == (4, None)
    summary = rescore(run_dir)
    assert (summary["thinking"], summary["n_no_reasoning"], summary["n_unlabelled_reasoning"]) == (True, 4, None)


def test_a_record_edited_into_another_shape_is_refused_naming_the_item_and_field(tmp_path):
    """A record whose outcome, status or field type no run writes (edited by hand): one line naming the
    file, the item, the field and what it holds, exit 2, the records and summary left as they were.
    Before: a pydantic traceback ending "bug: ... not a problem with your input"."""
    run_dir = tmp_path / "run"
    with FakeServer(answers=reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path)
        asyncio.run(evaluate_async(cfg, items(2), progress=False))
    records = run_dir / "responses.jsonl"
    lines = records.read_text().splitlines()
    for field, value, problem in [("outcome", "blocked", "outcome: Input should be 'answer', 'truncated', 'refused', "
                                   "'filtered', 'failed' or 'error' (it holds 'blocked')"),
                                  ("raw_output", 5, "raw_output: Input should be a valid string (it holds 5)")]:
        edited = {**json.loads(lines[1]), field: value}
        records.write_text("\n".join([lines[0], json.dumps(edited)]) + "\n")
        before = (records.read_text(), (run_dir / "summary.json").read_text())
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"error: {records}: the record of item {edited['id']!r} (en) cannot be read: {problem}; mend or remove it "
            "(nothing was rescored)"]
        assert (records.read_text(), (run_dir / "summary.json").read_text()) == before


def judged_reply(req) -> str:
    if "candidate_answer" in req.prompt:  # our judge: every candidate correct
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"Fine.\nVERDICT-{nonce}: CORRECT"
    return reply(req)


def test_a_verdict_on_another_candidate_than_the_rescored_one_is_withdrawn_and_judged_again(tmp_path):
    """A judged run whose raw output now extracts to another candidate (the extraction changed, or the
    record was edited): the judge never saw that candidate, so its verdict is withdrawn (kept in extra),
    the rescore exits 1 saying so, and the next eval asks the judge about that answer only. A record now
    refused gets the verdict of a refusal. Before: the old verdict was kept for the new candidate, exit 0,
    and a refusal kept the CORRECT of the answer it replaced."""
    run_dir = tmp_path / "run"
    with FakeServer(answers=judged_reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path, judge_model="fake-judge")
        asyncio.run(evaluate_async(cfg, items(3), progress=False))
        records = run_dir / "responses.jsonl"
        latest = {r["id"]: r for r in map(json.loads, records.read_text().splitlines())}
        first, second, third = latest.values()
        assert all(r["judge_verdict"] == "CORRECT" for r in latest.values())
        edited = [{**first, "raw_output": "<Answer>Copernicus</Answer>"}, second, {**third, "outcome": "refused"}]
        records.write_text("".join(json.dumps(r) + "\n" for r in edited))
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith(
            "incomplete: 1 judge verdict(s) withdrawn, each given on another candidate answer than the rescored one")
        now = {r["id"]: r for r in map(json.loads, records.read_text().splitlines())}
        assert (now[first["id"]]["prediction"], now[first["id"]]["judge_status"], now[first["id"]]["scores"]["judge"]) \
            == ("Copernicus", "not_run", None)
        assert now[first["id"]]["extra"]["verdict_withdrawn_by_rescore"]["judge_verdict"] == "CORRECT"
        assert now[second["id"]]["judge_verdict"] == "CORRECT"  # the same candidate: the verdict holds
        assert (now[third["id"]]["judge_status"], now[third["id"]]["scores"]["judge"]) == ("not_an_answer", False)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert (summary["n_judge_not_run"], summary["n_verdicts_withdrawn"]) == (1, 1)
        sent = srv.total
        asyncio.run(evaluate_async(cfg, items(3), progress=False))
        assert srv.total == sent + 1  # the judge, about the rescored answer only


def test_an_older_runs_judge_without_a_recorded_protocol_has_its_verdicts_checked_too(tmp_path):
    """A manifest whose judge section predates the recorded protocol (ours was the only one): a verdict on
    another candidate is withdrawn as in a current run. Before the fix: kept, exit 0."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({
        "run_id": "old", "model": "m", "base_url": "http://x/v1", "lang": "en", "items": "test", "n_items": 1,
        "prompt": {"name": "solve_cot_en", "version": "2"}, "judge": {"model": "gpt-4o", "prompt": "judge@1"}}))
    old = {"id": "chgk_1", "lang": "en", "status": "ok", "model": "m", "answer": "Copernicus", "other_answers": None,
           "prediction": "Galileo", "raw_output": "<Answer>Galileo</Answer> no, <Answer>Copernicus</Answer>",
           "judge_status": "scored", "judge_verdict": "INCORRECT"}
    (run_dir / "responses.jsonl").write_text(json.dumps(old) + "\n")
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    rec = json.loads((run_dir / "responses.jsonl").read_text().splitlines()[0])
    assert (rec["prediction"], rec["judge_status"], rec["scores"]["judge"]) == ("Copernicus", "not_run", None)


def test_rescore_refuses_another_stages_run_and_a_run_without_records_changing_nothing(tmp_path):
    """A CREATE generation run (its own responses.jsonl and summary.json) and an eval run stopped before
    its first answer (a manifest, no records): one line each, exit 2, the directory as it was. Before: the
    first was rewritten as an evaluation (its summary.json replaced); the second ended in a FileNotFoundError
    traceback ("bug"), leaving responses.jsonl.tmp behind."""
    create, empty = tmp_path / "create", tmp_path / "empty"
    for d, kind in ((create, "create_generate"), (empty, "eval")):
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"kind": kind, "format_version": 2, "run_id": d.name, "model": "m",
                                                     "lang": "en", "items": "test", "n_items": 1}))
    (create / "responses.jsonl").write_text(json.dumps({"id": "q1", "lang": "en", "status": "ok", "model": "m",
                                                        "raw_output": "a path"}) + "\n")
    (create / "summary.json").write_text('{"n_paths": 1}')
    before = {d: sorted((p.name, p.read_text()) for p in d.iterdir()) for d in (create, empty)}
    for d, line in ((create, f"error: {create}: a run directory of 'create_generate', not of `cresowlve eval`; rescore "
                               "reads only evaluation runs (nothing was changed)"),
                    (empty, f"error: {empty}: no responses.jsonl: the run recorded no answer, so there is nothing to "
                            "rescore (nothing was changed)")):
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(d)],
                              capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stderr.strip().splitlines()[-1]) == (2, line)
        assert sorted((p.name, p.read_text()) for p in d.iterdir()) == before[d]


def test_an_older_run_whose_items_are_not_here_is_refused_not_scored_against_the_reference_alone(tmp_path):
    """A colleague's run from before records kept the item's accepted answers (``other_answers``), its manifest
    naming an items file on their machine: exit 2, one line naming the items and why, the run as it was.
    Before: a logged warning, exit 0, the answer "Kopernik" (accepted by the item) rescored wrong by lenient
    EM, and every record rewritten with ``other_answers: null``, so no later rescore looked for the items again."""
    from cresowlve_core.items import Item, ItemView

    items_file = tmp_path / "items.jsonl"
    items_file.write_text(Item(id="chgk_1", difficulty=1, en=ItemView(
        question="Who?", answer="Copernicus", other_answers="Kopernik")).model_dump_json() + "\n")
    old = {"id": "chgk_1", "lang": "en", "status": "ok", "model": "m", "answer": "Copernicus",
           "prediction": "stale", "raw_output": "I think <Answer>Kopernik</Answer>", "em_strict": False, "em_lenient": False}

    def run_with_items(name: str, items: str):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "manifest.json").write_text(json.dumps({
            "run_id": name, "model": "m", "base_url": "http://x/v1", "lang": "en", "items": items, "n_items": 1,
            "prompt": {"name": "solve_cot_en", "version": "2"}}))
        (run_dir / "responses.jsonl").write_text(json.dumps(old) + "\n")
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                              capture_output=True, text=True, timeout=120)
        return run_dir, proc

    here, proc = run_with_items("here", str(items_file))  # the items at hand: the accepted answer counts
    assert proc.returncode == 0, proc.stderr
    assert json.loads((here / "responses.jsonl").read_text())["scores"]["em_lenient"] is True

    theirs = "/home/alice/cresowlve/data/items/mine.jsonl"
    run_dir, proc = run_with_items("copied", theirs)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {run_dir}: 1 answer recorded before records kept the item's accepted answers, "
                           f"and its items ('{theirs}') cannot be loaded (") and last.endswith("(nothing was rescored)")
    assert (run_dir / "responses.jsonl").read_text() == json.dumps(old) + "\n"
    assert not (run_dir / "responses.jsonl.bak").exists() and not (run_dir / "summary.json").exists()

    other = tmp_path / "other.jsonl"  # a file of that name here, holding other items
    other.write_text(items_file.read_text().replace("chgk_1", "chgk_2"))
    run_dir, proc = run_with_items("other", str(other))
    assert proc.returncode == 2 and "do not hold 1 of them (the first: 'chgk_1')" in proc.stderr


def run_with_a_torn_last_line(tmp_path):
    """A two-item run directory whose responses.jsonl ends in a torn line (a kill mid-write): (its path,
    the torn line)."""
    run_dir = tmp_path / "run"
    with FakeServer(answers=reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path)
        asyncio.run(evaluate_async(cfg, items(2), progress=False))
    torn = '{"id": "chgk_00000000ff", "lang": "en", "status": "ok", "raw_out'
    with (run_dir / "responses.jsonl").open("a", encoding="utf-8") as f:
        f.write(torn)
    return run_dir, torn


def test_a_torn_last_line_is_kept_aside_not_lost_with_the_rewritten_records(tmp_path):
    """A run killed mid-write (a torn last line), rescored twice: the torn line goes to responses.jsonl.torn, as
    before the next append, and the summary names the repair. Before: the rescore rewrote the file without it,
    keeping it only in responses.jsonl.bak, which the second rescore replaced: the line was gone."""
    run_dir, torn = run_with_a_torn_last_line(tmp_path)
    first = rescore(run_dir)
    rescore(run_dir)
    assert (run_dir / "responses.jsonl.torn").read_text() == torn + "\n"
    assert [r.endswith("moved a torn last line (64 bytes) to responses.jsonl.torn; its unit will be re-run")
            for r in first["repairs"]] == [True]
    assert all(torn not in (run_dir / name).read_text() for name in ("responses.jsonl", "responses.jsonl.bak")
               if (run_dir / name).exists())  # (records rescored as they stand are not rewritten: no backup)


def test_a_full_disk_while_setting_a_torn_line_aside_exits_3_naming_the_file(tmp_path, monkeypatch, capsys):
    """`cresowlve rescore` of a run with a torn last line on a full disk: the side file cannot be written.
    Before: the OSError (No space left on device) reached the CLI as is, a 'bug:' traceback and exit 1;
    now the stop of a full disk (exit 3) naming responses.jsonl.torn, and the torn line is still in place."""
    from cresowlve_core.cli import main
    from cresowlve_core.runtime import rundir

    run_dir, torn = run_with_a_torn_last_line(tmp_path)

    def full_open(file, mode="r", *a, **kw):  # the side file's bytes do not fit (a failed write names no file)
        if str(file).endswith(".torn"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return open(file, mode, *a, **kw)

    monkeypatch.setattr(rundir, "open", full_open, raising=False)
    assert main(["rescore", "--run-dir", str(run_dir)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: disk full writing {run_dir / 'responses.jsonl.torn'} (No space left on device); "
                       "finished work is kept, free space and run again")
    assert not any(line.startswith("bug:") for line in err)
    assert (run_dir / "responses.jsonl").read_text().endswith(torn)  # nothing cut off without a copy aside
    monkeypatch.delattr(rundir, "open")
    assert main(["rescore", "--run-dir", str(run_dir)]) == 0
    assert (run_dir / "responses.jsonl.torn").read_text() == torn + "\n"


def test_rescoring_again_never_replaces_the_records_the_run_wrote(tmp_path):
    """A judged run whose first answer now extracts another candidate: rescored twice, judged again, rescored
    again. The records as the run wrote them (the withdrawn verdict's reply among them) stay in
    responses.jsonl.bak; a rescore that changes nothing writes nothing, and one after the judge's new
    verdicts keeps the file it replaces as responses.jsonl.bak2. Before: each rescore replaced
    responses.jsonl.bak, so the second one, which changed nothing, left only copies of its own output."""
    run_dir = tmp_path / "run"
    with FakeServer(answers=judged_reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path, judge_model="fake-judge")
        asyncio.run(evaluate_async(cfg, items(3), progress=False))
        records = run_dir / "responses.jsonl"
        lines = records.read_text().splitlines()
        edited = {**json.loads(lines[-1]), "raw_output": "<Answer>Copernicus</Answer>"}
        written = "".join(line + "\n" for line in lines) + json.dumps(edited) + "\n"
        records.write_text(written)
        assert rescore(run_dir)["n_verdicts_withdrawn"] == 1
        rescored = records.read_text()
        rescore(run_dir)
        assert records.read_text() == rescored and (run_dir / "responses.jsonl.bak").read_text() == written
        asyncio.run(evaluate_async(cfg, items(3), progress=False))  # the judge, about the rescored answer
        judged_again = records.read_text()
        rescore(run_dir)
    assert (run_dir / "responses.jsonl.bak").read_text() == written
    assert (run_dir / "responses.jsonl.bak2").read_text() == judged_again


def test_an_unreadable_summary_is_refused_before_the_records_are_rewritten(tmp_path):
    """A run whose summary.json was cut short (copied while written, edited by hand): `cresowlve rescore`
    exits 2 with one line naming it, the records as they were. Before: the records were rewritten, then
    the summary's JSONDecodeError reached the CLI as a 'bug:' traceback, exit 1, summary.json stale."""
    run_dir = tmp_path / "run"
    with FakeServer(answers=reply) as srv:
        cfg = fake_config(srv, run_dir, tmp_path)
        asyncio.run(evaluate_async(cfg, items(2), progress=False))
    records = run_dir / "responses.jsonl"
    first = json.loads(records.read_text().splitlines()[0])
    with records.open("a") as f:  # its answer now extracts another candidate: the rescore would rewrite it
        f.write(json.dumps({**first, "raw_output": "<Answer>Copernicus</Answer>"}) + "\n")
    written = records.read_text()
    summary = run_dir / "summary.json"
    summary.write_text(summary.read_text()[:100])
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {summary}: cannot be read (Unterminated string") and line.endswith(
        "the rescore keeps its stop and spending: mend or remove it (nothing was rescored)"), line
    assert records.read_text() == written and not (run_dir / "responses.jsonl.bak").exists()


def test_an_older_run_of_another_hub_snapshot_is_refused_not_scored_against_the_new_text(tmp_path,
                                                                                        hub_cache_at_bbbb2222):
    """An older hub:en run (records without ``other_answers``) whose manifest names the snapshot file it read,
    rescored when the cache holds another revision of that file: exit 2, one line naming the run, the file and
    both revisions, the records as they were. Before: exit 0, the lenient EM scored against the new revision's
    accepted answers and the records rewritten with them."""
    from cresowlve_core.sources.hub import load_published, loaded_files

    items = load_published("en", local_path=hub_cache_at_bbbb2222)
    read_then = [{**f, "revision": "aaaa1111", "sha256": "0" * 64} for f in loaded_files(items)]
    old = {"id": items[0].id, "lang": "en", "status": "ok", "model": "m", "answer": items[0].en.answer,
           "prediction": "x", "raw_output": "<Answer>zzz</Answer>", "em_strict": False, "em_lenient": False}
    env = dict(os.environ)  # the fixture's cache, offline

    def rescore(name: str, files: list[dict]):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "manifest.json").write_text(json.dumps({
            "run_id": name, "model": "m", "base_url": "http://x/v1", "lang": "en", "items": "hub:en", "n_items": 1,
            "prompt": {"name": "solve_cot_en", "version": "2"}, "items_files": files}))
        (run_dir / "responses.jsonl").write_text(json.dumps(old) + "\n")
        return run_dir, subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir",
                                        str(run_dir)], capture_output=True, text=True, timeout=120, env=env)

    run_dir, proc = rescore("same", loaded_files(items))  # the snapshot the run read: rescored
    assert proc.returncode == 0, proc.stderr
    run_dir, proc = rescore("other", read_then)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {run_dir}: 1 answer recorded before records kept the item's accepted answers, "
                           "and its items ('hub:en') are not those the run read: en/test-00000-of-00001.parquet is "
                           "now revision bbbb2222") and "(the run read revision aaaa1111, SHA-256 000000000000…)" in last
    assert last.endswith("(nothing was rescored)")
    assert (run_dir / "responses.jsonl").read_text() == json.dumps(old) + "\n"


def test_an_older_run_whose_items_file_changed_since_is_refused(tmp_path):
    """An older run (records without ``other_answers``) of a local items file whose manifest names the file's
    SHA-256, rescored after the file was edited (another accepted answer): exit 2, one line naming the run, the
    file and both SHA-256s. Before: exit 0 and the lenient EM scored against the edited file's answers."""
    import hashlib

    from cresowlve_core.items import Item, ItemView

    items_file = tmp_path / "items.jsonl"
    items_file.write_text(Item(id="chgk_1", difficulty=1, en=ItemView(
        question="Who?", answer="Copernicus", other_answers="Kopernik")).model_dump_json() + "\n")
    read_then = hashlib.sha256(items_file.read_bytes()).hexdigest()
    old = {"id": "chgk_1", "lang": "en", "status": "ok", "model": "m", "answer": "Copernicus",
           "prediction": "stale", "raw_output": "<Answer>Kepler</Answer>", "em_strict": False, "em_lenient": False}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({
        "run_id": "run", "model": "m", "base_url": "http://x/v1", "lang": "en", "items": str(items_file), "n_items": 1,
        "prompt": {"name": "solve_cot_en", "version": "2"}, "items_files": [
            {"repo": None, "revision": None, "path": str(items_file), "sha256": read_then, "n_items": 1}]}))
    (run_dir / "responses.jsonl").write_text(json.dumps(old) + "\n")
    items_file.write_text(items_file.read_text().replace("Kopernik", "Kepler"))  # edited since the run
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=120)
    now = hashlib.sha256(items_file.read_bytes()).hexdigest()
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {run_dir}: 1 answer recorded before records kept the item's accepted answers, and "
                           f"its items ('{items_file}') are not those the run read: {items_file} is now SHA-256 "
                           f"{now[:12]}… (the run read SHA-256 {read_then[:12]}…): ") and last.endswith("(nothing was rescored)")
    assert (run_dir / "responses.jsonl").read_text() == json.dumps(old) + "\n"
