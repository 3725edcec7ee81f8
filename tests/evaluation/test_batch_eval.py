"""``cresowlve eval --batch`` end to end against a local fake of the Batch endpoints, with real
batch objects and file lines (tests/fixtures/batch/SOURCES.md): every state of ``batch.json``
leads to a defined next step, and no paid answer is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer

from cresowlve_core.cli import main
from cresowlve_core.items import Item, ItemView
from cresowlve_core.llm.pricing import PriceTable, usd
from cresowlve_core.llm.types import Usage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "batch"


def fixture(name: str) -> Any:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else [json.loads(x) for x in text.splitlines() if x.strip()]


def answer_for(req) -> str:
    n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
    return f"<Answer>Answer{n}</Answer>"


class Run:
    """``cresowlve eval --batch`` on 5 items in one run directory, against ``srv``."""

    def __init__(self, tmp_path: Path, srv: FakeServer, capsys: pytest.CaptureFixture[str], *extra: str):
        self.dir, self.srv, self.capsys = tmp_path / "run", srv, capsys
        items = [Item(id=f"chgk_{i:010x}", difficulty=1, reasoning_type="creative",
                      en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}")) for i in range(5)]
        self.ids = [it.id for it in items]
        path = tmp_path / "items.jsonl"
        path.write_text("".join(json.dumps(it.published_row("en")) + "\n" for it in items))
        self.args = ["eval", "--batch", "--items", str(path), "--model", "fake-model", "--base-url", srv.base_url,
                     "--run-dir", str(self.dir), "--no-cache", *extra]

    def __call__(self) -> tuple[int, str, str]:
        code = main(self.args)
        out, err = self.capsys.readouterr()
        return code, out, err

    def records(self) -> dict[str, dict[str, Any]]:
        path = self.dir / "responses.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
        return {r["id"]: r for r in lines}

    def submitted(self) -> list[str]:
        """The custom ids of the batch now recorded in batch.json."""
        return [json.loads(x)["custom_id"] for x in (self.dir / "batch_input.jsonl").read_text().splitlines()]


def last_line(err: str) -> str:
    return [x for x in err.splitlines() if x.strip()][-1]


def test_expired_batch_keeps_3_of_5_answers_and_the_rerun_submits_exactly_2(tmp_path, capsys):
    with FakeServer(answers=answer_for, batch_polls=0, batch_final=fixture("batch_expired.json"), batch_n_done=3,
                    batch_error_line=fixture("error_lines_expired.jsonl")[0]) as srv:
        run = Run(tmp_path, srv, capsys)
        code, out, err = run()
        assert code == 1 and out.startswith("submitted batch") and "run the same command again" in last_line(err)
        first = json.loads((run.dir / "batch.json").read_text())["batch_id"]
        assert len(run.submitted()) == 5 and srv.total == 0

        code, out, err = run()  # the batch expired with 3 of 5 done
        recs = run.records()
        assert sorted(recs) == run.ids[:3] and all(r["status"] == "ok" for r in recs.values())
        assert all(r["em_strict"] for r in recs.values()) and all(r["cost"] is None or r["cost"] >= 0 for r in recs.values())
        assert f"batch {first} expired: 3 of 5 answers kept, 0 errored, 2 not run" in out
        assert code == 1 and last_line(err).startswith("incomplete: 0 errored, 2 not run of 5 items")
        assert not (run.dir / "batch.json").exists() and (run.dir / "batches" / f"{first}.json").exists()

        srv.batch_final, srv.batch_n_done = None, None  # the provider now finishes whatever it gets
        code, out, err = run()  # the next run submits only the rest
        assert code == 1 and "with 2 of 5 items" in out
        assert run.submitted() == run.ids[3:]
        code, out, err = run()
        assert code == 0 and "batch" in out and "completed: 2 of 2 answers kept" in out and err == ""
        assert srv.total == 5  # every item answered (and paid for) exactly once
        assert sorted(run.records()) == run.ids

        code, out, err = run()  # completed and collected: nothing left to do, nothing sent
        assert code == 0 and out.startswith("nothing to submit") and len(srv._batches) == 2


def test_failed_batch_shows_the_providers_reason_and_exits_3(tmp_path, capsys):
    with FakeServer(answers=answer_for, batch_polls=0, batch_final=fixture("batch_failed_token_limit.json"),
                    batch_n_done=0) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        code, out, err = run()
        assert code == 3
        reason = "Enqueued token limit reached for gpt-4o-mini in organization"
        assert last_line(err).startswith("stopped early (batch ") and reason in last_line(err)
        assert "0 of 5 items done" in last_line(err) and reason in out
        assert json.loads((run.dir / "summary.json").read_text())["stopped"].count(reason) == 1
        assert not (run.dir / "batch.json").exists()  # the failed batch is archived, not a wedge
        srv.batch_final, srv.batch_n_done = None, None
        code, out, err = run()  # defined next step: a new batch with every item
        assert code == 1 and "with 5 of 5 items" in out and len(srv._batches) == 2


def test_batch_completed_with_every_line_failed_shows_the_error_files_reason(tmp_path, capsys):
    """Every line refused (here: ``max_tokens`` sent to a reasoning model). A live run stops on that
    error (exit 3); so does the batch, with the provider's message from ``response.body.error``."""
    with FakeServer(answers=answer_for, batch_polls=0, batch_final=fixture("batch_completed_all_failed.json"),
                    batch_n_done=0, batch_error_line=fixture("error_line_unsupported_parameter.jsonl")[0]) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        code, out, err = run()
    assert code == 3
    assert "Unsupported parameter: 'max_tokens' is not supported with this model" in last_line(err)
    assert "(5 of 5 lines)" in last_line(err) and "0 of 5 items done, 0 errored, 5 not run" in last_line(err)
    assert run.records() == {}


