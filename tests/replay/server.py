"""A local replay server that answers like real OpenAI-compatible providers.

Each provider lives under its own path prefix on one loopback port::

    /openai/v1                 OpenAI (Chat Completions and Responses)
    /azure/openai/v1           Azure OpenAI (v1 API; the key in the ``api-key`` header)
    /gemini/v1beta/openai      Gemini's OpenAI-compatible endpoint (Chat Completions only)
    /openrouter/api/v1         OpenRouter
    /vllm/v1                   vLLM
    /llamacpp/v1               llama.cpp's llama-server
    /ollama/v1                 Ollama's OpenAI-compatible API

Every request is checked against that provider's rules (:data:`RULES`, one small table per
provider). Each rule names the recorded fixture it answers with (``fixtures/<provider>/<name>.json``,
sources in ``fixtures/SOURCES.md``); where a rule adapts the recorded body to the request (the
model name, the refused value, token counts), it replaces exactly the recorded specifics in the
recorded text. A request that passes every rule gets that provider's recorded success body with
the answer replaced by a deterministic one:

* a solve prompt gets ``<Answer>…</Answer>`` (from ``answers`` if a key occurs in the prompt, else
  ``replay-<hash>``);
* our judge prompt (``VERDICT-<nonce>`` instructions) gets a reason and ``VERDICT-<nonce>: CORRECT``
  when the candidate equals the reference or an accepted alternative (normalised), else INCORRECT;
* the paper's judge prompt (bare yes/no) gets ``yes`` or ``no`` by the same comparison.

Scenario knobs (:class:`Scenario`, by constructor or ``--scenario NAME``): a burst of list-wrapped
429s, truncation of a fraction of the items, OpenRouter's ``usage.cost`` per answer, exhausted
quota, a context limit (llama.cpp's overflow), Azure's content filter for a fraction of the items.

Every request is logged (:attr:`ReplayServer.log`: provider, path, headers without secrets, body,
status, the rule that answered, the cost reported) so tests can assert what was sent.

Run standalone::

    python tests/replay/server.py --port 8765 --scenario gemini-burst   # prints READY http://127.0.0.1:8765
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# --------------------------------------------------------------------------- fixtures


@cache
def fixture(name: str) -> dict[str, Any]:
    """The fixture ``fixtures/<name>.json`` (``name`` is ``provider/file`` without ``.json``)."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def fixture_text(name: str) -> str:
    """The recorded body as sent: the quoted text, or the cassette's JSON."""
    fx = fixture(name)
    return fx["body_text"] if "body_text" in fx else json.dumps(fx["body"], ensure_ascii=False)


# --------------------------------------------------------------------------- requests and scenarios


@dataclass
class Scenario:
    """Per-server knobs (all off by default: every valid request succeeds)."""

    name: str = "default"
    burst_429: int = 0  # the first N model requests on gemini/openrouter answer the recorded 429
    burst_retry_after: str | None = None  # Retry-After sent with those 429s (the recordings carry none)
    truncate_fraction: float = 0.0  # items (by prompt hash) whose answers are cut off by the token limit
    truncate_below: int | None = None  # ... only while the request's token limit is below this
    cost: float | None = None  # OpenRouter usage.cost per answer (None: the recorded value)
    quota_exhausted: bool = False  # openai/azure answer the recorded insufficient_quota 429
    context_limit: int | None = None  # prompt tokens (words) above which the context overflow is answered
    content_filter_fraction: float = 0.0  # azure: items answered with the recorded content_filter 400
    api_key: str | None = None  # when set, openai/azure require exactly this key
    refusal_fraction: float = 0.0  # solve prompts answered with the recorded refusal (openai, azure; chat and /responses)
    filter_fraction: float = 0.0  # solve prompts whose answer the provider's filter stops (every provider with a body)
    failed_fraction: float = 0.0  # openai /responses: solve prompts answered with status "failed"
    choice_error_fraction: float = 0.0  # openrouter: solve prompts answered with an error on the choice (HTTP 200)
    judge_choice_error_fraction: float = 0.0  # openrouter: judge prompts answered with that error on the choice
    credits_exhausted: bool = False  # openrouter answers HTTP 200 carrying its 402 "Insufficient credits" error
    reasoning_aliases: tuple[str, ...] = ()  # model names openai/azure serve as reasoning models (a deployment, an alias)
    rate_limit_burst: int = 0  # the first N openai requests get the recorded TPM 429 with x-ratelimit-* headers
    reset_tokens: str | None = None  # x-ratelimit-reset-tokens sent with them (None: the recorded 26.604s)
    context_len: int | None = None  # vllm: a token limit above this is refused as greater than the context
    errors_in_200: bool = False  # vllm: its context-length error passed on with HTTP 200 (a proxy in front)
    lone_surrogate_fraction: float = 0.0  # ollama: solve prompts whose answer ends in a lone surrogate escape (\\udcaf)


