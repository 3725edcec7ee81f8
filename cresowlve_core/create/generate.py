"""CREATE generation: ask a model for paths, into a resumable run directory (on the stage runtime).

Variations (paper Sec. 6):

* ``original`` — one call per query with the base prompt (``create_generate``, paper E.1);
* ``iterate`` — the conversation goes on for ``n_rounds - 1`` more turns, each asking for
  more/different paths given the previous answers (``create_iterate``, paper E.3). Round ``r``
  needs rounds ``0..r-1``, so each round is one :func:`~cresowlve_core.runtime.map_with_resume`
  call over the queries whose earlier rounds all succeeded;
* ``resample`` — ``n_samples`` independent calls with the base prompt and seeds ``seed + i``.

A base model (provider profile ``base_model``: the embedded Gemma 3 270M; see
:mod:`cresowlve_core.llm.base_model`) copies a chat prompt back instead of answering it. It gets
the few-shot completion prompt ``create_generate_fewshot`` over ``/v1/completions`` instead: two
solved queries of our own, then the open query ending at the open slot ``<answer>{``; the call
stops at the blank line after the path object (or at ``</answer>``), and the continuation is
parsed with the slot put back (:func:`parse_fewshot_paths`). ``iterate`` is a conversation, so it
needs a chat model. Chat models get the paper's prompts unchanged.

Every call is one :class:`~cresowlve_core.create.records.GenerationRecord` in
``responses.jsonl``, keyed by ``(query_id, sample, round)``, appended and fsynced the moment it
finishes. Re-running on the same directory sends only missing or errored calls; a stop error
(wrong key/model/endpoint, ``max_cost``) ends the run cleanly with everything paid for kept.
:func:`load_generations` merges each query's paths over samples and rounds, dropping exact
(case-insensitive) duplicates.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from cresowlve_core.create.judges import CompletesChat
from cresowlve_core.create.paths import ParsedAnswer, normalise_path, parse_answer
from cresowlve_core.create.paths import Path as PathT
from cresowlve_core.create.queries import CreateQuery, load_queries
from cresowlve_core.create.records import (
    GenerateSummary,
    GenerationRecord,
    latest_records,
    records_cost,
    response_key,
    top_error,
)
from cresowlve_core.failures import InputError, MissingInput
from cresowlve_core.llm.base_model import STOP, completion_params, one_line, user_message
from cresowlve_core.llm.effort import refuse_unsent_effort
from cresowlve_core.llm.types import NOT_AN_ANSWER, Endpoint, GenParams
from cresowlve_core.prompts import load_prompt
from cresowlve_core.runtime import (
    RESPONSES,
    ClientOptions,
    Manifest,
    RunDir,
    map_with_resume,
    new_manifest,
    open_client,
    record_adaptations,
    run_coro,
)
from cresowlve_core.runtime.outcomes import (
    call_outcome,
    count_models,
    error_outcome,
    is_withheld,
    outcome_counts,
    outcome_fields,
)
from cresowlve_core.runtime.step import Step, Variant

Variation = Literal["original", "iterate", "resample"]
VARIATIONS: tuple[str, ...] = ("original", "iterate", "resample")
GENERATE_PROMPT = "create_generate"
#: the base-model prompt (few-shot completion), and the open slot it ends at
FEWSHOT_PROMPT = "create_generate_fewshot"
FEWSHOT_SLOT = "<answer>{"
#: where a base model's continuation ends: the blank line after the path object, or its closing tag
FEWSHOT_STOP = (*STOP, "</answer>")
#: a base model's generation budget unless one is given: it writes 2-4 paths in it, and with more it
#: repeats a path until the budget runs out (the embedded model at 256 tokens; the main job gives 128)
FEWSHOT_MAX_TOKENS = 128
ITERATE_PROMPT = "create_iterate"
KIND = "create_generate"
#: ``items`` of a run over the shipped queries (``data/create/queries.jsonl``).
SHIPPED = "shipped"
#: The paper samples answers at temperature 0.7 with 4096 output tokens; every other setting is
#: :class:`~cresowlve_core.runtime.ClientOptions`' default.
GENERATE_OPTIONS = ClientOptions(temperature=0.7, max_tokens=4096)


def _json_inner(text: str) -> str:
    """``text`` on one line, escaped for the inside of a JSON string literal."""
    return json.dumps(one_line(text), ensure_ascii=False)[1:-1]


def generation_messages(query: CreateQuery, base_model: bool = False) -> tuple[list[dict[str, str]], str]:
    """The base prompt (paper E.1) as one user message, and its prompt tag; with ``base_model``
    the few-shot completion prompt ending at its open slot :data:`FEWSHOT_SLOT`."""
    if base_model:
        p = load_prompt(FEWSHOT_PROMPT)
        messages = user_message(p.render(query=one_line(query.query), entity_a=one_line(query.entity_a),
                                         rel_b=_json_inner(query.rel_b), entity_b=_json_inner(query.entity_b)),
                                base_model=True)
        if not messages[0]["content"].endswith(FEWSHOT_SLOT):
            raise ValueError(f"prompt {p.tag} must end at its open slot {FEWSHOT_SLOT!r}")
        return messages, p.tag
    p = load_prompt(GENERATE_PROMPT)
    text = p.render(query=query.query, entity_a=query.entity_a, rel_b=query.rel_b, entity_b=query.entity_b)
    return [{"role": "user", "content": text}], p.tag


def parse_fewshot_paths(continuation: str | None) -> ParsedAnswer:
    """A base model's continuation of the few-shot prompt, parsed as an answer: the open slot
    :data:`FEWSHOT_SLOT` is put back in front, so ``"1": [[...]],\n"2": ...`` (closed or cut off
    by the stop) reads like any CREATE answer. Empty output is ``unparseable``."""
    if not continuation or not continuation.strip():
        return parse_answer(continuation)
    return parse_answer(FEWSHOT_SLOT + continuation)


def fewshot_params(params: GenParams) -> GenParams:
    """``params`` for the few-shot generation call: ``/completions``, stopping at :data:`FEWSHOT_STOP`."""
    p = completion_params(params)
    return dataclasses.replace(p, extra={**p.extra, "stop": list(FEWSHOT_STOP)})


#: the generation call (paper E.1): the paper's chat prompt, or for a base model the few-shot
#: completion prompt, its continuation read as the answer's path object, and a small default budget
GENERATE: Step[CreateQuery] = Step(
    "create_generate",
    chat=Variant(GENERATE_PROMPT, lambda p, q: generation_messages(q)[0], parse_answer),
    fewshot=Variant(FEWSHOT_PROMPT, lambda p, q: generation_messages(q, base_model=True)[0], parse_fewshot_paths,
                    gen=fewshot_params, default_max_tokens=FEWSHOT_MAX_TOKENS))


def iterate_messages(query: CreateQuery, previous_answers: Sequence[str]) -> tuple[list[dict[str, str]], str]:
    """The conversation for an iterate round after ``previous_answers`` (paper E.3)."""
    base, _ = generation_messages(query)
    follow = load_prompt(ITERATE_PROMPT)
    messages = list(base)
    for answer in previous_answers:
        messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": follow.render(query=query.query)})
    return messages, follow.tag


@dataclass(frozen=True)
class Unit:
    """One generation call: a query, a sample index (resample) and a round (iterate)."""

    query: CreateQuery
    sample: int = 0
    round: int = 0

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.query.id, self.sample, self.round)


def plan_rounds(queries: Sequence[CreateQuery], variation: str, n_samples: int, n_rounds: int) -> list[list[Unit]]:
    """The calls of a run, one list per round (only ``iterate`` has more than one round)."""
    if variation == "original":
        return [[Unit(q) for q in queries]]
    if variation == "resample":
        return [[Unit(q, s) for q in queries for s in range(n_samples)]]
    if variation == "iterate":
        return [[Unit(q, 0, r) for q in queries] for r in range(n_rounds)]
    raise InputError(f"variation must be one of {', '.join(VARIATIONS)}, not {variation!r}")


# --------------------------------------------------------------------------- manifests


def read_generation_manifest(run_dir: str | Path) -> Manifest:
    """The (upgraded) manifest of a generation run directory; a clear error if there is none."""
    path = Path(run_dir)
    if not (path / "manifest.json").is_file():
        raise MissingInput(f"{path}: not a CREATE run directory (no manifest.json); "
                                "make one with `cresowlve create generate`")
    m = RunDir(path).read_manifest()  # a manifest of an older layout is upgraded as it is read
    assert m is not None
    if m.kind != KIND:
        raise InputError(f"{path}: holds a {m.kind!r} run, not a CREATE generation run")
    return m


def generation_settings(m: Manifest) -> dict[str, Any]:
    """variation, n_samples, n_rounds of a (new or upgraded) generation manifest."""
    ident = m.identity
    return {"variation": ident.get("variation", "original"), "n_samples": int(ident.get("n_samples") or 1),
            "n_rounds": int(ident.get("n_rounds") or 1)}


def _queries_of(m: Manifest) -> list[CreateQuery]:
    path = None if m.items in (None, SHIPPED) else m.items
    if path is not None and not Path(path).is_file():
        raise MissingInput(f"the queries file of this run, {path}, is missing")
    queries = load_queries(path)
    ids = (m.model_extra or {}).get("query_ids")
    if ids:
        by_id = {q.id: q for q in queries}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise InputError(f"{len(missing)} query id(s) of the run are not in {path or 'the shipped queries'}: "
                             f"{', '.join(missing[:5])}")
        return [by_id[i] for i in ids]
    return queries[: m.limit] if m.limit is not None else queries


# --------------------------------------------------------------------------- generate


def generation_manifest(queries: Sequence[CreateQuery], endpoint: Endpoint, *, variation: Variation,
                        n_samples: int, n_rounds: int, effort: str | None, options: ClientOptions,
                        queries_path: str | Path | None, limit: int | None) -> Manifest:
    """The manifest of a generation run of ``queries`` by ``endpoint`` (``n_samples`` counts for
    ``resample`` only, ``n_rounds`` for ``iterate`` only)."""
    n_samples = n_samples if variation == "resample" else 1
    n_rounds = n_rounds if variation == "iterate" else 1
    step = GENERATE.on(endpoint, options, effort=effort)
    prompts = step.tags() + ([load_prompt(ITERATE_PROMPT).tag] if variation == "iterate" else [])
    return new_manifest(
        KIND, model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
        items=str(queries_path) if queries_path else SHIPPED, n_items=len(queries), limit=limit, effort=effort,
        seed=options.seed, temperature=options.temperature, max_tokens=options.max_tokens, prompts=prompts,
        identity={"variation": variation, "n_samples": n_samples, "n_rounds": n_rounds, "seed": options.seed,
                  "temperature": options.temperature, "max_tokens": options.max_tokens},
        options=options.model_dump(), sent=step.sent(endpoint), query_ids=[q.id for q in queries],
    )


def generation_temperature_not_sent(endpoint: Endpoint, options: ClientOptions, effort: str | None) -> str | None:
    """Why the generation's temperature is not in its requests (a reasoning model, an effort), or None."""
    from cresowlve_core.llm.wire import temperature_not_sent

    return temperature_not_sent(GENERATE.on(endpoint, options, effort=effort).params, endpoint.model, endpoint.profile)


