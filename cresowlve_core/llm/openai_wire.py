"""The OpenAI wire format (Chat Completions, Responses, legacy completions): pure functions that
write one request, read one response and classify one failure. No I/O here.

Every request is written in the form the endpoint's provider profile accepts
(:mod:`cresowlve_core.llm.profiles`: which of ``seed``, ``temperature``, ``max_tokens`` /
``max_completion_tokens`` are sent, and how an effort is sent). Which API is used
(``GenParams.resolved_api(profile)``):

* ``chat`` (default): ``/chat/completions``. Thinking text is taken from the message's
  ``reasoning_content`` (llama.cpp, vLLM, DeepSeek) or ``reasoning`` field, and from a leading
  ``<think>…</think>`` block, which is stripped from ``text``. A lone ``</think>`` (templates
  that open the block inside the prompt) is treated the same way. With an effort set, the
  effort goes in the profile's form (``reasoning_effort``, OpenRouter's ``reasoning`` object or
  ``chat_template_kwargs.enable_thinking``), the token limit goes as ``max_completion_tokens``
  and ``temperature`` is not sent. A profile's reasoning models (OpenAI's o-series and gpt-5)
  never get a temperature and always get ``max_completion_tokens``.
* ``responses`` (the default with an effort on profiles that serve it: openai, azure):
  ``/responses`` with ``reasoning={"effort": effort, "summary": "auto"}``; reasoning summaries
  go to ``thoughts``. ``seed`` is never sent there. A profile that does not serve it refuses it
  before sending. A ``temperature`` of None is never sent: the provider's default decoding.
* ``completions``: legacy ``/completions``. A single user message is sent verbatim as the
  prompt; anything else is rendered as ``"System: …\\n\\nUser: …\\n\\nAssistant:"`` blocks.
  This API has no effort field: an effort without an ``extra_body`` that carries the server's
  own form is refused rather than silently dropped.

``params.extra`` and then ``params.extra_body`` are merged into the body (``extra_body``
recursively); a ``null`` in ``extra_body`` removes that field. If they hold
``max_completion_tokens``, ``max_tokens`` is not sent.

Failures: 408, 409, 429 and 5xx are retried (``Retry-After`` on 429/503 honoured, else OpenAI's
``x-ratelimit-reset-requests`` / ``-tokens``), as are 200
answers that are empty, not JSON, without choices or with empty text. A 400/413/422 whose
error code, type or message names a problem of *this request* (context length, content
policy or filter, invalid prompt) is an ``item`` failure: recorded for the unit, the run goes
on. Every other 4xx (a wrong model, key, endpoint or parameter) is ``fatal``. A refused
connection, a failed DNS lookup, a connect timeout and a body that is not JSON (e.g. an HTML
page) are signs of a dead endpoint, which the client counts; so is connection-level silence
(closed without a byte of an answer, or no first byte in time: ``no_answer``, which the client
weighs over a time window). A failed TLS handshake (a bad certificate, https spoken to a
plain-HTTP port, http to a TLS port) is fatal. Proxies (:func:`classify_exception`): a 407 is
fatal, an unreachable proxy is a dead sign that names the proxy, a dropped CONNECT is retried;
an answer over 64 MB after decompression is an error of that item.
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import json
import math
import re
import time
from typing import Any

from cresowlve_core.failures import CresowlveError
from cresowlve_core.llm.http import ConnectFailed, ReadTimeout, ResponseTooLarge, TransportError
from cresowlve_core.llm.profiles import PROFILES, Profile
from cresowlve_core.llm.types import ADAPTIVE, Completion, GenParams, LLMConfigError, Outcome, Usage
from cresowlve_core.llm.wire import AttemptFailed, Failure
from cresowlve_core.untrusted import one_line

RETRYABLE_STATUS = frozenset({408, 409, 429})
#: statuses whose error may name a problem of the request itself rather than of the configuration
REQUEST_PROBLEM_STATUS = frozenset({400, 413, 422})
_REQUEST_PROBLEM = re.compile(
    r"context[_ ]length|context[_ ]window|context[_ ]size|maximum context|exceed_context|too many (?:input )?tokens"
    r"|prompt is too long|input is too long|input token count|string_above_max_length|content[_ ]?filter"
    r"|content[_ ]?policy|content management|responsible ?ai|safety|flagged|moderation|invalid[_ ]prompt"
    r"|prompt[_ ]blocked|data_inspection_failed",
    re.IGNORECASE,
)
#: quota or billing exhausted: no retry can help, the run stops (OpenAI ``insufficient_quota``, OpenRouter's 402,
#: a daily quota). Matched on the error's code/type/status, never on its message alone: OpenAI's quota message
#: ("You exceeded your current quota ...") is also Gemini's per-minute rate-limit message.
_QUOTA_CODE = re.compile(r"insufficient_quota|billing_hard_limit|billing_not_active|insufficient[_ ]credits",
                         re.IGNORECASE)
_DAILY_QUOTA = re.compile(r"PerDay|per[_ ]day", re.IGNORECASE)
#: a request too long for the model, named by its error code: never retried, whatever the status
_CONTEXT_OVERFLOW = re.compile(r"exceed_context_size|context_length_exceeded", re.IGNORECASE)
#: rate limits may come in bursts: they get this many attempts at least, whatever ``max_attempts`` is
RATE_LIMIT_ATTEMPTS = 10


class BadResponse(CresowlveError):
    """A 200 response that cannot be used (empty, unparseable, no choices, empty text). ``paid``:
    the parsed answer when the provider billed it (an answer with no text: its usage says what it cost)."""

    def __init__(self, message: str, *, paid: Completion | None = None) -> None:
        super().__init__(message)
        self.paid = paid


# --------------------------------------------------------------------------- requests


def _content_text(content: Any) -> str:
    """Message content as a string (some servers return a list of typed parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def messages_to_prompt(messages: list[dict[str, Any]]) -> str:
    """The prompt for the legacy completions API (see module docstring)."""
    if len(messages) == 1 and messages[0].get("role") == "user":
        return _content_text(messages[0].get("content"))
    turns = [f"{str(m.get('role', 'user')).capitalize()}: {_content_text(m.get('content'))}" for m in messages]
    return "\n\n".join(turns) + "\n\nAssistant:"


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``extra``; nested dicts are merged, not replaced."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _token_field(profile: Profile, model: str, params: GenParams) -> str:
    if profile.token_field == "max_completion_tokens" or params.sent_effort or profile.is_reasoning_model(model):
        return "max_completion_tokens"
    return "max_tokens"


def _chat_effort(profile: Profile, effort: str | None) -> dict[str, Any]:
    """The effort fields of a Chat Completions body in the profile's own form (``effort`` is
    ``GenParams.effort``: None, an effort level, or ``adaptive``)."""
    if profile.effort_style == "openrouter":
        if effort == ADAPTIVE:
            return {"reasoning": {"enabled": True}}
        if effort in (None, "none"):
            return {"reasoning": {"enabled": False}} if effort == "none" else {}
        return {"reasoning": {"effort": effort}}
    if profile.effort_style == "template_switch":
        return {"chat_template_kwargs": {"enable_thinking": effort not in (None, "none")}}
    return {"reasoning_effort": effort} if effort not in (None, ADAPTIVE) else {}


def build_request(model: str, messages: list[dict[str, Any]], params: GenParams,
                  profile: Profile | None = None) -> tuple[str, dict[str, Any]]:
    """The API path and JSON body for one call, in the form ``profile`` accepts (default:
    ``generic``; see the module docstring and :mod:`cresowlve_core.llm.profiles`)."""
    profile = profile or PROFILES["generic"]
    api = params.resolved_api(profile)
    extra = params.extra
    extra_body = params.extra_body
    limit_given = "max_completion_tokens" in extra or "max_completion_tokens" in extra_body
    # a reasoning model takes only its default temperature; an effort implies a thinking model
    send_temperature = (params.temperature is not None and not params.sent_effort
                        and not profile.is_reasoning_model(model))
    body: dict[str, Any] = {"model": model}
    if api == "responses":
        if not profile.serves_responses:
            raise LLMConfigError(f"provider {profile.name!r} does not serve the Responses API; use --api chat")
        path = "/responses"
        body["input"] = messages
        if params.sent_effort:
            body["reasoning"] = {"effort": params.sent_effort, "summary": "auto"}
        if send_temperature:
            body["temperature"] = params.temperature
        if params.max_tokens is not None:
            body["max_output_tokens"] = params.max_tokens
    elif api == "chat":
        path = "/chat/completions"
        body["messages"] = messages
        body.update(_chat_effort(profile, params.effort))
        if send_temperature:
            body["temperature"] = params.temperature
        if params.seed is not None and profile.sends_seed:
            body["seed"] = params.seed
        if params.max_tokens is not None and not limit_given:
            body[_token_field(profile, model, params)] = params.max_tokens
    elif api == "completions":
        if params.sent_effort and not extra_body:
            raise LLMConfigError(
                f"effort {params.sent_effort!r} cannot be sent on the legacy completions API; use the chat or "
                "responses API, or give the server's own field in extra_body"
            )
        path = "/completions"
        body["prompt"] = messages_to_prompt(messages)
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.seed is not None and profile.sends_seed:
            body["seed"] = params.seed
        if params.max_tokens is not None and not limit_given:
            body["max_tokens"] = params.max_tokens
    else:
        raise LLMConfigError(f"unknown api {api!r}")
    if extra:
        body.update(extra)
    if extra_body:
        body = deep_merge(body, extra_body)
    if body.get("n") not in (None, 1):  # from extra or extra_body
        raise LLMConfigError(f"n={body['n']!r} asks for several answers per call, but one answer is read and recorded "
                             "per call (the rest would be paid for and dropped): remove n from --extra-body "
                             "(--judge-extra-body for the judge)")
    return path, _drop_nulls(body)


def _drop_nulls(body: dict[str, Any]) -> dict[str, Any]:
    """``extra_body`` values of ``null`` remove the field (at any depth): ``{"seed": null}``."""
    return {k: _drop_nulls(v) if isinstance(v, dict) else v for k, v in body.items() if v is not None}


def request_headers(api_key: str, profile: Profile | None = None) -> dict[str, str]:
    """The key (``Authorization: Bearer``, or Azure's ``api-key`` header) and the JSON content type."""
    if profile is not None and profile.auth_header == "api-key":
        return {"api-key": api_key, "Content-Type": "application/json"}
    return {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}


# --------------------------------------------------------------------------- responses


def split_think(text: str) -> tuple[str, str | None]:
    """Split a leading ``<think>…</think>`` block off ``text``: returns ``(answer, thoughts)``.

    An unclosed ``<think>`` means the whole text is thinking (the answer is empty). A closing
    ``</think>`` without an opening tag is also honoured (chat templates that open the block
    in the prompt).
    """
    if "think>" not in text:  # fast path: most answers carry no tags
        return text, None
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


#: above these, a reported number is garbage (a wrapped 32-bit integer, 1e300), not a count or a price:
#: the largest context windows hold about 10**7 tokens, and no single call costs $10,000
MAX_TOKEN_COUNT = 10**9
MAX_CALL_COST_USD = 10_000.0


def _usable_number(value: Any, limit: float, *, whole: bool) -> bool:
    """``value`` is a number a provider could mean: finite, from 0 to ``limit``, not a bool, and
    (``whole``) with no fractional part. An integer is compared as it is: one too large for a float
    (``1`` and 400 zeros, which JSON allows) is out of range, not an ``OverflowError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return 0 <= value <= limit
    return math.isfinite(value) and 0 <= value <= limit and (not whole or value.is_integer())


def _count(value: Any, name: str, odd: list[str]) -> int | None:
    """A token count as reported, or None: absent, or not a usable count (NaN, infinite, negative,
    fractional, above :data:`MAX_TOKEN_COUNT`, a bool, not a number), which is named in ``odd``."""
    if value is None:
        return None
    if not _usable_number(value, MAX_TOKEN_COUNT, whole=True):
        odd.append(f"{name}={value!r}")
        return None
    return int(value)


def _usage(u: Any, inp: str, out: str, details: str, odd: list[str], *, replied: bool) -> tuple[Usage, int | None]:
    """The usage of a reply, and its output tokens left out of the output count (None: none).

    Output tokens are every billed output token. Gemini's OpenAI-compatible endpoint leaves its
    thinking tokens out of ``completion_tokens`` (and reports no ``reasoning_tokens``) but counts
    them in ``total_tokens`` (recorded: 66 prompt, 6 completion, 100 total): when ``total_tokens``
    is above input + output, the difference is counted as output, as it is billed, and, when the
    reply gives no reasoning count, as its reasoning tokens (what the model thought).

    A count of 0 that cannot be what was billed is not usable either (named in ``odd``): 0 input
    tokens (a prompt always has some), and 0 output tokens for a reply that ``replied`` with text,
    thoughts or a refusal. Servers and gateways that do not count report such zeros (vLLM's Responses
    API for gpt-oss answered with ``input_tokens`` and ``output_tokens`` 0); a filtered reply with no
    text keeps its 0 output tokens."""
    if not isinstance(u, dict):
        return Usage(), None
    d = u.get(details)
    usage = Usage(
        input_tokens=_count(u.get(inp), inp, odd),
        output_tokens=_count(u.get(out), out, odd),
        reasoning_tokens=_count(d.get("reasoning_tokens"), "reasoning_tokens", odd) if isinstance(d, dict) else None,
    )
    if usage.input_tokens == 0:
        odd.append(f"{inp}=0 (a prompt has tokens)")
        usage.input_tokens = None
    if usage.output_tokens == 0 and replied:
        odd.append(f"{out}=0 (for a reply)")
        usage.output_tokens = None
    total = _count(u.get("total_tokens"), "total_tokens", odd)
    uncounted = None
    if total is not None and usage.input_tokens is not None and usage.output_tokens is not None \
            and total > usage.input_tokens + usage.output_tokens:
        uncounted = total - usage.input_tokens - usage.output_tokens
        usage.output_tokens += uncounted
        if usage.reasoning_tokens is None:
            usage.reasoning_tokens = uncounted
    if usage.output_tokens is not None and usage.reasoning_tokens is not None \
            and usage.reasoning_tokens > usage.output_tokens:
        # billed output holds the reasoning: an output count below it left the reasoning out (a proxy that
        # counts them apart, as LiteLLM did for QwQ: BerriAI/litellm#10691), and priced it would under-count
        odd.append(f"{out}={usage.output_tokens} (below its reasoning_tokens={usage.reasoning_tokens})")
        usage.output_tokens, uncounted = None, None
    return usage, uncounted


def recheck_stored_numbers(c: Completion) -> Completion:
    """``c``, an answer read back from the cache, with its token counts and reported cost held to the rules a
    reply's are read by (:func:`_usage`, :data:`MAX_CALL_COST_USD`): an entry an earlier version stored keeps
    numbers those rules now make unknown (0 tokens for a reply with text, a cost of 1e300, a stored cost that is
    negative or NaN). What is not usable is unknown, named in ``raw["unusable_numbers"]``, and so is the cost
    stored with it."""
    odd: list[str] = []
    u = c.usage
    c.usage, _ = _usage({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                         "details": {"reasoning_tokens": u.reasoning_tokens}}, "input_tokens", "output_tokens",
                        "details", odd, replied=bool(c.text.strip() or c.thoughts or c.refusal))
    if c.reported_cost is not None and not _usable_number(c.reported_cost, MAX_CALL_COST_USD, whole=False):
        odd.append(f"reported_cost={c.reported_cost!r}")
        c.reported_cost = None
    elif c.cost is not None and not _usable_number(c.cost, MAX_CALL_COST_USD, whole=False):
        odd.append(f"cost={c.cost!r}")  # priced by a table no longer read (a negative price an earlier version took)
    if odd:
        c.raw["unusable_numbers"] = [*(c.raw.get("unusable_numbers") or []), *odd]
        c.cost = None
    return c


def decode_body(content: bytes | str) -> tuple[str, bool]:
    """The body as text, and whether it held bytes that are not UTF-8 (decoded as U+FFFD: a
    multi-byte character cut at the token limit must not cost the answer)."""
    if isinstance(content, str):
        return content, False
    try:
        return content.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        return content.decode("utf-8-sig", "replace"), True


#: the ``charset`` parameter of a Content-Type header (``application/json; charset="windows-1251"``)
#: (a token of ASCII letters, digits and ``.:+-_``: aiohttp hands a header's bytes that are not UTF-8 on as lone surrogates)
_CHARSET = re.compile(r';\s*charset\s*=\s*"?([\w.:+-]+)', re.IGNORECASE | re.ASCII)


def _mostly_utf8(content: bytes) -> bool:
    """Whether ``content`` is UTF-8 but for a few bad bytes (a character cut at the token limit): more of its
    non-ASCII characters decode as UTF-8 than not. Text in a single-byte charset (Latin-1, windows-1251) almost
    never forms a valid UTF-8 sequence."""
    try:
        content.decode("utf-8")
        return True
    except UnicodeDecodeError:
        text = content.decode("utf-8", "replace")
    bad = text.count("\ufffd") - content.count("\ufffd".encode())
    return sum(ch > "\x7f" for ch in text) - bad > bad


def body_in_utf8(content: bytes, headers: Any) -> bytes:
    """``content`` as UTF-8 bytes. A body that is UTF-8 (with no NUL byte; :func:`_mostly_utf8`) stays as it is,
    whatever charset it declares (RFC 8259: JSON is UTF-8, and servers that label a UTF-8 body ``ISO-8859-1`` exist);
    one that is not is decoded by the charset its Content-Type declares (``windows-1251`` from a proxy,
    ``iso-8859-1``, ``utf-16``). A body that does not decode by its charset either, or declares one Python does not
    know, stays as it is. What stays is read by :func:`decode_body`: its bad bytes U+FFFD, flagged."""
    found = _CHARSET.search(str(headers.get("content-type") or "")) if headers else None
    if found is None or not isinstance(content, bytes):
        return content
    charset = found.group(1)
    try:
        if codecs.lookup(charset).name in ("utf-8", "utf-8-sig"):
            return content
        # JSON in UTF-8 has no NUL byte; UTF-16 without a byte-order mark has many
        if b"\x00" not in content and _mostly_utf8(content):
            return content  # UTF-8, whatever it declares
    except LookupError:  # a charset Python does not know
        return content
    try:
        return content.decode(charset).encode("utf-8", "surrogatepass")
    except (LookupError, ValueError):  # unknown or no text encoding (base64, rot13); undecodable (Python's "undefined")
        return content


#: a JSON escape of a UTF-16 surrogate (backslash, ``ud83d``): ``json.loads`` joins a valid pair into one
#: character and leaves a lone one in the string, which no UTF-8 file (a record, the cache) can hold
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone UTF-16 surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def loads_unicode(text: str) -> tuple[Any, bool]:
    """``json.loads(text)``, and whether it held a lone surrogate escape (one half of a UTF-16 pair, such as
    ``"\\udcaf"``, that some servers send in a model's text): each one is U+FFFD, as a byte that is not
    UTF-8 is in :func:`decode_body`."""
    data = json.loads(text)
    if _SURROGATE_ESCAPE.search(text) is None:  # fast path: no surrogate escape at all
        return data, False
    clean = _without_lone_surrogates(data)
    return clean, clean != data


def load_json(content: bytes | str) -> tuple[dict[str, Any], bool]:
    """The body as a JSON object, and whether it held a lone surrogate (replaced: :func:`loads_unicode`);
    or :class:`BadResponse`."""
    if not content or not content.strip():
        raise BadResponse("empty response body")
    text = decode_body(content)[0]
    try:
        data, lone_surrogate = loads_unicode(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if _looks_like_html(text):  # a web page at the base URL (a UI, a login or captive portal), not its API
            raise BadResponse(f"unparseable response body: {html_page_message(text)}; is the base URL the "
                              "API's (often ending in /v1)?") from None
        if text.lstrip().startswith(("data:", "event:")):  # a gateway that streams whatever was asked
            raise BadResponse("unparseable response body: a server-sent event stream, not one JSON answer (the "
                              "request did not ask to stream; a proxy or gateway in between may force it)") from None
        raise BadResponse(f"unparseable response body ({getattr(exc, 'msg', type(exc).__name__)})") from None
    if not isinstance(data, dict):
        raise BadResponse("response body is not a JSON object")
    return data, lone_surrogate


def _dotted(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def reported_cost(data: dict[str, Any], profile: Profile | None, odd: list[str] | None = None) -> float | None:
    """The USD cost a response reports at the profile's ``cost_field`` (OpenRouter: ``usage.cost``,
    plus the upstream charge on a BYOK call: :func:`_with_upstream_cost`); None when absent or not a
    usable cost (NaN, infinite, negative, above :data:`MAX_CALL_COST_USD`, a bool, not a number:
    named in ``odd``)."""
    field = (profile or PROFILES["generic"]).cost_field
    value = _dotted(data, field) if field else None
    if value is None:
        return None
    if not _usable_number(value, MAX_CALL_COST_USD, whole=False):
        if odd is not None:
            odd.append(f"{field}={value!r}")
        return None
    byok = _dotted(data, "usage.is_byok") if field == OPENROUTER_COST else None
    if byok is True:
        return _with_upstream_cost(data, float(value), odd)
    if byok not in (None, False):  # whether the cost is the fee alone is not known
        if odd is not None:
            odd.append(f"usage.is_byok={byok!r}")
        return None
    return float(value)


#: OpenRouter's cost field; with your own provider key (BYOK, ``usage.is_byok: true``) it is only
#: OpenRouter's fee, and what the provider billed to the key is ``usage.cost_details.upstream_inference_cost``
OPENROUTER_COST = "usage.cost"
_UPSTREAM_COST = "usage.cost_details.upstream_inference_cost"


def _with_upstream_cost(data: dict[str, Any], fee: float, odd: list[str] | None) -> float | None:
    """A BYOK call's cost: OpenRouter's fee and the upstream provider's charge to the key; None
    (named in ``odd``) when the upstream charge is missing or not a usable cost."""
    upstream = _dotted(data, _UPSTREAM_COST)
    if not _usable_number(upstream, MAX_CALL_COST_USD, whole=False):
        if odd is not None:
            odd.append(f"{_UPSTREAM_COST}={upstream!r} (usage.is_byok=True)")
        return None
    return fee + float(upstream)


def _numbers(data: dict[str, Any], profile: Profile | None, inp: str, out: str, details: str,
             *, replied: bool) -> tuple[Usage, float | None, dict[str, Any]]:
    """(usage, reported cost, the ``raw`` fields that flag its numbers: ``unusable_numbers``, those that
    were not usable and became unknown; ``uncounted_output_tokens``, output tokens only ``total_tokens``
    counted, added to the output count: see :func:`_usage`)."""
    odd: list[str] = []
    usage, uncounted = _usage(data.get("usage"), inp, out, details, odd, replied=replied)
    cost = reported_cost(data, profile, odd)
    return usage, cost, {"unusable_numbers": odd or None, "uncounted_output_tokens": uncounted}


#: finish reasons that mean the provider's filter stopped the answer: OpenAI's ``content_filter``,
#: Gemini's own finishReason values, which its OpenAI-compatible endpoint may pass through as
#: ``finish_reason`` and OpenRouter reports as ``native_finish_reason`` (compared in lower case; ``language``:
#: the text flagged for an unsupported language), Bedrock's stop reasons for its guardrails and filters
_FILTER_NATIVE = frozenset({"content_filter", "safety", "recitation", "prohibited_content", "blocklist", "spii",
                            "image_safety", "language", "sensitive",  # sensitive: Z.AI's
                            "guardrail_intervened", "content_filtered"})  # Bedrock's
#: finish reasons that mean the answer was cut off by a limit: the output budget, or the context window
#: (``model_context_window_exceeded``: Anthropic's and Bedrock's through compatible layers, ``model_length``: Mistral's)
_TRUNCATED_FINISH = frozenset({"length", "max_tokens", "model_context_window_exceeded", "model_length"})
#: finish reasons that mean the provider failed part way through the answer: OpenRouter's ``error``,
#: DeepSeek's ``insufficient_system_resource``, Z.AI's ``network_error``, vLLM's ``abort`` (the engine
#: ended the request: shut down, paused, scaled down) (:func:`error_in_200`)
_FAILED_FINISH = frozenset({"error", "insufficient_system_resource", "network_error", "abort"})


def _chat_outcome(finish: Any, native: Any, refusal: str | None) -> Outcome:
    """What a Chat Completions / legacy completions choice came to (docs/providers.md, "Outcomes")."""
    finish, native = str(finish or "").lower(), str(native or "").lower()
    if refusal:
        return "refused"
    if finish in _FILTER_NATIVE or native in _FILTER_NATIVE:
        return "filtered"
    if "refusal" in (finish, native):  # Anthropic's stop_reason, passed on as either: the model declined
        return "refused"
    if finish in _TRUNCATED_FINISH:
        return "truncated"
    return "answer"


def _refusal(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _raw(data: dict[str, Any], api: str, **fields: Any) -> dict[str, Any]:
    """``Completion.raw``: the id, the API and the fields that decided the outcome (those present)."""
    return {"id": data.get("id"), "api": api, **{k: v for k, v in fields.items() if v is not None}}


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def _choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadResponse("response has no choices")
    return choices[0]


def _reply_text(content: Any, where: str) -> str:
    """The text of a reply's ``content`` (``text`` of a legacy choice): a string, or the ``text`` strings of
    its typed parts (a list of them, or one); None is no text. Anything else (a number, a boolean) is not
    the model's text: :class:`BadResponse`, retried like any unusable answer, never scored as its repr."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = [content] if isinstance(content, dict) else content
    if not isinstance(parts, list):
        kind = "boolean" if isinstance(content, bool) else "number" if isinstance(content, (int, float)) else "value"
        raise BadResponse(f"the answer's {where} is a JSON {kind}, not text")
    texts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) else None for p in parts]
    return "".join(t for t in texts if isinstance(t, str))


