"""What one evaluation run writes: the manifest and one response record per (item, lang).

A run directory holds ``manifest.json`` and ``responses.jsonl``. Records are appended and
flushed as each item finishes; on resume the *last* record per ``(id, lang)`` wins.
Item annotations (difficulty, domains, cultures, reasoning type) are copied into each
record so that a run directory can be analysed on its own.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from cresowlve_core.llm.types import Usage

Status = Literal["ok", "error"]
JudgeStatus = Literal["scored", "unscored", "error", "not_run"]
Extraction = Literal["answer_tag", "unclosed_answer_tag", "answer_line", "fallback_whole_text", "empty"]


class ResponseRecord(BaseModel):
    id: str
    lang: Literal["en", "ru"]
    status: Status
    error: str | None = None
    model: str
    effort: str | None = None
    # item annotations, copied so a run dir is self-contained
    difficulty: int | None = None
    reasoning_type: str | None = None
    knowledge_domains: list[str] = Field(default_factory=list)
    creative_domains: list[str] = Field(default_factory=list)
    cultures: list[str] = Field(default_factory=list)
    n_atomic_facts: int | None = None
    # the answer
    answer: str | None = None  # the reference answer
    prediction: str | None = None
    extraction: Extraction | None = None
    raw_output: str | None = None
    thoughts: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None  # USD; None = unknown price
    latency_s: float | None = None
    cached: bool = False
    em_strict: bool | None = None
    em_lenient: bool | None = None
    # the judge
    judge_status: JudgeStatus = "not_run"
    judge_verdict: Literal["CORRECT", "INCORRECT"] | None = None
    judge_raw: str | None = None
    judge_model: str | None = None
    judge_usage: Usage | None = None
    judge_cost: float | None = None
    synthetic: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def judge_correct(self) -> bool | None:
        return None if self.judge_verdict is None else self.judge_verdict == "CORRECT"


class RunManifest(BaseModel):
    run_id: str
    kind: str = "eval"  # "eval" | "create" | later stages
    model: str
    base_url: str
    api_key_env: str | None = None  # the NAME of the variable, never its value
    effort: str | None = None
    thinking: bool = False
    lang: Literal["en", "ru"]
    items: str
    n_items: int
    limit: int | None = None
    seed: int = 0
    temperature: float = 0.0
    max_tokens: int | None = None
    prompt: dict[str, str] = Field(default_factory=dict)  # {"name": ..., "version": ...}
    judge: dict[str, Any] | None = None  # {"model", "base_url", "api_key_env", "prompt_version", "seed"}
    git_sha: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    synthetic: bool = False
    config: dict[str, Any] = Field(default_factory=dict)
