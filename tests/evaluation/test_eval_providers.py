"""An evaluation run against providers' rules: truncation made visible and re-asked, a reasoning
judge, the provider profile recorded, the cost the provider reported."""

from __future__ import annotations

import asyncio
import json

from fakeserver import FakeServer, Reply
from test_eval_run import answer_for, cfg_for, make_items

from cresowlve_core.evaluation.runner import evaluate_async, summary_line, truncation_warning


def _truncating(req):
    """Odd items are cut off by the token limit unless the budget is at least 128."""
    if "candidate_answer" in req.prompt:
        return answer_for(req)
    n = int(req.prompt.split("Puzzle number ")[1].split(":")[0])
    budget = req.body.get("max_tokens") or req.body.get("max_completion_tokens") or 0
    if n % 2 and budget < 128:
        return Reply("Thinking about it, the answer might be", finish_reason="length")
    return f"<Answer>Answer{n}</Answer>"


def test_truncated_answers_are_flagged_counted_warned_and_reasked(tmp_path):
    items = make_items(10)
    with FakeServer(answers=_truncating) as srv:
        out = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, max_tokens=64), items, progress=False))
        s = out.summary
        assert s["n_truncated"] == 5 and [r.truncated for r in out.records] == [False, True] * 5
        assert all(r.max_tokens == 64 for r in out.records)
        assert s["em_strict"] == 0.5  # a truncated answer is scored as the text it is: wrong here
        assert "truncated 5" in summary_line(s)
        warning = truncation_warning(s)
        assert warning is not None and "--max-tokens" in warning and "5 of 10" in warning
        srv.reset()
        # the same command with --retry-truncated and a larger budget re-asks only the 5
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, max_tokens=256, retry_truncated=True)
        again = asyncio.run(evaluate_async(cfg, items, progress=False))
        assert srv.total == 5
    assert again.summary["n_truncated"] == 0 and again.summary["em_strict"] == 1.0
    assert sorted({r.max_tokens for r in again.records}) == [64, 256]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["retry_truncated"] is True and manifest["max_tokens"] == 256


def test_the_analysis_names_truncated_answers_per_run(tmp_path):
    from cresowlve_core.analysis.loading import load_runs
    from cresowlve_core.analysis.report import truncation_note

    with FakeServer(answers=_truncating) as srv:
        asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, max_tokens=64), make_items(4),
                                   progress=False))
    rs = load_runs([str(tmp_path / "run")])
    assert int(rs.runs["n_truncated"].iloc[0]) == 2
    note = truncation_note(rs)
    assert "fake-model" in note and "2" in note and "--retry-truncated" in note


def test_below_two_percent_truncated_there_is_no_warning():
    assert truncation_warning({"n_truncated": 2, "n_ok": 100}) is None
    assert truncation_warning({"n_truncated": 3, "n_ok": 100}) is not None


def test_a_reasoning_judge_gets_its_own_options_and_scores_every_item(tmp_path):
    with FakeServer(answers=answer_for) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, judge_model="gpt-5-mini", judge_provider="openai",
                      judge_api="chat", judge_extra_body={"verbosity": "low"})
        out = asyncio.run(evaluate_async(cfg, make_items(4), progress=False))
        judge_bodies = [r.body for r in srv.requests if r.body["model"] == "gpt-5-mini"]
    assert out.summary["n_judged"] == 4 and out.summary["n_unscored"] == 0
    for body in judge_bodies:  # what gpt-5-mini accepts: no temperature, max_completion_tokens
        assert "temperature" not in body and "max_tokens" not in body
        assert body["max_completion_tokens"] == 8192 and body["verbosity"] == "low"
    judge = json.loads((tmp_path / "run" / "manifest.json").read_text())["judge"]
    assert judge["provider"] == "openai" and judge["max_tokens"] == 8192 and judge["temperature"] == 0.0
    assert "temperature" not in judge["sent"] and judge["sent"]["max_completion_tokens"] == 8192


def test_the_manifest_names_the_provider_and_sent_matches_the_wire(tmp_path):
    with FakeServer(answers=answer_for) as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, provider="gemini", effort="minimal")
        asyncio.run(evaluate_async(cfg, make_items(2), progress=False))
        body = srv.requests[0].body
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["provider"] == "gemini" and m["api"] == "chat" and srv.requests[0].path == "/chat/completions"
    assert m["sent"] == {k: v for k, v in body.items() if k not in ("model", "messages")}
    assert "seed" not in body and body["reasoning_effort"] == "minimal"


