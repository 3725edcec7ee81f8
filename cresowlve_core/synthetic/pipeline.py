"""The synthetic pipeline end to end (paper App. D): ``run_synth(SynthConfig(...))``.

A *build directory* holds:

- ``candidates.jsonl`` and ``anchors.jsonl`` (stages 1–2, deterministic, no model);
- ``verbalise/``: a run directory (manifest + ``responses.jsonl``), one record per candidate:
  the verbaliser's raw text, the parsed literal/obfuscated/explanation (``None`` when
  unparseable) and the leaks found (stage 3);
- ``solve/``: a run directory, one record per leak-free verbalisation: the solver's raw answers
  to both versions, the extracted answers, their exact-match basis and the outcome (stage 4);
- ``synthetic_items.jsonl``: the survivors in the published schema plus ``source_triples`` and
  ``difficulty_score`` (``cresowlve eval --items`` reads it);
- ``review/queue.jsonl``: the survivors for human validation, in the construction pipeline's
  review format (stage 5);
- ``summary.json``: the yield per stage; ``steps`` and ``calls`` count the model calls of the steps
  that ran (``calls`` in the form of ``exitcodes.stage_exit``: the CLI's exit code).

Both model stages are one :func:`~cresowlve_core.runtime.map_with_resume` call each, so a killed
run resumes where it stopped and a finished one re-runs without a single model call.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cresowlve_core import outfiles
from cresowlve_core.evaluation.solve import solve_step
from cresowlve_core.exitcodes import sent_phrase
from cresowlve_core.items import ItemView
from cresowlve_core.llm.base_model import completion_params
from cresowlve_core.llm.types import CONCURRENCY, Endpoint, GenParams
from cresowlve_core.runtime import (
    RESPONSES,
    ClientOptions,
    Manifest,
    MapResult,
    ResumeError,
    RunDir,
    endpoint_or_embedded,
    map_with_resume,
    new_manifest,
    open_client,
    pipeline_summary,
    planned_endpoint,
    record_adaptations,
    refuse_changed,
    run_coro,
)
from cresowlve_core.runtime.outcomes import (
    call_outcome,
    count_models,
    is_withheld,
    outcome_counts,
    outcome_fields,
    outcome_note,
    served_models,
    served_note,
)
from cresowlve_core.runtime.step import Step, Variant
from cresowlve_core.sources.kg import KnowledgeGraph, KnowledgeSource, load_kg
from cresowlve_core.synthetic.answers import accepted_names, answer_names, find_leaks, match_answer, other_labels
from cresowlve_core.synthetic.candidates import CandidateBuild, build_candidates, write_build
from cresowlve_core.synthetic.difficulty import difficulty_scores, predictiveness
from cresowlve_core.synthetic.domains import domains_by_name
from cresowlve_core.synthetic.export import write_items, write_review_queue
from cresowlve_core.synthetic.facts import Candidate, FactRules
from cresowlve_core.synthetic.leap import SCORING_BASIS, extract, leap_outcome
from cresowlve_core.synthetic.notability import NotabilityBand
from cresowlve_core.synthetic.verbalise import (
    FEWSHOT_PROMPT,
    FEWSHOT_STOP,
    PROMPT,
    ends_in_explanation,
    parse_fewshot_verbalisation,
    parse_verbalisation,
    verbalise_messages,
)

#: a base-model solver's continuation ends at the blank line or at the next few-shot example
SOLVER_STOP = ("\nPuzzle:",)
#: solver call outcomes with no answer for reasons of their own (counted as such, never as unread)
UNREAD_OUTCOMES = ("refused", "filtered", "truncated")
#: the unit of a build's counts and exit code: a verbalisation (one call) or a puzzle put to the solver (two calls)
TASKS = "model tasks"
PAPER_YIELD = (7, 100)  # App. D: 7 of 100 candidates survived the creative-leap filter (Gemini-3-Flash)


class SynthConfig(BaseModel):
    """Everything a synthetic build depends on (recorded in both run manifests)."""

    model_config = ConfigDict(extra="forbid")

    build_dir: str = Field(description="the build directory (created; resumable)")
    n_candidates: int = Field(8, ge=1, description="candidates to build (the paper: 100)")
    domains: list[str] | None = Field(None, description="domain names (None: all of DEFAULT_DOMAINS)")
    band_low: int = Field(3, ge=0, description="notability band, inclusive (see notability.py for the choice)")
    band_high: int = Field(20, ge=0)
    notability: Literal["degree", "in_degree"] = "degree"
    min_facts: int = 2
    max_facts: int = 4
    min_each: int = 2
    max_answers: int = 3
    max_pool: int = 10
    seed: int = 0
    kg_dir: str | None = Field(None, description="the Wikidata subset (None: data/kg/literally_wikidata)")
    knowledge_source: Literal["kg", "wikidata-sparql"] = Field(
        "kg", description="kg: the shipped subset (band = degree); wikidata-sparql: online Wikidata (band = "
                          "sitelinks, the paper used 20..100; needs network)")
    verbaliser_model: str | None = None
    verbaliser_base_url: str | None = Field(None, description="None: the embedded Gemma 3 270M")
    verbaliser_api_key_env: str | None = None
    verbaliser_max_tokens: int = 1024
    verbaliser_temperature: float = 0.0
    solver_model: str | None = None
    solver_base_url: str | None = Field(None, description="None: the embedded Gemma 3 270M")
    solver_api_key_env: str | None = None
    solver_max_tokens: int = 1024
    solver_effort: str | None = Field(None, description="reasoning effort: the plain solve prompt (thinking model)")
    concurrency: int = CONCURRENCY
    max_cost: float | None = None
    cache: bool = True
    max_input_chars: int | None = Field(None, ge=1, description="the input size limit of a graph line (None: 64 KB)")

    def band(self) -> NotabilityBand:
        return NotabilityBand(self.band_low, self.band_high)

    def rules(self) -> FactRules:
        return FactRules(self.min_facts, self.max_facts, self.min_each, self.max_answers, self.max_pool)

    def identity(self, knowledge: str | None = None) -> dict[str, Any]:
        """The settings a resumed build must share (``n_candidates`` may grow: same seed, same order);
        ``knowledge``: the :func:`knowledge_digest` of the graph the build reads."""
        return {"knowledge": knowledge, "seed": self.seed, "band": [self.band_low, self.band_high], "notability": self.notability,
                "domains": self.domains, "rules": [self.min_facts, self.max_facts, self.min_each,
                                                   self.max_answers, self.max_pool],
                "kg_dir": self.kg_dir, "knowledge_source": self.knowledge_source}


@dataclass
class SynthResult:
    """What a build produced; every list is in candidate order."""

    config: SynthConfig
    source: KnowledgeSource
    build: CandidateBuild
    verbalised: dict[str, dict[str, Any]]
    solved: dict[str, dict[str, Any]]
    survivors: list[dict[str, Any]]
    summary: dict[str, Any]
    embedded: dict[str, bool]
    stopped: str | None = None


_DIGESTS: dict[int, tuple[list[Any], str]] = {}


def knowledge_digest(source: KnowledgeSource) -> str | None:
    """A digest of everything a build reads from an in-memory graph (triples, labels, descriptions,
    aliases, relation labels, types): another graph under the same settings (another data
    directory, an edited label) changes the candidates' prompts and accepted answers, so a build
    made on one is not resumed on the other. None for online Wikidata (not versioned)."""
    if not isinstance(source, KnowledgeGraph):
        return None
    kept = _DIGESTS.get(id(source.triples))  # copies made for another notability measure share the triples
    if kept is not None and kept[0] is source.triples:
        return kept[1]
    content = [source.triples, sorted(source.labels.items()), sorted(source.descriptions.items()),
               sorted(source.relation_labels.items()), sorted((k, list(v)) for k, v in source.aliases.items()),
               sorted((k, sorted(v)) for k, v in source.types.items())]
    digest = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
    _DIGESTS[id(source.triples)] = (source.triples, digest)
    return digest


def load_source(cfg: SynthConfig) -> KnowledgeSource:
    """The configured source: the in-memory graph (with its notability measure) or online Wikidata."""
    if cfg.knowledge_source == "wikidata-sparql":
        from cresowlve_core.sources.sparql import WikidataSparql

        return WikidataSparql(sitelinks_band=(cfg.band_low, cfg.band_high), seed=cfg.seed)
    kg: KnowledgeGraph = load_kg(cfg.kg_dir or None, max_input_chars=cfg.max_input_chars)
    if kg.notability_measure != cfg.notability:
        kg = copy.copy(kg)  # shares the indexes; only the measure differs
        kg.notability_measure = cfg.notability
    return kg


# --------------------------------------------------------------------------- stage 3


def verbalise_step(source: KnowledgeSource) -> Step[Candidate]:
    """The verbaliser's call: the tagged chat prompt, or the few-shot completion prompt (every field
    on one line, ending at ``Literal:``) for a base model (module ``verbalise``)."""
    return Step("synth_verbalise",
                chat=Variant(PROMPT, lambda p, c: verbalise_messages(c, source)[0], parse_verbalisation),
                fewshot=Variant(FEWSHOT_PROMPT, lambda p, c: verbalise_messages(c, source, base_model=True)[0],
                                parse_fewshot_verbalisation, gen=lambda g: _fewshot_params(g, FEWSHOT_STOP)))


def solver_step(thinking: bool) -> Step[Any]:
    """The creative-leap solver's call: the English solve step, a base model stopping at the next puzzle."""
    step = solve_step("en", thinking)
    assert step.fewshot is not None
    return dataclasses.replace(step, fewshot=dataclasses.replace(step.fewshot,
                                                                  gen=lambda g: _fewshot_params(g, SOLVER_STOP)))


