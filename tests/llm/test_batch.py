"""Batch API against a local fake: submit, poll, collect; real batch objects and file lines
(tests/fixtures/batch/, sources in SOURCES.md) for expired, cancelled and failed batches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer

from cresowlve_core.llm.batch import (
    BatchStateError,
    _errors_reason,
    _interpret,
    _read_lines,
    archive_batch,
    batch_line,
    collect_batch,
    read_state,
    submit_batch,
)
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.pricing import ModelPrice, PriceTable
from cresowlve_core.llm.types import Endpoint, GenParams, LLMConfigError, LLMFatalError
from cresowlve_core.llm.wire import sent_fields

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "batch"
PRICES = PriceTable({"batch-model": ModelPrice(1_000_000.0, 1_000_000.0, batch_discount=0.5)})


def fixture(name: str) -> Any:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else [json.loads(x) for x in text.splitlines() if x.strip()]


def reqs(n: int, params: GenParams | None = None) -> list[tuple[str, list[dict[str, str]], GenParams]]:
    p = params or GenParams(max_tokens=50)
    return [(f"item-{i}", [{"role": "user", "content": f"question {i}"}], p) for i in range(n)]


def test_submit_poll_collect(tmp_path: Path) -> None:
    with FakeServer(batch_polls=1, batch_fail_ids=["item-2"]) as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        bid = submit_batch(ep, reqs(4), tmp_path)
        state = json.loads((tmp_path / "batch.json").read_text())
        assert state["batch_id"] == bid and state["n"] == 4 and state["url"] == "/v1/chat/completions"
        assert state["input_file_id"].startswith("file-") and state["submitted_at"]
        lines = [json.loads(x) for x in (tmp_path / "batch_input.jsonl").read_text().splitlines()]
        assert lines[0]["url"] == "/v1/chat/completions" and lines[0]["body"]["max_tokens"] == 50
        assert srv.total == 0  # nothing is answered before the batch runs

        assert collect_batch(ep, tmp_path, prices=PRICES) is None  # still in progress
        assert json.loads((tmp_path / "batch.json").read_text())["status"] == "in_progress"

        out = collect_batch(ep, tmp_path, prices=PRICES)
    assert out is not None and out.status == "completed" and out.n_submitted == 4
    assert sorted(out.answers) == ["item-0", "item-1", "item-3"] and out.not_run == []
    assert out.errors == {"item-2": "batch: scripted failure [server_error]"}  # the provider's words, kept
    c = out.answers["item-1"]
    assert c.text == "echo: question 1"
    assert (c.usage.input_tokens, c.usage.output_tokens) == (2, 3)
    assert c.cost == pytest.approx((2 + 3) * 0.5)  # half price
    assert (tmp_path / "batches" / f"{bid}.output.jsonl").exists() and (tmp_path / "batches" / f"{bid}.errors.jsonl").exists()
    archived = archive_batch(tmp_path)
    assert archived == tmp_path / "batches" / f"{bid}.json" and not (tmp_path / "batch.json").exists()
    assert json.loads(archived.read_text())["n_answers"] == 3
    assert (tmp_path / "batches" / f"{bid}.input.jsonl").exists()


def test_resubmission_returns_the_recorded_batch(tmp_path: Path) -> None:
    with FakeServer() as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        first = submit_batch(ep, reqs(2), tmp_path)
        again = submit_batch(ep, reqs(2), tmp_path)
        assert first == again and len(srv._batches) == 1


def test_unique_ids_and_nothing_to_collect(tmp_path: Path) -> None:
    ep = Endpoint("http://127.0.0.1:1/v1", "batch-model")
    with pytest.raises(ValueError, match="unique"):
        submit_batch(ep, reqs(1) + reqs(1), tmp_path / "r2")
    with pytest.raises(LLMConfigError, match="submit a batch first"):
        collect_batch(ep, tmp_path / "nothing")


@pytest.mark.parametrize("api", ["chat", None])
def test_reasoning_model_lines_are_the_live_request(tmp_path: Path, api: str | None) -> None:
    """A reasoning model's batch line carries exactly what a live call sends: max_completion_tokens
    and reasoning_effort on chat (reasoning.effort and max_output_tokens on the default API with an
    effort, /v1/responses), never temperature; and the manifest's ``sent`` is that body."""
    params = GenParams(max_tokens=2000, temperature=0.0, seed=0, effort="high", api=api)
    with FakeServer(batch_polls=0) as srv:
        ep = Endpoint(srv.base_url, "gpt-5-mini", provider="openai")  # OpenAI: an effort goes to /responses
        live = LLMClient(ep, cache=None, max_attempts=1)
        live.complete_sync([{"role": "user", "content": "question 0"}], params, prompt_version="t")
        wire_body = srv.requests[0].body
        submit_batch(ep, reqs(2, params), tmp_path)
        line = json.loads((tmp_path / "batch_input.jsonl").read_text().splitlines()[0])
        got = collect_batch(ep, tmp_path, prices=PRICES)
    assert line["body"] == wire_body  # byte for byte the live request
    assert {k: v for k, v in line["body"].items() if k not in ("model", "messages", "input")} == sent_fields(
        params, model="gpt-5-mini", profile=ep.profile)
    assert "temperature" not in line["body"] and "max_tokens" not in line["body"]
    if api == "chat":
        assert line["url"] == "/v1/chat/completions"
        assert line["body"]["max_completion_tokens"] == 2000 and line["body"]["reasoning_effort"] == "high"
    else:
        assert line["url"] == "/v1/responses"
        assert line["body"]["max_output_tokens"] == 2000 and line["body"]["reasoning"]["effort"] == "high"
    assert got is not None and sorted(got.answers) == ["item-0", "item-1"]  # read with the same parser
    assert got.answers["item-0"].text == "echo: question 0"


