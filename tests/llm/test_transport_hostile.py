"""The transport and the client against hostile local servers:
keep-alive desync, duplicate Content-Length, 204 and bare-LF answers, proxies (407, a dropped
CONNECT, a dead proxy, a CONNECT tunnel), an RST after partial headers, http:// to a TLS port,
a gzip bomb, private CAs through REQUESTS_CA_BUNDLE / SSL_CERT_FILE / SSL_CERT_DIR, and an
endpoint that accepts connections but never answers."""

from __future__ import annotations

import asyncio
import gzip
import resource
import time
from pathlib import Path
from typing import Any

import pytest
from hostile import CA, Conn, HostileServer, chat_body, connect_proxy, echo_handler, http_response, make_ca, prompt_of

import cresowlve_core.llm.client as client_module
from cresowlve_core.llm import http
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.http import MAX_BODY_BYTES, AiohttpTransport, Response, ResponseTooLarge
from cresowlve_core.llm.http_workers import worker_transport_factory
from cresowlve_core.llm.types import Endpoint, GenParams, LLMEndpointDown, LLMError, LLMFatalError
from cresowlve_core.runtime import ClientOptions, RunDir, map_with_resume, open_client

MODEL = "test-model"
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")
CA_VARS = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROXY_VARS + CA_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True, params=["in-loop", "http-workers"])
def transport_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: HTTP on the run's loop, and in a worker process (``--http-workers 1``),
    which must behave the same in every case."""
    if request.param == "http-workers":
        factory = worker_transport_factory(1)
        monkeypatch.setattr(http, "open_transport", factory)
        monkeypatch.setattr(client_module, "open_transport", factory)
    return str(request.param)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca(tmp_path_factory.mktemp("ca"))


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def client(url: str, **kw: Any) -> LLMClient:
    return LLMClient(Endpoint(url, MODEL), backoff_base_s=0.01, **kw)


async def ask_all(cl: LLMClient, prompts: list[str]) -> list[str]:
    async with cl:
        return list(await asyncio.gather(*(ask(cl, p) for p in prompts)))


async def ask(cl: LLMClient, prompt: str) -> str:
    return (await cl.complete(user(prompt), GenParams(), prompt_version="v")).text


def post_once(url: str, **kw: Any) -> Any:
    return post_timed(url, **kw)[0]


def post_timed(url: str, **kw: Any) -> tuple[Any, float]:
    """One POST through the transport: (its response, seconds the POST took; a worker process's
    start-up, under ``http-workers``, is left out, as the client leaves it out of a deadline)."""
    async def go() -> tuple[Any, float]:
        t = http.open_transport(url, **kw)
        try:
            if (start := getattr(t, "start", None)) is not None:
                await start()
            began = time.monotonic()
            resp = await t.post("/v1/chat/completions", {"Content-Type": "application/json"}, b'{"a":1}')
            return resp, time.monotonic() - began
        finally:
            await t.aclose()

    return asyncio.run(go())


# ------------------------------------------------------------------ 8: keep-alive desync


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_an_extra_response_on_a_kept_alive_connection_is_never_handed_to_the_next_request(delay: float) -> None:
    # the server answers the first request twice (the second copy now, or 50 ms later while the
    # connection idles in the pool); before, that copy became the next item's answer, and so on
    async def handle(conn: Conn) -> None:
        while (req := await conn.request()) is not None:
            p = prompt_of(req)
            await conn.write(http_response(chat_body(f"answer to {p}")))
            if conn.server.requests.index(req) == 0:
                await asyncio.sleep(delay)
                await conn.write(http_response(chat_body(f"answer to {p} (again)")))

    prompts = [f"item {i}" for i in range(6)]

    async def one_by_one(cl: LLMClient) -> list[str]:
        out = []
        async with cl:
            for p in prompts:
                out.append(await ask(cl, p))
                await asyncio.sleep(0.1)  # the extra answer arrives while the connection is idle
        return out

    with HostileServer(handle) as srv:
        answers = asyncio.run(one_by_one(client(srv.url, concurrency=1)))
    misattributed = [(p, a) for p, a in zip(prompts, answers) if a != f"answer to {p}"]
    assert misattributed == [] and len(answers) == 6


# ------------------------------------------------------------------ 11: HTTP strictness


def test_two_identical_content_lengths_are_accepted_and_differing_ones_refused() -> None:
    body = chat_body("fine")

    async def twice(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nContent-Length: {len(body)}\r\n\r\n"
                             .encode() + body)

    with HostileServer(twice) as srv:
        assert asyncio.run(ask_all(client(srv.url), ["a"])) == ["fine"]
        assert len(srv.requests) == 1

    async def differ(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nContent-Length: 3\r\n\r\n".encode() + body)

    with HostileServer(differ) as srv, pytest.raises(LLMError, match="gave up after 2 attempts"):
        asyncio.run(ask_all(client(srv.url, max_attempts=2), ["a"]))


@pytest.mark.parametrize("answer", [b"HTTP/1.1 204 No Content\r\n\r\n",
                                    b"HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: 2\n\n{}"],
                         ids=["204", "bare-LF"])
def test_a_204_and_bare_lf_headers_are_answered_at_once(answer: bytes) -> None:
    async def handle(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.write(answer)

    with HostileServer(handle) as srv:
        resp, elapsed = post_timed(srv.url, read_timeout=30)
    assert resp.status in (200, 204) and elapsed < 2, elapsed  # before: the full read timeout


def test_an_rst_after_partial_headers_counts_as_an_attempt() -> None:
    async def handle(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.write(b"HTTP/1.1 200 OK\r\nContent-Ty")
            await asyncio.sleep(0.05)
            conn.reset()

    with HostileServer(handle) as srv:
        cl = client(srv.url, max_attempts=3)
        with pytest.raises(LLMError, match="gave up after 3 attempts"):
            asyncio.run(ask_all(cl, ["a"]))
        assert len(srv.requests) == 3 and cl.requests_sent == 3  # every send is a counted attempt


def test_http_spoken_to_a_tls_port_stops_at_once_with_a_hint(ca: CA) -> None:
    with HostileServer(echo_handler(), tls=ca.server_context()) as srv:
        cl = client(srv.url.replace("https://", "http://"))
        start = time.monotonic()
        with pytest.raises(LLMFatalError, match="speaks TLS.*https://"):
            asyncio.run(ask_all(cl, ["a"]))
        assert time.monotonic() - start < 5
        assert cl.requests_sent == 1  # before: 6 attempts per item


def test_a_gzip_bomb_is_cut_off_at_64_mb_as_one_items_error() -> None:
    # 1,024 gzip members of 1 MB of zeros each (a valid gzip stream): ~1 MB that inflates to 1 GB
    bomb = gzip.compress(b"\0" * (1 << 20), compresslevel=9) * 1024
    assert len(bomb) < 1.1 * (1 << 20)

    async def handle(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(bomb) + bomb)

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, the peak so far
    with HostileServer(handle) as srv:
        with pytest.raises(ResponseTooLarge, match="64 MB"):
            post_once(srv.url)
        cl = client(srv.url)
        with pytest.raises(LLMError, match="exceeds 64 MB"):
            asyncio.run(ask_all(cl, ["a"]))
        assert cl.requests_sent == 1  # an error of this item: not retried
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 4 * MAX_BODY_BYTES / 2**20, grown_mb  # before: 2.4 GB


# ------------------------------------------------------------------ 9: private CAs


@pytest.mark.parametrize("var", CA_VARS)
def test_a_private_ca_is_trusted_through_each_variable(ca: CA, var: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with HostileServer(echo_handler(), tls=ca.server_context(), host_name="localhost") as srv:
        with pytest.raises(LLMFatalError, match="TLS"):  # the system store does not know the CA
            asyncio.run(ask_all(client(srv.url), ["a"]))
        monkeypatch.setenv(var, str(ca.ca_dir if var == "SSL_CERT_DIR" else ca.ca_file))
        assert asyncio.run(ask_all(client(srv.url), ["a"])) == ["answer to a"]


def test_a_ca_variable_naming_a_missing_file_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "nowhere.pem"))
    from cresowlve_core.llm.types import LLMConfigError

    with pytest.raises(LLMConfigError, match=r"\$REQUESTS_CA_BUNDLE names .*nowhere.pem, which does not exist"):
        AiohttpTransport("https://models.example/v1")


# ------------------------------------------------------------------ 9: proxies


def test_an_https_endpoint_through_a_connect_tunnel(ca: CA, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    with HostileServer(echo_handler(), tls=ca.server_context(), host_name="localhost") as api, \
            HostileServer(connect_proxy(seen=seen)) as proxy:
        monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        assert asyncio.run(ask_all(client(api.url, concurrency=2), ["a", "b", "c"])) == \
            ["answer to a", "answer to b", "answer to c"]
    assert seen and all(line == f"CONNECT localhost:{api.port} HTTP/1.1" for line in seen)
    assert len(api.requests) == 3  # the requests went through the tunnel, encrypted


def test_a_proxy_that_drops_connect_is_retried(ca: CA, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    with HostileServer(echo_handler(), tls=ca.server_context(), host_name="localhost") as api, \
            HostileServer(connect_proxy(drop_first=2, seen=seen)) as proxy:
        monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        cl = client(api.url, concurrency=1)
        assert asyncio.run(ask_all(cl, ["a"])) == ["answer to a"]  # before: an error without a retry
    assert len(seen) == 3 and cl.requests_sent == 3


def test_a_407_from_the_proxy_stops_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with HostileServer(connect_proxy(status=407)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        cl = client("https://models.example/v1")
        res = asyncio.run(run_units(cl, RunDir(tmp_path / "run"), [f"u{i}" for i in range(20)], concurrency=4))
        assert isinstance(res.stop_error, LLMFatalError) and "407" in res.stopped and "proxy" in res.stopped
        assert proxy.connections <= 4  # before: 6 attempts per item


def test_a_dead_proxy_is_blamed_on_the_proxy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with HostileServer(echo_handler()) as gone:
        port = gone.port
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    res = asyncio.run(run_units(client("https://models.example/v1"), RunDir(tmp_path / "run"), ["a", "b"]))
    assert isinstance(res.stop_error, LLMEndpointDown)
    msg = str(res.stop_error)
    assert f"the proxy http://127.0.0.1:{port}" in msg and "check the proxy settings" in msg
    assert "check the base URL" not in msg


def test_a_plain_http_proxy_answering_407_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    async def handle(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")

    with HostileServer(handle) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        cl = client("http://models.internal:8000/v1")
        with pytest.raises(LLMFatalError, match="407"):
            asyncio.run(ask_all(cl, ["a"]))
        assert cl.requests_sent == 1


# ------------------------------------------------------------------ 4: accepted, then nothing


async def run_units(cl: Any, run: RunDir, units: list[str], concurrency: int = 4) -> Any:
    async def call(u: str, prev: Any) -> dict[str, Any]:
        return {"key": u, "status": "ok", "text": await ask(cl, u)}

    async with cl:
        return await map_with_resume(run, "responses.jsonl", units, lambda u: u, call,
                                     concurrency=concurrency, progress=False)


def test_accept_then_close_declares_the_endpoint_down_within_30_s(tmp_path: Path) -> None:
    async def slam(conn: Conn) -> None:
        conn.close()

    with HostileServer(slam) as srv:
        cl = open_client(Endpoint(srv.url, MODEL), ClientOptions(cache=False, concurrency=8))  # default backoff
        start = time.monotonic()
        res = asyncio.run(run_units(cl, RunDir(tmp_path / "run"), [f"u{i}" for i in range(40)], concurrency=8))
        elapsed = time.monotonic() - start
    assert isinstance(res.stop_error, LLMEndpointDown) and "looks down" in res.stopped
    assert "without an answer" in res.stopped or "before the answer" in res.stopped
    assert elapsed < 30, elapsed  # before: 69 s
    assert srv.connections < 80, srv.connections  # before: 240


def test_a_burst_of_dropped_connections_does_not_stop_the_run(tmp_path: Path) -> None:
    # a restart that drops every call in flight at once is a blip, not a dead endpoint
    async def handle(conn: Conn) -> None:
        if conn.n <= 8:
            conn.close()
            return
        await echo_handler()(conn)

    with HostileServer(handle) as srv:
        cl = open_client(Endpoint(srv.url, MODEL), ClientOptions(cache=False, concurrency=8, backoff_base_s=0.05))
        res = asyncio.run(run_units(cl, RunDir(tmp_path / "run"), [f"u{i}" for i in range(16)], concurrency=8))
    assert res.stopped is None and res.n_done == 16


def test_no_answer_within_the_first_byte_time_declares_the_endpoint_down(tmp_path: Path) -> None:
    async def silent(conn: Conn) -> None:
        while await conn.request() is not None:
            await asyncio.sleep(60)

    with HostileServer(silent) as srv:
        cl = client(srv.url, first_byte_timeout_s=0.3, down_window_s=2.0, concurrency=4)
        start = time.monotonic()
        res = asyncio.run(run_units(cl, RunDir(tmp_path / "run"), [f"u{i}" for i in range(12)], concurrency=4))
        elapsed = time.monotonic() - start
    assert isinstance(res.stop_error, LLMEndpointDown) and "no answer" in res.stopped
    assert elapsed < 10, elapsed  # before: timeout_s (300 s) per attempt, never declared down


# ------------------------------------------------------------------ 7: the seam and the pool size


def test_a_test_double_plugs_in_through_the_transport_seam() -> None:
    made: list[dict[str, Any]] = []

    class Canned:
        async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
            return Response(200, {"content-type": "application/json"}, chat_body(f"canned for {target}"))

        async def aclose(self) -> None:
            made.append({"closed": True})

    def factory(base_url: str, **options: Any) -> Canned:
        made.append({"base_url": base_url, **options})
        return Canned()

    cl = client("http://nowhere.invalid/v1", transport_factory=factory, concurrency=3)
    assert asyncio.run(ask_all(cl, ["a"])) == ["canned for /v1/chat/completions"]
    assert made[0]["base_url"] == "http://nowhere.invalid/v1" and made[0]["concurrency"] == 3
    assert made[-1] == {"closed": True}


def test_more_than_100_calls_really_run_in_flight() -> None:
    # aiohttp's default connector limit (100) would hold the rest back
    in_flight = {"now": 0, "max": 0}

    async def slow(conn: Conn) -> None:
        while (req := await conn.request()) is not None:
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
            for _ in range(200):  # every answer waits until all 150 are in flight (10 s at most)
                if in_flight["max"] == 150:
                    break
                await asyncio.sleep(0.05)
            in_flight["now"] -= 1
            await conn.write(http_response(chat_body(prompt_of(req))))

    with HostileServer(slow) as srv:
        prompts = [f"p{i}" for i in range(150)]
        assert asyncio.run(ask_all(client(srv.url, concurrency=150), prompts)) == prompts
    assert in_flight["max"] == 150


def test_a_407_from_the_proxy_makes_cresowlve_eval_exit_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import stage_runs

    from cresowlve_core.cli import main

    items = stage_runs.write_items(tmp_path / "items.jsonl", stage_runs.eval_items())
    with HostileServer(connect_proxy(status=407)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        code = main(["eval", "--model", "m", "--base-url", "https://models.example/v1", "--items", str(items),
                     "--lang", "en", "--run-dir", str(tmp_path / "run"), "--concurrency", "2", "--no-cache"])
        assert proxy.connections <= 2  # one attempt per call in flight, then the run stops
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 3 and "407" in last, last
