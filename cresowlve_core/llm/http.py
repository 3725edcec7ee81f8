"""A small HTTP/1.1 client for the one thing the model client does: POST a JSON body, read the
whole answer. Keep-alive connections over asyncio streams, one write per request.

Why not a general HTTP library: at 64 calls in flight the client's own CPU per call decides the
throughput (every answer of a wave is handled in turn). httpx2/httpcore cost ~0.55 ms of CPU per
call here; this module ~0.07 ms (``bench/throughput.py``). It supports what model APIs use:
``http``/``https`` (TLS with the system trust store, or certifi's when the system has none),
``Content-Length`` and chunked bodies, gzip/deflate answers, ``Connection: close``, HTTP(S)
proxies from the environment (``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``, via CONNECT for
https) and a retry on a fresh connection when a reused keep-alive connection turns out closed
before any answer byte arrived. It does not follow redirects (an API that redirects a POST is
misconfigured; the 3xx is reported).

Failures are :class:`TransportError` subclasses: :class:`ConnectFailed` (``refused``/``dns``
flags), :class:`ReadTimeout`, :class:`ProtocolFailure`.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import socket
import ssl
import urllib.request
import zlib
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

STREAM_LIMIT = 1 << 20  # longest header block / chunk-size line accepted


class TransportError(Exception):
    """The request could not be completed at the HTTP level."""


class ConnectFailed(TransportError):
    """No connection: ``refused`` (nothing listens), ``dns`` (host not found), ``timed_out``,
    ``tls`` (the handshake failed: a certificate, or TLS spoken to a plain-HTTP port)."""

    def __init__(self, message: str, *, refused: bool = False, dns: bool = False, timed_out: bool = False,
                 tls: bool = False):
        super().__init__(message)
        self.refused = refused
        self.dns = dns
        self.timed_out = timed_out
        self.tls = tls


class ReadTimeout(TransportError):
    """No (complete) answer within the read timeout."""


class ProtocolFailure(TransportError):
    """The connection closed early or the answer is not valid HTTP/1.1."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    content: bytes


@functools.lru_cache(maxsize=1)
def default_ssl_context() -> ssl.SSLContext:
    """The system trust store; certifi's bundle if the system has no CA certificates."""
    ctx = ssl.create_default_context()
    if not ctx.cert_store_stats().get("x509_ca"):
        try:
            import certifi

            ctx.load_verify_locations(certifi.where())
        except ImportError:
            pass
    return ctx


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the environment names for ``scheme://host`` (honouring ``NO_PROXY``), if any."""
    proxies = urllib.request.getproxies_environment()
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - missing from typeshed
    if not proxies or bypass(host, proxies):
        return None
    return proxies.get(scheme)


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