def verbalise_manifest(source: KnowledgeSource, endpoint: Endpoint, cfg: SynthConfig, options: ClientOptions,
                       n_candidates: int) -> Manifest:
    """The manifest of the verbaliser's run directory: its units are the ``n_candidates`` candidates
    built for ``cfg.n_candidates`` (recorded as its ``limit``: a smaller one is refused on resume)."""
    step = verbalise_step(source).on(endpoint, options)
    return new_manifest(
        "synth_verbalise", model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
        items=str(Path(cfg.build_dir) / "candidates.jsonl"), n_items=n_candidates, limit=cfg.n_candidates,
        seed=options.seed,
        temperature=options.temperature, max_tokens=step.max_tokens, prompts=step.tags(), sent=step.sent(endpoint),
        identity=cfg.identity(knowledge_digest(source)), options=options.model_dump(mode="json"),
        config=cfg.model_dump(mode="json"),
    )


async def averbalise(cands: Sequence[Candidate], source: KnowledgeSource, run: RunDir, client: Any,
                     endpoint: Endpoint, cfg: SynthConfig, options: ClientOptions, *, progress: bool = True) -> MapResult:
    """Verbalise every candidate (one ``map_with_resume`` call) and check it for leaks. A base-model
    verbaliser gets the few-shot completion prompt over ``/v1/completions`` (module ``verbalise``)."""
    step = verbalise_step(source).on(endpoint, options)
    manifest = run.begin(verbalise_manifest(source, endpoint, cfg, options, len(cands)))

    async def call(c: Candidate, _previous: dict[str, Any] | None) -> dict[str, Any]:
        req = step.request(c)
        messages, tag = req.messages, req.tag
        out = await client.complete(messages, req.params, prompt_version=tag)
        # a refused or filtered verbalisation is final and yields no puzzle
        parsed = None if is_withheld(out) else step.parse(out.text, prompt=messages[-1]["content"])
        if out.truncated and step.fewshot and ends_in_explanation(out.text):
            parsed = None  # cut off at the token limit inside its explanation line: no puzzle (a chat reply's tags close)
        names = answer_names(source, c.answers)
        leaks = []
        if parsed is not None:
            for field_name in ("literal", "obfuscated"):
                leaks += [{"field": field_name, "qid": n.qid, "name": n.text, "kind": n.kind}
                          for n in find_leaks(getattr(parsed, field_name), names)]
        return {"key": c.id, "status": "ok", **outcome_fields(out), "anchor": c.anchor, "prompt": tag, "raw": out.text,
                "parsed": parsed.to_record() if parsed else None, "leaks": leaks,
                "usage": _plain(out.usage), "cost": out.cost}

    result = await map_with_resume(run, RESPONSES, list(cands), key=lambda c: c.id, call=call,
                                   concurrency=options.concurrency, progress=progress, desc="verbalising")
    recs = result.records.values()
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary={
        "n_candidates": len(cands), "n_ok": result.n_done, **outcome_counts(recs), "n_error": result.n_error,
        "served_models": served_models(recs),
        "n_parsed": sum(r.get("parsed") is not None for r in recs if r.get("status") == "ok"),
        "n_leak_free": sum(r.get("parsed") is not None and not r.get("leaks") for r in recs if r.get("status") == "ok"),
    })
    return result