def parse_chat(data: dict[str, Any], profile: Profile | None = None) -> Completion:
    """A chat-completions body → Completion (no latency). Raises BadResponse.

    ``message.refusal`` (OpenAI: ``content`` null and the refusal text) is ``refused``;
    ``finish_reason: "content_filter"`` (Azure, Gemini's safety block) or a filter named by
    OpenRouter's ``native_finish_reason`` is ``filtered``, any partial text kept; ``length`` is
    ``truncated``. Reasoning text comes from the profile's message fields, OpenRouter's
    ``reasoning_details`` (``reasoning.text`` / ``reasoning.summary``) and a ``<think>`` block."""
    choice = _choice(data)
    msg = _obj(choice.get("message"))
    text, think = split_think(_reply_text(msg.get("content"), "message.content"))
    fields = (profile or PROFILES["generic"]).reasoning_fields
    reasoning = next((msg[f] for f in fields if isinstance(msg.get(f), str) and msg[f].strip()), None)
    if reasoning is None:
        reasoning = _reasoning_details(msg.get("reasoning_details"))
    refusal = _refusal(msg.get("refusal"))
    thoughts = _join_thoughts(reasoning, think)
    finish, native = choice.get("finish_reason"), choice.get("native_finish_reason")
    usage, cost, flags = _numbers(data, profile, "prompt_tokens", "completion_tokens", "completion_tokens_details",
                                  replied=bool(text.strip() or thoughts or refusal))
    return Completion(
        text=text,
        thoughts=thoughts,
        usage=usage,
        model=str(data.get("model") or ""),
        raw=_raw(data, "chat", finish_reason=finish, native_finish_reason=native, refusal=refusal, **flags),
        reported_cost=cost,
        outcome=_chat_outcome(finish, native, refusal),
        refusal=refusal,
    )