@dataclass
class ConnectionPool:
    """Keep-alive connections to one origin (``scheme://host:port``), reused last-in first-out."""

    base_url: str
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    ssl_context: ssl.SSLContext | None = None
    _idle: list[_Conn] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"
        self.proxy = _proxy_for(self.scheme, self.host)
        self._tls = (self.ssl_context or default_ssl_context()) if self.scheme == "https" else None

    # ---- connections

    async def _open(self) -> _Conn:
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.proxy is None:
                    r, w = await asyncio.open_connection(self.host, self.port, ssl=self._tls,
                                                         server_hostname=self.host if self._tls else None,
                                                         limit=STREAM_LIMIT)
                    return _Conn(r, w)
                return await self._open_via_proxy()
        except TimeoutError:
            raise ConnectFailed(f"connecting to {self.host_header} timed out", timed_out=True) from None
        except socket.gaierror as exc:
            raise ConnectFailed(f"DNS lookup failed for {self.host} ({exc.strerror or exc})", dns=True) from None
        except ConnectionRefusedError:
            raise ConnectFailed(f"connection refused by {self.host_header}", refused=True) from None
        except ssl.SSLError as exc:
            raise ConnectFailed(f"TLS handshake with {self.host_header} failed ({exc.reason or exc})", tls=True) from None
        except OSError as exc:
            refused = "refused" in str(exc).lower() or "connect call failed" in str(exc).lower()
            raise ConnectFailed(f"cannot connect to {self.host_header} ({exc.strerror or exc})", refused=refused) from None

    async def _open_via_proxy(self) -> _Conn:
        assert self.proxy is not None
        p = urlsplit(self.proxy)
        r, w = await asyncio.open_connection(p.hostname, p.port or 80, limit=STREAM_LIMIT)
        conn = _Conn(r, w)
        if self.scheme == "http":
            return conn
        auth = self._proxy_auth()
        w.write(f"CONNECT {self.host}:{self.port} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{auth}\r\n".encode())
        status, _ = await _read_head(r)
        if status != 200:
            conn.close()
            raise ConnectFailed(f"proxy refused the tunnel to {self.host_header} (HTTP {status})")
        await w.start_tls(self._tls or default_ssl_context(), server_hostname=self.host)
        return conn

    def _proxy_auth(self) -> str:
        p = urlsplit(self.proxy or "")
        if not p.username:
            return ""
        token = base64.b64encode(f"{unquote(p.username)}:{unquote(p.password or '')}".encode()).decode()
        return f"Proxy-Authorization: Basic {token}\r\n"

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- requests

    def _head(self, target: str, headers: dict[str, str], n_body: int) -> bytes:
        if self.proxy is not None and self.scheme == "http":
            target = f"http://{self.host_header}{target}"  # absolute form through a plain proxy
        lines = [f"POST {target} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {n_body}",
                 "Accept-Encoding: gzip, deflate"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if self.proxy is not None and self.scheme == "http" and (auth := self._proxy_auth()):
            lines.append(auth.rstrip())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
        """POST ``body`` to ``target`` (path and query) and return the whole answer."""
        data = self._head(target, headers, len(body)) + body
        while self._idle:
            conn = self._idle.pop()
            if not conn.usable():
                conn.close()
                continue
            try:
                return await self._exchange(conn, data)
            except _StaleConnection:
                continue  # closed by the server while idle: try the next one
        try:
            return await self._exchange(await self._open(), data)
        except _StaleConnection:
            raise ProtocolFailure(f"{self.host_header} closed the connection without an answer") from None

    async def _exchange(self, conn: _Conn, data: bytes) -> Response:
        """One request on ``conn``; the connection goes back to the pool only after a clean answer."""
        try:
            async with asyncio.timeout(self.read_timeout):
                try:
                    conn.writer.write(data)
                    await conn.writer.drain()
                    status, headers = await _read_head(conn.reader)
                except (asyncio.IncompleteReadError, ConnectionError) as exc:
                    if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                        raise ProtocolFailure("the connection closed in the middle of the answer's headers") from None
                    raise _StaleConnection from None
            async with asyncio.timeout(self.read_timeout):
                content, reusable = await _read_body(conn.reader, headers)
        except TimeoutError:
            conn.close()
            raise ReadTimeout(f"no answer from {self.host_header} within {self.read_timeout:g} s") from None
        except (_StaleConnection, TransportError):
            conn.close()
            raise
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError, zlib.error) as exc:
            conn.close()
            raise ProtocolFailure(f"broken answer from {self.host_header} ({type(exc).__name__})") from None
        except BaseException:  # cancelled (e.g. an overall deadline): the connection's state is unknown
            conn.close()
            raise
        if reusable and headers.get("connection", "").lower() != "close":
            self._idle.append(conn)
        else:
            conn.close()
        return Response(status, headers, content)


class _StaleConnection(Exception):
    """A reused connection was closed before any byte of an answer: safe to send again."""


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status and headers of the next final (non-1xx) answer."""
    while True:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ProtocolFailure(f"not an HTTP answer: {lines[0][:60]!r}")
        status = int(parts[1])
        if 100 <= status < 200:
            continue
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        if parts[0] == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers["connection"] = "close"
        return status, headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> tuple[bytes, bool]:
    """The (decoded) body and whether the connection may be reused."""
    reusable = True
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                break
            chunks.append(await reader.readexactly(size + 2))
        content = b"".join(c[:-2] for c in chunks)
    elif "content-length" in headers:
        content = await reader.readexactly(int(headers["content-length"]))
    else:
        content = await reader.read()  # until the server closes
        reusable = False
    encoding = headers.get("content-encoding", "").lower()
    if encoding in ("gzip", "x-gzip"):
        content = zlib.decompress(content, 16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        try:
            content = zlib.decompress(content)
        except zlib.error:
            content = zlib.decompress(content, -zlib.MAX_WBITS)
    return content, reusable