def _fewshot_params(params: GenParams, more_stops: tuple[str, ...] = ()) -> GenParams:
    """``params`` for a few-shot completion (:func:`~cresowlve_core.llm.base_model.completion_params`),
    also stopping at ``more_stops``."""
    p = completion_params(params)
    return dataclasses.replace(p, extra={**p.extra, "stop": [*p.extra["stop"], *more_stops]}) if more_stops else p


def _plain(usage: Any) -> Any:
    if usage is None:
        return None
    if hasattr(usage, "model_dump"):
        return usage.model_dump(mode="json")
    if hasattr(usage, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(usage)
    return usage


# --------------------------------------------------------------------------- stage 4


def solve_manifest(source: KnowledgeSource, endpoint: Endpoint, cfg: SynthConfig, options: ClientOptions,
                   n_units: int) -> Manifest:
    """The manifest of the creative-leap filter's run directory."""
    thinking = cfg.solver_effort is not None
    step = solver_step(thinking).on(endpoint, options, effort=cfg.solver_effort)
    return new_manifest(
        "synth_solve", model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
        items=str(Path(cfg.build_dir) / "verbalise"), n_items=n_units, seed=options.seed, effort=cfg.solver_effort,
        thinking=thinking, temperature=options.temperature, max_tokens=step.max_tokens, prompts=[step.prompt().tag],
        sent=step.sent(endpoint), identity={**cfg.identity(knowledge_digest(source)), "scoring": SCORING_BASIS}, options=options.model_dump(mode="json"),
        config=cfg.model_dump(mode="json"),
    )


async def asolve(units: Sequence[tuple[Candidate, dict[str, Any]]], source: KnowledgeSource, run: RunDir, client: Any,
                 endpoint: Endpoint, cfg: SynthConfig, options: ClientOptions, *, progress: bool = True) -> MapResult:
    """The creative-leap filter: the solver answers both versions (one ``map_with_resume`` call)."""
    step = solver_step(cfg.solver_effort is not None).on(endpoint, options, effort=cfg.solver_effort)
    prompt = step.prompt()
    manifest = run.begin(solve_manifest(source, endpoint, cfg, options, len(units)))
    others = other_labels(source)

    async def call(unit: tuple[Candidate, dict[str, Any]], _previous: dict[str, Any] | None) -> dict[str, Any]:
        c, verb = unit
        names = accepted_names(source, c.answers, others)
        rec: dict[str, Any] = {"key": c.id, "status": "ok", "anchor": c.anchor, "prompt": prompt.tag,
                               "scoring": SCORING_BASIS, "cost": 0.0}
        correct: dict[str, bool | None] = {}
        for side in ("literal", "obfuscated"):
            req = step.request(ItemView(question=verb[side], answer="-"))
            out = await client.complete(req.messages, req.params, prompt_version=req.tag)
            if is_withheld(out):  # the solver refused or was filtered: final, unscored (no answer is no wrong answer)
                answer, how, basis, correct[side] = None, None, None, None
            else:
                answer, how = extract(out.text, step.fewshot)
                basis = match_answer(answer, names) if answer is not None else None
                correct[side] = None if answer is None else basis is not None
                if out.truncated and not correct[side]:  # cut off before a right answer: no failure to solve
                    correct[side] = None
            # each side's call has its outcome; the record's own ``outcome`` is the creative-leap outcome
            rec[side] = {"raw": out.text, **outcome_fields(out), "outcome": call_outcome(out), "answer": answer,
                         "extraction": how, "correct": correct[side], "basis": basis, "usage": _plain(out.usage)}
            # the two calls' cost, unknown (None) when either's is: an unpriced call is no call at $0
            rec["cost"] = None if rec["cost"] is None or out.cost is None else rec["cost"] + out.cost
        rec["outcome"] = leap_outcome(correct["literal"], correct["obfuscated"])
        return rec

    result = await map_with_resume(run, RESPONSES, list(units), key=lambda u: u[0].id, call=call,
                                   concurrency=options.concurrency, progress=progress, desc="creative-leap filter")
    done = [r for r in result.records.values() if r.get("status") == "ok"]
    outcomes = [r.get("outcome") for r in done]
    sides = [{"status": "ok", **r[side]} for r in done for side in ("literal", "obfuscated") if side in r]
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary={
        "n_units": len(units), "n_ok": result.n_done, "n_error": result.n_error,
        **{f"{k}_answers": v for k, v in outcome_counts(sides).items()},  # solver answers refused or filtered
        "served_models": served_models(sides),  # the models the provider said gave the solver answers
        **{f"n_{o}": outcomes.count(o) for o in ("kept", "failed_literal", "solved_obfuscated", "unscored")},
    })
    return result