def test_expired_batch_keeps_its_3_of_5_finished_answers(tmp_path: Path) -> None:
    with FakeServer(batch_polls=0, batch_final=fixture("batch_expired.json"), batch_n_done=3,
                    batch_error_line=fixture("error_lines_expired.jsonl")[0]) as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        bid = submit_batch(ep, reqs(5), tmp_path)
        out = collect_batch(ep, tmp_path, prices=PRICES)
    assert out is not None and out.status == "expired" and out.reason is None
    assert sorted(out.answers) == ["item-0", "item-1", "item-2"]
    assert out.not_run == ["item-3", "item-4"] and out.errors == {}
    assert all(c.cost is not None for c in out.answers.values())
    expired = (tmp_path / "batches" / f"{bid}.errors.jsonl").read_text().splitlines()
    assert len(expired) == 2 and all('"batch_expired"' in x for x in expired)  # the provider's file, kept


def test_cancelled_batch_without_error_file_counts_the_missing_as_not_run(tmp_path: Path) -> None:
    cancelled = {**fixture("batch_cancelling.json"), "status": "cancelled", "cancelled_at": 1711475200}
    with FakeServer(batch_polls=0, batch_final=cancelled, batch_n_done=1) as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        submit_batch(ep, reqs(3), tmp_path)
        out = collect_batch(ep, tmp_path, prices=PRICES)
    assert out is not None and out.status == "cancelled"
    assert sorted(out.answers) == ["item-0"] and out.not_run == ["item-1", "item-2"]


def test_a_cancelling_batch_is_still_running(tmp_path: Path) -> None:
    """The provider's own cancelling object: waited for, since its output comes once cancelled."""
    with FakeServer(batch_polls=0, batch_final=fixture("batch_cancelling.json")) as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        submit_batch(ep, reqs(2), tmp_path)
        assert collect_batch(ep, tmp_path, prices=PRICES) is None
    state = read_state(tmp_path)
    assert state is not None and state["status"] == "cancelling"