def _reasoning_details(details: Any) -> str | None:
    """The readable text of OpenRouter's ``reasoning_details`` (``reasoning.text``'s ``text``,
    ``reasoning.summary``'s ``summary``; ``reasoning.encrypted`` has none)."""
    if not isinstance(details, list):
        return None
    parts = [d.get("text") if d.get("type") == "reasoning.text" else d.get("summary")
             for d in details if isinstance(d, dict) and d.get("type") in ("reasoning.text", "reasoning.summary")]
    return _join_thoughts(*(p for p in parts if isinstance(p, str)))


def parse_completions(data: dict[str, Any], profile: Profile | None = None) -> Completion:
    """A legacy completions body → Completion (``content_filter`` and ``length`` as in chat). Raises BadResponse."""
    choice = _choice(data)
    text, think = split_think(_reply_text(choice.get("text"), "text"))
    finish, native = choice.get("finish_reason"), choice.get("native_finish_reason")
    usage, cost, flags = _numbers(data, profile, "prompt_tokens", "completion_tokens", "completion_tokens_details",
                                  replied=bool(text.strip() or think))
    return Completion(
        text=text,
        thoughts=think,
        usage=usage,
        model=str(data.get("model") or ""),
        raw=_raw(data, "completions", finish_reason=finish, native_finish_reason=native, **flags),
        reported_cost=cost,
        outcome=_chat_outcome(finish, native, None),
    )


