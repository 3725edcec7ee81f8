"""Throughput of ``cresowlve eval`` end to end, the client's CPU per call, and other HTTP clients.

    .venv/bin/python bench/throughput.py                 # parts 1-4 (about 5 minutes; the first run
                                                         # also installs lm-eval and pyreqwest)
    .venv/bin/python bench/throughput.py --part eval     # part 1 only (also: client, compare, budget)

The endpoint is a small asyncio HTTP/1.1 server in a separate process (``--serve LATENCY``
runs it): it answers every chat request after ``LATENCY`` seconds and records when each request
arrived. Rates are measured *at the server*, over the steady part of the run (arrivals number
C to N-C, so the ramp-up, the start-up of the command and the last wave are left out); the ideal
is C/L.

Part 1, ``cresowlve eval`` end to end (a separate process, ``--no-cache``, N distinct items):
C=64 at 200 ms (target >= 0.95 of ideal), C=256 at 1 s (target >= 0.9; closer to real provider
latencies), and C=256 at 200 ms (target >= 0.9: 1,280 requests/s, a local vLLM's rate; on 2 cores
the client's CPU and the endpoint's share them). At that rate one event loop's CPU is the limit, so
the target row runs with ``--http-workers 1`` (the HTTP exchanges in a worker process, the README's
advice for a fast local server); the same run on the run's own loop is printed above it, without a
target, for comparison.

Part 2, ``LLMClient`` in this process at C=64 against 200 ms: the ratio and the client's CPU per
call (``time.process_time`` over the timed calls), and a cached re-run of 2,061 distinct prompts
(targets: < 5 s, 0 requests).

Part 1 also prints the eval process's CPU per request (user + system, from the kernel's
accounting of the child; start-up included).

Part 3, the same requests from other clients at C=64 against 200 ms, same body, same server, in
the same minutes: ``cresowlve eval --no-cache`` and lm-evaluation-harness (``lm-eval==0.4.13``,
``local-chat-completions`` with ``num_concurrent=64``, a generate_until task over a local JSON
Lines file) each run at 640 and 6,400 items, so that the CPU per request is given with start-up
(the 6,400 run's CPU / requests) and net of it (the difference of the two runs' CPU over the
difference of their requests); target: cresowlve's net <= 0.35 ms (exit 1 when missed). lm-eval is
installed on first use into a throwaway venv under ``$CRESOWLVE_BENCH_VENVS`` (default
``<temp dir>/cresowlve-bench``) that sees the project venv's packages through a ``.pth`` file and
pip-installs the rest into itself: the project's environment is never changed. When it cannot be
installed the line says why and the part goes on. Between the two, ``cresowlve eval`` with no HTTP
at all (``--in-memory``: this script runs the command in its own process with a transport that
answers from memory after the latency), measured the same way: the CPU of everything but HTTP (the
client, scoring, the records), a floor no HTTP client can go under; and ``cresowlve eval`` on a
minimal pyreqwest transport (``--on-pyreqwest``, in pyreqwest's throwaway venv, bench only: none of
the default transport's guarantees), what the whole run would cost on the fastest maintained client
measured here. Then, in this process, the
same calls with no framework: keep-alive connections on ``asyncio.Protocol`` (the floor of any
Python client), aiohttp's ``ClientSession``, httpx (``AsyncClient``) and the openai SDK
(``AsyncOpenAI``), and last pyreqwest (``pyreqwest==0.15.1``, a maintained client written in Rust,
in its own throwaway venv as lm-eval is, run as a child process): ratio and CPU per call over the
timed calls.

Part 4, the budget of a request with no HTTP (C=64 at 50 ms, 1,000 and 7,000 calls, net of
start-up): each step of ``cresowlve eval`` measured on its own in this process, on the run's event
loop with the collector tuned as a run tunes it: waiting itself (``asyncio.sleep``), ``LLMClient.complete``
through the in-memory transport, building one answer's record, ``map_with_resume`` writing and
fsyncing fixed records, loading the items file; their sum, and the whole in-memory run beside it
(the rest: prompts, progress, the summary, the collector). It shows which steps a target for the
run's own CPU would have to cut.

The machine is shared: the load average is printed with every part; rerun when it is high.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

N_CACHED = 2061
#: (concurrency, latency s, items, target ratio or None, --http-workers)
EVAL_RUNS = ((64, 0.2, 3200, 0.95, 0), (256, 1.0, 3072, 0.9, 0), (256, 0.2, 6400, None, 0), (256, 0.2, 6400, 0.9, 1))
BODY = json.dumps({"id": "x", "object": "chat.completion", "model": "bench-model",
                   "choices": [{"index": 0, "message": {"role": "assistant",
                                                        "content": "Thinking it over.\n<Answer>Venus</Answer>"},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}}).encode()


# --------------------------------------------------------------------------- the endpoint


#: a judge's request: its prompt names the verdict line's nonce (``VERDICT-<nonce>:``)
NONCE = re.compile(rb"VERDICT-([A-Za-z0-9]+):")


def http_answer(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body


def verdict_answer(nonce: bytes) -> bytes:
    """The judge's answer to a request naming ``nonce``: :data:`BODY` with a verdict line for it."""
    return http_answer(BODY.replace(b"<Answer>Venus</Answer>", b"VERDICT-" + nonce + b": CORRECT"))


