"""Automatic error labelling: one labeller call per wrong answer, one ``map_with_resume`` run.

The labeller reads the puzzle, the reference answer, its explanation, the accepted answers, the
model's reasoning (thoughts, else its raw output) and its prediction, writes a rationale and a
category. Only the *last* ``CATEGORY:`` line counts; a category outside the taxonomy is kept as
``other: <text>``; output without a category line is *unlabelled* (``label = None``), never guessed.
A reply cut off at the token limit inside its category line (the line runs to the end of the text) is
unlabelled unless that line already names a category of the taxonomy: "CATEGORY: Over" is the start
of a name, not a category of its own (``n_cut_off``).

A base-model labeller (provider profile ``base_model``: the embedded Gemma 3 270M) gets the few-shot
completion prompt ``error_label_fewshot`` (the worked examples as solved cases, then ``Category:``);
the first line of its continuation is read as the ``CATEGORY:`` line, and there is no rationale.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core.error_analysis.taxonomy import CATEGORIES, FEW_SHOT, OTHER_PREFIX, category_of
from cresowlve_core.error_analysis.wrong import WrongAnswer
from cresowlve_core.llm.base_model import completion_params, first_line, one_line, user_message
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime import (
    ClientOptions,
    Manifest,
    MapResult,
    ResumeError,
    RunDir,
    map_with_resume,
    new_manifest,
    record_adaptations,
)
from cresowlve_core.runtime.outcomes import (
    is_withheld,
    outcome_counts,
    outcome_fields,
    record_withheld,
    served_models,
    withheld_record,
)
from cresowlve_core.runtime.rundir import RunDirError
from cresowlve_core.runtime.step import Step, Variant

PROMPT = "error_label"
FEWSHOT_PROMPT = "error_label_fewshot"
LABELS = "labels.jsonl"
MAX_REASONING_CHARS = 12_000  # the labeller sees the head and the tail of a longer trace
MAX_PARSE_CHARS = 20_000
_CATEGORY_LINE = re.compile(r"^[\s*#>_-]*category[\s*_]*[:：]\s*(.*?)[\s*_.]*$", re.I)
_RATIONALE_LINE = re.compile(r"^[\s*#>_-]*rationale[\s*_]*[:：]\s*(.*?)\s*$", re.I)


@dataclass(frozen=True)
class Label:
    """A parsed labeller reply: a category slug or ``other: <text>``, and the rationale."""

    category: str
    rationale: str

    @property
    def in_taxonomy(self) -> bool:
        return not self.category.startswith(OTHER_PREFIX)


def parse_label(text: str | None, *, cut_off: bool = False) -> Label | None:
    """The last ``CATEGORY:`` line of ``text`` as a :class:`Label`, else ``None`` (unlabelled).

    Names, slugs and numbers 1–7 are accepted, with or without markdown; anything else on the
    line is kept as ``other: <text>``. An empty category line is unlabelled. ``cut_off``: the reply
    ended at the token limit; a category line running to its very end may be a name cut short, and
    is read only when it names a category of the taxonomy.
    """
    if not text:
        return None
    lines = text[-MAX_PARSE_CHARS:].splitlines()
    category: str | None = None
    cat_at = -1
    for i, line in enumerate(lines):
        m = _CATEGORY_LINE.match(line)
        if m:
            category, cat_at = m.group(1).strip().strip("\"'`«»“”"), i
    if category is None or not category:
        return None
    rationale = ""
    for line in lines[:cat_at]:
        m = _RATIONALE_LINE.match(line)
        if m:
            rationale = m.group(1)
    if not rationale:
        rationale = " ".join(x.strip() for x in lines[:cat_at] if x.strip())[-600:]
    slug = category_of(category) or category_of(re.sub(r"^\s*\d+\s*[.)]\s*", "", category))
    line_cut_short = cut_off and cat_at == len(lines) - 1 and not text.endswith(("\n", "\r"))
    if line_cut_short and not slug:
        return None
    other = re.sub(r"^other\s*:\s*", "", category, flags=re.IGNORECASE) or category  # "other: X" named once
    return Label(slug if slug else OTHER_PREFIX + other[:120], rationale[:1000])


def _categories_text() -> str:
    return "\n".join(f"{i}. {c.name}: {c.definition}" for i, c in enumerate(CATEGORIES, start=1))


def _examples_text() -> str:
    from cresowlve_core.error_analysis.taxonomy import BY_SLUG

    blocks = []
    for ex in FEW_SHOT:
        blocks.append(f"Puzzle: {ex.question}\nReference answer: {ex.answer}\nModel reasoning: {ex.reasoning}\n"
                      f"Model answer: {ex.prediction}\nRATIONALE: {ex.rationale}\n"
                      f"CATEGORY: {BY_SLUG[ex.category].name}")
    return "\n\n".join(blocks)


def _fewshot_examples_text() -> str:
    from cresowlve_core.error_analysis.taxonomy import BY_SLUG

    return "\n\n".join(f"Puzzle: {ex.question}\nReference answer: {ex.answer}\nModel answer: {ex.prediction}\n"
                       f"Category: {BY_SLUG[ex.category].name}" for ex in FEW_SHOT)


def _clip(text: str, limit: int = MAX_REASONING_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - limit} characters left out ...]\n" + text[-half:]


def _chat_messages(prompt: Prompt, unit: WrongAnswer) -> list[dict[str, str]]:
    text = prompt.render(
        categories=_categories_text(), examples=_examples_text(),
        question=unit.question.strip(), answer=unit.answer.strip(),
        other_answers=(unit.other_answers or "(none)").strip(), explanation=(unit.explanation or "(none)").strip(),
        reasoning=_clip(unit.reasoning.strip()) or "(none recorded)", prediction=unit.prediction.strip() or "(empty)",
    )
    return [{"role": "user", "content": text}]


def _fewshot_messages(prompt: Prompt, unit: WrongAnswer) -> list[dict[str, str]]:
    text = prompt.render(categories=_categories_text(), examples=_fewshot_examples_text(),
                         question=one_line(unit.question), answer=one_line(unit.answer),
                         prediction=one_line(unit.prediction) or "(empty)")
    return user_message(text, base_model=True)


def parse_fewshot_label(text: str | None, *, cut_off: bool = False) -> Label | None:
    """A base model's continuation of ``error_label_fewshot``: its first line is the category
    (``cut_off``: as :func:`parse_label`, when that line is all of a continuation cut off at the token limit)."""
    only_line = "\n" not in (text or "").strip()
    return parse_label("CATEGORY: " + first_line(text), cut_off=cut_off and only_line)


#: the labeller's call: the chat prompt, or the few-shot completion prompt for a base model
LABEL = Step("error_label", chat=Variant(PROMPT, _chat_messages, parse_label),
             fewshot=Variant(FEWSHOT_PROMPT, _fewshot_messages, parse_fewshot_label, gen=completion_params))


def label_messages(unit: WrongAnswer, base_model: bool = False) -> tuple[list[dict[str, str]], str]:
    """The labeller's chat messages for one wrong answer, and the prompt tag (``base_model``: the
    few-shot completion prompt, each field on one line)."""
    variant = LABEL.fewshot if base_model and LABEL.fewshot else LABEL.chat
    prompt = load_prompt(variant.prompt_name(unit))
    return variant.messages(prompt, unit), prompt.tag


def label_manifest(endpoint: Endpoint, options: ClientOptions, n_units: int, limit: int | None = None) -> Manifest:
    """The manifest of a labels folder labelled by ``endpoint`` (its client's) with ``options``;
    ``limit``: the limit that left wrong answers out of the ``n_units`` (a smaller one is refused on resume)."""
    step = LABEL.on(endpoint, options)
    return new_manifest(
        "error_label", model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
        n_items=n_units, limit=limit, prompts=step.tags(), seed=options.seed, temperature=options.temperature,
        max_tokens=step.max_tokens, options=options.model_dump(), sent=step.sent(endpoint),
        identity={"taxonomy": [c.slug for c in CATEGORIES]})


async def alabel(units: Sequence[WrongAnswer], run: RunDir, client: LLMClient, options: ClientOptions, *,
                 progress: bool = True, limit: int | None = None) -> MapResult[WrongAnswer]:
    """Label every wrong answer in ``units`` into ``run/labels.jsonl`` (resumable, one record each);
    ``limit``: the limit that left the others out (:func:`label_manifest`)."""
    step = LABEL.on(client.endpoint, options)
    manifest = run.begin(label_manifest(client.endpoint, options, len(units), limit))

    async def call(unit: WrongAnswer, previous: dict[str, Any] | None) -> dict[str, Any]:
        req = step.request(unit)
        tag = req.tag
        c = await client.complete(req.messages, req.params, prompt_version=tag)
        head = {"key": unit.key, "config": unit.config, "lang": unit.lang, "id": unit.id, "basis": unit.basis,
                "labeller": client.endpoint.model, "prompt": tag}
        if is_withheld(c):  # refused or filtered: final, no label read from it
            return {**head, **withheld_record(c), "label": None, "rationale": None}
        parsed = step.parse(c.text, cut_off=c.truncated)
        return {**head, "status": "ok", **outcome_fields(c),
                "label": parsed.category if parsed else None, "rationale": parsed.rationale if parsed else None,
                "raw": c.text, "usage": c.usage.model_dump(), "cost": c.cost}

    result = await map_with_resume(run, LABELS, units, key=lambda u: u.key, call=call,
                                   concurrency=options.concurrency, progress=progress, desc="labelling errors")
    recs = list(result.records.values())
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary={
        "n_units": result.n_units, "n_done": result.n_done, **outcome_counts(recs), "n_error": result.n_error,
        "served_models": served_models(recs),
        "n_not_run": result.n_not_run, "n_unlabelled": sum(r.get("status") == "ok" and r.get("label") is None and not record_withheld(r)
                            for r in recs),
        "n_other": sum(str(r.get("label") or "").startswith(OTHER_PREFIX) for r in recs),
        "n_cut_off": sum(r.get("status") == "ok" and r.get("outcome") == "truncated" and r.get("label") is None
                         for r in recs),
        "stopped": result.stopped})
    return result


def labeller_is_embedded(label_dir: Path) -> bool:
    """True when the labels in ``label_dir`` came from the embedded model: the folder of an unnamed
    labeller (``embedded``), or a manifest naming the embedded model or provider."""
    from cresowlve_core.banners import is_embedded_model

    if label_dir.name == "embedded":
        return True
    try:
        manifest = RunDir(label_dir).read_manifest()
    except (OSError, RunDirError):  # an unreadable manifest names no model; the folder name decided above
        return False
    return manifest is not None and (manifest.provider == "embedded" or is_embedded_model(manifest.model))


def label_errors(units: Sequence[WrongAnswer], run_dir: str | Path, *, model: str | None = None,
                 base_url: str | None = None, api_key_env: str | None = None,
                 options: ClientOptions | None = None, progress: bool = True, limit: int | None = None,
                 on_start: Callable[[], None] | None = None) -> MapResult[WrongAnswer]:
    """Synchronous entry point: label ``units`` with the labeller (embedded model if no base URL).
    ``limit``: the limit that left the other wrong answers out of ``units`` (None when none did).
    A labels folder of another configuration, or one that labelled more wrong answers than a smaller
    limit leaves, is refused before any model starts; ``on_start`` is called after that check,
    before the labeller starts (the command line's embedded banner)."""
    from cresowlve_core.runtime import (
        client_endpoint,
        endpoint_or_embedded,
        open_client,
        planned_endpoint,
        refuse_changed,
        run_coro,
    )

    opts = options or ClientOptions()
    with planned_endpoint(model, base_url, api_key_env) as (planned, _):  # refused before any model starts
        try:
            refuse_changed(run_dir, label_manifest(client_endpoint(planned, opts), opts, len(units), limit))
        except ResumeError as exc:  # the labels folder is OUT_DIR/labels/LABELLER: say which one
            raise ResumeError(f"{run_dir}: {exc}") from None
    if on_start is not None:
        on_start()

    async def go(endpoint: Any) -> MapResult[WrongAnswer]:
        client = open_client(endpoint, opts)
        try:
            return await alabel(units, RunDir(run_dir), client, opts, progress=progress, limit=limit)
        finally:
            await client.aclose()

    with endpoint_or_embedded(model, base_url, api_key_env) as (endpoint, _):
        return run_coro(go(endpoint))


def label_stage(summary: dict[str, Any], result: MapResult[Any]) -> dict[str, Any]:
    """A labelling run (its ``summary.json`` and the run's result) as ``exitcodes.stage_exit`` reads
    it, with ``unparsed`` when every reply that was no refusal or filter gave no label: how ``cresowlve
    errors label`` and the 04 report exit."""
    from cresowlve_core.exitcodes import stage_record

    answered = summary["n_done"] - summary.get("n_refused", 0) - summary.get("n_filtered", 0)
    unparsed = (f"no label parsed: {summary['n_unlabelled']} of {answered} replies unlabelled"
                if answered and summary.get("n_unlabelled") == answered else None)
    if not unparsed and (cut := summary.get("n_cut_off")):
        unparsed = (f"{cut} of {answered} replies cut off at the token limit before their category (no label); "
                    "a larger --max-tokens labels them in a new --out-dir")
    return stage_record({**summary, "top_error": result.top_error()}, "wrong answers", unparsed=unparsed)
