"""The HTTP transport of the model client: POST a JSON body, read the whole answer, on aiohttp.

The client (:mod:`cresowlve_core.llm.client`) talks to a :class:`Transport`, a two-method
protocol (``post`` and ``aclose``), so a test double or another HTTP stack plugs in through
``LLMClient(transport_factory=...)``. The default, :class:`AiohttpTransport`, is one
``aiohttp.ClientSession`` per event loop, built from aiohttp's public API only, with:

* ``TCPConnector(limit=concurrency)``: every call in flight has its own keep-alive connection
  (aiohttp's default of 100 would cap concurrency 256 at a third of the ideal rate);
* no redirects (``allow_redirects=False``: an API that redirects a POST is misconfigured; the
  3xx is reported);
* proxies from the environment (``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``, read once with
  the standard library's rules, as aiohttp's ``trust_env``; credentials in the proxy URL or
  ``~/.netrc``; CONNECT tunnels for https); a failure of the proxy names the proxy;
* TLS with the system trust store (certifi's when the system has none) plus the CA files and
  directories named by ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``;
* answers of at most :data:`MAX_BODY_BYTES` (64 MB) after decompression, read from
  ``response.content`` as they stream in and inflated here (``auto_decompress=False``, gzip and
  deflate asked for, ``zlib`` with an output limit): a gzip bomb is cut off there
  (:class:`ResponseTooLarge`, an error of that one item), never inflated in full;
* a lenient but exact response parser: aiohttp's pure-Python one (chosen by its documented
  ``AIOHTTP_NO_EXTENSIONS`` switch, set here before aiohttp is imported), which accepts a
  repeated identical ``Content-Length`` (RFC 9112 §6.3; the C parser refuses it) and bare-LF
  header lines; differing lengths are refused (``response.headers.getall``). ~40 µs more CPU
  per answer than the C parser, invisible next to model latency. If aiohttp was imported
  first, the C parser stays, with one WARNING;
* a kept-alive connection that received bytes nobody asked for (a desynchronised server) is
  closed, never handed to the next request: ``TCPConnector.connect``, aiohttp's documented
  hook, checks the pooled connection's ``protocol.should_close`` (the flag aiohttp's own pool
  reads when a connection is released). That one attribute sits on an undocumented class: an
  aiohttp without it gets one WARNING and no check;
* a reused keep-alive connection closed by the server before any byte of the answer (the
  connector's ``connect`` says whether it handed out that connection before) is
  sent again once on a fresh connection (the server never saw the request); any other failure
  is reported, so the caller counts it as an attempt. A reset (``ClientOSError``) before the
  headers are complete counts as nothing read.

Failures are :class:`TransportError` subclasses: :class:`ConnectFailed` (``refused``, ``dns``,
``timed_out``, ``tls`` flags; ``proxy`` names the proxy when it is the proxy that failed;
``status`` is the proxy's answer to CONNECT, e.g. 407), :class:`ReadTimeout`,
:class:`ProtocolFailure` and :class:`ResponseTooLarge`. ``no_answer`` marks a failure before
any byte of an answer (the circuit breaker counts those).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import netrc
import os
import ssl
import urllib.request
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

# aiohttp's documented switch to its pure-Python parser (read once, when aiohttp is imported):
# the lenient parser of the module docstring. Checked below (_lenient_parser_in_use).
os.environ.setdefault("AIOHTTP_NO_EXTENSIONS", "1")

import aiohttp  # noqa: E402
import aiohttp.http  # noqa: E402
import aiohttp.http_parser  # noqa: E402
from yarl import URL  # noqa: E402

from cresowlve_core.failures import CresowlveError, InputError  # noqa: E402
from cresowlve_core.llm.types import CONCURRENCY, LLMConfigError  # noqa: E402

log = logging.getLogger(__name__)
_WARNED: set[str] = set()

#: the largest answer accepted, after decompression
MAX_BODY_BYTES = 64 * 1024 * 1024
#: environment variables naming extra CA certificates (files or directories), in this order
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")
#: statuses whose answer has no body (RFC 9110 §6.4.1)
EMPTY_BODY_STATUSES = frozenset({204, 304, *range(100, 200)})


class TransportError(CresowlveError):
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
    """What :class:`~cresowlve_core.llm.client.LLMClient` needs from HTTP (one per event loop). A
    transport with start-up work of its own (:class:`~cresowlve_core.llm.http_workers.WorkerTransport`)
    may also have ``async start()``, which the client awaits before each attempt's deadline runs."""

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


