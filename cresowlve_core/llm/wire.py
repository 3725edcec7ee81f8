"""Wire formats: how one request is written and one answer read, for each kind of provider API.

:class:`~cresowlve_core.llm.client.LLMClient` owns everything that is the same for every provider
(retries, pools, deadlines, cache, cost, the circuit breaker); a *wire format* owns what differs:
the path and body of a request, its headers, the parsing of a response and the classification of
a failure. An :class:`~cresowlve_core.llm.types.Endpoint` names its format (``wire="openai"``).

A native API is one new module with the four functions of :class:`WireFormat`, registered here
(or at run time with :func:`register_wire`). Today there is one: ``openai``
(:mod:`cresowlve_core.llm.openai_wire`: Chat Completions, Responses, legacy completions).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cresowlve_core.failures import CresowlveError
from cresowlve_core.llm.profiles import Profile
from cresowlve_core.llm.types import Completion, GenParams, LLMConfigError, Outcome

#: wire name -> module implementing :class:`WireFormat`
WIRES: dict[str, str] = {"openai": "cresowlve_core.llm.openai_wire"}

FailureKind = Literal["retry", "item", "fatal"]
#: ``unreachable``: no connection at all; ``not_json``: a body that is not the API;
#: ``no_answer``: connected, but no byte of an answer (closed at once, or silent until a timeout)
DeadSign = Literal["unreachable", "not_json", "no_answer"]


@dataclass
class Failure:
    """One failed attempt, classified.

    ``kind``: ``retry`` (try again after a backoff), ``item`` (this request can never succeed:
    record it for this unit and go on) or ``fatal`` (the configuration is wrong: stop the run).
    ``dead_sign`` marks signs of a dead endpoint (counted by the client's circuit breaker);
    ``reason`` is a short label for retry statistics (``"HTTP 429"``, ``"timeout"``);
    ``outcome`` is ``failed`` when the provider said the response failed (Responses ``status:
    "failed"``), else ``error``: what the call comes to when the retries give up.
    """

    kind: FailureKind
    message: str
    status: int | None = None
    retry_after: float | None = None
    dead_sign: DeadSign | None = None
    reason: str = ""
    outcome: Outcome = "error"
    #: a fatal 400 that names a request field the client can drop or rename and try once more:
    #: ``{field, action ("drop" | "rename"), to, reason}`` (the provider's message)
    adaptation: dict[str, Any] | None = None
    #: a 200 answer the provider billed that could not be used (no text): what the attempt cost
    paid: Completion | None = None
    #: a fatal failure's remedy: what to change before the same command can get past it (a run's last line)
    remedy: str | None = None


class AttemptFailed(CresowlveError):
    """Raised by :meth:`WireFormat.interpret` with the classified failure."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


class WireFormat(Protocol):
    """What a wire-format module provides (all pure functions)."""

    def build_request(
        self, model: str, messages: list[dict[str, Any]], params: GenParams, profile: Profile | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The path (relative to the base URL) and JSON body of one call, as ``profile`` accepts it."""
        ...

    def request_headers(self, api_key: str, profile: Profile | None = None) -> dict[str, str]:
        """Headers carrying the key (and anything else the API requires)."""
        ...

    def interpret(self, path: str, status: int, headers: Any, content: bytes,
                  profile: Profile | None = None) -> Completion:
        """The completion of a response, or :class:`AttemptFailed` with its classification."""
        ...

    def classify_exception(self, exc: BaseException) -> Failure:
        """Classify a transport-level exception (timeout, refused connection, ...)."""
        ...


def adapt_body(body: dict[str, Any], adaptations: list[dict[str, Any]]) -> dict[str, Any]:
    """``body`` with each adaptation applied (a dotted field is nested: ``reasoning.effort``)."""
    out = dict(body)
    for a in adaptations:
        *parents, leaf = str(a["field"]).split(".")
        holder = out
        for p in parents:
            if not isinstance(holder.get(p), dict):
                holder = {}
                break
            holder[p] = dict(holder[p])
            holder = holder[p]
        if leaf not in holder:
            continue
        value = holder.pop(leaf)
        if a["action"] == "rename" and a.get("to"):
            holder.setdefault(str(a["to"]), value)
    return out


def has_field(body: dict[str, Any], field: str) -> bool:
    """Whether ``body`` holds ``field`` (dotted: nested)."""
    holder: Any = body
    for part in field.split("."):
        if not isinstance(holder, dict) or part not in holder:
            return False
        holder = holder[part]
    return True


def register_wire(name: str, module: str) -> None:
    """Make ``Endpoint(wire=name)`` use ``module`` (a dotted path implementing :class:`WireFormat`)."""
    WIRES[name] = module


def get_wire(name: str) -> WireFormat:
    """The wire-format module registered under ``name``."""
    try:
        module = WIRES[name]
    except KeyError:
        raise LLMConfigError(f"unknown wire format {name!r}; known: {', '.join(sorted(WIRES))}") from None
    return importlib.import_module(module)  # type: ignore[return-value]


def sent_fields(params: GenParams, wire: str = "openai", *, model: str = "",
                profile: Profile | None = None) -> dict[str, Any]:
    """Exactly the request fields sent besides the model and the messages/input/prompt (for
    ``Manifest.sent``): temperature, seed, token limit, effort fields, extras, as ``profile``
    sends them for ``model``."""
    _, body = get_wire(wire).build_request(model, [], params, profile)
    return {k: v for k, v in body.items() if k not in ("model", "messages", "input", "prompt")}


def temperature_not_sent(params: GenParams, model: str, profile: Profile) -> str | None:
    """Why ``params``' temperature is not in the requests ``profile`` builds for ``model`` (a
    reasoning model, an effort), or None when it is sent or none is asked for: a warning's text, so
    that a run's temperature is never a setting its requests did not carry."""
    if params.temperature is None or "temperature" in sent_fields(params, model=model, profile=profile):
        return None
    why = "an effort is set" if params.sent_effort else f"{model} is a reasoning model on {profile.name}"
    return (f"temperature {params.temperature:g} is not sent to {model} ({why}: only the provider's default "
            "temperature is accepted, and decodes instead)")