# --------------------------------------------------------------------------- the whole build


def _options(max_tokens: int, temperature: float, cfg: SynthConfig) -> ClientOptions:
    return ClientOptions(max_tokens=max_tokens, temperature=temperature, seed=cfg.seed, concurrency=cfg.concurrency,
                         max_cost=cfg.max_cost, cache=cfg.cache)


def _verbaliser_options(cfg: SynthConfig) -> ClientOptions:
    return _options(cfg.verbaliser_max_tokens, cfg.verbaliser_temperature, cfg)


def _solver_options(cfg: SynthConfig) -> ClientOptions:
    return _options(cfg.solver_max_tokens, 0.0, cfg)


@contextlib.contextmanager
def _endpoints(cfg: SynthConfig, serve: Any = endpoint_or_embedded):  # type: ignore[no-untyped-def]
    """(verbaliser, solver) endpoints and whether each is embedded; one embedded server serves both.
    ``serve``: :func:`~cresowlve_core.runtime.planned_endpoint` names them without starting any."""
    with contextlib.ExitStack() as stack:
        v, v_emb = stack.enter_context(serve(cfg.verbaliser_model, cfg.verbaliser_base_url,
                                             cfg.verbaliser_api_key_env))
        if cfg.solver_base_url is None and v_emb:
            s, s_emb = v, True
        else:
            s, s_emb = stack.enter_context(serve(cfg.solver_model, cfg.solver_base_url, cfg.solver_api_key_env))
        yield v, v_emb, s, s_emb