class ResponseFailed(BadResponse):
    """A Responses body with ``status: "failed"``: the provider's ``error`` says why."""


def parse_responses(data: dict[str, Any], profile: Profile | None = None) -> Completion:
    """A Responses-API body → Completion; reasoning summaries become ``thoughts``.

    ``status: "failed"`` raises :class:`ResponseFailed` with the provider's ``error.message``;
    ``incomplete`` with ``incomplete_details.reason`` ``content_filter`` is ``filtered`` (partial
    text kept), with any other reason or none ``truncated`` (the status alone says the text is
    unfinished); a ``refusal`` content part is ``refused``. A response not finished at all
    (``queued``, ``in_progress``, ``cancelled``: background mode) is no answer (:class:`BadResponse`)."""
    status = data.get("status")
    if status in ("queued", "in_progress", "cancelled"):
        raise BadResponse(f"the response is {status}, not completed")
    if status == "failed":
        error = _obj(data.get("error"))
        code = f" [{error['code']}]" if error.get("code") else ""
        raise ResponseFailed(f"the response failed: {_one_line(error.get('message') or 'no reason given')}{code}")
    output = data.get("output")
    if not isinstance(output, list):
        raise BadResponse("response has no output")
    texts: list[str] = []
    refusals: list[str] = []
    summaries: list[str] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            for part in _list(item.get("content")):
                if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
                    texts.append(_reply_text(part.get("text"), f"{part['type']} part's text"))
                elif isinstance(part, dict) and part.get("type") == "refusal" and _refusal(part.get("refusal")):
                    refusals.append(str(part["refusal"]).strip())
        elif item.get("type") == "reasoning":
            for part in _list(item.get("summary")):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    summaries.append(part["text"])
            if not summaries:  # open-weight servers may return the raw reasoning text instead
                for part in _list(item.get("content")):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        summaries.append(part["text"])
    text, think = split_think("".join(texts))
    incomplete = _obj(data.get("incomplete_details")) or None
    reason = str((incomplete or {}).get("reason") or "")
    refusal = "\n\n".join(refusals) or None
    outcome: Outcome = "answer"
    finish = "stop"
    if refusal:
        outcome = "refused"
    elif status == "incomplete" and reason == "content_filter":
        outcome, finish = "filtered", "content_filter"
    elif status == "incomplete":
        outcome, finish = "truncated", "length"
    thoughts = _join_thoughts("\n\n".join(summaries), think)
    usage, cost, flags = _numbers(data, profile, "input_tokens", "output_tokens", "output_tokens_details",
                                  replied=bool(text.strip() or thoughts or refusal))
    return Completion(
        text=text,
        thoughts=thoughts,
        usage=usage,
        model=str(data.get("model") or ""),
        raw=_raw(data, "responses", finish_reason=finish, status=status, incomplete_details=incomplete,
                 refusal=refusal, **flags),
        reported_cost=cost,
        outcome=outcome,
        refusal=refusal,
    )


