"""The HTTP transport of the model client: POST a JSON body, read the whole answer, on aiohttp.

The client (:mod:`cresowlve_core.llm.client`) talks to a :class:`Transport`, a two-method
protocol (``post`` and ``aclose``), so a test double or another HTTP stack plugs in through
``LLMClient(transport_factory=...)``. The default, :class:`AiohttpTransport`, is one
``aiohttp.ClientSession`` per event loop with:

* ``TCPConnector(limit=concurrency)``: every call in flight has its own keep-alive connection
  (aiohttp's default of 100 would cap concurrency 256 at a third of the ideal rate);
* no redirects (``allow_redirects=False``: an API that redirects a POST is misconfigured; the
  3xx is reported);
* proxies from the environment (``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``, read once with
  aiohttp's ``trust_env`` rules, credentials in the proxy URL or ``~/.netrc``; CONNECT tunnels
  for https); a failure of the proxy names the proxy;
* TLS with the system trust store (certifi's when the system has none) plus the CA files and
  directories named by ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``;
* answers of at most :data:`MAX_BODY_BYTES` (64 MB) after decompression: a gzip bomb is cut
  off there (:class:`ResponseTooLarge`, an error of that one item), never inflated in full;
* a lenient but exact response parser: aiohttp's pure-Python one, which accepts a repeated
  identical ``Content-Length`` (RFC 9112 §6.3) and bare-LF header lines; differing lengths
  are refused (~40 µs more CPU per answer than the C parser, invisible next to model latency);
* a keep-alive connection that receives a response nobody asked for (a desynchronised
  server) is closed at once, so that answer is never handed to the next request;
* a reused keep-alive connection closed by the server before any byte of the answer is sent
  again once on a fresh connection (the server never saw the request); any other failure is
  reported, so the caller counts it as an attempt.

Failures are :class:`TransportError` subclasses: :class:`ConnectFailed` (``refused``, ``dns``,
``timed_out``, ``tls`` flags; ``proxy`` names the proxy when it is the proxy that failed;
``status`` is the proxy's answer to CONNECT, e.g. 407), :class:`ReadTimeout`,
:class:`ProtocolFailure` and :class:`ResponseTooLarge`. ``no_answer`` marks a failure before
any byte of an answer (the circuit breaker counts those).
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import EMPTY_BODY_STATUS_CODES, get_env_proxy_for_url
from aiohttp.http_parser import HttpResponseParserPy
from yarl import URL

from cresowlve_core.llm.types import LLMConfigError

#: the largest answer accepted, after decompression
MAX_BODY_BYTES = 64 * 1024 * 1024
#: environment variables naming extra CA certificates (files or directories), in this order
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


class TransportError(Exception):
    """The request could not be completed at the HTTP level. ``no_answer``: no byte of an
    answer arrived (the endpoint accepted nothing or answered nothing)."""

    no_answer = False


class ConnectFailed(TransportError):
    """No connection: ``refused`` (nothing listens), ``dns`` (host not found), ``timed_out``,
    ``tls`` (the handshake failed: a certificate, or TLS spoken to a plain-HTTP port, or plain
    HTTP spoken to a TLS port). ``proxy``: the proxy that failed (its URL without credentials),
    ``status``: the proxy's answer to CONNECT (407: it wants credentials)."""

    no_answer = True

    def __init__(self, message: str, *, refused: bool = False, dns: bool = False, timed_out: bool = False,
                 tls: bool = False, proxy: str | None = None, status: int | None = None):
        super().__init__(message)
        self.refused = refused
        self.dns = dns
        self.timed_out = timed_out
        self.tls = tls
        self.proxy = proxy
        self.status = status


class ReadTimeout(TransportError):
    """No (complete) answer within the read timeout."""

    def __init__(self, message: str, *, no_answer: bool = False):
        super().__init__(message)
        self.no_answer = no_answer


class ProtocolFailure(TransportError):
    """The connection closed early or the answer is not valid HTTP/1.1."""

    def __init__(self, message: str, *, no_answer: bool = False):
        super().__init__(message)
        self.no_answer = no_answer