# --------------------------------------------------------------------------- aiohttp's parts


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message)


def _lenient_parser_in_use() -> bool:
    """Whether aiohttp parses answers with its pure-Python parser (see the module docstring)."""
    parser = getattr(aiohttp.http, "HttpResponseParser", None)
    return parser is not None and parser is getattr(aiohttp.http_parser, "HttpResponseParserPy", None)


class _Exchange:
    """What one request learnt on its way (filled by :meth:`_Connector.connect` and :meth:`AiohttpTransport._exchange`):
    ``reused`` (None: no connection was had, e.g. the proxy's CONNECT failed), ``answered`` (the
    status line and headers arrived)."""

    __slots__ = ("reused", "answered")

    def __init__(self) -> None:
        self.reused: bool | None = None
        self.answered = False


#: the exchange of the request the current task is sending (set by :meth:`AiohttpTransport.post`,
#: read by :meth:`_Connector.connect`, which runs in the same task)
_CURRENT: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar("cresowlve_exchange", default=None)


class _Connector(aiohttp.TCPConnector):
    """``TCPConnector`` whose :meth:`connect` (aiohttp's documented hook) never hands out a pooled
    connection that already holds bytes nobody asked for (an answer a desynchronised server sent
    while it idled): that connection is closed and another one taken. It also tells the request's
    :class:`_Exchange` whether the connection it hands out was used before (a protocol it handed
    out already), as aiohttp's trace hooks ``on_connection_reuseconn``/``on_connection_create_end``
    would, without the cost of aiohttp's tracing on every request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handed: weakref.WeakSet[Any] = weakref.WeakSet()

    async def connect(self, *args: Any, **kwargs: Any) -> Any:
        for _ in range(self.limit + 1):
            conn = await super().connect(*args, **kwargs)
            unasked = getattr(conn.protocol, "should_close", None)
            if unasked is None:
                _warn_once("should_close", f"aiohttp {aiohttp.__version__}: its connection protocol has no "
                           "should_close, so an answer a desynchronised server sends unasked on a kept-alive "
                           "connection cannot be caught before the next request")
                break
            if not unasked:
                break
            conn.close()
        exchange = _CURRENT.get()
        if exchange is not None and conn.protocol is not None:
            exchange.reused = conn.protocol in self._handed
            self._handed.add(conn.protocol)
        return conn


# --------------------------------------------------------------------------- the transport


def _origin_of(base_url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.scheme, parts.hostname, port, f"{parts.scheme}://{host}:{port}"


class AiohttpTransport:
    """Keep-alive HTTP/1.1 to one origin over aiohttp (see the module docstring). Create and use
    it inside one event loop; the session is opened at the first request."""

    def __init__(self, base_url: str, *, concurrency: int = CONCURRENCY, connect_timeout: float = 10.0,
                 read_timeout: float = 120.0, first_byte_timeout: float | None = None) -> None:
        self.scheme, self.host, self.port, self.origin = _origin_of(base_url)
        self.host_port = self.origin.split("://", 1)[1]
        self.concurrency = concurrency
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.first_byte_timeout = first_byte_timeout if first_byte_timeout and first_byte_timeout < read_timeout else None
        self._tls = ssl_context() if self.scheme == "https" else None
        self._session: aiohttp.ClientSession | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._urls: dict[str, URL] = {}
        self._tls_probed = False
        # the environment's proxy, read once here rather than at every request as trust_env=True would
        self._proxy_url, self._proxy_auth = env_proxy(self.scheme, self.host)
        self.proxy: str | None = str(self._proxy_url.with_user(None)) if self._proxy_url else None

    def _open(self) -> aiohttp.ClientSession:
        if not _lenient_parser_in_use():
            _warn_once("parser", "aiohttp was imported before cresowlve_core.llm.http (or AIOHTTP_NO_EXTENSIONS is "
                       "set empty), so it parses answers with its C parser: a repeated identical Content-Length "
                       "is refused")
        connector = _Connector(limit=self.concurrency, ssl=self._tls if self._tls is not None else True)
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout, sock_connect=self.connect_timeout,
                                        sock_read=self.read_timeout)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False,
                                              auto_decompress=False, headers={"Accept-Encoding": "gzip, deflate"},
                                              skip_auto_headers=("User-Agent",))
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def abandon(self) -> None:
        """Forget the session of an event loop that has finished (no I/O is possible there any
        more). Its close, which then has nothing to wait for, runs on the current loop, so its
        sockets close when collected without aiohttp's "unclosed" warnings."""
        session, self._session = self._session, None
        if session is not None:
            task = asyncio.get_running_loop().create_task(session.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
        url = self._urls.get(target)
        if url is None:
            url = self._urls[target] = URL(self.origin + target, encoded=True)
        session = self._session or self._open()
        for fresh_retry in (False, True):
            exchange = _Exchange()
            _CURRENT.set(exchange)  # this task's; read by _Connector.connect
            try:
                return await self._exchange(session, url, headers, body, exchange)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if exchange.reused and not exchange.answered and not fresh_retry and _nothing_read(exc):
                    continue  # closed by the server while idle: it never saw this request
                raise await self._translate(exc, exchange) from None
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise await self._translate(exc, exchange) from None
        raise AssertionError("unreachable")

    async def _exchange(self, session: aiohttp.ClientSession, url: URL, headers: dict[str, str], body: bytes,
                        exchange: _Exchange) -> Response:
        send = session.post(url, data=body, headers=headers, allow_redirects=False, proxy=self._proxy_url,
                            proxy_auth=self._proxy_auth)
        if self.first_byte_timeout is None:
            resp = await send
        else:
            try:
                async with asyncio.timeout(self.first_byte_timeout):
                    resp = await send
            except TimeoutError:
                raise ReadTimeout(f"no answer from {self.host_port} within {self.first_byte_timeout:g} s",
                                  no_answer=True) from None
        exchange.answered = True
        try:
            lengths = set(resp.headers.getall("Content-Length", ()))
            if len(lengths) > 1:
                raise ProtocolFailure(f"not a valid HTTP answer from {self.host_port} (differing Content-Length "
                                      f"values {sorted(lengths)})")
            if (resp.content_length is not None and resp.content_length <= MAX_BODY_BYTES
                    and "Content-Encoding" not in resp.headers) or resp.status in EMPTY_BODY_STATUSES:
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
        """The body, decompressed here as it streams in (``zlib`` with an output limit), up to
        :data:`MAX_BODY_BYTES`."""
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
        inflate = None if encoding == "identity" else _Inflater(encoding, self.host_port)
        chunks: list[bytes] = []
        size = 0
        async for data in resp.content.iter_any():
            chunk = data if inflate is None else inflate.feed(data, MAX_BODY_BYTES - size + 1)
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ResponseTooLarge(f"the answer from {self.host_port} exceeds {MAX_BODY_BYTES // 2**20} MB "
                                       f"(after decompression, {encoding}); cut off there")
            chunks.append(chunk)
        if inflate is not None:
            inflate.finish()
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

    async def _translate(self, exc: BaseException, exchange: _Exchange) -> TransportError:
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
        no_answer = not exchange.answered and _nothing_read(exc)
        if isinstance(exc, (aiohttp.SocketTimeoutError, TimeoutError)):
            return ReadTimeout(f"no {'answer' if no_answer else 'complete answer'} from {where} within "
                               f"{self.read_timeout:g} s", no_answer=no_answer)
        garbled = isinstance(exc, aiohttp.ClientResponseError) and exc.status == 400  # not HTTP at all
        if exchange.reused is False and (no_answer or garbled) and await self._speaks_tls():
            return ConnectFailed(f"{where} speaks TLS but the base URL says http://: use https://", tls=True)
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            if self.proxy and self.scheme == "https" and exchange.reused is None:
                return ProtocolFailure(f"the proxy {self.proxy} closed the tunnel to {where} without an answer",
                                       no_answer=True)
            return ProtocolFailure(f"{where}{self._via()} closed the connection "
                                   f"{'without an answer' if no_answer else 'in the middle of the answer'}",
                                   no_answer=no_answer)
        if isinstance(exc, aiohttp.ClientOSError):
            return ProtocolFailure(f"the connection to {where}{self._via()} failed "
                                   f"{'before' if no_answer else 'during'} the answer ({exc.strerror or exc})",
                                   no_answer=no_answer)
        if isinstance(exc, aiohttp.ClientResponseError) and exc.status == 400 and exc.message:
            first = str(exc.message).splitlines()[0][:120]
            return ProtocolFailure(f"not a valid HTTP answer from {where} ({first})")
        return ProtocolFailure(f"broken answer from {where} ({type(exc).__name__}: {str(exc)[:200]})")


class _Inflater:
    """gzip (every member of a multi-member stream) or deflate (zlib-wrapped or raw), inflated
    chunk by chunk with an output limit, so a small body never inflates past the limit in memory."""

    def __init__(self, encoding: str, where: str) -> None:
        if encoding not in ("gzip", "x-gzip", "deflate"):
            raise ProtocolFailure(f"{where} answered in Content-Encoding {encoding[:40]!r}, which was not asked for")
        self.gzip = encoding != "deflate"
        self.where = where
        self.wbits = 16 + zlib.MAX_WBITS
        self.engine: Any = None
        self.fed = False  # the current stream has input that did not end yet

    def feed(self, data: bytes, room: int) -> bytes:
        """Inflate ``data``: at most ``room`` bytes (``room`` bytes out means the limit is reached)."""
        out = bytearray()
        try:
            while data and len(out) < room:
                if self.engine is None:
                    if not self.gzip:  # RFC 9110 says zlib-wrapped; some servers send raw deflate
                        self.wbits = zlib.MAX_WBITS if data[0] & 0x0F == 8 else -zlib.MAX_WBITS
                    self.engine = zlib.decompressobj(self.wbits)
                out += self.engine.decompress(data, room - len(out))
                self.fed = True
                if self.engine.eof:
                    data, self.engine, self.fed = self.engine.unused_data, None, False
                else:
                    data = self.engine.unconsumed_tail
        except zlib.error as exc:
            raise ProtocolFailure(f"the {'gzip' if self.gzip else 'deflate'} body from {self.where} is "
                                  f"corrupt ({exc})") from None
        return bytes(out)

    def finish(self) -> None:
        """The body ended: a compressed stream cut short is an error."""
        if self.fed:
            raise ProtocolFailure(f"the {'gzip' if self.gzip else 'deflate'} body from {self.where} is cut short")


def _nothing_read(exc: BaseException) -> bool:
    """Whether a failure before the headers were complete left no part of an answer: aiohttp's
    ``ServerDisconnectedError.message`` is the partly parsed answer if there is one (else its
    text, "Server disconnected"). A reset connection (``ClientOSError``) tells nothing, and counts
    as nothing read."""
    return not isinstance(exc, aiohttp.ServerDisconnectedError) or isinstance(exc.message, str | None)


def env_proxy(scheme: str, host: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy for ``scheme://host`` from ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` (the standard
    library's reading of them, as aiohttp's ``trust_env``) and its credentials: those in the proxy URL, else ``~/.netrc``'s."""
    proxies = urllib.request.getproxies()
    if scheme not in proxies or urllib.request.proxy_bypass(host):
        return None, None
    url = URL(proxies[scheme])
    if url.scheme not in ("http", "https"):
        return None, None
    if url.user is not None:
        return url.with_user(None), aiohttp.BasicAuth.from_url(url)
    try:
        found = netrc.netrc().authenticators(url.host or "")
    except (OSError, netrc.NetrcParseError):
        found = None
    return url, aiohttp.BasicAuth(found[0] or "", found[2] or "") if found else None


def _ssl_reason(exc: BaseException) -> str:
    inner = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None) or exc
    return str(getattr(inner, "verify_message", None) or getattr(inner, "reason", None) or inner)[:200]


def open_transport(base_url: str, **options: Any) -> Transport:
    """The default :data:`TransportFactory`: an :class:`AiohttpTransport`."""
    return AiohttpTransport(base_url, **options)