PARSERS = {"/chat/completions": parse_chat, "/completions": parse_completions, "/responses": parse_responses}


def parse_success(path: str, content: bytes | str, profile: Profile | None = None, headers: Any = None) -> Completion:
    """A 2xx body → Completion; raises :class:`BadResponse` for anything unusable (an answer
    with no text; a refusal, a filter or a cut-off may be empty), :class:`ResponseFailed` for a
    failed Responses body and :class:`AttemptFailed` for an error object in place of the answer."""
    text, invalid_utf8 = decode_body(content)
    data, lone_surrogate = load_json(text)
    failure = error_in_200(data, headers, text)
    if failure is not None:
        raise AttemptFailed(failure)
    completion = PARSERS[path](data, profile)
    if invalid_utf8 or lone_surrogate:  # each replaced by U+FFFD, the answer kept
        completion.raw["invalid_utf8"] = True
    if completion.outcome == "answer" and not completion.text.strip():
        raise BadResponse("response has empty text", paid=completion)
    return completion


# --------------------------------------------------------------------------- failures


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(value: str) -> float | None:
    """Seconds of OpenAI's rate-limit reset format (``2s``, ``1m30s``, ``250ms``, ``6m0s``, ``1h2m``,
    a bare number of seconds), or None."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _ratelimit_reset(headers: Any) -> float | None:
    """Seconds until the exhausted limit resets (``x-ratelimit-reset-requests`` / ``-tokens``): the
    limit whose ``x-ratelimit-remaining-*`` is 0, else the later of the two."""
    resets: dict[str, float] = {}
    for kind in ("requests", "tokens"):
        value = headers.get(f"x-ratelimit-reset-{kind}")
        seconds = parse_duration(str(value)) if value else None
        if seconds is not None:
            resets[kind] = seconds
    exhausted = [k for k in resets if str(headers.get(f"x-ratelimit-remaining-{k}", "")).strip() == "0"]
    chosen = [resets[k] for k in exhausted] or list(resets.values())
    return max(chosen) if chosen else None


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), else
    from OpenAI's ``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens``."""
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
        return _ratelimit_reset(headers)
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return _ratelimit_reset(headers)
    return max(0.0, when.timestamp() - time.time())


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith("<") and ("<html" in head or "<!doctype" in head or "<head" in head or "<body" in head)


