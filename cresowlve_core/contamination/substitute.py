"""Word-level perturbations a base model can make: few-shot lexical substitution.

The paper's perturber (Golchin & Surdeanu) is an instruction-following model asked to rewrite the
question three times with synonyms (the chat prompt ``contamination_perturb``). A base model (the
embedded Gemma 3 270M; provider profile ``base_model``) cannot follow that instruction: it copies
the prompt back. For a base-model perturber the rewording is therefore split into steps it can do:

1. :func:`candidate_words` picks content words of the question deterministically: all-lowercase
   letter words (so capitalised placeholders, names and sentence starts are never touched) of at
   least :data:`MIN_LETTERS` letters, not a stop word, each distinct word once, in a seeded order;
2. for each word in turn the model continues a few-shot synonym dictionary
   (``contamination_synonym_fewshot_<lang>``, ``word —`` as the open slot) over ``/completions``;
3. :func:`pick_synonym` takes the first item of the continuation's first line that is one word in
   the word's script, differs from the word and does not share its stem (:func:`synonym_problem`);
4. once three words have a synonym (or :data:`MAX_WORDS` were asked), :func:`build_rewrites` makes
   rewrite k by substituting the k-th synonym in place: each rewrite differs from the original by
   one word, and the rewrites differ from each other. :func:`~.perturb.rejections` still applies.

Every word asked is recorded with the raw continuation, so a reader sees what the model did.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cresowlve_core.failures import InputError
from cresowlve_core.llm.base_model import completion_params, first_line, user_message
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.types import GenParams, summed_cost, summed_usage
from cresowlve_core.prompts import Prompt, load_prompt
from cresowlve_core.runtime.outcomes import is_withheld, outcome_fields
from cresowlve_core.stats import stable_seed

PROTOCOL = "lexical-substitution"
PROMPTS = {"en": "contamination_synonym_fewshot_en", "ru": "contamination_synonym_fewshot_ru"}
N_REWRITES = 3
MAX_WORDS = 8  # words asked per question at most (the calls stop once three have a synonym)
MIN_LETTERS = 4
SYNONYM_MAX_TOKENS = 12  # one dictionary line: a word or two (Russian words take several tokens)
STOP = ["\n"]  # one dictionary entry per line: the continuation ends with its line
STEM_PREFIX = 4  # a candidate sharing this many first letters with the word is a form of it, not a synonym
_WORD = re.compile(r"\w+(?:[-‐‑'’]\w+)*")
_LETTER_WORD = re.compile(r"[^\W\d_]+(?:[-‐‑'’][^\W\d_]+)*")
_SPLIT = re.compile(r"[,;/|]")
_TRIM = "\"'`«»“”„‟‹›‘’‚‛.!?…:()[]*_ \t"
SYNONYM_REJECTIONS = ("empty", "not_one_word", "same_word", "same_stem", "other_script")

STOP_WORDS = frozenset("""
about above after again against also although among another because been before being below
between both could does doing down during each either every from further have having here hers
herself himself into itself just more most much must neither none nobody nothing once only other
ought ours ourselves over same shall should some such than that their theirs them themselves then
there these they this those through under until upon very were what when where which while whom
whose will with within without would your yours yourself yourselves
name named write answer question
более будет будто была были было быть вами ваша ваше ваши весь всего всех всём вместо вокруг
впрочем всегда даже другой другие если есть ещё здесь иногда какая какие какое какой
когда кого которая которого которое которой котором которую которые который куда либо между меня
можно может надо нами него нему него ней нельзя нибудь никогда ними ничего однако опять очень
перед после потом потому почти при про раз разве сам сама сами само свою свой своя себе себя
сейчас совсем так также такой там тебя тем теперь тогда того тоже той только том тот
тут уже хоть хотя чего чем через чтоб чтобы чуть этим этого этой этом эту этот
назовите напишите ответ вопрос
""".split())


@dataclass(frozen=True)
class Candidate:
    """One word of the question that may be swapped: its text and where it stands."""

    word: str
    start: int
    end: int


def candidate_words(question: str, seed: int, lang: str, item_id: str, limit: int = MAX_WORDS) -> list[Candidate]:
    """Up to ``limit`` swappable words of ``question`` (first occurrence of each distinct word), in
    an order seeded by ``seed``, ``lang`` and ``item_id``: all-lowercase letter words of at least
    :data:`MIN_LETTERS` letters that are not stop words."""
    seen: set[str] = set()
    found: list[Candidate] = []
    for m in _WORD.finditer(question):
        w = m.group(0)
        letters = sum(ch.isalpha() for ch in w)
        if (not _LETTER_WORD.fullmatch(w) or w != w.lower() or letters < MIN_LETTERS
                or w.casefold() in STOP_WORDS or w.casefold() in seen):
            continue
        seen.add(w.casefold())
        found.append(Candidate(w, m.start(), m.end()))
    order = stable_seed(seed, "synonym", lang, item_id).permutation(len(found)).tolist()
    return [found[i] for i in order][:limit]


def synonym_options(text: str | None) -> list[str]:
    """The items of a continuation's first line (``огромный, крупный`` → two), trimmed of quotes
    and end punctuation."""
    return [s.strip(_TRIM) for s in _SPLIT.split(first_line(text))]


def _script(text: str) -> str:
    names = {unicodedata.name(ch, "?").split(" ")[0] for ch in text if ch.isalpha()}
    return names.pop() if len(names) == 1 else "MIXED"


def synonym_problem(word: str, synonym: str) -> str | None:
    """Why ``synonym`` cannot replace ``word`` (one of :data:`SYNONYM_REJECTIONS`), or None."""
    if not synonym:
        return "empty"
    if not _LETTER_WORD.fullmatch(synonym):
        return "not_one_word"
    w, s = word.casefold(), synonym.casefold()
    if w == s:
        return "same_word"
    prefix = 0
    for a, b in zip(w, s, strict=False):
        if a != b:
            break
        prefix += 1
    if prefix >= min(STEM_PREFIX, len(w) - 1):
        return "same_stem"
    if _script(synonym) != _script(word):
        return "other_script"
    return None


def pick_synonym(word: str, text: str | None) -> tuple[str | None, list[dict[str, str]]]:
    """The first usable synonym of ``word`` in a continuation (lower-cased, since only lower-case
    words are swapped), and every item passed over with its reason."""
    passed: list[dict[str, str]] = []
    for option in synonym_options(text):
        problem = synonym_problem(word, option)
        if problem is None:
            return option.lower(), passed
        passed.append({"option": option, "kind": problem})
    return None, passed


def build_rewrites(question: str, swaps: Sequence[tuple[Candidate, str]]) -> list[str] | None:
    """Rewrite k: the question with the k-th word replaced by its synonym, in place (None: fewer
    than three swaps)."""
    if len(swaps) < N_REWRITES:
        return None
    return [question[:c.start] + syn + question[c.end:] for c, syn in swaps[:N_REWRITES]]


def synonym_prompt(lang: str) -> Prompt:
    """The few-shot synonym dictionary for ``lang`` (``en`` or ``ru``)."""
    if lang not in PROMPTS:
        raise InputError(f"no synonym prompt for language {lang!r}; known: {', '.join(PROMPTS)}")
    return load_prompt(PROMPTS[lang])


def synonym_params(params: GenParams) -> GenParams:
    """``/completions`` with a short budget, ending at the end of the dictionary line."""
    p = completion_params(params, max_tokens=SYNONYM_MAX_TOKENS)
    return dataclasses.replace(p, extra={**p.extra, "stop": list(STOP)})


async def substitute(question: str, lang: str, item_id: str, client: LLMClient, params: GenParams,
                     seed: int) -> dict[str, Any]:
    """Ask the synonyms of one question's words (one call per word, stopping at three usable) and
    build its rewrites; returns the record fields: ``perturbations`` (None: too few synonyms),
    ``synonyms`` (every call: word, position, raw continuation, synonym or None, items passed
    over), ``too_few`` (a reason, or None), summed ``usage`` and ``cost``."""
    prompt = synonym_prompt(lang)
    calls: list[dict[str, Any]] = []
    swaps: list[tuple[Candidate, str]] = []
    completions = []
    candidates = candidate_words(question, seed, lang, item_id)
    for cand in candidates:
        if len(swaps) == N_REWRITES:
            break
        c = await client.complete(user_message(prompt.render(word=cand.word), base_model=True), params,
                                  prompt_version=prompt.tag)
        # a refused or filtered synonym call gives no synonym (the next word is asked instead)
        synonym, passed = (None, []) if is_withheld(c) else pick_synonym(cand.word, c.text)
        calls.append({"word": cand.word, "start": cand.start, **outcome_fields(c), "raw": c.text[:500],
                      "synonym": synonym, "passed_over": passed})
        if synonym is not None:
            swaps.append((cand, synonym))
        completions.append(c)
    too_few = None
    if len(swaps) < N_REWRITES:
        too_few = (f"{len(swaps)} usable synonym(s) from {len(calls)} word(s) asked "
                   f"({len(candidates)} swappable word(s) in the question); {N_REWRITES} needed")
    return {"perturbations": build_rewrites(question, swaps), "synonyms": calls, "too_few": too_few,
            "usage": summed_usage([c.usage for c in completions]).model_dump(),
            "cost": summed_cost([c.cost for c in completions])}


__all__ = ["MAX_WORDS", "PROMPTS", "PROTOCOL", "Candidate", "build_rewrites", "candidate_words", "pick_synonym",
           "substitute", "synonym_options", "synonym_params", "synonym_problem", "synonym_prompt"]
