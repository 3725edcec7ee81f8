"""HTTP in worker processes: a :class:`~cresowlve_core.llm.http.Transport` whose requests are
made by N child processes, each running the default aiohttp transport on its own event loop.

Why: one event loop's CPU is the limit of a run against a fast local server. Each call costs
about 0.3 ms in aiohttp plus the run's own work (the client, scoring, the record) on one core; at
concurrency 256 and 200 ms (1,280 calls/s, a local vLLM's rate) that is a whole core, and the
answers queue behind each other. With ``--http-workers N`` the HTTP exchanges run on other cores
and the run's loop keeps only its own work. The answers are the same bytes: the child returns the
status, headers and body it received, and the run interprets them as it always does.

The protocol between the run and a child is length-prefixed ``marshal`` messages over the child's
stdin and stdout (``_frame``; both ends are this module, so the format needs no versioning). The
run's first message is the transport's options (``(0, json)``: never on the command line, where
``ps`` would show a key in the base URL) and the child's is :data:`READY`; then
``(id, target, headers, body)`` asks, ``(id,)`` cancels, and the child answers
``(id, status, headers, content)`` or ``(id, None, error class, message, attributes)``. A failure in
the child is the same :class:`~cresowlve_core.llm.http.TransportError` subclass in the run. A child
that exits with requests in flight fails them (``ProtocolFailure``: whether the server saw them is
unknown, so each counts as an attempt); the next request starts a new child, with a WARNING. A
worker that exits before it is ready (it could not start: its traceback is on stderr) stops the
run (``LLMFatalError``) instead of being started again and again.
Children ignore Ctrl-C (the run stops them) and exit when their stdin closes, so a run killed
with -9 leaves none behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import marshal
import os
import signal
import struct
import sys
from typing import Any

from cresowlve_core.eventloop import new_event_loop
from cresowlve_core.llm import http
from cresowlve_core.llm.http import ProtocolFailure, Response, TransportError
from cresowlve_core.llm.types import LLMFatalError

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
#: how a worker process is started
WORKER_COMMAND = (sys.executable, "-m", __name__)
#: a worker's first message, once it can take requests
READY = (0, "ready")
#: how long a worker may take to start (import aiohttp, open its pipes)
START_TIMEOUT_S = 60.0
#: the failures a child sends back as themselves (anything else is a ProtocolFailure naming it)
_ERRORS: dict[str, type[TransportError]] = {cls.__name__: cls for cls in (
    http.ConnectFailed, http.ReadTimeout, http.ProtocolFailure, http.ResponseTooLarge, TransportError)}


def _frame(message: tuple[Any, ...]) -> bytes:
    data = marshal.dumps(message)
    return _LENGTH.pack(len(data)) + data


class _Frames:
    """Cuts a byte stream into the messages of :func:`_frame`."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        self.buffer += data
        out, start, size = [], 0, len(self.buffer)
        while size - start >= 4:
            (n,) = _LENGTH.unpack_from(self.buffer, start)
            if size - start - 4 < n:
                break
            out.append(marshal.loads(self.buffer[start + 4:start + 4 + n]))
            start += 4 + n
        del self.buffer[:start]
        return out


def _error_message(rid: int, exc: BaseException) -> tuple[Any, ...]:
    name = type(exc).__name__ if type(exc).__name__ in _ERRORS else ""
    message = str(exc) if name else f"{type(exc).__name__}: {str(exc)[:300]}"
    attrs = {k: v for k, v in vars(exc).items() if isinstance(v, str | int | float | bool | None)} if name else {}
    return (rid, None, name, message, attrs)


def _rebuild(name: str, message: str, attrs: dict[str, Any]) -> TransportError:
    if not name:
        return ProtocolFailure(f"the HTTP worker process failed ({message})")
    cls = _ERRORS[name]
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(attrs)
    return exc


# --------------------------------------------------------------------------- the run's side


