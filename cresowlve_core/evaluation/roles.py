"""The models of an evaluation run, resolved from its :class:`~cresowlve_core.evaluation.runner.EvalConfig`
in one place: the answerer (the model under test) and the judge.

A role is its endpoint, its client options and its call (a :class:`~cresowlve_core.runtime.step.Step`
bound to that endpoint, so the provider profile has chosen the chat or the few-shot variant):

* the answerer: ``model`` at ``base_url`` with the run's options; the solve step
  (:func:`~cresowlve_core.evaluation.solve.solve_step`) for ``lang``, chain of thought unless thinking;
* the judge: ``judge_model`` at ``judge_base_url`` (default: the answerer's; then also its key
  variable and provider), its own token budget (512, or 8192 for a thinking judge), temperature
  (``protocol``: 0 under our protocol, none sent under the paper's), extra body, and no cost cap of
  its own; the judge step of ``judge_protocol`` (a base-model judge answers the few-shot yes/no
  prompt instead of writing a nonce verdict line; the paper's protocol stays the paper's).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from cresowlve_core.evaluation.config import EvalConfig
from cresowlve_core.evaluation.scoring import FEWSHOT_PROTOCOL, JudgeProtocol, JudgeRequest, JudgeRule
from cresowlve_core.evaluation.solve import solve_step
from cresowlve_core.llm.base_model import completion_params
from cresowlve_core.llm.profiles import resolve as resolve_profile
from cresowlve_core.llm.types import Endpoint, GenParams
from cresowlve_core.prompts import Prompt
from cresowlve_core.runtime import ClientOptions
from cresowlve_core.runtime.step import Call, Step, Variant

JUDGE_MAX_TOKENS = 512  # the judge writes a sentence or two and a verdict line
#: a thinking judge (a reasoning model, or any --judge-effort) spends tokens on thought before its verdict
THINKING_JUDGE_MAX_TOKENS = 8192


def _judge_messages(prompt: Prompt, req: JudgeRequest) -> list[dict[str, str]]:
    return req.messages


def _judge_verdict(text: str | None, req: JudgeRequest) -> Any:
    return req.parse(text)


def judge_step(protocol: JudgeProtocol) -> Step[JudgeRequest]:
    """The judge's call under ``protocol``; each variant's ``protocol`` is the rule its verdict follows."""
    if protocol == "paper":
        paper = Variant("judge_paper", _judge_messages, _judge_verdict, protocol="paper")
        return Step("judge", chat=paper, fewshot=dataclasses.replace(paper, gen=completion_params))
    return Step("judge", chat=Variant("judge", _judge_messages, _judge_verdict, protocol="nonce-verdict"),
                fewshot=Variant("judge_fewshot", _judge_messages, _judge_verdict, gen=completion_params,
                                protocol=FEWSHOT_PROTOCOL))


@dataclass(frozen=True)
class Role:
    """One model of the run, resolved: where it lives, its client options, its bound call, and what
    every one of its calls shares: the prompt, its messages builder, the generation parameters and,
    for a judge, the rule its verdict follows (its variant's protocol)."""

    name: str
    endpoint: Endpoint
    options: ClientOptions
    call: Call[Any]
    prompt: Prompt
    messages: Callable[[Any], list[dict[str, str]]]
    params: GenParams
    rule: JudgeRule | None

    @classmethod
    def of(cls, name: str, endpoint: Endpoint, call: Call[Any]) -> Role:
        prompt = call.prompt()
        return cls(name, endpoint, call.options, call, prompt, functools.partial(call.variant.messages, prompt),
                   call.params, call.variant.protocol)  # type: ignore[arg-type]

    def temperature_not_sent(self) -> str | None:
        """Why this role's temperature is not in its requests, or None (:func:`~cresowlve_core.llm.wire.temperature_not_sent`)."""
        from cresowlve_core.llm.wire import temperature_not_sent

        return temperature_not_sent(self.params, self.endpoint.model, self.endpoint.profile)

    def params_for(self, seed: int) -> GenParams:
        """The generation parameters with another seed than the options' (a judge's second verdict)."""
        if seed == self.params.seed:  # the judge's first verdict: the parameters as they are (frozen)
            return self.params
        return dataclasses.replace(self.params, seed=seed)


class Roles(NamedTuple):
    """The run's answerer and judge (None: no judge)."""

    answerer: Role
    judge: Role | None


def resolve(cfg: EvalConfig) -> Roles:
    """Every role of ``cfg``, resolved once."""
    return Roles(answerer(cfg), judge(cfg))


def answerer(cfg: EvalConfig) -> Role:
    """The model under test."""
    endpoint = cfg.options.endpoint(cfg.base_url, cfg.model, cfg.api_key_env)
    call = solve_step(cfg.lang, cfg.thinking).on(endpoint, cfg.options, effort=cfg.effort, api=cfg.api)
    return Role.of("answerer", endpoint, call)


def judge_shares_model_endpoint(cfg: EvalConfig) -> bool:
    """The judge is served at the model's base URL (given or defaulted; a trailing ``/`` is no other
    endpoint: requests go to the same path), so it takes the model's provider and key by default."""
    return (cfg.judge_base_url or cfg.base_url).rstrip("/") == cfg.base_url.rstrip("/")


def judge_thinks(cfg: EvalConfig) -> bool:
    """A thinking judge: an effort is set, or its profile names it a reasoning model."""
    if cfg.judge_effort not in (None, "none"):
        return True
    base = cfg.judge_base_url or cfg.base_url
    provider = cfg.judge_provider or (cfg.options.provider if judge_shares_model_endpoint(cfg) else None)
    return bool(cfg.judge_model) and resolve_profile(provider, base).is_reasoning_model(cfg.judge_model or "")


def judge_options(cfg: EvalConfig) -> ClientOptions:
    """The judge's client options: its own provider, token budget, temperature, extra body and cost
    cap (``judge_max_cost``; the model's ``max_cost`` caps the model under test only)."""
    provider = cfg.judge_provider or (cfg.options.provider if judge_shares_model_endpoint(cfg) else None)
    if cfg.judge_temperature == "protocol":
        temperature = None if cfg.judge_protocol == "paper" else 0.0
    else:
        temperature = cfg.judge_temperature
    max_tokens = cfg.judge_max_tokens or (THINKING_JUDGE_MAX_TOKENS if judge_thinks(cfg) else JUDGE_MAX_TOKENS)
    return cfg.options.model_copy(update={"temperature": temperature, "max_tokens": max_tokens,
                                          "max_cost": cfg.judge_max_cost, "provider": provider, "provider_preset": None,
                                          "extra_body": dict(cfg.judge_extra_body)})


def judge(cfg: EvalConfig) -> Role | None:
    """The judge, or None when the run has none."""
    if not cfg.judge_model:
        return None
    base = cfg.judge_base_url or cfg.base_url
    key = cfg.judge_api_key_env or (cfg.api_key_env if judge_shares_model_endpoint(cfg) else None)
    options = judge_options(cfg)
    endpoint = options.endpoint(base, cfg.judge_model, key)
    call = judge_step(cfg.judge_protocol).on(endpoint, options, effort=cfg.judge_effort, api=cfg.judge_api)
    return Role.of("judge", endpoint, call)


__all__ = ["JUDGE_MAX_TOKENS", "THINKING_JUDGE_MAX_TOKENS", "Role", "Roles", "answerer", "resolve", "judge", "judge_options",
           "judge_step", "judge_thinks"]
