"""CREATE runs: generate answers into a resumable run directory, then score them with the judges.

A run directory holds:

* ``manifest.json`` — config (model, base_url, the *name* of the API-key variable, variation,
  samples/rounds, seed, temperature, token limit, query file and ids), prompt versions, git SHA,
  package versions, start and end times;
* ``responses.jsonl`` — one record per model call ``(query_id, sample, round)``, appended and
  flushed as each call finishes. Re-running :func:`generate` on the same directory re-sends only
  the calls that are missing or errored (the last record per key wins);
* after :func:`score`: ``judgments.jsonl`` (per path: validity and its reasons, per-triple
  specificity and factuality with the judges' raw text, cost), ``scores.jsonl`` (per query:
  counts, flags, utilities), ``score_manifest.json`` and ``score_summary.json`` (judge cost kept
  apart from generation cost). Judgments are keyed by path content, so scoring is resumable too.

Variations (paper Sec. 6): ``original`` — one call with the base prompt; ``iterate`` — the
conversation continues for ``n_rounds - 1`` more turns asking for more/different paths given the
previous answers; ``resample`` — ``n_samples`` independent calls with seeds ``seed + i``. The
paths of all calls for a query are merged in (sample, round) order, exact duplicates
(case-insensitive) dropped.

CLI wiring: :func:`generate` and :func:`score` are plain functions returning a summary dict.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from tqdm.auto import tqdm

from cresowlve_core.create.distance import Embedder
from cresowlve_core.create.judges import CompletesChat, judge_factuality, judge_specificity
from cresowlve_core.create.paths import Path as PathT
from cresowlve_core.create.paths import check_validity, normalise_path, parse_answer
from cresowlve_core.create.queries import CreateQuery, load_queries
from cresowlve_core.create.scored import ScoredSet
from cresowlve_core.create.utility import Discount, utility_breakdown
from cresowlve_core.llm.types import Endpoint, GenParams
from cresowlve_core.prompts import load_prompt
from cresowlve_core.runtime.rundir import RunDir, base_manifest, complete_until_stopped, now_iso

Variation = Literal["original", "iterate", "resample"]
RESPONSES = "responses.jsonl"
JUDGMENTS = "judgments.jsonl"
SCORES = "scores.jsonl"
SCORE_MANIFEST = "score_manifest.json"
SCORE_SUMMARY = "score_summary.json"
GENERATE_PROMPT = "create_generate"
ITERATE_PROMPT = "create_iterate"

T = TypeVar("T")


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion, also from inside a running loop (e.g. a Jupyter cell)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _make_client(
    endpoint: Endpoint,
    *,
    concurrency: int,
    rpm: int | None,
    tpm: int | None,
    max_cost: float | None,
    timeout_s: float,
    cache: bool,
    cache_path: str | Path | None,
) -> Any:
    from cresowlve_core.llm.cache import ResponseCache
    from cresowlve_core.llm.client import LLMClient

    return LLMClient(
        endpoint,
        concurrency=concurrency,
        rpm=rpm,
        tpm=tpm,
        timeout_s=timeout_s,
        max_cost=max_cost,
        cache=ResponseCache(cache_path) if cache else None,
    )


def _run_with_client(
    endpoint: Endpoint, client: CompletesChat | None, options: dict[str, Any],
    work: Callable[[Any], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Run ``work(client)`` to completion with the given client, or one built (and closed) here."""

    async def main() -> dict[str, Any]:
        c = client or _make_client(endpoint, **options)
        try:
            return await work(c)
        finally:
            if client is None and hasattr(c, "aclose"):
                await c.aclose()

    return run_sync(main())


def _usage(completion: Any) -> dict[str, Any]:
    u = getattr(completion, "usage", None)
    if u is None:
        return {}
    return dict(u.model_dump()) if hasattr(u, "model_dump") else dict(getattr(u, "__dict__", {}))


def _stop_errors() -> tuple[type[BaseException], ...]:
    from cresowlve_core.llm.types import BudgetExceeded, LLMConfigError, LLMFatalError

    return (BudgetExceeded, LLMFatalError, LLMConfigError)


# --------------------------------------------------------------------------- generate