class _Child(asyncio.SubprocessProtocol):
    """One worker process: its pipes, and the requests it has in flight."""

    def __init__(self, owner: WorkerTransport) -> None:
        self.owner = owner
        self.frames = _Frames()
        self.pending: dict[int, asyncio.Future[Response]] = {}
        self.process: asyncio.SubprocessTransport | None = None
        self.stdin: asyncio.WriteTransport | None = None
        self.exited: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # its first message
        self._ends = 0  # of the two: the process exited, its stdout closed (in either order)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.process = transport  # type: ignore[assignment]
        self.stdin = self.process.get_pipe_transport(0)  # type: ignore[union-attr,assignment]

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        for message in self.frames.feed(data):
            if message[0] == READY[0]:
                self.ready.set_result(None)
                continue
            fut = self.pending.pop(message[0], None)
            if fut is None or fut.done():
                continue  # cancelled meanwhile
            if message[1] is None:
                fut.set_exception(_rebuild(*message[2:]))
            else:
                fut.set_result(Response(message[1], message[2], message[3]))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._ended()

    def process_exited(self) -> None:
        self._ended()

    def _ended(self) -> None:
        """Once the process has exited and every byte it wrote was read: fail what it left unanswered."""
        self._ends += 1
        if self._ends < 2:
            return
        code = self.process.get_returncode() if self.process else None
        self.owner._lost(self)
        if not self.ready.done():
            self.ready.set_exception(LLMFatalError(f"the HTTP worker process exited (code {code}) as it started; "
                                                   "its error is above"))
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ProtocolFailure(f"the HTTP worker process exited (code {code}) before the "
                                                  "answer came back; whether the server saw the request is unknown"))
        if not self.exited.done():
            self.exited.set_result(code)

    def send(self, message: tuple[Any, ...]) -> None:
        if self.stdin is not None and not self.stdin.is_closing():  # else it exited: process_exited fails the calls
            self.stdin.write(_frame(message))


