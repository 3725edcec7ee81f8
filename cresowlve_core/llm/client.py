"""``LLMClient``: the one way every notebook and script calls a model.

::

    async with LLMClient(Endpoint(base_url, "gpt-4.1-mini", "OPENAI_API_KEY"), concurrency=16,
                         cache=ResponseCache()) as llm:
        c = await llm.complete([{"role": "user", "content": "2+2?"}], GenParams(), prompt_version="v1")

The client owns what every provider shares: connection pools, retries, deadlines, the circuit
breaker, the cache, rate limits and cost. What a request looks like on the wire (paths, bodies,
parsing, error classification) belongs to the endpoint's wire format
(:mod:`cresowlve_core.llm.wire`; the OpenAI one, with its API rules, is
:mod:`cresowlve_core.llm.openai_wire`). It implements :class:`~cresowlve_core.llm.types.ChatModel`.

Usage is recorded exactly as reported (``None`` where absent), never estimated; the output count is
every billed output token: a ``total_tokens`` above input + output (Gemini's thinking tokens, left out
of its ``completion_tokens``) adds the difference to it (``raw["uncounted_output_tokens"]``, one
WARNING per client). A count or a
cost that is not a usable number (NaN, infinite, negative, a bool, a string) is unknown
(``None``; named in ``raw["unusable_numbers"]``), with one WARNING per client. A body that is
not valid UTF-8 is decoded with U+FFFD in place of the bad bytes, as is a lone UTF-16 surrogate
escaped in its JSON (``\\udcaf``, which no UTF-8 file can hold), and the answer is kept, flagged
``raw["invalid_utf8"]`` (one WARNING per client); it is never a sign of a dead endpoint.

Retries: up to ``max_attempts`` with jittered exponential backoff (``backoff_base_s``·2^k, at
most ``backoff_cap_s``) on what the wire format calls retryable (for OpenAI: 408, 409, 429, 5xx,
timeouts, connection errors, unusable 200 answers); ``Retry-After`` is honoured. A request
problem (context too long) raises :class:`LLMError` at once, for this unit only; a
configuration problem (wrong key, model, endpoint) raises :class:`LLMFatalError`. An error
object inside a 200 (OpenRouter) is classified by its code as that status would be (402 stops
the run, 429 is a rate limit, 5xx is retried).

A provider that refuses a request field by name (a 400 "Unsupported value: 'temperature'",
"Unsupported parameter: 'max_tokens' ... use 'max_completion_tokens'", Gemini's 'Unknown name
"seed"'; the fields in ``openai_wire.ADAPTABLE``) gets the same request once more with exactly
that field dropped or renamed; the client keeps the adaptation for every later call
(:attr:`LLMClient.adaptations`, recorded by stages in the manifest as ``adapted``) and logs one
WARNING. A refused value it cannot adapt stays fatal, naming the flag that sets it.

Outcomes (``Completion.outcome``, docs/providers.md): a refusal (``refused``) and the provider's
filter (``filtered``, a ``finish_reason: content_filter``, an incomplete Responses body or
Azure's content-filter 400) are the model's final behaviour on the item: returned after one
call, never retried, and cached as what they are, so a rerun asks again for nothing. A
Responses body with ``status: "failed"`` is retried like a 5xx; when the retries give up the
:class:`LLMError` has ``outcome == "failed"`` and the provider's reason. An answer cut off by
the token limit (``truncated``) is returned as is, not retried, even when it is empty. A call keeps its
concurrency slot while it backs off, so a rate-limited endpoint is not hit harder. Each retry
is logged at DEBUG; one INFO line per ``retry_log_interval_s`` (60 s) sums them up.

Timeouts: ``timeout_s`` bounds each network read (and connecting, at most 10 s);
``deadline_s`` (optional) bounds one whole attempt, so a server that drips a byte a second is
cut off too. A deadline hit is a retryable timeout.

A dead endpoint is found quickly (:class:`LLMEndpointDown`, a fatal error that stops a run): a
refused connection or a failed DNS lookup before any answer arrived, or ``down_after``
consecutive signs of death (refused, DNS, bodies that are not JSON such as HTML pages) at any
time. After that every call fails at once without a request.

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
without a price stops the run at its first call (``BudgetUnenforceable``, exit 3), unless its provider
reports each call's cost. On such a provider, or with no price, a budgeted run's calls go one at a
time until the first answer shows what the provider charges. A reported cost above its call's
bound (the table's price of the tokens asked for) scales every later call's bound by that ratio
(a WARNING the first time); with no price at all, each call holds the largest reported cost so far
(one WARNING: an estimate, not a bound), and an answer that then reports no cost stops the run
(``BudgetUnenforceable``, exit 3: the budget cannot be enforced); so does an answer of a priced model without
usable token counts (no ``usage``, or counts that are not numbers), whose cost is unknown too, and
so does an answer billed with no text whose cost is unknown (it was spent). A
request the provider refused with an HTTP error (Azure's content-filter 400) generated nothing and
stops nothing. Spending that still passes the budget (calls
in flight cost more than they held) is logged once and kept in ``CostMeter.over_budget``.

Secrets: the API key is read from the environment at every call and sent only as a header.
It (and every credential-like variable) is scrubbed from error messages, logs, returned
answers and cache entries; credentials in the base URL never appear in messages.

Connections: ``concurrency`` calls really run in flight, each on its own keep-alive
connection of the transport (:mod:`cresowlve_core.llm.http`: aiohttp with
``TCPConnector(limit=concurrency)``, the JSON parsed once by the wire format). Proxies from the
environment are honoured. The transport belongs to the event loop it was created in; a client
used from a new loop opens a new one. ``transport_factory`` swaps the HTTP stack (a test double,
another library): it is called as ``factory(base_url, concurrency=, connect_timeout=,
read_timeout=, first_byte_timeout=)`` and returns a :class:`~cresowlve_core.llm.http.Transport`.

Connection-level silence (a server that accepts and closes, or sends no byte within
``first_byte_timeout_s`` or ``timeout_s``) is a dead sign too, but it may hit every call in flight
at once during a blip: it trips the breaker only after ``down_after`` in a row that also span
``down_window_s`` (10 s) without a success in between.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cresowlve_core.failures import InputError
from cresowlve_core.llm.cache import ResponseCache, cache_key
from cresowlve_core.llm.http import Transport, TransportFactory, open_transport
from cresowlve_core.llm.openai_wire import (  # re-exported: callers import these from here
    RATE_LIMIT_ATTEMPTS,
    BadResponse,
    _content_text,
    build_request,
    messages_to_prompt,
    parse_chat,
    parse_completions,
    parse_responses,
    parse_retry_after,
    recheck_stored_numbers,
    split_think,
)
from cresowlve_core.llm.pricing import PRICES_ENV, CostMeter, PriceTable, estimate_input_tokens, usd
from cresowlve_core.llm.ratelimit import AsyncTokenBucket
from cresowlve_core.llm.types import (
    CONCURRENCY,
    NOT_AN_ANSWER,
    BudgetExceeded,
    BudgetUnenforceable,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMEndpointDown,
    LLMError,
    LLMFatalError,
)
from cresowlve_core.llm.wire import AttemptFailed, Failure, adapt_body, get_wire, has_field
from cresowlve_core.secrets import find_secret_values, redact, strip_url_credentials

log = logging.getLogger(__name__)

DEFAULT_ESTIMATE_OUTPUT_TOKENS = 4096
MAX_RETRY_AFTER_S = 300.0
_UA = {"User-Agent": "cresowlve-core", "Accept": "application/json"}

__all__ = [
    "BadResponse", "LLMClient", "build_request", "messages_to_prompt", "parse_chat", "parse_completions",
    "parse_responses", "parse_retry_after", "split_think",
]


def _messages_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages)


def call_bound(prices: PriceTable, model: str, messages: list[dict[str, Any]], params: GenParams, *,
               batch: bool = False) -> tuple[int, float | None]:
    """(the most tokens one call can use, its most cost: ``None`` with no price) for rate limits and
    budgets: input ≈ characters/3, output = ``max_tokens`` (4096 when unset)."""
    n_in = estimate_input_tokens(_messages_text(messages))
    n_out = params.max_tokens or DEFAULT_ESTIMATE_OUTPUT_TOKENS
    return n_in + n_out, prices.max_cost(model, n_in, n_out, batch=batch)


def _refused_request(c: Completion) -> bool:
    """A reply to a request the provider refused with an HTTP error status (Azure's content-filter 400,
    read as ``filtered``): no answer was generated, so no cost is missing."""
    status = c.raw.get("status_code")
    return isinstance(status, int) and status >= 400


#: what lets a budgeted run get past an answer whose cost is not known
_WITHOUT_THE_BUDGET = ("run without the budget (--max-cost, --judge-max-cost for the judge) to record such costs "
                       "as unknown")


def _usage_shown(c: Completion) -> str:
    """The token counts an answer reported, as a message shows them (``input_tokens=None, ...``), with the
    numbers that were not usable."""
    odd = c.raw.get("unusable_numbers")
    counts = f"input_tokens={c.usage.input_tokens}, output_tokens={c.usage.output_tokens}"
    return f"{counts}; not usable: {', '.join(map(str, odd))}" if odd else counts


def _url_credentials(url: str) -> list[str]:
    """The secret parts of a URL (the password of ``user:pass@``, ``?api-key=...`` values), longest first."""
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    stripped = strip_url_credentials(url)
    if stripped != url:  # a key-like query parameter: take its raw value
        for pair in parts.query.split("&"):
            name, _, value = pair.partition("=")
            if value and strip_url_credentials(f"?{name}={value}") != f"?{name}={value}":
                found.append(value)
    return sorted({x for x in found if len(x) >= 4}, key=len, reverse=True)


@dataclass
class _Resources:
    """Per-event-loop objects: the connection pool, the concurrency semaphore, the limiters."""

    loop: asyncio.AbstractEventLoop
    transport: Transport
    sem: asyncio.Semaphore
    rpm: AsyncTokenBucket | None
    tpm: AsyncTokenBucket | None
    #: the transport's optional ``start()``: made ready before an attempt's deadline runs
    start: Callable[[], Awaitable[None]] | None = None
    #: held by the one call in flight while a budgeted call waits for what the provider charges (LLMClient._goes_alone)
    uncosted: asyncio.Lock = field(default_factory=asyncio.Lock)


class _RetryLog:
    """Retries at DEBUG, plus one INFO line per interval with the counts by reason."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.counts: Counter[str] = Counter()
        self.total = 0
        self._since = time.monotonic()

    def note(self, where: str, failure: Failure, attempt: int, max_attempts: int, delay: float) -> None:
        self.total += 1
        self.counts[failure.reason or "error"] += 1
        log.debug("%s: %s (attempt %d/%d); retrying in %.2fs", where, failure.message, attempt, max_attempts, delay)
        if time.monotonic() - self._since >= self.interval_s:
            self.flush(where)

    def flush(self, where: str) -> None:
        if self.counts:
            n = sum(self.counts.values())
            detail = ", ".join(f"{r}: {c}" for r, c in self.counts.most_common())
            log.info("%s: %d retr%s in the last %.0f s (%s)", where, n, "y" if n == 1 else "ies",
                     time.monotonic() - self._since, detail)
        self.counts.clear()
        self._since = time.monotonic()


