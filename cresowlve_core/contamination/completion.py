"""The completion test (beyond the paper): can the model continue a question word for word?

Each question is cut at a seeded word position into a prefix and a suffix; a question with fewer
than ``min_words`` words, or a cut with no word on one side, is reported as too short. The model continues the prefix in *guided*
mode (told the text is a db.chgk.info question) and in *general* mode (just "continue"). The
continuation is scored against the true suffix by ROUGE-L F1 on words and by an exact match of the
first ``k`` words. A base-model endpoint (provider profile ``base_model``: the embedded Gemma 3
270M) is not asked in words: it gets the ``*_base`` prompts over ``/completions`` and simply
continues the text, after a one-line db.chgk.info header (guided) or with none (general), up to
the first blank line. The memorisation signal is a difference in differences: the per-item gain
guided − general on the target set minus the same on the ``wrong_both`` control, matched on
difficulty (:mod:`~cresowlve_core.contamination.verdict`), so how predictable a set's questions are
cancels out; an item with a continuation refused or filtered (withheld), or cut off at the token
limit before any text (cut off), has no gain. Both modes are
one ``map_with_resume`` run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.contamination.itemstats import cut_off_mask, no_answer_mask
from cresowlve_core.contamination.rouge import prefix_match, rouge_l, words
from cresowlve_core.llm.base_model import completion_params, user_message
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import NOT_AN_ANSWER, Endpoint
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime import (
    ClientOptions,
    Manifest,
    MapResult,
    RunDir,
    map_with_resume,
    new_manifest,
    record_adaptations,
)
from cresowlve_core.runtime.outcomes import is_withheld, outcome_counts, outcome_fields, served_models
from cresowlve_core.runtime.step import Step, Variant
from cresowlve_core.stats import bootstrap_means, interval_from_replicates, stable_seed

MODES = ("guided", "general")
PROMPTS = {"guided": "contamination_complete_guided", "general": "contamination_complete_general"}
#: a base model continues the text itself (``llm/base_model.py``)
BASE_PROMPTS = {mode: f"{name}_base" for mode, name in PROMPTS.items()}
COMPLETIONS = "completions.jsonl"
MIN_WORDS = 8
PREFIX_K = 5
MAX_PARSE_CHARS = 8_000


@dataclass(frozen=True)
class Cut:
    prefix: str
    suffix: str
    position: int  # number of words in the prefix


def cut_question(question: str, seed: int, item_id: str, min_words: int = MIN_WORDS) -> Cut | None:
    """Cut at a seeded word position between 30% and 70% of the words (whitespace-separated,
    so punctuation stays with its word); None when the question has fewer than ``min_words``, or
    when the cut leaves one side without a word ROUGE-L compares (only punctuation or symbols):
    such a suffix scores every continuation 0, a measurement not taken."""
    toks = question.split()
    if len(toks) < min_words:
        return None
    lo, hi = max(1, int(np.ceil(0.3 * len(toks)))), max(1, int(np.floor(0.7 * len(toks))))
    rng = stable_seed(seed, "cut", item_id)
    pos = int(rng.integers(lo, hi + 1))
    cut = Cut(" ".join(toks[:pos]), " ".join(toks[pos:]), pos)
    return cut if words(cut.prefix) and words(cut.suffix) else None


@dataclass(frozen=True)
class CompletionUnit:
    set: str
    lang: str
    id: str
    mode: str
    cut: Cut

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.lang, self.id, self.mode)


def parse_continuation(text: str | None, prefix: str) -> str | None:
    """The continuation: code fences, quotes and a repeated prefix removed; None if empty."""
    if not text:
        return None
    t = text[:MAX_PARSE_CHARS].strip()
    t = re.sub(r"^```\w*\s*|\s*```$", "", t).strip().strip("\"“”«»").strip()
    t = re.sub(r"^(?:continuation|продолжение)\s*[:：]\s*", "", t, flags=re.I)
    pw = words(prefix)
    tw = words(t)
    if pw and tw[:len(pw)] == pw:  # the model repeated the beginning: drop that many words
        m = list(re.finditer(r"\w+", t))
        t = t[m[len(pw) - 1].end():].lstrip(" ,.;:—-")
    t = t.strip()
    return t or None


#: the continuation call: the chat instruction per mode, or the bare text for a base model to continue
COMPLETE: Step[CompletionUnit] = Step(
    "contamination_completion",
    chat=Variant(lambda u: PROMPTS[u.mode], lambda p, u: user_message(p.render(prefix=u.cut.prefix)),
                 parse_continuation, prompts=tuple(PROMPTS.values())),
    fewshot=Variant(lambda u: BASE_PROMPTS[u.mode],
                    lambda p, u: user_message(p.render(prefix=u.cut.prefix), base_model=True),
                    parse_continuation, gen=completion_params, prompts=tuple(BASE_PROMPTS.values())))


def completion_messages(unit: CompletionUnit, base_model: bool = False) -> tuple[list[dict[str, str]], str]:
    """The request for one unit and its prompt tag; a base model's text ends at the prefix's last word."""
    variant = COMPLETE.fewshot if base_model and COMPLETE.fewshot else COMPLETE.chat
    prompt: Prompt = load_prompt(variant.prompt_name(unit))
    return variant.messages(prompt, unit), prompt.tag


def completion_manifest(endpoint: Endpoint, options: ClientOptions, n_units: int, k: int = PREFIX_K,
                        limit: int | None = None) -> Manifest:
    """The manifest of the completion test's run by ``endpoint`` (its client's); ``limit``: the items
    per set its configuration was limited to (a smaller one is refused on resume)."""
    step = COMPLETE.on(endpoint, options)
    return new_manifest(
        "contamination_completion", model=endpoint.model, base_url=endpoint.base_url,
        api_key_env=endpoint.api_key_env, n_items=n_units, limit=limit, prompts=step.tags(), seed=options.seed,
        temperature=options.temperature, max_tokens=step.max_tokens, options=options.model_dump(),
        sent=step.sent(endpoint), identity={"prefix_k": k, "min_words": MIN_WORDS})


async def acomplete(units: Sequence[CompletionUnit], run: RunDir, client: LLMClient, options: ClientOptions, *,
                    k: int = PREFIX_K, progress: bool = True, limit: int | None = None) -> MapResult[CompletionUnit]:
    """Ask for every continuation (both modes) into ``run/completions.jsonl`` and score it (``limit``:
    :func:`completion_manifest`'s)."""
    step = COMPLETE.on(client.endpoint, options)
    manifest = run.begin(completion_manifest(client.endpoint, options, len(units), k, limit))

    async def call(unit: CompletionUnit, previous: dict[str, Any] | None) -> dict[str, Any]:
        req = step.request(unit)
        c = await client.complete(req.messages, req.params, prompt_version=req.tag)
        # a refused or filtered continuation continues nothing: ROUGE-L 0, no prefix match (the table's);
        # the statistics leave it out (guided_vs_general, verdict): a withheld continuation is no answer
        cont = None if is_withheld(c) else step.parse(c.text, unit.cut.prefix)
        return {"key": list(unit.key), "status": "ok", **outcome_fields(c), "set": unit.set, "lang": unit.lang,
                "id": unit.id,
                "mode": unit.mode, "cut": unit.cut.position, "suffix": unit.cut.suffix, "continuation": cont,
                "rouge_l": rouge_l(cont or "", unit.cut.suffix), "prefix_match": prefix_match(cont or "", unit.cut.suffix, k),
                "raw": c.text[:4000], "usage": c.usage.model_dump(), "cost": c.cost}

    result = await map_with_resume(run, COMPLETIONS, units, key=lambda u: u.key, call=call,
                                   concurrency=options.concurrency, progress=progress, desc="completion")
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary={
        "n_units": result.n_units, "n_done": result.n_done, **outcome_counts(result.records.values()),
        "served_models": served_models(result.records.values()),
        "n_cut_off": sum(r.get("status") == "ok" and r.get("outcome") == "truncated" and r.get("continuation") is None
                         for r in result.records.values()),
        "n_error": result.n_error, "stopped": result.stopped})
    return result