def html_page_message(text: str) -> str:
    """``an HTML page, not an API response (<its text, first 120 characters>)``."""
    snippet = " ".join(re.sub(r"<[^>]*>", " ", text[:2000]).split())[:120]
    return f"an HTML page, not an API response ({snippet})"


class ErrorBody:
    """An error response body, whatever its shape: a JSON object (``{"error": {...}}``,
    ``{"message": ...}``, ``{"detail": ...}``, ``{"error": "text"}``), a JSON list wrapping one
    (Gemini: ``[{"error": {...}}]``), a JSON string, HTML or plain text.

    ``message`` is the provider's own inner message (one line, trimmed); ``code`` joins its
    code, type, status and param; ``is_api`` is False for HTML and other non-JSON bodies.
    """

    def __init__(self, content: bytes | str):
        text = decode_body(content)[0].removeprefix("\ufeff")  # a byte-order mark, as on a 200 (decode_body)
        self.obj: dict[str, Any] = {}
        self.is_api = True
        try:
            data: Any = loads_unicode(text)[0] if text.strip() else None
        except (json.JSONDecodeError, RecursionError):
            data = None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            data = data[0]  # Gemini wraps its errors in a list
        if isinstance(data, dict):
            inner = data.get("error")
            self.obj = inner if isinstance(inner, dict) else data
            msg = self.obj.get("message") or self.obj.get("detail") or (inner if isinstance(inner, str) else None)
            meta = self.obj.get("metadata")
            upstream = meta.get("raw") if isinstance(meta, dict) else None  # OpenRouter: the upstream's reason
            if isinstance(upstream, str) and upstream.strip():
                msg = f"{msg}: {upstream}" if msg else upstream
            self.message = _one_line(msg if msg is not None else text)
            self.code = _one_line(" ".join(str(self.obj.get(k)) for k in ("code", "type", "status", "param")
                                           if self.obj.get(k) not in (None, "")))
        elif isinstance(data, str):
            self.message, self.code = _one_line(data) or "(empty body)", ""
        else:
            self.code, self.is_api = "", False
            if _looks_like_html(text):
                self.message = html_page_message(text)
            else:
                self.message = _one_line(text) or "(empty body)"

    def retry_delay(self) -> float | None:
        """Seconds from a Google ``RetryInfo`` detail (``"retryDelay": "20s"``), if any."""
        for d in _list(self.obj.get("details")):
            delay = d.get("retryDelay") if isinstance(d, dict) else None
            if isinstance(delay, str) and re.fullmatch(r"\d+(\.\d+)?s", delay):
                return float(delay[:-1])
        return None

    def is_quota(self, status: int) -> bool:
        """Quota or billing exhausted (not a rate limit)."""
        if status == 402 or _QUOTA_CODE.search(self.code):
            return True
        quota_ids = " ".join(str(v.get("quotaId", "")) for d in _list(self.obj.get("details")) if isinstance(d, dict)
                             for v in _list(d.get("violations")) if isinstance(v, dict))
        return status == 429 and bool(_DAILY_QUOTA.search(quota_ids))


def _one_line(value: Any) -> str:
    return one_line(value, 500)


def error_details(content: bytes | str) -> tuple[str, str, bool]:
    """``(message, code_and_type, is_api)`` of an error body (see :class:`ErrorBody`)."""
    body = ErrorBody(content)
    return body.message, body.code, body.is_api


def classify_status(status: int, headers: Any, content: bytes | str, *, label: str | None = None) -> Failure:
    """Classify a non-2xx response: rate limit (retry, ``Retry-After``), quota or billing
    exhausted (fatal: stop the run), a problem of this request (item), other 4xx (fatal: auth,
    unknown model, unsupported parameter), 5xx and timeouts (retry). An HTML page on a 5xx is a
    gateway's error page: retried like any 5xx, not a sign of a dead endpoint. ``label`` replaces
    ``HTTP <status>`` in the message (an error object inside a 200 is classified as its code)."""
    body = ErrorBody(content)
    shown = f"{label or f'HTTP {status}'}: {body.message}" + (f" [{body.code}]" if body.code else "")
    if body.is_quota(status):
        return Failure("fatal", f"quota or billing exhausted: {shown}", status, reason="quota")
    if status >= 500 and _CONTEXT_OVERFLOW.search(body.code):  # llama.cpp builds of 2025-09 sent a 500
        return Failure("item", shown, status, reason=f"HTTP {status}")
    if status == 501:  # not implemented: the path is not served (e.g. Gemini's base URL without /openai/)
        return Failure("fatal", f"{shown} (check the base URL)", status, reason="HTTP 501",
                       remedy="check the base URL (the endpoint does not serve this API path)")
    if status in RETRYABLE_STATUS or status >= 500:
        ra = parse_retry_after(headers) if status in (429, 503) else None
        ra = ra if ra is not None else body.retry_delay()
        return Failure("retry", shown, status, ra, reason="rate limit" if status == 429 else f"HTTP {status}")
    if status in REQUEST_PROBLEM_STATUS and (budget := _budget_over_context(body.message)) is not None:
        return Failure("fatal", f"{shown} (the output budget alone {budget}: serve the model with a longer "
                       "context, or lower the budget where the command takes one: --max-tokens, --judge-max-tokens "
                       "for eval's judge)", status, reason=f"HTTP {status}",
                       remedy="lower --max-tokens (--judge-max-tokens for eval's judge) below the context length, "
                              "or serve the model with a longer context")
    if status in REQUEST_PROBLEM_STATUS and _REQUEST_PROBLEM.search(f"{body.code} {body.message}"):
        return Failure("item", shown, status, reason=f"HTTP {status}")
    if status == 413:
        return Failure("item", shown, status, reason="HTTP 413")
    adaptation = refused_field(body) if status in REQUEST_PROBLEM_STATUS else None
    flag = FIELD_FLAGS.get(adaptation["field"] if adaptation else _named_field(body) or "")
    return Failure("fatal", f"{shown} (set by {flag})" if flag else shown, status,
                   dead_sign=None if body.is_api else "not_json", reason=f"HTTP {status}", adaptation=adaptation,
                   remedy=f"change the value the provider refuses, set by {flag}" if flag else None)


