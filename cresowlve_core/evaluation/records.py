"""What one evaluation run writes: the manifest and one response record per (item, lang).

A run directory holds ``manifest.json`` (:class:`cresowlve_core.runtime.Manifest`) and ``responses.jsonl``. Records are appended and
flushed as each item finishes; on resume the *last* record per ``(id, lang)`` wins.
Item annotations (difficulty, domains, cultures, reasoning type) are copied into each
record so that a run directory can be analysed on its own.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from cresowlve_core.llm.types import Outcome, Usage

Status = Literal["ok", "error"]
#: ``not_an_answer``: the model under test refused or was filtered, so the judge was not asked and the
#: verdict is ``INCORRECT`` (counted not correct, like every other metric of that record)
JudgeStatus = Literal["scored", "unscored", "error", "not_run", "not_an_answer"]
#: ``completion``: the first line of a base model's few-shot continuation; ``echo``: the output gave the
#: prompt's placeholder or the prompt itself back (empty prediction, never an answer)
Extraction = Literal["answer_tag", "unclosed_answer_tag", "answer_line", "fallback_whole_text", "empty",
                     "completion", "echo"]


class ResponseRecord(BaseModel):
    id: str
    lang: Literal["en", "ru"]
    status: Status
    error: str | None = None
    #: what the call came to (llm/types.py ``Outcome``); ``refused``/``filtered`` are ``status: ok`` (final,
    #: never re-asked), their text is kept in ``raw_output`` but nothing is extracted from it
    #: (``prediction`` None) and every metric is False; ``failed``/``error`` are ``status: error``
    outcome: Outcome = "answer"
    refusal: str | None = None  # the model's refusal text
    invalid_utf8: bool = False  # the body was not valid UTF-8: decoded with U+FFFD, kept and flagged
    model: str
    #: the model the provider said answered (its reply's ``model``: a dated snapshot of an alias, the
    #: model behind a deployment name or a router); None when the reply named none
    served_model: str | None = None
    effort: str | None = None
    # item annotations, copied so a run dir is self-contained
    difficulty: int | None = None
    reasoning_type: str | None = None
    knowledge_domains: list[str] = Field(default_factory=list)
    creative_domains: list[str] = Field(default_factory=list)
    cultures: list[str] = Field(default_factory=list)
    n_atomic_facts: int | None = None
    #: the SHA-256 of the item's view the answer was asked from (:func:`~cresowlve_core.evaluation.runner.item_sha256`):
    #: a resume refuses a run whose items were answered from another text; None in records written before it
    item_sha256: str | None = None
    # the answer
    answer: str | None = None  # the reference answer
    other_answers: str | None = None  # the accepted alternatives (zachet), for rescoring
    prediction: str | None = None
    extraction: Extraction | None = None
    raw_output: str | None = None
    thoughts: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = Field(None, ge=0, allow_inf_nan=False)  # USD; None = unknown price
    #: earlier answers of this item that this one replaced (``--retry-truncated``), the judge verdicts of
    #: this item that ``cresowlve rescore`` withdrew after the judge was paid for them, and what they cost
    #: (USD; None: unknown, or nothing replaced): money spent that the run's ``cost`` and ``judge_cost``,
    #: the costs of the answers and verdicts it keeps, leave out
    n_replaced: int = Field(0, ge=0)
    n_verdicts_replaced: int = Field(0, ge=0)
    replaced_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    cost_source: Literal["reported", "price_table"] | None = None  # the provider's own figure, or our price table
    #: cut off by the token limit (finish_reason length / Responses incomplete); None when not recorded (an
    #: errored call, or a record of a version that did not flag it: rescoring it keeps it unknown, never False)
    truncated: bool | None = None
    max_tokens: int | None = None  # the output budget this answer had
    #: the request fields this answer was asked without (the provider refused them by name and the client
    #: dropped them: the manifest's ``adapted``); [] when it was asked with every field the run's settings send;
    #: None when not recorded (an errored call, or a record of a version that did not write it: rescoring or
    #: judging it later keeps it unknown, never [])
    dropped_fields: list[str] | None = None
    latency_s: float | None = None
    cached: bool = False
    # every metric of the registry (evaluation/metrics.py): True, False or None (not scored)
    scores: dict[str, bool | None] = Field(default_factory=dict)
    em_strict: bool | None = None  # = scores["em_strict"], kept for readers of older runs
    em_lenient: bool | None = None  # = scores["em_lenient"]
    # the judge
    judge_status: JudgeStatus = "not_run"
    judge_verdict: Literal["CORRECT", "INCORRECT"] | None = None
    judge_raw: str | None = None
    judge_model: str | None = None
    judge_served_model: str | None = None  # the model the judge's reply said gave the verdict (as ``served_model``)
    judge_dropped_fields: list[str] | None = None  # the judge's request went without (as ``dropped_fields``)
    judge_usage: Usage | None = None
    judge_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    #: what the judge call came to; a judge that refused or was filtered leaves the verdict unscored
    #: (``judge_status: unscored``, its text in ``judge_raw``): the answer is not made wrong by it
    judge_outcome: Outcome | None = None
    synthetic: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def judge_correct(self) -> bool | None:
        return None if self.judge_verdict is None else self.judge_verdict == "CORRECT"


#: what became of the second verdict of a ``--judge-repeat`` run (``extra.judge_repeat_status``)
REPEAT_STATUSES = ("scored", "unscored", "error", "not_run")


def repeat_status(rec: dict[str, Any]) -> str:
    """The status of a record's second verdict (``--judge-repeat``): ``scored``, ``unscored``, ``error``,
    or ``not_run`` (never asked). A record written before the status was stored counts as ``scored``
    when it holds a verdict, else ``error`` (whether its call errored or gave no verdict is unknown), and
    so does a status that is none of these (a record edited by hand): asked again."""
    extra = repeat_fields(rec)
    if "judge_repeat_status" in extra:
        status = extra["judge_repeat_status"]
        return status if status in REPEAT_STATUSES else "error"
    if "judge_repeat" not in extra:
        return "not_run"
    return "scored" if extra["judge_repeat"] in ("CORRECT", "INCORRECT") else "error"


def repeat_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's ``extra`` (empty when it is not a mapping: a record edited by hand)."""
    extra = rec.get("extra")
    return extra if isinstance(extra, dict) else {}
