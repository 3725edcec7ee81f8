"""CREATE scoring: judge the paths of a generated run (specificity, factuality), then creative utility.

Scoring is its own stage with its own run directory, by default ``<run>/score/`` (``score_dir``
to judge one generation with several judges). Every structurally valid path (all paths with
``judge_invalid``) is one unit of :func:`~cresowlve_core.runtime.map_with_resume`: both judges
are called for it and one :class:`~cresowlve_core.create.records.JudgmentRecord` is appended,
keyed by ``(query_id, path_key)`` where ``path_key`` hashes the path's normalised content. So a
re-run judges only new or errored paths, and a stop error (wrong key, ``max_cost``) ends the run
cleanly with every finished judgment kept.

Utilities are then computed with no model call (:func:`query_scores`) and written to
``scores.json``; ``summary.json`` keeps the judge's cost apart from the generation's.

Run directories scored before the runtime (``judgments.jsonl`` and ``score_manifest.json``
beside the responses) still load (:func:`scored_sets_from_run`); re-scoring one with the same
judge model and prompts adopts its judgments instead of paying for them again.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core.create.distance import Embedder
from cresowlve_core.create.generate import (
    GeneratedSet,
    generation_settings,
    load_generations,
    read_generation_manifest,
)
from cresowlve_core.create.judges import (
    FACTUALITY_FEWSHOT_PROMPT,
    FACTUALITY_PROMPT,
    FEWSHOT_JUDGE_MAX_TOKENS,
    SPECIFICITY_FEWSHOT_PROMPT,
    SPECIFICITY_PROMPT,
    CompletesChat,
    JudgeCall,
    fewshot_judge_params,
    judge_factuality,
    judge_specificity,
)
from cresowlve_core.create.paths import Path as PathT
from cresowlve_core.create.paths import Validity, check_validity, normalise_path
from cresowlve_core.create.records import (
    JUDGMENTS,
    SCORE_DIR,
    SCORES,
    GenerationRecord,
    JudgmentRecord,
    QueryScore,
    ScoreSummary,
    judgment_key,
    latest_records,
    records_cost,
    response_key,
    top_error,
)
from cresowlve_core.create.scored import ScoredSet, judgment_problem, unfinished
from cresowlve_core.create.utility import Discount, utility_breakdown
from cresowlve_core.failures import InputError, MissingInput
from cresowlve_core.llm.types import NOT_AN_ANSWER, Endpoint
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime import (
    RESPONSES,
    STOP_ERRORS,
    ClientOptions,
    Manifest,
    RunDir,
    map_with_resume,
    new_manifest,
    open_client,
    record_adaptations,
    run_coro,
)
from cresowlve_core.runtime.outcomes import count_models, error_outcome, served_as, served_label
from cresowlve_core.runtime.step import Step, Variant

KIND = "create_score"
#: Judges answer at temperature 0 through the response cache (re-scoring costs nothing); every
#: setting is :class:`~cresowlve_core.runtime.ClientOptions`' default.
JUDGE_OPTIONS = ClientOptions()
LEGACY_SCORE_MANIFEST = "score_manifest.json"
#: the patience levels creative utility is reported at (default)
PATIENCE: tuple[float, ...] = (0.7, 0.9)


def path_key(path: PathT) -> str:
    """Judgments are keyed by the path's normalised content."""
    return hashlib.sha256(json.dumps(normalise_path(path), ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def default_score_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / SCORE_DIR


@dataclass(frozen=True)
class JudgeUnit:
    """One path to judge."""

    query_id: str
    index: int
    path: tuple[tuple[str, ...], ...]
    validity: Validity

    @property
    def key(self) -> tuple[str, str]:
        return (self.query_id, path_key([list(t) for t in self.path]))


def judge_units(gens: Sequence[GeneratedSet], judge_invalid: bool = False) -> list[JudgeUnit]:
    """The paths to judge: every structurally valid path (every path with ``judge_invalid``)."""
    out: list[JudgeUnit] = []
    for g in gens:
        for i, p in enumerate(g.paths):
            v = check_validity(p, g.query.entity_a, g.query.entity_b)
            if v.valid or judge_invalid:
                out.append(JudgeUnit(g.query.id, i, tuple(tuple(t) for t in p), v))
    return out


def _whole_path(prompt: Prompt, unit: JudgeUnit) -> list[dict[str, str]]:
    raise TypeError("the two judges make their own calls on a path (create/judges.py)")


#: the two judges' calls on a path (create/judges.py): the paper's specificity and factuality
#: prompts, or for a base-model judge the few-shot ones, one call per triple with a short budget
JUDGES: Step[JudgeUnit] = Step(
    "create_judges",
    chat=Variant(lambda u: SPECIFICITY_PROMPT, _whole_path, str, prompts=(SPECIFICITY_PROMPT, FACTUALITY_PROMPT)),
    fewshot=Variant(lambda u: SPECIFICITY_FEWSHOT_PROMPT, _whole_path, str, gen=fewshot_judge_params,
                    max_tokens=FEWSHOT_JUDGE_MAX_TOKENS, protocol="per-triple",
                    prompts=(SPECIFICITY_FEWSHOT_PROMPT, FACTUALITY_FEWSHOT_PROMPT)))


def judge_prompts(base_model: bool) -> list[str]:
    """The tags of the two judge prompts: the paper's, or the few-shot ones for a base-model judge."""
    variant = JUDGES.fewshot if base_model and JUDGES.fewshot else JUDGES.chat
    return [load_prompt(n).tag for n in variant.prompts]


def scored_counts(judgment: JudgmentRecord) -> tuple[int, int, int]:
    """Triples of a judged path, and how many each judge scored (a size / a verdict was read).
    Judgments written before ``factuality_verdicts`` existed count their verdicts as scored
    unless flagged unparseable."""
    n = len(judgment.path)
    spec = sum(s is not None for s in judgment.specificity_sizes) if judgment.specificity_sizes else (
        0 if "unparseable" in judgment.specificity_flags else n)
    fact = sum(v is not None for v in judgment.factuality_verdicts) if judgment.factuality_verdicts else (
        0 if "unparseable" in judgment.factuality_flags else n)
    return n, spec, fact


async def judge_path(client: CompletesChat, unit: JudgeUnit, params: Any, base_model: bool = False) -> dict[str, Any]:
    """Both judges on one path, as a ``judgments.jsonl`` record (``base_model``: the few-shot
    judges, one call per triple). A stop error from any call wins over an ordinary one, so a
    wrong key stops the run instead of being recorded per path."""
    path = [list(t) for t in unit.path]
    results = await asyncio.gather(judge_specificity(client, path, params, base_model=base_model),
                                   judge_factuality(client, path, params, base_model=base_model),
                                   return_exceptions=True)
    spec, fact = results
    if not isinstance(spec, JudgeCall) or not isinstance(fact, JudgeCall):
        errors = [r for r in results if isinstance(r, BaseException)]
        raise next((e for e in errors if isinstance(e, STOP_ERRORS)), errors[0])
    costs = [c.cost for c in (spec, fact) if c.cost is not None]
    return JudgmentRecord(
        query_id=unit.query_id, path_key=unit.key[1], path_index=unit.index, path=path, valid=unit.validity.valid,
        validity_reasons=list(unit.validity.reasons), specificity=spec.verdicts.scores,
        specificity_sizes=spec.verdicts.sizes or [], specificity_flags=spec.verdicts.flags, specificity_raw=spec.raw,
        factuality=fact.verdicts.scores, factuality_verdicts=fact.verdicts.verdicts or [],
        factuality_flags=fact.verdicts.flags, factuality_raw=fact.raw,
        specificity_outcome=spec.outcome, factuality_outcome=fact.outcome,
        judge_served_models=spec.served_models + fact.served_models, prompts=[spec.prompt, fact.prompt], usage={"specificity": spec.usage, "factuality": fact.usage},
        cost=sum(costs) if len(costs) == 2 else None, cached=spec.cached and fact.cached,
    ).model_dump(mode="json")


def _legacy_score_manifest(path: Path) -> dict[str, Any]:
    """The ``score_manifest.json`` of a run scored before the runtime; a damaged one is an error naming it."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid score manifest ({type(exc).__name__}: {exc}); mend or remove it") from None
    if not isinstance(old, dict):
        raise InputError(f"{path}: not a valid score manifest (a JSON {type(old).__name__}, not an object); "
                         "mend or remove it")
    return old


def _adopt_legacy_judgments(run_dir: Path, run: RunDir, judge_model: str, prompts: list[str]) -> int:
    """Judgments of a run scored before the runtime, by the same judge model with the same
    prompts, are appended to the new score directory (once) instead of being paid for again."""
    legacy = run_dir / JUDGMENTS
    old_manifest = run_dir / LEGACY_SCORE_MANIFEST
    if run.path.resolve() == run_dir.resolve() or not legacy.is_file() or (run.path / JUDGMENTS).exists():
        return 0
    if not old_manifest.is_file():
        return 0
    old = _legacy_score_manifest(old_manifest)
    if old.get("model") != judge_model or sorted(old.get("prompts") or []) != sorted(prompts):
        return 0
    n = 0
    for r in RunDir(run_dir).read(JUDGMENTS):
        rec = JudgmentRecord.model_validate(r)
        if rec.status == "ok":
            run.append(JUDGMENTS, rec.model_dump(mode="json"))
            n += 1
    return n


def score_manifest(run_dir: str | Path, judge: Endpoint, *, n_units: int, effort: str | None, judge_invalid: bool,
                   patience: Sequence[float] = PATIENCE, factuality_threshold: float, discount: Discount,
                   options: ClientOptions, generation: Manifest | None = None) -> Manifest:
    """The manifest of the judgments of the generation run in ``run_dir`` (``generation``: its
    manifest, when read already) by ``judge``."""
    gen_dir = Path(run_dir)
    gm = generation or read_generation_manifest(gen_dir)
    step = JUDGES.on(judge, options, effort=effort)
    max_tokens = step.max_tokens
    return new_manifest(
        KIND, model=judge.model, base_url=judge.base_url, api_key_env=judge.api_key_env,
        items=f"{gm.model}__{generation_settings(gm)['variation']}", n_items=n_units, effort=effort,
        seed=options.seed, temperature=options.temperature, max_tokens=max_tokens, prompts=step.tags(),
        identity={"judge_invalid": judge_invalid, "seed": options.seed, "temperature": options.temperature,
                  "max_tokens": max_tokens},
        options=options.model_dump(), sent=step.sent(judge), generation_run_dir=str(gen_dir.resolve()),
        config={"patience": list(patience), "factuality_threshold": factuality_threshold, "discount": discount},
    )


async def ascore(
    run_dir: str | Path,
    client: CompletesChat,
    judge: Endpoint,
    *,
    score_dir: str | Path | None = None,
    effort: str | None = None,
    judge_invalid: bool = False,
    patience: Sequence[float] = PATIENCE,
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    options: ClientOptions = JUDGE_OPTIONS,
    embedder: Embedder | None = None,
    progress: bool = True,
) -> ScoreSummary:
    """Judge and score a generated run with an open client; see :func:`score`. The generation's run
    directory is held for reading throughout (:meth:`~cresowlve_core.runtime.RunDir.reading`): a
    generation still being written is refused, and cannot resume while it is scored."""
    gen_dir = Path(run_dir)
    with RunDir(gen_dir).reading():
        return await _ascore(gen_dir, client, judge, score_dir=score_dir, effort=effort, judge_invalid=judge_invalid,
                             patience=patience, factuality_threshold=factuality_threshold, discount=discount,
                             options=options, embedder=embedder, progress=progress)


async def _ascore(gen_dir: Path, client: CompletesChat, judge: Endpoint, *, score_dir: str | Path | None,
                  effort: str | None, judge_invalid: bool, patience: Sequence[float], factuality_threshold: float,
                  discount: Discount, options: ClientOptions, embedder: Embedder | None,
                  progress: bool) -> ScoreSummary:
    gm = read_generation_manifest(gen_dir)
    gens = load_generations(gen_dir)
    run = RunDir(score_dir or default_score_dir(gen_dir), secret_names=[judge.api_key_env] if judge.api_key_env else None)
    step = JUDGES.on(judge, options, effort=effort)
    units = judge_units(gens, judge_invalid)
    manifest = run.begin(score_manifest(gen_dir, judge, n_units=len(units), effort=effort,
                                        judge_invalid=judge_invalid, patience=patience,
                                        factuality_threshold=factuality_threshold, discount=discount,
                                        options=options, generation=gm))
    _adopt_legacy_judgments(gen_dir, run, judge.model, step.tags())
    params = step.params

    def on_error(u: JudgeUnit, exc: BaseException) -> dict[str, Any]:
        outcome = error_outcome(exc)  # the path's judge calls raised: neither judge's verdicts are kept
        return JudgmentRecord(query_id=u.query_id, path_key=u.key[1], path_index=u.index,
                              path=[list(t) for t in u.path], valid=u.validity.valid,
                              validity_reasons=list(u.validity.reasons), status="error",
                              specificity_outcome=outcome, factuality_outcome=outcome,
                              error=f"{type(exc).__name__}: {exc}").model_dump(mode="json")

    result = await map_with_resume(
        run, JUDGMENTS, units, key=lambda u: u.key, call=lambda u, _prev: judge_path(client, u, params, step.fewshot),
        record_key=judgment_key, on_error=on_error, concurrency=options.concurrency, progress=progress,
        desc=f"CREATE judge {judge.model}",
    )

    sets = scored_sets_from_run(gen_dir, score_dir=run.path)
    rows = query_scores(sets, patience, factuality_threshold, discount, embedder)
    run.write_json(SCORES, [r.model_dump(mode="json") for r in rows])
    wanted = {u.key for u in units}
    judged = [j for k, j in latest_records(run, JUDGMENTS, judgment_key, JudgmentRecord).items() if k in wanted]
    ok = [j for j in judged if j.status == "ok"]
    counts = [scored_counts(j) for j in ok]
    gen_ok = [g for g in latest_records(RunDir(gen_dir), RESPONSES, response_key, GenerationRecord).values()
              if g.status == "ok"]
    finished = [r for r in rows if unfinished(r.flags) is None]  # a failed call or judgment is no utility of 0
    judge_outcomes = [o for j in ok for o in (j.specificity_outcome, j.factuality_outcome)]
    summary = ScoreSummary(
        run_dir=str(gen_dir), score_dir=str(run.path), judge_model=judge.model, n_queries=len(rows),
        n_paths=sum(r.n_paths for r in rows), n_valid=sum(r.n_valid for r in rows),
        n_factual=sum(r.n_factual for r in rows), n_to_judge=len(units), n_judged=len(ok),
        n_judge_errors=len(judged) - len(ok), n_not_judged=len(units) - len(judged), n_sent=result.n_sent,
        n_judge_withheld=sum(NOT_AN_ANSWER & {j.specificity_outcome, j.factuality_outcome} != set() for j in ok),
        n_judge_refused=judge_outcomes.count("refused"), n_judge_filtered=judge_outcomes.count("filtered"),
        n_judge_truncated=judge_outcomes.count("truncated"),
        n_judge_length_mismatch=sum(f.startswith("length_mismatch") for j in ok
                                    for f in j.specificity_flags + j.factuality_flags),
        judge_served_models=count_models(m for j in ok for m in j.judge_served_models),
        n_triples=sum(c[0] for c in counts), n_specificity_scored=sum(c[1] for c in counts),
        n_factuality_scored=sum(c[2] for c in counts),
        mean_utility={str(p): _mean([u for r in finished if (u := r.utility[str(p)]) is not None]) for p in patience},
        n_unfinished_queries=len(rows) - len(finished),
        n_withheld_queries=sum(r.n_paths == 0 and not NOT_AN_ANSWER.isdisjoint(r.flags) for r in finished),
        n_unparsed_queries=sum(r.n_paths == 0 and "parse_unparseable" in r.flags and NOT_AN_ANSWER.isdisjoint(r.flags)
                               for r in finished),
        factuality_threshold=factuality_threshold, discount=discount, judge_cost=records_cost(ok),
        generation_cost=records_cost(gen_ok), stopped=result.stopped, top_error=top_error(judged),
        repairs=result.repairs,
    )
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary=summary.model_dump(mode="json"))
    return summary


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score(
    run_dir: str | Path,
    judge_endpoint: Endpoint,
    *,
    score_dir: str | Path | None = None,
    effort: str | None = None,
    judge_invalid: bool = False,
    patience: Sequence[float] = PATIENCE,
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    options: ClientOptions = JUDGE_OPTIONS,
    client: CompletesChat | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
) -> ScoreSummary:
    """Judge a generated run with ``judge_endpoint`` (specificity + factuality per path) and score it.

    Only structurally valid paths are judged unless ``judge_invalid``. Writes ``judgments.jsonl``,
    ``scores.json`` and ``summary.json`` (judge cost apart from generation cost) into
    ``score_dir`` (default ``<run_dir>/score``) and returns the summary. ``client`` replaces the
    client built from ``judge_endpoint`` and ``options``. Works from notebooks too.
    """
    kwargs: dict[str, Any] = dict(score_dir=score_dir, effort=effort, judge_invalid=judge_invalid, patience=patience,
                                  factuality_threshold=factuality_threshold, discount=discount, options=options,
                                  embedder=embedder, progress=progress)

    async def main() -> ScoreSummary:
        if client is not None:
            return await ascore(run_dir, client, judge_endpoint, **kwargs)
        async with open_client(judge_endpoint, options) as c:
            return await ascore(run_dir, c, judge_endpoint, **kwargs)

    return run_coro(main())


# --------------------------------------------------------------------------- scored sets


def _judgments_of(run_dir: Path, score_dir: Path | None) -> tuple[dict[Any, JudgmentRecord], Manifest | dict[str, Any] | None]:
    """The judgments of a scored run, and its score manifest: the runtime's score directory, or
    the files of a run scored before the runtime."""
    sd = score_dir or default_score_dir(run_dir)
    if (sd / "manifest.json").is_file():
        src = RunDir(sd)
        return (latest_records(src, JUDGMENTS, judgment_key, JudgmentRecord),
                src.read_manifest())
    if (run_dir / JUDGMENTS).is_file():
        legacy = run_dir / LEGACY_SCORE_MANIFEST
        old = _legacy_score_manifest(legacy) if legacy.is_file() else None
        return (latest_records(RunDir(run_dir), JUDGMENTS, judgment_key, JudgmentRecord),
                old)
    return {}, None


def judge_model_of(run_dir: str | Path, score_dir: str | Path | None = None) -> str | None:
    """The judge model a run was scored with (``None``: not scored)."""
    _, m = _judgments_of(Path(run_dir), Path(score_dir) if score_dir else None)
    if m is None:
        return None
    return m.model if isinstance(m, Manifest) else m.get("model")


def scored_sets_from_run(
    run_dir: str | Path,
    config_name: str | None = None,
    *,
    score_dir: str | Path | None = None,
    origin: str = "run",
) -> list[ScoredSet]:
    """A (scored) run as :class:`ScoredSet` s. Unjudged and errored paths get zero scores and a flag
    (``valid_path_not_judged`` / ``judge_error``); invalid paths stay invalid."""
    gen_dir = Path(run_dir)
    gm = read_generation_manifest(gen_dir)
    variation = generation_settings(gm)["variation"]
    name = config_name or f"{gm.model}__{variation}"
    judged, score_manifest = _judgments_of(gen_dir, Path(score_dir) if score_dir else None)
    judge = (score_manifest.model if isinstance(score_manifest, Manifest)
             else (score_manifest or {}).get("model"))
    if judge is not None:  # with the models the judge's replies named, when they named others
        judge = served_label(judge, judge, count_models(m for j in judged.values() if j.status == "ok"
                                                        for m in j.judge_served_models))
    settings = (score_manifest.config if isinstance(score_manifest, Manifest)
                else (score_manifest or {}).get("config")) or {}
    scored_with = {k: settings[k] for k in ("factuality_threshold", "discount") if k in settings}
    out: list[ScoredSet] = []
    for g in load_generations(gen_dir):
        spec, fact, valid, reasons = [], [], [], []
        coverage = [0, 0, 0]  # triples of the judged paths, scored by each judge
        flags = list(g.flags)
        for p in g.paths:
            v = check_validity(p, g.query.entity_a, g.query.entity_b)
            j = judged.get((g.query.id, path_key(p)))
            valid.append(int(v.valid))
            reasons.append(v.reasons)
            if j is None or j.status != "ok":
                spec.append([0.0] * len(p))
                fact.append([0.0] * len(p))
                if j is not None:
                    flags.append("judge_error")
                elif v.valid:
                    flags.append("valid_path_not_judged")
            else:
                coverage = [a + b for a, b in zip(coverage, scored_counts(j), strict=True)]
                spec.append([float(x) for x in j.specificity])
                fact.append([float(x) for x in j.factuality])
                flags.extend(f"judge_{f}" for f in j.specificity_flags + j.factuality_flags)
        scored = ScoredSet(
            config=name, query_id=g.query.id, query=g.query.query, entity_a=g.query.entity_a,
            entity_b=g.query.entity_b, rel_b=g.query.rel_b, paths=g.paths, specificity=spec, factuality=fact,
            validity=valid, validity_reasons=reasons, flags=flags, raw_response="\n\n".join(g.raw_outputs) or None,
            origin=origin, judge=judge, model_name=gm.model, variation_name=variation, scored_with=scored_with,
            judge_coverage=(coverage[0], coverage[1], coverage[2]),
        )
        if (problem := judgment_problem(scored)) is not None:  # a judgments file edited off the judges' scale
            raise InputError(f"{gen_dir}: the judgments of query {g.query.id} cannot be used ({problem}); "
                             "mend or remove them and run `cresowlve create score` again")
        out.append(scored)
    return out


def distinct_names(dirs: Sequence[Path]) -> dict[Path, str]:
    """Each directory's name, with as many parent folders as it takes to tell it from the others'
    (``seed1/run`` and ``seed2/run``; ``run`` alone when no other is called so)."""
    parts = {d: d.resolve().parts for d in dirs}
    names = {}
    for d, own in parts.items():
        k = 1
        while k < len(own) and any(o != d and p[-k:] == own[-k:] for o, p in parts.items()):
            k += 1
        names[d] = "/".join(own[-k:])
    return names


def load_user_runs(patterns: Sequence[str | Path] | str | None) -> list[ScoredSet]:
    """The scored run directories matching ``patterns`` (globs of ``cresowlve create score``'s
    ``--run-dir``), as :class:`ScoredSet` s marked ``origin="yours"`` and named
    ``<model>__<variation> (yours: <directory>)``, the directory with the parent folders that tell
    it from another of the same name (:func:`distinct_names`; a directory matched twice is loaded
    once). A pattern matching nothing, or a directory that is not a scored CREATE run, is an error
    naming it."""
    if patterns is None:
        return []
    if isinstance(patterns, (str, Path)):
        patterns = [patterns]
    runs: dict[Path, Path] = {}  # resolved -> as matched, in the order of the patterns
    for pattern in patterns:
        matches = sorted(glob.glob(str(Path(pattern).expanduser())))
        dirs = [Path(m) for m in matches if Path(m).is_dir()]
        if not dirs:
            raise MissingInput(f"user_runs: {pattern!r} matches no run directory")
        for d in dirs:
            read_generation_manifest(d)  # another stage's run, or a folder of runs: said so, not "not scored yet"
            if judge_model_of(d) is None:
                raise InputError(f"user_runs: {d} is not scored yet (no judgments in {default_score_dir(d)}, where "
                                 "`cresowlve create score` writes them; a run scored into another --score-dir is not "
                                 f"read here); run `cresowlve create score --run-dir {d} ...`")
            runs.setdefault(d.resolve(), d)
    names = distinct_names(list(runs.values()))
    out: list[ScoredSet] = []
    for d in runs.values():
        gm = read_generation_manifest(d)
        answered = [r.served_model for r in latest_records(RunDir(d), RESPONSES, response_key, GenerationRecord).values()
                    if r.status == "ok"]
        served = served_as(gm.model, count_models(answered), len(answered))
        label = f"{gm.model}__{generation_settings(gm)['variation']} (yours: {names[d]}{f'; {served}' if served else ''})"
        out.extend(scored_sets_from_run(d, label, origin="yours"))
    return out


def query_scores(
    sets: Sequence[ScoredSet],
    patience: Sequence[float] = PATIENCE,
    factuality_threshold: float = 1.0,
    discount: Discount = "reference",
    embedder: Embedder | None = None,
) -> list[QueryScore]:
    """Per-query rows: counts, flags, strengths and utilities at each patience (no model call; None
    for a set whose generation or judging is unfinished: :func:`~cresowlve_core.create.scored.unfinished`)."""
    rows = []
    for s in sets:
        b = utility_breakdown(s.paths, s.specificity, s.factuality, s.validity, factuality_threshold, embedder=embedder)
        rows.append(QueryScore(
            config=s.config, query_id=s.query_id, query=s.query, n_paths=len(s.paths), n_valid=int(sum(s.validity)),
            n_factual=len(b.kept.indices) + b.kept.dropped.get("no_strength", 0), n_kept=len(b.kept.indices),
            dropped=b.kept.dropped, strengths=b.kept.strengths, marginals=b.greedy.marginals,
            # an unfinished set (a failed call, a path not judged) has no utility yet: null, not 0
            utility={str(p): b.utility(p, discount) if unfinished(s.flags) is None else None for p in patience},
            flags=sorted(set(s.flags)),
        ))
    return rows

