"""What defines an evaluation run: :class:`EvalConfig`, data only. Its roles (the answerer, the
judge) and their options are resolved from it in :mod:`cresowlve_core.evaluation.roles`."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cresowlve_core.evaluation.scoring import JudgeProtocol
from cresowlve_core.items import Lang
from cresowlve_core.llm.options import finite_extra_body
from cresowlve_core.runtime import ClientOptions


def finite_temperature(value: float | str | None) -> float | str | None:
    """A judge's temperature as given: a number must be finite and >= 0, as the model's
    (``ClientOptions.temperature``); a word (``protocol``, ``default``) or None passes."""
    if isinstance(value, float) and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"must be a finite number >= 0, got {value!r}")
    return value


class EvalConfig(BaseModel):
    """Everything that defines an evaluation run. Recorded in the manifest.

    Client settings live in ``options`` (:class:`ClientOptions`, the project's one set of
    defaults); for convenience they may also be given flat (``EvalConfig(concurrency=16, ...)``).
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    base_url: str
    run_dir: str
    items: str = "demo"
    lang: Lang = "en"
    api_key_env: str | None = None
    effort: str | None = None
    prompt_style: str | None = None  # "cot" | "plain"; default: plain iff an effort is set
    api: str | None = None  # force "chat" | "responses" | "completions"
    judge_model: str | None = None
    judge_base_url: str | None = None  # default: the model's
    judge_api_key_env: str | None = None  # default: the model's when the judge shares its base URL
    judge_max_tokens: int | None = Field(None, ge=1)  # None: 512, or 8192 for a thinking judge
    judge_protocol: JudgeProtocol = "nonce-verdict"  # or "paper": bare yes/no at the judge's default temperature
    judge_repeat: bool = False  # judge each answer twice (seed, seed+1) to measure repeatability
    # the judge takes the same options as the model under test
    judge_provider: str | None = None  # default: the model's profile when it shares the base URL, else detected
    judge_api: Literal["chat", "responses", "completions"] | None = None  # default: the profile's
    judge_effort: str | None = None
    judge_temperature: float | Literal["protocol"] | None = "protocol"  # protocol: 0 (ours), none sent (paper)
    judge_extra_body: dict[str, Any] = Field(default_factory=dict)
    judge_max_cost: float | None = Field(None, ge=0, allow_inf_nan=False)  # USD of new judge calls; None: no cap (max_cost is the model's)
    retry_truncated: bool = False  # re-ask the items whose answer was cut off (with this run's --max-tokens)
    limit: int | None = Field(None, ge=1)
    max_input_chars: int | None = Field(None, ge=1)  # None: the 64 KB question limit (cresowlve_core/inputs.py)
    options: ClientOptions = Field(default_factory=ClientOptions)

    _judge_temperature = field_validator("judge_temperature")(finite_temperature)
    _judge_extra_body = field_validator("judge_extra_body")(finite_extra_body)

    @model_validator(mode="before")
    @classmethod
    def _flat_options(cls, data: Any) -> Any:
        if isinstance(data, dict):
            flat = {k: data[k] for k in list(data) if k in ClientOptions.model_fields}
            if flat:
                data = {k: v for k, v in data.items() if k not in flat}
                base = data.get("options") or ClientOptions()
                base = base.model_dump() if isinstance(base, ClientOptions) else dict(base)
                given = {k: v for k, v in flat.items() if v is not None or k == "temperature"}
                data["options"] = ClientOptions(**{**base, **given})
        return data

    @property
    def thinking(self) -> bool:
        if self.prompt_style:
            return self.prompt_style == "plain"
        return self.effort is not None

    @property
    def seed(self) -> int:
        return self.options.seed
