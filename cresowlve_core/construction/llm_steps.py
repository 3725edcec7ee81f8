"""The model-calling steps of the construction (paper §3.1-3.2), each one ``map_with_resume`` call.

Steps, in build order:

- ``needs_material``: the handout pre-check plus an LLM yes/no with a reason (yes removes);
- ``russian_specific``: a few-shot yes/no on Russian wordplay, phonetics or letters (yes removes);
- ``translate``: Ru -> En of question, answer, explanation and accepted answers in one tagged
  reply, with the placeholder check;
- ``reasoning``, ``concepts``, ``domains``, ``cultures``, ``facts``: the annotations.

Each step has a versioned prompt ``construct_<step>.txt``, a messages builder and a pure parser
(:mod:`cresowlve_core.construction.parsers`). A base model (provider profile ``base_model``: the
embedded Gemma 3 270M; :mod:`cresowlve_core.llm.base_model`) gets the few-shot completion prompt
``construct_<step>_fewshot.txt`` instead, over ``/v1/completions`` with a small budget
(:data:`FEWSHOT_MAX_TOKENS`); the first line of its continuation is read into the same verdict
(:func:`~cresowlve_core.construction.parsers.fewshot_reply`). It translates one field per call
(:data:`FEWSHOT_TRANSLATE_FIELDS`: question, answer, accepted answers; the explanation is not asked
and is flagged ``not_asked``); a field whose Russian does not fit its prompt (``too_long``) or whose
line the token limit cut (``line_cut``) is left unset, never a partial translation. Each writes its own run directory
``<build>/steps/<step>/`` (manifest + ``records.jsonl``): a re-run skips finished items, and a
changed prompt version or model is refused there. Unparseable output leaves the verdict ``None``
and flags the item for review; a failed call (after the client's retries) does the same.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cresowlve_core.construction import parsers as P
from cresowlve_core.construction.collect import SAMPLE_RULE
from cresowlve_core.construction.precheck import handout_markers
from cresowlve_core.construction.records import Candidate, StepOutput
from cresowlve_core.construction.review import view_digest
from cresowlve_core.construction.vocab import CONCEPTS, REASONING_TYPES
from cresowlve_core.items import ItemView
from cresowlve_core.llm.base_model import completion_params, one_line, user_message
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import Completion, Endpoint, summed_cost, summed_usage
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime import (
    ClientOptions,
    Manifest,
    ResumeError,
    RunDir,
    client_endpoint,
    endpoint_or_embedded,
    map_with_resume,
    new_manifest,
    open_client,
    planned_endpoint,
    record_adaptations,
    refuse_changed,
)
from cresowlve_core.runtime import ModelRole as StepModel
from cresowlve_core.runtime.mapping import error_counts, is_ok
from cresowlve_core.runtime.outcomes import (
    count_models,
    is_withheld,
    outcome_counts,
    outcome_fields,
    record_withheld,
    withheld_record,
)
from cresowlve_core.runtime.rundir import archive_changed_from_env, archive_run, read_jsonl
from cresowlve_core.runtime.step import Step, Variant, asks_fewshot
from cresowlve_core.untrusted import one_line as untrusted_line

LLM_STEPS: tuple[str, ...] = ("needs_material", "russian_specific", "translate", "reasoning", "concepts",
                              "domains", "cultures", "facts")
ANNOTATION_STEPS: tuple[str, ...] = ("reasoning", "concepts", "domains", "cultures", "facts")
#: the step whose units are the collected items: its manifest records the build's ``limit`` and
#: how its sample was drawn (``sample``: :data:`~cresowlve_core.construction.collect.SAMPLE_RULE`)
COLLECTED_STEP = LLM_STEPS[0]

#: Output budget per step (tokens): short verdicts need little; translation needs room.
DEFAULT_MAX_TOKENS: dict[str, int] = {"needs_material": 128, "russian_specific": 128, "translate": 768,
                                      "reasoning": 32, "concepts": 64, "domains": 96, "cultures": 64, "facts": 256}

#: A base model's budget per step (tokens): its continuation is one line (a word, a short list, one
#: translated field), and the 270M model runs on to any limit it is given.
FEWSHOT_MAX_TOKENS: dict[str, int] = {"needs_material": 3, "russian_specific": 3, "translate": 96, "reasoning": 3,
                                      "concepts": 16, "domains": 16, "cultures": 12, "facts": 48}
#: The fields a base model translates, one call each, and their budgets (capped by the step's).
#: The explanation is not asked: it is long, and its translation by a base model is not worth the time.
FEWSHOT_TRANSLATE_FIELDS: dict[str, int] = {"question": 96, "answer": 16, "other_answers": 24}
FEWSHOT_SUFFIX = "_fewshot"


@dataclass
class StepClient:
    client: Any  # LLMClient or a test double with the same ``complete``; None: planned, nothing started
    model: str
    base_url: str | None
    api_key_env: str | None
    embedded: bool
    planned: Endpoint | None = None  # the endpoint of a planned client (:func:`planned_step_clients`)

    @property
    def endpoint(self) -> Endpoint | None:
        return getattr(self.client, "endpoint", None) or self.planned

    @property
    def base_model(self) -> bool:
        """The endpoint serves a base model: few-shot completion prompts (llm/base_model.py)."""
        return asks_fewshot(self.endpoint)


@dataclass
class StepContext:
    """What every step needs: the build directory, one client per step, the options."""

    build_dir: Path
    clients: dict[str, StepClient]
    options: ClientOptions = field(default_factory=ClientOptions)
    max_tokens: dict[str, int] = field(default_factory=dict)
    items_tag: str = "build"
    #: the build's ``limit`` (a seeded subset of the collected items), recorded by :data:`COLLECTED_STEP`
    limit: int | None = None
    progress: bool = True
    #: a step run directory of another configuration (prompt version, model) is moved to
    #: ``steps/archive/`` and the step runs afresh, instead of being refused (the main job's demo build)
    archive_changed: bool = False

    def step_options(self, step: str) -> ClientOptions:
        """The step's options; its budget: ``max_tokens[step]`` if set, else the default of its
        prompt kind (:data:`FEWSHOT_MAX_TOKENS` for a base model, :data:`DEFAULT_MAX_TOKENS`)."""
        client = self.clients.get(step)
        default = STEPS[step].default_budget(client.endpoint if client is not None else None)
        n = self.max_tokens.get(step, default or DEFAULT_MAX_TOKENS[step])
        return self.options.model_copy(update={"max_tokens": n})

    @property
    def embedded(self) -> bool:
        return any(c.embedded for c in self.clients.values())


def serves_embedded(endpoint: Endpoint) -> bool:
    """The endpoint is the embedded model although it was named by base URL (the main job's
    server): its provider profile is ``embedded``, or it answers as the embedded model."""
    from cresowlve_core.banners import is_embedded_model

    return endpoint.profile.name == "embedded" or is_embedded_model(endpoint.model)


@contextlib.contextmanager
def open_step_clients(models: dict[str, StepModel], options: ClientOptions) -> Iterator[dict[str, StepClient]]:
    """One client per step (steps sharing an endpoint share the embedded server); closed on exit."""
    with contextlib.ExitStack() as stack:
        by_endpoint: dict[StepModel, StepClient] = {}
        out: dict[str, StepClient] = {}
        for step in LLM_STEPS:
            spec = models.get(step, models.get("default", StepModel()))
            if spec not in by_endpoint:
                endpoint, embedded = stack.enter_context(endpoint_or_embedded(spec.model, spec.base_url,
                                                                               spec.api_key_env))
                client: LLMClient = open_client(endpoint, options)
                stack.callback(client.close)
                by_endpoint[spec] = StepClient(client, endpoint.model, endpoint.base_url, endpoint.api_key_env,
                                               embedded or serves_embedded(endpoint))
            out[step] = by_endpoint[spec]
        yield out


@contextlib.contextmanager
def planned_step_clients(models: dict[str, StepModel], options: ClientOptions) -> Iterator[dict[str, StepClient]]:
    """The step clients :func:`open_step_clients` would open, with nothing started or opened (each
    ``client`` None, its endpoint the client's: :func:`~cresowlve_core.runtime.planned_endpoint`)."""
    with contextlib.ExitStack() as stack:
        by_endpoint: dict[StepModel, StepClient] = {}
        for step in LLM_STEPS:
            spec = models.get(step, models.get("default", StepModel()))
            if spec not in by_endpoint:
                planned, embedded = stack.enter_context(planned_endpoint(spec.model, spec.base_url, spec.api_key_env))
                endpoint = client_endpoint(planned, options)
                by_endpoint[spec] = StepClient(None, endpoint.model, endpoint.base_url, endpoint.api_key_env,
                                               embedded or serves_embedded(endpoint), planned=endpoint)
        yield {step: by_endpoint[models.get(step, models.get("default", StepModel()))] for step in LLM_STEPS}


# ---------------------------------------------------------------------------------------------
# Messages builders
# ---------------------------------------------------------------------------------------------


def _view_values(view: ItemView) -> dict[str, str]:
    return {"question": view.question, "answer": view.answer, "explanation": view.explanation or "",
            "other_answers": view.other_answers or ""}


def annotation_view(c: Candidate) -> tuple[str, ItemView]:
    """Annotations read the English view when there is one, else the Russian one."""
    return ("en", c.en) if c.en is not None else ("ru", c.ru)


def step_prompt(step: str, base_model: bool = False) -> Prompt:
    """The step's prompt: ``construct_<step>``, or ``construct_<step>_fewshot`` for a base model."""
    return load_prompt(f"construct_{step}{FEWSHOT_SUFFIX if base_model else ''}")


def is_fewshot(prompt: Prompt) -> bool:
    """The prompt is a few-shot completion prompt (``construct_<step>_fewshot``)."""
    return prompt.name.endswith(FEWSHOT_SUFFIX)


def step_messages(step: str, c: Candidate, prompt: Prompt | None = None) -> list[dict[str, str]]:
    """The messages of ``step`` for candidate ``c`` (one user message). A few-shot prompt gets each
    field on one line and ends at its open slot (the translation's: :func:`translate_field_messages`)."""
    prompt = prompt or load_prompt(f"construct_{step}")
    view = c.ru if step in ("needs_material", "russian_specific", "translate") else annotation_view(c)[1]
    if is_fewshot(prompt):
        text = prompt.render(question=one_line(view.question), answer=one_line(view.answer, 200))
        return user_message(text, base_model=True)
    return [{"role": "user", "content": prompt.render(**_view_values(view))}]


def translate_field_messages(text: str, prompt: Prompt) -> list[dict[str, str]]:
    """The few-shot translation prompt for one Russian field (on one line), ending at ``English:``."""
    return user_message(prompt.render(text=one_line(text)), base_model=True)


# ---------------------------------------------------------------------------------------------
# Per-step parsing of one reply into a JSON verdict (pure)
# ---------------------------------------------------------------------------------------------


def _yes_no_verdict(c: Candidate, text: str) -> dict[str, Any]:
    v = P.parse_yes_no(text)
    return {"yes": v.yes if v else None, "reason": v.reason if v else None}


def _translate_verdict(c: Candidate, text: str) -> dict[str, Any]:
    source = [f for f in P.TRANSLATION_FIELDS if _view_values(c.ru)[f].strip()]
    t = P.parse_translation(text, source)
    lost = P.lost_placeholders(c.ru.question, t.fields.get("question")) if t.fields.get("question") else []
    return {"fields": t.fields, "flags": t.flags, "complete": t.complete, "lost_placeholders": lost}


def _reasoning_verdict(c: Candidate, text: str) -> dict[str, Any]:
    value = P.parse_reasoning_type(text)
    known, oov = P.check_vocab([value] if value else [], REASONING_TYPES)
    return {"label": known[0] if known else None, "oov": oov, "parsed": value is not None}


def _concepts_verdict(c: Candidate, text: str) -> dict[str, Any]:
    values = P.parse_label_list(text, "LABELS")
    known, oov = P.check_vocab(values or [], CONCEPTS)
    return {"labels": known if values is not None else None, "oov": oov}


def _domains_verdict(c: Candidate, text: str) -> dict[str, Any]:
    values = P.parse_label_list(text, "DOMAINS", sep=r"[;,]")
    return {"free": [P.normalise_label(v) for v in values][:10] if values is not None else None}


def _cultures_verdict(c: Candidate, text: str) -> dict[str, Any]:
    values = P.parse_label_list(text, "CULTURES")
    if values is None:
        return {"cultures": None, "not_cultures": [], "unrecognised": []}
    cultures, flagged, unrecognised = P.check_cultures(values)
    return {"cultures": cultures, "not_cultures": flagged, "unrecognised": unrecognised}


def _facts_verdict(c: Candidate, text: str) -> dict[str, Any]:
    facts = P.parse_facts(text)
    if facts is None:
        return {"facts": None, "revealing": [], "not_questions": []}
    _, view = annotation_view(c)
    ok, revealing, not_q = P.check_facts(facts, view.answer)
    return {"facts": ok, "revealing": revealing, "not_questions": not_q}


def fewshot_translate_verdict(c: Candidate, continuations: dict[str, str | None],
                              cut: dict[str, str] | None = None) -> dict[str, Any]:
    """The translate verdict from a base model's per-field continuations (same shape as the chat
    one); ``cut``: the fields whose translation is partial, and why (:func:`cut_fields`)."""
    source = [f for f in P.TRANSLATION_FIELDS if _view_values(c.ru)[f].strip()]
    t = P.parse_fewshot_translation(continuations, source, cut)
    lost = P.lost_placeholders(c.ru.question, t.fields.get("question")) if t.fields.get("question") else []
    return {"fields": t.fields, "flags": t.flags, "complete": t.complete, "lost_placeholders": lost}


VERDICT_PARSERS: dict[str, Callable[[Candidate, str], dict[str, Any]]] = {
    "needs_material": _yes_no_verdict, "russian_specific": _yes_no_verdict, "translate": _translate_verdict,
    "reasoning": _reasoning_verdict, "concepts": _concepts_verdict, "domains": _domains_verdict,
    "cultures": _cultures_verdict, "facts": _facts_verdict,
}


def cut_fields(c: Candidate, continuations: dict[str, Completion]) -> dict[str, str]:
    """The fields of a base model's translation that are partial, and why: ``too_long`` when the
    Russian field does not fit its one-line prompt (:func:`~cresowlve_core.llm.base_model.one_line`
    cuts it), ``line_cut`` when the continuation reached the token limit before its first line ended."""
    cut = {}
    for f, comp in continuations.items():
        russian = _view_values(c.ru)[f]
        if one_line(russian) != " ".join(russian.split()):
            cut[f] = "too_long"
        elif comp.truncated and not P.first_line_ended(comp.text):
            cut[f] = "line_cut"
    return cut


def _construction_step(step: str) -> Step[Candidate]:
    """``step``'s call: ``construct_<step>`` read by its verdict parser, or for a base model
    ``construct_<step>_fewshot`` over ``/completions``, its first line read into the same verdict
    (the translation: one call per field, :data:`FEWSHOT_TRANSLATE_FIELDS`)."""
    verdict = VERDICT_PARSERS[step]
    return Step(
        f"construction_{step}",
        chat=Variant(f"construct_{step}", lambda p, c: step_messages(step, c, p), lambda text, c: verdict(c, text),
                     default_max_tokens=DEFAULT_MAX_TOKENS[step]),
        fewshot=Variant(f"construct_{step}{FEWSHOT_SUFFIX}", lambda p, c: step_messages(step, c, p),
                        lambda text, c: verdict(c, P.fewshot_reply(step, text)), gen=completion_params,
                        default_max_tokens=FEWSHOT_MAX_TOKENS[step],
                        protocol="per-field" if step == "translate" else None))


#: every construction step's call, by step name
STEPS: dict[str, Step[Candidate]] = {step: _construction_step(step) for step in LLM_STEPS}


def is_parsed(step: str, verdict: dict[str, Any] | None) -> bool:
    """Whether the step's verdict holds a parsed answer (not unparseable, not a failed call)."""
    if verdict is None:
        return False
    key = {"needs_material": "yes", "russian_specific": "yes", "translate": "complete", "reasoning": "parsed",
           "concepts": "labels", "domains": "free", "cultures": "cultures", "facts": "facts"}[step]
    value = verdict.get(key)
    return bool(value) if step in ("translate", "reasoning") else value is not None


# ---------------------------------------------------------------------------------------------
# Running a step
# ---------------------------------------------------------------------------------------------


def step_input_digest(step: str, c: Candidate) -> str:
    """A digest of the text ``step`` reads of ``c`` (the Russian view for the filters and the translation,
    :func:`annotation_view` for the annotations): a step record made from another text (a source
    corrected under the same id, a translation a reviewer fixed) is run again, not reused."""
    view = c.ru if step in ("needs_material", "russian_specific", "translate") else annotation_view(c)[1]
    return view_digest(view)


def step_dir(ctx: StepContext, step: str) -> Path:
    """The step's run directory: ``<build>/steps/<step>``."""
    return ctx.build_dir / "steps" / step


def step_manifest(step: str, ctx: StepContext, n_items: int | None) -> Manifest:
    """The manifest of ``step``'s run directory on ``ctx``'s client for it (``n_items``: its units, None
    while they are not known); :data:`COLLECTED_STEP`'s records the build's limit and sampling rule."""
    sc = ctx.clients[step]
    bound = STEPS[step].on(sc.endpoint, ctx.step_options(step))
    opts = bound.options
    return new_manifest(
        f"construction_{step}", model=sc.model, base_url=sc.base_url, api_key_env=sc.api_key_env,
        items=ctx.items_tag, n_items=n_items, limit=ctx.limit if step == COLLECTED_STEP else None,
        prompts=[bound.prompt().tag], seed=opts.seed,
        temperature=opts.temperature, max_tokens=opts.max_tokens, options=opts.model_dump(), sent=bound.sent(sc.endpoint),
        **({"sample": SAMPLE_RULE} if step == COLLECTED_STEP else {}),
    )


def _archive_changed(ctx: StepContext) -> bool | None:
    """The build's archive_changed, else (None) the main job's CRESOWLVE_ARCHIVE_CHANGED: a step run
    directory of another prompt or model is moved aside."""
    return True if ctx.archive_changed else None


def refuse_changed_steps(ctx: StepContext) -> None:
    """Raise the :class:`~cresowlve_core.runtime.ResumeError` that a step's run directory would raise
    (another configuration there) before any step runs; ``ctx`` may hold planned clients."""
    for step in LLM_STEPS:
        try:
            refuse_changed(step_dir(ctx, step), step_manifest(step, ctx, None), archive_changed=_archive_changed(ctx))
        except ResumeError as exc:  # a build has eight run directories: say which one
            raise ResumeError(f"{step_dir(ctx, step)}: {exc}") from None


def refuse_changed_collection(build_dir: Path, limit: int | None, collected: Sequence[str],
                              archive_changed: bool = False) -> None:
    """Raise a :class:`~cresowlve_core.runtime.ResumeError` naming :data:`COLLECTED_STEP`'s run directory
    when the ``collected`` item ids (under ``limit``) would leave items it holds records of out of the
    build: fewer than it planned because of a smaller limit (the change named,
    :func:`~cresowlve_core.runtime.manifest.narrowed_by_limit`), or other items (another source,
    ``per_level`` or sample), whose records would stay in the step directories while the build's
    summaries and export leave them out. Checked after collecting, before anything is written or a
    model starts. Under the archive-on-change rule (``archive_changed``, else the main job's variable)
    every step directory is moved to ``steps/archive/`` instead, and the build starts afresh."""
    path = build_dir / "steps" / COLLECTED_STEP
    try:
        old = Manifest.model_validate_json((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or unreadable: the step's own begin says why
        return
    archive = archive_changed or archive_changed_from_env()
    try:
        refuse_changed(path, old.model_copy(update={"limit": limit, "n_items": len(collected)}), archive_changed=archive)
    except ResumeError as exc:
        raise ResumeError(f"{path}: {exc}") from None
    left_out = sorted({str(r.get("key")) for r in read_jsonl(path / "records.jsonl")} - set(collected))
    if not left_out:
        return
    shown = ", ".join(untrusted_line(k, 40) for k in left_out[:3]) + (", ..." if len(left_out) > 3 else "")
    why = "another --source, --per-level or --limit than the build it continues"
    old_rule = (old.model_extra or {}).get("sample")
    if old_rule != SAMPLE_RULE:  # the same options draw other items under another rule
        was = "none recorded: an older cresowlve's random draw" if old_rule is None else untrusted_line(str(old_rule), 40)
        why = f"its items were sampled by another rule (sample: {was} → {SAMPLE_RULE}), or {why}"
    held = f"{path}: holds the records of {len(left_out)} item(s) this build does not collect ({shown}): {why}"
    if not archive:
        raise ResumeError(f"{held}; use another build directory (resume only continues the same collection)")
    # every step holds records of the items left out
    moved = [archive_run(d) for step in LLM_STEPS if (d := build_dir / "steps" / step).is_dir()]
    print(f"{held}; moved the build's {len(moved)} step directories to {moved[0].parent} and starting afresh", flush=True)


async def run_step_records(step: str, cands: list[Candidate], ctx: StepContext) -> tuple[dict[str, dict], str | None]:
    """Call the model for ``step`` on every candidate not already done: ONE ``map_with_resume``
    call. Returns the latest record per id and why the run stopped early (if it did)."""
    sc = ctx.clients[step]
    bound = STEPS[step].on(sc.endpoint, ctx.step_options(step))
    prompt = bound.prompt()
    opts = bound.options
    secrets = [sc.api_key_env] if sc.api_key_env else None
    run = RunDir(step_dir(ctx, step), secret_names=secrets)
    manifest = run.begin(step_manifest(step, ctx, len(cands)), archive_changed=_archive_changed(ctx))
    params = bound.params
    digests = {c.id: step_input_digest(step, c) for c in cands}
    changed: set[str] = set()  # items whose record was made from another text than the item's now

    def current(rec: dict[str, Any]) -> bool:
        """The record was made from the item's text now (a record saved before records carried the
        digest is taken as it is)."""
        if rec.get("input_digest", digests.get(rec["key"])) == digests.get(rec["key"]):
            return True
        changed.add(rec["key"])
        return False

    async def call(c: Candidate, previous: dict | None) -> dict[str, Any]:
        if bound.variant.protocol == "per-field":
            return await _fewshot_translate(c)
        comp = await sc.client.complete(bound.messages(c, prompt), params, prompt_version=prompt.tag)
        if is_withheld(comp):  # refused or filtered: final, flagged with its outcome, not parsed
            return {"key": c.id, **withheld_record(comp), "verdict": None, "prompt": prompt.tag,
                    "input_digest": digests[c.id]}
        fields = outcome_fields(comp)
        if is_fewshot(prompt) and comp.truncated and P.first_line_ended(comp.text):
            # a base model runs on to the token limit, but only its first line is read, and that line ended
            fields["outcome"] = "answer"
        return {"key": c.id, "status": "ok", **fields, "verdict": bound.parse(comp.text, c),
                "raw": comp.text, "input_digest": digests[c.id],
                "usage": comp.usage, "cost": comp.cost, "prompt": prompt.tag}

    async def _fewshot_translate(c: Candidate) -> dict[str, Any]:
        """One completion per Russian field (those in FEWSHOT_TRANSLATE_FIELDS), at once; ``raw`` maps field -> continuation."""
        fields = [f for f in FEWSHOT_TRANSLATE_FIELDS if _view_values(c.ru)[f].strip()]
        comps = await asyncio.gather(*(sc.client.complete(
            translate_field_messages(_view_values(c.ru)[f], prompt),
            completion_params(params, max_tokens=min(FEWSHOT_TRANSLATE_FIELDS[f], params.max_tokens or 10**6)),
            prompt_version=prompt.tag) for f in fields))
        by_field = dict(zip(fields, comps, strict=True))
        raw = {f: comp.text for f, comp in by_field.items()}
        # the model each field's reply says answered (one call per field: counted per call in the summary)
        served = {"field_served_models": {f: comp.model or None for f, comp in by_field.items()}}
        withheld = next((comp for comp in comps if is_withheld(comp)), None)  # one refused field withholds the item
        if withheld is not None:
            return {"key": c.id, "status": "ok", **outcome_fields(withheld), **served, "verdict": None, "raw": raw,
                    "input_digest": digests[c.id],
                    "usage": summed_usage([comp.usage for comp in comps]),
                    "cost": summed_cost([comp.cost for comp in comps]), "prompt": prompt.tag}
        cut = cut_fields(c, by_field)
        # truncated: a field's line was cut at the token limit (a continuation that ran on past its
        # first line to the limit lost nothing: only that line is read)
        outcome = "truncated" if "line_cut" in cut.values() else "answer"
        return {"key": c.id, "status": "ok", "outcome": outcome, **served,
                "verdict": fewshot_translate_verdict(c, raw, cut),
                "raw": raw, "input_digest": digests[c.id],
                "usage": summed_usage([comp.usage for comp in comps]),
                "cost": summed_cost([comp.cost for comp in comps]), "prompt": prompt.tag}

    try:
        result = await map_with_resume(run, "records.jsonl", cands, key=lambda c: c.id, call=call,
                                       done=lambda rec: is_ok(rec) and current(rec),
                                       concurrency=opts.concurrency, progress=ctx.progress, desc=step)
    finally:  # each step runs on its own event loop: close this loop's connections before it ends
        await sc.client.aclose()
    # a record of another text whose item this run did not reach (stopped) is no verdict on the text now
    result = replace(result, records={k: r for k, r in result.records.items()
                                                  if r.get("status") != "ok" or current(r)})
    n_parsed = sum(is_parsed(step, r.get("verdict")) for r in result.records.values() if r.get("status") == "ok")
    # every error message with its count, so that a build can sum one message over its steps
    errors = error_counts(result.records.values())
    run.finish(record_adaptations(manifest, sc.client), stopped=result.stopped, summary={
        "n_units": result.n_units, "n_done": result.n_done, **outcome_counts(result.records.values()),
        "n_error": result.n_error, "n_parsed": n_parsed, "n_sent": result.n_sent,
        "n_not_run": result.n_not_run, "top_error": result.top_error(), "errors": dict(errors.most_common()),
        "n_input_changed": len(changed), "served_models": step_served(result.records.values()),
        "stopped": result.stopped})
    return {str(k): v for k, v in result.records.items()}, result.stopped


def _verdict(records: dict[str, dict], cid: str) -> tuple[dict | None, str | None]:
    """(verdict, problem) for one id: problem is ``llm_error``, ``not_run``, ``unparseable``, or the
    outcome of a reply that is not an answer (``refused``, ``filtered``)."""
    rec = records.get(cid)
    if rec is None:
        return None, "not_run"
    if rec.get("status") != "ok":
        return None, "llm_error"
    if record_withheld(rec):
        return None, str(rec["outcome"])
    return rec.get("verdict"), None


def step_served(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The models the provider said answered a step's calls: a record's one call, or each field's call of a
    base model's translation (``field_served_models``; the record's own ``served_model`` then is the
    refusing field's, already among them)."""
    return count_models(m for r in records if r.get("status") == "ok"
                        for m in (r["field_served_models"].values() if "field_served_models" in r
                                  else [r.get("served_model")]))


def _truncation(records: dict[str, dict], cid: str, counts: Counter[str]) -> list[str]:
    """``["truncated"]``, counted, when the item's answer was cut off at the token limit (read as it
    is, like any answer, and flagged for review: its last label or fact may be cut), else ``[]``."""
    if (records.get(cid) or {}).get("outcome") != "truncated":
        return []
    counts["truncated"] += 1
    return ["truncated"]


async def filter_step(step: str, cands: list[Candidate], ctx: StepContext) -> StepOutput:
    """A yes/no filter (``needs_material`` or ``russian_specific``): yes removes the item. An item
    with no usable verdict is kept and flagged for review. ``needs_material`` also runs the
    handout pre-check and reports its hits, including where the LLM disagrees."""
    records, stopped = await run_step_records(step, cands, ctx)
    kept: list[Candidate] = []
    removed: list[Candidate] = []
    counts: Counter[str] = Counter()
    for c in cands:
        verdict, problem = _verdict(records, c.id)
        verdict = dict(verdict or {"yes": None, "reason": None})
        flags = _truncation(records, c.id, counts)
        if problem or verdict.get("yes") is None:
            problem = problem or "unparseable"
            flags.append(problem)
            counts[problem] += 1
        if step == "needs_material":
            hits = handout_markers(c.ru.question, c.handout)
            verdict["precheck"] = hits
            if hits:
                counts["precheck_hits"] += 1
                if verdict.get("yes") is False:
                    counts["precheck_llm_disagree"] += 1
                    flags.append("precheck_disagrees")
                elif verdict.get("yes"):
                    counts["precheck_llm_agree"] += 1
        new = c.with_verdict(step, verdict, review_flags=flags)
        (removed if verdict.get("yes") else kept).append(new)
    counts["n_yes"] = len(removed)
    return StepOutput(step, kept, removed, dict(counts), stopped)


async def translate_step(cands: list[Candidate], ctx: StepContext) -> StepOutput:
    """Ru -> En. A complete translation (question and answer tags present) sets ``en``; missing
    or empty tags and lost placeholders flag the item for review; an incomplete one leaves
    ``en`` unset (never the Russian text). Nothing is removed here."""
    records, stopped = await run_step_records("translate", cands, ctx)
    out = []
    counts: Counter[str] = Counter()
    for c in cands:
        verdict, problem = _verdict(records, c.id)
        cut = _truncation(records, c.id, counts)
        if verdict is None:
            counts[problem or "unparseable"] += 1
            out.append(c.with_verdict("translate", None, review_flags=[problem or "unparseable", *cut]))
            continue
        flags = list(verdict["flags"]) + [f"placeholder_lost:{p}" for p in verdict["lost_placeholders"]]
        for f in flags:
            counts[f.split(":")[0]] += 1
        flags += cut
        en = None
        if verdict["complete"]:
            f = verdict["fields"]
            en = ItemView(question=f["question"], answer=f["answer"], explanation=f.get("explanation"),
                          other_answers=f.get("other_answers"))
            counts["translated"] += 1
        else:
            flags.append("translation_incomplete")
            counts["translation_incomplete"] += 1
        if verdict["lost_placeholders"]:
            counts["items_placeholder_lost"] += 1
        out.append(c.with_verdict("translate", verdict, review_flags=flags, en=en))
    return StepOutput("translate", out, [], dict(counts), stopped)


def no_usable_value(step: str, verdict: dict[str, Any]) -> str | None:
    """Why a parsed annotation gives its item nothing to use, else None: ``oov_only`` when every
    reasoning type or concept it names is outside the vocabulary (an empty set of concepts would say
    that none applies), ``no_usable_facts`` when every fact it lists reveals the answer or is not a
    question (no facts would read as a puzzle that needs none)."""
    if step == "reasoning" and verdict["label"] is None:
        return "oov_only"
    if step == "concepts" and not verdict["labels"] and verdict["oov"]:
        return "oov_only"
    if step == "facts" and not verdict["facts"]:
        return "no_usable_facts"
    return None


async def annotate_step(step: str, cands: list[Candidate], ctx: StepContext) -> StepOutput:
    """One annotation (``reasoning``, ``concepts``, ``domains``, ``cultures`` or ``facts``).
    Out-of-vocabulary labels stay in the verdict's ``oov`` and are counted; unparseable output
    leaves the label unset and flags the item, and so does an answer with nothing usable in it
    (:func:`no_usable_value`): counted under that reason, not as ``labelled``."""
    records, stopped = await run_step_records(step, cands, ctx)
    out = []
    counts: Counter[str] = Counter()
    oov: Counter[str] = Counter()
    for c in cands:
        verdict, problem = _verdict(records, c.id)
        cut = _truncation(records, c.id, counts)
        if not is_parsed(step, verdict):
            problem = problem or "unparseable"
            counts[problem] += 1
            out.append(c.with_verdict(step, verdict, review_flags=[problem, *cut]))
            continue
        assert verdict is not None
        unusable = no_usable_value(step, verdict)
        counts[unusable or "labelled"] += 1
        update: dict[str, Any] = {}
        if step == "reasoning":
            update["reasoning_type"] = verdict["label"]
            oov.update(verdict["oov"])
            if verdict["label"] is not None:
                counts[f"type:{verdict['label']}"] += 1
        elif step == "concepts":
            update["concepts"] = verdict["labels"]
            oov.update(verdict["oov"])
        elif step == "domains":
            update["domains_free"] = verdict["free"]
        elif step == "cultures":
            update["cultures"] = verdict["cultures"]
            oov.update(verdict["unrecognised"])
            counts["not_culture_values"] += len(verdict["not_cultures"])
            counts["unrecognised_values"] += len(verdict["unrecognised"])
        elif step == "facts":
            update["atomic_facts"] = verdict["facts"] or None  # none usable: no number of facts
            counts["revealing_facts"] += len(verdict["revealing"])
            counts["not_question_facts"] += len(verdict["not_questions"])
        out.append(c.with_verdict(step, verdict, review_flags=[*([unusable] if unusable else []), *cut], **update))
    summary: dict[str, Any] = dict(counts)
    if step in ("reasoning", "concepts"):
        summary["oov_labels"] = sum(oov.values())
        summary["oov_top"] = dict(oov.most_common(10))
    if step == "cultures":
        summary["unrecognised_top"] = dict(oov.most_common(10))
    return StepOutput(step, out, [], summary, stopped)