async def serve(latency: float) -> None:
    """The asyncio endpoint: POST -> the chat answer (a judge's verdict to a judge's request) after
    ``latency``; GET /_stats -> arrival times."""
    arrivals: list[float] = []
    answer = http_answer(BODY)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                i = head.lower().find(b"content-length:")
                n = int(head[i + 15:head.index(b"\r\n", i)]) if i >= 0 else 0
                body = await reader.readexactly(n) if n else b""
                if head.startswith(b"GET /_stats"):
                    stats = json.dumps(arrivals).encode()
                    arrivals.clear()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(stats) + stats)
                    continue
                arrivals.append(time.monotonic())
                await asyncio.sleep(latency)
                judged = NONCE.search(body)
                writer.write(verdict_answer(judged.group(1)) if judged else answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(f"READY http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    async with server:
        await server.serve_forever()


@contextmanager
def endpoint(latency: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("READY "):
            raise RuntimeError(f"the endpoint did not start: {line!r}")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


def arrivals(base_url: str) -> list[float]:
    """The arrival times the endpoint recorded since the last call (and forget them)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stats") as r:
        return sorted(json.load(r))


def steady_rate(times: list[float], c: int) -> float:
    """Requests per second between arrival C and arrival N-C."""
    lo, hi = c, len(times) - c - 1
    if hi - lo < c:
        raise ValueError(f"too few requests ({len(times)}) for concurrency {c}")
    return (hi - lo) / (times[hi] - times[lo])


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- part 1: cresowlve eval


def write_items(path: Path, n: int) -> Path:
    from cresowlve_core.items import Item, ItemView

    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps(Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle {i}: which planet?",
                                                                       answer="Venus")).model_dump()) + "\n")
    return path


def bench_env(tmp: str) -> dict[str, str]:
    """The environment of a measured command: its cache, data and reports in ``tmp``."""
    return {**os.environ, "CRESOWLVE_CACHE_DIR": f"{tmp}/cache", "CRESOWLVE_DATA_DIR": f"{tmp}/data",
            "CRESOWLVE_REPORTS_DIR": f"{tmp}/reports", "PYTHONPATH": str(REPO)}


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_command(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """(the finished command, its wall s, its process CPU s: user + system, from the kernel's accounting)."""
    c0, t0 = children_cpu(), time.monotonic()
    rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return rc, time.monotonic() - t0, children_cpu() - c0


def run_eval(tmp: str, c: int, latency: float, n: int, http_workers: int = 0,
             cresowlve: tuple[str, ...] = (sys.executable, "-m", "cresowlve_core.cli"),
             ) -> tuple[subprocess.CompletedProcess[str], list[float], float, float]:
    """``cresowlve eval --no-cache`` of ``n`` distinct items: (the command, arrival times, wall s, CPU s
    of the command and its worker processes). ``cresowlve``: how the command is started."""
    items = write_items(Path(tmp) / f"items-{c}-{n}.jsonl", n)
    with endpoint(latency) as url:
        rc, wall, cpu = timed_command(
            [*cresowlve, "eval", "--items", str(items), "--model", "bench-model", "--base-url", url, "--run-dir",
             f"{tmp}/run-{len(cresowlve)}-{c}-{latency}-{n}-{http_workers}", "--concurrency", str(c),
             "--http-workers", str(http_workers), "--max-tokens", "32", "--no-cache"], bench_env(tmp), REPO)
        times = arrivals(url)
    return rc, times, wall, cpu


class InMemoryTransport:
    """A :class:`~cresowlve_core.llm.http.Transport` with no HTTP: every POST is answered with
    :data:`BODY` after the latency (``--in-memory``), so a run's CPU is everything but HTTP."""

    latency = 0.2

    def __init__(self, base_url: str, **options: Any) -> None:
        from cresowlve_core.llm.http import Response

        self.answer = Response(200, {"content-type": "application/json"}, BODY)

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Any:
        await asyncio.sleep(self.latency)
        return self.answer

    async def aclose(self) -> None:
        pass


class PyreqwestTransport:
    """A minimal :class:`~cresowlve_core.llm.http.Transport` on pyreqwest (``--on-pyreqwest``, in the
    throwaway venv of :data:`PYREQWEST`): what ``cresowlve eval`` would cost with the fastest
    maintained client measured here. Bench only: it has none of the default transport's guarantees
    (proxies, CA variables, the body cap, the desync guard, the error classes)."""

    def __init__(self, base_url: str, *, concurrency: int = 8, **options: Any) -> None:
        self.origin = "/".join(base_url.split("/", 3)[:3])
        self.concurrency = concurrency
        self.client: Any = None

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Any:
        from pyreqwest.client import ClientBuilder

        from cresowlve_core.llm.http import Response

        if self.client is None:
            builder = ClientBuilder().max_connections(self.concurrency).follow_redirects(False)
            self.client = await builder.build().__aenter__()
        request = self.client.post(self.origin + target)
        for name, value in headers.items():
            request = request.header(name, value)
        answer = await request.body_bytes(body).build().send()
        content = bytes(await answer.bytes())
        return Response(answer.status, {k.lower(): v for k, v in answer.headers.items()}, content)

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.close()


def eval_with(transport: Any, argv: list[str]) -> int:
    """``cresowlve <argv>`` in this process, its model answering through ``transport`` (a factory)."""
    from cresowlve_core import cli
    from cresowlve_core.llm import http

    http.open_transport = transport  # what worker_transport_factory(0) returns
    try:
        return cli.main(argv) or 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


def run_eval_in_memory(tmp: str, c: int, latency: float, n: int) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """``cresowlve eval --no-cache`` of ``n`` items with no HTTP (:func:`eval_with` :class:`InMemoryTransport`): (the
    command, wall s, CPU s)."""
    items = write_items(Path(tmp) / f"items-mem-{c}-{n}.jsonl", n)
    return timed_command(
        [sys.executable, __file__, "--in-memory", str(latency), "--", "eval", "--items", str(items), "--model",
         "bench-model", "--base-url", "http://in-memory.invalid/v1", "--run-dir", f"{tmp}/run-mem-{c}-{n}",
         "--concurrency", str(c), "--max-tokens", "32", "--no-cache"], bench_env(tmp), REPO)


def eval_end_to_end() -> bool:
    print(f"\nPart 1: cresowlve eval end to end, rate at the server ({load()})")
    print(f"{'C':>4} {'latency':>8} {'http-workers':>12} {'N':>6} {'req/s':>8} {'ideal':>7} {'ratio':>6} {'target':>7} "
          f"{'wall s':>7} {'cpu ms/req':>10} exit")
    ok = True
    with tempfile.TemporaryDirectory(prefix="cresowlve-tp-") as tmp:
        for c, latency, n, target, workers in EVAL_RUNS:
            rc, times, wall, cpu = run_eval(tmp, c, latency, n, workers)
            rate, ideal = steady_rate(times, c), c / latency
            passed = target is None or rate / ideal >= target
            ok &= passed and rc.returncode == 0 and len(times) == n
            print(f"{c:>4} {latency * 1000:>6.0f}ms {workers:>12} {len(times):>6} {rate:>8.1f} {ideal:>7.0f} {rate / ideal:>6.2f} "
                  f"{'>= ' + str(target) if target else 'none':>7} {wall:>7.1f} {cpu / max(1, len(times)) * 1000:>10.2f} "
                  f"{rc.returncode}{'' if passed else '  BELOW TARGET'}", flush=True)
            if rc.returncode:
                print("   " + rc.stderr.strip().splitlines()[-1] if rc.stderr.strip() else "")
    return ok


# --------------------------------------------------------------------------- part 2: LLMClient in process


async def timed(c: int, n: int, call: Callable[[int], Awaitable[Any]]) -> tuple[float, float]:
    """(wall s, CPU s) of n calls at concurrency c, after one untimed warm-up wave."""
    sem = asyncio.Semaphore(c)

    async def one(i: int) -> None:
        async with sem:
            await call(i)

    await asyncio.gather(*(one(-1 - i) for i in range(c)))
    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - t0, time.process_time() - c0


def client_figures(c: int = 64, n: int = 1920, latency: float = 0.2) -> None:
    from cresowlve_core.llm import Endpoint, GenParams, LLMClient, ResponseCache

    print(f"\nPart 2: LLMClient (aiohttp transport) in this process, C={c}, {latency * 1000:.0f} ms ({load()})")
    with endpoint(latency) as url:
        client = LLMClient(Endpoint(url, "bench-model"), concurrency=c)

        async def run() -> tuple[float, float]:
            async with client:
                return await timed(c, n, lambda i: client.complete(
                    [{"role": "user", "content": f"prompt {i}"}], GenParams(), prompt_version="tp"))

        secs, cpu = asyncio.run(run())
        rate = steady_rate(arrivals(url)[c:], c)
        print(f"  {n} calls: {n / secs:.1f} req/s wall, {rate:.1f} at the server, ratio {rate / (c / latency):.2f}, "
              f"client CPU {cpu / n * 1000:.2f} ms per call")

    prompts = [f"distinct prompt number {i}" for i in range(N_CACHED)]
    with tempfile.TemporaryDirectory() as tmp, endpoint(0.0) as url:
        cache = ResponseCache(Path(tmp) / "responses.sqlite")

        async def fill_or_rerun() -> float:
            cl = LLMClient(Endpoint(url, "bench-model"), concurrency=64, cache=cache)
            async with cl:
                t0 = time.perf_counter()
                await asyncio.gather(*(cl.complete([{"role": "user", "content": p}], GenParams(), prompt_version="c")
                                       for p in prompts))
                return time.perf_counter() - t0

        asyncio.run(fill_or_rerun())
        arrivals(url)
        secs = asyncio.run(fill_or_rerun())
        seen = len(arrivals(url))
        print(f"  cached re-run of {N_CACHED} distinct prompts: {secs:.2f} s, {seen} requests (targets: < 5 s, 0)")


# --------------------------------------------------------------------------- part 3: other clients

#: the harness measured beside cresowlve, installed by this script into a throwaway venv (never the project's)
LM_EVAL = "lm-eval==0.4.13"
#: a maintained HTTP client written in Rust (reqwest, hyper), measured beside aiohttp the same way
PYREQWEST = "pyreqwest==0.15.1"
#: the request body of the raw clients (part 3)
RAW_REQUEST = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": "hello"}],
                          "max_tokens": 32}).encode()
#: (small, large) run sizes: CPU per request net of start-up is (CPU(large) - CPU(small)) / (large - small)
COMPARE_SIZES = (640, 6400)
#: the done-when target of cresowlve eval's client CPU per request (net of start-up), C=64, judge off
CPU_TARGET_MS = 0.35


def throwaway_python(requirement: str, module: str) -> tuple[Path | None, str]:
    """The Python of a throwaway venv holding ``requirement`` (``name==version``; made on first use,
    then reused while ``module`` imports), or (None, why not). The venv is ``$CRESOWLVE_BENCH_VENVS``
    (default: ``<temp dir>/cresowlve-bench``) ``/<name>-<version>``; it sees the project venv's
    packages through a ``.pth`` file (so what both need, e.g. aiohttp, is not downloaded again) and
    installs the rest into itself with pip."""
    root = Path(os.environ.get("CRESOWLVE_BENCH_VENVS") or Path(tempfile.gettempdir()) / "cresowlve-bench")
    venv = root / requirement.replace("==", "-")
    py = venv / "bin" / "python"
    if py.exists() and subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0:
        return py, "reused"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True, text=True)
        site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                              capture_output=True, text=True).stdout.strip()
        Path(site, "_project_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
        print(f"  installing {requirement} into {venv} (once)", flush=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement], check=True,
                       capture_output=True, text=True, timeout=1800)
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines()
        return None, f"could not install {requirement}: {lines[-1] if lines else exc}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"could not install {requirement}: {exc}"
    return py, "installed"


