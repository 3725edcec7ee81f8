"""The evaluation run against a real local HTTP server with scripted answers and injected faults."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakeserver import FakeServer

from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, summary_line
from cresowlve_core.items import Item, ItemView
from cresowlve_core.llm.types import LLMFatalError

REPO = Path(__file__).resolve().parents[2]


def make_items(n: int) -> list[Item]:
    return [
        Item(id=f"chgk_{i:010x}", difficulty=1 + i % 5, reasoning_type="creative",
             en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}", other_answers=f"Alt{i}"))
        for i in range(n)
    ]


def answer_for(req) -> str:
    """Solve prompts get '<Answer>AnswerN</Answer>' for even N, a wrong answer for odd N."""
    if "candidate_answer" in req.prompt:  # a judge prompt
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"Looks right.\nVERDICT-{nonce}: CORRECT"
    n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
    return f"Thinking...\n<Answer>{'Answer' if n % 2 == 0 else 'Wrong'}{n}</Answer>"


def cfg_for(srv: FakeServer, run_dir: Path, tmp_path: Path, **kw) -> EvalConfig:
    base = dict(model="fake-model", base_url=srv.base_url, run_dir=str(run_dir), items="test", lang="en",
                concurrency=8, cache_path=str(tmp_path / "cache.sqlite"), backoff_base_s=0.01, timeout_s=2.0,
                max_attempts=8, max_tokens=64)
    base.update(kw)
    return EvalConfig(**base)


def read_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "responses.jsonl").read_text().splitlines() if line.strip()]


def latest_lines(run_dir: Path) -> list[dict]:
    """The last record per item (a judged run also writes each answer before judging it)."""
    return list({r["id"]: r for r in read_lines(run_dir)}.values())


def test_fault_rate_20pct_loses_and_duplicates_nothing(tmp_path):
    items = make_items(60)
    with FakeServer(answers=answer_for, fault_rate=0.2, seed=7, fault_kinds=("429", "500", "503", "garbage", "empty", "timeout"),
                    timeout_sleep_s=2.5) as srv:
        out = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), items, progress=False))
        assert srv.total > 60  # faults really happened and were retried
    recs = read_lines(tmp_path / "run")
    ids = [r["id"] for r in recs]
    assert len(ids) == 60 and len(set(ids)) == 60  # 0 lost, 0 duplicates
    assert all(r["status"] == "ok" for r in recs)
    assert out.summary["n_ok"] == 60 and out.summary["em_strict"] == pytest.approx(0.5)
    # extraction, EM and usage are recorded per item
    even = next(r for r in recs if r["id"] == items[0].id)
    assert even["prediction"] == "Answer0" and even["extraction"] == "answer_tag" and even["em_strict"] is True
    assert even["usage"]["input_tokens"] > 0 and even["difficulty"] == 1


def test_unrecoverable_item_is_error_and_resume_retries_only_it(tmp_path):
    items = make_items(5)
    bad_prompt_item = items[2]
    with FakeServer(answers=answer_for, faults=lambda r: "500" if "number 2:" in r.prompt else None) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, max_attempts=2)
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
        assert out.summary["n_error"] == 1 and out.summary["n_ok"] == 4 and out.summary["n_not_run"] == 0
        err = [r for r in read_lines(tmp_path / "run") if r["status"] == "error"]
        assert [r["id"] for r in err] == [bad_prompt_item.id] and "fake-model" in err[0]["error"]
        srv.faults = None
        srv.reset()
        out2 = asyncio.run(evaluate_async(cfg, items, progress=False))
        assert srv.total == 1  # only the errored item was sent again
    assert out2.summary["n_ok"] == 5 and out2.summary["n_error"] == 0


def test_401_fails_fast_with_one_request(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEY_VAR", "sk-wrong-key-000000000000")
    with FakeServer(answers=answer_for, api_key="sk-the-right-one-0000000000") as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, api_key_env="FAKE_KEY_VAR", concurrency=1)
        with pytest.raises(LLMFatalError) as e:
            asyncio.run(evaluate_async(cfg, make_items(3), progress=False))
        assert srv.total == 1
    assert "fake-model" in str(e.value) and srv.base_url in str(e.value) and "401" in str(e.value)


def test_judge_verdicts_unscored_and_no_silent_default(tmp_path):
    items = make_items(4)

    def judge_sometimes_garbled(req):
        if "candidate_answer" in req.prompt and "Answer1" in req.prompt.split("<reference_answer>")[1][:30]:
            return "I think it is CORRECT"  # no verdict line => unscored
        return answer_for(req)

    with FakeServer(answers=judge_sometimes_garbled) as srv:
        no_judge = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "a", tmp_path), items, progress=False))
        assert all(r.judge_status == "not_run" for r in no_judge.records)
        assert no_judge.summary["judge_accuracy"] is None
        judged = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "b", tmp_path, judge_model="fake-judge"), items, progress=False))
    by_id = {r.id: r for r in judged.records}
    assert by_id[items[1].id].judge_status == "unscored" and by_id[items[1].id].judge_verdict is None
    assert judged.summary["n_unscored"] == 1 and judged.summary["n_judged"] == 3
    assert judged.summary["judge_accuracy"] == 1.0
    assert by_id[items[0].id].judge_raw.endswith("CORRECT")


def test_resume_on_other_config_is_refused(tmp_path):
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), make_items(2), progress=False))
        with pytest.raises(ValueError, match="model"):
            asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, model="other"), make_items(2), progress=False))


def test_manifest_records_provenance(tmp_path):
    with FakeServer(answers=answer_for) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, seed=3), make_items(2), progress=False))
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["seed"] == 3 and m["model"] == "fake-model" and m["prompts"] == ["solve_cot_en@2"]
    assert m["packages"]["openai"] and m["started_at"] and m["finished_at"]
    assert "git_sha" in m


def test_manifest_records_the_hub_snapshot_files_the_items_came_from(tmp_path):
    """A run of hub items names the dataset revision and each file with its SHA-256 and item count; a run
    of the demo items has no ``items_files``; one of hub items saved to a file and read back names that file."""
    import hashlib
    import shutil

    from cresowlve_core.sources.hub import load_published
    from cresowlve_core.sources.sample import items_to_jsonl, load_items

    snapshot = tmp_path / "hub" / "snapshots" / "0123abcd"
    shutil.copytree(REPO / "tests" / "fixtures" / "hub" / "snapshot", snapshot)
    items = load_published("en", local_path=snapshot)[:4]
    saved = tmp_path / "saved.jsonl"
    saved.write_text(items_to_jsonl(items), encoding="utf-8")
    with FakeServer() as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "hub_run", tmp_path, items="hub:en"), items, progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path), make_items(2), progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "saved_run", tmp_path, items=str(saved)),
                                   load_items(str(saved), "en"), progress=False))
    parquet = snapshot / "en" / "test-00000-of-00001.parquet"
    m = json.loads((tmp_path / "hub_run" / "manifest.json").read_text())
    assert m["items_files"] == [{"repo": "mismayil/cresowlve", "revision": "0123abcd",
                                 "path": "en/test-00000-of-00001.parquet",
                                 "sha256": hashlib.sha256(parquet.read_bytes()).hexdigest(), "n_items": 4}]
    assert "items_files" not in json.loads((tmp_path / "run" / "manifest.json").read_text())
    # a file the user brings is named as given, with its SHA-256: no dataset, no revision (nor the hub's)
    assert json.loads((tmp_path / "saved_run" / "manifest.json").read_text())["items_files"] == [
        {"repo": None, "revision": None, "path": str(saved), "sha256": hashlib.sha256(saved.read_bytes()).hexdigest(),
         "n_items": 4}]


def test_a_resume_from_another_hub_snapshot_keeps_the_earlier_files_named(tmp_path):
    """A run resumed from another revision of the hub snapshot: the manifest names the files both
    invocations read. Before, the resume replaced them, and the manifest named only the later snapshot for
    records answered from the earlier one."""
    import shutil

    from cresowlve_core.sources.hub import load_published

    revisions = []
    for rev in ("0123abcd", "4567cdef"):
        snapshot = tmp_path / "hub" / "snapshots" / rev
        shutil.copytree(REPO / "tests" / "fixtures" / "hub" / "snapshot", snapshot)
        revisions.append(load_published("en", local_path=snapshot))
    with FakeServer() as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, items="hub:en"), revisions[0][:2],
                                   progress=False))
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, items="hub:en"), revisions[1][:2],
                                   progress=False))
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [f["revision"] for f in m["items_files"]] == ["0123abcd", "4567cdef"]


def write_items_jsonl(path: Path, items: list[Item]) -> None:
    path.write_text("\n".join(json.dumps(it.published_row("en")) for it in items) + "\n")


def _cli(args: list[str], env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cresowlve_core.cli", *args], cwd=REPO,
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_sigkill_then_resume_does_not_resend_finished_items(tmp_path):
    items = make_items(24)
    items_path = tmp_path / "items.jsonl"
    write_items_jsonl(items_path, items)
    run_dir = tmp_path / "run"
    args = ["eval", "--items", str(items_path), "--lang", "en", "--model", "fake-model", "--concurrency", "2",
            "--no-cache", "--max-tokens", "32", "--run-dir", str(run_dir)]
    with FakeServer(answers=answer_for, latency_s=0.25) as srv:
        proc = _cli([*args, "--base-url", srv.base_url])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            p = run_dir / "responses.jsonl"
            if p.exists() and len(p.read_text().splitlines()) >= 6:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = {r["id"] for r in read_lines(run_dir)}
        assert 6 <= len(finished) < 24
        srv.reset()
        proc2 = _cli([*args, "--base-url", srv.base_url])
        out, err = proc2.communicate(timeout=120)
        assert proc2.returncode == 0, err
        resent = {req.prompt for req in srv.requests}
    finished_prompts = {f"Puzzle number {int(i[5:], 16)}:" for i in finished}
    assert not any(fp in p for p in resent for fp in finished_prompts)
    assert srv.total == 24 - len(finished)
    recs = read_lines(run_dir)
    assert len({r["id"] for r in recs}) == 24 and len(recs) == 24
    assert "n=24 ok=24" in out


def test_no_key_leaks_into_run_dir_or_output(tmp_path):
    key = "sk-test-SECRET-value-1234567890abcdef"
    items = make_items(3)
    items_path = tmp_path / "items.jsonl"
    write_items_jsonl(items_path, items)
    with FakeServer(answers=answer_for, api_key=key, echo_key_in_errors=True,
                    faults=[None, "500", None, None, None, None]) as srv:
        proc = _cli(["-v", "eval", "--items", str(items_path), "--model", "fake-model", "--base-url", srv.base_url,
                     "--api-key-env", "MY_PROVIDER_KEY", "--judge-model", "fake-judge", "--judge-api-key-env",
                     "MY_PROVIDER_KEY", "--run-dir", str(tmp_path / "run"), "--no-cache"],
                    env={"MY_PROVIDER_KEY": key})
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    written = "".join(p.read_text() for p in (tmp_path / "run").iterdir())
    assert "MY_PROVIDER_KEY" in written  # the variable's NAME is recorded
    for text in (written, out, err):
        assert key not in text


def test_batch_submit_then_collect(tmp_path):
    from cresowlve_core.evaluation.batch_eval import batch_evaluate

    items = make_items(5)
    items_path = tmp_path / "items.jsonl"
    write_items_jsonl(items_path, items)
    with FakeServer(answers=answer_for, batch_polls=1) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, items=str(items_path))
        first = batch_evaluate(cfg)
        assert first.line.startswith("submitted batch") and first.code == 1 and first.summary is None
        bid = json.loads((tmp_path / "run" / "batch.json").read_text())["batch_id"]
        assert srv.total == 0  # nothing answered live
        assert batch_evaluate(cfg).line == f"batch {bid} is in_progress (0 of 5 done at the provider)"
        done = batch_evaluate(cfg)
        assert srv.total == 5  # answered inside the batch (the fake counts them), none sent live
    assert f"batch {bid} completed: 5 of 5 answers kept" in done.line and "ok=5" in done.line
    assert done.summary is not None and done.summary["n_ok"] == 5
    recs = read_lines(tmp_path / "run")
    assert sorted(r["id"] for r in recs) == sorted(i.id for i in items)
    assert sum(r["em_strict"] for r in recs) == 3  # items 0, 2, 4 are answered right
    assert not (tmp_path / "run" / "batch.json").exists()
    assert (tmp_path / "run" / "batches" / f"{bid}.json").exists()


def test_missing_key_variable_is_one_clear_error_and_sends_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("UNSET_KEY_VAR", raising=False)
    with FakeServer(answers=answer_for) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, api_key_env="UNSET_KEY_VAR")
        with pytest.raises(Exception, match="UNSET_KEY_VAR.*not set"):
            asyncio.run(evaluate_async(cfg, make_items(4), progress=False))
        assert srv.total == 0
    assert not (tmp_path / "run" / "responses.jsonl").exists()  # nothing was run, nothing is marked errored


def test_cli_summary_line_and_cache_commands(tmp_path):
    items_path = tmp_path / "items.jsonl"
    write_items_jsonl(items_path, make_items(4))
    with FakeServer(answers=answer_for) as srv:
        base = ["eval", "--items", str(items_path), "--model", "fake-model", "--base-url", srv.base_url]
        p = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", *base, "--run-dir", str(tmp_path / "r1")],
                           cwd=REPO, capture_output=True, text=True, env={**os.environ, "CRESOWLVE_CACHE_DIR": str(tmp_path)})
        assert p.returncode == 0, p.stderr
        assert "n=4 ok=4 error=0 not-run=0 | all items (Table 1: creative only): EM strict 50.0% lenient 50.0% | judge: none" in p.stdout
        assert "cost unknown" in p.stdout  # fake-model has no price: unknown, not $0
    stats = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "cache", "stats", "--path", str(tmp_path / "responses.sqlite")],
                           cwd=REPO, capture_output=True, text=True)
    assert stats.returncode == 0 and '"entries": 4' in stats.stdout.replace("'", '"'), stats.stdout
    cleared = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "cache", "clear", "--yes", "--path", str(tmp_path / "responses.sqlite")],
                             cwd=REPO, capture_output=True, text=True)
    assert "removed 4" in cleared.stdout


def test_judge_repeat_records_a_second_verdict(tmp_path):
    items = make_items(3)
    with FakeServer(answers=answer_for) as srv:
        out = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, judge_model="fake-judge", judge_repeat=True),
                                         items, progress=False))
        judge_calls = [r for r in srv.requests if "candidate_answer" in r.prompt]
    assert len(judge_calls) == 6  # two independent verdicts per item, not a cache hit
    assert {r.body["seed"] for r in judge_calls} == {0, 1}
    assert all(r.extra["judge_repeat"] == "CORRECT" for r in out.records)


def test_max_cost_stops_cleanly_and_keeps_finished_items(tmp_path, monkeypatch):
    prices = tmp_path / "prices.csv"
    # 1,000 USD per million tokens: each call's upper bound is ~0.08 USD (64 output tokens + prompt)
    prices.write_text("model,input_per_mtok,output_per_mtok,batch_discount\nfake-model,1000,1000,0.5\n")
    monkeypatch.setenv("CRESOWLVE_PRICES", str(prices))
    items = make_items(20)
    with FakeServer(answers=answer_for) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, concurrency=1, max_cost=0.5)
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
        sent = srv.total
    assert out.stopped and out.stopped.startswith("max_cost reached")
    recs = read_lines(tmp_path / "run")
    assert 0 < len(recs) == sent < 20  # every call that was paid for is kept; the rest are not-run
    assert out.summary["n_not_run"] == 20 - len(recs) and out.summary["n_error"] == 0
    assert 0 < out.summary["cost"] <= 0.5
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["stopped"].startswith("max_cost reached")


def test_judge_max_cost_stops_the_judge_cleanly_keeps_answers_and_resume_only_judges(tmp_path, monkeypatch):
    prices = tmp_path / "prices.csv"
    # the judge's calls are priced (each one's upper bound ~0.5 USD: 512 output tokens + prompt), the model's free
    prices.write_text("model,input_per_mtok,output_per_mtok,batch_discount\n"
                      "fake-judge,1000,1000,0.5\nfake-model,0,0,0.5\n")
    monkeypatch.setenv("CRESOWLVE_PRICES", str(prices))
    items = make_items(12)
    with FakeServer(answers=answer_for) as model_srv, FakeServer(answers=answer_for) as judge_srv:
        cfg = cfg_for(model_srv, tmp_path / "run", tmp_path, judge_model="fake-judge", judge_base_url=judge_srv.base_url,
                      concurrency=1, cache_path=None, cache=False, judge_max_cost=2.0)
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
        assert out.stopped and out.stopped.startswith("max_cost reached: the judge budget of $2.0000")
        judge_spent = out.summary["spent_now"]["judge"]["spent"]
        assert 0 < judge_spent <= 2.0 and 0 < judge_srv.total < 12
        kept = latest_lines(tmp_path / "run")
        judged = [r for r in kept if r["judge_status"] == "scored"]
        assert len(judged) == judge_srv.total  # every verdict paid for is on disk
        stopped_at = [r for r in kept if r["judge_status"] != "scored"]
        assert len(stopped_at) == 1 and stopped_at[0]["status"] == "ok"  # the answer the judge stopped at is kept
        assert stopped_at[0]["judge_status"] == "not_run"  # the budget kept its verdict from being asked: no error
        assert stopped_at[0]["scores"]["judge"] is None  # unjudged, not wrong
        assert out.summary["n_judge_error"] == 0 and out.summary["n_judge_not_run"] == 1
        assert "judge errors" not in summary_line(out.summary) and "| judge not run 1 |" in summary_line(out.summary)
        assert out.summary["judge_cost"] is not None  # every call it sent has a price
        assert out.summary["n_not_run"] == 12 - len(kept)
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["config"]["judge_max_cost"] == 2.0 and manifest["stopped"] == out.stopped
        sent_before = model_srv.total
        out = asyncio.run(evaluate_async(cfg.model_copy(update={"judge_max_cost": None}), items, progress=False))
    assert model_srv.total - sent_before == 12 - len(kept)  # kept answers are not asked again
    assert out.stopped is None and out.summary["n_judged"] == 12


def test_judge_failing_fatally_keeps_answers_and_resume_only_judges(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY_VAR", "sk-judge-wrong-00000000000")
    items = make_items(3)
    with FakeServer(answers=answer_for) as model_srv, FakeServer(answers=answer_for, api_key="sk-judge-right-0000000000") as judge_srv:
        cfg = cfg_for(model_srv, tmp_path / "run", tmp_path, judge_model="fake-judge", judge_base_url=judge_srv.base_url,
                      judge_api_key_env="JUDGE_KEY_VAR", concurrency=1, cache_path=None, cache=False)
        with pytest.raises(LLMFatalError, match="fake-judge"):
            asyncio.run(evaluate_async(cfg, items, progress=False))
        kept = latest_lines(tmp_path / "run")
        assert len(kept) == model_srv.total >= 1  # every answer the model gave is on disk
        assert all(r["status"] == "ok" and r["judge_status"] == "error" for r in kept)
        monkeypatch.setenv("JUDGE_KEY_VAR", "sk-judge-right-0000000000")
        sent_before = model_srv.total
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
    assert model_srv.total - sent_before == 3 - len(kept)  # kept answers are not asked again
    assert out.summary["n_judged"] == 3 and out.summary["judge_accuracy"] == 1.0


def test_the_judge_is_asked_while_the_answer_is_written_and_the_answer_is_on_disk_before_its_verdict(tmp_path, monkeypatch):
    from cresowlve_core.runtime import RunDir

    writes: list[tuple[float, float, list[dict]]] = []  # (start, end, records) of each write, a slow disk
    write = RunDir._write_lines

    def slow_write(self, filename, lines):
        start = time.monotonic()
        time.sleep(0.3)
        write(self, filename, lines)
        writes.append((start, time.monotonic(), [json.loads(x) for x in lines]))

    monkeypatch.setattr(RunDir, "_write_lines", slow_write)
    judge_asked: list[float] = []

    def judge_answer(req):
        judge_asked.append(time.monotonic())
        return answer_for(req)

    items = make_items(3)
    with FakeServer(answers=answer_for) as model_srv, FakeServer(answers=judge_answer) as judge_srv:
        cfg = cfg_for(model_srv, tmp_path / "run", tmp_path, judge_model="fake-judge", judge_base_url=judge_srv.base_url,
                      concurrency=1, cache_path=None, cache=False)
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
    assert out.summary["n_judged"] == 3
    first_answer_written = next(end for _, end, recs in writes if recs[0]["judge_status"] == "not_run")
    assert judge_asked[0] < first_answer_written  # the judge did not wait for the disk
    lines = read_lines(tmp_path / "run")
    for item in items:  # each answer's own record is written before the record with its verdict
        mine = [r for r in lines if r["id"] == item.id]
        assert [r["judge_status"] for r in mine] == ["not_run", "scored"]


def test_resume_from_another_base_url_is_allowed_and_recorded(tmp_path):
    items = make_items(3)
    with FakeServer(answers=answer_for) as srv1:
        asyncio.run(evaluate_async(cfg_for(srv1, tmp_path / "run", tmp_path), items[:2], progress=False))
    with FakeServer(answers=answer_for) as srv2:  # same model served on another port
        out = asyncio.run(evaluate_async(cfg_for(srv2, tmp_path / "run", tmp_path), items, progress=False))
        assert srv2.total == 1  # only the missing item
    assert out.summary["n_ok"] == 3
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["base_url_history"] == [srv1.base_url, srv2.base_url]


def test_effort_is_sent_on_chat_and_recorded_and_missing_reasoning_is_flagged(tmp_path):
    """--effort high --api chat must carry the effort; the manifest records exactly what was sent."""
    with FakeServer(answers=answer_for) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, effort="high", api="chat")
        out = asyncio.run(evaluate_async(cfg, make_items(2), progress=False))
        body = srv.requests[0].body
    assert body.get("reasoning_effort") == "high"
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["sent"]["reasoning_effort"] == "high" and m["effort"] == "high" and m["thinking"] is True
    assert out.summary["n_no_reasoning"] == 2  # the fake server returned no reasoning: flagged
    from cresowlve_core.evaluation.runner import summary_line

    assert "show no reasoning" in summary_line(out.summary)


def test_paper_protocol_sends_no_temperature_and_judges_yes_no(tmp_path):
    def reply(req):
        if "Reply with only one word" in req.prompt:
            return "Yes." if "Answer0" in req.prompt.split("Model response:")[1] else "no"
        return answer_for(req)

    with FakeServer(answers=reply) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, temperature=None, judge_model="gpt-4o", judge_protocol="paper")
        out = asyncio.run(evaluate_async(cfg, make_items(2), progress=False))
        bodies = [r.body for r in srv.requests]
    assert all("temperature" not in b for b in bodies)  # provider-default decoding, model and judge
    assert out.summary["n_judged"] == 2 and out.summary["judge_accuracy"] == 0.5
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["judge"]["protocol"] == "paper" and m["judge"]["prompt"].startswith("judge_paper@")
    assert m["judge"]["unparseable_counts_as"] == "wrong"
    assert m["temperature"] is None and "temperature" not in m["sent"]


def test_paper_verdict_parser():
    # the released code: correct iff the normalised output is "yes"; anything else wrong
    from cresowlve_core.evaluation.scoring import parse_paper_verdict

    assert parse_paper_verdict("Yes") == "CORRECT" and parse_paper_verdict("**No.**") == "INCORRECT"
    assert parse_paper_verdict("Да") == "INCORRECT" and parse_paper_verdict("maybe yes") == "INCORRECT"
    assert parse_paper_verdict("") == "INCORRECT"
    assert parse_paper_verdict("Reply with only one word: yes or no.") == "INCORRECT"  # an echo of the prompt


def test_the_cli_line_says_what_this_invocation_sent(tmp_path, capsys):
    """The first run says how many items it ran; a re-run of the finished run directory says nothing was sent."""
    from cresowlve_core.cli import main

    items = make_items(3)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(it.model_dump_json() + "\n" for it in items))
    with FakeServer(answers=answer_for) as srv:
        args = ["eval", "--items", str(path), "--lang", "en", "--model", "m", "--base-url", srv.base_url,
                "--run-dir", str(tmp_path / "run"), "--no-cache"]
        assert main(args) == 0
        first = capsys.readouterr().out.strip().splitlines()[-1]
        assert main(args) == 0
        again = capsys.readouterr().out.strip().splitlines()[-1]
        assert srv.total == 3
    assert first.endswith("| 3 item(s) run"), first
    assert again.endswith("| nothing sent (every item was already in the run directory)"), again


def test_a_run_the_budget_stops_before_any_request_never_says_every_item_was_done(tmp_path, capsys):
    """Nothing sent because --max-cost refused the first call: the line says nothing was sent, and the
    last line why; not that every item was already in the run directory."""
    from cresowlve_core.cli import main

    path = tmp_path / "items.jsonl"
    path.write_text("".join(it.model_dump_json() + "\n" for it in make_items(3)))
    with FakeServer(answers=answer_for) as srv:
        code = main(["eval", "--items", str(path), "--lang", "en", "--model", "gpt-4o", "--base-url", srv.base_url,
                     "--run-dir", str(tmp_path / "run"), "--no-cache", "--max-cost", "0.001"])
        out, err = capsys.readouterr()
        assert srv.total == 0
    assert code == 3
    assert out.strip().splitlines()[-1].endswith("| nothing sent"), out
    assert "max_cost reached" in err.strip().splitlines()[-1]


def judged_eval(tmp_path, answer, capsys) -> tuple[int, str, str]:
    """``cresowlve eval`` of 3 items with a judge, both served by ``answer``: (exit code, stdout, stderr)."""
    from cresowlve_core.cli import main

    path = tmp_path / "items.jsonl"
    path.write_text("".join(it.model_dump_json() + "\n" for it in make_items(3)))
    with FakeServer(answers=answer) as srv:
        code = main(["eval", "--items", str(path), "--lang", "en", "--model", "m", "--base-url", srv.base_url,
                     "--judge-model", "j", "--run-dir", str(tmp_path / "run"), "--no-cache"])
        out, err = capsys.readouterr()
    return code, out, err


def test_a_judge_that_gives_no_verdict_at_all_leaves_the_run_incomplete(tmp_path, capsys):
    """Every judge reply is kept but none is a verdict (the judge answers in Russian, outside the label
    set): exit 1, as every other stage whose model output parsed for no unit; the last line says why.
    Before: exit 0 with "judge: no verdicts"."""

    def answer(req) -> str:
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"Ответ совпадает с эталоном.\nВЕРДИКТ-{nonce}: ВЕРНО"
        return answer_for(req)

    code, out, err = judged_eval(tmp_path, answer, capsys)
    assert code == 1, err
    assert "judge: no verdicts | unscored 3" in out
    assert err.strip().splitlines()[-1].startswith("incomplete: no verdict parsed: 0 of 3 judge replies gave one")
    assert [r["judge_status"] for r in latest_lines(tmp_path / "run")] == ["unscored"] * 3


def test_judge_replies_cut_off_before_their_verdict_are_named_with_the_flag(tmp_path, capsys):
    """The judge's replies end at its token limit (finish_reason: length) before the verdict line: unscored,
    and the summary line and the last line say they were cut off and name --judge-max-tokens. Before:
    "unscored 3" and "0 of 3 judge replies gave one", the same as a judge that wrote no verdict line."""
    from fakeserver import Reply


    def answer(req):
        if "candidate_answer" in req.prompt:
            return Reply("The candidate names the same astronomer, so", finish_reason="length")
        return answer_for(req)

    code, out, err = judged_eval(tmp_path, answer, capsys)
    assert code == 1, err
    assert ("unscored 3 (3 cut off at the judge's token limit before a verdict: --judge-max-tokens)" in out), out
    assert err.strip().splitlines()[-1].startswith(
        "incomplete: no verdict parsed: 0 of 3 judge replies gave one (3 cut off at the judge's token limit")
    assert {r["judge_outcome"] for r in latest_lines(tmp_path / "run")} == {"truncated"}


def test_paper_judge_replies_cut_off_before_a_yes_or_no_are_unscored_not_wrong(tmp_path, capsys):
    """Under the paper's protocol anything but "yes" is wrong, but a reply cut off at the judge's token limit
    (finish_reason: length; a thinking judge spent its budget on thought) was never written: unscored and
    named as cut off, as under ours. A bare yes or no that hit the limit is still a verdict. Before: every
    cut-off reply was scored INCORRECT, "judge 0.0% (n=3)" beside EM 100%, exit 0."""
    from fakeserver import Reply

    from cresowlve_core.cli import main

    def answer(req):
        if "Reply with only one word: yes or no" in req.prompt:
            n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
            return Reply(["", "The candidate", "Yes"][n], finish_reason="length")
        return answer_for(req)

    path = tmp_path / "items.jsonl"
    path.write_text("".join(it.model_dump_json() + "\n" for it in make_items(3)))
    with FakeServer(answers=answer) as srv:
        code = main(["eval", "--items", str(path), "--lang", "en", "--model", "m", "--base-url", srv.base_url,
                     "--judge-model", "j", "--judge-protocol", "paper", "--run-dir", str(tmp_path / "run"), "--no-cache"])
        out, err = capsys.readouterr()
    recs = sorted(latest_lines(tmp_path / "run"), key=lambda r: r["id"])
    assert [(r["judge_status"], r["judge_verdict"]) for r in recs] == [("unscored", None), ("unscored", None),
                                                                      ("scored", "CORRECT")]
    assert "judge 100.0%" in out and "(n=1)" in out, out
    assert "unscored 2 (2 cut off at the judge's token limit before a verdict: --judge-max-tokens)" in out, out
    assert code == 0, err  # one verdict was given: the others are counted and named, as under ours


def test_the_progress_bars_print_no_terminal_escape_from_a_model_name(tmp_path, capsys):
    """The answers' and the judge's progress bars name the model and the judge: an ANSI or OSC escape in
    either (a name the command line refuses, argtypes.model_name; a caller of the library may pass one)
    reaches the terminal as spaces."""
    hostile = "\x1b[2J\x1b]0;pwned\x07"
    with FakeServer(answers=answer_for) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, model="m" + hostile, judge_model="j" + hostile,
                      judge_base_url=srv.base_url)
        asyncio.run(evaluate_async(cfg, make_items(2), progress=True))
    err = capsys.readouterr().err
    assert "m [2J ]0;pwned [en]" in err and "judge j [2J ]0;pwned" in err, err
    assert "\x1b[2J" not in err and "\x1b]0;" not in err and "\x07" not in err  # tqdm's own cursor moves stay


def _eval_items_file(srv: FakeServer, tmp_path: Path, items_path: Path, capsys) -> tuple[int, str]:
    """``cresowlve eval --items items_path`` into tmp_path/run: (exit code, the last line of stderr)."""
    from cresowlve_core.cli import main

    code = main(["eval", "--items", str(items_path), "--lang", "en", "--model", "m", "--base-url", srv.base_url,
                 "--run-dir", str(tmp_path / "run"), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def test_a_run_resumes_from_a_copy_of_its_items_file_at_another_path(tmp_path, capsys):
    """A co-author copies the run directory and its items file to another path: the resume reads the same
    items (the items file's SHA-256), sends nothing and records both paths. Before: refused, "the run
    directory holds another configuration (items: '.../alice/items.jsonl' → '.../bob/items.jsonl')"."""
    import hashlib

    alice, bob = tmp_path / "alice" / "items.jsonl", tmp_path / "bob" / "items.jsonl"
    for path in (alice, bob):
        path.parent.mkdir()
        path.write_text("".join(it.model_dump_json() + "\n" for it in make_items(3)))
    with FakeServer(answers=answer_for) as srv:
        assert _eval_items_file(srv, tmp_path, alice, capsys)[0] == 0
        sent = srv.total
        code, last = _eval_items_file(srv, tmp_path, bob, capsys)
        assert code == 0 and srv.total == sent, last
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["items"] == str(bob) and m["items_history"] == [str(alice), str(bob)]
    assert m["items_sha256"] == hashlib.sha256(bob.read_bytes()).hexdigest()


def test_an_items_file_edited_after_its_items_were_answered_is_refused_per_item(tmp_path, capsys):
    """An answered item's text changed in the items file (in place, or in a copy at another path): the resume
    is refused naming the item, before anything is sent, and the manifest is kept; an item added to the file
    is asked. Before: the edited file at the same path resumed, its old answers scored as the new items'."""
    items = make_items(3)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(it.model_dump_json() + "\n" for it in items[:2]))
    with FakeServer(answers=answer_for) as srv:
        assert _eval_items_file(srv, tmp_path, path, capsys)[0] == 0
        path.write_text("".join(it.model_dump_json() + "\n" for it in items))  # one item added
        assert _eval_items_file(srv, tmp_path, path, capsys)[0] == 0 and srv.total == 3
        manifest = (tmp_path / "run" / "manifest.json").read_text()
        edited = items[1].model_copy(update={"en": items[1].en.model_copy(update={"answer": "Corrected1"})})
        path.write_text("".join(it.model_dump_json() + "\n" for it in (items[0], edited, items[2])))
        code, last = _eval_items_file(srv, tmp_path, path, capsys)
        assert srv.total == 3  # nothing sent
    assert code == 2 and "1 item(s) of the run were answered from another text than the items give now " \
        f"('{items[1].id}')" in last and "nothing was sent" in last, last
    assert (tmp_path / "run" / "manifest.json").read_text() == manifest