def refuse_changed_build(cfg: SynthConfig, source: KnowledgeSource, n_candidates: int) -> None:
    """Raise the :class:`~cresowlve_core.runtime.ResumeError` the verbaliser's or the solver's run
    directory of ``cfg.build_dir`` would raise (another configuration there, or fewer than the
    candidates it verbalised: ``n_candidates`` built), before any model starts or a file is written."""
    build_dir = Path(cfg.build_dir)
    with _endpoints(cfg, planned_endpoint) as (v, _, s, _):
        for step, manifest in (("verbalise", verbalise_manifest(source, v, cfg, _verbaliser_options(cfg),
                                                                n_candidates)),
                               ("solve", solve_manifest(source, s, cfg, _solver_options(cfg), 0))):
            try:
                refuse_changed(build_dir / step, manifest)
            except ResumeError as exc:  # both steps have a max_tokens and a seed: say which one
                raise ResumeError(f"{build_dir / step}: {exc}") from None


def _secret_names(*names: str | None) -> list[str] | None:
    found = [n for n in names if n]
    return found or None


def candidate_build(cfg: SynthConfig, src: KnowledgeSource) -> CandidateBuild:
    """The candidates of ``cfg`` from ``src`` (no model involved; seeded, so the same every time)."""
    return build_candidates(src, domains_by_name(cfg.domains), cfg.band(), cfg.rules(), cfg.n_candidates, cfg.seed)


