"""The OpenAI wire format (Chat Completions, Responses, legacy completions): pure functions that
write one request, read one response and classify one failure. No I/O here.

Which API is used (``GenParams.resolved_api()``):

* ``chat`` (default): ``/chat/completions``. Thinking text is taken from the message's
  ``reasoning_content`` (llama.cpp, vLLM, DeepSeek) or ``reasoning`` field, and from a leading
  ``<think>…</think>`` block, which is stripped from ``text``. A lone ``</think>`` (templates
  that open the block inside the prompt) is treated the same way. With an effort set,
  ``reasoning_effort`` is sent, the token limit goes as ``max_completion_tokens`` and
  ``temperature`` is not sent (reasoning models reject both older fields).
* ``responses`` (automatic when ``params.effort`` is set): ``/responses`` with
  ``reasoning={"effort": effort, "summary": "auto"}``; reasoning summaries go to ``thoughts``.
  With an effort set, ``temperature`` and ``seed`` are not sent (they still key the cache).
  A ``temperature`` of None is never sent: the provider's default decoding (the paper's setting).
* ``completions``: legacy ``/completions``. A single user message is sent verbatim as the
  prompt; anything else is rendered as ``"System: …\\n\\nUser: …\\n\\nAssistant:"`` blocks.
  This API has no effort field: an effort without an ``extra_body`` that carries the server's
  own form (see :mod:`cresowlve_core.llm.effort`) is refused rather than silently dropped.

``params.extra`` and then ``params.extra_body`` are merged into the body (``extra_body``
recursively). If they hold ``max_completion_tokens``, ``max_tokens`` is not sent.

Failures: 408, 409, 429 and 5xx are retried (``Retry-After`` on 429/503 honoured), as are 200
answers that are empty, not JSON, without choices or with empty text. A 400/413/422 whose
error code, type or message names a problem of *this request* (context length, content
policy or filter, invalid prompt) is an ``item`` failure: recorded for the unit, the run goes
on. Every other 4xx (a wrong model, key, endpoint or parameter) is ``fatal``. A refused
connection, a failed DNS lookup, a connect timeout and a body that is not JSON (e.g. an HTML
page) are signs of a dead endpoint, which the client counts. A failed TLS handshake (a bad
certificate, or https spoken to a plain-HTTP port) is fatal.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
from typing import Any

from cresowlve_core.llm.http import ConnectFailed, ReadTimeout, ResponseTooLarge, TransportError
from cresowlve_core.llm.types import Completion, GenParams, LLMConfigError, Usage
from cresowlve_core.llm.wire import AttemptFailed, DeadSign, Failure

RETRYABLE_STATUS = frozenset({408, 409, 429})
#: statuses whose error may name a problem of the request itself rather than of the configuration
REQUEST_PROBLEM_STATUS = frozenset({400, 413, 422})
_REQUEST_PROBLEM = re.compile(
    r"context[_ ]length|context[_ ]window|maximum context|too many (?:input )?tokens|prompt is too long"
    r"|input is too long|string_above_max_length|content[_ ]?filter|content[_ ]?policy|content management"
    r"|responsible ?ai|safety|flagged|moderation|invalid[_ ]prompt|prompt[_ ]blocked",
    re.IGNORECASE,
)


class BadResponse(Exception):
    """A 200 response that cannot be used (empty, unparseable, no choices, empty text)."""


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


def build_request(model: str, messages: list[dict[str, Any]], params: GenParams) -> tuple[str, dict[str, Any]]:
    """The API path and JSON body for one call (see the module docstring for the rules)."""
    api = params.resolved_api()
    extra = params.extra
    extra_body = params.extra_body
    limit_given = "max_completion_tokens" in extra or "max_completion_tokens" in extra_body
    body: dict[str, Any] = {"model": model}
    if api == "responses":
        path = "/responses"
        body["input"] = messages
        if params.sent_effort:
            body["reasoning"] = {"effort": params.sent_effort, "summary": "auto"}
        elif params.temperature is not None:
            body["temperature"] = params.temperature
        if params.max_tokens is not None:
            body["max_output_tokens"] = params.max_tokens
    elif api == "chat":
        path = "/chat/completions"
        body["messages"] = messages
        if params.sent_effort:
            body["reasoning_effort"] = params.sent_effort
        elif params.temperature is not None:
            body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        if params.max_tokens is not None and not limit_given:
            body["max_completion_tokens" if params.sent_effort else "max_tokens"] = params.max_tokens
    elif api == "completions":
        if params.sent_effort and not extra_body:
            raise LLMConfigError(
                f"effort {params.sent_effort!r} cannot be sent on the legacy completions API; use the chat or "
                "responses API, or give the server's own field in extra_body (a provider preset)"
            )
        path = "/completions"
        body["prompt"] = messages_to_prompt(messages)
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        if params.max_tokens is not None and not limit_given:
            body["max_tokens"] = params.max_tokens
    else:
        raise LLMConfigError(f"unknown api {api!r}")
    if extra:
        body.update(extra)
    if extra_body:
        body = deep_merge(body, extra_body)
    return path, body


def request_headers(api_key: str) -> dict[str, str]:
    """The bearer key and the JSON content type."""
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


def load_json(content: bytes | str) -> dict[str, Any]:
    """The body as a JSON object, or :class:`BadResponse`."""
    if not content or not content.strip():
        raise BadResponse("empty response body")
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadResponse(f"unparseable response body ({getattr(exc, 'msg', type(exc).__name__)})") from None
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


PARSERS = {"/chat/completions": parse_chat, "/completions": parse_completions, "/responses": parse_responses}


def parse_success(path: str, content: bytes | str) -> Completion:
    """A 2xx body → Completion; raises :class:`BadResponse` for anything unusable."""
    completion = PARSERS[path](load_json(content))
    if not completion.text.strip() and completion.raw.get("finish_reason") != "length":
        raise BadResponse("response has empty text")
    return completion


# --------------------------------------------------------------------------- failures


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


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith("<") and ("<html" in head or "<!doctype" in head or "<head" in head or "<body" in head)


def error_details(content: bytes | str) -> tuple[str, str, bool]:
    """``(message, code_and_type, is_json)`` of an error body: ``{"error": {...}}``,
    ``{"message": ...}``, ``{"detail": ...}`` or plain text (trimmed)."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    try:
        data = json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        inner = data.get("error")
        obj = inner if isinstance(inner, dict) else data
        msg = obj.get("message") or obj.get("detail") or (inner if isinstance(inner, str) else None) or text
        code = " ".join(str(obj.get(k)) for k in ("code", "type", "param") if obj.get(k) not in (None, ""))
        return " ".join(str(msg).split())[:500], code, True
    if _looks_like_html(text):
        snippet = " ".join(re.sub(r"<[^>]*>", " ", text[:2000]).split())[:120]
        return f"an HTML page, not an API response ({snippet})", "", False
    return " ".join(text.split())[:500] or "(empty body)", "", False