class ResponseTooLarge(TransportError):
    """The answer exceeds :data:`MAX_BODY_BYTES` once decompressed (an error of this item)."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    content: bytes


class Transport(Protocol):
    """What :class:`~cresowlve_core.llm.client.LLMClient` needs from HTTP (one per event loop)."""

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
        """POST ``body`` to ``target`` (path and query, relative to the origin); the whole answer."""
        ...

    async def aclose(self) -> None:
        """Close the connections."""
        ...


#: ``factory(base_url, concurrency=, connect_timeout=, read_timeout=, first_byte_timeout=)``
TransportFactory = Callable[..., Transport]


# --------------------------------------------------------------------------- TLS


def ssl_context() -> ssl.SSLContext:
    """The trust store for https: the system's (certifi's if it has none) plus the CA files or
    directories named by ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``, ``SSL_CERT_DIR``."""
    return _ssl_context(tuple(os.environ.get(v, "") for v in CA_VARIABLES))


@functools.lru_cache(maxsize=8)
def _ssl_context(env: tuple[str, ...]) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    # OpenSSL's defaults follow SSL_CERT_FILE/SSL_CERT_DIR when set; load the system store too
    paths = ssl.get_default_verify_paths()
    for cafile in {paths.openssl_cafile, paths.cafile} - {None, ""}:
        if cafile and os.path.isfile(cafile):
            ctx.load_verify_locations(cafile=cafile)
    if not ctx.cert_store_stats().get("x509_ca"):
        try:
            import certifi

            ctx.load_verify_locations(certifi.where())
        except ImportError:
            pass
    for name, value in zip(CA_VARIABLES, env):
        for location in (value.split(os.pathsep) if name == "SSL_CERT_DIR" else [value]):
            if not location:
                continue
            try:
                if os.path.isdir(location):
                    ctx.load_verify_locations(capath=location)
                else:
                    ctx.load_verify_locations(cafile=location)
            except (OSError, ssl.SSLError) as exc:
                reason = "does not exist" if isinstance(exc, FileNotFoundError) else f"is not a CA file ({exc})"
                raise LLMConfigError(f"${name} names {location}, which {reason}") from None
    return ctx


# --------------------------------------------------------------------------- the aiohttp protocol


class _StrictResponseHandler(ResponseHandler):
    """aiohttp's connection protocol with three changes: the pure-Python parser (see the module
    docstring), a connection that receives a response nobody asked for is closed (never handed
    to the next request), and failures say whether the connection was reused and whether any
    byte of the answer had arrived (``cresowlve_reused``, ``cresowlve_no_bytes``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._exchanges = 0
        self._got_bytes = False
        self._expecting = False

    def set_response_params(self, *, timer: Any = None, skip_payload: bool = False, read_until_eof: bool = False,
                            auto_decompress: bool = True, read_timeout: float | None = None,
                            read_bufsize: int = 2**16, timeout_ceil_threshold: float = 5,
                            max_line_size: int = 8190, max_field_size: int = 8190, max_headers: int = 128) -> None:
        self._exchanges += 1
        self._got_bytes = False
        self._expecting = True
        self._skip_payload = skip_payload
        self._read_bufsize = read_bufsize
        self._read_timeout = read_timeout
        self._timeout_ceil_threshold = timeout_ceil_threshold
        self._parser = _LenientParser(
            self, self._loop, read_bufsize, timer=timer, payload_exception=aiohttp.ClientPayloadError,
            response_with_body=not skip_payload, read_until_eof=read_until_eof, auto_decompress=auto_decompress,
            max_line_size=max_line_size, max_field_size=max_field_size, max_headers=max_headers,
        )
        self._drain_tail()

    def data_received(self, data: bytes) -> None:
        if data:
            self._got_bytes = True
        super().data_received(data)

    def feed_data(self, data: Any, size: int = 0) -> None:
        message = data[0]
        if 100 <= message.code < 200 and message.code != 101:  # informational: the final answer follows
            super().feed_data(data, size)
            return
        if not self._expecting:  # an answer to no request: this connection is out of step
            self._should_close = True
            if self.transport is not None:
                self.transport.close()
            return
        self._expecting = False
        super().feed_data(data, size)

    def set_exception(self, exc: BaseException, exc_cause: Any = None) -> None:
        try:
            exc.cresowlve_reused = self._exchanges > 1  # type: ignore[attr-defined]
            exc.cresowlve_no_bytes = not self._got_bytes  # type: ignore[attr-defined]
        except AttributeError:
            pass
        if exc_cause is None:
            super().set_exception(exc)
        else:
            super().set_exception(exc, exc_cause)


class _LenientParser(HttpResponseParserPy):
    """A repeated ``Content-Length`` is fine when every value is the same (RFC 9112 §6.3)."""

    def parse_headers(self, lines: Any) -> Any:
        parsed = super().parse_headers(lines)
        lengths = {v.strip() for v in parsed[0].getall("Content-Length", ())}
        if len(lengths) > 1:
            raise aiohttp.http_exceptions.BadHttpMessage(f"differing Content-Length values {sorted(lengths)}")
        return parsed


class _Connector(aiohttp.TCPConnector):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = functools.partial(_StrictResponseHandler, loop=self._loop)  # type: ignore[assignment]


# --------------------------------------------------------------------------- the transport


def _origin_of(base_url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.scheme, parts.hostname, port, f"{parts.scheme}://{host}:{port}"


class AiohttpTransport:
    """Keep-alive HTTP/1.1 to one origin over aiohttp (see the module docstring). Create and use
    it inside one event loop; the session is opened at the first request."""

    def __init__(self, base_url: str, *, concurrency: int = 8, connect_timeout: float = 10.0,
                 read_timeout: float = 120.0, first_byte_timeout: float | None = None) -> None:
        self.scheme, self.host, self.port, self.origin = _origin_of(base_url)
        self.host_port = self.origin.split("://", 1)[1]
        self.concurrency = concurrency
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.first_byte_timeout = first_byte_timeout if first_byte_timeout and first_byte_timeout < read_timeout else None
        self._tls = ssl_context() if self.scheme == "https" else None
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}
        self._tls_probed = False
        # aiohttp's own reading of the environment (and ~/.netrc for proxy credentials), done once
        # here rather than at every request as trust_env=True would
        try:
            proxy_url, self._proxy_auth = get_env_proxy_for_url(URL(self.origin))
            self._proxy_url: URL | None = proxy_url
            self.proxy: str | None = str(proxy_url.with_user(None))
        except LookupError:
            self._proxy_url, self._proxy_auth, self.proxy = None, None, None

    def _open(self) -> aiohttp.ClientSession:
        connector = _Connector(limit=self.concurrency, ssl=self._tls if self._tls is not None else True)
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout, sock_connect=self.connect_timeout,
                                        sock_read=self.read_timeout)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False,
                                              auto_decompress=True, skip_auto_headers=("User-Agent",))
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def abandon(self) -> None:
        """Forget the session of an event loop that has finished (no I/O is possible there any
        more): its sockets close when collected, without aiohttp's "unclosed session" warnings."""
        session, self._session = self._session, None
        if session is not None and session.connector is not None:
            session.connector._closed = True

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
        url = self._urls.get(target)
        if url is None:
            url = self._urls[target] = URL(self.origin + target, encoded=True)
        session = self._session or self._open()
        for fresh_retry in (False, True):
            try:
                return await self._exchange(session, url, headers, body)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                stale = _flag(exc, "cresowlve_reused", False) and _flag(exc, "cresowlve_no_bytes", False)
                if stale and not fresh_retry and not isinstance(exc, aiohttp.ClientConnectorError):
                    continue  # closed by the server while idle: it never saw this request
                raise await self._translate(exc) from None
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise await self._translate(exc) from None
        raise AssertionError("unreachable")

    async def _exchange(self, session: aiohttp.ClientSession, url: URL, headers: dict[str, str],
                        body: bytes) -> Response:
        if self.first_byte_timeout is None:
            resp = await session.post(url, data=body, headers=headers, allow_redirects=False,
                                          proxy=self._proxy_url, proxy_auth=self._proxy_auth)
        else:
            try:
                async with asyncio.timeout(self.first_byte_timeout):
                    resp = await session.post(url, data=body, headers=headers, allow_redirects=False,
                                          proxy=self._proxy_url, proxy_auth=self._proxy_auth)
            except TimeoutError:
                raise ReadTimeout(f"no answer from {self.host_port} within {self.first_byte_timeout:g} s",
                                  no_answer=True) from None
        try:
            if (resp.content_length is not None and resp.content_length <= MAX_BODY_BYTES
                    and "Content-Encoding" not in resp.headers) or resp.status in EMPTY_BODY_STATUS_CODES:
                content = await resp.read()
            else:
                content = await self._read_bounded(resp)
        except BaseException:
            resp.close()  # the connection's state is unknown: never reuse it
            raise
        resp.release()
        out: dict[str, str] = {}
        for name, value in resp.headers.items():
            key = name.lower()
            out[key] = f"{out[key]}, {value}" if key in out else value
        return Response(resp.status, out, content)

    async def _read_bounded(self, resp: aiohttp.ClientResponse) -> bytes:
        """The body, decompressed as it streams in, up to :data:`MAX_BODY_BYTES`."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ResponseTooLarge(f"the answer from {self.host_port} exceeds {MAX_BODY_BYTES // 2**20} MB "
                                       f"(after decompression, {resp.headers.get('Content-Encoding') or 'identity'}); "
                                       "cut off there")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _speaks_tls(self) -> bool:
        """Whether this plain-http origin is in fact a TLS port (probed once, without a request)."""
        if self._tls_probed or self.scheme != "http" or self.proxy is not None:
            return False
        self._tls_probed = True
        probe = ssl.create_default_context()
        probe.check_hostname = False
        probe.verify_mode = ssl.CERT_NONE
        try:
            async with asyncio.timeout(min(2.0, self.connect_timeout)):
                _, writer = await asyncio.open_connection(self.host, self.port, ssl=probe)
        except (OSError, TimeoutError, ssl.SSLError):
            return False
        writer.close()
        return True

    def _via(self) -> str:
        return f" through the proxy {self.proxy}" if self.proxy else ""

    async def _translate(self, exc: BaseException) -> TransportError:
        """One of our :class:`TransportError` for an aiohttp failure."""
        where = self.host_port
        if isinstance(exc, TransportError):
            return exc
        if isinstance(exc, aiohttp.ClientHttpProxyError):
            what = "wants credentials (407 Proxy Authentication Required)" if exc.status == 407 else \
                f"refused the tunnel (HTTP {exc.status})"
            return ConnectFailed(f"the proxy {self.proxy} {what} to {where}", proxy=self.proxy, status=exc.status)
        if isinstance(exc, aiohttp.ClientProxyConnectionError):
            return ConnectFailed(f"cannot connect to the proxy {self.proxy} ({exc.os_error.strerror or exc.os_error})",
                                 refused=True, proxy=self.proxy)
        if isinstance(exc, aiohttp.ClientConnectorDNSError):
            return ConnectFailed(f"DNS lookup failed for {self.host} ({exc.os_error.strerror or exc.os_error})", dns=True)
        if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError)):
            return ConnectFailed(f"TLS handshake with {where}{self._via()} failed ({_ssl_reason(exc)})", tls=True)
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return ConnectFailed(f"connecting to {where}{self._via()} timed out after {self.connect_timeout:g} s",
                                 timed_out=True)
        if isinstance(exc, aiohttp.ClientConnectorError):
            errno_refused = isinstance(exc.os_error, ConnectionRefusedError) or "refused" in str(exc).lower()
            if errno_refused:
                return ConnectFailed(f"connection refused by {where}", refused=True)
            return ConnectFailed(f"cannot connect to {where} ({exc.os_error.strerror or exc.os_error})")
        if isinstance(exc, (aiohttp.SocketTimeoutError, TimeoutError)):
            no_bytes = _flag(exc, "cresowlve_no_bytes", False)
            return ReadTimeout(f"no {'answer' if no_bytes else 'complete answer'} from {where} within "
                               f"{self.read_timeout:g} s", no_answer=no_bytes)
        no_bytes = _flag(exc, "cresowlve_no_bytes", False)
        fresh = _flag(exc, "cresowlve_reused", True) is False
        garbled = isinstance(exc, aiohttp.ClientResponseError) and exc.status == 400  # not HTTP at all
        if fresh and (no_bytes or garbled) and await self._speaks_tls():
            return ConnectFailed(f"{where} speaks TLS but the base URL says http://: use https://", tls=True)
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            if self.proxy and self.scheme == "https" and _flag(exc, "cresowlve_no_bytes", None) is None:
                return ProtocolFailure(f"the proxy {self.proxy} closed the tunnel to {where} without an answer",
                                       no_answer=True)
            return ProtocolFailure(f"{where}{self._via()} closed the connection "
                                   f"{'without an answer' if no_bytes else 'in the middle of the answer'}",
                                   no_answer=no_bytes)
        if isinstance(exc, aiohttp.ClientOSError):
            return ProtocolFailure(f"the connection to {where}{self._via()} failed "
                                   f"{'before' if no_bytes else 'during'} the answer ({exc.strerror or exc})",
                                   no_answer=no_bytes)
        if isinstance(exc, aiohttp.ClientResponseError) and exc.status == 400 and exc.message:
            first = str(exc.message).splitlines()[0][:120]
            return ProtocolFailure(f"not a valid HTTP answer from {where} ({first})")
        return ProtocolFailure(f"broken answer from {where} ({type(exc).__name__}: {str(exc)[:200]})")


def _flag(exc: BaseException, name: str, default: Any) -> Any:
    """A flag set by :class:`_StrictResponseHandler` on ``exc`` or on the exception it wraps."""
    for e in (exc, exc.__cause__, exc.__context__):
        if e is not None and hasattr(e, name):
            return getattr(e, name)
    return default


def _ssl_reason(exc: BaseException) -> str:
    inner = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None) or exc
    return str(getattr(inner, "verify_message", None) or getattr(inner, "reason", None) or inner)[:200]


def open_transport(base_url: str, **options: Any) -> Transport:
    """The default :data:`TransportFactory`: an :class:`AiohttpTransport`."""
    return AiohttpTransport(base_url, **options)