# --------------------------------------------------------------------------- adapting to a refused field

#: request fields a provider may refuse by name, and what the client does then: drop the field
#: (the provider's default) or rename it. Anything else a provider refuses stays fatal.
ADAPTABLE: dict[str, tuple[str, str | None]] = {
    "temperature": ("drop", None), "top_p": ("drop", None), "seed": ("drop", None),
    "max_tokens": ("rename", "max_completion_tokens"), "max_completion_tokens": ("rename", "max_tokens"),
    "reasoning_effort": ("drop", None), "reasoning.effort": ("drop", None), "reasoning": ("drop", None),
    # the Responses API's reasoning summaries (the answer's thoughts), which OpenAI refuses to organizations
    # it has not verified: the answer and its effort are the same without them
    "reasoning.summary": ("drop", None),
}
#: the command-line flag that sets each request field (named when a refused value cannot be adapted)
FIELD_FLAGS: dict[str, str] = {
    "temperature": "--temperature (--judge-temperature for the judge)",
    "max_tokens": "--max-tokens (--judge-max-tokens for the judge)",
    "max_completion_tokens": "--max-tokens (--judge-max-tokens for the judge)",
    "max_output_tokens": "--max-tokens (--judge-max-tokens for the judge)",
    "seed": "--seed", "top_p": "--extra-body",
    "reasoning_effort": "--effort (--judge-effort for the judge)",
    "reasoning.effort": "--effort (--judge-effort for the judge)",
    "reasoning": "--effort (--judge-effort for the judge)",
    "reasoning.summary": """--extra-body '{"reasoning": {"summary": null}}' (sends none)""",
}
_UNSUPPORTED = re.compile(r"unsupported|not supported|does not support|unknown name|unrecognized|not permitted",
                          re.IGNORECASE)
_QUOTED_FIELD = re.compile(r"""(?:Unsupported (?:parameter|value)|Invalid|Unknown name)[: ]+['"]([\w.]+)['"]""",
                           re.IGNORECASE)


def _named_field(body: ErrorBody) -> str | None:
    """The request field an error names: its ``param``, else the one quoted in its message."""
    param = body.obj.get("param")
    if isinstance(param, str) and param.strip():
        return param.strip()
    m = _QUOTED_FIELD.search(body.message)
    return m.group(1) if m else None


def refused_field(body: ErrorBody) -> dict[str, Any] | None:
    """``{field, action, to, reason}`` when a 400 says a field (or its value) is *unsupported*, in its
    message or its code, and the field is one the client can drop or rename (:data:`ADAPTABLE`):
    OpenAI's "Unsupported value: 'temperature' does not support 0 with this model", "Unsupported
    parameter: 'max_tokens' ... Use 'max_completion_tokens' instead", its ``unsupported_value`` for
    ``reasoning.summary`` ("Your organization must be verified to generate reasoning summaries"),
    Gemini's 'Unknown name "seed"'. A value that is merely invalid ("Invalid 'temperature': decimal
    below minimum value") is not adapted."""
    field = _named_field(body)
    if field not in ADAPTABLE or not _UNSUPPORTED.search(f"{body.message} {body.code}"):
        return None
    action, to = ADAPTABLE[field]
    return {"field": field, "action": action, "to": to, "reason": body.message}


#: vLLM's "'max_tokens' (2049) cannot be greater than the model's maximum context length (2048)" and
#: "'max_tokens' or 'max_completion_tokens' is too large: 64000. This model's maximum context length is
#: 20000 tokens", OpenAI-style "maximum context length is L tokens. However, you requested N tokens (P in
#: the messages, C in the completion)"
_BUDGET_GREATER = re.compile(r"'max_(?:completion_)?tokens' \((\d+)\) cannot be greater than the model's maximum "
                             r"context length \((\d+)\)")
_BUDGET_TOO_LARGE = re.compile(r"is too large: (\d+)\. This model's maximum context length is (\d+) tokens")
_BUDGET_REQUESTED = re.compile(r"maximum context length is (\d+) tokens\. However, you requested \d+ tokens "
                               r"\(\d+ in the messages, (\d+) in the completion\)")


def _budget_over_context(message: str) -> str | None:
    """How the requested output budget alone meets the model's context length (a wrong setting,
    the same for every item: fatal at the first answer), else None (a prompt too long: one item)."""
    for pattern, order in ((_BUDGET_GREATER, (1, 2)), (_BUDGET_TOO_LARGE, (1, 2)), (_BUDGET_REQUESTED, (2, 1))):
        m = pattern.search(message)
        if m:
            budget, context = int(m.group(order[0])), int(m.group(order[1]))
            return f"({budget} tokens) is not below the context length ({context})" if budget >= context else None
    return None


def _status_of_code(code: Any) -> int | None:
    """An HTTP status named by an error object's ``code`` (OpenRouter: ``402``, ``"429"``), else None."""
    if isinstance(code, bool):
        return None
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code.strip())
    return code if isinstance(code, int) and 400 <= code < 600 else None