def test_real_output_and_error_lines_are_read_like_live_answers() -> None:
    ep = Endpoint("http://127.0.0.1:1/v1", "gpt-3.5-turbo-0125")
    state = {"batch_id": "batch_abc123", "url": "/v1/chat/completions"}
    lines = fixture("output_lines_chat.jsonl") + fixture("error_lines_expired.jsonl") + fixture(
        "error_line_unsupported_parameter.jsonl")
    prices = PriceTable({"gpt-3.5-turbo-0125": ModelPrice(0.5, 1.5, batch_discount=0.5)})
    out = _interpret(ep, state, [(line, False) for line in lines], prices)
    assert sorted(out.answers) == ["request-1", "request-2"]
    a = out.answers["request-2"]
    assert a.text == "Hello." and (a.usage.input_tokens, a.usage.output_tokens) == (22, 2)
    assert a.cost == pytest.approx((22 * 0.5 + 2 * 1.5) / 1e6 * 0.5)
    assert out.not_run == ["request-3", "request-7", "request-5"] and out.errors == {}
    # a parameter the model refuses stops a live run: here it is the batch's reason, not an item error
    assert out.reason is not None and "Unsupported parameter: 'max_tokens' is not supported with this model" in out.reason


def test_an_output_line_with_bytes_that_are_not_utf8_is_kept_and_flagged_as_a_live_answer_is() -> None:
    """A byte that is not UTF-8 in the answer of a real output line: the answer is kept with U+FFFD in
    its place and flagged ``invalid_utf8``, as the live client flags the same body. Before: the whole
    file was decoded with U+FFFD first, so the answer was scored with the replacement, unflagged."""
    ep = Endpoint("http://127.0.0.1:1/v1", "gpt-3.5-turbo-0125")
    state = {"batch_id": "batch_abc123", "url": "/v1/chat/completions"}
    content = (FIXTURES / "output_lines_chat.jsonl").read_bytes()
    assert content.count(b'"Hello."') == 1
    content = content.replace(b'"Hello."', b'"Hello.\xff"')
    out = _interpret(ep, state, _read_lines(content), PriceTable({}))
    assert out.answers["request-2"].text == "Hello.\ufffd" and out.answers["request-2"].raw.get("invalid_utf8") is True
    assert not out.answers["request-1"].raw.get("invalid_utf8")  # only the line that held the byte


def test_a_torn_output_line_is_its_requests_error_not_a_request_never_run() -> None:
    """The last line of a real output file cut off (a torn download): its request ran and was billed,
    so it is an error (asked again), with the line number; not "not run". A line torn before its
    custom_id is skipped, and its request then counts as not run (absent from the files)."""
    ep = Endpoint("http://127.0.0.1:1/v1", "gpt-3.5-turbo-0125")
    state = {"batch_id": "batch_abc123", "url": "/v1/chat/completions"}
    content = (FIXTURES / "output_lines_chat.jsonl").read_bytes().rstrip(b"\n")
    torn = content[: content.rindex(b'"choices"')]
    out = _interpret(ep, state, _read_lines(torn), PriceTable({}))
    assert sorted(out.answers) == ["request-2"] and out.not_run == []
    assert out.errors == {"request-1": "batch: line 2 of the provider's file is not JSON (cut off?); the file is kept "
                                       "under batches/"}
    assert _read_lines(content[: content.rindex(b'"custom_id"')]) == _read_lines(content[: content.index(b"\n")])


def test_usage_that_is_not_a_usable_number_is_unknown_and_named_in_a_warning(caplog) -> None:
    """A real output line whose usage holds a negative count and a string: recorded as unknown (so its
    cost is unknown), with a WARNING naming the fields, as the live client names them. Before: silent."""
    ep = Endpoint("http://127.0.0.1:1/v1", "gpt-3.5-turbo-0125")
    state = {"batch_id": "batch_abc123", "url": "/v1/chat/completions"}
    lines = fixture("output_lines_chat.jsonl")
    lines[0]["response"]["body"]["usage"] = {"prompt_tokens": -22, "completion_tokens": "2", "total_tokens": 24}
    prices = PriceTable({"gpt-3.5-turbo-0125": ModelPrice(0.5, 1.5, batch_discount=0.5)})
    with caplog.at_level("WARNING", logger="cresowlve_core.llm.batch"):
        out = _interpret(ep, state, [(line, False) for line in lines], prices)
    odd = out.answers["request-2"]
    assert (odd.usage.input_tokens, odd.usage.output_tokens, odd.cost) == (None, None, None)
    assert out.answers["request-1"].cost is not None
    assert "1 batch answer(s) report usage that is not a usable number (" in caplog.text
    assert "prompt_tokens=-22" in caplog.text and "request-2)" in caplog.text


