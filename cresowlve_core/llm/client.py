"""``LLMClient``: the one way every notebook and script calls a model.

::

    async with LLMClient(Endpoint(base_url, "gpt-4.1-mini", "OPENAI_API_KEY"), concurrency=16,
                         cache=ResponseCache()) as llm:
        c = await llm.complete([{"role": "user", "content": "2+2?"}], GenParams(), prompt_version="v1")

Which API is used (``GenParams.resolved_api()``):

* ``chat`` (default): ``/chat/completions``. Thinking text is taken from the message's
  ``reasoning_content`` (llama.cpp, vLLM, DeepSeek) or ``reasoning`` field, and from a leading
  ``<think>…</think>`` block, which is stripped from ``text``. A lone ``</think>`` (templates
  that open the block inside the prompt) is treated the same way.
* ``responses`` (automatic when ``params.effort`` is set): ``/responses`` with
  ``reasoning={"effort": effort, "summary": "auto"}``; reasoning summaries go to ``thoughts``.
  With an effort set, ``temperature`` and ``seed`` are not sent (reasoning models reject them;
  they still key the cache).
* ``completions``: legacy ``/completions``. A single user message is sent verbatim as the
  prompt; anything else is rendered as ``"System: …\\n\\nUser: …\\n\\nAssistant:"`` blocks
  (role capitalised, blank line between turns, a trailing ``Assistant:`` cue).

``params.extra`` is merged into the request body. If it holds ``max_completion_tokens``
(newer OpenAI chat models), ``max_tokens`` is not sent.

Usage is recorded exactly as reported (``None`` where absent), never estimated.

Retries (ours; the SDK's are off): up to ``max_attempts`` with jittered exponential backoff
(``backoff_base_s``·2^k, at most ``backoff_cap_s``) on 408, 409, 429, 5xx, timeouts,
connection errors, and 200 responses that are empty, unparseable, without choices or with
empty text. ``Retry-After``/``retry-after-ms`` on 429/503 is honoured. 400/401/403/404 (and
any other 4xx) raise ``LLMFatalError`` at once. An empty answer cut off by the token limit
(``finish_reason == "length"`` / an incomplete response) is returned as is, not retried,
since re-asking would just burn the same tokens again. A call keeps its concurrency slot
while it backs off, so a rate-limited endpoint is not hit harder.

Rate limits (optional): ``rpm`` charges one unit per HTTP attempt; ``tpm`` pre-charges an
estimate (input ≈ characters/3 plus ``max_tokens``, 4096 when unset) and corrects it with
the reported usage afterwards (failed attempts are refunded).

Cache and cost: a hit returns ``cached=True`` and ``cost`` = the price of the original call
(re-priced from the stored usage with the current table), so a report can show both the
cost of the run and what was spent now (``CostMeter.spent`` counts only calls sent).
``latency_s`` of a hit is likewise the original call's latency.
``max_cost`` is checked against new spending: before each call, ``spent + in-flight
reservations + this call's upper bound`` (input ≈ characters/3, output = ``max_tokens``,
or 4096 when unset) must fit, otherwise ``BudgetExceeded``. With ``max_cost`` set, a model
without a price raises ``LLMConfigError`` (the budget could not be enforced).

The API key is read from the environment at every call, sent only as a header, and
scrubbed from every error message.

Connections: ``concurrency`` calls really run in flight. The client keeps ceil(C/16)
``AsyncOpenAI`` instances, each over its own httpx2 pool of 16 (+2 spare) connections, and
sends each call through the least busy one. (httpcore scans every connection of a pool on
each request; smaller pools cut client CPU by ~15% at C=64.) The pools belong to the event
loop they were created in; a client used from a new loop opens new pools.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import os
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

from cresowlve_core.llm.types import Usage
from cresowlve_core.llm.cache import ResponseCache, cache_key
from cresowlve_core.llm.pricing import CostMeter, PriceTable, estimate_input_tokens
from cresowlve_core.llm.ratelimit import AsyncTokenBucket
from cresowlve_core.llm.types import (
    BudgetExceeded,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMError,
    LLMFatalError,
)

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429})
DEFAULT_ESTIMATE_OUTPUT_TOKENS = 4096
MAX_RETRY_AFTER_S = 300.0
POOL_SHARD_SIZE = 16  # connections per pool: httpcore scans a pool's connections on every request


class BadResponse(Exception):
    """A 200 response that cannot be used (empty, unparseable, no choices, empty text)."""


# --------------------------------------------------------------------------- parsing


def split_think(text: str) -> tuple[str, str | None]:
    """Split a leading ``<think>…</think>`` block off ``text``: returns ``(answer, thoughts)``.

    An unclosed ``<think>`` means the whole text is thinking (the answer is empty). A closing
    ``</think>`` without an opening tag is also honoured (chat templates that open the block
    in the prompt).
    """
    stripped = text.lstrip()
    if stripped.startswith("<think>"):
        body = stripped[len("<think>") :]
        end = body.find("</think>")
        if end < 0:
            return "", body.strip() or None
        return body[end + len("</think>") :].strip(), body[:end].strip() or None
    end = text.find("</think>")
    if end >= 0 and "<think>" not in text[:end]:
        return text[end + len("</think>") :].strip(), text[:end].strip() or None
    return text, None


def _join_thoughts(*parts: str | None) -> str | None:
    kept = [p.strip() for p in parts if p and p.strip()]
    return "\n\n".join(kept) if kept else None


def _content_text(content: Any) -> str:
    """Message content as a string (some servers return a list of typed parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage(u: Any, inp: str, out: str, details: str) -> Usage:
    if not isinstance(u, dict):
        return Usage()
    d = u.get(details)
    return Usage(
        input_tokens=_int_or_none(u.get(inp)),
        output_tokens=_int_or_none(u.get(out)),
        reasoning_tokens=_int_or_none(d.get("reasoning_tokens")) if isinstance(d, dict) else None,
    )


def _load_json(body: str) -> dict[str, Any]:
    if not body.strip():
        raise BadResponse("empty response body")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise BadResponse(f"unparseable response body ({exc.msg})") from None
    if not isinstance(data, dict):
        raise BadResponse("response body is not a JSON object")
    return data


def parse_chat(data: dict[str, Any]) -> Completion:
    """A chat-completions body → Completion (no cost/latency). Raises BadResponse."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadResponse("response has no choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    text, think = split_think(_content_text(msg.get("content")))
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    return Completion(
        text=text,
        thoughts=_join_thoughts(reasoning if isinstance(reasoning, str) else None, think),
        usage=_usage(data.get("usage"), "prompt_tokens", "completion_tokens", "completion_tokens_details"),
        model=str(data.get("model") or ""),
        raw={"id": data.get("id"), "finish_reason": choice.get("finish_reason"), "api": "chat"},
    )


def parse_completions(data: dict[str, Any]) -> Completion:
    """A legacy completions body → Completion. Raises BadResponse."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadResponse("response has no choices")
    choice = choices[0]
    text, think = split_think(_content_text(choice.get("text")))
    return Completion(
        text=text,
        thoughts=think,
        usage=_usage(data.get("usage"), "prompt_tokens", "completion_tokens", "completion_tokens_details"),
        model=str(data.get("model") or ""),
        raw={"id": data.get("id"), "finish_reason": choice.get("finish_reason"), "api": "completions"},
    )


def parse_responses(data: dict[str, Any]) -> Completion:
    """A Responses-API body → Completion; reasoning summaries become ``thoughts``."""
    output = data.get("output")
    if not isinstance(output, list):
        raise BadResponse("response has no output")
    texts: list[str] = []
    summaries: list[str] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
                    texts.append(str(part.get("text") or ""))
        elif item.get("type") == "reasoning":
            for part in item.get("summary") or []:
                if isinstance(part, dict) and part.get("text"):
                    summaries.append(str(part["text"]))
            if not summaries:  # open-weight servers may return the raw reasoning text instead
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("text"):
                        summaries.append(str(part["text"]))
    text, think = split_think("".join(texts))
    incomplete = data.get("incomplete_details") or {}
    finish = "length" if data.get("status") == "incomplete" and "token" in str(incomplete.get("reason", "")) else "stop"
    return Completion(
        text=text,
        thoughts=_join_thoughts("\n\n".join(summaries), think),
        usage=_usage(data.get("usage"), "input_tokens", "output_tokens", "output_tokens_details"),
        model=str(data.get("model") or ""),
        raw={"id": data.get("id"), "finish_reason": finish, "api": "responses"},
    )


def messages_to_prompt(messages: list[dict[str, Any]]) -> str:
    """The prompt for the legacy completions API (see module docstring)."""
    if len(messages) == 1 and messages[0].get("role") == "user":
        return _content_text(messages[0].get("content"))
    turns = [f"{str(m.get('role', 'user')).capitalize()}: {_content_text(m.get('content'))}" for m in messages]
    return "\n\n".join(turns) + "\n\nAssistant:"


def build_request(model: str, messages: list[dict[str, Any]], params: GenParams) -> tuple[str, dict[str, Any]]:
    """The API path and JSON body for one call (see the module docstring for the rules)."""
    api = params.resolved_api()
    extra = dict(params.extra)
    body: dict[str, Any] = {"model": model}
    if api == "responses":
        path = "/responses"
        body["input"] = messages
        if params.effort:
            body["reasoning"] = {"effort": params.effort, "summary": "auto"}
        else:
            body["temperature"] = params.temperature
        if params.max_tokens is not None:
            body["max_output_tokens"] = params.max_tokens
    elif api in ("chat", "completions"):
        path = "/chat/completions" if api == "chat" else "/completions"
        if api == "chat":
            body["messages"] = messages
        else:
            body["prompt"] = messages_to_prompt(messages)
        body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        if params.max_tokens is not None and "max_completion_tokens" not in extra:
            body["max_tokens"] = params.max_tokens
    else:
        raise LLMConfigError(f"unknown api {api!r}")
    body.update(extra)
    return path, body


def _messages_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages)