def run_synth(cfg: SynthConfig, *, progress: bool = True, source: KnowledgeSource | None = None,
              endpoints: tuple[Endpoint, Endpoint] | None = None, build: CandidateBuild | None = None) -> SynthResult:
    """Build, verbalise, filter, score and export (resumable). ``endpoints`` (verbaliser, solver)
    overrides the configured ones (tests); otherwise a missing base URL means the embedded model.
    ``build`` is :func:`candidate_build` of ``cfg`` and ``source`` when the caller made it already."""
    src = source if source is not None else load_source(cfg)
    build_dir = Path(cfg.build_dir)
    build = build if build is not None else candidate_build(cfg, src)
    # one build at a time: a second one is refused before it rewrites the candidates or sends a call
    with RunDir(build_dir).lock():
        return _run_synth(cfg, src, build, endpoints, progress)


def _run_synth(cfg: SynthConfig, src: KnowledgeSource, build: CandidateBuild,
               endpoints: tuple[Endpoint, Endpoint] | None, progress: bool) -> SynthResult:
    """:func:`run_synth` once the build directory's lock is held."""
    build_dir = Path(cfg.build_dir)
    if endpoints is None:  # another configuration in the build directory: refused before anything starts
        refuse_changed_build(cfg, src, len(build.candidates))
    write_build(build, src, build_dir)

    async def main(v: Endpoint, s: Endpoint) -> tuple[MapResult, MapResult | None]:
        secrets = _secret_names(cfg.verbaliser_api_key_env, cfg.solver_api_key_env)
        vopts = _verbaliser_options(cfg)
        async with open_client(v, vopts) as vc:
            vres = await averbalise(build.candidates, src, RunDir(build_dir / "verbalise", secret_names=secrets),
                                    vc, v, cfg, vopts, progress=progress)
        if vres.stopped:
            return vres, None
        units = [(c, vres.records[c.id]["parsed"]) for c in build.candidates
                 if c.id in vres.records and vres.records[c.id].get("status") == "ok"
                 and vres.records[c.id].get("parsed") and not vres.records[c.id].get("leaks")]
        sopts = _solver_options(cfg)
        async with open_client(s, sopts) as sc:
            sres = await asolve(units, src, RunDir(build_dir / "solve", secret_names=secrets), sc, s, cfg, sopts,
                                progress=progress)
        return vres, sres

    from cresowlve_core.construction.llm_steps import serves_embedded

    if endpoints is not None:
        v, s = endpoints
        vres, sres = run_coro(main(v, s))
        v_emb = s_emb = False
    else:
        with _endpoints(cfg) as (v, v_emb, s, s_emb):
            vres, sres = run_coro(main(v, s))
    # a role named by base URL may still be the embedded model (the main job's server, serve-local)
    embedded = {"verbaliser": v_emb or serves_embedded(v), "solver": s_emb or serves_embedded(s)}
    return finish_build(cfg, src, build, vres, sres, embedded)


def synth_stage(summary: dict[str, Any]) -> dict[str, Any]:
    """A build's model calls as ``exitcodes.stage_exit`` reads them (:func:`~cresowlve_core.exitcodes.stage_record`),
    ``unparsed`` when the verbaliser answered but no puzzle parsed, or the solver answered but no puzzle was
    scored because its answers were cut off at the token limit: how ``cresowlve synth`` and the 06 report exit."""
    from cresowlve_core.exitcodes import stage_record

    st = summary["stages"]
    solver = summary.get("solver_answers") or {}
    cut_solve = (summary.get("cut_off") or {}).get("solve")
    unparsed = (f"no verbalisation parsed: {st['verbalised']} of {st['candidates']} answered, 0 parsed"
                if st["verbalised"] and not st["parsed"] else
                f"no solver answer read: {solver['unread']} answered version(s), none with an answer (a copy "
                "of the prompt)" if solver.get("unread") and not solver.get("read") else
                f"no puzzle scored: {cut_solve} solver answers cut off at the token limit; a larger "
                "--solver-max-tokens scores them in a new --build-dir"
                if cut_solve and st.get("solver_answered") and not st.get("scored_both") else None)
    return stage_record(summary["calls"], TASKS, unparsed=unparsed)


