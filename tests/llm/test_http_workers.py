"""HTTP in worker processes (``--http-workers``): what only a worker process can do wrong. Every
hostile-server case of test_transport_hostile.py also runs through a worker process."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hostile import Conn, HostileServer, chat_body, echo_handler, http_response, prompt_of

from cresowlve_core.llm import http_workers
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.http_workers import WorkerTransport, _frame, _Frames, worker_transport_factory
from cresowlve_core.llm.types import Endpoint, GenParams, LLMFatalError

MODEL = "test-model"


def client(url: str, workers: int = 1, **kw: Any) -> LLMClient:
    return LLMClient(Endpoint(url, MODEL), backoff_base_s=0.01, transport_factory=worker_transport_factory(workers),
                     **kw)


async def ask(cl: LLMClient, prompt: str) -> str:
    return (await cl.complete([{"role": "user", "content": prompt}], GenParams(), prompt_version="v")).text


def workers_of(cl: LLMClient) -> WorkerTransport:
    assert cl._res is not None and isinstance(cl._res.transport, WorkerTransport)
    return cl._res.transport


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_messages_are_cut_from_any_chunking() -> None:
    messages = [(1, "/v1/chat/completions", {"a": "b"}, b"x" * 70_000), (2,), (3, None, "ReadTimeout", "m", {})]
    stream = b"".join(_frame(m) for m in messages)
    frames = _Frames()
    got = [m for i in range(0, len(stream), 7) for m in frames.feed(stream[i:i + 7])]
    assert got == messages and not frames.buffer


def test_answers_come_back_byte_for_byte_and_the_workers_exit_with_the_client() -> None:
    odd = b'{"choices": [{"message": {"content": "caf\\u00e9 \xff"}}]}'  # not valid UTF-8: the run flags it

    async def handle(conn: Conn) -> None:
        while (req := await conn.request()) is not None:
            await conn.write(http_response(odd if prompt_of(req) == "odd" else chat_body(f"answer to {prompt_of(req)}"),
                                           headers="X-Request-Id: r1\r\nX-Request-Id: r2\r\n"))

    async def go() -> tuple[list[str], list[int], Any]:
        cl = client(srv.url, workers=2, concurrency=8)
        async with cl:
            texts = await asyncio.gather(*(ask(cl, f"p{i}") for i in range(40)))
            pids = workers_of(cl).pids
            raw = await workers_of(cl).post("/v1/chat/completions", {"Content-Type": "application/json"},
                                            b'{"messages": [{"role": "user", "content": "odd"}]}')
        return list(texts), pids, raw

    with HostileServer(handle) as srv:
        texts, pids, raw = asyncio.run(go())
    assert texts == [f"answer to p{i}" for i in range(40)]
    assert len(pids) == 2 and all(p != os.getpid() for p in pids)
    assert raw.content == odd and raw.headers["x-request-id"] == "r1, r2" and raw.status == 200
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


def test_a_worker_killed_mid_call_costs_that_attempt_and_is_started_again(caplog: pytest.LogCaptureFixture) -> None:
    async def handle(conn: Conn) -> None:
        while (req := await conn.request()) is not None:
            if len(conn.server.requests) == 1:
                await asyncio.sleep(30)  # the first attempt never gets an answer: its worker is killed
            await conn.write(http_response(chat_body(f"answer to {prompt_of(req)}")))

    async def go() -> tuple[str, int]:
        cl = client(srv.url)
        async with cl:
            call = asyncio.ensure_future(ask(cl, "a"))
            await until(lambda: len(srv.requests) == 1)
            os.kill(workers_of(cl).pids[0], signal.SIGKILL)
            return await call, cl.requests_sent

    with HostileServer(handle) as srv, caplog.at_level(logging.WARNING):
        text, sent = asyncio.run(go())
    assert text == "answer to a"
    assert sent == 2 and len(srv.requests) == 2  # the lost attempt counts: the server may have seen it
    assert "starting 1 HTTP worker process(es) again" in caplog.text


def test_ctrl_c_in_the_terminal_does_not_kill_the_workers() -> None:
    async def go() -> list[str]:
        cl = client(srv.url)
        async with cl:
            first = await ask(cl, "a")
            os.kill(workers_of(cl).pids[0], signal.SIGINT)  # the terminal sends it to the whole process group
            await asyncio.sleep(0.3)
            return [first, await ask(cl, "b")]

    with HostileServer(echo_handler()) as srv:
        assert asyncio.run(go()) == ["answer to a", "answer to b"]
        assert srv.connections == 1  # the same worker and kept-alive connection answered both


@pytest.mark.parametrize("workers", [0, 1], ids=["in-loop", "http-workers"])
def test_a_call_given_up_is_given_up_in_the_worker(workers: int) -> None:
    closed = threading.Event()

    async def handle(conn: Conn) -> None:
        while (req := await conn.request()) is not None:
            if prompt_of(req) == "warm-up":
                await conn.write(http_response(chat_body("ready")))
                continue
            await conn.request()  # no answer; returns None when the client closes the connection
            closed.set()
            return

    async def go() -> float:
        cl = client(srv.url, workers, deadline_s=0.5, max_attempts=1)
        async with cl:
            assert await ask(cl, "warm-up") == "ready"  # the worker is up: the deadline is the call's alone
            with pytest.raises(Exception, match="deadline"):
                await ask(cl, "a")
            given_up = time.monotonic()
            await until(closed.is_set)
            return time.monotonic() - given_up

    with HostileServer(handle) as srv:
        waited = asyncio.run(go())
    assert waited < 3  # the worker dropped the request and its connection (its read timeout is 300 s)


@pytest.mark.parametrize("command", [("/nonexistent/python",), (sys.executable, "-c", "import sys; sys.exit(3)")],
                         ids=["cannot-start", "exits-at-start"])
def test_a_worker_that_cannot_start_stops_the_run(command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_workers, "WORKER_COMMAND", command)

    async def go() -> None:
        async with client(srv.url) as cl:
            await ask(cl, "a")

    with HostileServer(echo_handler()) as srv:
        with pytest.raises(LLMFatalError, match="cannot start an HTTP worker|exited \\(code 3\\) as it started"):
            asyncio.run(go())
        assert srv.requests == []


def test_a_client_used_from_a_new_event_loop_stops_the_workers_of_the_old_one() -> None:
    async def once(prompt: str) -> tuple[str, list[int]]:
        return await ask(cl, prompt), workers_of(cl).pids

    with HostileServer(echo_handler()) as srv:
        cl = client(srv.url)
        first, old = asyncio.run(once("a"))  # the loop ends without closing the client (a notebook cell)
        second, new = asyncio.run(once("b"))
        asyncio.run(cl.aclose())
    assert (first, second) == ("answer to a", "answer to b") and old != new
    deadline = time.monotonic() + 10
    while alive(old[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(old[0])


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_a_key_in_the_base_url_is_never_on_a_workers_command_line() -> None:
    async def go() -> tuple[str, bytes]:
        cl = client(srv.url.replace("/v1", "/v1?api-key=sk-worker-secret-1234"))
        async with cl:
            text = await ask(cl, "a")
            return text, Path(f"/proc/{workers_of(cl).pids[0]}/cmdline").read_bytes()

    with HostileServer(echo_handler()) as srv:
        text, cmdline = asyncio.run(go())
        sent = srv.requests[0]
    assert text == "answer to a" and b"sk-worker-secret-1234" in sent  # the worker did use it
    assert b"http_workers" in cmdline and b"sk-worker-secret" not in cmdline and b"127.0.0.1" not in cmdline
