"""The aiohttp transport: body framings, encodings, keep-alive and its pitfalls, proxies, failures."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from cresowlve_core.llm.http import (
    AiohttpTransport,
    ConnectFailed,
    ProtocolFailure,
    ReadTimeout,
)

ConnectionPool = AiohttpTransport


class RawServer:
    """A socket server whose ``answer(request_bytes, n)`` returns raw bytes to send (``None``: close
    the connection without answering); ``close_after`` closes each connection after N answers."""

    def __init__(self, answer: Callable[[bytes, int], bytes | None], close_after: int | None = None):
        self.answer, self.close_after = answer, close_after
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            served = 0
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buf = rest[length:]
                out = self.answer(head, len(self.requests))
                if out is None:
                    return
                conn.sendall(out)
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    return

    def close(self) -> None:
        self.sock.close()


def ok(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def post(pool: ConnectionPool, n: int = 1) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return [await pool.post("/v1/chat/completions", {"Authorization": "Bearer k"}, b'{"a":1}') for _ in range(n)]
        finally:
            await pool.aclose()

    return asyncio.run(go())


def test_one_write_per_request_and_keep_alive_reuse() -> None:
    srv = RawServer(lambda head, i: ok(b'{"n":%d}' % i))
    try:
        out = post(ConnectionPool(srv.url), 3)
    finally:
        srv.close()
    assert [r.content for r in out] == [b'{"n":1}', b'{"n":2}', b'{"n":3}'] and srv.connections == 1
    first = srv.requests[0]
    assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and f"Host: 127.0.0.1:{srv.port}".encode() in first
    assert first.endswith(b'\r\n\r\n{"a":1}') and b"Authorization: Bearer k" in first


def test_chunked_gzip_and_informational_answers() -> None:
    payload = gzip.compress(b'{"text": "' + b"x" * 5000 + b'"}')
    chunks = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(payload[i:i + 700]), payload[i:i + 700])
                      for i in range(0, len(payload), 700))
    answer = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
              b"Content-Encoding: gzip\r\n\r\n" + chunks + b"0\r\nX-Trailer: y\r\n\r\n")
    srv = RawServer(lambda head, i: answer)
    try:
        out = post(ConnectionPool(srv.url), 2)
    finally:
        srv.close()
    assert out[0].content == b'{"text": "' + b"x" * 5000 + b'"}' and out[1].content == out[0].content
    assert srv.connections == 1


def test_connection_close_and_http10_bodies_without_length() -> None:
    srv = RawServer(lambda head, i: b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\n\r\nbusy" if i == 1
                    else ok(b"{}", "Connection: close\r\n"), close_after=1)
    try:
        out = post(ConnectionPool(srv.url), 3)
    finally:
        srv.close()
    assert (out[0].status, out[0].content, out[0].headers["retry-after"]) == (503, b"busy", "1")
    assert [r.status for r in out[1:]] == [200, 200] and srv.connections == 3


@pytest.mark.parametrize("pause", [0.0, 0.05])
def test_a_keep_alive_connection_closed_while_idle_is_replaced_transparently(pause: float) -> None:
    # the server answers once per connection and closes it without saying so; without a pause the
    # next request is usually written before the close is seen (the stale-connection retry)
    srv = RawServer(lambda head, i: ok(b"{}"), close_after=1)

    async def go() -> list[int]:
        pool = ConnectionPool(srv.url)
        statuses = []
        for _ in range(3):
            statuses.append((await pool.post("/x", {}, b"{}")).status)
            await asyncio.sleep(pause)
        await pool.aclose()
        return statuses

    try:
        assert asyncio.run(go()) == [200, 200, 200]
    finally:
        srv.close()
    assert len(srv.requests) == 3  # each request was answered exactly once


def test_failures_are_classified() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectFailed) as err:
        post(ConnectionPool(f"http://127.0.0.1:{port}/v1"))
    assert err.value.refused and not err.value.dns

    silent = RawServer(lambda head, i: None)  # reads the request, closes without a word
    try:
        with pytest.raises(ProtocolFailure, match="without an answer"):
            post(ConnectionPool(silent.url))
    finally:
        silent.close()

    garbage = RawServer(lambda head, i: b"SSH-2.0-OpenSSH\r\n\r\n")
    try:
        with pytest.raises(ProtocolFailure, match="not a valid HTTP answer"):
            post(ConnectionPool(garbage.url))
    finally:
        garbage.close()

    hang = RawServer(lambda head, i: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    try:
        with pytest.raises(ReadTimeout):
            post(ConnectionPool(hang.url, read_timeout=0.3))
    finally:
        hang.close()


def test_dns_failure_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_such_host(*a: Any, **k: Any) -> Any:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", no_such_host)
    with pytest.raises(ConnectFailed) as err:
        post(ConnectionPool("https://api.example.invalid/v1"))
    assert err.value.dns and "DNS" in str(err.value)


def test_plain_http_goes_through_the_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = RawServer(lambda head, i: ok(b"{}"))
    monkeypatch.setenv("HTTP_PROXY", f"http://u:p%40ss@127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        out = post(ConnectionPool("http://models.internal:8000/v1"))
    finally:
        proxy.close()
    assert out[0].status == 200
    req = proxy.requests[0]
    assert req.startswith(b"POST http://models.internal:8000/v1/chat/completions HTTP/1.1")
    assert b"Proxy-Authorization: Basic dTpwQHNz" in req  # u:p@ss
    monkeypatch.setenv("NO_PROXY", "models.internal")
    monkeypatch.setenv("no_proxy", "models.internal")
    assert ConnectionPool("http://models.internal:8000/v1").proxy is None


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="not an http"):
        ConnectionPool("ftp://x/v1")


def test_https_to_a_plain_http_port_is_a_tls_failure() -> None:
    from fakeserver import FakeServer  # a real HTTP server: it answers the TLS hello with a 400

    with FakeServer() as srv, pytest.raises(ConnectFailed) as err:
        post(ConnectionPool(f"https://127.0.0.1:{srv.port}/v1", connect_timeout=5))
    assert err.value.tls and "TLS" in str(err.value)


@pytest.mark.parametrize("wbits", [15, -15], ids=["zlib-wrapped", "raw"])
def test_deflate_bodies_in_either_framing_and_a_corrupt_gzip_body(wbits: int) -> None:
    text = b'{"text": "' + b"y" * 3000 + b'"}'
    packer = zlib.compressobj(wbits=wbits)
    deflated = packer.compress(text) + packer.flush()
    srv = RawServer(lambda head, i: ok(deflated, "Content-Encoding: deflate\r\n") if i == 1
                    else ok(gzip.compress(text)[:10] + b"\xff" * 20, "Content-Encoding: gzip\r\n"))
    try:
        assert post(ConnectionPool(srv.url))[0].content == text
        with pytest.raises(ProtocolFailure, match="gzip body .* is corrupt"):
            post(ConnectionPool(srv.url))
    finally:
        srv.close()
    assert b"Accept-Encoding: gzip, deflate" in srv.requests[0]