SCENARIOS: dict[str, Scenario] = {
    "default": Scenario(),
    "gemini-burst": Scenario("gemini-burst", burst_429=6, burst_retry_after="0"),
    "truncate": Scenario("truncate", truncate_fraction=0.5),
    "openrouter-cost": Scenario("openrouter-cost", cost=0.0125),
    "quota": Scenario("quota", quota_exhausted=True),
    "llamacpp-overflow": Scenario("llamacpp-overflow", context_limit=60),
    "content-filter": Scenario("content-filter", content_filter_fraction=0.5),
    "refusal": Scenario("refusal", refusal_fraction=0.5),
    "filtered": Scenario("filtered", filter_fraction=0.5),
    "responses-failed": Scenario("responses-failed", failed_fraction=0.5),
    "choice-error": Scenario("choice-error", choice_error_fraction=0.5),
    "judge-choice-error": Scenario("judge-choice-error", judge_choice_error_fraction=0.5),
    "credits": Scenario("credits", credits_exhausted=True),
    "deployment": Scenario("deployment", reasoning_aliases=("my-gpt5-deployment",)),
    "reset-headers": Scenario("reset-headers", rate_limit_burst=2, reset_tokens="0.3s"),
    "vllm-context": Scenario("vllm-context", context_len=2048),
    "vllm-proxy-200": Scenario("vllm-proxy-200", context_limit=60, errors_in_200=True),
    "lone-surrogate": Scenario("lone-surrogate", lone_surrogate_fraction=0.5),
}


@dataclass
class Request:
    provider: str
    api: str  # "/chat/completions", "/responses", ...
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    seq: int  # 1-based order of model requests on this server

    @property
    def model(self) -> str:
        return str(self.body.get("model") or "")

    @property
    def prompt(self) -> str:
        """The text of every message/input item, joined."""
        items = self.body.get("messages") if self.api == "/chat/completions" else self.body.get("input")
        if isinstance(items, str):
            return items
        parts: list[str] = []
        for m in items or []:
            content = m.get("content") if isinstance(m, dict) else m
            if isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
            else:
                parts.append(str(content or ""))
        return "\n".join(parts)

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt.split())

    @property
    def token_limit(self) -> int | None:
        for key in ("max_output_tokens", "max_completion_tokens", "max_tokens"):
            value = self.body.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    def fraction(self) -> float:
        """A stable number in [0, 1) for this prompt: which items a fraction knob selects."""
        return int(hashlib.sha256(self.prompt.encode()).hexdigest()[:8], 16) / 16**8


@dataclass
class Hit:
    """A rule's answer: the recorded text with the recorded specifics replaced, or a built body."""

    subs: tuple[tuple[str, str], ...] = ()
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


Check = Callable[[Request, Scenario], Hit | None]


@dataclass(frozen=True)
class Rule:
    """``when`` the check hits, answer with the recorded ``fixture`` (adapted by the Hit)."""

    name: str
    fixture: str
    check: Check