async def agenerate(
    queries: Sequence[CreateQuery],
    client: CompletesChat,
    run_dir: str | Path,
    endpoint: Endpoint,
    *,
    variation: Variation = "original",
    n_samples: int = 4,
    n_rounds: int = 2,
    effort: str | None = None,
    options: ClientOptions = GENERATE_OPTIONS,
    queries_path: str | Path | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> GenerateSummary:
    """Generate into ``run_dir`` with an open client; see :func:`generate`."""
    if variation not in VARIATIONS:
        raise InputError(f"variation must be one of {', '.join(VARIATIONS)}, not {variation!r}")
    n_samples = n_samples if variation == "resample" else 1
    n_rounds = n_rounds if variation == "iterate" else 1
    if n_samples < 1 or n_rounds < 1:
        raise InputError("n_samples and n_rounds must be at least 1")
    if not queries:
        raise InputError("no queries to generate for")
    dupes = sorted(k for k, n in Counter(q.id for q in queries).items() if n > 1)
    if dupes:  # checked before the run directory is touched
        raise InputError(f"{len(dupes)} duplicate query id(s): {', '.join(map(repr, dupes[:10]))}")
    step = GENERATE.on(endpoint, options, effort=effort)
    if step.fewshot and variation == "iterate":
        raise InputError(f"variation 'iterate' is a conversation and needs a chat model; {endpoint.describe()} "
                         "is a base model (few-shot completion prompts): use 'original' or 'resample'")
    run = RunDir(run_dir, secret_names=[endpoint.api_key_env] if endpoint.api_key_env else None)
    manifest = run.begin(generation_manifest(queries, endpoint, variation=variation, n_samples=n_samples,
                                             n_rounds=n_rounds, effort=effort, options=options,
                                             queries_path=queries_path, limit=limit))
    base_params = step.params
    answers: dict[str, list[str]] = {}

    async def call(u: Unit, _previous: dict[str, Any] | None) -> dict[str, Any]:
        params = dataclasses.replace(base_params, seed=options.seed + u.sample)
        if u.round == 0:
            req = step.request(u.query)
            messages, tag = req.messages, req.tag
        else:
            messages, tag = iterate_messages(u.query, answers[u.query.id][: u.round])
        refuse_unsent_effort(endpoint.describe(), effort, manifest.adapted, unit="path set")  # an earlier run's
        c = await client.complete(messages, params, prompt_version=tag)
        if adapted := getattr(client, "adaptations", None):
            refuse_unsent_effort(endpoint.describe(), effort, adapted, unit="path set")
        outcomes = outcome_fields(c) | {"outcome": call_outcome(c)}
        rec = GenerationRecord(
            query_id=u.query.id, sample=u.sample, round=u.round, seed=params.seed, prompt=tag, **outcomes,
            raw_output=c.text, thoughts=c.thoughts, usage=c.usage, cost=c.cost, latency_s=c.latency_s,
            cached=bool(c.cached))
        if is_withheld(c):  # refused or filtered: final, no path read from its text
            return rec.model_dump(mode="json")
        parsed = step.parse(c.text)
        return rec.model_copy(update=dict(parse_status=parsed.status, parse_flags=parsed.flags,
                                          n_paths=len(parsed.paths), paths=parsed.paths)).model_dump(mode="json")

    def on_error(u: Unit, exc: BaseException) -> dict[str, Any]:
        return GenerationRecord(query_id=u.query.id, sample=u.sample, round=u.round, seed=options.seed + u.sample,
                                status="error", outcome=error_outcome(exc),
                                error=f"{type(exc).__name__}: {exc}").model_dump(mode="json")

    stopped: str | None = None
    repairs: list[str] = []
    rounds = plan_rounds(queries, variation, n_samples, n_rounds)
    n_sent = 0
    for r, units in enumerate(rounds):
        if r > 0:  # iterate: a query goes on only when all its earlier rounds succeeded
            latest = _ok_records(run)  # a refused or filtered earlier round is no answer to build on
            answers = {q.id: [latest[(q.id, 0, i)].raw_output or "" for i in range(r)] for q in queries
                       if all((q.id, 0, i) in latest and latest[(q.id, 0, i)].outcome not in NOT_AN_ANSWER
                              for i in range(r))}
            units = [u for u in units if u.query.id in answers]
        desc = f"CREATE {endpoint.model}" + (f" round {r + 1}/{len(rounds)}" if len(rounds) > 1 else "")
        result = await map_with_resume(run, RESPONSES, units, key=lambda u: u.key, call=call,
                                       record_key=response_key, on_error=on_error,
                                       concurrency=options.concurrency, progress=progress, desc=desc)
        repairs.extend(x for x in result.repairs if x not in repairs)
        n_sent += result.n_sent
        if result.stopped:
            stopped = result.stopped
            break

    planned = {u.key for units in rounds for u in units}
    latest_all = {k: r for k, r in latest_records(run, RESPONSES, response_key, GenerationRecord).items()
                  if k in planned}
    ok = [r for r in latest_all.values() if r.status == "ok"]
    # iterate: a conversation ends at a refused or filtered round, so its later rounds are never asked
    ended = {u.key for units in rounds[1:] for u in units if u.key not in latest_all and any(
        (earlier := latest_all.get((u.query.id, 0, i))) is not None and earlier.outcome in NOT_AN_ANSWER
        for i in range(u.round))}
    summary = GenerateSummary(
        run_dir=str(run.path), model=endpoint.model, variation=variation, n_queries=len(queries),
        n_calls=len(planned), n_ok=len(ok), **outcome_counts(r.model_dump() for r in ok),
        served_models=count_models(r.served_model for r in ok),
        n_error=len(latest_all) - len(ok),
        n_missing=len(planned) - len(latest_all) - len(ended), n_not_asked=len(ended),
        **distinct_path_counts(ok),
        n_unparseable=sum(r.parse_status == "unparseable" for r in ok),
        n_truncated=sum(r.outcome == "truncated" for r in ok), n_sent=n_sent,
        generation_cost=records_cost(ok),
        stopped=stopped, top_error=top_error(latest_all.values()), repairs=repairs,
    )
    run.finish(record_adaptations(manifest, client), stopped=stopped, summary=summary.model_dump(mode="json"))
    return summary


def path_identity(path: PathT) -> str:
    """Two paths are the same path when their lower-cased, trimmed triples are equal; a query's
    merged set keeps the first of them (the model's set U holds each path once)."""
    return json.dumps(normalise_path(path), ensure_ascii=False)


def distinct_path_counts(records: Sequence[GenerationRecord]) -> dict[str, int]:
    """``n_paths``: the distinct paths per query of ``records`` (what scoring judges), and
    ``n_duplicate_paths``: the paths listed again for the same query, within one answer or across
    its samples and rounds, that :func:`load_generations` drops."""
    seen: dict[str, set[str]] = {}
    n_paths = n_duplicates = 0
    for r in records:
        keys = seen.setdefault(r.query_id, set())
        for p in r.paths:
            key = path_identity(p)
            if key in keys:
                n_duplicates += 1
            else:
                keys.add(key)
                n_paths += 1
    return {"n_paths": n_paths, "n_duplicate_paths": n_duplicates}


def _ok_records(run: RunDir) -> dict[Any, GenerationRecord]:
    return {k: rec for k, rec in latest_records(run, RESPONSES, response_key, GenerationRecord).items()
            if rec.status == "ok"}


def generate(
    queries_path: str | Path | None,
    endpoint: Endpoint,
    run_dir: str | Path,
    *,
    variation: Variation = "original",
    n_samples: int = 4,
    n_rounds: int = 2,
    limit: int | None = None,
    effort: str | None = None,
    options: ClientOptions = GENERATE_OPTIONS,
    client: CompletesChat | None = None,
    progress: bool = True,
    max_input_chars: int | None = None,
) -> GenerateSummary:
    """Run ``endpoint``'s model on CREATE queries into ``run_dir`` (resumable); returns the summary.

    ``queries_path=None`` uses the 24 shipped queries; ``limit`` keeps the first N. ``n_samples``
    applies to ``variation="resample"``, ``n_rounds`` (>= 1, the first round is the base prompt) to
    ``"iterate"``. ``options`` are the client's settings (default :data:`GENERATE_OPTIONS`: the
    paper's temperature 0.7 and 4096 tokens). ``client`` replaces the client built from
    ``endpoint`` and ``options`` (tests inject fakes this way). Works from notebooks too.
    """
    queries = load_queries(queries_path, limit, max_input_chars=max_input_chars)  # None: the 64 KB limit
    kwargs: dict[str, Any] = dict(variation=variation, n_samples=n_samples, n_rounds=n_rounds, effort=effort,
                                  options=options, queries_path=queries_path, limit=limit, progress=progress)

    async def main() -> GenerateSummary:
        if client is not None:
            return await agenerate(queries, client, run_dir, endpoint, **kwargs)
        async with open_client(endpoint, options) as c:
            return await agenerate(queries, c, run_dir, endpoint, **kwargs)

    return run_coro(main())


# --------------------------------------------------------------------------- merged generations


class GeneratedSet(BaseModel):
    """All paths a run produced for one query, merged over samples and rounds."""

    query: CreateQuery
    paths: list[PathT] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    n_calls_ok: int = 0
    n_calls_failed: int = 0
    raw_outputs: list[str] = Field(default_factory=list)


def _calls_not_run(recs: Sequence[GenerationRecord], variation: str, n_samples: int, n_rounds: int) -> int:
    """How many of a query's planned calls (its samples, or its rounds) have no record, leaving out
    ``iterate`` rounds after a refused or filtered round (never asked: the conversation ended)."""
    done = {(r.sample, r.round): r for r in recs}
    if variation == "resample":
        planned = [(sample, 0) for sample in range(n_samples)]
    elif variation == "iterate":
        ended = min((rnd for (_, rnd), r in done.items() if r.outcome in NOT_AN_ANSWER), default=n_rounds)
        planned = [(0, rnd) for rnd in range(min(n_rounds, ended + 1))]
    else:
        planned = [(0, 0)]
    return sum(key not in done for key in planned)


def load_generations(run_dir: str | Path) -> list[GeneratedSet]:
    """Merge each query's successful calls (in (sample, round) order); a query without any record
    is included with zero paths and the flag ``not_generated``, one with some of its planned calls
    (samples, rounds) never run gets ``call_not_run``. Reads old run directories too."""
    m = read_generation_manifest(run_dir)
    settings = generation_settings(m)
    by_query: dict[str, list[GenerationRecord]] = {}
    for rec in latest_records(RunDir(run_dir), RESPONSES, response_key, GenerationRecord).values():
        by_query.setdefault(rec.query_id, []).append(rec)
    out: list[GeneratedSet] = []
    for q in _queries_of(m):
        recs = sorted(by_query.get(q.id, []), key=lambda r: (r.sample, r.round))
        g = GeneratedSet(query=q)
        seen: set[str] = set()
        for r in recs:
            if r.status != "ok":
                g.n_calls_failed += 1
                g.flags.append("call_failed")
                continue
            g.n_calls_ok += 1
            if r.outcome in NOT_AN_ANSWER:  # the model's refusal or its provider's filter: no paths
                g.flags.append(r.outcome)
                continue
            g.raw_outputs.append(r.raw_output or "")
            if r.outcome == "truncated":  # cut off at the token limit: its paths read as far as it went
                g.flags.append("truncated")
            if r.parse_status in ("unparseable", "partial", "empty"):
                g.flags.append(f"parse_{r.parse_status}")
            for p in r.paths:
                key = path_identity(p)
                if key in seen:
                    g.flags.append("duplicate_path_dropped")
                    continue
                seen.add(key)
                g.paths.append(p)
        if not recs:
            g.flags.append("not_generated")
        elif _calls_not_run(recs, settings["variation"], settings["n_samples"], settings["n_rounds"]):
            g.flags.append("call_not_run")  # e.g. a run stopped between samples: the set is not the configuration's yet
        out.append(g)
    return out