def run_lm_eval(py: Path, tmp: str, c: int, latency: float, n: int) -> tuple[subprocess.CompletedProcess[str], list[float], float, float]:
    """lm-evaluation-harness's ``local-chat-completions`` (``num_concurrent=c``) over ``n`` distinct
    questions, as a generate_until task read from a local JSON Lines file (offline): (the command,
    arrival times, wall s, CPU s)."""
    task = Path(tmp) / f"lm-task-{n}"
    task.mkdir()
    with (task / "items.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"question": f"Puzzle {i}: which planet?", "answer": "Venus"}) + "\n")
    (task / "bench_tp.yaml").write_text(
        f"task: bench_tp\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {task / 'items.jsonl'}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: \"{{question}}\"\ndoc_to_target: \"{{answer}}\"\n"
        "generation_kwargs:\n  until: []\n  max_gen_toks: 32\nmetric_list:\n  - metric: exact_match\n"
        "    aggregation: mean\n    higher_is_better: true\n", encoding="utf-8")
    env = {**bench_env(tmp), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": f"{tmp}/hf"}
    env.pop("PYTHONPATH")
    with endpoint(latency) as url:
        rc, wall, cpu = timed_command(
            [str(py), "-m", "lm_eval", "--model", "local-chat-completions", "--model_args",
             f"model=bench-model,base_url={url}/chat/completions,num_concurrent={c},max_retries=1,"
             "tokenized_requests=False", "--include_path", str(task), "--tasks", "bench_tp",
             "--apply_chat_template", "--output_path", f"{task}/out"], env, Path(tmp))
        times = arrivals(url)
    return rc, times, wall, cpu


def compare(c: int = 64, n: int = 1280, latency: float = 0.2) -> bool:
    """cresowlve eval, lm-evaluation-harness and raw HTTP clients on the same server in the same minutes."""
    print(f"\nPart 3: the same requests from other clients, same server and body, C={c}, {latency * 1000:.0f} ms "
          f"({load()})")
    print("  CPU per request = the process's CPU (user + system) / requests; 'net' leaves start-up out: "
          f"(CPU of {COMPARE_SIZES[1]:,} - CPU of {COMPARE_SIZES[0]:,}) / {COMPARE_SIZES[1] - COMPARE_SIZES[0]:,}; "
          "the raw clients are timed over their calls only")
    print(f"  {'client':<40} {'ratio':>6} {'cpu ms/req':>11} {'net':>6}  load")
    small, large = COMPARE_SIZES
    ok = True

    def line(name: str, runs: list[tuple[subprocess.CompletedProcess[str], list[float], float, float]]) -> float | None:
        (rc_s, t_s, _, cpu_s), (rc_l, t_l, _, cpu_l) = runs
        if rc_s.returncode or rc_l.returncode or len(t_l) < large:
            bad = rc_l if rc_l.returncode else rc_s
            last = last_line(bad.stderr) if bad.stderr.strip() else f"{len(t_l)} requests"
            print(f"  {name:<40} failed (exit {bad.returncode}): {last}", flush=True)
            return None
        net = (cpu_l - cpu_s) / (len(t_l) - len(t_s)) * 1000
        ratio = steady_rate(t_l, c) / (c / latency)
        print(f"  {name:<40} {ratio:>6.2f} {cpu_l / len(t_l) * 1000:>11.2f} {net:>6.2f}  {load()}", flush=True)
        return net

    with tempfile.TemporaryDirectory(prefix="cresowlve-cmp-") as tmp:
        net = line(f"cresowlve eval --no-cache ({large:,} items)", [run_eval(tmp, c, latency, k) for k in (small, large)])
        met = net is not None and net <= CPU_TARGET_MS
        ok &= met
        print(f"  {'':<40} target: net <= {CPU_TARGET_MS} ms per request: {'met' if met else 'MISSED'}", flush=True)
        (rc_s, _, cpu_s), (rc_l, wall_l, cpu_l) = (run_eval_in_memory(tmp, c, latency, k) for k in (small, large))
        name = f"cresowlve eval, no HTTP ({large:,} items)"
        if rc_s.returncode or rc_l.returncode:
            bad = rc_l if rc_l.returncode else rc_s
            print(f"  {name:<40} failed (exit {bad.returncode}): {last_line(bad.stderr)}", flush=True)
        else:
            ideal = large / c * latency
            print(f"  {name:<40} {ideal / wall_l:>6.2f} {cpu_l / large * 1000:>11.2f} "
                  f"{(cpu_l - cpu_s) / (large - small) * 1000:>6.2f}  {load()}  (in-memory answers: the cost of "
                  "everything but HTTP; ratio = ideal / wall)", flush=True)
        py, how = throwaway_python(PYREQWEST, "pyreqwest")
        name = "cresowlve eval on pyreqwest (bench only)"
        if py is None:
            print(f"  {name:<40} not measured: {how}", flush=True)
        else:
            on_pyreqwest = (str(py), __file__, "--on-pyreqwest", "--")
            line(name, [run_eval(tmp, c, latency, k, cresowlve=on_pyreqwest) for k in (small, large)])
        py, how = throwaway_python(LM_EVAL, "lm_eval")
        if py is None:
            print(f"  {LM_EVAL + ' (local-chat-completions)':<40} not measured: {how}", flush=True)
        else:
            line(f"{LM_EVAL} (local-chat-completions)", [run_lm_eval(py, tmp, c, latency, k) for k in (small, large)])

    body = RAW_REQUEST
    headers = {"Content-Type": "application/json", "Authorization": "Bearer none"}

    async def with_aiohttp(url: str) -> tuple[float, float]:
        import aiohttp

        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as s:
            async def call(i: int) -> None:
                async with s.post(url + "/chat/completions", data=body, headers=headers) as r:
                    json.loads(await r.read())
            return await timed(c, n, call)

    async def with_protocol(url: str) -> tuple[float, float]:
        """The floor of any Python client: keep-alive connections on ``asyncio.Protocol``, a
        request written in one call, an answer framed by its Content-Length (this server's)."""
        loop = asyncio.get_running_loop()
        host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                   f"Authorization: Bearer none\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

        class Conn(asyncio.Protocol):
            def __init__(self) -> None:
                self.buf = b""
                self.answer: asyncio.Future[bytes] | None = None

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def data_received(self, data: bytes) -> None:
                self.buf += data
                end = self.buf.find(b"\r\n\r\n")
                if end < 0 or self.answer is None:
                    return
                at = self.buf.lower().find(b"content-length:", 0, end)
                size = end + 4 + int(self.buf[at + 15:self.buf.index(b"\r\n", at)])
                if len(self.buf) >= size:
                    answer, self.answer = self.answer, None
                    answer.set_result(self.buf[end + 4:size])
                    self.buf = self.buf[size:]

        idle: list[Conn] = []

        async def call(i: int) -> None:
            conn = idle.pop() if idle else (await loop.create_connection(Conn, host, int(port)))[1]
            conn.answer = loop.create_future()
            conn.transport.write(request)  # type: ignore[attr-defined]
            json.loads(await conn.answer)
            idle.append(conn)

        try:
            return await timed(c, n, call)
        finally:
            for conn in idle:
                conn.transport.close()  # type: ignore[attr-defined]

    async def with_httpx(url: str) -> tuple[float, float]:
        import httpx

        limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
        async with httpx.AsyncClient(limits=limits, timeout=60) as s:
            async def call(i: int) -> None:
                r = await s.post(url + "/chat/completions", content=body, headers=headers)
                json.loads(r.content)
            return await timed(c, n, call)

    async def with_openai(url: str) -> tuple[float, float]:
        from openai import AsyncOpenAI

        s = AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        async with s:
            async def call(i: int) -> None:
                await s.chat.completions.create(model="bench-model", messages=[{"role": "user", "content": "hello"}],
                                                max_tokens=32)
            return await timed(c, n, call)

    for name, fn in (("asyncio.Protocol (hand-written floor)", with_protocol), ("aiohttp (raw keep-alive)", with_aiohttp), ("httpx AsyncClient", with_httpx),
                     ("openai SDK (AsyncOpenAI)", with_openai)):
        with endpoint(latency) as url:
            try:
                secs, cpu = asyncio.run(fn(url))
            except ImportError as exc:
                print(f"  {name:<40} not installed ({exc.name})")
                continue
            rate = steady_rate(arrivals(url)[c:], c)
            raw_line(name, rate / (c / latency), cpu / n)
    name = f"{PYREQWEST} (Rust)"
    py, how = throwaway_python(PYREQWEST, "pyreqwest")
    if py is None:
        print(f"  {name:<40} not measured: {how}", flush=True)
        return ok
    with endpoint(latency) as url:
        rc = subprocess.run([str(py), __file__, "--pyreqwest", url, str(c), str(n)], capture_output=True, text=True)
        if rc.returncode:
            print(f"  {name:<40} failed (exit {rc.returncode}): {last_line(rc.stderr)}", flush=True)
            return ok
        _, cpu = json.loads(rc.stdout.strip().splitlines()[-1])
        rate = steady_rate(arrivals(url)[c:], c)
    raw_line(name, rate / (c / latency), cpu / n)
    return ok


def raw_line(name: str, ratio: float, cpu_per_call_s: float) -> None:
    """A raw client's line of part 3: its ratio and CPU ms per call."""
    print(f"  {name:<40} {ratio:>6.2f} {'':>11} {cpu_per_call_s * 1000:>6.2f}  {load()}", flush=True)


def last_line(text: str) -> str:
    """The last non-blank line of a command's output (what it said last), or a note that it said nothing."""
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no output)"


def with_pyreqwest(url: str, c: int, n: int) -> tuple[float, float]:
    """The raw clients' calls made with pyreqwest (in the throwaway venv of :data:`PYREQWEST`)."""
    from pyreqwest.client import ClientBuilder

    async def run() -> tuple[float, float]:
        async with ClientBuilder().build() as s:
            async def call(i: int) -> None:
                request = s.post(url + "/chat/completions").header("Content-Type", "application/json")
                r = await request.header("Authorization", "Bearer none").body_bytes(RAW_REQUEST).build().send()
                json.loads(bytes(await r.bytes()))
            return await timed(c, n, call)

    return asyncio.run(run())


# --------------------------------------------------------------------------- part 4: the budget

def budget(c: int = 64, latency: float = 0.05, small: int = 1000, large: int = 7000) -> None:
    """Where ``cresowlve eval``'s CPU per request goes when there is no HTTP: each step measured on
    its own, in this process, on the run's event loop, net of start-up (the difference of two sizes),
    beside the whole run with in-memory answers (``--in-memory``, a child process)."""
    from cresowlve_core.evaluation.config import EvalConfig
    from cresowlve_core.evaluation.runner import _with_judge_score, answer_fields, record_base
    from cresowlve_core.eventloop import new_event_loop
    from cresowlve_core.llm import Endpoint, GenParams, LLMClient
    from cresowlve_core.llm.openai_wire import parse_success
    from cresowlve_core.runtime.aio import run_gc
    from cresowlve_core.runtime.mapping import map_with_resume
    from cresowlve_core.runtime.rundir import RunDir
    from cresowlve_core.sources.sample import load_items

    print(f"\nPart 4: where the CPU of a request goes with no HTTP, C={c}, {latency * 1000:.0f} ms, "
          f"{small:,} and {large:,} calls ({load()})")
    loop = new_event_loop()
    InMemoryTransport.latency = latency
    client = LLMClient(Endpoint("http://in-memory.invalid/v1", "bench-model"), concurrency=c,
                       transport_factory=InMemoryTransport)
    params = GenParams(max_tokens=32)

    def completing(i: int) -> Awaitable[Any]:
        return client.complete([{"role": "user", "content": f"Puzzle {i}: which planet?"}], params, prompt_version="tp")

    with tempfile.TemporaryDirectory(prefix="cresowlve-budget-") as tmp:
        items = {k: write_items(Path(tmp) / f"items-{k}.jsonl", k) for k in (small, large)}
        answer = parse_success("/chat/completions", BODY)
        cfg = EvalConfig(model="bench-model", base_url="http://in-memory.invalid/v1", run_dir=tmp)
        item = load_items(str(items[small]), "en")[0]
        record = {**record_base(item, cfg), **answer_fields(item.view("en"), answer, 32)}

        async def mapping(k: int) -> None:
            """map_with_resume over k units whose call waits and returns the bench's record: its tasks,
            the writer thread, the JSON line, the write and the fsync."""
            async def call(unit: str, previous: Any) -> dict[str, Any]:
                await asyncio.sleep(latency)
                return {**record, "id": unit}

            await map_with_resume(RunDir(Path(tmp) / f"map-{k}"), "responses.jsonl", [f"u{j}" for j in range(k)],
                                  key=lambda u: u, call=call, record_key=lambda r: r["id"], concurrency=c,
                                  progress=False)

        def cpu_of(fn: Callable[[int], Any]) -> float:
            """CPU µs per unit of ``fn(k)`` (k units), net of start-up: the two sizes' difference."""
            t0 = time.process_time()
            fn(small)
            t1 = time.process_time()
            fn(large)
            return ((time.process_time() - t1) - (t1 - t0)) / (large - small) * 1e6

        def calls(call: Callable[[int], Awaitable[Any]]) -> Callable[[int], Any]:
            """k calls of ``call`` at concurrency c on the run's loop."""
            return lambda k: loop.run_until_complete(timed(c, k, call))

        def records(k: int) -> None:
            for _ in range(k):
                _with_judge_score({**record_base(item, cfg), **answer_fields(item.view("en"), answer, 32)})

        with run_gc():  # the collector as a run tunes it (runtime/aio.py)
            wait_us = cpu_of(calls(lambda i: asyncio.sleep(latency)))
            rows = [
                ("waiting (asyncio.sleep at C, the floor)", wait_us),
                ("LLMClient.complete, in-memory transport", cpu_of(calls(completing)) - wait_us),
                ("the answer's record (extract, score, validate)", cpu_of(records)),
                ("map_with_resume and the record's write (fsync)",
                 cpu_of(lambda k: loop.run_until_complete(mapping(k))) - wait_us),
            ]
        # the items are loaded before the run starts, with the collector as it was
        rows.append(("loading and checking the items file", cpu_of(lambda k: load_items(str(items[k]), "en"))))
        loop.run_until_complete(client.aclose())
        loop.close()
        (rc_s, _, cpu_s), (rc_l, _, cpu_l) = (run_eval_in_memory(tmp, c, latency, k) for k in (small, large))
    for name, us in rows:
        print(f"  {name:<52} {us:>7.1f} us")
    total = sum(us for _, us in rows)
    print(f"  {'sum of the steps':<52} {total:>7.1f} us")
    if rc_s.returncode or rc_l.returncode:
        print(f"  {'cresowlve eval, no HTTP (the whole run)':<52} failed: "
              f"{last_line((rc_l if rc_l.returncode else rc_s).stderr)}")
        return
    whole = (cpu_l - cpu_s) / (large - small) * 1e6
    print(f"  {'cresowlve eval, no HTTP (the whole run)':<52} {whole:>7.1f} us")
    print(f"  {'the rest (prompts, progress, summary, GC, ...)':<52} {whole - total:>7.1f} us  {load()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("eval", "client", "compare", "budget"), default=None,
                    help="run one part (default: all)")
    ap.add_argument("--serve", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--in-memory", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--pyreqwest", nargs=3, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--on-pyreqwest", action="store_true", help=argparse.SUPPRESS)
    a, rest = ap.parse_known_args()
    argv = rest[1:] if rest[:1] == ["--"] else rest
    if a.in_memory is not None:
        InMemoryTransport.latency = a.in_memory
        return eval_with(InMemoryTransport, argv)
    if a.on_pyreqwest:
        return eval_with(PyreqwestTransport, argv)
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if a.pyreqwest is not None:
        url, c, n = a.pyreqwest
        print(json.dumps(with_pyreqwest(url, int(c), int(n))))
        return 0
    if a.serve is not None:
        asyncio.run(serve(a.serve))
        return 0
    ok = True
    if a.part in (None, "eval"):
        ok = eval_end_to_end()
    if a.part in (None, "client"):
        client_figures()
    if a.part in (None, "compare"):
        ok = compare() and ok
    if a.part in (None, "budget"):
        budget()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