# --------------------------------------------------------------------------- checks

#: OpenAI's reasoning models (o-series, gpt-5 except the -chat snapshots), as their 400s show
_REASONING = re.compile(r"^(o\d|gpt-5(?!-chat))")
#: OpenAI model ids the replay knows; anything else gets the recorded model_not_found 404
_OPENAI_MODELS = re.compile(r"^(gpt-4o(-mini)?|gpt-4\.1(-mini|-nano)?|gpt-5(\.\d+)?(-mini|-nano|-chat-latest)?"
                            r"|o[134](-mini)?)(-\d{4}-\d{2}-\d{2})?$")
#: fields Gemini's OpenAI-compatible endpoint refused in the recorded 400s
GEMINI_REFUSED = ("seed", "frequency_penalty", "reasoning", "top_k", "google", "extra_body")


def _bare(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()


def _key(req: Request) -> str | None:
    auth = req.headers.get("authorization", "")
    return auth[7:].strip() or None if auth.lower().startswith("bearer ") else None


def bearer_missing(req: Request, sc: Scenario) -> Hit | None:
    key = _key(req)
    return Hit() if key is None or (sc.api_key is not None and key != sc.api_key) else None


def azure_key_missing(req: Request, sc: Scenario) -> Hit | None:
    key = req.headers.get("api-key", "").strip() or None
    return Hit() if key is None or (sc.api_key is not None and key != sc.api_key) else None


def quota_exhausted(req: Request, sc: Scenario) -> Hit | None:
    return Hit() if sc.quota_exhausted else None


def burst(req: Request, sc: Scenario) -> Hit | None:
    if req.seq > sc.burst_429:
        return None
    return Hit(headers={"retry-after": sc.burst_retry_after} if sc.burst_retry_after is not None else {})


def _is_reasoning(req: Request, sc: Scenario) -> bool:
    return bool(_REASONING.match(_bare(req.model))) or req.model in sc.reasoning_aliases


def unknown_openai_model(req: Request, sc: Scenario) -> Hit | None:
    known = _OPENAI_MODELS.match(_bare(req.model)) or req.model in sc.reasoning_aliases
    return None if known else Hit(subs=(("gpt-5.2-proo", req.model),))


def reasoning_max_tokens(req: Request, sc: Scenario) -> Hit | None:
    hit = req.api == "/chat/completions" and _is_reasoning(req, sc) and "max_tokens" in req.body
    return Hit() if hit else None


def reasoning_temperature(req: Request, sc: Scenario) -> Hit | None:
    value = req.body.get("temperature")
    if req.api != "/chat/completions" or not _is_reasoning(req, sc) or value is None or value == 1:
        return None
    return Hit(subs=(("does not support 0 with", f"does not support {json.dumps(value)} with"),))


def negative_temperature(req: Request, sc: Scenario) -> Hit | None:
    value = req.body.get("temperature")
    if isinstance(value, (int, float)) and value < 0:
        return Hit(subs=(("got -1 instead", f"got {json.dumps(value)} instead"),))
    return None


def not_chat(req: Request, sc: Scenario) -> Hit | None:
    return Hit() if req.api != "/chat/completions" else None


def gemini_refused_fields(req: Request, sc: Scenario) -> Hit | None:
    refused = [f for f in GEMINI_REFUSED if f in req.body]
    if not refused:
        return None

    def line(f: str) -> str:
        where = f" at '{f}'" if f == "extra_body" else ""
        return f'Invalid JSON payload received. Unknown name "{f}"{where}: Cannot find field.'

    recorded = json.loads(fixture_text("gemini/err_400_unknown_field_seed_list"))
    error = recorded[0]["error"]
    error["message"] = "\n".join(line(f) for f in refused)
    error["details"][0]["fieldViolations"] = [{"description": line(f)} for f in refused]
    return Hit(body=json.dumps(recorded, indent=2))


def _over_limit(req: Request, sc: Scenario) -> bool:
    return sc.context_limit is not None and req.prompt_tokens > sc.context_limit


def llamacpp_overflow(req: Request, sc: Scenario) -> Hit | None:
    if not _over_limit(req, sc):
        return None
    n, m = str(req.prompt_tokens), str(sc.context_limit)
    return Hit(subs=(("request (8708 tokens)", f"request ({n} tokens)"), ("context size (8192 tokens)", f"context size ({m} tokens)"),
                     ('"n_prompt_tokens":8708', f'"n_prompt_tokens":{n}'), ('"n_ctx":8192', f'"n_ctx":{m}')))


def openai_overflow(req: Request, sc: Scenario) -> Hit | None:
    if not _over_limit(req, sc):
        return None
    p, c = req.prompt_tokens, req.token_limit or 0
    return Hit(subs=(("is 4097 tokens", f"is {sc.context_limit} tokens"),
                     ("you requested 4120 tokens (3120 in the messages, 1000 in the completion)",
                      f"you requested {p + c} tokens ({p} in the messages, {c} in the completion)")))


def vllm_overflow(req: Request, sc: Scenario) -> Hit | None:
    if not _over_limit(req, sc):
        return None
    p, c = req.prompt_tokens, req.token_limit or 0
    return Hit(subs=(("is 6048 tokens", f"is {sc.context_limit} tokens"),
                     ("you requested 6616 tokens (568 in the messages, 6048 in the completion)",
                      f"you requested {p + c} tokens ({p} in the messages, {c} in the completion)")))


def vllm_bad_max_tokens(req: Request, sc: Scenario) -> Hit | None:
    limit = req.token_limit
    return Hit(subs=(("got -186.", f"got {limit}."),)) if limit is not None and limit < 1 else None


def content_filtered(req: Request, sc: Scenario) -> Hit | None:
    return Hit() if req.fraction() < sc.content_filter_fraction else None


def _solve(req: Request) -> bool:
    return answer_text(req.prompt, {})[0] == "solve"


def _answered_with(knob: str, api: str) -> Check:
    """A check hitting the solve prompts on ``api`` whose hash falls below the scenario's ``knob``
    fraction; the recorded outcome body is served as recorded."""
    def check(req: Request, sc: Scenario) -> Hit | None:
        return Hit() if req.api == api and _solve(req) and req.fraction() < getattr(sc, knob) else None
    return check


def refused(api: str) -> Check:
    return _answered_with("refusal_fraction", api)


def filtered(api: str) -> Check:
    return _answered_with("filter_fraction", api)


response_failed = _answered_with("failed_fraction", "/responses")
choice_error = _answered_with("choice_error_fraction", "/chat/completions")


def judge_choice_error(req: Request, sc: Scenario) -> Hit | None:
    """A judge prompt (ours or the paper's) whose hash falls below ``judge_choice_error_fraction``: the
    recorded error on the choice, as any call may get it."""
    return Hit() if answer_text(req.prompt, {})[0] != "solve" and req.fraction() < sc.judge_choice_error_fraction \
        else None


def credits_exhausted(req: Request, sc: Scenario) -> Hit | None:
    return Hit() if sc.credits_exhausted else None


def rate_limited_with_reset(req: Request, sc: Scenario) -> Hit | None:
    if req.seq > sc.rate_limit_burst:
        return None
    headers = dict(fixture("openai/err_429_rate_limit_reset_headers")["headers"])
    if sc.reset_tokens is not None:
        headers["x-ratelimit-reset-tokens"] = sc.reset_tokens
    return Hit(headers=headers)


def vllm_budget_over_context(req: Request, sc: Scenario) -> Hit | None:
    limit = req.token_limit
    if sc.context_len is None or limit is None or limit <= sc.context_len:
        return None
    return Hit(subs=(("'max_tokens' (2049)", f"'{'max_completion_tokens' if 'max_completion_tokens' in req.body else 'max_tokens'}' ({limit})"),
                     ("context length (2048)", f"context length ({sc.context_len})"),
                     ("value=2049", f"value={limit}")))


def vllm_overflow_in_200(req: Request, sc: Scenario) -> Hit | None:
    return vllm_overflow(req, sc) if sc.errors_in_200 else None


def lone_surrogate(req: Request, sc: Scenario) -> Hit | None:
    """A solve prompt answered with the built body whose text ends in a lone surrogate escape, this
    prompt's answer in place of the recorded content."""
    if not (_solve(req) and req.fraction() < sc.lone_surrogate_fraction):
        return None
    answer = json.dumps(answer_text(req.prompt, {})[1])[1:-1]
    return Hit(subs=((r'{ \"city\": \"Paris\", \"country\": \"France\" }\udcaf', answer + r"\udcaf"),))


# --------------------------------------------------------------------------- the rule tables

_OPENAI_RULES: tuple[Rule, ...] = (
    Rule("insufficient_quota (scenario)", "openai/err_429_insufficient_quota", quota_exhausted),
    Rule("TPM rate limit with x-ratelimit-* reset headers (scenario)", "openai/err_429_rate_limit_reset_headers",
         rate_limited_with_reset),
    Rule("unknown model", "openai/err_404_model_not_found", unknown_openai_model),
    Rule("reasoning model: max_tokens refused", "openai/err_400_max_tokens_unsupported_gpt5", reasoning_max_tokens),
    Rule("reasoning model: only temperature 1", "openai/err_400_temperature_unsupported_gpt5", reasoning_temperature),
    Rule("temperature below 0", "openai/err_400_invalid_temperature_value", negative_temperature),
    Rule("context length (scenario)", "openai/err_400_context_length_exceeded", openai_overflow),
    Rule("refusal (scenario)", "openai/chat_gpt4o_refusal", refused("/chat/completions")),
    Rule("refusal part (scenario)", "openai/responses_refusal_part", refused("/responses")),
    Rule("incomplete: content_filter (scenario)", "openai/responses_incomplete_content_filter", filtered("/responses")),
    Rule("status failed (scenario)", "openai/responses_failed_server_error", response_failed),
)

RULES: dict[str, tuple[Rule, ...]] = {
    "openai": (Rule("key in Authorization: Bearer", "openai/err_401_invalid_api_key", bearer_missing), *_OPENAI_RULES,
               Rule("finish_reason content_filter (scenario)", "azure/chat_finish_content_filter",
                    filtered("/chat/completions"))),
    # Azure's own 401 body is not recorded: answered with OpenAI's (same error shape)
    "azure": (Rule("key in the api-key header", "openai/err_401_invalid_api_key", azure_key_missing), *_OPENAI_RULES,
              Rule("content filter (scenario)", "azure/err_400_content_filter_innererror", content_filtered),
              Rule("finish_reason content_filter (scenario)", "azure/chat_finish_content_filter",
                   filtered("/chat/completions"))),
    "gemini": (
        Rule("no /responses on the OpenAI-compatible endpoint", "gemini/err_404_responses_not_served", not_chat),
        Rule("burst of 429 (scenario)", "gemini/err_429_resource_exhausted_list", burst),
        Rule("unknown fields refused (seed, frequency_penalty, reasoning, top_k, google, extra_body)",
             "gemini/err_400_unknown_field_seed_list", gemini_refused_fields),
        Rule("safety block (scenario)", "gemini/chat_safety_block_content_filter", filtered("/chat/completions")),
    ),
    "openrouter": (Rule("burst of 429 (scenario)", "openrouter/err_429_upstream_rate_limited", burst),
                   Rule("HTTP 200 carrying a 402 (scenario)", "openrouter/err_200_402_insufficient_credits",
                        credits_exhausted),
                   Rule("finish_reason error on the choice (scenario)", "openrouter/chat_choice_error_502",
                        choice_error),
                   Rule("finish_reason error on the choice, judge prompts (scenario)",
                        "openrouter/chat_choice_error_502", judge_choice_error),
                   Rule("content_filter (scenario)", "openrouter/chat_gemini_content_filter",
                        filtered("/chat/completions"))),
    "vllm": (Rule("token limit below 1", "vllm/err_400_max_tokens_negative", vllm_bad_max_tokens),
             Rule("token limit greater than the context (scenario)", "vllm/err_400_max_tokens_over_context",
                  vllm_budget_over_context),
             Rule("context length inside HTTP 200, a proxy in front (scenario)", "vllm/err_200_400_context_length_flat",
                  vllm_overflow_in_200),
             Rule("context length (scenario)", "vllm/err_400_context_length", vllm_overflow)),
    "llama-cpp": (Rule("context overflow (scenario)", "llamacpp/err_400_exceed_context_size", llamacpp_overflow),),
    "ollama": (Rule("an answer ending in a lone surrogate (scenario)", "ollama/chat_lone_surrogate", lone_surrogate),),
}

#: provider -> (path prefix, {api: recorded success body}); OpenAI's reasoning models get :data:`REASONING_SUCCESS`
PROVIDERS: dict[str, tuple[str, dict[str, str]]] = {
    "openai": ("/openai/v1", {"/chat/completions": "openai/chat_gpt4o_mini_success",
                              "/responses": "openai/responses_gpt5_reasoning_summary"}),
    "azure": ("/azure/openai/v1", {"/chat/completions": "azure/chat_gpt4o_prompt_filter_results",
                                   "/responses": "openai/responses_gpt5_reasoning_summary"}),
    "gemini": ("/gemini/v1beta/openai", {"/chat/completions": "gemini/chat_success"}),
    "openrouter": ("/openrouter/api/v1", {"/chat/completions": "openrouter/chat_gpt5_mini_cost_reasoning"}),
    "vllm": ("/vllm/v1", {"/chat/completions": "generic/chat_deepseek_reasoner_reasoning_content"}),
    "llama-cpp": ("/llamacpp/v1", {"/chat/completions": "llamacpp/chat_gpt_oss_timings"}),
    "ollama": ("/ollama/v1", {"/chat/completions": "ollama/chat_qwen3_reasoning"}),
}

#: the Chat Completions body of an OpenAI reasoning model (o-series, gpt-5), on openai and azure
REASONING_SUCCESS = "openai/chat_o3_mini_reasoning_tokens"


def success_fixture(provider: str, api: str, model: str) -> str:
    """The recorded success body answering ``api`` on ``provider`` for ``model``."""
    if provider in ("openai", "azure") and api == "/chat/completions" and _REASONING.match(_bare(model)):
        return REASONING_SUCCESS
    return PROVIDERS[provider][1][api]


# --------------------------------------------------------------------------- deterministic answers

_VERDICT = re.compile(r"VERDICT-([0-9A-Za-z]+)")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _between(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.S)
    return m.group(1) if m else ""


def _accepted(reference: str, alternatives: str) -> set[str]:
    return {_norm(a) for a in [reference, *re.split(r"[;\n]", alternatives)] if _norm(a)}


def answer_text(prompt: str, answers: dict[str, str]) -> tuple[str, str]:
    """``(kind, text)`` for a prompt: ``judge``, ``paper-judge`` or ``solve``."""
    nonces = _VERDICT.findall(prompt)
    if nonces and "<candidate_answer>" in prompt:
        candidate = _norm(_between(prompt, "candidate_answer"))
        ok = candidate in _accepted(_between(prompt, "reference_answer"), _between(prompt, "accepted_alternatives"))
        verdict = "CORRECT" if ok else "INCORRECT"
        return "judge", (f"The candidate {'names the same answer as' if ok else 'differs from'} the reference.\n"
                         f"VERDICT-{nonces[-1]}: {verdict}")
    if "Reply with only one word: yes or no" in prompt:
        ref = re.search(r"Reference answer: (.*)", prompt)
        alts = re.search(r"Other acceptable answers: (.*)", prompt)
        resp = re.search(r"Model response: (.*?)\n\nDoes the model response", prompt, re.S)
        ok = bool(ref and resp) and _norm(resp.group(1) if resp else "") in _accepted(
            ref.group(1) if ref else "", alts.group(1) if alts else "")
        return "paper-judge", "yes" if ok else "no"
    for key, value in answers.items():
        if key in prompt:
            return "solve", f"Putting the clues together.\n<Answer>{value}</Answer>"
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:6]
    return "solve", f"Putting the clues together.\n<Answer>replay-{digest}</Answer>"


