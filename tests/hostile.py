"""Hostile local servers on raw asyncio sockets, for the transport tests and ``bench/faults.py``.

A :class:`HostileServer` runs ``handler(conn)`` for every accepted connection on its own event
loop in a background thread, so both ``asyncio.run`` and blocking clients can talk to it. The
handler reads requests with ``await conn.request()`` and writes whatever bytes it likes
(``conn.write``), including nothing, half a header, an RST (``conn.reset()``) or responses no
one asked for. :func:`make_ca` writes a private CA and a server certificate for ``localhost``
and ``127.0.0.1`` with the ``openssl`` command line. :func:`connect_proxy` is a CONNECT proxy.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

_PROMPT = re.compile(rb'"content":\s*"((?:[^"\\]|\\.)*)"')


def chat_body(text: str, model: str = "test-model") -> bytes:
    """A Chat Completions answer whose content is ``text``."""
    return json.dumps({"id": "x", "object": "chat.completion", "model": model,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def http_response(body: bytes, status: str = "200 OK", headers: str = "") -> bytes:
    """A complete HTTP/1.1 response with a Content-Length."""
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body


def prompt_of(request: bytes) -> str:
    """The last message content of a chat request (the test's item key)."""
    found = _PROMPT.findall(request)
    return json.loads(b'"' + found[-1] + b'"') if found else ""


class Conn:
    """One accepted connection: read requests, write raw bytes, close or reset."""

    def __init__(self, server: HostileServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int):
        self.server, self.reader, self.writer, self.n = server, reader, writer, n
        self.served = 0

    async def request(self) -> bytes | None:
        """The next request (head and body), or None when the client closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        body = await self.reader.readexactly(int(m.group(1))) if m else b""
        req = head + body
        self.server.requests.append(req)
        return req

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()

    def reset(self) -> None:
        """Close with an RST (SO_LINGER 0) instead of a FIN."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Handler = Callable[[Conn], Awaitable[None]]


class HostileServer:
    """``with HostileServer(handler) as srv``: ``srv.port``, ``srv.url`` (``http(s)://127.0.0.1:PORT/v1``),
    ``srv.connections`` (accepted), ``srv.requests`` (raw requests read by handlers)."""

    def __init__(self, handler: Handler, *, tls: ssl.SSLContext | None = None, host_name: str = "127.0.0.1"):
        self.handler, self.tls, self.host_name = handler, tls, host_name
        self.connections = 0
        self.requests: list[bytes] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host_name}:{self.port}/v1"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.set_exception_handler(lambda loop, ctx: None)  # TLS handshake noise from hostile clients
        tls: dict[str, object] = {"ssl": self.tls, "ssl_handshake_timeout": 5} if self.tls else {}
        self._server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0, **tls))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = Conn(self, reader, writer, self.connections)
        try:
            await self.handler(conn)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def echo_handler(text: Callable[[str], str] = lambda p: f"answer to {p}") -> Handler:
    """A well-behaved keep-alive server answering each prompt with ``text(prompt)``."""

    async def handle(conn: Conn) -> None:
        while (req := await conn.request()) is not None:
            await conn.write(http_response(chat_body(text(prompt_of(req)))))

    return handle


def connect_proxy(*, drop_first: int = 0, status: int | None = None, seen: list[str] | None = None) -> Handler:
    """A CONNECT proxy: tunnels to the requested port on 127.0.0.1. The first ``drop_first``
    CONNECTs are dropped (closed without a word); ``status`` answers every CONNECT with it."""
    count = {"n": 0}

    async def handle(conn: Conn) -> None:
        head = await conn.request()
        if head is None:
            return
        line = head.split(b"\r\n", 1)[0].decode()
        if seen is not None:
            seen.append(line)
        count["n"] += 1
        if count["n"] <= drop_first:
            conn.close()
            return
        if status is not None:
            await conn.write(f"HTTP/1.1 {status} Nope\r\nProxy-Authenticate: Basic realm=\"p\"\r\n"
                             "Content-Length: 0\r\n\r\n".encode())
            return
        port = int(line.split()[1].rsplit(":", 1)[1])
        up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
        await conn.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except ConnectionError:
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(conn.reader, up_w), pipe(up_r, conn.writer))

    return handle


@dataclass
class CA:
    ca_file: Path  # the CA certificate (PEM)
    ca_dir: Path  # a hashed directory holding it (for SSL_CERT_DIR)
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, self.key)
        return ctx


def make_ca(directory: Path) -> CA:
    """A private CA and a certificate for ``localhost``/``127.0.0.1`` it signed (``openssl`` CLI)."""
    d = directory
    d.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> str:
        return subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, text=True).stdout

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=cresowlve test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                               "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.pem",
        "-days", "2", "-extfile", "ext.cnf")
    ca_dir = d / "certs"
    ca_dir.mkdir(exist_ok=True)
    digest = run("x509", "-hash", "-noout", "-in", "ca.pem").strip()
    (ca_dir / f"{digest}.0").write_bytes((d / "ca.pem").read_bytes())
    return CA(d / "ca.pem", ca_dir, d / "srv.pem", d / "srv.key")