#: the 400 a provider answered to ``reasoning_effort: "none"``, as quoted in Kilo-Org/cloud#3807 (Kimi Code
#: behind an OpenAI-compatible endpoint); no recorded body of OpenAI's own wording was found
#: (tests/replay/fixtures/SOURCES.md)
EFFORT_NONE_REFUSED = {"error": {"message": "Unsupported value: 'reasoning_effort' does not support 'none' with this "
                                            "model. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
                                 "type": "invalid_request_error"}}


class _EffortRefusingServer:
    """A chat endpoint that refuses ``reasoning_effort: "none"`` with :data:`EFFORT_NONE_REFUSED` and answers
    any other request, reasoning at its default effort; ``efforts``: the effort of each request, in order."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        efforts: list[str | None] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                efforts.append(body.get("reasoning_effort"))
                status, out = (400, EFFORT_NONE_REFUSED) if body.get("reasoning_effort") == "none" else (200, {
                    "id": "c1", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "<Answer>Answer0</Answer>"}}],
                    "usage": {"prompt_tokens": 40, "completion_tokens": 300,
                              "completion_tokens_details": {"reasoning_tokens": 290}}})
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.efforts = efforts
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self) -> _EffortRefusingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_an_effort_the_provider_refuses_stops_the_run_before_any_answer_is_recorded(tmp_path):
    """``--effort none`` refused by name: the client would drop the field and the model would answer at its
    default effort, recorded under the label ``none``. The run stops instead (exit 3 in the CLI), naming
    --effort, with no answer recorded, and a resume refuses again without a request. Before: 3 answers at
    the default effort (290 reasoning tokens each) in a run labelled ``none``, exit 0."""
    import pytest

    from cresowlve_core.llm.types import LLMFatalError
    from cresowlve_core.runtime import RESPONSES

    items = make_items(3)
    with _EffortRefusingServer() as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, effort="none", provider="generic", cache=False, concurrency=1)
        with pytest.raises(LLMFatalError, match=r"refused the effort 'none' \(reasoning_effort: Unsupported value.*--effort"):
            asyncio.run(evaluate_async(cfg, items, progress=False))
        assert srv.efforts[:2] == ["none", None]  # refused, then sent without it by the client: not recorded
        path = tmp_path / "run" / RESPONSES
        assert not path.exists() or not path.read_text().strip()
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["effort"] == "none" and [a["field"] for a in manifest["adapted"]] == ["reasoning_effort"]
        assert json.loads((tmp_path / "run" / "summary.json").read_text())["n_not_run"] == 3
        sent = len(srv.efforts)
        with pytest.raises(LLMFatalError, match="refused the effort 'none'"):
            asyncio.run(evaluate_async(cfg, items, progress=False))
        assert len(srv.efforts) == sent  # the resume knows it from the manifest: nothing sent


def test_effort_none_expects_no_reasoning_and_flags_answers_that_show_it(tmp_path):
    """``--effort none`` asks a reasoning model (GPT-5.x) not to reason: answers without reasoning are what
    was asked, and answers with it mean the provider ignored ``none``. Before: every effort-none run warned
    "labelled thinking, but 3/3 answers show no reasoning", and reasoning at ``none`` went unflagged."""
    items = make_items(3)
    with FakeServer(answers=lambda req: "<Answer>Answer0</Answer>") as srv:
        quiet = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "quiet", tmp_path, effort="none", cache=False),
                                           items, progress=False)).summary
    with FakeServer(answers=lambda req: Reply("<Answer>Answer0</Answer>", reasoning="Let me think.")) as srv:
        reasoned = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "reasoned", tmp_path, effort="none", cache=False),
                                              items, progress=False)).summary
    assert (quiet["n_no_reasoning"], quiet["n_unlabelled_reasoning"]) == (None, 0)
    assert "WARNING" not in summary_line(quiet)
    assert (reasoned["n_no_reasoning"], reasoned["n_unlabelled_reasoning"]) == (None, 3)
    assert "WARNING: labelled effort none, but 3/3 answers show reasoning: the model reasoned anyway" in summary_line(reasoned)


#: OpenAI's recorded Chat Completions success: asked for ``gpt-4o-mini``, it names the dated snapshot that
#: answered, ``gpt-4o-mini-2024-07-18`` (tests/replay/fixtures/SOURCES.md)
RECORDED_SNAPSHOT_REPLY = json.loads(
    (__import__("pathlib").Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "openai"
     / "chat_gpt4o_mini_success.json").read_text(encoding="utf-8"))["body"]


class _RecordedReplyServer:
    """A chat endpoint answering every request with :data:`RECORDED_SNAPSHOT_REPLY`, its text the item's answer
    and its ``model`` as recorded (or ``served(n)`` for item ``n``)."""

    def __init__(self, served=None) -> None:
        import copy
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                n = int(prompt.split("Puzzle number ")[1].split(":")[0])
                out = copy.deepcopy(RECORDED_SNAPSHOT_REPLY)
                out["choices"][0]["message"]["content"] = (
                    f"VERDICT-{prompt.rsplit('VERDICT-', 1)[1].split(':')[0]}: CORRECT" if "candidate_answer" in prompt
                    else f"<Answer>Answer{n}</Answer>")
                if served is not None:
                    out["model"] = served(n)
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self) -> _RecordedReplyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_model_the_provider_says_answered_is_recorded_with_each_answer_and_counted(tmp_path):
    """Asked for the alias ``gpt-4o-mini``, OpenAI answers as ``gpt-4o-mini-2024-07-18`` (the recorded reply):
    each record keeps it as ``served_model`` (also from the cache), and summary.json counts the models
    that answered. Before: the reply's ``model`` was read (and priced) but written nowhere in the run."""
    items = make_items(3)
    with _RecordedReplyServer() as srv:
        cfg = cfg_for(srv, tmp_path / "run", tmp_path, model="gpt-4o-mini", provider="openai")
        out = asyncio.run(evaluate_async(cfg, items, progress=False))
        cached = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "again", tmp_path, model="gpt-4o-mini",
                                                    provider="openai"), items, progress=False))
    for run in ("run", "again"):
        records = [json.loads(x) for x in (tmp_path / run / "responses.jsonl").read_text().splitlines()]
        assert [(r["model"], r["served_model"]) for r in records] == [("gpt-4o-mini", "gpt-4o-mini-2024-07-18")] * 3
    assert all(r["cached"] for r in map(json.loads, (tmp_path / "again" / "responses.jsonl").read_text().splitlines()))
    for s in (out.summary, cached.summary,
              json.loads((tmp_path / "run" / "summary.json").read_text())):
        assert s["served_models"] == {"gpt-4o-mini-2024-07-18": 3}
    assert "models the provider named" not in summary_line(out.summary)