def summary_line(summary: dict[str, Any], build_dir: str | Path) -> str:
    """``cresowlve synth`` in one line: the funnel, the yield beside the paper's, the calls sent
    (everything else is in ``summary.json``)."""
    st, y, d = summary["stages"], summary["yield"], summary["difficulty"]
    withheld = summary.get("withheld") or {}
    solver_note = outcome_note(withheld.get("solve") or {}).replace(")", " answers)")
    if cut := (summary.get("cut_off") or {}).get("solve"):
        solver_note += f" ({cut} answers cut off at the token limit: unscored unless right)"
    if unread := (summary.get("solver_answers") or {}).get("unread"):
        solver_note += f" ({unread} replies with no answer to read: unscored)"
    short = summary.get("candidate_shortfall")
    verbaliser_note = outcome_note(withheld.get("verbalise") or {})
    if cut_verbalise := (summary.get("cut_off") or {}).get("verbalise"):
        verbaliser_note += f" ({cut_verbalise} cut off at the token limit: no puzzle)"
    funnel = (f"{st['candidates']} candidates{f' ({short})' if short else ''} → {st['verbalised']} verbalised{verbaliser_note} "
              f"({st['parsed']} parsed, {st['leak_free']} leak-free) → {st['solver_answered']} answered by the "
              f"solver{solver_note} → {st['kept']} kept")
    auc, lo, hi = d.get("auc"), d.get("auc_low"), d.get("auc_high")
    interval = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    n_sent = int(summary.get("n_sent", 0))
    calls = summary["calls"]
    sent = sent_phrase(n_sent, calls["n_error"] + calls["n_not_run"], "every task was already in the build directory")
    return (f"synth: {funnel} (paper: {y['paper_kept']} of {y['paper_of']}); difficulty AUC "
            f"{'n/a' if auc is None else f'{auc:.2f}'}{interval} ({auc_population(summary)}); {calls['n_items']} {TASKS} "
            f"({task_calls(summary)}), {sent}; {Path(build_dir) / 'summary.json'}"
            + "".join(served_note(s, f"{role} answers") for role, s in (summary.get("served_models") or {}).items()))


def auc_population(summary: dict[str, Any]) -> str:
    """Who the difficulty AUC is over: the puzzles solved literally, of which those that failed the
    obfuscated version; the unscored ones (a version refused, filtered, cut off or unread) are left out."""
    d, unscored = summary["difficulty"], (summary.get("outcomes") or {}).get("unscored", 0)
    return (f"n={d.get('n', 0)} solved literally, {d.get('n_failed', 0)} of them failed the obfuscated version"
            + (f"; {unscored} unscored left out" if unscored else ""))


def task_calls(summary: dict[str, Any]) -> str:
    """What a build's model tasks are in calls: a verbalisation is one call, a puzzle put to the solver two
    (its literal and its obfuscated version)."""
    units = {s["step"]: int(s.get("n_units") or 0) for s in summary.get("steps") or []}
    n_verbalise, n_solve = units.get("verbalise", 0), units.get("solve", 0)
    return (f"{n_verbalise} verbalisations and {n_solve} puzzles asked in both versions: "
            f"{n_verbalise + 2 * n_solve} model calls")