def error_in_200(data: dict[str, Any], headers: Any, content: bytes | str) -> Failure | None:
    """An error object inside a 2xx answer in place of the answer, else None:

    * at the top, with no choices and no output (OpenRouter answers an upstream failure with 200
      and ``{"error": {"code": 402, "message": ...}}``; a proxy in front of vLLM passes on vLLM's flat
      ``{"object": "error", "message": ..., "code": 400}`` with 200), classified by its code exactly as
      that HTTP status would be (a code that is no status: as a 502);
    * on the first choice (a finish reason of :data:`_FAILED_FINISH`, or none with an ``error``
      object, its own or one beside the choices, beside whatever text came first: OpenRouter's ``error`` when the
      upstream failed once
      the answer had begun, DeepSeek's ``insufficient_system_resource``), classified by
      its code in the same way, except that it never stops the run for the configuration (the
      request was accepted): a 4xx there is this item's failure; quota or billing still stops.
      The provider said the response failed: the call comes to ``failed``.
    """
    error = data.get("error")
    choices = data.get("choices")
    if (error or data.get("object") == "error") and not choices and not isinstance(data.get("output"), list):
        status = _status_of_code((error if isinstance(error, dict) else data).get("code"))
        failure = classify_status(status or 502, headers, content,
                                  label=f"an error inside HTTP 200 ({status or 'no status'})")
        failure.status = status or 502
        return failure
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)):
        return None  # no choice to read (a Responses body's status says how it ended: parse_responses)
    choice = choices[0]
    # the choice's own error, else one beside the choices (the body OpenRouter says carries a failure mid-answer)
    error, finish = choice.get("error") or data.get("error"), str(choice.get("finish_reason") or "").lower()
    # an error beside a clean stop (stop, length, a filter) leaves the answer as it finished
    if finish not in _FAILED_FINISH and not (not finish and isinstance(error, dict) and error):
        return None
    error = error if isinstance(error, dict) and error else {
        "message": f"the provider stopped the answer part way (finish_reason {finish!r}) with no error object"}
    status = _status_of_code(error.get("code"))
    failure = classify_status(status or 502, headers, json.dumps({"error": error}),
                              label=f"an error on the answer inside HTTP 200 ({status or 'no status'})")
    if failure.kind == "fatal" and failure.reason != "quota":
        failure.kind = "item"
    failure.status, failure.outcome, failure.adaptation = status or 502, "failed", None
    return failure


#: error codes (or types) of a 400 that is the provider's content filter stopping this request: Azure's code,
#: Moonshot's (Kimi) type with ``code: 400``, and Alibaba Model Studio's (DashScope, Qwen: "Input data may
#: contain inappropriate content.", the output's too)
_FILTER_CODES = frozenset({"content_filter", "data_inspection_failed"})


def _filter_refusal(status: int, body: ErrorBody) -> bool:
    """Whether an error is the provider's content filter refusing this request: a 400 whose code or type is
    in :data:`_FILTER_CODES` (or Azure's ``ResponsibleAIPolicyViolation``), or OpenRouter's moderation 403,
    whose ``metadata`` names the ``reasons`` and the ``flagged_input``."""
    if status == 403:
        meta = _obj(body.obj.get("metadata"))
        return bool(meta.get("reasons") or meta.get("flagged_input"))
    named = {str(body.obj.get("code")), str(body.obj.get("type"))}
    return status == 400 and (bool(named & _FILTER_CODES)
                              or _obj(body.obj.get("innererror")).get("code") == "ResponsibleAIPolicyViolation")


def filtered_request(status: int, content: bytes | str) -> Completion | None:
    """A 400 or 403 that is the provider's content filter stopping this request (:func:`_filter_refusal`):
    the ``filtered`` outcome, not an error."""
    if status not in (400, 403):
        return None
    body = ErrorBody(content)
    if not _filter_refusal(status, body):
        return None
    return Completion(text="", outcome="filtered",
                      raw={"api": None, "status_code": status, "finish_reason": "content_filter",
                           "error": body.message, "code": body.code})


def interpret(path: str, status: int, headers: Any, content: bytes, profile: Profile | None = None) -> Completion:
    """The completion of one HTTP response (whatever its outcome), or :class:`AttemptFailed`."""
    content = body_in_utf8(content, headers)
    if 200 <= status < 300:
        try:
            return parse_success(path, content, profile, headers)
        except ResponseFailed as exc:  # retried like a 5xx; when the retries give up, the call "failed"
            raise AttemptFailed(Failure("retry", str(exc), status, reason="response failed", outcome="failed")) from None
        except BadResponse as exc:
            not_json = str(exc).startswith(("unparseable", "empty response body", "response body is not"))
            raise AttemptFailed(Failure("retry", str(exc), status, dead_sign="not_json" if not_json else None,
                                        reason="bad 200 answer", paid=exc.paid)) from None
    filtered = filtered_request(status, content)
    if filtered is not None:
        filtered.raw["api"] = path.strip("/").split("/")[0]
        return filtered
    raise AttemptFailed(classify_status(status, headers, content))


def classify_exception(exc: BaseException) -> Failure:
    """Classify an exception raised while sending (:mod:`cresowlve_core.llm.http` failures)."""
    if isinstance(exc, ConnectFailed) and exc.proxy is not None:
        if exc.status == 407:
            return Failure("fatal", f"{exc}: put the credentials in the proxy URL (https://user:pass@proxy:port)",
                           reason="proxy 407", remedy="put the proxy's credentials in its URL (https://user:pass@proxy:port)")
        if exc.status is not None:
            return Failure("retry", str(exc), dead_sign="no_answer", reason=f"proxy HTTP {exc.status}")
        return Failure("retry", str(exc), dead_sign="unreachable", reason="proxy unreachable")
    if isinstance(exc, ConnectFailed) and exc.tls:
        return Failure("fatal", f"{exc} (check the https/http scheme and the certificate; extra CAs: "
                       "REQUESTS_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR)", reason="TLS",
                       remedy="check the base URL's https/http scheme and the server's certificate (extra CAs: "
                              "REQUESTS_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR)")
    if isinstance(exc, ResponseTooLarge):
        return Failure("item", str(exc), reason="answer too large")
    if isinstance(exc, (ReadTimeout, asyncio.TimeoutError, TimeoutError)):
        return Failure("retry", str(exc) or "request timed out", reason="timeout",
                       dead_sign="no_answer" if getattr(exc, "no_answer", False) else None)
    if isinstance(exc, ConnectFailed) and exc.dns:
        return Failure("retry", f"DNS lookup failed ({exc})", dead_sign="unreachable", reason="DNS")
    if isinstance(exc, ConnectFailed) and exc.refused:
        return Failure("retry", str(exc), dead_sign="unreachable", reason="connection refused")
    if isinstance(exc, ConnectFailed) and exc.timed_out:
        return Failure("retry", str(exc), dead_sign="unreachable", reason="connect timeout")
    if isinstance(exc, TransportError):
        proxy = "proxy " if "the proxy" in str(exc) else ""
        return Failure("retry", f"connection error ({exc})", dead_sign="no_answer" if exc.no_answer else None,
                       reason=f"{proxy}connection error")
    return Failure("item", f"{type(exc).__name__}: {exc}", reason=type(exc).__name__)