def test_answers_from_two_models_under_one_label_are_counted_and_warned(tmp_path):
    """An alias that moved to another snapshot during the run (or a router's fallback): the label is one model,
    the answers come from two. summary.json counts each, the summary line warns and names them."""
    items = make_items(4)
    with _RecordedReplyServer(lambda n: "gpt-4o-mini-2024-07-18" if n < 3 else "gpt-4o-mini-2025-01-01") as srv:
        out = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, model="gpt-4o-mini",
                                                 provider="openai", cache=False), items, progress=False))
    assert out.summary["served_models"] == {"gpt-4o-mini-2024-07-18": 3, "gpt-4o-mini-2025-01-01": 1}
    assert ("WARNING: answers from 2 models the provider named: gpt-4o-mini-2024-07-18 (3), "
            "gpt-4o-mini-2025-01-01 (1)") in summary_line(out.summary)


def test_the_model_the_judges_reply_names_is_recorded_with_each_verdict_and_counted(tmp_path):
    """The judge ``gpt-4o-mini`` answers as ``gpt-4o-mini-2024-07-18`` (the recorded reply): each verdict's record
    keeps it as ``judge_served_model``, and summary.json counts it. Before: written nowhere."""
    items = make_items(2)
    with _RecordedReplyServer() as srv:
        out = asyncio.run(evaluate_async(cfg_for(srv, tmp_path / "run", tmp_path, model="gpt-4o-mini", provider="openai",
                                                 judge_model="gpt-4o-mini", cache=False), items, progress=False))
    records = [json.loads(x) for x in (tmp_path / "run" / "responses.jsonl").read_text().splitlines()]
    judged = {r["id"]: r for r in records if r["judge_status"] == "scored"}
    assert len(judged) == 2, records
    assert {(r["judge_model"], r["judge_served_model"], r["judge_dropped_fields"] == []) for r in judged.values()} == {
        ("gpt-4o-mini", "gpt-4o-mini-2024-07-18", True)}
    assert out.summary["judge_served_models"] == {"gpt-4o-mini-2024-07-18": 2}