# ------------------------------------------------------------------ statistics


def paired_diff(x: np.ndarray, y: np.ndarray, *, n_boot: int = 1000, seed: int = 0,
                key: str = "") -> dict[str, Any]:
    """Mean of ``x - y`` over pairs with a percentile-bootstrap 95% CI (pairs resampled together).
    Every difference alike (e.g. the same ROUGE-L in both modes on every item) gives no interval, and
    ``note`` says why: a zero-width interval is not an interval (:func:`~cresowlve_core.stats.interval_from_replicates`)."""
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return {"diff": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0, "note": "no pairs"}
    iv = interval_from_replicates(float(d.mean()), bootstrap_means(d, n_boot, stable_seed(seed, "paired", key)),
                                  int(d.size))
    return {"diff": float(d.mean()), "low": iv.low, "high": iv.high, "n": int(d.size), "note": iv.note}


def completion_table(records: pd.DataFrame) -> pd.DataFrame:
    """Per set and mode: n, mean ROUGE-L, share of exact-prefix matches, replies with no continuation
    (``empty``), continuations the model refused or its provider filtered (``withheld``) and replies
    cut off at the token limit before any text (``cut_off``); the last two in n, continuing nothing."""
    if records.empty:
        return pd.DataFrame(columns=["set", "mode", "n", "rouge_l", "prefix_match", "empty", "withheld", "cut_off"])
    withheld = records["outcome"].isin(NOT_AN_ANSWER) if "outcome" in records else False
    cut_off = cut_off_mask(records)
    return (records.assign(_empty=records["continuation"].isna() & ~withheld & ~cut_off, _withheld=withheld,
                           _cut_off=cut_off)
            .groupby(["set", "mode"], sort=True)
            .agg(n=("id", "size"), rouge_l=("rouge_l", "mean"), prefix_match=("prefix_match", "mean"),
                 empty=("_empty", "sum"), withheld=("_withheld", "sum"), cut_off=("_cut_off", "sum"))
            .reset_index())


def guided_vs_general(records: pd.DataFrame, set_name: str, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Paired bootstrap CI of guided − general ROUGE-L over the items of one set, answered in both
    modes (a withheld or cut-off continuation is no answer: its item has no gain)."""
    part = records[records["set"] == set_name]
    part = part[~no_answer_mask(part)]
    wide = part.pivot_table(index="id", columns="mode", values="rouge_l", aggfunc="last")
    if not {"guided", "general"} <= set(wide.columns):
        return {"diff": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}
    wide = wide.dropna()
    return paired_diff(wide["guided"].to_numpy(), wide["general"].to_numpy(), n_boot=n_boot, seed=seed, key=set_name)
