"""One model call of a stage, for a chat model and for a base model: a :class:`Step`.

A stage asks a chat model with its chat prompt and a base model (provider profile ``base_model``:
the embedded Gemma 3 270M, no chat template; :mod:`cresowlve_core.llm.base_model`) with a few-shot
completion prompt over ``/v1/completions``. A :class:`Step` holds both ways of asking, each a
:class:`Variant`: the prompt, the messages builder, the parser and the generation budget.
:meth:`Step.on` binds the step to one endpoint and the run's options; the endpoint's profile picks
the variant here, in the one place that asks :func:`~cresowlve_core.llm.base_model.is_base_model`::

    LABEL = Step("error_label",
                 chat=Variant("error_label", label_messages, parse_label),
                 fewshot=Variant("error_label_fewshot", fewshot_label_messages, parse_fewshot_label,
                                 gen=completion_params))

    call = LABEL.on(client.endpoint, options)
    manifest = new_manifest(..., prompts=call.tags(), max_tokens=call.max_tokens, sent=call.sent(client.endpoint))
    req = call.request(unit)  # messages, prompt tag, generation parameters
    c = await client.complete(req.messages, req.params, prompt_version=req.tag)
    label = call.parse(c.text)
    ...
    run.finish(record_adaptations(manifest, client), ...)  # the fields the provider refused, dropped since

A step without a ``fewshot`` variant asks every model the chat way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cresowlve_core.llm.base_model import is_base_model
from cresowlve_core.llm.types import GenParams
from cresowlve_core.llm.wire import sent_fields
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime.options import ClientOptions

U = TypeVar("U")
Messages = list[dict[str, str]]


def _same(params: GenParams) -> GenParams:
    return params


def asks_fewshot(endpoint: Any) -> bool:
    """``endpoint`` is asked with few-shot completion prompts: its provider profile says base model.
    The one place a stage's branch is chosen."""
    return is_base_model(endpoint)


@dataclass(frozen=True)
class Variant(Generic[U]):
    """One way of asking: for a chat model, or for a base model.

    ``prompt``: the prompt's name, or a function of the unit giving it (a prompt per language or
    mode); ``prompts`` lists every name such a function can give, in the manifest's order (empty:
    the names the run's units use, sorted). ``messages(prompt, unit)`` builds the request and
    ``parse`` reads a reply (called with whatever the stage passes). ``gen`` turns the options'
    generation parameters into this variant's (a base model's: ``/completions`` with its stops).
    ``max_tokens`` is the budget every call of this variant is sent with, whatever the options say;
    ``default_max_tokens`` the budget a command gives when its user names none (:meth:`Step.default_budget`).
    ``protocol`` names a way of asking that is more than one request per unit (a stage runs it
    itself), and ``identity`` is what this variant adds to the run's resume identity."""

    prompt: str | Callable[[U], str]
    messages: Callable[[Prompt, U], Messages]
    parse: Callable[..., Any]
    gen: Callable[[GenParams], GenParams] = _same
    max_tokens: int | None = None
    default_max_tokens: int | None = None
    prompts: tuple[str, ...] = ()
    protocol: str | None = None
    identity: Mapping[str, Any] = field(default_factory=dict)

    def prompt_name(self, unit: U) -> str:
        return self.prompt(unit) if callable(self.prompt) else self.prompt


@dataclass(frozen=True)
class Request:
    """One call: the messages (a base model's one user message ends at its open slot), the prompt
    tag (``name@version``, part of the cache key and the record) and the generation parameters."""

    messages: Messages
    tag: str
    params: GenParams


@dataclass(frozen=True)
class Step(Generic[U]):
    """One model call of a stage: its chat :class:`Variant` and, when a base model is asked
    otherwise, its ``fewshot`` one."""

    name: str
    chat: Variant[U]
    fewshot: Variant[U] | None = None

    def is_fewshot(self, endpoint: Any) -> bool:
        """The endpoint is asked with the few-shot variant (its profile says base model)."""
        return self.fewshot is not None and asks_fewshot(endpoint)

    def variant(self, endpoint: Any) -> Variant[U]:
        return self.fewshot if self.fewshot is not None and self.is_fewshot(endpoint) else self.chat

    def on(self, endpoint: Any, options: ClientOptions | None = None, *, max_tokens: int | None = None,
           effort: str | None = None, api: str | None = None) -> Call[U]:
        """The step bound to ``endpoint`` and the run's ``options``; ``max_tokens`` replaces the options'
        budget (:meth:`default_budget` gives the variant's), ``effort`` and ``api`` go into the
        parameters; an API named here is kept as it is (a base model's ``/completions`` is not forced)."""
        variant = self.variant(endpoint)
        fewshot = variant is not self.chat
        opts = options or ClientOptions()
        if max_tokens is not None:
            opts = opts.model_copy(update={"max_tokens": max_tokens})
        params = opts.gen_params(effort=effort, api=api)
        if api is None:
            params = variant.gen(params)
        if variant.max_tokens is not None:
            params = dataclasses.replace(params, max_tokens=variant.max_tokens)
        budget = variant.max_tokens if variant.max_tokens is not None else opts.max_tokens
        return Call(self, variant, fewshot, opts, params, budget)

    def default_budget(self, endpoint: Any) -> int | None:
        """The budget ``endpoint``'s calls get when the caller names none (None: the options')."""
        return self.variant(endpoint).default_max_tokens

    def prompt_tags(self, endpoint: Any, units: Sequence[U] = ()) -> list[str]:
        """The tags of the prompts this step sends ``endpoint`` (what a report or manifest names)."""
        return self.on(endpoint).tags(units)


@dataclass(frozen=True)
class Call(Generic[U]):
    """A :class:`Step` bound to one endpoint (:meth:`Step.on`): the variant its profile chose, the
    run's options with the call's budget, the generation parameters of every call, and the budget
    they are sent with (recorded in the manifest)."""

    step: Step[U]
    variant: Variant[U]
    fewshot: bool
    options: ClientOptions
    params: GenParams
    max_tokens: int | None

    def prompt(self, unit: U | None = None) -> Prompt:
        """The prompt of ``unit`` (a variant with one prompt needs none)."""
        return load_prompt(self.variant.prompt_name(unit))  # type: ignore[arg-type]

    def tags(self, units: Sequence[U] = ()) -> list[str]:
        """The tags of the prompts sent: every name the variant lists, else those ``units`` use."""
        v = self.variant
        if not callable(v.prompt):
            return [load_prompt(v.prompt).tag]
        if v.prompts:
            return [load_prompt(n).tag for n in v.prompts]
        return sorted({load_prompt(v.prompt_name(u)).tag for u in units})

    def messages(self, unit: U, prompt: Prompt | None = None) -> Messages:
        return self.variant.messages(prompt or self.prompt(unit), unit)

    def request(self, unit: U, params: GenParams | None = None) -> Request:
        """The messages, prompt tag and parameters of ``unit``'s call."""
        prompt = self.prompt(unit)
        return Request(self.variant.messages(prompt, unit), prompt.tag, params or self.params)

    def parse(self, text: str | None, *args: Any, **kwargs: Any) -> Any:
        return self.variant.parse(text, *args, **kwargs)

    def sent(self, endpoint: Any) -> dict[str, Any]:
        """The request fields besides the messages that ``endpoint``'s provider profile writes for
        these parameters (``Manifest.sent``): no temperature for a reasoning model, for example."""
        return sent_fields(self.params, model=endpoint.model, profile=endpoint.profile)


__all__ = ["Call", "Request", "Step", "Variant", "asks_fewshot"]