class LLMClient:
    """Concurrent, retrying, caching, cost-accounting client for one endpoint (a ChatModel).

    Use as ``async with`` (or ``with`` together with ``complete_sync``). A client may be used
    from several event loops in turn; it keeps one connection pool per loop.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        concurrency: int = CONCURRENCY,
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
        deadline_s: float | None = None,
        down_after: int = 5,
        down_window_s: float = 10.0,
        first_byte_timeout_s: float | None = None,
        retry_log_interval_s: float = 60.0,
        transport_factory: TransportFactory | None = None,
    ) -> None:
        if concurrency < 1:
            raise InputError("concurrency must be >= 1")
        if max_attempts < 1:
            raise InputError("max_attempts must be >= 1")
        if down_after < 1:
            raise InputError("down_after must be >= 1")
        if urlsplit(endpoint.base_url).scheme not in ("http", "https") or not urlsplit(endpoint.base_url).hostname:
            raise LLMConfigError(f"the base URL must be an http(s) URL, got {strip_url_credentials(endpoint.base_url)!r}")
        self.endpoint = endpoint
        self.profile = endpoint.profile  # what this provider accepts (llm/profiles.py)
        self.wire = get_wire(endpoint.wire)
        # a server that decodes fewer calls at once (the embedded model's slots) would queue the rest, their
        # wait counted against the read timeout: it is sent no more than it decodes
        self.concurrency = min(concurrency, self.profile.max_in_flight or concurrency)
        self.rpm = rpm
        self.tpm = tpm
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.down_after = down_after
        self.down_window_s = down_window_s
        self.first_byte_timeout_s = first_byte_timeout_s
        self.transport_factory = transport_factory or open_transport
        self.cache = cache
        self.prices = prices if prices is not None else PriceTable.load()
        self.max_cost = max_cost
        self.cost_meter = cost_meter if cost_meter is not None else CostMeter()
        if max_cost is not None:
            self.cost_meter.budget = max_cost
        #: how far the provider's reported costs have gone above their calls' bounds from the price
        #: table (>= 1): scales the bound that a call holds of the budget while in flight
        self._cost_scale = 1.0
        #: the largest cost the provider reported for one call: what a call holds when there is no price
        self._largest_reported = 0.0
        self._price_seen = False  # an answer showed what the provider charges (see _goes_alone)
        #: why no further call may be sent under the budget, and what lets a run get further (None: it may)
        self._unenforceable: tuple[str, str] | None = None
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.requests_sent = 0  # HTTP attempts made by this client (all loops)
        self.retries = _RetryLog(retry_log_interval_s)
        self._res: _Resources | None = None
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._targets: dict[str, str] = {}
        self._secret_cache: tuple[str | None, list[str]] | None = None
        self._url_secrets = _url_credentials(endpoint.base_url)
        self._ever_answered = False  # any HTTP response at all: the endpoint exists
        self._dead_streak = 0
        self._streak_since = 0.0  # monotonic time of the first dead sign of the current streak
        self._down: str | None = None
        self._warned: set[str] = set()  # the odd replies already logged once (see _note_odd)
        #: request fields the provider refused by name and this client now drops or renames in every
        #: call: ``{field, action, to, reason}`` (a stage records them in its manifest as ``adapted``)
        self.adaptations: list[dict[str, Any]] = []

    # ---- lifecycle

    def _resources(self) -> _Resources:
        loop = asyncio.get_running_loop()
        if self._res is not None and self._res.loop is loop:
            return self._res
        if self._res is not None and (abandon := getattr(self._res.transport, "abandon", None)) is not None:
            abandon()  # the transport of another (finished) loop
        transport = self.transport_factory(self.endpoint.base_url, concurrency=self.concurrency,
                                           connect_timeout=min(10.0, self.timeout_s), read_timeout=self.timeout_s,
                                           first_byte_timeout=self.first_byte_timeout_s)
        self._res = _Resources(
            loop=loop,
            transport=transport,
            start=getattr(transport, "start", None),
            sem=asyncio.Semaphore(self.concurrency),
            rpm=AsyncTokenBucket(self.rpm) if self.rpm else None,
            tpm=AsyncTokenBucket(self.tpm) if self.tpm else None,
        )
        return self._res

    async def aclose(self) -> None:
        """Close the connection pool of the current loop, write the cache's waiting answers (and log the
        retries not yet summed up)."""
        self.retries.flush(self.endpoint.describe())
        if self.cache is not None:
            self.cache.flush()
        res, self._res = self._res, None
        if res is not None and res.loop is asyncio.get_running_loop():
            await res.transport.aclose()
        elif res is not None and (abandon := getattr(res.transport, "abandon", None)) is not None:
            abandon()  # a transport of another (finished) loop is simply dropped

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

    # ---- helpers

    def _secrets(self) -> list[str]:
        """Values never to show or store: the key variable (whatever its name) and credential-like
        ones (looked up again whenever the key's value changes)."""
        env = self.endpoint.api_key_env
        current = os.environ.get(env) if env else None
        if self._secret_cache is None or self._secret_cache[0] != current:
            self._secret_cache = (current, find_secret_values([env] if env else None))
        return self._secret_cache[1]

    def _redact(self, text: str) -> str:
        """Replace key values and URL credentials (wherever they appear) in ``text``."""
        return strip_url_credentials(redact(text, self._secrets() + self._url_secrets))

    def _redact_completion(self, c: Completion, secrets: list[str]) -> Completion:
        hits = [s for s in secrets if s in c.text or (c.thoughts and s in c.thoughts) or (c.refusal and s in c.refusal)
                or s in str(c.raw)]
        if hits:
            c.text = redact(c.text, hits)
            c.thoughts = redact(c.thoughts, hits) if c.thoughts else c.thoughts
            c.refusal = redact(c.refusal, hits) if c.refusal else c.refusal
            c.raw = json.loads(redact(json.dumps(c.raw, ensure_ascii=False), hits))
        return c

    def _target(self, path: str) -> str:
        """The request target (path and query) of ``path``; a query in the base URL
        (``?api-version=``) is kept at the end."""
        target = self._targets.get(path)
        if target is None:
            parts = urlsplit(self.endpoint.base_url)
            target = parts.path.rstrip("/") + path + (f"?{parts.query}" if parts.query else "")
            self._targets[path] = target
        return target

    def _price(self, completion: Completion) -> float | None:
        """The cost the provider reported for the call, else the price table's by the configured
        model name, or by the reported name if only that is priced."""
        if completion.reported_cost is not None:
            return completion.reported_cost
        cost = self.prices.cost(self.endpoint.model, completion.usage)
        if cost is None and completion.model and self.prices.get(self.endpoint.model) is None:
            cost = self.prices.cost(completion.model, completion.usage)
        return cost

    def _estimate(self, messages: list[dict[str, Any]], params: GenParams) -> tuple[int, float | None]:
        """(estimated max tokens of the call, its max cost) for rate limiting and budgets."""
        return call_bound(self.prices, self.endpoint.model, messages, params)

    def _check_up(self) -> None:
        if self._down is not None:
            raise LLMEndpointDown(self._down)

    def _note_failure(self, failure: Failure) -> None:
        """Count signs of a dead endpoint; trip the breaker (raise) when they say it is down."""
        if failure.dead_sign is None:
            if failure.status is not None:  # a real API answered: the endpoint is alive
                self._ever_answered = True
                self._dead_streak = 0
            return
        if failure.status is not None:
            self._ever_answered = True
        now = time.monotonic()
        if self._dead_streak == 0:
            self._streak_since = now
        self._dead_streak += 1
        first_contact = failure.dead_sign == "unreachable" and not self._ever_answered
        # connection-level silence (accepted then closed, no answer in time) may be a blip that
        # hits every call in flight at once: it must also last down_window_s without a success
        lasted = failure.dead_sign != "no_answer" or now - self._streak_since >= self.down_window_s
        if first_contact or (self._dead_streak >= self.down_after and lasted):
            why = (failure.message if first_contact
                   else f"{self._dead_streak} failures in a row over {now - self._streak_since:.0f} s, the last: "
                        f"{self._redact(failure.message)}")
            check = ("check the proxy settings (HTTPS_PROXY, HTTP_PROXY, NO_PROXY)" if failure.reason.startswith("proxy")
                     else "check the base URL and that the server is running")
            self._down = f"{self.endpoint.describe()} looks down ({why}); stopped without further requests: {check}"
            raise LLMEndpointDown(self._down)

    # ---- the call

    async def complete(self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> Completion:
        """One model answer: from the cache, or from the endpoint with retries."""
        key = cache_key(self.endpoint, messages, params, prompt_version=prompt_version) if self.cache is not None else None
        if self.cache is not None and key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self._learn_cached_adaptations(hit)
                stored_odd = hit.raw.get("unusable_numbers")
                if recheck_stored_numbers(hit).raw.get("unusable_numbers") != stored_odd:
                    self._note_odd(hit)  # numbers an earlier version stored, unusable by today's rules
                repriced = self._price(hit)
                hit.cost = repriced if repriced is not None else hit.cost
                self.cost_meter.record(hit.cost, cached=True)
                return hit

        self._check_up()
        if self._unenforceable is not None:
            raise BudgetUnenforceable(*self._unenforceable)
        est_tokens, est_cost = self._estimate(messages, params)
        if self.max_cost is not None and est_cost is None and self.profile.cost_field is None:
            raise BudgetUnenforceable(f"max_cost is set but there is no price for {self.endpoint.describe()}, and "
                                      f"provider {self.profile.name!r} reports no cost",
                                      f"add its price to prices.csv or a CSV named by ${PRICES_ENV}")
        path, asked = self.wire.build_request(self.endpoint.model, messages, params, self.profile)
        body = adapt_body(asked, self.adaptations)
        res = self._resources()
        async with res.sem:  # reserve only once admitted, so queued calls hold no budget
            alone = self._goes_alone(est_cost) and await self._alone_until_the_price_is_seen(res)
            try:
                if self._unenforceable is not None:  # an answer seen while this call waited its turn
                    raise BudgetUnenforceable(*self._unenforceable)
                reserved = self._reservation(est_cost)
                self.cost_meter.reserve(reserved, self.max_cost)
                try:
                    completion = await self._with_retries(res, path, body, est_tokens)
                finally:
                    self.cost_meter.release(reserved)
                completion.cost = self._price(completion)
                self._learn_reported_cost(completion, est_cost)
                # a refused or filtered reply (OpenRouter's filter reports cost 0) shows nothing of what an answer costs
                self._price_seen = self._price_seen or est_cost is not None or (
                    completion.reported_cost is not None and completion.outcome not in NOT_AN_ANSWER)
            finally:
                if alone:
                    res.uncosted.release()
            if self.max_cost is not None and completion.cost is None and not _refused_request(completion):
                self._unenforceable = (
                    (f"max_cost is set, {self.endpoint.describe()} has no price and it reported no cost for an answer, "
                     "so the budget cannot be enforced", f"add its price to a CSV named by ${PRICES_ENV}") if est_cost is None
                    else (f"max_cost is set and {self.endpoint.describe()} reported no usable token counts for an answer "
                          f"(usage {_usage_shown(completion)}), so its cost is unknown and the budget cannot be enforced",
                          _WITHOUT_THE_BUDGET))

        if made_without := [dict(a) for a in self.adaptations if has_field(asked, a["field"])]:
            completion.raw["adapted"] = made_without  # kept with the answer in the cache, for a later hit
        self._note_odd(completion)
        self.cost_meter.record(completion.cost, cached=False)
        self._note_over_budget()
        secrets = self._secrets()
        self._redact_completion(completion, secrets)
        if self.cache is not None and key is not None:  # the cache keeps what is worth replaying (cache.py)
            self.cache.put(key, completion, model=self.endpoint.model, prompt_version=prompt_version,
                           secrets=secrets, deferred=True)  # written in groups; the rest at aclose
        return completion

    def _learn_cached_adaptations(self, hit: Completion) -> None:
        """Take on the adaptations a cached answer was made with (``raw["adapted"]``: fields the
        provider refused and the client dropped or renamed), so that this run's manifest records
        them as a run that sent the request would, with one WARNING per field."""
        for a in hit.raw.get("adapted") or []:
            if isinstance(a, dict) and a.get("field") and all(x["field"] != a["field"] for x in self.adaptations):
                self.adaptations.append(dict(a))
                log.warning("%s: an answer from the cache was made without %r, which the provider refused (%s); "
                            "the manifest records it as 'adapted'", self.endpoint.describe(), a["field"],
                            self._redact(str(a.get("reason") or "")))

    def _goes_alone(self, bound: float | None) -> bool:
        """Whether a budgeted call must wait for what the provider charges to be seen first: with no
        price, or a provider that reports its own costs (which may exceed the table's)."""
        return (self.max_cost is not None and not self._price_seen
                and (bound is None or self.profile.cost_field is not None))

    async def _alone_until_the_price_is_seen(self, res: _Resources) -> bool:
        """Calls go one at a time until one answer shows what the provider charges: a reported cost,
        or, for a priced model, any answer (:meth:`_reservation` then bounds the calls in flight).
        True: this call holds ``res.uncosted``, to release when it is done."""
        await res.uncosted.acquire()
        if self._price_seen:  # the call before this one saw it
            res.uncosted.release()
            return False
        return True

    def _reservation(self, bound: float | None) -> float:
        """What a call holds of the budget while in flight: the price table's upper bound, scaled by
        how far the provider's reported costs have exceeded the table; with no price, the largest
        cost the provider has reported for one call (an estimate, not a bound)."""
        if bound is not None:
            return bound * self._cost_scale
        if self.max_cost is not None and "unbounded" not in self._warned:
            self._warned.add("unbounded")
            log.warning("%s has no price in prices.csv: the budget of %s is checked against the costs the "
                        "provider reports: calls go one at a time until one is reported, then each holds the largest "
                        "cost reported so far, an estimate that calls in flight may exceed; a price in a CSV named "
                        "by $%s bounds them", self.endpoint.describe(), usd(self.max_cost), PRICES_ENV)
        return self._largest_reported

    def _learn_reported_cost(self, completion: Completion, bound: float | None) -> None:
        """Keep what the provider's reported cost says about the calls still to come (see
        :meth:`_reservation`): the largest cost of one call, and how many times the table's ``bound``
        of its call the largest one was (a dearer price than the table's, or more tokens than asked for)."""
        reported = completion.reported_cost  # finite and >= 0 (the wire's reported_cost)
        if reported is None:
            return
        self._largest_reported = max(self._largest_reported, reported)
        if not bound or reported <= bound * self._cost_scale:
            return
        self._cost_scale = reported / bound
        if self.max_cost is not None:
            first = "scale" not in self._warned
            self._warned.add("scale")
            log.log(logging.WARNING if first else logging.DEBUG, "%s reported a cost of $%.6f for a call whose bound from prices.csv was $%.6f: each later call "
                        "holds its bound times %.2f of the budget", self.endpoint.describe(), reported, bound,
                        self._cost_scale)

    def _charge_unusable(self, paid: Completion) -> None:
        """Count what an answer the provider billed but the client could not use cost (a 200 with no
        text, e.g. a reasoning model whose reasoning used the whole answer): spent money, with one
        WARNING per client."""
        cost = self._price(paid)
        self.cost_meter.charge_unusable(cost)
        if self.max_cost is not None and cost is None:  # spent, but how much is not known: the budget cannot hold it
            self._unenforceable = (
                f"max_cost is set and {self.endpoint.describe()} billed an answer with no text whose cost is unknown "
                f"(usage {_usage_shown(paid)}), so the budget cannot be enforced", _WITHOUT_THE_BUDGET)
            raise BudgetUnenforceable(*self._unenforceable)
        if "unusable" not in self._warned:
            self._warned.add("unusable")
            log.warning("%s answered with no text (finish_reason %s, %s output token(s), %s of reasoning), billed at %s: "
                        "retried, and each such attempt's cost counts as spent; if the reasoning uses the whole "
                        "answer, raise --max-tokens", self.endpoint.describe(), paid.raw.get("finish_reason"),
                        paid.usage.output_tokens, paid.usage.reasoning_tokens,
                        "an unknown cost" if cost is None else usd(cost))

    def _note_over_budget(self) -> None:
        """One WARNING when this role's spending passes its budget (calls in flight when it stopped cost more than they held)."""
        over = self.cost_meter.over_budget
        if over > 0 and "over_budget" not in self._warned:
            self._warned.add("over_budget")
            log.warning("%s: spent %s, over the budget of %s by %s: calls in flight cost more than they held of it",
                        self.endpoint.describe(), usd(self.cost_meter.spent), usd(self.cost_meter.budget or 0.0), usd(over))

    def _note_odd(self, completion: Completion) -> None:
        """One WARNING per client for each kind of odd reply: numbers that are not usable (recorded
        as unknown) and bytes that are not UTF-8 or lone surrogates (replaced; the answer is kept and flagged)."""
        odd = completion.raw.get("unusable_numbers")
        if odd and "numbers" not in self._warned:
            self._warned.add("numbers")
            field = self.profile.cost_field
            priced = completion.cost is not None and any(str(o).startswith(f"{field}=") for o in odd)
            log.warning("%s reported usage that is not a usable number (%s): recorded as unknown (null)%s; "
                        "further ones are not logged", self.endpoint.describe(), ", ".join(map(str, odd)),
                        f", and the cost is the price table's in place of {field} (cost_source price_table)"
                        if priced else "")
        uncounted = completion.raw.get("uncounted_output_tokens")
        if uncounted and "uncounted" not in self._warned:
            self._warned.add("uncounted")
            log.warning("%s reported total_tokens above its input and output counts (%d output tokens, such as "
                        "Gemini's thinking, left out of %d): they are counted as output tokens and priced as such "
                        "(raw.uncounted_output_tokens); further ones are not logged", self.endpoint.describe(),
                        uncounted, (completion.usage.output_tokens or 0) - uncounted)
        if completion.raw.get("invalid_utf8") and "utf8" not in self._warned:
            self._warned.add("utf8")
            log.warning("%s sent an answer holding bytes that are not UTF-8 or a lone UTF-16 surrogate: decoded with "
                        "U+FFFD in their place, "
                        "the answer kept and flagged (raw.invalid_utf8); further ones are not logged",
                        self.endpoint.describe())

    def _delay(self, attempt: int, failure: Failure) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, MAX_RETRY_AFTER_S)
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return ceiling * random.uniform(0.5, 1.0)

    def _adapt(self, failure: Failure, body: dict[str, Any], tried: set[str]) -> dict[str, Any] | None:
        """``body`` adapted to the field the provider refused by name (dropped or renamed), or None
        when it cannot be: not in this body, already adapted in this call, or the target of an
        earlier rename. The first time, the adaptation is kept for every later call, with one WARNING."""
        a = failure.adaptation
        if a is None or a["field"] in tried or not has_field(body, a["field"]) \
                or any(x.get("to") == a["field"] for x in self.adaptations):
            return None
        tried.add(a["field"])
        if all(x["field"] != a["field"] for x in self.adaptations):
            self.adaptations.append(dict(a))
            what = f"renamed to {a['to']!r}" if a["action"] == "rename" else "no longer sent (the provider's default)"
            log.warning("%s refused %r (%s): %s in this and every later call; the manifest records it as 'adapted'",
                        self.endpoint.describe(), a["field"], self._redact(str(a["reason"])), what)
        return adapt_body(body, [a])

    def _remedy(self, failure: Failure) -> str | None:
        """What to change before the same command can get past ``failure``, a fatal answer about the key,
        the account or the model; None for the others (the wire format names theirs: ``Failure.remedy``)."""
        ep = self.endpoint
        key = f"the key in ${ep.api_key_env}" if ep.api_key_env else "the endpoint's key"
        if failure.reason == "quota":
            return f"add credit or quota to the account of {key}, or set another key"
        if failure.status == 401:
            return f"set a valid key in ${ep.api_key_env}" if ep.api_key_env else \
                "name the variable that holds the endpoint's key (--api-key-env; --judge-api-key-env for a judge)"
        if failure.status == 403:
            return f"check that {key} may use model {ep.model!r}"
        if failure.status == 404:
            return f"check the model name {ep.model!r} and the base URL (the endpoint does not serve them)"
        return None

    async def _with_retries(self, res: _Resources, path: str, body: dict[str, Any], est_tokens: int) -> Completion:
        ep = self.endpoint
        last: Failure | None = None
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        tried: set[str] = set()  # fields adapted during this call (each is tried once)
        attempt, limit = 0, self.max_attempts
        while attempt < limit:
            attempt += 1
            self._check_up()
            key = ep.api_key()  # LLMConfigError if the variable is missing: not retried
            if res.rpm is not None:
                await res.rpm.acquire(1)
            if res.tpm is not None:
                await res.tpm.acquire(est_tokens)
            started = time.monotonic()
            self.requests_sent += 1
            try:
                completion = await self._send(res, key, path, content)
            except AttemptFailed as exc:
                last = exc.failure
            except (LLMError, BudgetExceeded):
                raise
            except Exception as exc:  # transport errors: classified by the wire format
                last = self.wire.classify_exception(exc)
            else:
                completion.latency_s = time.monotonic() - started
                self._ever_answered = True
                self._dead_streak = 0
                if res.tpm is not None:
                    used = (completion.usage.input_tokens or 0) + (completion.usage.output_tokens or 0)
                    res.tpm.adjust((used or est_tokens) - est_tokens)
                return completion
            if res.tpm is not None:
                res.tpm.adjust(-est_tokens)
            if last.paid is not None:
                self._charge_unusable(last.paid)
            last.message = self._redact(last.message)
            self._note_failure(last)
            if last.kind == "fatal" and (adapted := self._adapt(last, body, tried)) is not None:
                body, attempt = adapted, attempt - 1  # the same request without that field: once, not an attempt
                content = json.dumps(body, ensure_ascii=False).encode("utf-8")
                continue
            if last.kind == "fatal":
                raise LLMFatalError(f"{ep.describe()} failed with {last.message}", remedy=last.remedy or self._remedy(last))
            if last.kind == "item":
                raise LLMError(f"{ep.describe()} rejected this request: {last.message}", outcome=last.outcome)
            if last.status == 429:  # a burst of rate limits is ridden out, not counted as a dead server
                limit = max(limit, RATE_LIMIT_ATTEMPTS)
            if attempt < limit:
                if last.paid is not None:  # the next attempt must fit the budget beside what this one cost
                    self.cost_meter.reserve(0.0, self.max_cost)
                delay = self._delay(attempt, last)
                self.retries.note(ep.describe(), last, attempt, limit, delay)
                await asyncio.sleep(delay)
        assert last is not None
        raise LLMError(f"{ep.describe()}: gave up after {attempt} attempts; last error: {last.message}",
                       outcome=last.outcome)

    async def _send(self, res: _Resources, key: str, path: str, content: bytes) -> Completion:
        """One HTTP attempt, bounded by ``deadline_s``; raises AttemptFailed or transport errors."""
        headers = {**self.wire.request_headers(key, self.profile), **_UA}
        target = self._target(path)
        if res.start is not None:
            await res.start()  # a transport's own start-up (worker processes) is not part of the attempt
        if self.deadline_s is None:
            resp = await res.transport.post(target, headers, content)
        else:
            try:
                async with asyncio.timeout(self.deadline_s):
                    resp = await res.transport.post(target, headers, content)
            except TimeoutError:
                raise AttemptFailed(Failure("retry", f"no complete answer within the {self.deadline_s:g} s "
                                            "deadline", reason="deadline")) from None
        return self.wire.interpret(path, resp.status, resp.headers, resp.content, self.profile)