class WorkerTransport:
    """A :class:`~cresowlve_core.llm.http.Transport` over ``workers`` child processes, each an
    :class:`~cresowlve_core.llm.http.AiohttpTransport` with the same options; a request goes to the
    child with the fewest in flight. Create and use it inside one event loop."""

    def __init__(self, base_url: str, *, workers: int, **options: Any) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        http.AiohttpTransport(base_url, **options)  # the same errors, here and now, for a bad URL or CA file
        self.workers = workers
        self._options = json.dumps({"base_url": base_url, **options})
        self._children: list[_Child] = []
        self._starting: asyncio.Task[None] | None = None
        self._next_id = 0
        self._started_once = False
        self._broken: str | None = None  # why no worker can be started

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._started_once:
            log.warning("starting %d HTTP worker process(es) again: one exited", self.workers - len(self._children))
        while len(self._children) < self.workers:
            try:
                _, child = await loop.subprocess_exec(lambda: _Child(self), *WORKER_COMMAND, stdin=asyncio.subprocess.PIPE,
                                                      stdout=asyncio.subprocess.PIPE, stderr=None)
            except OSError as exc:
                self._broken = f"cannot start an HTTP worker process ({exc})"
                raise LLMFatalError(self._broken) from None
            child.send((0, self._options))
            try:
                await asyncio.wait_for(asyncio.shield(child.ready), START_TIMEOUT_S)
            except TimeoutError:
                child.process.kill()  # type: ignore[union-attr]
                self._broken = f"the HTTP worker process did not start within {START_TIMEOUT_S:g} s"
                raise LLMFatalError(self._broken) from None
            except LLMFatalError as exc:
                self._broken = str(exc)
                raise
            self._children.append(child)
        self._started_once = True

    @property
    def pids(self) -> list[int]:
        """The process ids of the running workers."""
        return [c.process.get_pid() for c in self._children if c.process is not None]

    def _lost(self, child: _Child) -> None:
        if child in self._children:
            self._children.remove(child)

    async def start(self) -> None:
        """Start the workers not running (the first call, or after one exited); the client awaits this
        before an attempt's deadline starts."""
        if self._broken is not None:
            raise LLMFatalError(self._broken)
        if len(self._children) < self.workers:
            if self._starting is None or self._starting.done():
                self._starting = asyncio.ensure_future(self._start())
            await asyncio.shield(self._starting)

    async def post(self, target: str, headers: dict[str, str], body: bytes) -> Response:
        await self.start()
        if not self._children:
            raise ProtocolFailure("the HTTP worker processes exited as they started", no_answer=True)
        child = min(self._children, key=lambda c: len(c.pending))
        self._next_id += 1
        rid = self._next_id
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        child.pending[rid] = fut
        child.send((rid, target, headers, body))
        try:
            return await fut
        except asyncio.CancelledError:
            if child.pending.pop(rid, None) is not None:
                child.send((rid,))
            raise

    async def aclose(self) -> None:
        children, self._children = self._children, []
        for child in children:
            if child.stdin is not None:
                child.stdin.close()
        for child in children:
            try:
                await asyncio.wait_for(asyncio.shield(child.exited), 10)
            except TimeoutError:
                if child.process is not None:
                    child.process.kill()

    def abandon(self) -> None:
        """The children of a loop that has finished: stopped (their pipes cannot be read any more)."""
        children, self._children = self._children, []
        for child in children:
            if child.process is None:
                continue
            if child.process.get_returncode() is None:
                try:
                    os.kill(child.process.get_pid(), signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                child.process.close()  # marks it closed, so collecting it later does not touch the old loop
            except RuntimeError:  # the old loop is closed: its pipes close when collected
                pass


def worker_transport_factory(workers: int) -> http.TransportFactory:
    """A transport factory for ``LLMClient(transport_factory=...)``: ``workers`` processes (0: the
    default in-loop transport)."""
    if workers <= 0:
        return http.open_transport

    def factory(base_url: str, **options: Any) -> http.Transport:
        return WorkerTransport(base_url, workers=workers, **options)

    return factory


# --------------------------------------------------------------------------- the child's side


class _Requests(asyncio.Protocol):
    """The child's stdin: the transport's options, then requests to make and cancellations."""

    def __init__(self, out: asyncio.WriteTransport, done: asyncio.Future[None]):
        self.out, self.done = out, done
        self.transport: http.AiohttpTransport | None = None
        self.frames = _Frames()
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def data_received(self, data: bytes) -> None:
        for message in self.frames.feed(data):
            rid = message[0]
            if self.transport is None:  # the first message: the options
                try:
                    self.transport = http.AiohttpTransport(**json.loads(message[1]))
                except Exception as exc:  # noqa: BLE001 - the worker exits with it (and the run stops)
                    if not self.done.done():
                        self.done.set_exception(exc)
                    return
                self.out.write(_frame(READY))
                continue
            if len(message) == 1:
                task = self.tasks.pop(rid, None)
                if task is not None:
                    task.cancel()
                continue
            task = asyncio.ensure_future(self._post(rid, *message[1:]))
            self.tasks[rid] = task

    async def _post(self, rid: int, target: str, headers: dict[str, str], body: bytes) -> None:
        assert self.transport is not None
        try:
            resp = await self.transport.post(target, headers, body)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the run, named
            self.out.write(_frame(_error_message(rid, exc)))
        else:
            self.out.write(_frame((rid, resp.status, resp.headers, resp.content)))
        finally:
            self.tasks.pop(rid, None)

    def eof_received(self) -> bool:
        if not self.done.done():
            self.done.set_result(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(sys.stdout.fileno(), "wb", closefd=False))
    done: asyncio.Future[None] = loop.create_future()
    _, requests = await loop.connect_read_pipe(lambda: _Requests(out, done),
                                               os.fdopen(sys.stdin.fileno(), "rb", closefd=False))
    try:
        await done
    finally:
        for task in list(requests.tasks.values()):
            task.cancel()
        if requests.transport is not None:
            await requests.transport.aclose()


def main() -> None:
    """A worker process: ``python -m cresowlve_core.llm.http_workers`` (started by
    :class:`WorkerTransport`, which writes its options and requests to stdin and reads the answers
    from stdout)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops its children (it closes their stdin)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_serve())


if __name__ == "__main__":
    main()
