"""The evaluation run: solve every item with the model under test, score it, judge it.

``evaluate(EvalConfig(...))`` is what ``cresowlve eval`` and ``notebooks/02_evaluation.ipynb``
call. It is one :func:`~cresowlve_core.runtime.map_with_resume` call over the items: the run
directory is the unit of resume, so re-running the same config sends only what is missing or
errored (and judges only what is not yet judged). Every answer is queued for the disk the moment
it arrives, before the judge is asked, and is on disk before its verdict is recorded, so a judge
failure never throws a paid answer away.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from cresowlve_core import jsonl
from cresowlve_core.evaluation import roles
from cresowlve_core.evaluation.config import EvalConfig
from cresowlve_core.evaluation.entries import SummaryEntry
from cresowlve_core.evaluation.metrics import METRICS, Reference, formula_scores
from cresowlve_core.evaluation.records import ResponseRecord, repeat_fields, repeat_status
from cresowlve_core.evaluation.scoring import (
    JUDGE_PROTOCOLS,
    JudgeRule,
    judge_prediction,
    judge_request,
)
from cresowlve_core.evaluation.solve import extract_answer, is_fewshot
from cresowlve_core.exitcodes import sent_phrase
from cresowlve_core.failures import InputError, MissingInput
from cresowlve_core.items import Item, ItemView, Lang
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.effort import refuse_unsent_effort
from cresowlve_core.llm.pricing import CostMeter, PriceTable, cost_text, usd
from cresowlve_core.llm.types import NOT_AN_ANSWER, BudgetExceeded, Completion, LLMError
from cresowlve_core.llm.wire import sent_fields
from cresowlve_core.runtime import (
    RESPONSES,
    Manifest,
    ResumeError,
    RunDir,
    RunDirError,
    StopWithRecord,
    map_with_resume,
    new_manifest,
    open_client,
    record_adaptations,
    run_coro,
)
from cresowlve_core.runtime.errors import STOP_ERRORS
from cresowlve_core.runtime.mapping import progress_interval
from cresowlve_core.runtime.outcomes import (
    call_outcome,
    count_models,
    error_outcome,
    is_withheld,
    outcome_counts,
    outcome_fields,
    outcome_note,
    served_note,
)
from cresowlve_core.stats import wilson_interval
from cresowlve_core.text import NO_REASONING, plural, shown
from cresowlve_core.untrusted import one_line

log = logging.getLogger(__name__)

#: how a summary names judge replies cut off before their verdict, and the flag that gives more room
JUDGE_CUT_OFF = "cut off at the judge's token limit before a verdict: --judge-max-tokens"
#: above this share of truncated answers the CLI warns and names --max-tokens
TRUNCATION_WARN_SHARE = 0.02


class EvalOutcome(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_dir: Path
    summary: dict[str, Any]
    stopped: str | None = None  # why the run stopped early, if it did
    _keys: list[tuple[str, str]] = PrivateAttr(default_factory=list)  # the run's (id, lang), in item order

    @property
    def records(self) -> list[ResponseRecord]:
        """The latest record of every item, in item order, read from the run directory (a run does
        not keep its records in memory)."""
        latest = latest_records(RunDir(self.run_dir))
        return [ResponseRecord(**latest[k]) for k in self._keys if k in latest]


class RecordWithoutKey(RunDirError):
    """A record of a run directory's ``responses.jsonl`` without ``id`` or ``lang`` (another tool's, or
    edited by hand): the run cannot be resumed or read until it is mended."""


def record_key(r: dict[str, Any]) -> tuple[str, str]:
    """An evaluation record's key, ``(id, lang)``; :class:`RecordWithoutKey` names a record without one."""
    try:
        return (r["id"], r["lang"])
    except KeyError as exc:
        shown = one_line(json.dumps(r, ensure_ascii=False), 200)
        raise RecordWithoutKey(f"a record without {exc.args[0]!r} (every evaluation record has 'id' and 'lang'): "
                               f"{shown}") from None


@contextlib.contextmanager
def naming_the_records_file(run: RunDir) -> Iterator[None]:
    """Reading ``run``'s records: a :class:`RecordWithoutKey` names the file it is in."""
    try:
        yield
    except RecordWithoutKey as exc:
        raise RecordWithoutKey(f"{run.path / RESPONSES}: {exc}") from None


class RecordOfUnknownValue(RunDirError):
    """The latest record of an item of a run directory's ``responses.jsonl`` with a ``status`` or
    ``outcome`` this version does not write (edited by hand, or by a newer cresowlve): it says nothing
    this run can count, as an answer or otherwise, until it is mended."""


def refuse_unknown_values(run: RunDir, index: dict[Any, tuple[int, SummaryEntry]]) -> None:
    """Raise :class:`RecordOfUnknownValue` for the first item whose latest record (``index``:
    :meth:`RunDir.index` of its records) has a status or outcome this version does not know."""
    for (item, lang), (_, entry) in index.items():
        if (odd := entry.unknown_value()) is not None:
            raise RecordOfUnknownValue(f"{run.path / RESPONSES}: the record of item {one_line(item, 80)!r} "
                                       f"({one_line(lang, 8)}) has {odd}, which this version does not write; "
                                       "mend or remove it (nothing was sent)")


def latest_records(run: RunDir) -> dict[Any, dict[str, Any]]:
    """The latest record of each item of ``run``; a record without a key is refused naming the file."""
    with naming_the_records_file(run):
        return run.latest(RESPONSES, record_key)


def read_latest_records(run_dir: Path) -> dict[Any, dict[str, Any]]:
    """:func:`latest_records` of the run directory at ``run_dir``, read without opening it for writing, as a
    reader of another's run reads it (a copy on a read-only mount, or one this user may not write)."""
    path = run_dir / RESPONSES
    if not path.exists():
        return {}
    try:
        return {record_key(r): r for _, r in jsonl.scan_jsonl(path, torn_tail_ok=True, error=RunDirError)}
    except RecordWithoutKey as exc:
        raise RecordWithoutKey(f"{path}: {exc}") from None


def build_manifest(cfg: EvalConfig, n_items: int, resolved: roles.Roles | None = None,
                   items: Sequence[Item] = ()) -> Manifest:
    """The manifest of ``cfg``'s run (``resolved``: its roles, when the run has resolved them). The
    hub snapshot files ``items`` were read from, with their revision and SHA-256, are its ``items_files``;
    an items file's SHA-256 is its ``items_sha256``."""
    from cresowlve_core.runtime.manifest import items_file_sha256
    from cresowlve_core.sources.hub import loaded_files

    answerer, judge = resolved or roles.resolve(cfg)
    prompts = [answerer.prompt.tag]
    judge_section = None
    if judge is not None:
        je, jo, jparams = judge.endpoint, judge.options, judge.params
        prompts.append(judge.prompt.tag)
        judge_section = {"model": je.model, "base_url": je.base_url, "api_key_env": je.api_key_env,
                         "prompt": judge.prompt.tag, "provider": je.profile.name,
                         "api": jparams.resolved_api(je.profile), "effort": cfg.judge_effort,
                         "seed": cfg.seed, "temperature": jo.temperature, "max_tokens": jo.max_tokens,
                         "repeat": cfg.judge_repeat, "protocol": judge.rule, **JUDGE_PROTOCOLS[str(judge.rule)],
                         "sent": sent_fields(jparams, model=je.model, profile=je.profile)}
    ep, params = answerer.endpoint, answerer.params
    return new_manifest(
        "eval",
        run_id=Path(cfg.run_dir).name,
        model=cfg.model,
        base_url=cfg.base_url,
        provider=ep.profile.name,
        api_key_env=cfg.api_key_env,
        effort=cfg.effort,
        thinking=cfg.thinking,
        lang=cfg.lang,
        items=cfg.items,
        n_items=n_items,
        limit=cfg.limit,
        seed=cfg.seed,
        temperature=cfg.options.temperature,
        max_tokens=cfg.options.max_tokens,
        prompts=prompts,
        options=cfg.options.model_dump(mode="json"),
        sent=sent_fields(params, model=cfg.model, profile=ep.profile),
        api=params.resolved_api(ep.profile),
        judge=judge_section,
        config=cfg.model_dump(mode="json", exclude={"options"}),
        **({"items_files": files} if (files := loaded_files(items)) else {}),
        **({"items_sha256": digest} if (digest := items_file_sha256(cfg.items)) else {}),
    )