_PARSERS = {"/chat/completions": parse_chat, "/completions": parse_completions, "/responses": parse_responses}

# --------------------------------------------------------------------------- errors


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own error message (the SDK has already unwrapped ``{"error": {...}}``)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error")
        msg = inner.get("message") if isinstance(inner, dict) else body.get("message") or inner
        if msg:
            return str(msg)[:500]
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message[:500]


@dataclass
class _Failure:
    """One failed attempt, classified."""

    retryable: bool
    message: str
    status: int | None = None
    retry_after: float | None = None


def _classify(exc: BaseException) -> _Failure:
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        msg = f"HTTP {status}: {_server_message(exc)}"
        if status in RETRYABLE_STATUS or status >= 500:
            ra = parse_retry_after(exc.response.headers) if status in (429, 503) else None
            return _Failure(True, msg, status, ra)
        return _Failure(False, msg, status)
    if isinstance(exc, openai.APITimeoutError):
        return _Failure(True, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return _Failure(True, f"connection error ({type(cause).__name__ if cause else 'unknown'})")
    if isinstance(exc, BadResponse):
        return _Failure(True, str(exc))
    if isinstance(exc, (httpx2.TimeoutException, asyncio.TimeoutError)):
        return _Failure(True, "request timed out")
    if isinstance(exc, httpx2.TransportError):
        return _Failure(True, f"connection error ({type(exc).__name__})")
    return _Failure(False, f"{type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------- client


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process (loading the CA store costs tens of milliseconds)."""
    return httpx2.create_ssl_context()



@dataclass
class _Shard:
    """One SDK client over its own small connection pool, and how many calls it carries now."""

    http: httpx2.AsyncClient
    oai: openai.AsyncOpenAI
    in_flight: int = 0


@dataclass
class _Resources:
    """Per-event-loop objects: the pool shards, the concurrency semaphore, the limiters."""

    loop: asyncio.AbstractEventLoop
    shards: list[_Shard]
    sem: asyncio.Semaphore
    rpm: AsyncTokenBucket | None
    tpm: AsyncTokenBucket | None

    def pick(self) -> _Shard:
        """The least busy shard (so no shard ever has more calls than connections)."""
        return min(self.shards, key=lambda s: s.in_flight)


class LLMClient:
    """Concurrent, retrying, caching, cost-accounting client for one endpoint.

    Use as ``async with`` (or ``with`` together with ``complete_sync``). A client may be used
    from several event loops in turn; it keeps one connection pool per loop.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        concurrency: int = 8,
        rpm: int | None = None,
        tpm: int | None = None,
        max_attempts: int = 6,
        timeout_s: float = 120.0,
        cache: ResponseCache | None = None,
        prices: PriceTable | None = None,
        max_cost: float | None = None,
        cost_meter: CostMeter | None = None,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.cache = cache
        self.prices = prices if prices is not None else PriceTable.load()
        self.max_cost = max_cost
        self.cost_meter = cost_meter if cost_meter is not None else CostMeter()
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.requests_sent = 0  # HTTP attempts made by this client (all loops)
        self._res: _Resources | None = None
        self._sync_loop: asyncio.AbstractEventLoop | None = None

    # ---- lifecycle

    def _new_shard(self, connections: int) -> _Shard:
        http = httpx2.AsyncClient(
            verify=_ssl_context(),
            limits=httpx2.Limits(max_connections=connections + 2, max_keepalive_connections=connections + 2),
            timeout=httpx2.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
        )
        oai = openai.AsyncOpenAI(
            base_url=self.endpoint.base_url,
            api_key="unset",  # replaced by the environment's value before every request (see _send)
            max_retries=0,
            timeout=self.timeout_s,
            http_client=http,
        )
        return _Shard(http, oai)

    def _resources(self) -> _Resources:
        loop = asyncio.get_running_loop()
        if self._res is not None and self._res.loop is loop:
            return self._res
        n_shards = -(-self.concurrency // POOL_SHARD_SIZE)
        per_shard = -(-self.concurrency // n_shards)
        self._res = _Resources(
            loop=loop,
            shards=[self._new_shard(per_shard) for _ in range(n_shards)],
            sem=asyncio.Semaphore(self.concurrency),
            rpm=AsyncTokenBucket(self.rpm) if self.rpm else None,
            tpm=AsyncTokenBucket(self.tpm) if self.tpm else None,
        )
        return self._res

    async def aclose(self) -> None:
        """Close the connection pool of the current loop."""
        res, self._res = self._res, None
        if res is not None and res.loop is asyncio.get_running_loop():
            for shard in res.shards:  # pools of another (finished) loop are simply dropped
                await shard.http.aclose()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Synchronous counterpart of ``aclose`` (for clients used via ``complete_sync``)."""
        if self._sync_loop is not None:
            self._sync_loop.run_until_complete(self.aclose())
            self._sync_loop.close()
            self._sync_loop = None

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete_sync(self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> Completion:
        """Blocking ``complete`` for scripts. Not usable inside a running loop (use ``await``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("complete_sync() called inside a running event loop; use `await client.complete(...)`")
        if self._sync_loop is None or self._sync_loop.is_closed():
            self._sync_loop = asyncio.new_event_loop()
        return self._sync_loop.run_until_complete(self.complete(messages, params, prompt_version=prompt_version))

    # ---- the call

    def _redact(self, text: str) -> str:
        """Replace the API key's value, wherever it appears, by ``***``."""
        env = self.endpoint.api_key_env
        if env:
            key = os.environ.get(env)
            if key and len(key) >= 4:
                text = text.replace(key, "***")
        return text

    def _price(self, completion: Completion) -> float | None:
        """Cost by the configured model name, or by the reported name if only that is priced."""
        cost = self.prices.cost(self.endpoint.model, completion.usage)
        if cost is None and completion.model and self.prices.get(self.endpoint.model) is None:
            cost = self.prices.cost(completion.model, completion.usage)
        return cost

    def _estimate(self, messages: list[dict[str, Any]], params: GenParams) -> tuple[int, float | None]:
        """(estimated max tokens of the call, its max cost) for rate limiting and budgets."""
        n_in = estimate_input_tokens(_messages_text(messages))
        n_out = params.max_tokens or DEFAULT_ESTIMATE_OUTPUT_TOKENS
        return n_in + n_out, self.prices.max_cost(self.endpoint.model, n_in, n_out)

    async def complete(self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> Completion:
        """One model answer: from the cache, or from the endpoint with retries."""
        key = cache_key(self.endpoint, messages, params, prompt_version=prompt_version) if self.cache is not None else None
        if self.cache is not None and key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                repriced = self._price(hit)
                hit.cost = repriced if repriced is not None else hit.cost
                self.cost_meter.record(hit.cost, cached=True)
                return hit

        est_tokens, est_cost = self._estimate(messages, params)
        if self.max_cost is not None and est_cost is None:
            raise LLMConfigError(
                f"max_cost is set but there is no price for {self.endpoint.describe()}; "
                "add it to prices.csv or a CSV named by $CRESOWLVE_PRICES"
            )
        reserved = est_cost or 0.0
        res = self._resources()
        async with res.sem:  # reserve only once admitted, so queued calls hold no budget
            self.cost_meter.reserve(reserved, self.max_cost)
            try:
                completion = await self._with_retries(res, messages, params, est_tokens)
            finally:
                self.cost_meter.release(reserved)

        completion.cost = self._price(completion)
        self.cost_meter.record(completion.cost, cached=False)
        if self.cache is not None and key is not None and completion.text.strip():
            self.cache.put(key, completion, model=self.endpoint.model, prompt_version=prompt_version)
        return completion

    def _delay(self, attempt: int, failure: _Failure) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, MAX_RETRY_AFTER_S)
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return ceiling * random.uniform(0.5, 1.0)

    async def _with_retries(
        self, res: _Resources, messages: list[dict[str, Any]], params: GenParams, est_tokens: int
    ) -> Completion:
        ep = self.endpoint
        last: _Failure | None = None
        for attempt in range(1, self.max_attempts + 1):
            key = ep.api_key()  # LLMConfigError if the variable is missing: not retried
            if res.rpm is not None:
                await res.rpm.acquire(1)
            if res.tpm is not None:
                await res.tpm.acquire(est_tokens)
            started = time.monotonic()
            try:
                self.requests_sent += 1
                completion = await self._send(res, key, messages, params)
            except (LLMError, BudgetExceeded):
                raise
            except Exception as exc:  # classified below; unknown errors are not retried
                if res.tpm is not None:
                    res.tpm.adjust(-est_tokens)
                last = _classify(exc)
                last.message = self._redact(last.message)
                if not last.retryable:
                    if last.status is not None:
                        raise LLMFatalError(f"{ep.describe()} failed with {last.message}") from None
                    raise LLMError(f"{ep.describe()} failed: {last.message}") from None
                if attempt < self.max_attempts:
                    delay = self._delay(attempt, last)
                    log.info(
                        "%s: %s (attempt %d/%d); retrying in %.2fs",
                        ep.describe(), last.message, attempt, self.max_attempts, delay,
                    )
                    await asyncio.sleep(delay)
                continue
            completion.latency_s = time.monotonic() - started
            if res.tpm is not None:
                used = (completion.usage.input_tokens or 0) + (completion.usage.output_tokens or 0)
                res.tpm.adjust((used or est_tokens) - est_tokens)
            return completion
        assert last is not None
        raise LLMError(
            f"{ep.describe()}: gave up after {self.max_attempts} attempts; last error: {last.message}"
        )

    async def _send(
        self, res: _Resources, key: str, messages: list[dict[str, Any]], params: GenParams
    ) -> Completion:
        """One HTTP attempt through the SDK's generic ``post``; raises SDK errors or BadResponse."""
        path, body = build_request(self.endpoint.model, messages, params)
        shard = res.pick()
        if shard.oai.api_key != key:  # the variable may change between calls; the SDK sends it as a header
            shard.oai.api_key = key
        shard.in_flight += 1
        try:
            resp = await shard.oai.post(path, cast_to=httpx2.Response, body=body)
        finally:
            shard.in_flight -= 1
        completion = _PARSERS[path](_load_json(resp.text))
        if not completion.text.strip() and completion.raw.get("finish_reason") != "length":
            raise BadResponse("response has empty text")
        return completion