def _set_reasoning(message: dict[str, Any], text: str) -> None:
    for f in ("reasoning_content", "reasoning"):
        if isinstance(message.get(f), str):
            message[f] = text
    for d in message.get("reasoning_details") or []:
        for f in ("summary", "text"):
            if isinstance(d.get(f), str):
                d[f] = text


def success_body(provider: str, req: Request, sc: Scenario, answers: dict[str, str]) -> tuple[dict[str, Any], bool, float | None]:
    """The recorded success body with this request's answer: ``(body, truncated, reported cost)``."""
    name = success_fixture(provider, req.api, req.model)
    body = copy.deepcopy(fixture(name)["body"] if "body" in fixture(name) else json.loads(fixture_text(name)))
    kind, text = answer_text(req.prompt, answers)
    truncated = (kind == "solve" and req.fraction() < sc.truncate_fraction
                 and (sc.truncate_below is None or (req.token_limit or 0) < sc.truncate_below))
    reasoning = f"Replay reasoning for a {kind} prompt of {req.prompt_tokens} words."
    body["model"] = req.model or body.get("model")
    body["id"] = f"{body.get('id', 'replay')}-{req.seq}"
    cost = None
    if req.api == "/responses":
        for item in body["output"]:
            if item.get("type") == "reasoning":
                item["summary"] = [{"type": "summary_text", "text": reasoning}]
            if item.get("type") == "message":
                item["content"][0]["text"] = text
        if truncated:  # as OpenAI documents it: status incomplete, no message item
            body["status"] = "incomplete"
            body["incomplete_details"] = {"reason": "max_output_tokens"}
            body["output"] = [i for i in body["output"] if i.get("type") != "message"]
    else:
        choice = body["choices"][0]
        choice["message"]["content"] = "Let me work through the clues one by one: first" if truncated else text
        _set_reasoning(choice["message"], reasoning)
        choice["finish_reason"] = "length" if truncated else "stop"
        if "native_finish_reason" in choice:
            choice["native_finish_reason"] = "length" if truncated else "completed"
        if provider == "openrouter":
            cost = sc.cost if sc.cost is not None else float(body["usage"]["cost"])
            body["usage"]["cost"] = cost
    return body, truncated, cost