def generation_messages(query: CreateQuery) -> tuple[list[dict[str, str]], str]:
    """The base prompt (paper E.1) as one user message, and its prompt tag."""
    p = load_prompt(GENERATE_PROMPT)
    text = p.render(query=query.query, entity_a=query.entity_a, rel_b=query.rel_b, entity_b=query.entity_b)
    return [{"role": "user", "content": text}], p.tag


def iterate_messages(query: CreateQuery, previous_answers: Sequence[str]) -> tuple[list[dict[str, str]], str]:
    """The conversation for an iterate round after ``previous_answers`` (paper E.3)."""
    base, _ = generation_messages(query)
    follow = load_prompt(ITERATE_PROMPT)
    messages = list(base)
    for answer in previous_answers:
        messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": follow.render(query=query.query)})
    return messages, follow.tag


@dataclass
class _Unit:
    query: CreateQuery
    sample: int
    round: int

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.query.id, self.sample, self.round)


def _response_key(r: dict[str, Any]) -> tuple[str, int, int]:
    return (r["query_id"], int(r.get("sample", 0)), int(r.get("round", 0)))


def _units(queries: Sequence[CreateQuery], variation: Variation, n_samples: int, n_rounds: int) -> list[_Unit]:
    if variation == "original":
        return [_Unit(q, 0, 0) for q in queries]
    if variation == "resample":
        return [_Unit(q, s, 0) for q in queries for s in range(n_samples)]
    if variation == "iterate":
        return [_Unit(q, 0, r) for q in queries for r in range(n_rounds)]
    raise ValueError(f"variation must be original, iterate or resample, not {variation!r}")


_SAME_RUN_KEYS = ("model", "variation", "n_samples", "n_rounds", "seed", "temperature", "max_tokens", "effort", "prompts")


def _check_same_run(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    """Resume only the same configuration; a changed base URL (same model, other host or port)
    is allowed and recorded in ``base_url_history``."""
    if old.get("base_url") != new.get("base_url"):
        new["base_url_history"] = [*old.get("base_url_history", [old.get("base_url")]), new.get("base_url")]
    diffs = [k for k in _SAME_RUN_KEYS if old.get(k) != new.get(k)]
    if diffs:
        detail = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diffs)
        raise ValueError(f"{run_dir} holds a different CREATE run ({detail}); use a new run directory")


