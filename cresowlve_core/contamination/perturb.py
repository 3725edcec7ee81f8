"""Three word-level perturbations of each question (one ``map_with_resume`` run).

The perturber rewrites the question three times with synonym swaps. :func:`parse_perturbations`
reads the three numbered lines; :func:`rejections` says, per rewrite, why a set cannot be used in
a quiz. A rewrite is rejected when it

* equals the original (``same_as_original``) or an earlier rewrite (``duplicate``), compared on
  casefolded ``\\w+`` words;
* loses a capitalised placeholder of the original (``placeholder_lost``);
* changes the punctuation sequence (``punctuation_changed``): the ordered punctuation marks after
  NFKC, with every quote style (« » “ ” „ " ' …) one class and every dash (- – — …) one class;
  hyphens and apostrophes inside a word (``что-то``, ``don't``) belong to the word;
* changes the length (``length_changed``): its word count differs from the original's by more
  than ``max(3, ⌊0.2·n⌋)`` words (n: the original's word count; words are ``\\w+`` runs joined by
  inner hyphens/apostrophes), i.e. a rewrite rather than a synonym swap.

A reply without three numbered rewrites is rejected as a whole (``unparsed``). Such an item is
reported with every reason, never silently dropped.

Two protocols, chosen by the perturber's provider profile: an instruction-following model gets the
paper's chat instruction (:data:`CHAT_PROTOCOL`, prompt ``contamination_perturb``); a base model
(profile ``base_model``, the embedded Gemma 3 270M) cannot follow it and gets few-shot lexical
substitution instead (:mod:`~cresowlve_core.contamination.substitute`), one call per word, each
recorded; a question with fewer than three usable synonyms is rejected as ``too_few_synonyms``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cresowlve_core.contamination import substitute as sub
from cresowlve_core.contamination.rouge import words
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.prompts import Prompt
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

PROMPT = "contamination_perturb"
CHAT_PROTOCOL = "chat-rewrite"
PERTURBATIONS = "perturbations.jsonl"
MAX_PARSE_CHARS = 20_000
# possessive quantifiers (*+): adjacent \s* runs backtracked into each other (cubic on a long blank line)
_NUMBERED = re.compile(r"^\s*+[*#>]*+\s*+(?:option|rewrite|вариант)?\s*+([1-3])\s*+[.):]\s*+[*]*+\s*+(.*)", re.I)
_PLACEHOLDER_LETTERS = frozenset("XYZNХ")
QUOTES = frozenset("\"'`«»“”„‟‹›‘’‚‛")
DASHES = frozenset("-‐‑‒–—―−")
_INNER_JOINER = re.compile(r"(?<=\w)[-‐‑'’](?=\w)")  # что-то, don't: part of the word
_STRUCT_WORD = re.compile(r"\w+(?:[-‐‑'’]\w+)*")
_PUNCT = re.compile(r"[^\w\s]")
LENGTH_TOLERANCE_WORDS = 3
LENGTH_TOLERANCE_SHARE = 0.2
REJECTION_KINDS = ("unparsed", "too_few_synonyms", "same_as_original", "duplicate", "placeholder_lost", "punctuation_changed",
                   "length_changed", "refused", "filtered", "cut_off")


@dataclass(frozen=True)
class QuizItem:
    """One question that goes into the quizzes: which set and configuration it belongs to."""

    lang: str
    id: str
    question: str


@dataclass(frozen=True)
class Rejection:
    """Why one rewrite (1–3; None: the whole reply) cannot be a quiz option."""

    rewrite: int | None
    kind: str  # one of REJECTION_KINDS
    detail: str

    def __str__(self) -> str:
        return f"rewrite {self.rewrite}: {self.detail}" if self.rewrite else self.detail


def _unwrap(rewrite: str, original: str | None) -> str:
    """Drop one pair of quotes wrapping the whole rewrite, unless the original itself starts with a quote."""
    s = rewrite.strip()
    if original is not None and original.strip()[:1] in QUOTES:
        return s
    if len(s) >= 2 and s[0] in QUOTES and s[-1] in QUOTES:
        return s[1:-1].strip()
    return s


def parse_perturbations(text: str | None, original: str | None = None) -> list[str] | None:
    """The three numbered rewrites (``1.``/``2.``/``3.``, also ``1)`` or ``Option 1:``), with
    continuation lines joined and a quote pair wrapping a whole rewrite removed (kept when
    ``original`` starts with a quote); None unless all three are present and non-empty."""
    if not text:
        return None
    found: dict[int, list[str]] = {}
    current: int | None = None
    for line in text[:MAX_PARSE_CHARS].splitlines():
        m = _NUMBERED.match(line)
        if m and int(m.group(1)) not in found:
            current = int(m.group(1))
            found[current] = [m.group(2).rstrip()]
        elif current is not None and line.strip():
            found[current].append(line.strip())
        elif not line.strip():
            current = None if current == 3 else current
    out = [_unwrap(" ".join(found.get(i, [])), original) for i in (1, 2, 3)]
    return out if all(out) else None


def placeholders(question: str) -> list[str]:
    """Capitalised placeholders of a ChGK question: all-caps words of 2+ letters, and X/Y/Z/N."""
    toks = re.findall(r"\w+", question)
    return sorted({t for t in toks if t.isalpha() and t.isupper() and (len(t) >= 2 or t in _PLACEHOLDER_LETTERS)})


def punctuation(text: str) -> str:
    """The ordered punctuation marks of ``text`` (NFKC), quotes mapped to ``"`` and dashes to ``—``;
    hyphens and apostrophes inside a word are not punctuation."""
    t = _INNER_JOINER.sub("", unicodedata.normalize("NFKC", text))
    return "".join('"' if c in QUOTES else "—" if c in DASHES else c for c in _PUNCT.findall(t))


def word_count(text: str) -> int:
    """Words for the structure check: ``\\w+`` runs, joined by inner hyphens or apostrophes."""
    return len(_STRUCT_WORD.findall(unicodedata.normalize("NFKC", text)))


def length_tolerance(n_words: int) -> int:
    """How many words a rewrite of an ``n_words``-word question may add or drop: max(3, ⌊0.2·n⌋)."""
    return max(LENGTH_TOLERANCE_WORDS, int(LENGTH_TOLERANCE_SHARE * n_words))


def rewrite_rejections(original: str, rewrite: str, k: int) -> list[Rejection]:
    """Why rewrite ``k`` alone breaks the rules (difference from the original, placeholders,
    punctuation, length); duplicates among rewrites are checked by :func:`rejections`."""
    out = []
    if words(rewrite) == words(original):
        out.append(Rejection(k, "same_as_original", "equals the original"))
    toks = set(re.findall(r"\w+", rewrite))
    lost = [ph for ph in placeholders(original) if ph not in toks]
    if lost:
        out.append(Rejection(k, "placeholder_lost", f"placeholder {', '.join(lost)} lost"))
    po, pr = punctuation(original), punctuation(rewrite)
    if po != pr:
        out.append(Rejection(k, "punctuation_changed", f"punctuation changed ({po!r} → {pr!r})"))
    n, m = word_count(original), word_count(rewrite)
    if abs(m - n) > length_tolerance(n):
        out.append(Rejection(k, "length_changed",
                             f"length changed ({n} → {m} words, tolerance ±{length_tolerance(n)})"))
    return out


def rejections(original: str, perturbations: Sequence[str] | None) -> list[Rejection]:
    """Every reason, per rewrite, why these perturbations cannot make a quiz (empty: they can)."""
    if perturbations is None:
        return [Rejection(None, "unparsed", "no three numbered rewrites in the reply")]
    out: list[Rejection] = []
    norm = [words(p) for p in perturbations]
    for k, p in enumerate(perturbations, start=1):
        out.extend(rewrite_rejections(original, p, k))
        same = [j for j in range(1, k) if norm[j - 1] == norm[k - 1]]
        if same:
            out.append(Rejection(k, "duplicate", f"same as rewrite {same[0]}"))
    return sorted(out, key=lambda r: (r.rewrite or 0, REJECTION_KINDS.index(r.kind)))


def reply_rejections(original: str, perturbations: Sequence[str] | None, cut_off: bool) -> list[Rejection]:
    """:func:`rejections` of a perturber's reply; ``cut_off``: the reply ended at the token limit, so
    a last rewrite that breaks the rules is one cut short (``cut_off``, the budget's doing), not a
    rewrite in another form, and a reply without three rewrites stopped before them."""
    if perturbations is None and cut_off:
        return [Rejection(None, "cut_off", "the perturber's reply was cut off at the token limit before three rewrites")]
    out = rejections(original, perturbations)
    last = len(perturbations or ())
    if cut_off and any(r.rewrite == last for r in out):
        out = [r for r in out if r.rewrite != last]
        out.append(Rejection(last, "cut_off", "cut off at the token limit"))
    return out


def problems(original: str, perturbations: Sequence[str] | None) -> list[str]:
    """The rejections as readable lines (``rewrite 2: punctuation changed (…)``); empty: usable."""
    return [str(r) for r in rejections(original, perturbations)]


def _rewrite_messages(prompt: Prompt, unit: QuizItem) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt.render(question=unit.question.strip())}]


def _per_word(prompt: Prompt, unit: QuizItem) -> list[dict[str, str]]:
    raise TypeError("lexical substitution asks one word at a time (contamination/substitute.py)")


#: the perturber's call: the paper's chat instruction, or few-shot lexical substitution for a base
#: model (one call per word, :func:`~cresowlve_core.contamination.substitute.substitute`)
PERTURB = Step(
    "contamination_perturb",
    chat=Variant(PROMPT, _rewrite_messages, parse_perturbations, protocol=CHAT_PROTOCOL),
    fewshot=Variant(lambda u: sub.synonym_prompt(u.lang).name, _per_word, sub.pick_synonym, gen=sub.synonym_params,
                    max_tokens=sub.SYNONYM_MAX_TOKENS, protocol=sub.PROTOCOL, identity={"protocol": sub.PROTOCOL}))


def perturb_messages(unit: QuizItem) -> tuple[list[dict[str, str]], str]:
    call = PERTURB.on(None)
    return call.messages(unit), call.prompt(unit).tag


def protocol_of(endpoint: Any) -> str:
    """The perturbation protocol for a perturber endpoint: lexical substitution for a base model."""
    return str(PERTURB.variant(endpoint).protocol)


def perturber_served(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The models the provider said answered the perturber's calls: a rewrite record's one call, or each
    synonym call of a lexical-substitution record (the record itself names none)."""
    return served_models(call for r in records if r.get("status") == "ok"
                         for call in [r, *({"status": "ok", **s} for s in r.get("synonyms") or [])])


def perturb_manifest(units: Sequence[QuizItem], endpoint: Endpoint, options: ClientOptions) -> Manifest:
    """The manifest of the perturbation run of ``units`` by ``endpoint`` (its client's)."""
    step = PERTURB.on(endpoint, options)
    return new_manifest(
        "contamination_perturb", model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
        n_items=len(units), prompts=step.tags(units), seed=options.seed, temperature=options.temperature,
        max_tokens=step.max_tokens, options=options.model_dump(), sent=step.sent(endpoint),
        identity=dict(step.variant.identity))


async def aperturb(units: Sequence[QuizItem], run: RunDir, client: LLMClient, options: ClientOptions, *,
                   progress: bool = True) -> MapResult[QuizItem]:
    """Perturb every question into ``run/perturbations.jsonl`` (resumable), by the protocol the
    perturber can follow (:func:`protocol_of`)."""
    step = PERTURB.on(client.endpoint, options)
    protocol = str(step.variant.protocol)
    manifest = run.begin(perturb_manifest(units, client.endpoint, options))
    tags = step.tags(units)
    params = step.params

    async def call(unit: QuizItem, previous: dict[str, Any] | None) -> dict[str, Any]:
        if protocol == sub.PROTOCOL:
            s = await sub.substitute(unit.question, unit.lang, unit.id, client, params, options.seed)
            parsed = s["perturbations"]
            rej = ([Rejection(None, "too_few_synonyms", s["too_few"])] if parsed is None
                   else rejections(unit.question, parsed))
            return {"key": [unit.lang, unit.id], "status": "ok", "protocol": protocol, "perturbations": parsed,
                    "problems": [str(r) for r in rej], "rejections": [asdict(r) for r in rej],
                    "synonyms": s["synonyms"], "usage": s["usage"], "cost": s["cost"]}
        req = step.request(unit)
        c = await client.complete(req.messages, req.params, prompt_version=req.tag)
        if is_withheld(c):  # refused or filtered: no rewrites read from it, the item unusable with that reason
            parsed, rej = None, [Rejection(None, c.outcome, f"the perturber's reply was {c.outcome}")]
        else:
            parsed = step.parse(c.text, unit.question)
            # stopped at the token limit before three whole rewrites: the budget's doing, not a reply in another form
            rej = reply_rejections(unit.question, parsed, c.truncated)
        return {"key": [unit.lang, unit.id], "status": "ok", **outcome_fields(c), "protocol": protocol,
                "perturbations": parsed,
                "problems": [str(r) for r in rej], "rejections": [asdict(r) for r in rej], "raw": c.text,
                "usage": c.usage.model_dump(), "cost": c.cost}

    result = await map_with_resume(run, PERTURBATIONS, units, key=lambda u: (u.lang, u.id), call=call,
                                   concurrency=options.concurrency, progress=progress, desc="perturbing")
    recs = list(result.records.values())
    run.finish(record_adaptations(manifest, client), stopped=result.stopped, summary={
        "protocol": protocol, "prompts": tags, "n_units": result.n_units, "n_done": result.n_done,
        **outcome_counts(recs), "served_models": perturber_served(recs),
        "n_error": result.n_error, "n_usable": sum(r.get("status") == "ok" and not r.get("problems") for r in recs),
        "n_cut_off": sum(r.get("status") == "ok" and any(x.get("kind") == "cut_off" for x in r.get("rejections") or [])
                         for r in recs),
        "n_model_calls": sum(len(r.get("synonyms") or []) if protocol == sub.PROTOCOL else 1
                             for r in recs if r.get("status") == "ok"),
        "stopped": result.stopped})
    return result