def finish_build(cfg: SynthConfig, src: KnowledgeSource, build: CandidateBuild, vres: MapResult,
                 sres: MapResult | None, embedded: dict[str, bool]) -> SynthResult:
    """Difficulty scores, survivors, exports and the yield summary."""
    build_dir = Path(cfg.build_dir)
    verbalised = {str(k): r for k, r in vres.records.items() if r.get("status") == "ok"}
    solved = {str(k): r for k, r in (sres.records.items() if sres else []) if r.get("status") == "ok"}
    scored = [k for k in solved if solved[k]["outcome"] != "unscored"]
    scores = difficulty_scores([verbalised[k]["parsed"]["literal"] for k in scored],
                               [verbalised[k]["parsed"]["obfuscated"] for k in scored],
                               cache_path=str(build_dir / "embeddings.sqlite"))
    for k, sc in zip(scored, scores):
        solved[k]["difficulty_score"] = sc
    by_id = {c.id: c for c in build.candidates}
    survivors = [{"candidate": by_id[k], "verbalisation": verbalised[k]["parsed"], "solve": solved[k]}
                 for k in (c.id for c in build.candidates) if k in solved and solved[k]["outcome"] == "kept"]
    items_path = write_items(survivors, src, build_dir / "synthetic_items.jsonl")
    queue_path = write_review_queue(survivors, src, build_dir)
    literal_ok = [k for k in scored if solved[k]["literal"]["correct"]]
    pred = predictiveness([solved[k]["difficulty_score"] for k in literal_ok],
                          [not solved[k]["obfuscated"]["correct"] for k in literal_ok], seed=cfg.seed)
    n_parsed = sum(r.get("parsed") is not None for r in verbalised.values())
    n_leak_free = sum(r.get("parsed") is not None and not r.get("leaks") for r in verbalised.values())
    outcomes = [r["outcome"] for r in solved.values()]
    sides = [r[side] for r in solved.values() for side in ("literal", "obfuscated") if side in r]
    withheld = {"verbalise": outcome_counts(verbalised.values()),
                "solve": outcome_counts({"status": "ok", **r[side]} for r in solved.values()
                                        for side in ("literal", "obfuscated") if side in r)}
    # the solver's calls are the two sides of a record: the models that answered are named there
    served = {"verbalise": served_models(verbalised.values()),
              "solve": count_models(s.get("served_model") for s in sides if s.get("status", "ok") == "ok")}
    steps = [vres.step_counts("verbalise")] + ([sres.step_counts("solve") | {"served_models": served["solve"]}]
                                               if sres else [])
    counts = pipeline_summary(steps)  # a stopped verbaliser skips the solver: its step is not listed
    stopped = vres.stopped or (sres.stopped if sres else None)
    summary = {
        "stages": {
            "anchors_tried": len(build.tried),
            "candidates": len(build.candidates),
            "verbalised": len(verbalised) - sum(withheld["verbalise"].values()),
            "parsed": n_parsed,
            "leak_free": n_leak_free,
            "solver_answered": len(solved),
            "scored_both": len(scored),
            "solved_literal": len(literal_ok),
            "kept": outcomes.count("kept"),
        },
        "served_models": served,  # the models the provider said answered, per role (calls naming none left out)
        "withheld": withheld,  # calls refused or filtered: the verbaliser's by candidate, the solver's by side
        # solver answers cut off at the token limit (by side): unscored unless right, so never a failure to solve
        "cut_off": {"verbalise": sum(r.get("outcome") == "truncated" and r.get("parsed") is None
                                     for r in verbalised.values()),
                    "solve": sum(r[side].get("outcome") == "truncated" for r in solved.values()
                                 for side in ("literal", "obfuscated") if side in r)},
        # solver answers by side: an answer extracted (read), or a finished, uncut reply with none (unread:
        # a copy of the prompt or its placeholder), never a failure to solve
        "solver_answers": {"read": sum(side.get("answer") is not None for side in sides),
                           "unread": sum(side.get("answer") is None and side.get("outcome") not in UNREAD_OUTCOMES
                                         for side in sides)},
        "outcomes": {o: outcomes.count(o) for o in ("kept", "failed_literal", "solved_obfuscated", "unscored")},
        "yield": {"kept": outcomes.count("kept"), "of_candidates": len(build.candidates),
                  "paper_kept": PAPER_YIELD[0], "paper_of": PAPER_YIELD[1]},
        "candidate_counts": build.counts(),
        "candidate_shortfall": build.shortfall(),  # fewer candidates than asked, and why (None: as many)
        "difficulty": pred.to_record(),
        "embedded": embedded,
        "prompts": {"verbalise": sorted({str(r.get("prompt")) for r in verbalised.values()}),
                    "solve": sorted({str(r.get("prompt")) for r in solved.values()})},
        "errors": {"verbalise": vres.n_error, "solve": sres.n_error if sres else 0},
        "stopped": stopped,
        "stopped_at": counts["stopped_at"],
        "steps": steps,
        "calls": {k: counts[k] for k in ("n_items", "n_ok", "n_error", "n_not_run", "top_error", "stopped")},
        "n_sent": vres.n_sent + (sres.n_sent if sres else 0),
        "scoring": SCORING_BASIS,
        "exports": {"items": str(items_path), "review_queue": str(queue_path)},
        "config": cfg.model_dump(mode="json"),
    }
    outfiles.write_json(build_dir / "summary.json", summary)
    return SynthResult(cfg, src, build, verbalised, solved, survivors, summary, embedded, stopped)