async def agenerate(
    queries: Sequence[CreateQuery],
    client: CompletesChat,
    run_dir: str | Path,
    *,
    config: dict[str, Any],
    variation: Variation = "original",
    n_samples: int = 1,
    n_rounds: int = 2,
    seed: int = 0,
    temperature: float = 0.7,
    max_tokens: int | None = 4096,
    effort: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Generate into ``run_dir`` with an already-built client (see :func:`generate`)."""
    run = RunDir(run_dir)
    gen_tag = load_prompt(GENERATE_PROMPT).tag
    iter_tag = load_prompt(ITERATE_PROMPT).tag
    prompts = [gen_tag] + ([iter_tag] if variation == "iterate" else [])
    manifest = base_manifest("create", config, prompts)
    old = run.read_manifest()
    if old:
        _check_same_run(old, manifest, run.path)
        manifest["started_at"] = old.get("started_at")
        manifest["resumed_at"] = now_iso()
    run.write_manifest(manifest)

    done = {k: r for k, r in run.latest(RESPONSES, _response_key).items() if r.get("status") == "ok"}
    units = _units(queries, variation, n_samples, n_rounds)
    todo = [u for u in units if u.key not in done]
    bar = tqdm(total=len(units), initial=len(units) - len(todo), desc=f"CREATE {config.get('model')}", unit="call", disable=not progress)
    stopped: str | None = None
    stop_on = _stop_errors()

    async def call(u: _Unit, previous: list[str]) -> dict[str, Any]:
        params = GenParams(
            temperature=temperature,
            seed=seed + u.sample,
            max_tokens=max_tokens,
            effort=effort,
        )
        if u.round == 0:
            messages, tag = generation_messages(u.query)
        else:
            messages, tag = iterate_messages(u.query, previous)
        rec: dict[str, Any] = {"query_id": u.query.id, "sample": u.sample, "round": u.round, "seed": params.seed}
        try:
            c = await client.complete(messages, params, prompt_version=tag)
        except stop_on:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded as an errored call, retried on resume
            return {**rec, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
        parsed = parse_answer(c.text)
        return {
            **rec,
            "status": "ok",
            "error": None,
            "raw_output": c.text,
            "thoughts": getattr(c, "thoughts", None),
            "usage": _usage(c),
            "cost": getattr(c, "cost", None),
            "latency_s": getattr(c, "latency_s", None),
            "cached": bool(getattr(c, "cached", False)),
            "parse_status": parsed.status,
            "parse_flags": parsed.flags,
            "n_paths": len(parsed.paths),
            "paths": parsed.paths,
        }

    async def per_query(q: CreateQuery) -> None:
        mine = [u for u in todo if u.query.id == q.id]
        if variation == "iterate":
            answers = [done[(q.id, 0, r)]["raw_output"] for r in range(n_rounds) if (q.id, 0, r) in done]
            for u in sorted(mine, key=lambda u: u.round):
                if len(answers) < u.round:  # an earlier round is missing: resume will retry
                    break
                rec = await call(u, answers[: u.round])
                run.append(RESPONSES, rec)
                bar.update(1)
                if rec["status"] != "ok":
                    break
                answers.append(rec["raw_output"])
        else:

            async def one(u: _Unit) -> None:
                rec = await call(u, [])
                run.append(RESPONSES, rec)
                bar.update(1)

            await asyncio.gather(*(one(u) for u in mine))

    pending = {q.id: q for q in queries if any(u.query.id == q.id for u in todo)}
    tasks = [asyncio.create_task(per_query(q)) for q in pending.values()]
    try:
        why = await complete_until_stopped(tasks, stop_on)
    finally:
        bar.close()
    if why is not None:
        stopped = f"{type(why).__name__}: {why}"

    latest = run.latest(RESPONSES, _response_key)
    ok = [r for r in latest.values() if r.get("status") == "ok"]
    summary = {
        "run_dir": str(run.path),
        "n_queries": len(queries),
        "n_calls": len(units),
        "n_ok": len(ok),
        "n_error": sum(1 for r in latest.values() if r.get("status") != "ok"),
        "n_missing": len(units) - len(latest),
        "n_paths": sum(int(r.get("n_paths") or 0) for r in ok),
        "n_unparseable": sum(1 for r in ok if r.get("parse_status") == "unparseable"),
        "generation_cost": _sum_cost(ok),
        "stopped": stopped,
    }
    manifest["finished_at"] = now_iso()
    manifest["summary"] = summary
    run.write_manifest(manifest)
    return summary


def _sum_cost(records: Sequence[dict[str, Any]]) -> float | None:
    costs = [r.get("cost") for r in records]
    known = [float(c) for c in costs if c is not None]
    return sum(known) if known else None


def generate(
    queries_path: str | Path | None,
    endpoint: Endpoint,
    run_dir: str | Path,
    *,
    variation: Variation = "original",
    n_samples: int = 4,
    n_rounds: int = 2,
    concurrency: int = 8,
    seed: int = 0,
    limit: int | None = None,
    temperature: float = 0.7,
    max_tokens: int | None = 4096,
    effort: str | None = None,
    rpm: int | None = None,
    tpm: int | None = None,
    max_cost: float | None = None,
    timeout_s: float = 300.0,
    cache: bool = True,
    cache_path: str | Path | None = None,
    client: CompletesChat | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run ``endpoint``'s model on CREATE queries into ``run_dir`` (resumable); returns a summary.

    ``queries_path=None`` uses the 24 shipped queries; ``limit`` keeps the first N.
    ``n_samples`` applies to ``variation="resample"``, ``n_rounds`` (>= 1, first round = base
    prompt) to ``"iterate"``. The paper samples at temperature 0.7 with 4096 tokens for
    non-thinking models. ``client`` replaces the :class:`~cresowlve_core.llm.client.LLMClient`
    built from the other arguments (tests inject fakes this way).
    """
    queries = load_queries(queries_path, limit)
    config = {
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "api_key_env": endpoint.api_key_env,
        "variation": variation,
        "n_samples": n_samples if variation == "resample" else 1,
        "n_rounds": n_rounds if variation == "iterate" else 1,
        "seed": seed,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "effort": effort,
        "queries_path": str(queries_path) if queries_path else "data/create/queries.jsonl",
        "limit": limit,
        "n_queries": len(queries),
        "query_ids": [q.id for q in queries],
        "concurrency": concurrency,
    }

    options = dict(concurrency=concurrency, rpm=rpm, tpm=tpm, max_cost=max_cost, timeout_s=timeout_s,
                   cache=cache, cache_path=cache_path)
    return _run_with_client(endpoint, client, options, lambda c: agenerate(
        queries,
        c,
        run_dir,
        config=config,
        variation=variation,
        n_samples=config["n_samples"],
        n_rounds=config["n_rounds"],
        seed=seed,
        temperature=temperature,
        max_tokens=max_tokens,
        effort=effort,
        progress=progress,
    ))


# --------------------------------------------------------------------------- merged generations


@dataclass
class GeneratedSet:
    """All paths a run produced for one query, merged over samples and rounds."""

    query: CreateQuery
    paths: list[PathT]
    flags: list[str] = field(default_factory=list)
    n_calls_ok: int = 0
    n_calls_failed: int = 0
    raw_outputs: list[str] = field(default_factory=list)


def load_generations(run_dir: str | Path) -> list[GeneratedSet]:
    """Merge each query's successful calls; queries without any record are included (zero paths)."""
    run = RunDir(run_dir)
    manifest = run.read_manifest() or {}
    queries = load_queries(_resolve_queries_path(manifest), manifest.get("limit"))
    latest = run.latest(RESPONSES, _response_key)
    out: list[GeneratedSet] = []
    for q in queries:
        recs = sorted((r for k, r in latest.items() if k[0] == q.id), key=lambda r: (r["sample"], r["round"]))
        g = GeneratedSet(q, [])
        seen: set[str] = set()
        for r in recs:
            if r.get("status") != "ok":
                g.n_calls_failed += 1
                g.flags.append("call_failed")
                continue
            g.n_calls_ok += 1
            g.raw_outputs.append(r.get("raw_output") or "")
            if r.get("parse_status") in ("unparseable", "partial", "empty"):
                g.flags.append(f"parse_{r['parse_status']}")
            for p in r.get("paths") or []:
                key = json.dumps(normalise_path(p), ensure_ascii=False)
                if key in seen:
                    g.flags.append("duplicate_path_dropped")
                    continue
                seen.add(key)
                g.paths.append(p)
        if not recs:
            g.flags.append("not_generated")
        out.append(g)
    return out


def _resolve_queries_path(manifest: dict[str, Any]) -> str | None:
    qp = manifest.get("queries_path")
    if not qp or qp == "data/create/queries.jsonl":
        return None
    return qp


# --------------------------------------------------------------------------- score


def path_key(path: PathT) -> str:
    """Judgments are keyed by the path's normalised content."""
    return hashlib.sha256(json.dumps(normalise_path(path), ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def _judgment_key(r: dict[str, Any]) -> tuple[str, str]:
    return (r["query_id"], r["path_key"])


async def ascore(
    run_dir: str | Path,
    client: CompletesChat,
    *,
    judge: dict[str, Any],
    seed: int = 0,
    max_tokens: int | None = 4096,
    effort: str | None = None,
    judge_invalid: bool = False,
    patience: Sequence[float] = (0.7, 0.9),
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    embedder: Embedder | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Judge every (valid) path of a generated run, then compute utilities (see :func:`score`)."""
    run = RunDir(run_dir)
    gens = load_generations(run_dir)
    params = GenParams(temperature=0.0, seed=seed, max_tokens=max_tokens, effort=effort)
    prior = {k: r for k, r in run.latest(JUDGMENTS, _judgment_key).items() if not r.get("error")}
    manifest = base_manifest(
        "create-score",
        {**judge, "seed": seed, "max_tokens": max_tokens, "judge_invalid": judge_invalid},
        [load_prompt("create_specificity").tag, load_prompt("create_factuality").tag],
    )
    (run.path / SCORE_MANIFEST).write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")

    jobs: list[tuple[GeneratedSet, int, PathT, Any]] = []
    for g in gens:
        for i, p in enumerate(g.paths):
            v = check_validity(p, g.query.entity_a, g.query.entity_b)
            if (g.query.id, path_key(p)) in prior:
                continue
            if v.valid or judge_invalid:
                jobs.append((g, i, p, v))
    bar = tqdm(total=len(jobs), desc=f"CREATE judge {judge.get('model')}", unit="path", disable=not progress)
    stop_on = _stop_errors()
    stopped: str | None = None

    async def one(g: GeneratedSet, i: int, p: PathT, v: Any) -> None:
        spec, fact = await asyncio.gather(judge_specificity(client, p, params), judge_factuality(client, p, params))
        costs = [c.cost for c in (spec, fact) if c.cost is not None]
        run.append(
            JUDGMENTS,
            {
                "query_id": g.query.id,
                "path_key": path_key(p),
                "path_index": i,
                "path": p,
                "valid": v.valid,
                "validity_reasons": list(v.reasons),
                "specificity": spec.verdicts.scores,
                "specificity_sizes": spec.verdicts.sizes,
                "specificity_flags": spec.verdicts.flags,
                "specificity_raw": spec.raw,
                "factuality": fact.verdicts.scores,
                "factuality_flags": fact.verdicts.flags,
                "factuality_raw": fact.raw,
                "cost": sum(costs) if costs else None,
                "cached": spec.cached and fact.cached,
                "usage": {"specificity": spec.usage, "factuality": fact.usage},
                "error": spec.error or fact.error,
            },
        )
        bar.update(1)

    tasks = [asyncio.create_task(one(*job)) for job in jobs]
    try:
        why = await complete_until_stopped(tasks, stop_on)
    finally:
        bar.close()
    if why is not None:
        stopped = f"{type(why).__name__}: {why}"

    sets = scored_sets_from_run(run_dir, config_name=judge.get("config_name"))
    rows = query_scores(sets, patience, factuality_threshold, discount, embedder)
    (run.path / SCORES).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    judgments = list(run.latest(JUDGMENTS, _judgment_key).values())
    meter = getattr(client, "cost_meter", None)
    gen_records = [r for r in run.latest(RESPONSES, _response_key).values() if r.get("status") == "ok"]
    summary = {
        "run_dir": str(run.path),
        "judge": judge,
        "n_queries": len(rows),
        "n_paths": sum(r["n_paths"] for r in rows),
        "n_valid": sum(r["n_valid"] for r in rows),
        "n_factual": sum(r["n_factual"] for r in rows),
        "n_judged_paths": len(judgments),
        "n_judge_errors": sum(1 for j in judgments if j.get("error")),
        "mean_utility": {str(p): _mean([r["utility"][str(p)] for r in rows]) for p in patience},
        "factuality_threshold": factuality_threshold,
        "discount": discount,
        "judge_cost": _sum_cost(judgments),
        "judge_cost_this_session": meter.summary() if meter is not None and hasattr(meter, "summary") else None,
        "generation_cost": _sum_cost(gen_records),
        "stopped": stopped,
    }
    (run.path / SCORE_SUMMARY).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    manifest["finished_at"] = now_iso()
    (run.path / SCORE_MANIFEST).write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
    return summary


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score(
    run_dir: str | Path,
    judge_endpoint: Endpoint,
    *,
    concurrency: int = 8,
    seed: int = 0,
    max_tokens: int | None = 4096,
    effort: str | None = None,
    judge_invalid: bool = False,
    patience: Sequence[float] = (0.7, 0.9),
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    rpm: int | None = None,
    tpm: int | None = None,
    max_cost: float | None = None,
    timeout_s: float = 300.0,
    cache: bool = True,
    cache_path: str | Path | None = None,
    client: CompletesChat | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Judge a generated run with ``judge_endpoint`` (specificity + factuality per path) and score it.

    Only structurally valid paths are judged unless ``judge_invalid``. Judge calls run at
    temperature 0 through the response cache, so re-scoring costs nothing. Writes
    ``judgments.jsonl``, ``scores.jsonl``, ``score_summary.json`` (judge cost separate from
    generation cost); returns the summary.
    """
    judge = {
        "model": judge_endpoint.model,
        "base_url": judge_endpoint.base_url,
        "api_key_env": judge_endpoint.api_key_env,
        "effort": effort,
    }

    options = dict(concurrency=concurrency, rpm=rpm, tpm=tpm, max_cost=max_cost, timeout_s=timeout_s,
                   cache=cache, cache_path=cache_path)
    return _run_with_client(judge_endpoint, client, options, lambda c: ascore(
        run_dir,
        c,
        judge=judge,
        seed=seed,
        max_tokens=max_tokens,
        effort=effort,
        judge_invalid=judge_invalid,
        patience=patience,
        factuality_threshold=factuality_threshold,
        discount=discount,
        embedder=embedder,
        progress=progress,
    ))


def scored_sets_from_run(run_dir: str | Path, config_name: str | None = None) -> list[ScoredSet]:
    """A scored run as :class:`ScoredSet` s (unjudged paths get zero scores; invalid ones stay invalid)."""
    run = RunDir(run_dir)
    manifest = run.read_manifest() or {}
    name = config_name or f"{manifest.get('model', 'model')}__{manifest.get('variation', 'original')}"
    judged = run.latest(JUDGMENTS, _judgment_key)
    out: list[ScoredSet] = []
    for g in load_generations(run_dir):
        spec, fact, valid, reasons = [], [], [], []
        flags = list(g.flags)
        for p in g.paths:
            v = check_validity(p, g.query.entity_a, g.query.entity_b)
            j = judged.get((g.query.id, path_key(p)))
            valid.append(int(v.valid))
            reasons.append(v.reasons)
            if j is None:
                spec.append([0.0] * len(p))
                fact.append([0.0] * len(p))
                if v.valid:
                    flags.append("valid_path_not_judged")
            else:
                spec.append([float(x) for x in j["specificity"]])
                fact.append([float(x) for x in j["factuality"]])
                flags.extend(f"judge_{f}" for f in j.get("specificity_flags", []) + j.get("factuality_flags", []))
        out.append(
            ScoredSet(
                config=name,
                query_id=g.query.id,
                query=g.query.query,
                entity_a=g.query.entity_a,
                entity_b=g.query.entity_b,
                rel_b=g.query.rel_b,
                paths=g.paths,
                specificity=spec,
                factuality=fact,
                validity=valid,
                validity_reasons=reasons,
                flags=flags,
                raw_response="\n\n".join(g.raw_outputs) or None,
            )
        )
    return out


load_scored_run = scored_sets_from_run


def query_scores(
    sets: Sequence[ScoredSet],
    patience: Sequence[float] = (0.7, 0.9),
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    embedder: Embedder | None = None,
) -> list[dict[str, Any]]:
    """Per-query rows: counts, flags, strengths and utilities at each patience."""
    rows = []
    for s in sets:
        b = utility_breakdown(s.paths, s.specificity, s.factuality, s.validity, factuality_threshold, embedder=embedder)
        rows.append(
            {
                "config": s.config,
                "query_id": s.query_id,
                "query": s.query,
                "n_paths": len(s.paths),
                "n_valid": int(sum(s.validity)),
                "n_factual": len(b.kept.indices) + b.kept.dropped.get("no_strength", 0),
                "n_kept": len(b.kept.indices),
                "dropped": b.kept.dropped,
                "strengths": b.kept.strengths,
                "marginals": b.greedy.marginals,
                "utility": {str(p): b.utility(p, discount) for p in patience},
                "flags": sorted(set(s.flags)),
            }
        )
    return rows


def generate_and_score(
    endpoint: Endpoint,
    run_dir: str | Path,
    *,
    judge_endpoint: Endpoint | None = None,
    queries_path: str | Path | None = None,
    limit: int | None = 3,
    max_tokens: int | None = 1024,
    judge_max_tokens: int | None = 1024,
    concurrency: int = 4,
    seed: int = 0,
    config_name: str | None = None,
    progress: bool = False,
    embedder: Embedder | None = None,
    cache_path: str | Path | None = None,
) -> tuple[list[ScoredSet], dict[str, Any]]:
    """Generate (original variation) and score with ``judge_endpoint`` (default: the same endpoint).

    For the notebook's end-to-end check with the offline local model. Returns the scored sets
    and ``{"generate": ..., "score": ...}`` summaries.
    """
    gen = generate(
        queries_path,
        endpoint,
        run_dir,
        limit=limit,
        max_tokens=max_tokens,
        concurrency=concurrency,
        seed=seed,
        progress=progress,
        cache_path=cache_path,
    )
    sc = score(
        run_dir,
        judge_endpoint or endpoint,
        max_tokens=judge_max_tokens,
        concurrency=concurrency,
        seed=seed,
        progress=progress,
        embedder=embedder,
        cache_path=cache_path,
    )
    return scored_sets_from_run(run_dir, config_name), {"generate": gen, "score": sc}
