"""A scriptable OpenAI-compatible HTTP server for tests, benchmarks and notebook checks.

Usage (tests put ``tests/`` on ``sys.path``, so ``from fakeserver import FakeServer`` works)::

    with FakeServer(answers={"2+2?": "4"}, latency_s=0.05) as srv:
        endpoint = Endpoint(srv.base_url, "fake-model")        # base_url ends in /v1
        ...
        assert srv.total == 1 and srv.by_prompt["2+2?"] == 1

What it serves (paths with or without the ``/v1`` prefix):

* ``POST /v1/chat/completions``, ``/v1/responses``, ``/v1/completions``: the answer for the
  request's *prompt* — the last user message (chat), the last user item or the string
  ``input`` (responses), or ``prompt`` (completions).
* ``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
  ``GET /v1/batches/{id}``: a minimal Batch API. A batch reports ``in_progress`` for the first
  ``batch_polls`` retrievals, then ``completed`` with an output file computed with ``answers``.
  Custom ids in ``batch_fail_ids`` go to the error file instead. To end otherwise, pass a real
  batch object as ``batch_final`` (e.g. an expired one from ``tests/fixtures/batch/``: its status,
  errors and timestamps are served, with the fake's own ids and counts), ``batch_n_done`` (only the
  first N lines are answered) and ``batch_error_line`` (an error-file line, e.g. ``batch_expired``,
  written for every line not answered). Files are only created when they have lines.
* ``GET /v1/models`` and ``GET /_stats`` (``{"total", "max_in_flight"}``, for out-of-process use).

Answers: ``answers`` is ``None`` (reply ``"echo: <prompt>"``), a dict ``prompt → str | Reply``
(unknown prompts echo), or a callable ``FakeRequest → str | Reply``. A ``Reply`` can carry
reasoning (sent as ``message.reasoning_content`` in chat, as a reasoning summary in
responses), ``reasoning_tokens``, a ``finish_reason`` (``content_filter``: the provider's filter)
and a ``refusal`` (the model declines).

Usage is reported (unless ``report_usage=False``) as: input tokens = words in all messages,
output tokens = words in the answer + reasoning tokens (default: words in the reasoning).
``usage_override`` is merged into every reported ``usage`` object (``{"prompt_tokens": float("nan")}``
is sent as the literal ``NaN``, as a broken provider would).

Faults (one per request, chosen before answering):

* ``faults`` — a list by arrival order (index 0 = first request; ``None`` = no fault), a dict
  ``prompt → list`` (the n-th request for that prompt gets the n-th entry), or a callable
  ``FakeRequest → fault | None``;
* otherwise ``fault_rate`` with a seeded RNG (``seed``) choosing among ``fault_kinds``.

Fault kinds: ``"429"`` and ``"503"`` (with ``Retry-After: <retry_after>``, default ``"0"``),
``"500"``, ``"408"``, ``"409"``, ``"400"``, ``"401"``, ``"403"``, ``"404"``, ``"timeout"``
(sleep ``timeout_sleep_s`` before answering — set it above the client's timeout),
``"garbage"`` (200, non-JSON body), ``"empty"`` (200, zero-length body), ``"no_choices"``
(200, ``choices: []``), ``"empty_text"`` (200, empty content) and ``"disconnect"`` (close the
socket without a response). ``api_key=...`` turns on 401 mode: any request without
``Authorization: Bearer <api_key>`` gets 401. ``echo_key_in_errors=True`` makes error messages
include the received Authorization header (to test that clients scrub it).

Counters (thread-safe): ``total`` (model requests, including faulted ones), ``by_prompt``
(Counter), ``requests`` (list of ``FakeRequest``), ``max_in_flight``. ``reset()`` zeroes them.

Run standalone (e.g. for a benchmark in a separate process)::

    python tests/fakeserver.py --latency 0.2      # prints "READY http://127.0.0.1:PORT/v1"
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS: tuple[str, ...] = ("429", "500", "503", "timeout", "garbage", "empty")
STATUS_TEXT = {
    400: "Bad request: invalid parameter",
    401: "Incorrect API key provided",
    403: "You are not allowed to use this model",
    404: "The model does not exist",
    408: "Request timeout",
    409: "Conflict",
    429: "Rate limit reached",
    500: "Internal server error",
    503: "Service unavailable",
}


@dataclass
class Reply:
    """A scripted answer."""

    text: str
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    finish_reason: str = "stop"
    #: the model declines: chat ``message.content: null`` and ``message.refusal`` (OpenAI's documented
    #: shape), responses a ``refusal`` content part
    refusal: str | None = None


@dataclass
class FakeRequest:
    """One model request as the server saw it."""

    path: str  # "/chat/completions", "/responses" or "/completions"
    body: dict[str, Any]
    prompt: str
    index: int  # arrival order, from 0
    authorization: str | None = None
    prompt_count: int = 1  # how many requests for this prompt so far, this one included


Answers = dict[str, "str | Reply"] | Callable[[FakeRequest], "str | Reply"] | None
Faults = Sequence["str | None"] | dict[str, Sequence["str | None"]] | Callable[[FakeRequest], "str | None"] | None


def _words(text: str) -> int:
    return len(text.split())


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _prompt_and_words(path: str, body: dict[str, Any]) -> tuple[str, int]:
    """The request's prompt (last user message) and the word count of its whole input."""
    if path == "/completions":
        prompt = _text_of(body.get("prompt"))
        return prompt, _words(prompt)
    msgs = body.get("messages") if path == "/chat/completions" else body.get("input")
    if isinstance(msgs, str):
        return msgs, _words(msgs)
    msgs = msgs if isinstance(msgs, list) else []
    users = [_text_of(m.get("content")) for m in msgs if isinstance(m, dict) and m.get("role") == "user"]
    total = sum(_words(_text_of(m.get("content"))) for m in msgs if isinstance(m, dict))
    return (users[-1] if users else ""), total


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeServer:
    """The server; a context manager. ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(
        self,
        *,
        answers: Answers = None,
        latency_s: float = 0.0,
        faults: Faults = None,
        fault_rate: float = 0.0,
        fault_kinds: Sequence[str] = FAULT_KINDS,
        seed: int = 0,
        retry_after: str | None = "0",
        timeout_sleep_s: float = 3.0,
        api_key: str | None = None,
        echo_key_in_errors: bool = False,
        report_usage: bool = True,
        usage_override: dict[str, Any] | None = None,
        model: str | None = None,
        batch_polls: int = 1,
        batch_fail_ids: Sequence[str] = (),
        batch_final: dict[str, Any] | None = None,
        batch_n_done: int | None = None,
        batch_error_line: dict[str, Any] | None = None,
        port: int = 0,
    ) -> None:
        self.answers = answers
        self.latency_s = latency_s
        self.faults = faults
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self.retry_after = retry_after
        self.timeout_sleep_s = timeout_sleep_s
        self.api_key = api_key
        self.echo_key_in_errors = echo_key_in_errors
        self.report_usage = report_usage
        self.usage_override = dict(usage_override or {})
        self.model = model
        self.batch_polls = batch_polls
        self.batch_fail_ids = set(batch_fail_ids)
        self.batch_final = batch_final
        self.batch_n_done = batch_n_done
        self.batch_error_line = batch_error_line
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._files: dict[str, dict[str, Any]] = {}
        self._batches: dict[str, dict[str, Any]] = {}
        self._ids = 0
        self.reset()
        self._httpd = _HTTPServer(("127.0.0.1", port), self._handler_class())
        self.port: int = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Zero the counters (files and batches are kept)."""
        with getattr(self, "_lock", threading.Lock()):
            self.total = 0
            self.by_prompt: Counter[str] = Counter()
            self.requests: list[FakeRequest] = []
            self.in_flight = 0
            self.max_in_flight = 0

    # ---- behaviour

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}-{self._ids}"

    def _register(self, path: str, body: dict[str, Any], authorization: str | None) -> FakeRequest:
        prompt, _ = _prompt_and_words(path, body)
        with self._lock:
            self.total += 1
            self.by_prompt[prompt] += 1
            req = FakeRequest(path, body, prompt, self.total - 1, authorization, self.by_prompt[prompt])
            self.requests.append(req)
        return req

    def _fault_for(self, req: FakeRequest) -> str | None:
        f = self.faults
        if callable(f):
            return f(req)
        if isinstance(f, dict):
            plan = f.get(req.prompt, ())
            return plan[req.prompt_count - 1] if req.prompt_count <= len(plan) else None
        if f is not None:
            return f[req.index] if req.index < len(f) else None
        if self.fault_rate > 0:
            with self._lock:
                if self._rng.random() < self.fault_rate:
                    return self._rng.choice(self.fault_kinds)
        return None

    def reply_for(self, req: FakeRequest) -> Reply:
        """The scripted answer for a request (also used to fill batch output files)."""
        a = self.answers
        if callable(a):
            out = a(req)
        elif isinstance(a, dict) and req.prompt in a:
            out = a[req.prompt]
        else:
            out = f"echo: {req.prompt}"
        return out if isinstance(out, Reply) else Reply(str(out))

    def build_body(self, req: FakeRequest, reply: Reply, *, empty_text: bool = False) -> dict[str, Any]:
        """The JSON success body for ``req`` in the shape of its API."""
        text = "" if empty_text else reply.text
        _, n_in = _prompt_and_words(req.path, req.body)
        n_reason = reply.reasoning_tokens
        if n_reason is None and reply.reasoning:
            n_reason = _words(reply.reasoning)
        n_out = _words(text) + (n_reason or 0)
        model = self.model or str(req.body.get("model", "fake-model"))
        rid = self._new_id("resp")
        if req.path == "/responses":
            output: list[dict[str, Any]] = []
            if reply.reasoning:
                output.append(
                    {"type": "reasoning", "id": f"rs-{rid}", "summary": [{"type": "summary_text", "text": reply.reasoning}]}
                )
            output.append(
                {
                    "type": "message",
                    "id": f"msg-{rid}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "refusal", "refusal": reply.refusal} if reply.refusal else
                                {"type": "output_text", "text": text, "annotations": []}],
                }
            )
            body: dict[str, Any] = {
                "id": rid,
                "object": "response",
                "created_at": int(time.time()),
                "model": model,
                "status": "completed" if reply.finish_reason == "stop" else "incomplete",
                "output": output,
            }
            if reply.finish_reason != "stop":
                body["incomplete_details"] = {"reason": "max_output_tokens"}
            if self.report_usage:
                body["usage"] = {
                    "input_tokens": n_in,
                    "output_tokens": n_out,
                    "total_tokens": n_in + n_out,
                    "output_tokens_details": {"reasoning_tokens": n_reason or 0},
                    **self.usage_override,
                }
            return body
        if req.path == "/completions":
            choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": reply.finish_reason}
            obj = "text_completion"
        else:
            message: dict[str, Any] = {"role": "assistant", "content": None if reply.refusal else text}
            if reply.refusal:
                message["refusal"] = reply.refusal
            if reply.reasoning:
                message["reasoning_content"] = reply.reasoning
            choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason}
            obj = "chat.completion"
        body = {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}
        if self.report_usage:
            usage: dict[str, Any] = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
            if n_reason is not None:
                usage["completion_tokens_details"] = {"reasoning_tokens": n_reason}
            body["usage"] = {**usage, **self.usage_override}
        return body

    # ---- batch API

    def _upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw
        )
        fields: dict[str, Any] = {}
        filename = "upload.jsonl"
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True) or b""
            if part.get_filename():
                filename = part.get_filename()
                fields[str(name)] = data
            else:
                fields[str(name)] = data.decode()
        content = fields.get("file", b"")
        fid = self._new_id("file")
        obj = {
            "id": fid,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": fields.get("purpose", "batch"),
            "status": "processed",
        }
        self._files[fid] = {**obj, "content": content}
        return obj

    def _create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        bid = self._new_id("batch")
        n = len(self._files.get(body.get("input_file_id", ""), {}).get("content", b"").splitlines())
        obj = {
            "id": bid,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "input_file_id": body.get("input_file_id"),
            "completion_window": body.get("completion_window"),
            "status": "validating",
            "created_at": int(time.time()),
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "request_counts": {"total": n, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
            "_polls": 0,
        }
        self._batches[bid] = obj
        return {k: v for k, v in obj.items() if not k.startswith("_")}

    def _finish_batch(self, b: dict[str, Any]) -> None:
        lines = self._files[b["input_file_id"]]["content"].decode().splitlines()
        out: list[str] = []
        err: list[str] = []
        for n, line in enumerate(x for x in lines if x.strip()):
            item = json.loads(line)
            cid = item["custom_id"]
            if self.batch_n_done is not None and n >= self.batch_n_done:
                if self.batch_error_line is not None:
                    err.append(json.dumps({**self.batch_error_line, "id": self._new_id("batch_req"), "custom_id": cid}))
                continue
            if cid in self.batch_fail_ids:
                err.append(json.dumps({"id": self._new_id("br"), "custom_id": cid, "response": None,
                                       "error": {"code": "server_error", "message": "scripted failure"}}))
                continue
            path = str(item.get("url", "/v1/chat/completions")).removeprefix("/v1")
            req = self._register(path, item["body"], None)
            body = self.build_body(req, self.reply_for(req))
            out.append(json.dumps({"id": self._new_id("br"), "custom_id": cid,
                                   "response": {"status_code": 200, "request_id": body["id"], "body": body},
                                   "error": None}))
        if out:
            out_id = self._new_id("file")
            self._files[out_id] = {"id": out_id, "content": ("\n".join(out) + "\n").encode()}
            b["output_file_id"] = out_id
        if err:
            err_id = self._new_id("file")
            self._files[err_id] = {"id": err_id, "content": ("\n".join(err) + "\n").encode()}
            b["error_file_id"] = err_id
        b["status"] = "completed"
        b["completed_at"] = int(time.time())
        b["request_counts"] = {"total": sum(1 for x in lines if x.strip()), "completed": len(out), "failed": len(err)}
        if self.batch_final is not None:  # a real batch object's end state, with the fake's own ids and counts
            own = ("id", "input_file_id", "output_file_id", "error_file_id", "request_counts", "endpoint")
            b.update({k: v for k, v in self.batch_final.items() if k not in own})

    def _retrieve_batch(self, bid: str) -> dict[str, Any] | None:
        b = self._batches.get(bid)
        if b is None:
            return None
        with self._lock:
            b["_polls"] += 1
            done = b["_polls"] > self.batch_polls
        if done and not b.get("_finished"):
            b["_finished"] = True
            self._finish_batch(b)
        elif not done:
            b["status"] = "in_progress"
        return {k: v for k, v in b.items() if not k.startswith("_")}

    # ---- HTTP plumbing

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms stalls

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _leave(self) -> None:
                """This request is no longer in flight: called before its answer is written (a client
                that has its answer may send its next request before the handler thread returns)."""
                if getattr(self, "in_flight", False):
                    self.in_flight = False
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: bytes, *, ctype: str = "application/json",
                      headers: dict[str, str] | None = None) -> None:
                self._leave()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps(obj).encode(), headers=headers)

            def _error(self, status: int, extra: str = "") -> None:
                msg = STATUS_TEXT.get(status, "error") + extra
                headers = {}
                if status in (429, 503) and server.retry_after is not None:
                    headers["Retry-After"] = server.retry_after
                self._json(status, {"error": {"message": msg, "type": "fake_error", "code": status}}, headers)

            def _path(self) -> str:
                p = self.path.split("?", 1)[0]
                return p[3:] if p.startswith("/v1/") else p

            def do_GET(self) -> None:  # noqa: N802
                path = self._path()
                if path == "/_stats":
                    return self._json(200, {"total": server.total, "max_in_flight": server.max_in_flight})
                if path == "/models":
                    return self._json(200, {"object": "list", "data": [{"id": server.model or "fake-model", "object": "model"}]})
                parts = path.strip("/").split("/")
                if len(parts) == 2 and parts[0] == "batches":
                    b = server._retrieve_batch(parts[1])
                    return self._json(200, b) if b else self._error(404)
                if len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
                    f = server._files.get(parts[1])
                    return self._send(200, f["content"], ctype="application/octet-stream") if f else self._error(404)
                self._error(404)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self._path()
                if path == "/files":
                    return self._json(200, server._upload(self.headers.get("Content-Type", ""), raw))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    return self._error(400, ": body is not JSON")
                if path == "/batches":
                    return self._json(200, server._create_batch(body))
                if path not in ("/chat/completions", "/responses", "/completions"):
                    return self._error(404)
                auth = self.headers.get("Authorization")
                req = server._register(path, body, auth)
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self.in_flight = True
                try:
                    self._answer(req, auth)
                finally:
                    self._leave()

            def _answer(self, req: FakeRequest, auth: str | None) -> None:
                echo = f" (got {auth})" if server.echo_key_in_errors else ""
                if server.api_key is not None and auth != f"Bearer {server.api_key}":
                    return self._error(401, echo)
                fault = server._fault_for(req)
                if server.latency_s > 0:
                    time.sleep(server.latency_s)
                if fault is None or fault == "empty_text":
                    reply = server.reply_for(req)
                    return self._json(200, server.build_body(req, reply, empty_text=fault == "empty_text"))
                if fault.isdigit():
                    return self._error(int(fault), echo)
                if fault == "timeout":
                    time.sleep(server.timeout_sleep_s)
                    return self._json(200, server.build_body(req, server.reply_for(req)))
                if fault == "garbage":
                    return self._send(200, b"<html>502 Bad Gateway</html> not json {")
                if fault == "empty":
                    return self._send(200, b"")
                if fault == "no_choices":
                    return self._json(200, {"id": "x", "object": "chat.completion", "choices": []})
                if fault == "disconnect":
                    self.close_connection = True
                    self.connection.close()
                    return None
                raise ValueError(f"unknown fault {fault!r}")

        return Handler


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted; print ``READY <base_url>`` once listening."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    srv = FakeServer(latency_s=args.latency, port=args.port, fault_rate=args.fault_rate, seed=args.seed).start()
    print(f"READY {srv.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