def incompatible_run(cfg: EvalConfig) -> str | None:
    """Why ``cfg.run_dir`` holds a run that ``cfg`` cannot resume (None if it can, or is new)."""
    from cresowlve_core.runtime.manifest import check_resumable

    if not Path(cfg.run_dir).is_dir():
        return None
    old = RunDir(cfg.run_dir).read_manifest()
    if old is None:
        return None
    try:
        check_resumable(old, build_manifest(cfg, old.n_items or 0))
    except ResumeError as exc:
        return str(exc)
    return None


def refuse_incompatible(cfg: EvalConfig) -> None:
    """Raise the :class:`ResumeError` that starting ``cfg`` would raise (another configuration in its
    run directory), before anything is started; nothing under the archive-on-change rule, which
    moves the old run aside instead."""
    from cresowlve_core.runtime.rundir import archive_changed_from_env

    if not archive_changed_from_env() and (reason := incompatible_run(cfg)) is not None:
        raise ResumeError(reason)


def item_sha256(item: Item, lang: Lang) -> str:
    """The SHA-256 of ``item``'s ``lang`` view (question, answer, explanation, accepted answers): the
    text its answer is asked from and scored against."""
    return hashlib.sha256(item.view(lang).model_dump_json().encode("utf-8")).hexdigest()


def refuse_changed_items(run: RunDir, records: Mapping[Any, Any], items: Sequence[Item], lang: Lang) -> None:
    """Raise :class:`ResumeError` when a record of ``records`` (the latest per item, by key; a record or a
    :class:`SummaryEntry`) was answered from another text of its item than ``items`` give now. A record
    without ``item_sha256`` (written before it was recorded) is taken as it is; an item added since has no record."""
    changed = [it.id for it in items if (rec := records.get((it.id, lang))) is not None
               and (was := rec.get("item_sha256")) is not None and was != item_sha256(it, lang)]
    if changed:
        shown = ", ".join(repr(one_line(i, 40)) for i in changed[:3]) + (", ..." if len(changed) > 3 else "")
        raise ResumeError(f"{run.path / RESPONSES}: {len(changed)} item(s) of the run were answered from another text "
                          f"than the items give now ({shown}): the items changed since; restore them or use another "
                          "run directory (resume only continues the same items; nothing was sent)")


def record_base(item: Item, cfg: EvalConfig) -> dict[str, Any]:
    """The item's fields every record carries, so a run directory can be analysed on its own."""
    view = item.view(cfg.lang)
    return {
        "id": item.id, "lang": cfg.lang, "model": cfg.model, "effort": cfg.effort,
        "item_sha256": item_sha256(item, cfg.lang),
        "difficulty": item.difficulty, "reasoning_type": item.reasoning_type,
        "knowledge_domains": item.knowledge_domains, "creative_domains": item.creative_domains,
        "cultures": item.cultures,
        "n_atomic_facts": len(item.atomic_facts) if item.atomic_facts is not None else None,
        "answer": view.answer, "other_answers": view.other_answers,
    }


def score_fields(raw_output: str | None, answer: str, other_answers: str | None, *,
                 fewshot: bool = False) -> dict[str, Any]:
    """Answer extraction and every formula metric, from the raw output alone (no model call);
    ``fewshot``: the output continues the base-model few-shot prompt."""
    prediction, how = extract_answer(raw_output, fewshot=fewshot)
    scores = formula_scores(raw_output, prediction, Reference(answer, other_answers), fewshot=fewshot)
    return {"prediction": prediction, "extraction": how, "scores": scores,
            "em_strict": scores.get("em_strict"), "em_lenient": scores.get("em_lenient")}


def not_an_answer_scores() -> dict[str, Any]:
    """The scores of a refused or filtered answer: nothing extracted, every formula metric False
    (the judge's False is set by the run that has a judge, :data:`NOT_AN_ANSWER_VERDICT`)."""
    scores: dict[str, bool | None] = {m.name: False for m in METRICS if not m.model_based}
    return {"prediction": None, "extraction": None, "scores": scores,
            "em_strict": scores.get("em_strict"), "em_lenient": scores.get("em_lenient")}


#: the judge's fields for a refused or filtered answer: not asked, counted not correct
NOT_AN_ANSWER_VERDICT: dict[str, Any] = {"judge_status": "not_an_answer", "judge_verdict": "INCORRECT",
                                         "judge_raw": None, "judge_usage": None, "judge_cost": None}


def answer_fields(view: ItemView, c: Completion, max_tokens: int | None = None, *,
                  fewshot: bool = False) -> dict[str, Any]:
    """A finished completion of the model under test, extracted and scored. A truncated answer
    (cut off by the token limit) is flagged and scored as the text it is, as the paper would. A
    refused or filtered one keeps its (partial) text in ``raw_output`` and is scored False on
    every metric, whatever that text says."""
    scored = not_an_answer_scores() if is_withheld(c) else score_fields(c.text, view.answer, view.other_answers,
                                                                        fewshot=fewshot)
    return dict(status="ok", **outcome_fields(c), raw_output=c.text, thoughts=c.thoughts, usage=c.usage,
                cost=c.cost, cost_source=cost_source(c), latency_s=round(c.latency_s, 3), cached=c.cached,
                truncated=c.truncated, max_tokens=max_tokens, dropped_fields=dropped_fields(c), **scored)


def dropped_fields(c: Completion) -> list[str]:
    """The request fields ``c`` was asked without (dropped after the provider refused them; a renamed field
    still carries its value)."""
    return sorted({str(a["field"]) for a in c.raw.get("adapted") or []
                   if isinstance(a, dict) and a.get("field") and a.get("action") == "drop"})


def cost_source(c: Completion) -> str | None:
    """Where a cost came from: the provider's own report, or the price table (None: unknown)."""
    if c.cost is None:
        return None
    return "reported" if c.reported_cost is not None and c.cost == c.reported_cost else "price_table"


def needs_judge(prev: dict[str, Any] | SummaryEntry | None, *, repeat: bool = False) -> bool:
    """An answer the judge still owes a verdict: its first one, or (``repeat``: a ``--judge-repeat`` run)
    the second verdict of an answer whose first one the judge gave."""
    if prev is None or prev.get("status") != "ok":
        return False
    if prev.get("judge_status") in (None, "not_run", "error"):
        return True
    return repeat and prev.get("judge_status") in ("scored", "unscored") and repeat_left(prev)


def repeat_left(rec: dict[str, Any] | SummaryEntry) -> bool:
    """The second verdict of ``rec`` is still to ask: never asked, or its call errored."""
    status = rec.judge_repeat_status if isinstance(rec, SummaryEntry) else repeat_status(rec)
    return status in ("not_run", "error")


def replaced_fields(previous: dict[str, Any]) -> dict[str, Any]:
    """``n_replaced`` and ``replaced_cost`` of an answer that replaces ``previous`` (``--retry-truncated``):
    the earlier answers and what they and their verdicts cost, unknown (None) when any of those costs is
    (a verdict that was never asked costs nothing)."""
    judge = previous.get("judge_cost")
    if judge is None and previous.get("judge_status") in (None, "not_run", "not_an_answer"):
        judge = 0.0
    return {"n_replaced": (previous.get("n_replaced") or 0) + 1,
            "n_verdicts_replaced": previous.get("n_verdicts_replaced") or 0,
            "replaced_cost": _costs([earlier_replaced_cost(previous), previous.get("cost"), judge])}


def verdict_replaced_fields(previous: dict[str, Any]) -> dict[str, Any]:
    """``n_verdicts_replaced`` and ``replaced_cost`` of a record whose paid judge verdict (:func:`paid_verdict`)
    ``cresowlve rescore`` withdraws: the verdict's calls (its repeat's included) join what was replaced
    before, unknown (None) when any of those costs is; its own judge cost and usage are cleared, so that
    the verdict asked next is what the run's judge cost counts."""
    return {"n_verdicts_replaced": (previous.get("n_verdicts_replaced") or 0) + 1,
            "replaced_cost": _costs([earlier_replaced_cost(previous), previous.get("judge_cost")]),
            "judge_cost": None, "judge_usage": None}