def test_a_second_line_for_an_answered_request_is_named_not_dropped_silently(caplog) -> None:
    """Two output lines for one custom_id (the guide's real line, then the same with another answer):
    the first answer is kept and the other named in a WARNING. Before: dropped without a word."""
    ep = Endpoint("http://127.0.0.1:1/v1", "gpt-3.5-turbo-0125")
    state = {"batch_id": "batch_abc123", "url": "/v1/chat/completions"}
    first = fixture("output_lines_chat.jsonl")[0]
    again = json.loads(json.dumps(first))
    again["response"]["body"]["choices"][0]["message"]["content"] = "Goodbye."
    with caplog.at_level("WARNING", logger="cresowlve_core.llm.batch"):
        out = _interpret(ep, state, [(first, False), (again, False)], PriceTable({}))
    assert out.answers["request-2"].text == "Hello." and out.errors == {} and out.not_run == []
    assert "batch batch_abc123 has 1 more line(s) for requests already answered (request-2)" in caplog.text


def test_failed_batch_reason_is_the_providers_own_message() -> None:
    reason = _errors_reason(fixture("batch_failed_token_limit.json")["errors"])
    assert reason is not None and reason.startswith("Enqueued token limit reached for gpt-4o-mini")
    assert reason.endswith("[token_limit_exceeded]")
    many = {"data": [{"code": "invalid_json_line", "line": n, "message": "This line is not parseable as valid JSON."}
                     for n in range(1, 6)]}
    assert _errors_reason(many) == "; ".join(
        [f"line {n}: This line is not parseable as valid JSON. [invalid_json_line]" for n in range(1, 4)]) + " (and 2 more)"


@pytest.mark.parametrize("content", ["{not json", "", '{"status": "expired"}', "[1, 2]", '{"batch_id": ""}'])
def test_unreadable_batch_json_names_both_ways_forward(tmp_path: Path, content: str) -> None:
    (tmp_path / "batch.json").write_text(content)
    with pytest.raises(BatchStateError) as exc:
        read_state(tmp_path)
    msg = str(exc.value)
    assert "nothing was sent" in msg and '"batch_id"' in msg and f"mv {tmp_path / 'batch.json'}" in msg
    with FakeServer() as srv:  # neither submission nor collection goes ahead on it
        ep = Endpoint(srv.base_url, "batch-model")
        with pytest.raises(BatchStateError):
            submit_batch(ep, reqs(2), tmp_path)
        with pytest.raises(BatchStateError):
            collect_batch(ep, tmp_path)
        assert srv._batches == {} and srv._files == {}


def test_a_line_is_built_by_the_wire_of_the_endpoint() -> None:
    line = batch_line(Endpoint("http://x/v1", "m"), "id-1", [{"role": "user", "content": "q"}], GenParams(max_tokens=7))
    assert line == {"custom_id": "id-1", "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": "m", "messages": [{"role": "user", "content": "q"}], "temperature": 0.0,
                             "seed": 0, "max_tokens": 7}}