def classify_status(status: int, headers: Any, content: bytes | str) -> Failure:
    """Classify a non-2xx response (see the module docstring)."""
    message, code, is_json = error_details(content)
    shown = f"HTTP {status}: {message}" + (f" [{code}]" if code else "")
    dead: DeadSign | None = None if is_json else "not_json"
    if status in RETRYABLE_STATUS or status >= 500:
        ra = parse_retry_after(headers) if status in (429, 503) else None
        return Failure("retry", shown, status, ra, dead_sign=dead, reason=f"HTTP {status}")
    if status in REQUEST_PROBLEM_STATUS and _REQUEST_PROBLEM.search(f"{code} {message}"):
        return Failure("item", shown, status, reason=f"HTTP {status}")
    if status == 413:
        return Failure("item", shown, status, reason="HTTP 413")
    return Failure("fatal", shown, status, dead_sign=dead, reason=f"HTTP {status}")


def interpret(path: str, status: int, headers: Any, content: bytes) -> Completion:
    """The completion of one HTTP response, or :class:`AttemptFailed`."""
    if 200 <= status < 300:
        try:
            return parse_success(path, content)
        except BadResponse as exc:
            not_json = str(exc).startswith(("unparseable", "empty response body", "response body is not"))
            raise AttemptFailed(Failure("retry", str(exc), status, dead_sign="not_json" if not_json else None,
                                        reason="bad 200 answer")) from None
    raise AttemptFailed(classify_status(status, headers, content))


def classify_exception(exc: BaseException) -> Failure:
    """Classify an exception raised while sending (:mod:`cresowlve_core.llm.http` failures)."""
    if isinstance(exc, ConnectFailed) and exc.proxy is not None:
        if exc.status == 407:
            return Failure("fatal", f"{exc}: put the credentials in the proxy URL (https://user:pass@proxy:port)",
                           reason="proxy 407")
        if exc.status is not None:
            return Failure("retry", str(exc), dead_sign="no_answer", reason=f"proxy HTTP {exc.status}")
        return Failure("retry", str(exc), dead_sign="unreachable", reason="proxy unreachable")
    if isinstance(exc, ConnectFailed) and exc.tls:
        return Failure("fatal", f"{exc} (check the https/http scheme and the certificate; extra CAs: "
                       "REQUESTS_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR)", reason="TLS")
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