def earlier_replaced_cost(rec: dict[str, Any]) -> float | None:
    """What the answers and verdicts ``rec`` replaced cost ($0 when it replaced none; None: unknown)."""
    return rec.get("replaced_cost") if rec.get("n_replaced") or rec.get("n_verdicts_replaced") else 0.0


def paid_verdict(rec: dict[str, Any]) -> bool:
    """``rec`` holds a verdict the judge was asked for (it replied, or a cost was recorded for it)."""
    return rec.get("judge_status") in ("scored", "unscored") or rec.get("judge_cost") is not None


def with_withdrawn_cost_moved(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec``, or, when it holds no verdict (not run, not an answer) but a judge cost (a verdict withdrawn
    by a rescore of a version that left its cost there, where no total counts it), ``rec`` with that cost
    moved to ``replaced_cost`` (:func:`verdict_replaced_fields`)."""
    if rec.get("judge_status") in ("not_run", "not_an_answer") and rec.get("judge_cost") is not None:
        return {**rec, **verdict_replaced_fields(rec)}
    return rec


def reask_truncated(cfg: EvalConfig, rec: dict[str, Any] | SummaryEntry) -> bool:
    """A truncated answer to ask again (``--retry-truncated``) with a larger budget than it had."""
    budget, had = cfg.options.max_tokens, rec.get("max_tokens")
    return cfg.retry_truncated and bool(rec.get("truncated")) and (budget is None or had is None or budget > had)


class _Evaluator:
    """The per-item call of the run: solve (unless answered already), persist, judge."""

    def __init__(self, cfg: EvalConfig, resolved: roles.Roles, run: RunDir,
                 completions: dict[str, Completion | LLMError] | None, judge_bar: Any = None,
                 adapted: Sequence[dict[str, Any]] = (), judge_adapted: Sequence[dict[str, Any]] = ()):
        self.cfg, self.run, self.completions = cfg, run, completions or {}
        # what earlier runs in this run directory adapted for the model under test, and for the judge
        self.adapted, self.judge_adapted = adapted, judge_adapted
        self.judge_bar = judge_bar  # the judge's own phase of the progress display
        prices = PriceTable.load()
        cache = cfg.options.open_cache()
        self.meter, self.judge_meter = CostMeter(), CostMeter(role="judge")
        self.answerer, self.judge_role = resolved.answerer, resolved.judge
        self.client: LLMClient = open_client(self.answerer.endpoint, self.answerer.options, meter=self.meter,
                                             prices=prices, cache=cache)
        jr = self.judge_role
        self.judge: LLMClient | None = (
            open_client(jr.endpoint, jr.options, meter=self.judge_meter, prices=prices, cache=cache) if jr else None)
        # a resume asks as the run asked before: without the fields the provider refused then
        for client, earlier in ((self.client, adapted), (self.judge, judge_adapted)):
            if client is not None:
                client.adaptations.extend(dict(a) for a in earlier if isinstance(a, dict) and a.get("field")
                                          and all(x["field"] != a["field"] for x in client.adaptations))
        self.fewshot = self.answerer.call.fewshot

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.judge:
            await self.judge.aclose()

    def reask(self, rec: dict[str, Any] | SummaryEntry) -> bool:
        return reask_truncated(self.cfg, rec)

    def done(self, rec: dict[str, Any] | SummaryEntry) -> bool:
        return (rec.get("status") == "ok" and not (self.judge is not None and needs_judge(rec, repeat=self.cfg.judge_repeat))
                and not self.reask(rec))

    async def __call__(self, item: Item, previous: dict[str, Any] | None) -> dict[str, Any]:
        cfg = self.cfg
        view = item.view(cfg.lang)
        written: asyncio.Future[None] | None = None
        if previous is not None and previous.get("status") == "ok" and not self.reask(previous):
            rec = {**previous}  # answered before; only the judge is missing
        else:
            c = self.completions.get(item.id)
            if isinstance(c, LLMError):  # the provider's per-request error from a batch
                raise c
            if c is None:
                self._refuse_unsent_effort()
                c = await self.client.complete(self.answerer.messages(view), self.answerer.params,
                                               prompt_version=self.answerer.prompt.tag)
                self._refuse_unsent_effort()
            rec = {**record_base(item, cfg), **answer_fields(view, c, cfg.options.max_tokens, fewshot=self.fewshot)}
            if previous is not None and previous.get("status") == "ok":  # a truncated answer asked again
                rec.update(replaced_fields(previous))
            if self.judge is not None and not is_withheld(c):
                # the paid answer is queued for the disk before the judge is asked, and is on disk
                # before this item's verdict is returned, whatever the judge does
                written = self.run.queue_append(RESPONSES, ResponseRecord.model_validate(rec).model_dump(mode="json"))
        try:
            if self.judge is not None and rec.get("outcome") in NOT_AN_ANSWER:  # nothing to judge: not correct
                rec.update(NOT_AN_ANSWER_VERDICT, judge_model=cfg.judge_model)
                if self.judge_bar is not None:
                    self.judge_bar.update(1)
            elif self.judge is not None:
                prediction = judge_prediction(rec, self._rule, fewshot=self.fewshot)
                first = needs_judge(rec)  # else only the second verdict is owed (an earlier one errored)
                try:
                    if first:
                        rec = with_withdrawn_cost_moved(rec)
                        rec.update(await self._judge_once(item, prediction, cfg.seed))
                        rec["extra"] = without_repeat(repeat_fields(rec))  # a fresh first verdict, a fresh repeat
                    if cfg.judge_repeat and rec["judge_status"] != "error" and (first or repeat_left(rec)):
                        # a second, independent verdict (another seed, so not a cache hit) for repeatability
                        rec = with_repeat(rec, await self._judge_once(item, prediction, cfg.seed + 1))
                except STOP_ERRORS as exc:
                    # a verdict the budget kept from being asked was never sent: not run, not an error
                    stopped = ({"judge_status": "not_run", "judge_raw": None} if isinstance(exc, BudgetExceeded)
                               else {"judge_status": "error", "judge_raw": str(exc)})
                    if rec.get("judge_status") in (None, "not_run", "error"):
                        rec.update(stopped, judge_verdict=None)
                    else:  # the first verdict is kept; the second is asked again on resume
                        rec = with_repeat(rec, {**stopped, "judge_verdict": None})
                    raise StopWithRecord(exc, _with_judge_score(rec)) from exc
                if self.judge_bar is not None:
                    self.judge_bar.update(1)
        finally:
            if written is not None:
                await self.run.hurried(written)  # a failed write (a full disk) is raised here
        return _with_judge_score(rec)

    def _refuse_unsent_effort(self) -> None:
        """Stop the run once the provider has refused the effort of the model under test (in this run,
        or in an earlier one in this run directory): the client would go on without it, and answers at
        the provider's default effort would be recorded under the effort the run is labelled with."""
        if self.cfg.effort is not None and (self.adapted or self.client.adaptations):
            refuse_unsent_effort(self.answerer.endpoint.describe(), self.cfg.effort,
                                 [*self.adapted, *self.client.adaptations])

    def _refuse_unsent_judge_effort(self) -> None:
        """The same for the judge's effort (``--judge-effort``): verdicts at the provider's default effort
        would be recorded as the verdicts of the judge the run names."""
        assert self.judge is not None and self.judge_role is not None
        if self.cfg.judge_effort is not None and (self.judge_adapted or self.judge.adaptations):
            refuse_unsent_effort(self.judge_role.endpoint.describe(), self.cfg.judge_effort,
                                 [*self.judge_adapted, *self.judge.adaptations], unit="verdict", flag="--judge-effort")

    @property
    def _rule(self) -> JudgeRule:
        assert self.judge_role is not None and self.judge_role.rule is not None
        return self.judge_role.rule

    async def _judge_once(self, item: Item, prediction: str, seed: int) -> dict[str, Any]:
        assert self.judge is not None and self.judge_role is not None
        view = item.view(self.cfg.lang)
        req = judge_request(item.id, view.question, view.answer, prediction, explanation=view.explanation,
                            other_answers=view.other_answers, seed=seed, protocol=self._rule)
        self._refuse_unsent_judge_effort()
        try:
            c = await self.judge.complete(req.messages, self.judge_role.params_for(seed), prompt_version=req.prompt.tag)
            self._refuse_unsent_judge_effort()  # a verdict the provider gave without the effort is not kept
        except STOP_ERRORS:
            raise
        except LLMError as exc:
            return {"judge_status": "error", "judge_raw": str(exc), "judge_verdict": None,
                    "judge_model": self.cfg.judge_model, "judge_served_model": None, "judge_dropped_fields": [],
                    "judge_cost": None}
        # a judge that refused or was filtered gives no verdict: unscored, its text kept, the answer not made wrong
        verdict = None if is_withheld(c) else req.parse(c.text, cut_off=c.truncated)
        return {"judge_status": "scored" if verdict else "unscored", "judge_verdict": verdict,
                "judge_raw": c.refusal or c.text, "judge_outcome": call_outcome(c),
                "judge_model": self.cfg.judge_model, "judge_served_model": c.model or None,
                "judge_dropped_fields": dropped_fields(c), "judge_usage": c.usage, "judge_cost": c.cost}


def truncation_warning(s: dict[str, Any], retry: str = "the same command with --retry-truncated --max-tokens N") -> str | None:
    """A warning when more than 2% of the answers were cut off by the token limit (``retry``: how to
    re-ask them in the words of the command that ran them)."""
    n_trunc, n_ok = s.get("n_truncated") or 0, s.get("n_ok") or 0
    if not n_ok or n_trunc / n_ok <= TRUNCATION_WARN_SHARE:
        return None
    return (f"warning: {n_trunc} of {n_ok} answers ({100 * n_trunc / n_ok:.1f}%) were cut off by the token limit "
            f"and are scored as wrong; re-ask only those with a larger budget: {retry}")


def _with_judge_score(rec: dict[str, Any]) -> dict[str, Any]:
    verdict = rec.get("judge_verdict")
    scores = {**(rec.get("scores") or {}), "judge": None if verdict is None else verdict == "CORRECT"}
    return ResponseRecord.model_validate({**rec, "scores": scores}).model_dump(mode="json")


def _add_costs(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def without_repeat(extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` without a second verdict's fields."""
    return {k: v for k, v in extra.items() if not k.startswith("judge_repeat")}


def with_repeat(rec: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with its second verdict ``again`` (a :meth:`_Evaluator._judge_once` result) in ``extra``.
    ``judge_cost`` is the cost of the judge calls that replied (an errored second call adds nothing, and
    the summary's judge cost is unknown while one is left); a record of an older run, whose judge cost
    held an earlier second call's cost if it was billed, has its judge cost unknown."""
    extra = repeat_fields(rec)
    cost = rec.get("judge_cost")
    if "judge_repeat" in extra and "judge_repeat_status" not in extra:
        cost = None  # an older record's judge_cost held its repeat's cost, if that call was billed
    if again["judge_status"] != "error":
        cost = _add_costs(cost, again.get("judge_cost"))
    repeat = {"judge_repeat": again["judge_verdict"], "judge_repeat_raw": again["judge_raw"],
              "judge_repeat_status": again["judge_status"], "judge_repeat_outcome": again.get("judge_outcome"),
              "judge_repeat_cost": again.get("judge_cost")}
    return {**rec, "extra": {**extra, **repeat}, "judge_cost": cost}


async def evaluate_async(cfg: EvalConfig, items: list[Item], *, progress: bool = True,
                         on_record: Callable[[dict[str, Any]], None] | None = None,
                         completions: dict[str, Completion | LLMError] | None = None,
                         stopped: str | None = None, resolved: roles.Roles | None = None) -> EvalOutcome:
    """Evaluate ``items`` into ``cfg.run_dir``, resuming. With ``completions`` (answers collected
    from a batch, by item id; an ``LLMError`` is recorded as that item's error) only those items are
    scored, and nothing is sent to the model under test. ``stopped``: why the batch ended early.
    ``resolved``: ``cfg``'s roles when the caller resolved them (:func:`roles.resolve`) already."""
    run = RunDir(cfg.run_dir, secret_names=[n for n in (cfg.api_key_env, cfg.judge_api_key_env) if n])
    resolved = resolved or roles.resolve(cfg)
    before = run.read_manifest()
    manifest = run.begin(build_manifest(cfg, len(items), resolved, items))
    earlier_passes = _previous_summary(run.path / "summary.json")  # read before this pass replaces it
    try:
        with naming_the_records_file(run):
            index = run.index(RESPONSES, record_key, SummaryEntry)  # an entry per item, not whole records
        refuse_unknown_values(run, index)
        refuse_changed_items(run, {k: e for k, (_, e) in index.items()}, items, cfg.lang)
    except (RunDirError, ResumeError):
        run.abandon(before)
        raise
    # with a batch's answers: those items, and the answers of earlier calls that the judge still owes a verdict
    units = [it for it in items if completions is None or it.id in completions
             or (cfg.judge_model is not None
                 and needs_judge(index.get((it.id, cfg.lang), (None, None))[1], repeat=cfg.judge_repeat))]
    judge_bar = None
    if cfg.judge_model and progress:
        from tqdm.auto import tqdm

        judged = {k for k, (_, e) in index.items() if e.status == "ok" and not needs_judge(e, repeat=cfg.judge_repeat)}
        judge_bar = tqdm(total=len(units), initial=sum((it.id, cfg.lang) in judged for it in units),
                         desc=f"judge {one_line(cfg.judge_model)}", unit="verdict", position=1, dynamic_ncols=True, leave=True,
                         mininterval=progress_interval())
        del judged
    ev = _Evaluator(cfg, resolved, run, completions, judge_bar, adapted=manifest.adapted,
                    judge_adapted=(manifest.judge or {}).get("adapted") or ())

    def on_error(item: Item, exc: BaseException) -> dict[str, Any]:
        return ResponseRecord(**record_base(item, cfg), status="error", error=str(exc),
                              outcome=error_outcome(exc)).model_dump(mode="json")

    try:
        result = await map_with_resume(
            run, RESPONSES, units, key=lambda it: (it.id, cfg.lang), call=ev, record_key=record_key,
            done=ev.done, on_error=on_error, on_record=on_record, entry=SummaryEntry, index=index,
            concurrency=cfg.options.concurrency, progress=progress, desc=f"{cfg.model} [{cfg.lang}]")
    finally:
        await ev.aclose()
        if judge_bar is not None:
            judge_bar.close()
    keys: list[tuple[str, str]] = [(it.id, cfg.lang) for it in items]
    entries = {k: e for k, (_, e) in index.items()}  # what was on disk (a batch scores only some items) ...
    entries.update(result.records)  # ... and what this call wrote
    del index
    summary = summarize([entries[k] for k in keys if k in entries], n_items=len(items), model_meter=ev.meter.summary(),
                        judge_meter=ev.judge_meter.summary(), judged=cfg.judge_model is not None,
                        thinking=cfg.thinking, effort=cfg.effort, judge_repeat=cfg.judge_repeat)
    summary["unusable_spent"] = unusable_spent(earlier_passes, summary["spent_now"])
    summary["stopped"] = result.stopped or stopped
    summary["repairs"] = result.repairs
    summary["n_sent"] = result.n_sent
    manifest = record_adaptations(manifest, ev.client, ev.judge)  # fields the provider refused by name
    run.finish(manifest, stopped=summary["stopped"], summary=summary)
    if result.stop_error is not None and not isinstance(result.stop_error, BudgetExceeded):
        raise result.stop_error  # a wrong key, model or endpoint: everything finished is on disk
    outcome = EvalOutcome(run_dir=run.path, summary=summary, stopped=summary["stopped"])
    outcome._keys = keys
    return outcome


def load_eval_items(cfg: EvalConfig) -> list[Item]:
    from cresowlve_core.sources.sample import load_items

    items = load_items(cfg.items, cfg.lang, max_input_chars=cfg.max_input_chars)
    return items[: cfg.limit] if cfg.limit is not None else items


def evaluate(cfg: EvalConfig, *, progress: bool = True, resolved: roles.Roles | None = None) -> EvalOutcome:
    """Load the items named by ``cfg.items`` and run :func:`evaluate_async` to completion
    (``resolved``: ``cfg``'s roles, when resolved already)."""
    return run_coro(evaluate_async(cfg, load_eval_items(cfg), progress=progress, resolved=resolved))


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _costs(values: list[float | None]) -> float | None:
    """A total, or None (unknown) when any part is unknown or there is nothing to add."""
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _judge_cost(ok: Sequence[SummaryEntry]) -> float | None:
    """What the judge's calls cost: $0 when it was asked nothing (every verdict not run or owed no call),
    else their total, unknown when any call's cost is."""
    asked = [r.judge_cost for r in ok if r.judge_status not in ("not_run", "not_an_answer")]
    return _costs(asked) if asked else 0.0


def metric_summary(records: Sequence[SummaryEntry], n_items: int) -> dict[str, dict[str, Any]]:
    """Per metric of the registry: correct k over scored n, accuracy with a Wilson 95% CI, and
    coverage (scored / planned items). Errored and not-run items are not scored."""
    out: dict[str, dict[str, Any]] = {}
    for m in METRICS:
        values = [r.scores.get(m.name) for r in records if r.status == "ok"]
        scored = [v for v in values if v is not None]
        k, n = sum(scored), len(scored)
        ci = wilson_interval(k, n) if n else None
        out[m.name] = {"label": m.label, "k": k, "n": n, "accuracy": k / n if n else None,
                       "ci95": list(ci) if ci else None, "coverage": n / n_items if n_items else None}
    return out


def summarize(records: Sequence[SummaryEntry], *, n_items: int, model_meter: dict[str, Any] | None = None,
              judge_meter: dict[str, Any] | None = None, judged: bool | None = None,
              thinking: bool = False, effort: str | None = None, judge_repeat: bool = False) -> dict[str, Any]:
    """Table-1 numbers for one run (every metric of the registry, with n, coverage and a Wilson
    95% CI), counts of errored and not-run items, the most common error, tokens and cost, from
    each item's :class:`~cresowlve_core.evaluation.entries.SummaryEntry`.

    For a run labelled thinking, ``n_no_reasoning`` counts answers that show no sign of reasoning
    (no reasoning tokens, no thoughts): a provider that silently ignored the effort shows up here.
    For a run labelled non-thinking, or at ``effort`` ``none`` (which asks for no reasoning),
    ``n_unlabelled_reasoning`` counts answers that do show it: a reasoning model asked with no
    effort reasons at its provider's default, one that ignored ``none`` reasons anyway.

    For a ``judge_repeat`` run (``--judge-repeat``), :func:`repeat_summary` counts the second verdicts."""
    reasons = thinking and effort != NO_REASONING  # the run asked for reasoning

    ok = [r for r in records if r.status == "ok"]
    errors = Counter(r.error or "error" for r in records if r.status == "error")
    judge_errors = Counter(r.judge_error or "error" for r in ok if r.judge_status == "error")
    metrics = metric_summary(records, n_items)
    judge = metrics["judge"]
    if judged is None:
        judged = any(r.judge_status != "not_run" for r in ok)
    usage = lambda attr: _sum([getattr(r, attr) for r in ok])  # noqa: E731
    repeats = repeat_summary(ok) if judge_repeat and judged else {"judge_repeat": False}
    return {
        "n_items": n_items,
        "n_ok": len(ok),
        # answers that are the model's refusal or its provider's filter (counted in n, never correct)
        **outcome_counts({"status": r.status, "outcome": r.outcome} for r in ok),
        "n_error": sum(errors.values()),
        "n_not_run": n_items - len(records),
        "top_error": list(errors.most_common(1)[0]) if errors else None,
        "metrics": metrics,
        "em_strict": metrics["em_strict"]["accuracy"],
        "em_lenient": metrics["em_lenient"]["accuracy"],
        "judged": judged,
        "n_judged": judge["n"],
        "judge_accuracy": judge["accuracy"],
        "judge_ci95": judge["ci95"],
        "n_unscored": sum(r.judge_status == "unscored" for r in ok),
        "n_judge_withheld": sum(r.judge_outcome in NOT_AN_ANSWER for r in ok),  # verdicts the judge refused
        # judge replies cut off at the judge's token limit before a verdict (--judge-max-tokens)
        "n_judge_cut_off": sum(r.judge_status == "unscored" and r.judge_outcome == "truncated" for r in ok),
        "n_judge_error": sum(judge_errors.values()),
        # answers a judged run has not judged yet (a refusal or a filtered answer is never judged)
        "n_judge_not_run": (sum(r.judge_status == "not_run" and r.outcome not in NOT_AN_ANSWER for r in ok)
                            if judged else 0),
        "top_judge_error": list(judge_errors.most_common(1)[0]) if judge_errors else None,
        "n_fallback_extraction": sum(r.extraction == "fallback_whole_text" for r in ok),
        "n_truncated": sum(r.truncated is True for r in ok),
        # answers whose record does not say whether they were cut off (older versions did not flag it)
        "n_truncated_unknown": sum(r.truncated is None for r in ok),
        # answers whose body had bytes that were not UTF-8: U+FFFD in their place, kept and scored as they read
        "n_invalid_utf8": sum(r.invalid_utf8 for r in ok),
        "n_cost_reported": sum(r.cost_source == "reported" for r in ok),
        # answers asked without a field the provider refused, per field (the others were asked with it)
        "dropped_answers": dict(sorted(Counter(f for r in ok for f in r.dropped_fields or ()).items())),
        # answers whose record says how they were asked (older versions did not write it)
        "n_dropped_known": sum(r.dropped_fields is not None for r in ok),
        # the models the provider said answered, with how many answers each (answers that named none left out)
        "served_models": count_models(r.served_model for r in ok),
        "judge_served_models": count_models(r.judge_served_model for r in ok),
        "thinking": thinking,
        "effort": effort,
        "n_no_reasoning": (sum(not r.shows_reasoning for r in ok if r.outcome not in NOT_AN_ANSWER)
                           if reasons else None),
        # a run that asked for no reasoning whose model reasoned anyway (a reasoning model at its default effort)
        "n_unlabelled_reasoning": None if reasons else sum(r.shows_reasoning for r in ok),
        "input_tokens": usage("input_tokens"),
        "output_tokens": usage("output_tokens"),
        "reasoning_tokens": usage("reasoning_tokens"),
        # answers whose input or output count is unknown: the token sums are over the others (a lower bound)
        "n_usage_unknown": sum(r.input_tokens is None or r.output_tokens is None for r in ok),
        "cost": _costs([r.cost for r in ok]),
        # the known part when some answers' cost is unknown (a line shows it as a lower bound)
        "cost_known": sum(r.cost for r in ok if r.cost is not None),
        "n_cost_unknown": sum(r.cost is None for r in ok),
        "judge_cost": (_judge_cost(ok) if judged and not repeats.get("n_judge_repeat_error") else None),
        # answers replaced by the ones kept (--retry-truncated), paid verdicts withdrawn by rescore, and what
        # they cost
        "n_replaced": sum(r.n_replaced for r in ok),
        "n_verdicts_replaced": sum(r.n_verdicts_replaced for r in ok),
        "replaced_cost": _costs([r.replaced_cost for r in ok if r.n_replaced or r.n_verdicts_replaced]),
        "spent_now": {"model": model_meter, "judge": judge_meter},
        **repeats,
    }


def repeat_summary(ok: Sequence[SummaryEntry]) -> dict[str, Any]:
    """The second verdicts of a ``--judge-repeat`` run, over the answers whose first verdict the judge
    gave (scored or unscored; an errored first call is asked again with its repeat): how many gave a
    verdict, none (unscored: unparsed, refused or filtered by the judge), errored or were not asked.
    While one is errored or not asked the run is incomplete, and its judge cost is unknown."""
    owed = [r for r in ok if r.judge_status in ("scored", "unscored")]
    errors = Counter(r.judge_repeat_error or "error" for r in owed if r.judge_repeat_status == "error")
    return {"judge_repeat": True, "n_judge_repeat_owed": len(owed),
            "n_judge_repeat_scored": sum(r.judge_repeat_status == "scored" for r in owed),
            "n_judge_repeat_unscored": sum(r.judge_repeat_status == "unscored" for r in owed),
            "n_judge_repeat_error": sum(errors.values()),
            "n_judge_repeat_not_run": sum(r.judge_repeat_status == "not_run" for r in owed),
            "top_judge_repeat_error": list(errors.most_common(1)[0]) if errors else None}


def summary_line(s: dict[str, Any]) -> str:
    """The one-line summary the CLI prints (and the notebook shows)."""
    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    judge = "judge: none"
    if s.get("judge_accuracy") is not None:
        lo, hi = s["judge_ci95"]
        judge = f"judge {pct(s['judge_accuracy'])} [{pct(lo)}, {pct(hi)}] (n={s['n_judged']})"
    elif s.get("n_unscored") or s.get("n_judge_error"):
        judge = "judge: no verdicts"
    cost = usd(s["cost"]) if s["cost"] is not None else cost_text(s.get("cost_known"), s.get("n_cost_unknown") or 0,
                                                                    s["n_ok"])
    if s["cost"] is not None and s.get("n_cost_reported"):
        cost += " (reported by the provider)" if s["n_cost_reported"] == s["n_ok"] else \
            f" ({s['n_cost_reported']} of {s['n_ok']} reported by the provider)"
    if s.get("judged"):
        cost += " (judge " + ("unknown" if s["judge_cost"] is None else usd(s["judge_cost"])) + ")"
    tok = "tokens in/out/reasoning " + "/".join(shown(s[k], "n/a") for k in ("input_tokens", "output_tokens",
                                                                              "reasoning_tokens"))
    if s.get("n_usage_unknown") and s["n_usage_unknown"] < s["n_ok"]:
        tok += f" (≥: {s['n_usage_unknown']} of {s['n_ok']} answers' counts unknown)"
    return (
        f"n={s['n_items']} ok={s['n_ok']}{outcome_note(s)} error={s['n_error']} not-run={s['n_not_run']} | "
        f"all items (Table 1: creative only): EM strict {pct(s['em_strict'])} lenient {pct(s['em_lenient'])} | {judge} | "
        f"unscored {s['n_unscored']}"
        + (f" ({s['n_judge_withheld']} refused or filtered by the judge)" if s.get("n_judge_withheld") else "")
        + (f" ({s['n_judge_cut_off']} {JUDGE_CUT_OFF})" if s.get("n_judge_cut_off") else "")
        + (f" | judge errors {s['n_judge_error']}" if s.get("n_judge_error") else "")
        + (f" | judge not run {s['n_judge_not_run']}" if s.get("n_judge_not_run") else "")
        + repeat_note(s)
        + f" | truncated {s.get('n_truncated', 0)}"
        + (f" (≥: {s['n_truncated_unknown']} of {s['n_ok']} answers not flagged either way)"
           if s.get("n_truncated_unknown") else "")
        + f" | {tok} | cost {cost}"
        + unusable_note(s)
        + replaced_note(s)
        + (f" | WARNING: labelled thinking, but {s['n_no_reasoning']}/{s['n_ok']} answers show no reasoning"
           if s.get("n_no_reasoning") else "")
        + (f" | WARNING: labelled {'effort none' if s.get('effort') == NO_REASONING else 'non-thinking'}, but "
           f"{s['n_unlabelled_reasoning']}/{s['n_ok']} answers show reasoning: the model reasoned anyway"
           if s.get("n_unlabelled_reasoning") else "")
        + (f" | WARNING: {s['n_invalid_utf8']} answer(s) had bytes that were not UTF-8 (U+FFFD in their place, "
           "scored as they read; invalid_utf8 in their records)" if s.get("n_invalid_utf8") else "")
        + served_note(s.get("served_models"))
        + mixed_settings_note(s)
        + (f" | STOPPED: {s['stopped']}" if s.get("stopped") else "")
        + (f" | OVER BUDGET: {over}" if (over := over_budget(s)) else "")
    )


def mixed_settings_note(s: dict[str, Any]) -> str:
    """`` | WARNING: 3 of 6 answers were asked without 'temperature' ...`` when some answers of the run were
    asked without a field the provider refused and others with it (a resume against an endpoint that
    refuses what the first run's accepted): two settings under one label; else ``""``."""
    known = s.get("n_dropped_known") or 0
    mixed = [(f, n) for f, n in (s.get("dropped_answers") or {}).items() if 0 < n < known]
    return "".join(f" | WARNING: {n} of {known} answers were asked without {one_line(str(f), 40)!r} (the provider "
                   "refused it), the others with it: two settings in one run" for f, n in mixed)


def repeat_note(s: dict[str, Any]) -> str:
    """`` | repeat verdicts 7 of 9 (1 unscored, 1 errored)`` for a ``--judge-repeat`` run: the second
    verdicts given, of those owed, and what became of the others; else ``""``."""
    if not s.get("judge_repeat"):
        return ""
    left = [f"{s[k]} {what}" for k, what in (("n_judge_repeat_unscored", "unscored"), ("n_judge_repeat_error", "errored"),
                                              ("n_judge_repeat_not_run", "not asked")) if s.get(k)]
    return (f" | repeat verdicts {s.get('n_judge_repeat_scored') or 0} of {s.get('n_judge_repeat_owed') or 0}"
            + (f" ({', '.join(left)})" if left else ""))


#: a role meter's fields (``CostMeter.summary``) that count the billed answers with no text, asked again
UNUSABLE_FIELDS = ("n_unusable", "unusable_cost", "n_unusable_unknown_cost")


def _previous_summary(path: Path) -> dict[str, Any]:
    """The run's ``summary.json`` as the pass before this one left it ({} when there is none, or it is not a
    JSON object: a pass whose summary was lost carries nothing over; :func:`_earlier_summary` refuses it)."""
    try:
        return _earlier_summary(path)
    except InputError:
        return {}


def run_unusable(s: dict[str, Any]) -> Any:
    """Where summary ``s`` counts the billed answers with no text of its run: ``unusable_spent`` (the run's
    passes), or in a summary written before it, ``spent_now`` (its last pass only)."""
    return s["unusable_spent"] if s.get("unusable_spent") is not None else s.get("spent_now")


def unusable_spent(earlier: dict[str, Any], spent_now: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per role, the billed answers with no text (asked again) over the run's passes: those of the summary the
    earlier passes left (its ``unusable_spent``; a summary written before that field: its ``spent_now``, the
    last pass's) and this pass's meter (``spent_now``). A count or amount that is not one is carried as an
    answer of unknown cost, never as $0."""
    carried = run_unusable(earlier)
    out: dict[str, dict[str, Any]] = {}
    for role, meter in (spent_now or {}).items():
        before = (carried or {}).get(role) if isinstance(carried, dict) else None
        n, cost, unknown = 0, 0.0, 0
        for m in (before, meter):
            m = m if isinstance(m, dict) else {}
            n_m, cost_m, unknown_m = (m.get(f) for f in UNUSABLE_FIELDS)
            if not isinstance(n_m, int) or isinstance(n_m, bool) or n_m <= 0:
                continue
            n += n_m
            if (isinstance(cost_m, (int, float)) and not isinstance(cost_m, bool) and cost_m >= 0
                    and isinstance(unknown_m, int) and not isinstance(unknown_m, bool) and 0 <= unknown_m <= n_m):
                cost, unknown = cost + cost_m, unknown + unknown_m
            else:  # not what a meter writes: its answers' cost is unknown
                unknown += n_m
        out[role] = dict(zip(UNUSABLE_FIELDS, (n, cost, unknown), strict=True))
    return out


def unusable_note(s: dict[str, Any]) -> str:
    """`` | 6 billed answer(s) with no text, asked again ($0.0360, not in cost)`` when the model's
    provider billed answers the client could not use (the model meter's ``n_unusable``), and
    `` | judge: 2 billed ... (..., not in judge cost)`` for the judge's, else ``""``; those whose cost is
    unknown (an unpriced model) are counted, never shown as $0."""
    notes = []
    spent = run_unusable(s)
    for role, prefix, total in (("model", "", "cost"), ("judge", "judge: ", "judge cost")):
        meter = (spent or {}).get(role) or {}
        n = meter.get("n_unusable") or 0
        if not n:
            continue
        unknown = meter.get("n_unusable_unknown_cost") or 0
        cost = ("cost unknown" if unknown >= n else usd(meter.get("unusable_cost") or 0.0)
                + (f" for {n - unknown}, {unknown} unknown" if unknown else ""))
        notes.append(f" | {prefix}{n} billed answer(s) with no text, asked again ({cost}, not in {total})")
    return "".join(notes)


def replaced_note(s: dict[str, Any]) -> str:
    """`` | 4 answer(s) replaced by answers asked again (--retry-truncated): $0.0004 spent on them, not in
    cost`` when the run's answers replaced earlier ones, `` | 1 paid judge verdict(s) withdrawn by rescore:
    $0.0125 spent on them, not in judge cost`` when ``cresowlve rescore`` withdrew verdicts the judge was
    paid for (both, joined, when both), else ``""``."""
    n, n_verdicts = s.get("n_replaced") or 0, s.get("n_verdicts_replaced") or 0
    if not n and not n_verdicts:
        return ""
    what = ([f"{n} answer(s) replaced by answers asked again (--retry-truncated)"] if n else []) \
        + ([f"{n_verdicts} paid judge verdict(s) withdrawn by rescore"] if n_verdicts else [])
    left_out = "judge cost" if not n else "cost or judge cost" if n_verdicts else "cost"
    cost = "cost unknown" if s.get("replaced_cost") is None else f"{usd(s['replaced_cost'])} spent on them"
    return f" | {' and '.join(what)}: {cost}, not in {left_out}"


def eval_stages(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The work of a run as ``exitcodes.report_exit`` reads it (what ``cresowlve eval`` exits with):
    the answers and, for a judged run that was not stopped, the verdicts. An answer whose judge call
    errored or was never made is unfinished work, as an errored answer is: exit 1, the last line naming
    the judge's most common error; the next run asks the judge again for those answers only."""
    from cresowlve_core.exitcodes import stage_record

    stages = [stage_record({**summary, "over_budget": over_budget(summary)})]
    if summary.get("judged") and not summary.get("stopped"):
        n_error, n_not_run = summary.get("n_judge_error") or 0, summary.get("n_judge_not_run") or 0
        to_judge = (summary.get("n_ok") or 0) - (summary.get("n_refused") or 0) - (summary.get("n_filtered") or 0)
        replies = to_judge - n_error - n_not_run
        stages.append(stage_record({"n_to_judge": to_judge, "n_judged": replies, "n_judge_errors": n_error,
                                    "n_not_judged": n_not_run, "top_error": summary.get("top_judge_error")},
                                   "judge verdicts", unparsed=no_verdict_parsed(summary, replies)))
        if summary.get("judge_repeat"):
            owed = summary.get("n_judge_repeat_owed") or 0
            r_error, r_not_run = summary.get("n_judge_repeat_error") or 0, summary.get("n_judge_repeat_not_run") or 0
            r_replies, r_unscored = owed - r_error - r_not_run, summary.get("n_judge_repeat_unscored") or 0
            unparsed = (f"no repeat verdict parsed: 0 of {r_replies} second judge replies gave one"
                        if r_replies and r_unscored >= r_replies else None)
            stages.append(stage_record({"n_to_judge": owed, "n_judged": r_replies, "n_judge_errors": r_error,
                                        "n_not_judged": r_not_run, "top_error": summary.get("top_judge_repeat_error")},
                                       "repeat verdicts", unparsed=unparsed))
    return stages


def no_verdict_parsed(summary: dict[str, Any], replies: int) -> str | None:
    """Why a judged run is incomplete although the judge replied to every answer it was asked about:
    no reply gave a verdict (every one unscored: no verdict line, both labels, an echo, a judge refusal);
    else None. A paper-protocol judge leaves a reply unscored only when it was refused, filtered or cut
    off at its token limit before a bare yes or no (anything else but "yes" is wrong)."""
    if not replies or (summary.get("n_unscored") or 0) < replies:
        return None
    withheld, cut_off = summary.get("n_judge_withheld") or 0, summary.get("n_judge_cut_off") or 0
    return (f"no verdict parsed: 0 of {replies} judge replies gave one"
            + (f" ({withheld} refused or filtered by the judge)" if withheld else "")
            + (f" ({cut_off} {JUDGE_CUT_OFF})" if cut_off else ""))


def over_budget(summary: dict[str, Any]) -> str | None:
    """A sentence for each role that spent more than its ``max_cost`` in this invocation, else None."""
    notes = [f"the {role} spent {usd(m['spent'])} against its budget of {usd(m['max_cost'])} (calls in flight cost "
             "more than they held)" for role, m in (summary.get("spent_now") or {}).items() if m and m.get("over_budget")]
    return "; ".join(notes) or None


def sent_now(summary: dict[str, Any]) -> str:
    """What this invocation did: the items it ran (``n_sent``, errored attempts included) and how many
    of their calls (model and judge) the response cache answered."""
    n = summary.get("n_sent")
    if n is None:
        return "sent: not recorded"
    if not n:
        return sent_phrase(0, summary["n_error"] + summary["n_not_run"], "every item was already in the run directory")
    cached = sum((m or {}).get("n_cached", 0) for m in (summary.get("spent_now") or {}).values())
    return f"{n} item(s) run" + (f", {cached} call(s) answered from the cache" if cached else "")


def rescore(run_dir: str | Path) -> dict[str, Any]:
    """Recompute answer extraction and every formula metric of a finished run from the stored
    raw outputs, with no model call; a judge verdict is kept while the candidate answer it judged is
    the same (else withdrawn: :func:`_rescored`, ``n_verdicts_withdrawn`` in the summary). Rewrites
    ``responses.jsonl`` atomically, unless it is rescored as it stands (the old file is kept beside it:
    :func:`unused_backup`), and the summary."""
    import filecmp
    import os

    run = RunDir(run_dir)
    manifest = run.read_manifest()
    if manifest is None:
        raise MissingInput(f"{run_dir}: no manifest.json, not a run directory")
    if manifest.kind != "eval":  # another stage's records and summary, which rescoring would rewrite as an eval's
        raise InputError(f"{run_dir}: a run directory of {one_line(manifest.kind, 40)!r}, not of `cresowlve eval`; "
                         "rescore reads only evaluation runs (nothing was changed)")
    if not (run.path / RESPONSES).is_file():
        raise MissingInput(f"{run_dir}: no {RESPONSES}: the run recorded no answer, so there is nothing to rescore "
                           "(nothing was changed)")
    with run.lock():
        old = _earlier_summary(run.path / "summary.json")
        run.repair_tail(RESPONSES)  # a torn last line is kept aside, not lost with the rewritten file
        latest = latest_records(run)
        items = _items_for_rescore(run.path, manifest, latest)
        fewshot = is_fewshot(manifest.prompts)
        # (a judge section without a protocol is older than the paper's protocol: ours)
        rule: JudgeRule | None = (manifest.judge.get("protocol") or "nonce-verdict") if manifest.judge is not None \
            else None
        fresh = []
        for key, rec in latest.items():
            try:
                fresh.append(_rescored(key, rec, items, fewshot, rule))
            except ValidationError as exc:
                raise unreadable_record(run.path / RESPONSES, rec, exc) from None
        path = run.path / RESPONSES
        tmp = path.with_suffix(".jsonl.tmp")
        jsonl.write_jsonl(tmp, (r.model_dump(mode="json") for r in fresh), transform=run.scrub)
        if filecmp.cmp(tmp, path, shallow=False):  # nothing changed: the file and its backups stay as they are
            tmp.unlink()
        else:
            os.replace(path, unused_backup(path))
            os.replace(tmp, path)
        n_items = manifest.n_items or len(fresh)
        summary = summarize([SummaryEntry(r.model_dump(mode="json")) for r in fresh], n_items=n_items,
                            judged=manifest.judge is not None, thinking=manifest.thinking, effort=manifest.effort,
                            judge_repeat=bool((manifest.judge or {}).get("repeat")))
        summary["spent_now"] = old.get("spent_now")
        summary["unusable_spent"] = old.get("unusable_spent")
        summary["stopped"] = old.get("stopped")
        summary["rescored"] = True
        summary["repairs"] = run.repairs
        # withdrawn and not yet asked again (the mark stays in extra after the next eval's verdict)
        summary["n_verdicts_withdrawn"] = sum(VERDICT_WITHDRAWN in r.extra and r.judge_status == "not_run" for r in fresh)
        run.write_summary(summary)  # under the lock: an eval started next writes its own after this one
    return summary


def _earlier_summary(path: Path) -> dict[str, Any]:
    """The run's ``summary.json`` at ``path``, whose stop and spending a rescore keeps ({} when there is
    none); refused (:class:`InputError`, nothing rescored) when it is not a JSON object."""
    if not path.exists():
        return {}
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = one_line(str(exc), 120)
    else:
        if isinstance(summary, dict):
            return summary
        why = f"a JSON {type(summary).__name__}, not an object"
    raise InputError(f"{path}: cannot be read ({why}); the rescore keeps its stop and spending: mend or remove it "
                     "(nothing was rescored)")


def unused_backup(path: Path) -> Path:
    """Where a rescore keeps the records file ``path`` it replaces: ``responses.jsonl.bak``, or, when an
    earlier rescore kept its own there, the first of ``responses.jsonl.bak2``, ``.bak3``, ... not taken:
    the records as the run wrote them (its withdrawn verdicts' replies, its answers' earlier extraction)
    are never replaced by a later rescore's."""
    backup, n = path.with_suffix(".jsonl.bak"), 2
    while backup.exists():
        backup, n = path.with_suffix(f".jsonl.bak{n}"), n + 1
    return backup


#: ``extra`` of a rescored record whose judge verdict was withdrawn: the verdict, its status and why
VERDICT_WITHDRAWN = "verdict_withdrawn_by_rescore"


def _rescored(key: tuple[str, Lang], rec: dict[str, Any], items: dict[str, Item], fewshot: bool,
              rule: JudgeRule | None) -> ResponseRecord:
    """``rec``, the latest record of item ``key``, with its answer extracted and scored again (``rule``:
    the run's judge protocol, None for a run without a judge). The judge's verdict is kept while the
    candidate it was shown is the same; a verdict on another candidate (the raw output's extraction
    changed) is withdrawn (:func:`_withdrawn_verdict`), and a refused or filtered answer of a judged
    run has the verdict of one (not asked, not correct)."""
    before = ResponseRecord(**rec).model_dump(mode="json")  # first: a record of another shape is refused as it is
    rec = before
    if rec.get("status") == "ok" and rec.get("outcome") in NOT_AN_ANSWER:
        rec = {**rec, **not_an_answer_scores()}  # stays not correct, whatever its text
        if rule is not None and rec.get("judge_status") != "not_an_answer":
            rec = {**rec, **NOT_AN_ANSWER_VERDICT, "extra": without_repeat(repeat_fields(rec)),
                   **(verdict_replaced_fields(before) if paid_verdict(before) else {})}
        rec = _with_judge_score(rec)
    elif rec.get("status") == "ok":
        other = rec.get("other_answers")
        if other is None and key[0] in items:
            other = items[key[0]].view(key[1]).other_answers
        rec = {**rec, "other_answers": other,
               **score_fields(rec.get("raw_output"), rec.get("answer") or "", other, fewshot=fewshot)}
        if rule is not None and (withdrawn := _withdrawn_verdict(before, rec, rule, fewshot)) is not None:
            rec = {**rec, "judge_status": "not_run", "judge_verdict": None, "judge_raw": None, "judge_outcome": None,
                   "extra": {**without_repeat(repeat_fields(rec)), VERDICT_WITHDRAWN: withdrawn},
                   **(verdict_replaced_fields(before) if paid_verdict(before) else {})}
        rec = _with_judge_score(rec)
    return ResponseRecord(**with_withdrawn_cost_moved(rec))


def _withdrawn_verdict(before: dict[str, Any], after: dict[str, Any], rule: JudgeRule,
                       fewshot: bool) -> dict[str, Any] | None:
    """The verdict of ``before`` that does not hold for ``after``, an answer rescored, else None: one
    the judge gave on another candidate than the one it would now be shown, or the not-an-answer
    verdict of a record that is now an answer. The next ``cresowlve eval`` of the run asks the judge
    about the answer as it now stands."""
    status = before.get("judge_status")
    if status == "not_an_answer":
        why = "the record was not an answer when it was judged"
    elif status in ("scored", "unscored") and \
            judge_prediction(before, rule, fewshot=fewshot) != judge_prediction(after, rule, fewshot=fewshot):
        why = "the judge was shown another candidate answer than the rescored one"
    else:
        return None
    return {"judge_status": status, "judge_verdict": before.get("judge_verdict"), "why": why}


def unreadable_record(path: Path, rec: dict[str, Any], exc: ValidationError) -> InputError:
    """The error for ``rec``, a record of ``path`` edited into another shape (an outcome or status no run
    writes, a field of the wrong type): the file, the item and the fields, each with what it holds."""
    problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']} (it holds {one_line(repr(e.get('input')), 80)})"
                         for e in exc.errors()[:3])
    return InputError(f"{path}: the record of item {one_line(rec.get('id'), 80)!r} ({one_line(rec.get('lang'), 8)}) "
                      f"cannot be read: {problems}; mend or remove it (nothing was rescored)")


def _items_for_rescore(run_dir: Path, manifest: Manifest, latest: dict[Any, dict[str, Any]]) -> dict[str, Item]:
    """The run's items, for its answers recorded before ``other_answers`` was stored in each record: their
    lenient EM needs the item's accepted answers. Refused (:class:`InputError`, nothing rescored) when the
    items cannot be loaded or do not hold those answers' items (a run copied from another machine, whose
    manifest names a file that is not here or another one): their lenient EM would be scored against the
    reference alone, and the rewritten records would say the items accept no other answer."""
    without = [item for (item, _), r in latest.items()
               if "other_answers" not in r and r.get("status") == "ok" and r.get("outcome") not in NOT_AN_ANSWER]
    if not without:
        return {}
    older = f"{run_dir}: {plural(len(without), 'answer')} recorded before records kept the item's accepted answers"
    after = ("their lenient EM would be scored against the reference alone; make the run's items available "
             "as its manifest names them (nothing was rescored)")
    if not manifest.items:
        raise InputError(f"{older}, and its manifest names no items file: {after}")
    from cresowlve_core.sources.sample import load_items

    try:
        items = {it.id: it for it in load_items(manifest.items, manifest.lang or "en")}  # type: ignore[arg-type]
    except (OSError, ValueError) as exc:
        raise InputError(f"{older}, and its items ({one_line(manifest.items, 200)!r}) cannot be loaded "
                         f"({one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 200)}): {after}"
                         ) from None
    from cresowlve_core.sources.hub import items_files_differ

    if differs := items_files_differ(getattr(manifest, "items_files", None), items.values()):
        raise InputError(f"{older}, and its items ({one_line(manifest.items, 200)!r}) are not those the run "
                         f"read: {one_line(differs, 300)}: their lenient EM would be scored against another text's "
                         "accepted answers; make the files the manifest's items_files name available (nothing was rescored)")
    if missing := [item for item in without if item not in items]:
        raise InputError(f"{older}, and its items ({one_line(manifest.items, 200)!r}) do not hold "
                         f"{len(missing)} of them (the first: {one_line(missing[0], 80)!r}): {after}")
    return items