def test_importing_the_llm_package_does_not_load_the_openai_sdk() -> None:
    code = "import sys, cresowlve_core.llm, cresowlve_core.llm.batch; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_batch_or_deleted_files_name_the_way_forward(tmp_path: Path) -> None:
    """The provider forgot the batch (another key) or deleted its files: a clear fatal error that
    says how to go on, never a silent resubmission."""
    with FakeServer(batch_polls=0) as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        bid = submit_batch(ep, reqs(2), tmp_path / "a")
        srv._batches.clear()
        with pytest.raises(LLMFatalError, match=f"batch {bid} .* is not known at .*move batch.json aside"):
            collect_batch(ep, tmp_path / "a")
        submit_batch(ep, reqs(2), tmp_path / "b")
        srv.batch_polls = 1
        assert collect_batch(ep, tmp_path / "b") is None
        for b in srv._batches.values():
            srv._finish_batch(b)
            b["_finished"] = True
            srv._files.pop(b["output_file_id"])
        with pytest.raises(LLMFatalError, match="no longer has its result files.*move batch.json aside"):
            collect_batch(ep, tmp_path / "b")
        assert len(srv._batches) == 1  # nothing was submitted again
    assert read_state(tmp_path / "b") is not None  # kept: the user chooses


def test_a_submission_killed_before_its_id_is_recorded_is_refused_not_repeated(tmp_path: Path, monkeypatch) -> None:
    import cresowlve_core.llm.batch as batch_mod

    real_client = batch_mod._client

    def killed_during_create(endpoint: Endpoint) -> Any:
        client = real_client(endpoint)

        def create(**kw: Any) -> Any:
            raise KeyboardInterrupt  # the process dies while the batch is being created

        client.batches.create = create  # type: ignore[method-assign]
        return client

    with FakeServer() as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        ok = submit_batch(ep, reqs(1), tmp_path / "ok")
        assert srv._batches[ok]["metadata"] == {"cresowlve_run": str((tmp_path / "ok").resolve())}
        monkeypatch.setattr(batch_mod, "_client", killed_during_create)
        with pytest.raises(KeyboardInterrupt):
            submit_batch(ep, reqs(2), tmp_path / "run")
        monkeypatch.setattr(batch_mod, "_client", real_client)
        with pytest.raises(BatchStateError, match="submission was interrupted.*cresowlve_run=.*mv "):
            submit_batch(ep, reqs(2), tmp_path / "run")
        assert len(srv._batches) == 1  # never a silent second submission


@pytest.mark.parametrize("code", [["batch_expired"], {"batch_expired": True}], ids=["a list", "an object"])
def test_an_error_line_whose_code_is_not_a_string_is_that_requests_error(code: Any) -> None:
    """A real expired error line with its ``code`` a JSON array or object: before, looking the code up among the
    codes of requests never run raised "unhashable type", a traceback that stopped the whole collect. Now that
    request is an error naming the provider's message; the other lines are read as ever."""
    ep = Endpoint("http://127.0.0.1:1/v1", "gpt-3.5-turbo-0125")
    expired = fixture("error_lines_expired.jsonl")
    odd = {**expired[0], "error": {**expired[0]["error"], "code": code}}
    out = _interpret(ep, {"batch_id": "batch_abc123", "url": "/v1/chat/completions"},
                     [(odd, False), *((line, False) for line in expired[1:])], PRICES)
    cid = str(odd["custom_id"])
    assert out.errors[cid].startswith(f"batch: {expired[0]['error']['message']}")
    assert sorted(out.not_run) == sorted(str(line["custom_id"]) for line in expired[1:])


def test_a_batch_id_that_is_no_file_name_keeps_the_archive_in_batches(tmp_path: Path) -> None:
    """A batch id written back by hand into batch.json (or returned by a proxy) as ``../../outside-batch-2``:
    archive_batch wrote ``outside-batch-2.json`` and ``.input.jsonl`` two folders above the run directory."""
    run = tmp_path / "a" / "run"
    with FakeServer() as srv:
        submit_batch(Endpoint(srv.base_url, "batch-model", None), reqs(1), run)
    state = json.loads((run / "batch.json").read_text())
    (run / "batch.json").write_text(json.dumps({**state, "batch_id": "../../outside-batch-2"}))
    archived = archive_batch(run)
    assert archived is not None and archived.parent == run / "batches"
    assert {p.name for p in tmp_path.rglob("*") if p.is_file()} == {
        archived.name, archived.name.replace(".json", ".input.jsonl")}
    assert json.loads(archived.read_text())["batch_id"] == "../../outside-batch-2"  # the id itself is kept
