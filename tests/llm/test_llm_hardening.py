"""The client against real faults: per-item 400s, a dead endpoint, a dripping server,
keys that must never be stored, cache errors, quiet retry logs, the embedded server's model id."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer

from cresowlve_core.llm.cache import CacheError, ResponseCache
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import (
    ChatModel,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMEndpointDown,
    LLMError,
    LLMFatalError,
)
from cresowlve_core.runtime import ClientOptions, RunDir, map_with_resume, open_client

MODEL = "test-model"

# (status, headers, body) or None when the handler wrote the response itself
Handler = Callable[["_Req"], "tuple[int, dict[str, str], bytes] | None"]


class _Req:
    def __init__(self, h: BaseHTTPRequestHandler, body: bytes):
        self.handler = h
        self.path = h.path
        self.headers = h.headers
        self.body = json.loads(body or b"{}")
        msgs = self.body.get("messages") or []
        self.prompt = msgs[-1]["content"] if msgs else ""


class ScriptedServer:
    """A tiny HTTP server whose every answer is written by ``handler`` (for bodies the fake
    server cannot produce: provider error objects, echoed headers, dripping bytes)."""

    def __init__(self, handler: Handler):
        self.seen: list[_Req] = []
        server = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                return

            def do_POST(self) -> None:
                req = _Req(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                server.seen.append(req)
                out = handler(req)
                if out is None:
                    return
                status, headers, body = out
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ScriptedServer:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def chat_ok(text: str) -> tuple[int, dict[str, str], bytes]:
    body = {"id": "x", "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    return 200, {}, json.dumps(body).encode()


def error(status: int, message: str, code: str | None = None) -> tuple[int, dict[str, str], bytes]:
    return status, {}, json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}}).encode()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run_units(client: Any, run: RunDir, units: list[str], concurrency: int = 4) -> Any:
    async def call(u: str, prev: Any) -> dict[str, Any]:
        c = await client.complete(user(u), GenParams(), prompt_version="v")
        return {"key": u, "status": "ok", "text": c.text}

    async with client:
        return await map_with_resume(run, "responses.jsonl", units, lambda u: u, call,
                                     concurrency=concurrency, progress=False)


# ------------------------------------------------------------------ 2: a 400 about the request is per item


def test_context_length_400_is_one_items_error_and_the_run_goes_on(tmp_path: Path) -> None:
    def handler(r: _Req) -> Any:
        if r.prompt == "huge":
            return error(400, "This model's maximum context length is 8192 tokens", "context_length_exceeded")
        return chat_ok(f"ok {r.prompt}")

    with ScriptedServer(handler) as srv:
        client = LLMClient(Endpoint(srv.base_url, MODEL), backoff_base_s=0.001)
        res = asyncio.run(run_units(client, RunDir(tmp_path / "run"), ["a", "huge", "b", "c"]))
        assert sum(r.prompt == "huge" for r in srv.seen) == 1  # not retried
    assert res.stopped is None and res.n_done == 3 and res.n_error == 1
    assert "maximum context length" in res.records["huge"]["error"]
    assert "context_length_exceeded" in res.records["huge"]["error"]


def test_wrong_model_404_still_stops_and_calls_in_flight_are_awaited_and_recorded(tmp_path: Path) -> None:
    def handler(r: _Req) -> Any:
        if r.prompt == "bad":
            return error(404, "The model `test-model` does not exist", "model_not_found")
        time.sleep(0.4)
        return chat_ok(f"ok {r.prompt}")

    units = ["slow0", "slow1", "slow2", "bad"] + [f"later{i}" for i in range(8)]
    with ScriptedServer(handler) as srv:
        client = LLMClient(Endpoint(srv.base_url, MODEL), backoff_base_s=0.001)
        res = asyncio.run(run_units(client, RunDir(tmp_path / "run"), units, concurrency=4))
        prompts = [r.prompt for r in srv.seen]
    assert isinstance(res.stop_error, LLMFatalError) and "HTTP 404" in res.stopped
    assert {k: r["status"] for k, r in res.records.items()} == {"slow0": "ok", "slow1": "ok", "slow2": "ok"}
    assert not any(p.startswith("later") for p in prompts)


# ------------------------------------------------------------------ 4: a dead endpoint is found quickly


def test_connection_refused_stops_a_run_within_seconds(tmp_path: Path) -> None:
    client = open_client(Endpoint(f"http://127.0.0.1:{closed_port()}/v1", MODEL), ClientOptions(cache=False))
    start = time.monotonic()
    res = asyncio.run(run_units(client, RunDir(tmp_path / "run"), [f"u{i}" for i in range(50)], concurrency=8))
    elapsed = time.monotonic() - start
    assert elapsed < 3, elapsed
    assert isinstance(res.stop_error, LLMEndpointDown) and res.n_error == 0
    msg = str(res.stop_error)
    assert "looks down" in msg and "connection refused" in msg and "\n" not in msg
    assert client.requests_sent <= 8


def test_html_answers_trip_the_breaker_after_n_in_a_row() -> None:
    page = (200, {"Content-Type": "text/html"}, b"<!DOCTYPE html><html><body>Sign in</body></html>")
    with ScriptedServer(lambda r: page) as srv:
        client = open_client(Endpoint(srv.base_url, MODEL),
                             ClientOptions(cache=False, down_after=3, backoff_base_s=0.001, concurrency=1))
        assert client.down_after == 3
        with client:
            with pytest.raises(LLMEndpointDown, match="3 failures in a row"):
                client.complete_sync(user("a"), GenParams(), prompt_version="v")
            assert len(srv.seen) == 3
            with pytest.raises(LLMEndpointDown):  # every further call stops at once, no request
                client.complete_sync(user("b"), GenParams(), prompt_version="v")
        assert len(srv.seen) == 3


def test_dead_signs_must_be_consecutive() -> None:
    with FakeServer(faults=["garbage", "garbage", None, "garbage", "garbage", None]) as srv:
        with LLMClient(Endpoint(srv.base_url, MODEL), down_after=3, backoff_base_s=0.001) as cl:
            assert cl.complete_sync(user("a"), GenParams(), prompt_version="v").text == "echo: a"
            assert cl.complete_sync(user("b"), GenParams(), prompt_version="v").text == "echo: b"


# ------------------------------------------------------------------ 6: a deadline per attempt


def test_deadline_cuts_off_a_server_dripping_one_byte_per_second() -> None:
    def drip(r: _Req) -> None:
        h = r.handler
        try:
            h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n")
            for _ in range(30):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(1)
        except OSError:
            pass

    with ScriptedServer(drip) as srv:
        client = open_client(Endpoint(srv.base_url, MODEL),
                             ClientOptions(cache=False, timeout_s=5, deadline_s=1.5, max_attempts=1))
        start = time.monotonic()
        with client, pytest.raises(LLMError, match="deadline"):
            client.complete_sync(user("a"), GenParams(), prompt_version="v")
        assert time.monotonic() - start < 4


# ------------------------------------------------------------------ 10: secrets


CRED = "s3cr3t-Value-0123456789abcdef"


def test_an_echoed_key_never_reaches_the_cache_or_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PROVIDER_CRED", CRED)  # a name the credential-name pattern does not match
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ScriptedServer(lambda r: chat_ok(f"you sent {r.headers.get('Authorization')}")) as srv:
        with LLMClient(Endpoint(srv.base_url, MODEL, "MY_PROVIDER_CRED"), cache=cache) as cl:
            fresh = cl.complete_sync(user("a"), GenParams(), prompt_version="v")
            hit = cl.complete_sync(user("a"), GenParams(), prompt_version="v")
        assert srv.seen[0].headers["Authorization"] == f"Bearer {CRED}" and len(srv.seen) == 1
    cache.close()
    assert CRED not in fresh.text and "REDACTED" in fresh.text and hit.cached and hit.text == fresh.text
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert CRED.encode() not in blob and b"REDACTED" in blob


def test_url_credentials_never_appear_in_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    n = {"i": 0}

    def handler(r: _Req) -> Any:
        n["i"] += 1
        return error(500, f"upstream failed for {r.path}") if n["i"] <= 2 else error(401, f"bad key for {r.path}")

    with ScriptedServer(handler) as srv:
        url = f"http://user:hunter2pass@127.0.0.1:{srv.port}/v1?api-key=qwerty12345"
        with LLMClient(Endpoint(url, MODEL), backoff_base_s=0.001) as cl:
            with pytest.raises(LLMFatalError) as err:
                cl.complete_sync(user("a"), GenParams(), prompt_version="v")
        assert srv.seen[0].path == "/v1/chat/completions?api-key=qwerty12345"
    for text in (str(err.value), caplog.text):
        assert "hunter2pass" not in text and "qwerty12345" not in text
    assert "HTTP 401" in str(err.value)


def test_a_key_given_as_the_variable_name_is_refused_without_repeating_it() -> None:
    value = "sk-proj-AbCdEf0123456789XyZ"
    with pytest.raises(LLMConfigError) as err:
        Endpoint("http://x/v1", MODEL, value)
    assert value not in str(err.value) and "NAME" in str(err.value)
    Endpoint("http://x/v1", MODEL, "HF_TOKEN")  # real names are fine


# ------------------------------------------------------------------ 12: cache errors are one clear line


@pytest.mark.parametrize("kind", ["corrupt", "directory", "parent_is_file"])
def test_unusable_cache_file_is_one_cache_error_naming_it(tmp_path: Path, kind: str) -> None:
    if kind == "corrupt":
        path = tmp_path / "responses.sqlite"
        path.write_bytes(b"this is not a database, just some bytes " * 100)
    elif kind == "directory":
        path = tmp_path / "responses.sqlite"
        path.mkdir()
    else:
        (tmp_path / "afile").write_text("x")
        path = tmp_path / "afile" / "responses.sqlite"
    with pytest.raises(CacheError) as err:
        ResponseCache(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_cache_stats_on_a_corrupt_file_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cresowlve_core.cli import main

    path = tmp_path / "responses.sqlite"
    path.write_bytes(b"garbage" * 500)
    assert main(["cache", "stats", "--path", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and err.startswith("error:")


@pytest.mark.parametrize("action", [["stats"], ["clear", "--yes"]])
def test_cache_command_on_a_corrupt_file_offers_no_flag_it_lacks(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   action: list[str]) -> None:
    """`cresowlve cache stats|clear` on a corrupt file ended "... delete or move the file, or run without
    the cache (--no-cache)": the cache command has no --no-cache. Its line now ends at the way out it has;
    a command that calls a model keeps the hint."""
    from cresowlve_core.cli import main

    path = tmp_path / "responses.sqlite"
    path.write_bytes(b"garbage" * 500)
    assert main(["cache", *action, "--path", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: response cache {path} cannot be opened (file is not a database); delete or move the file"
    with pytest.raises(CacheError, match=r"or run without the cache \(--no-cache\)$"):
        ResponseCache(path)


# ------------------------------------------------------------------ 16: quiet retry logs


def test_retries_log_at_debug_with_one_info_summary(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="cresowlve_core.llm.client")
    prompts = [f"p{i}" for i in range(20)]
    with FakeServer(faults={p: ["500"] for p in prompts}) as srv:
        cl = LLMClient(Endpoint(srv.base_url, MODEL), backoff_base_s=0.001, concurrency=4)

        async def go() -> list[Any]:
            async with cl:
                return await asyncio.gather(*(cl.complete(user(p), GenParams(), prompt_version="v") for p in prompts))

        asyncio.run(go())
        assert srv.total == 40
    records = [r for r in caplog.records if r.name == "cresowlve_core.llm.client"]
    infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert sum(r.levelno == logging.DEBUG for r in records) == 20
    assert len(infos) == 1 and "20 retries" in infos[0] and "HTTP 500: 20" in infos[0]


# ------------------------------------------------------------------ seam and 18


def test_the_client_is_a_chat_model() -> None:
    assert isinstance(LLMClient(Endpoint("http://127.0.0.1:1/v1", MODEL)), ChatModel)


def test_embedded_server_lists_its_model_id_not_its_letters() -> None:
    xllamacpp = pytest.importorskip("xllamacpp")
    from cresowlve_core.llm.local import LOCAL_MODEL, LocalServer

    params = LocalServer(port=1).server_params(xllamacpp.CommonParams())
    assert params.model_alias == {LOCAL_MODEL}


def test_a_base_url_that_is_not_http_is_a_config_error() -> None:
    with pytest.raises(LLMConfigError, match="http"):
        LLMClient(Endpoint("localhost:8000/v1", MODEL))


def test_a_damaged_cache_entry_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache._conn.execute("INSERT INTO responses VALUES ('k', 'm', 'v', 0, 'not json')")
    assert cache.get("k") is None


_STORED = {"text": "<Answer>x</Answer>", "thoughts": None, "usage": {"input_tokens": 8, "output_tokens": 9},
           "cost": 6.6e-06, "reported_cost": None, "latency_s": 0.01, "model": "gpt-4o-mini",
           "raw": {"api": "chat", "finish_reason": "stop"}, "outcome": "answer", "refusal": None}


@pytest.mark.parametrize("damaged", [[1, 2], "text", {**_STORED, "text": None}, {**_STORED, "text": 5},
                                     {**_STORED, "raw": "x"}, {**_STORED, "thoughts": 3},
                                     {**_STORED, "refusal": ["no"]}, {**_STORED, "cost": "x"}],
                         ids=["list", "string", "text-null", "text-number", "raw-string", "thoughts-number",
                              "refusal-list", "cost-string"])
def test_a_cache_entry_of_another_shape_is_a_miss_not_a_crash(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                              damaged: Any) -> None:
    """A stored answer that is JSON but not of the shape this version writes (damaged, hand-edited, another
    version's): a miss with a WARNING, the model asked again. Before: a list payload or a raw that is no
    object raised AttributeError, a text that is no string ('NoneType' object has no attribute 'strip') was
    returned and crashed the run later: `cresowlve eval` ended in a 'bug' traceback, exit 1."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache._conn.execute("INSERT INTO responses VALUES ('ok', 'm', 'v', 0, ?)", (json.dumps(_STORED),))
    cache._conn.execute("INSERT INTO responses VALUES ('k', 'm', 'v', 0, ?)", (json.dumps(damaged),))
    hit = cache.get("ok")
    assert hit is not None and hit.text == _STORED["text"]  # the shape written today is a hit
    with caplog.at_level(logging.WARNING):
        assert cache.get("k") is None
    assert any("entry k is damaged; treated as a miss" in r.getMessage() for r in caplog.records)


def test_a_cache_entry_of_an_outcome_this_version_does_not_write_is_a_miss(tmp_path: Path) -> None:
    """A stored answer whose outcome was damaged (or written by a newer version): a miss, the model asked
    again. Before: returned, and the run's record of it failed validation: a 'bug' traceback, exit 1."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    payload = '{"text": "<Answer>x</Answer>", "usage": {}, "raw": {}, "outcome": "blocked"}'
    cache._conn.execute("INSERT INTO responses VALUES ('k', 'm', 'v', 0, ?)", (payload,))
    assert cache.get("k") is None
    cache._conn.execute("UPDATE responses SET payload = ? WHERE key = 'k'", (payload.replace("blocked", "refused"),))
    hit = cache.get("k")
    assert hit is not None and hit.outcome == "refused"


def test_a_key_with_a_line_break_is_refused_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRESOWLVE_TEST_KEY", "abc\r\nX-Injected: 1")
    with FakeServer() as srv:
        with LLMClient(Endpoint(srv.base_url, MODEL, "CRESOWLVE_TEST_KEY")) as cl, \
                pytest.raises(LLMConfigError, match="line break"):
            cl.complete_sync(user("a"), GenParams(), prompt_version="v")
        assert srv.total == 0