# --------------------------------------------------------------------------- the server

_SECRET_HEADERS = ("authorization", "api-key", "x-api-key", "x-goog-api-key")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:  # a client hanging up is not an error here
        pass


class ReplayServer:
    """The replay server on ``127.0.0.1:port`` (0: a free port), serving in a background thread."""

    def __init__(self, scenario: Scenario | str = "default", port: int = 0, answers: dict[str, str] | None = None,
                 **knobs: Any):
        base = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
        self.scenario = replace(base, **knobs)  # a copy: a test that changes a knob mid-run changes only its server
        self.answers = dict(answers or {})
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._seq = 0
        self._httpd = _HTTPServer(("127.0.0.1", port), self._handler())
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def base_url(self, provider: str) -> str:
        return f"http://127.0.0.1:{self.port}{PROVIDERS[provider][0]}"

    def start(self) -> ReplayServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="replay-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self, provider: str | None = None, api: str | None = None) -> list[dict[str, Any]]:
        """Logged model requests, optionally of one provider and API."""
        with self._lock:
            return [e for e in self.log if (provider is None or e["provider"] == provider)
                    and (api is None or e["api"] == api)]

    # ----------------------------------------------------------------- one request

    def answer(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes, dict[str, Any]]:
        """``(status, headers, body, log entry)`` for one POST."""
        entry: dict[str, Any] = {"path": path, "headers": {k: ("<redacted>" if k in _SECRET_HEADERS else v)
                                                           for k, v in headers.items()}}
        provider = next((p for p, (prefix, _) in PROVIDERS.items() if path.startswith(prefix + "/")), None)
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        entry.update(provider=provider, api=path[len(PROVIDERS[provider][0]):] if provider else path, body=body)
        if provider is None or not isinstance(body, dict):
            return self._own(entry, 404 if provider is None else 400,
                             f"replay server: no provider at {path}" if provider is None else "replay server: body is not a JSON object")
        with self._lock:
            self._seq += 1
            seq = self._seq
        req = Request(provider, entry["api"], headers, body, seq)
        for rule in RULES[provider]:
            hit = rule.check(req, self.scenario)
            if hit is None:
                continue
            text = hit.body if hit.body is not None else fixture_text(rule.fixture)
            for old, new in hit.subs:
                if old not in text:
                    raise AssertionError(f"rule {rule.name!r}: {old!r} is not in {rule.fixture}")
                text = text.replace(old, new)
            status = int(fixture(rule.fixture)["status"])
            out_headers = {"content-type": "application/json", **hit.headers} if text else dict(hit.headers)
            entry.update(status=status, rule=rule.name, fixture=rule.fixture)
            return status, out_headers, text.encode(), entry
        if req.api not in PROVIDERS[provider][1]:
            return self._own(entry, 404, f"replay server: no recorded answer for {req.api} on {provider}")
        out, truncated, cost = success_body(provider, req, self.scenario, self.answers)
        entry.update(status=200, rule="success", fixture=success_fixture(provider, req.api, req.model), truncated=truncated, cost=cost)
        return 200, {"content-type": "application/json"}, json.dumps(out, ensure_ascii=False).encode(), entry

    @staticmethod
    def _own(entry: dict[str, Any], status: int, message: str) -> tuple[int, dict[str, str], bytes, dict[str, Any]]:
        """An answer of the replay server itself (no recording behind it), labelled as such."""
        entry.update(status=status, rule="replay-server", fixture=None)
        return status, {"content-type": "application/json"}, json.dumps({"error": {"message": message}}).encode(), entry

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, out_headers, body, entry = server.answer(self.path.split("?")[0], headers, raw)
                with server._lock:
                    server.log.append(entry)
                self.send_response(status)
                for k, v in out_headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/_log":
                    with server._lock:
                        body = json.dumps(server.log).encode()
                    status = 200
                else:
                    body, status = b'{"error": {"message": "replay server: GET is not served"}}', 404
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), default="default")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                    help="set one of the scenario's knobs (e.g. refusal_fraction=1.0); repeatable")
    args = ap.parse_args(argv)
    knobs: dict[str, Any] = {}
    for knob in args.knob:
        name, sep, value = knob.partition("=")
        if not sep or name not in {f.name for f in fields(Scenario)} or name == "name":
            ap.error(f"--knob {knob!r}: expected NAME=VALUE with NAME one of the Scenario's fields")
        knobs[name] = json.loads(value) if value[:1] in "0123456789-[{tfn\"" else value
    srv = ReplayServer(args.scenario, port=args.port, **knobs)
    print(f"READY http://127.0.0.1:{srv.port}", flush=True)
    for name, (prefix, _) in PROVIDERS.items():
        print(f"  {name:<11} http://127.0.0.1:{srv.port}{prefix}", flush=True)
    try:
        srv._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