def test_per_request_errors_are_recorded_with_the_providers_message(tmp_path, capsys):
    with FakeServer(answers=answer_for, batch_polls=0, batch_final=fixture("batch_completed.json")) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        srv.batch_fail_ids = {run.ids[1]}
        code, out, err = run()
    recs = run.records()
    assert recs[run.ids[1]]["status"] == "error" and "scripted failure" in recs[run.ids[1]]["error"]
    assert code == 1 and "1 errored, 0 not run of 5 items" in last_line(err) and "scripted failure" in last_line(err)


def test_corrupt_batch_json_is_refused_with_a_way_forward(tmp_path, capsys):
    with FakeServer(answers=answer_for, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        state_file = run.dir / "batch.json"
        bid = json.loads(state_file.read_text())["batch_id"]
        state_file.write_text('{"batch_id": "batch-1", "submitted_at": "2026-')  # torn by hand or a full disk
        for _ in range(2):  # the same clear refusal, and nothing sent or submitted
            code, out, err = run()
            assert code == 2 and "batch.json is unreadable" in err and f"mv {state_file}" in err
            assert "write its id back" in err and len(srv._batches) == 1 and srv.total == 0

        state_file.write_text(json.dumps({"batch_id": bid}))  # way forward 1: the id written back
        code, out, err = run()
        assert code == 0 and f"batch {bid} completed: 5 of 5 answers kept" in out and len(run.records()) == 5


def test_corrupt_batch_json_moved_aside_submits_only_the_items_without_answers(tmp_path, capsys):
    with FakeServer(answers=answer_for, batch_polls=0, batch_n_done=2) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        run()  # 2 of 5 answered
        run()  # a new batch of 3
        (run.dir / "batch.json").write_text("garbage")
        (run.dir / "batch.json").rename(run.dir / "batch.json.bad")  # way forward 2
        code, out, err = run()
    assert code == 1 and "with 3 of 5 items" in out and len(run.records()) == 2


def test_reasoning_model_batch_sends_max_completion_tokens_and_effort(tmp_path, capsys):
    with FakeServer(answers=answer_for, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys, "--model", "gpt-5-mini", "--provider", "openai", "--effort", "high",
                  "--api", "chat", "--max-tokens", "2000")
        code, out, err = run()
        line = json.loads((run.dir / "batch_input.jsonl").read_text().splitlines()[0])
        code, out, err = run()
    body = line["body"]
    assert line["url"] == "/v1/chat/completions"
    assert body["max_completion_tokens"] == 2000 and body["reasoning_effort"] == "high"
    assert "temperature" not in body and "max_tokens" not in body
    manifest = json.loads((run.dir / "manifest.json").read_text())
    sent = manifest["sent"]
    assert sent == {k: v for k, v in body.items() if k not in ("model", "messages")}
    assert manifest["provider"] == "openai" and body["model"] == "gpt-5-mini"
    assert code == 0 and len(run.records()) == 5


def test_unset_key_variable_is_refused_before_any_batch(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BATCH_TEST_KEY", raising=False)
    with FakeServer(answers=answer_for) as srv:
        run = Run(tmp_path, srv, capsys, "--api-key-env", "BATCH_TEST_KEY")
        code, out, err = run()
        assert code == 2 and "BATCH_TEST_KEY" in err and srv._files == {} and srv._batches == {}


def test_max_cost_below_the_batchs_bound_is_refused_before_anything_is_sent(tmp_path, capsys):
    """A batch is paid for whole: five gpt-4o requests at 4,096 tokens each may cost $0.1039 at the
    Batch API's price, so $0.05 refuses it (nothing uploaded), and $0.11 in the same run directory submits it."""
    with FakeServer(answers=answer_for) as srv:
        code, out, err = Run(tmp_path, srv, capsys, "--model", "gpt-4o", "--max-cost", "0.05")()
        assert code == 2 and srv._files == {} and srv._batches == {}
        assert last_line(err) == ("refused: the batch of 5 requests may cost up to $0.1039 at its --max-tokens, above "
                                  "--max-cost $0.0500: raise the budget, lower --max-tokens, or submit fewer items "
                                  "(--limit); nothing was submitted")
        assert not (tmp_path / "run" / "batch.json").exists()
        code, out, err = Run(tmp_path, srv, capsys, "--model", "gpt-4o", "--max-cost", "0.11")()
        assert code == 1 and len(srv._batches) == 1 and "submitted batch" in out


def test_max_cost_with_an_unpriced_model_refuses_the_batch(tmp_path, capsys):
    with FakeServer(answers=answer_for) as srv:
        code, out, err = Run(tmp_path, srv, capsys, "--max-cost", "100")()  # fake-model has no price
        assert code == 2 and srv._files == {} and srv._batches == {}
        assert "'fake-model' has no price, so the batch's cost cannot be bounded" in last_line(err)


def test_answers_the_judge_errored_on_are_judged_by_the_next_batch_call(tmp_path, capsys, monkeypatch):
    """The batch's answers are judged live; a judge that keeps answering 500 leaves them unjudged: exit 1,
    the last line naming the judge's error. The next ``eval --batch`` has nothing to submit and asks the
    judge again for those answers only. Before: both calls exited 0, and the second never asked the judge."""
    from cresowlve_core.llm.client import LLMClient

    monkeypatch.setattr(LLMClient, "_delay", lambda self, attempt, failure: 0.0)  # the judge's retries, at once
    judge_down = True

    def answer(req) -> str:
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"Same.\nVERDICT-{nonce}: CORRECT"
        return answer_for(req)

    with FakeServer(answers=answer, batch_polls=0,
                    faults=lambda req: "500" if judge_down and "candidate_answer" in req.prompt else None) as srv:
        run = Run(tmp_path, srv, capsys, "--judge-model", "fake-judge")
        assert run()[0] == 1  # submitted
        code, out, err = run()  # collected; the judge errors on every answer
        assert code == 1, err
        assert last_line(err).startswith("incomplete: 5 errored, 0 not run of 5 judge verdicts; most common error (5x)")
        assert all(r["judge_status"] == "error" for r in run.records().values())
        judge_down, before = False, len(srv.requests)
        code, out, err = run()
        asked = srv.requests[before:]
    assert code == 0, err
    assert out.startswith("nothing to submit") and "judge 100.0%" in out
    assert len(asked) == 5 and all("candidate_answer" in r.prompt for r in asked)  # the judge only, live
    assert all(r["judge_status"] == "scored" for r in run.records().values())


def test_retry_truncated_submits_the_cut_off_answers_again_at_the_larger_budget(tmp_path, capsys):
    """``--retry-truncated --max-tokens N`` re-asks the answers cut off at a smaller budget, as a live
    run does: a batch of those items only, sent with the new budget. Before: "nothing to submit: every
    item already has an answer", exit 0, the cut-off answer kept and scored wrong."""
    from fakeserver import Reply

    budget_of: dict[str, int] = {}

    def answer(req) -> str | Reply:
        if "Puzzle number 3:" in req.prompt and req.body.get("max_tokens") == 4096:
            return Reply("<Answer>Ans", finish_reason="length")
        return answer_for(req)

    with FakeServer(answers=answer, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        code, out, err = run()
        assert code == 0 and "truncated 1" in out and run.records()[run.ids[3]]["truncated"] is True
        # the live run's warning, with the way forward (before: no warning on a batch collection)
        assert err.startswith("warning: 1 of 5 answers (20.0%) were cut off by the token limit") and \
            "--retry-truncated --max-tokens N" in err
        run.args += ["--retry-truncated", "--max-tokens", "8000"]
        code, out, err = run()
        assert code == 1 and "with 1 of 5 items" in out
        budget_of.update({json.loads(x)["custom_id"]: json.loads(x)["body"]["max_tokens"]
                          for x in (run.dir / "batch_input.jsonl").read_text().splitlines()})
        code, out, err = run()
    assert budget_of == {run.ids[3]: 8000}
    assert code == 0 and "truncated 0" in out and "EM strict 100.0%" in out
    rec = run.records()[run.ids[3]]
    assert rec["truncated"] is False and rec["max_tokens"] == 8000 and rec["em_strict"] is True


def test_an_output_line_for_a_request_not_in_the_batch_is_not_counted_as_kept(tmp_path, capsys, caplog):
    """The output file also holds a line for a request this batch was not sent (the OpenAI guide's own
    output line, custom_id ``request-2``): it is not an answer of the run. Before: "6 of 5 answers kept"."""
    with FakeServer(answers=answer_for, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        finish = srv._finish_batch

        def finish_with_a_stranger(b: dict[str, Any]) -> None:
            finish(b)
            content = srv._files[b["output_file_id"]]["content"]
            srv._files[b["output_file_id"]]["content"] = content + (FIXTURES / "output_lines_chat.jsonl").read_bytes()

        srv._finish_batch = finish_with_a_stranger  # type: ignore[method-assign]
        code, out, err = run()
    assert code == 0 and sorted(run.records()) == run.ids
    assert "5 of 5 answers kept, 0 errored, 0 not run, 2 line(s) for requests not in this batch ignored" in out
    assert "custom_id 'request-1', 'request-2'" in caplog.text


def test_answers_billed_with_no_text_are_errors_whose_cost_is_shown(tmp_path, capsys):
    """A batch answer with no text (the fake's chat completion with empty content, finish_reason stop,
    and its usage) is the item's error, retried by the next batch, as a live run retries it; what the
    provider charged for it is named, as a live run's summary names it. Before: its cost was dropped."""
    from fakeserver import Reply

    def answer(req) -> str | Reply:
        return Reply("") if "Puzzle number 2:" in req.prompt else answer_for(req)

    with FakeServer(answers=answer, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys, "--model", "gpt-4o-mini")
        run()
        code, out, err = run()
    recs = run.records()
    assert recs[run.ids[2]]["status"] == "error" and recs[run.ids[2]]["error"] == "response has empty text"
    # the fake's usage: the same prompt tokens as the other answers, no output token
    billed = PriceTable.load().cost("gpt-4o-mini", Usage(input_tokens=recs[run.ids[0]]["usage"]["input_tokens"],
                                                         output_tokens=0), batch=True)
    assert billed is not None and billed > 0
    assert f"4 of 5 answers kept, 1 errored (1 billed with no text: {usd(billed)}, not in cost), 0 not run" in out
    assert code == 1 and "1 errored, 0 not run of 5 items" in last_line(err)
    state = json.loads(next((run.dir / "batches").glob("batch-*.json")).read_text())
    assert state["n_unusable"] == 1 and state["unusable_cost"] == pytest.approx(billed)


def test_a_batch_id_of_another_run_written_back_is_refused_not_recorded_as_this_runs_answers(tmp_path, capsys):
    """The unreadable-state message says to write the batch id back; the id written is that of another
    run directory's batch (here another model's, same items). Its answers are refused (exit 2, nothing
    recorded), naming where it was submitted from. Before: recorded as this run's gpt-4o answers."""
    with FakeServer(answers=answer_for, batch_polls=0) as srv:
        (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
        mini = Run(tmp_path / "a", srv, capsys, "--model", "gpt-4o-mini")
        full = Run(tmp_path / "b", srv, capsys, "--model", "gpt-4o")
        mini(), full()
        mine = json.loads((full.dir / "batch.json").read_text())["batch_id"]
        other = json.loads((mini.dir / "batch.json").read_text())["batch_id"]
        (full.dir / "batch.json").write_text(json.dumps({"batch_id": other}))
        code, out, err = full()
        assert code == 2 and full.records() == {}
        assert f"batch {other} (written in {full.dir / 'batch.json'}) was not made from this run directory's " \
               f"batch_input.jsonl (it was submitted from {mini.dir.resolve()})" in last_line(err)
        (full.dir / "batch.json").write_text(json.dumps({"batch_id": mine}))  # the right id: collected
        code, out, err = full()
    assert code == 0 and f"batch {mine} completed: 5 of 5 answers kept" in out


def test_a_responses_body_the_provider_says_failed_is_recorded_as_failed_as_live(tmp_path, capsys):
    """A batch line whose 200 body is a Responses object with ``status: "failed"`` (the replay
    fixture openai/responses_failed_server_error.json, doc-shaped) is the item's error with outcome
    ``failed``, as a live call records it. Before: outcome ``error``, like a transport failure."""
    replay = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "openai" / "responses_failed_server_error.json"
    failed_body = json.loads(replay.read_text())["body"]
    with FakeServer(answers=answer_for, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys, "--api", "responses")
        run()
        finish = srv._finish_batch

        def finish_with_a_failed_response(b: dict[str, Any]) -> None:
            finish(b)
            lines = [json.loads(x) for x in srv._files[b["output_file_id"]]["content"].splitlines()]
            for line in lines:
                if line["custom_id"] == run.ids[1]:
                    line["response"]["body"] = failed_body
            srv._files[b["output_file_id"]]["content"] = "".join(json.dumps(x) + "\n" for x in lines).encode()

        srv._finish_batch = finish_with_a_failed_response  # type: ignore[method-assign]
        code, out, err = run()
    rec = run.records()[run.ids[1]]
    assert (rec["status"], rec["outcome"]) == ("error", "failed") and "The model produced invalid content" in rec["error"]
    assert code == 1 and "1 errored, 0 not run of 5 items" in last_line(err)


def test_a_batch_over_items_whose_answered_text_changed_is_refused_before_submitting(tmp_path, capsys):
    """The items file edited after its items were answered: the next ``--batch`` call submits nothing and
    exits 2 naming the item, the manifest kept. Before: "nothing to submit", the old answers scored as the
    edited items'."""
    with FakeServer(answers=answer_for, batch_polls=0) as srv:
        run = Run(tmp_path, srv, capsys)
        run()
        assert run()[0] == 0  # collected: 5 answers
        path = tmp_path / "items.jsonl"
        path.write_text(path.read_text().replace('"Answer2"', '"Corrected2"'))
        manifest = (run.dir / "manifest.json").read_text()
        code, out, err = run()
        assert len(srv._batches) == 1
    assert code == 2 and f"1 item(s) of the run were answered from another text than the items give now " \
        f"('{run.ids[2]}')" in last_line(err), err
    assert (run.dir / "manifest.json").read_text() == manifest
