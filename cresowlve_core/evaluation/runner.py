"""The evaluation run: solve every item with the model under test, score it, append the record.

``evaluate(EvalConfig(...))`` is what ``cresowlve eval`` and ``notebooks/02_evaluation.ipynb`` call.
The run directory is the unit of resume: re-running the same config on the same directory sends
only what is missing or errored (and judges only what is not yet judged).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from cresowlve_core.evaluation.records import ResponseRecord, RunManifest
from cresowlve_core.evaluation.scoring import exact_match, exact_match_strict, judge_request, parse_verdict
from cresowlve_core.evaluation.solve import extract_answer, solve_messages, solve_prompt
from cresowlve_core.items import Item, ItemView, Lang
from cresowlve_core.llm.cache import ResponseCache
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.pricing import CostMeter, PriceTable
from cresowlve_core.llm.types import (
    BudgetExceeded,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMError,
    LLMFatalError,
)
from cresowlve_core.runtime.rundir import RunDir, complete_until_stopped, git_sha, now_iso, package_versions

RESPONSES = "responses.jsonl"
SUMMARY = "summary.json"


@dataclass
class EvalConfig:
    """Everything that defines an evaluation run. Recorded in the manifest."""

    model: str
    base_url: str
    run_dir: str
    items: str = "demo"
    lang: Lang = "en"
    api_key_env: str | None = None
    effort: str | None = None
    prompt_style: str | None = None  # "cot" | "plain"; default: plain iff an effort is set
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key_env: str | None = None
    concurrency: int = 8
    limit: int | None = None
    seed: int = 0
    temperature: float = 0.0
    max_tokens: int | None = 4096
    judge_max_tokens: int = 512
    judge_repeat: bool = False  # judge each answer twice (seed, seed+1) to measure repeatability
    max_cost: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    cache: bool = True
    cache_path: str | None = None
    api: str | None = None  # force "chat" | "responses" | "completions"
    timeout_s: float = 300.0
    max_attempts: int = 6
    backoff_base_s: float = 0.5

    def client_options(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "timeout_s": self.timeout_s,
                "max_attempts": self.max_attempts, "backoff_base_s": self.backoff_base_s}

    @property
    def thinking(self) -> bool:
        if self.prompt_style:
            return self.prompt_style == "plain"
        return self.effort is not None

    def endpoint(self) -> Endpoint:
        return Endpoint(self.base_url, self.model, self.api_key_env)

    def judge_endpoint(self) -> Endpoint | None:
        if not self.judge_model:
            return None
        return Endpoint(self.judge_base_url or self.base_url, self.judge_model, self.judge_api_key_env)

    def gen_params(self) -> GenParams:
        return GenParams(
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            effort=self.effort,
            api=self.api,  # type: ignore[arg-type]
        )

    def judge_params(self) -> GenParams:
        return GenParams(temperature=0.0, seed=self.seed, max_tokens=self.judge_max_tokens, api="chat")


@dataclass
class EvalOutcome:
    run_dir: Path
    summary: dict[str, Any]
    stopped: str | None = None  # why the run stopped early, if it did
    records: list[ResponseRecord] = field(default_factory=list)


def _key(r: dict[str, Any]) -> tuple[str, str]:
    return (r["id"], r["lang"])


def _check_same_run(existing: dict[str, Any], manifest: RunManifest) -> None:
    """Resume only the same configuration. The base URL may change (a server on another port
    or host serves the same model); the change is recorded in the manifest."""
    if existing.get("base_url") != manifest.base_url:
        history = existing.get("config", {}).get("base_url_history", [existing.get("base_url")])
        manifest.config["base_url_history"] = [*history, manifest.base_url]
    for field_name in ("model", "lang", "items", "effort"):
        old, new = existing.get(field_name), getattr(manifest, field_name)
        if old != new:
            raise ValueError(
                f"run directory already holds a run with {field_name}={old!r}, not {new!r}; "
                f"use another --run-dir (resume only continues the same configuration)"
            )
    if existing.get("prompt", {}).get("version") != manifest.prompt.get("version"):
        raise ValueError(
            f"run directory was made with prompt {existing.get('prompt')} but the current prompt is "
            f"{manifest.prompt}; use another --run-dir"
        )


def incompatible_run(cfg: EvalConfig) -> str | None:
    """Why ``cfg.run_dir`` holds a run that ``cfg`` cannot resume (None if it can, or is new)."""
    existing = RunDir(cfg.run_dir).read_manifest() if Path(cfg.run_dir).exists() else None
    if not existing:
        return None
    try:
        _check_same_run(existing, build_manifest(cfg, existing.get("n_items", 0)))
    except ValueError as exc:
        return str(exc)
    return None


def build_manifest(cfg: EvalConfig, n_items: int) -> RunManifest:
    prompt = solve_prompt(cfg.lang, cfg.thinking)
    judge = None
    if (je := cfg.judge_endpoint()) is not None:
        jp = judge_request("x", "q", "a", "p").prompt
        judge = {"model": je.model, "base_url": je.base_url, "api_key_env": je.api_key_env,
                 "prompt": jp.name, "prompt_version": jp.version, "seed": cfg.seed, "temperature": 0.0}
    return RunManifest(
        run_id=Path(cfg.run_dir).name,
        model=cfg.model,
        base_url=cfg.base_url,
        api_key_env=cfg.api_key_env,
        effort=cfg.effort,
        thinking=cfg.thinking,
        lang=cfg.lang,
        items=cfg.items,
        n_items=n_items,
        limit=cfg.limit,
        seed=cfg.seed,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        prompt={"name": prompt.name, "version": prompt.version},
        judge=judge,
        git_sha=git_sha(),
        packages=package_versions(),
        started_at=now_iso(),
        config={k: v for k, v in asdict(cfg).items()},
    )


def _record_base(item: Item, cfg: EvalConfig) -> dict[str, Any]:
    view = item.view(cfg.lang)
    return {
        "id": item.id,
        "lang": cfg.lang,
        "model": cfg.model,
        "effort": cfg.effort,
        "difficulty": item.difficulty,
        "reasoning_type": item.reasoning_type,
        "knowledge_domains": item.knowledge_domains,
        "creative_domains": item.creative_domains,
        "cultures": item.cultures,
        "n_atomic_facts": len(item.atomic_facts) if item.atomic_facts is not None else None,
        "answer": view.answer,
    }


def scored_fields(view: ItemView, c: Completion) -> dict[str, Any]:
    """Extraction and exact match for one finished completion of the model under test."""
    prediction, how = extract_answer(c.text)
    return dict(
        status="ok", prediction=prediction, extraction=how, raw_output=c.text, thoughts=c.thoughts,
        usage=c.usage, cost=c.cost, latency_s=round(c.latency_s, 3), cached=c.cached,
        em_strict=exact_match_strict(prediction, view.answer),
        em_lenient=exact_match(prediction, view.answer, view.other_answers),
    )


class _Evaluator:
    def __init__(self, cfg: EvalConfig, run: RunDir, prices: PriceTable):
        self.cfg = cfg
        self.run = run
        self.prices = prices
        cache = ResponseCache(Path(cfg.cache_path)) if cfg.cache_path else (ResponseCache() if cfg.cache else None)
        self.meter = CostMeter()
        self.judge_meter = CostMeter()
        self.client = LLMClient(
            cfg.endpoint(), rpm=cfg.rpm, tpm=cfg.tpm, cache=cache, prices=prices, max_cost=cfg.max_cost,
            cost_meter=self.meter, **cfg.client_options(),
        )
        je = cfg.judge_endpoint()
        self.judge = (
            LLMClient(je, cache=cache, prices=prices, cost_meter=self.judge_meter, **cfg.client_options())
            if je else None
        )
        self.prompt = solve_prompt(cfg.lang, cfg.thinking)
        # After a fatal error (bad key, unknown model, ...) nothing more is sent: every queued
        # task re-raises it after taking its slot, instead of making another request.
        self._slots = asyncio.Semaphore(cfg.concurrency)
        self.fatal: LLMError | None = None

    async def _call(self, client: LLMClient, messages: list[dict[str, str]], params: GenParams, version: str) -> Completion:
        async with self._slots:
            if self.fatal is not None:
                raise self.fatal
            try:
                return await client.complete(messages, params, prompt_version=version)
            except (LLMFatalError, LLMConfigError) as exc:
                self.fatal = exc
                raise

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.judge:
            await self.judge.aclose()

    async def solve_and_score(self, item: Item, previous: dict[str, Any] | None,
                              completion: Completion | None = None) -> ResponseRecord:
        """Solve (unless ``completion`` came from elsewhere, e.g. a batch), score, judge."""
        cfg = self.cfg
        view = item.view(cfg.lang)
        rec: dict[str, Any]
        if previous is not None and previous.get("status") == "ok":
            rec = dict(previous)  # only the judge is missing
        else:
            rec = _record_base(item, cfg)
            try:
                c = completion or await self._call(
                    self.client, solve_messages(view, self.prompt), cfg.gen_params(), self.prompt.tag)
            except (LLMFatalError, LLMConfigError, BudgetExceeded):
                raise
            except LLMError as exc:
                return ResponseRecord(**rec, status="error", error=str(exc))
            rec.update(scored_fields(view, c))
        if self.judge is not None:
            try:
                rec.update(await self._judge(item, rec["prediction"] or ""))
            except (LLMFatalError, LLMConfigError) as exc:
                # the run stops, but the answer already paid for is kept (judged on resume)
                rec.update(judge_status="error", judge_raw=str(exc), judge_verdict=None)
                self.run.append(RESPONSES, ResponseRecord(**rec).model_dump(mode="json"))
                raise
        return ResponseRecord(**rec)

    async def _judge(self, item: Item, prediction: str) -> dict[str, Any]:
        out = await self._judge_once(item, prediction, self.cfg.seed)
        if self.cfg.judge_repeat and out["judge_status"] != "error":
            # a second, independent verdict (another seed, so not a cache hit) for repeatability
            again = await self._judge_once(item, prediction, self.cfg.seed + 1)
            out["extra"] = {"judge_repeat": again["judge_verdict"], "judge_repeat_raw": again["judge_raw"]}
            out["judge_cost"] = _add_costs(out["judge_cost"], again.get("judge_cost"))
        return out

    async def _judge_once(self, item: Item, prediction: str, seed: int) -> dict[str, Any]:
        view = item.view(self.cfg.lang)
        req = judge_request(item.id, view.question, view.answer, prediction, explanation=view.explanation,
                            other_answers=view.other_answers, seed=seed)
        assert self.judge is not None
        params = replace(self.cfg.judge_params(), seed=seed)
        try:
            c = await self._call(self.judge, req.messages, params, req.prompt.tag)
        except (LLMFatalError, LLMConfigError):
            raise
        except LLMError as exc:
            return {"judge_status": "error", "judge_raw": str(exc), "judge_verdict": None,
                    "judge_model": self.cfg.judge_model, "judge_cost": None}
        verdict = parse_verdict(c.text, req.nonce)
        return {
            "judge_status": "scored" if verdict else "unscored",
            "judge_verdict": verdict,
            "judge_raw": c.text,
            "judge_model": self.cfg.judge_model,
            "judge_usage": c.usage,
            "judge_cost": c.cost,
        }


def _add_costs(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def needs_work(prev: dict[str, Any] | None, judged: bool) -> bool:
    if prev is None or prev.get("status") != "ok":
        return True
    return judged and prev.get("judge_status") in (None, "not_run", "error")


async def evaluate_async(cfg: EvalConfig, items: list[Item], *, progress: bool = True,
                         on_record: Callable[[ResponseRecord], None] | None = None,
                         completions: dict[str, Completion] | None = None) -> EvalOutcome:
    """Evaluate ``items`` into ``cfg.run_dir``, resuming. With ``completions`` (answers collected
    from a batch, by item id) only those items are scored, and nothing is sent to the model under test."""
    run = RunDir(cfg.run_dir)
    manifest = build_manifest(cfg, len(items))
    existing_manifest = run.read_manifest()
    if existing_manifest:
        _check_same_run(existing_manifest, manifest)
        manifest.started_at = existing_manifest.get("started_at")
        manifest.config["resumed_at"] = now_iso()
    run.write_manifest(manifest.model_dump())
    previous = run.latest(RESPONSES, _key)
    todo = [it for it in items if needs_work(previous.get((it.id, cfg.lang)), cfg.judge_model is not None)]
    if completions is not None:
        todo = [it for it in todo if it.id in completions]
    ev = _Evaluator(cfg, run, PriceTable.load())
    stopped: str | None = None
    bar = tqdm(total=len(items), initial=len(items) - len(todo), desc=f"{cfg.model} [{cfg.lang}]",
               unit="item", disable=not progress)
    tasks = [asyncio.create_task(ev.solve_and_score(it, previous.get((it.id, cfg.lang)), (completions or {}).get(it.id)))
             for it in todo]

    def persist(rec: ResponseRecord) -> None:
        run.append(RESPONSES, rec.model_dump(mode="json"))
        if on_record:
            on_record(rec)
        bar.update(1)

    try:
        why = await complete_until_stopped(tasks, (BudgetExceeded, LLMFatalError, LLMConfigError), persist)
    finally:
        bar.close()
        await ev.aclose()
    if isinstance(why, BudgetExceeded):
        stopped = f"max_cost reached: {why}"
    elif why is not None:
        stopped = f"fatal: {why}"
    latest = run.latest(RESPONSES, _key)
    records = [ResponseRecord(**latest[(it.id, cfg.lang)]) for it in items if (it.id, cfg.lang) in latest]
    summary = summarize(records, n_items=len(items), model_meter=ev.meter.summary(), judge_meter=ev.judge_meter.summary())
    summary["stopped"] = stopped
    manifest.finished_at = now_iso()
    if stopped:
        manifest.config["stopped"] = stopped
    run.write_manifest(manifest.model_dump())
    (run.path / SUMMARY).write_text(json.dumps(summary, indent=2))
    if stopped and stopped.startswith("fatal"):
        raise LLMFatalError(stopped.removeprefix("fatal: "))
    return EvalOutcome(run.path, summary, stopped, records)


def evaluate(cfg: EvalConfig, *, progress: bool = True) -> EvalOutcome:
    """Load the items named by ``cfg.items`` and run :func:`evaluate_async` to completion."""
    from cresowlve_core.sources.sample import load_items

    items = load_items(cfg.items, cfg.lang)
    if cfg.limit is not None:
        items = items[: cfg.limit]
    return asyncio.run(evaluate_async(cfg, items, progress=progress))


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def summarize(records: list[ResponseRecord], *, n_items: int, model_meter: dict[str, Any] | None = None,
              judge_meter: dict[str, Any] | None = None) -> dict[str, Any]:
    """Table-1 numbers for one run: EM strict/lenient, judge accuracy with a Wilson 95% CI, counts."""
    from cresowlve_core.stats import wilson_interval

    ok = [r for r in records if r.status == "ok"]
    scored = [r for r in ok if r.judge_status == "scored"]
    judge_correct = sum(r.judge_verdict == "CORRECT" for r in scored)
    lo, hi = wilson_interval(judge_correct, len(scored)) if scored else (None, None)
    costs = [r.cost for r in ok]
    judge_costs = [r.judge_cost for r in ok if r.judge_status != "not_run"]
    usage = lambda attr, rs: _sum([getattr(r.usage, attr) for r in rs])  # noqa: E731
    return {
        "n_items": n_items,
        "n_ok": len(ok),
        "n_error": sum(r.status == "error" for r in records),
        "n_not_run": n_items - len(records),
        "em_strict": sum(bool(r.em_strict) for r in ok) / len(ok) if ok else None,
        "em_lenient": sum(bool(r.em_lenient) for r in ok) / len(ok) if ok else None,
        "n_judged": len(scored),
        "judge_accuracy": judge_correct / len(scored) if scored else None,
        "judge_ci95": [lo, hi] if scored else None,
        "n_unscored": sum(r.judge_status == "unscored" for r in ok),
        "n_judge_error": sum(r.judge_status == "error" for r in ok),
        "n_fallback_extraction": sum(r.extraction == "fallback_whole_text" for r in ok),
        "input_tokens": usage("input_tokens", ok),
        "output_tokens": usage("output_tokens", ok),
        "reasoning_tokens": usage("reasoning_tokens", ok),
        "cost": None if not costs or any(c is None for c in costs) else sum(costs),
        "judge_cost": None if not judge_costs or any(c is None for c in judge_costs) else sum(judge_costs),
        "spent_now": {"model": model_meter, "judge": judge_meter},
    }


def summary_line(s: dict[str, Any]) -> str:
    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    judge = "judge: none"
    if s["judge_accuracy"] is not None:
        lo, hi = s["judge_ci95"]
        judge = f"judge {pct(s['judge_accuracy'])} [{pct(lo)}, {pct(hi)}] (n={s['n_judged']})"
    elif s["n_unscored"] or s["n_judge_error"]:
        judge = "judge: no verdicts"
    cost = "unknown" if s["cost"] is None else f"${s['cost']:.4f}"
    jcost = "unknown" if s["judge_cost"] is None else f"${s['judge_cost']:.4f}"
    tok = f"tokens in/out/reasoning {s['input_tokens']}/{s['output_tokens']}/{s['reasoning_tokens']}"
    return (
        f"n={s['n_items']} ok={s['n_ok']} error={s['n_error']} not-run={s['n_not_run']} | "
        f"EM strict {pct(s['em_strict'])} lenient {pct(s['em_lenient'])} | {judge} | "
        f"unscored {s['n_unscored']} | {tok} | cost {cost} (judge {jcost})"
        + (f" | STOPPED: {s['stopped']}" if s.get("stopped") else "")
    )
