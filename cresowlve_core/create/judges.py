"""The two LLM judges of CREATE: specificity and factuality, one call per path, verdicts per triple.

**Specificity** (prompt ``create_specificity``, the paper's Prompt D.1): for each triple
``(s, p, o)`` the judge estimates the size of the larger of ``{x : (x, p, o)}`` and
``{y : (s, p, y)}``. The size maps to a score (:func:`specificity_from_size`):
``<= 10 -> 5``, ``11-99 -> 4``, ``100-499 -> 3``, ``500-4999 -> 2``, larger ``-> 1``, and an
unparseable judgment ``-> 0``.

**Path strength** (:func:`path_strength`): the minimum score over all triples *except the last*
(the query's constraint triple, identical across paths) — the released code's rule. The paper's
eq. 7 takes the minimum over all triples; ``scope="paper"`` does that. A one-triple path has no
strength under the reference rule: ``None`` is returned and callers flag it.

**Factuality** (prompt ``create_factuality``, the paper's Prompt D.2): each triple is
"hallucinated" (0) or "not hallucinated" (1); a path is factual iff the mean is
``>= factuality_threshold`` (default 1.0: every triple must hold).

**A base-model judge** (provider profile ``base_model``, the embedded Gemma 3 270M; see
:mod:`cresowlve_core.llm.base_model`) copies the paper's chat prompts back. It gets few-shot
completion prompts instead (``create_specificity_fewshot``, ``create_factuality_fewshot``), one
call per triple over ``/v1/completions`` with a short budget (:data:`FEWSHOT_JUDGE_MAX_TOKENS`):
the continuation's first line is the class size (:func:`parse_size_line`) or the yes/no verdict
(:func:`parse_holds_line`). A line that does not read as one stays **unscored** (size or verdict
``None``, flagged ``unscored_<k>_of_<n>``, counted in the score summary), never guessed; for the
utility an unscored triple counts as score 0 / not factual, as an unparseable chat judgment does.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from cresowlve_core.create.paths import MAX_PARSE_CHARS, Path, Triple, _drop_trailing_commas, _loads
from cresowlve_core.llm.base_model import completion_params, first_line, one_line, user_message
from cresowlve_core.llm.types import NOT_AN_ANSWER, Completion, GenParams, Outcome, Usage, summed_cost, summed_usage
from cresowlve_core.prompts import load_prompt
from cresowlve_core.runtime.outcomes import call_outcome, is_withheld

StrengthScope = Literal["reference", "paper"]

SPECIFICITY_PROMPT = "create_specificity"
FACTUALITY_PROMPT = "create_factuality"
SPECIFICITY_FEWSHOT_PROMPT = "create_specificity_fewshot"
FACTUALITY_FEWSHOT_PROMPT = "create_factuality_fewshot"
#: a base-model judge answers one number or one word per triple: this budget holds it with room
#: to spare, and bounds what a rambling continuation costs
FEWSHOT_JUDGE_MAX_TOKENS = 12
#: the longest triple part shown to a base-model judge (one line; a runaway entity is cut)
MAX_TRIPLE_PART_CHARS = 200


class CompletesChat(Protocol):
    """What the judges and the generator need of a client (``LLMClient`` has it)."""

    async def complete(self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> Completion: ...


# --------------------------------------------------------------------------- scores


def specificity_from_size(size: float | None) -> int:
    """Class size → specificity score 1-5 (paper Appendix D); ``None`` (unparseable) → 0."""
    if size is None:
        return 0
    if size <= 10:
        return 5
    if size < 100:
        return 4
    if size < 500:
        return 3
    if size < 5000:
        return 2
    return 1


def path_strength(specificity: list[int] | list[float], scope: StrengthScope = "reference") -> float | None:
    """Minimum specificity over the path's triples, excluding the last under ``scope="reference"``.

    ``None`` when no triple is left to take a minimum over (a one-triple path in reference scope).
    """
    scores = list(specificity[:-1]) if scope == "reference" else list(specificity)
    if not scores:
        return None
    return float(min(scores))


def factuality_rate(factuality: list[float]) -> float:
    """Fraction of triples judged not hallucinated (0.0 for an empty list)."""
    return float(sum(factuality)) / len(factuality) if factuality else 0.0


def is_factual(factuality: list[float], threshold: float = 1.0) -> bool:
    """A path is factual iff the mean of its per-triple verdicts is ``>= threshold``."""
    return bool(factuality) and factuality_rate(factuality) >= threshold - 1e-12


# --------------------------------------------------------------------------- parsing judge output


def _json_payload(text: str) -> Any:
    """The first JSON/Python-literal value in a judge's text (fences and prose tolerated), or None."""
    if not text:
        return None
    s = re.sub(r"```[a-zA-Z]*", "", text)
    starts = [i for i in (s.find("["), s.find("{")) if i >= 0]
    if not starts:
        return None
    body = _drop_trailing_commas(s[min(starts) :])
    end = max(body.rfind("]"), body.rfind("}"))
    if end < 0:
        return None
    try:
        return _loads(body[: end + 1])
    except ValueError:
        return None


#: the superscript digits a power is written with ("10⁶", "2×10⁵"), and their plain digits
_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_FROM_SUPERSCRIPT = str.maketrans(_SUPERSCRIPT_DIGITS, "0123456789")
#: a class size as a judge writes it: digits (thousands commas, decimals allowed), then optionally a
#: power of ten ("1e6", "1.5 x 10^6", "2×10⁵"), a power ("10^6", "10⁶"), a magnitude word
#: ("2 million") or its letter ("10k", "2M", "1.5bn")
_SIZE = (r"(?P<digits>\d[\d,]*(?:\.\d+)?)(?:\s*e\+?(?P<exp>\d+)|\s*\^\s*(?P<power>\d+)"
         rf"|(?P<superscript_power>[{_SUPERSCRIPT_DIGITS}]+)"
         rf"|\s*[x×*]\s*10\s*(?:\^\s*\+?(?P<times_ten>\d+)|(?P<times_ten_superscript>[{_SUPERSCRIPT_DIGITS}]+))"
         r"|\s+(?P<word>thousand|million|billion|trillion)\b|(?P<suffix>k|mn|m|bn|b)(?![a-z]))?")
_SIZE_IN_TEXT = re.compile(_SIZE, re.IGNORECASE)
_JUDGMENT_SIZE = re.compile(r'"?judgment"?\s*:\s*"?' + _SIZE, re.IGNORECASE)
#: each quoted "judgment" key, with the size after it when there is one: a list that does not parse is
#: read key by key, so the word in an explanation ("in my judgment: 5 ...") adds no size
_JUDGMENT_KEY_SIZE = re.compile(r'"judgment"\s*:\s*"?(?:' + _SIZE + ")?", re.IGNORECASE)
_MAGNITUDE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SUFFIX_MAGNITUDE = {"k": 1e3, "m": 1e6, "mn": 1e6, "b": 1e9, "bn": 1e9}
#: what follows a number written as a rating ("7/10", "4 out of 5"): a score on a scale, no class size
_RATING_AFTER = re.compile(r"\s*(?:/|out\s+of\b)\s*\d", re.IGNORECASE)
#: the minus signs a judge writes before a number: ASCII hyphen-minus and U+2212
_MINUS_SIGNS = "-−"


def _signed_negative(m: re.Match[str]) -> bool:
    """Whether a minus sign is written just before the digits of ``m`` ("-50", "−50"): a
    negative number. A hyphen after a word or a number ("10-20", "COVID-19") is no sign."""
    start = m.start()
    return start > 0 and m.string[start - 1] in _MINUS_SIGNS and (start == 1 or not m.string[start - 2].isalnum())


def _size_of(m: re.Match[str] | None) -> float | None:
    """The class size a :data:`_SIZE` match writes, with its magnitude; None when it is no count
    (NaN, infinity, negative: :func:`_count`, :func:`_signed_negative`), or a rating ("7/10":
    :data:`_RATING_AFTER`)."""
    if m is None or _RATING_AFTER.match(m.string, m.end()) or _signed_negative(m):
        return None
    try:
        base = float(m["digits"].replace(",", ""))
        times_ten = m["exp"] or m["times_ten"] or (m["times_ten_superscript"] or "").translate(_FROM_SUPERSCRIPT)
        if times_ten:
            return _count(base * 10.0 ** int(times_ten))
        power = m["power"] or (m["superscript_power"] or "").translate(_FROM_SUPERSCRIPT)
        if power:
            return _count(float(base ** int(power)))
    except (ValueError, OverflowError):
        return None
    if m["suffix"]:  # "10k", "2M", "1.5bn"
        return _count(base * _SUFFIX_MAGNITUDE[m["suffix"].lower()])
    return _count(base * _MAGNITUDE[m["word"].lower()] if m["word"] else base)


def _count(number: float) -> float | None:
    """``number`` when it can be a class size (finite, not negative), else None (unscored)."""
    return number if math.isfinite(number) and number >= 0 else None


def _as_number(value: Any) -> float | None:
    """A judge's class size: a number, or the first size written in a string (:data:`_SIZE`); None
    when there is none, when it is NaN, infinite or negative, when it is a rating ("7/10"), or when
    the string writes more than one size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return _count(float(value))
        except OverflowError:  # an integer beyond any float
            return None
    if isinstance(value, str):
        # two different sizes ("Class A: 5, Class B: 1200", "between 100 and 500") name no one size
        sizes = {_size_of(m) for m in _SIZE_IN_TEXT.finditer(value)}
        return sizes.pop() if len(sizes) == 1 else None
    return None


@dataclass
class TripleVerdicts:
    """One judge's per-triple output for one path."""

    scores: list[float]
    flags: list[str] = field(default_factory=list)
    sizes: list[float | None] | None = None  # specificity only: the estimated class sizes
    verdicts: list[float | None] | None = None  # factuality only: 1 holds, 0 hallucinated, None unscored


def _fit(values: list[Any], n: int, fill: Any, flags: list[str]) -> list[Any]:
    if len(values) != n:
        flags.append(f"length_mismatch_{len(values)}_for_{n}")
    return (values + [fill] * n)[:n]


def parse_specificity(text: str, n_triples: int, *, cut_off: bool = False) -> TripleVerdicts:
    """Judge output (a JSON list of ``{"explanation", "judgment"}``) → scores 0-5 per triple.

    ``cut_off``: the answer ended at the token limit, so a size running to its very end may have
    lost digits ("3,0" of "3,000") and is left unscored.
    """
    flags: list[str] = []
    text = (text or "")[:MAX_PARSE_CHARS]  # a judge's list is far shorter; bounds the time on the loop
    obj = _json_payload(text)
    items: list[Any] | None = None
    if isinstance(obj, dict):
        for key in ("judgments", "triples", "results"):
            if isinstance(obj.get(key), list):
                items = obj[key]
                break
        if items is None and "judgment" in obj:
            items = [obj]
    elif isinstance(obj, list):
        items = obj
    sizes: list[float | None]
    if items is not None:
        sizes = [_as_number(it.get("judgment")) if isinstance(it, dict) else _as_number(it) for it in items]
    else:
        found = list(_JUDGMENT_KEY_SIZE.finditer(text)) or list(_JUDGMENT_SIZE.finditer(text))
        end = len(text.rstrip())
        sizes = [None if m["digits"] is None or cut_off and m.end() >= end else _size_of(m) for m in found]
        flags.append("regex_fallback" if found else "unparseable")
    sizes = _fit(sizes, n_triples, None, flags)
    if any(s is None for s in sizes) and "unparseable" not in flags:
        flags.append("some_unparseable")
    return TripleVerdicts([float(specificity_from_size(s)) for s in sizes], flags, sizes)


_VERDICT = re.compile(r"not\s+hallucinated|hallucinated", re.IGNORECASE)
#: the factuality answer's list key, as the prompt's schema writes it: ``"judgments":``
_JUDGMENTS_KEY = re.compile(r'"judgments?"\s*:', re.IGNORECASE)


def _verdict(value: Any) -> float | None:
    """1.0 (holds) / 0.0 (hallucinated) for one triple's verdict, or None (unscored). A bare
    true/false or 0/1 says neither: the question is "hallucinated or not", so ``true`` may mean
    either; only ``{"hallucinated": true}`` names what it answers."""
    if isinstance(value, dict):  # one object per triple, as the specificity judge answers
        if isinstance(value.get("hallucinated"), bool):
            return 0.0 if value["hallucinated"] else 1.0
        value = value.get("judgment", value.get("verdict"))
    if isinstance(value, str):
        v = value.strip().lower().replace("_", " ").replace("-", " ")
        if v.startswith("not hallucinated") or v in {"factual", "correct"}:
            return 1.0
        if v.startswith("hallucinated") or v == "incorrect":
            return 0.0
    return None


def parse_factuality(text: str, n_triples: int) -> TripleVerdicts:
    """Judge output ``{"explanation", "judgments": [...]}`` → 1.0 (holds) / 0.0 per triple.

    An unreadable verdict counts as hallucinated (0.0) and is flagged.
    """
    flags: list[str] = []
    text = (text or "")[:MAX_PARSE_CHARS]  # a judge's list is far shorter; bounds the time on the loop
    obj = _json_payload(text)
    raw: list[Any] | None = None
    if isinstance(obj, dict):
        raw = next((obj[key] for key in ("judgments", "judgment") if isinstance(obj.get(key), list)), None)
    elif isinstance(obj, list):
        raw = obj
    if raw is not None:
        verdicts = [_verdict(v) for v in raw]
    else:  # read after the judgments' key: an explanation before it ("none is hallucinated") holds no verdict
        key = _JUDGMENTS_KEY.search(text)  # the quoted key, not the word in an explanation before it
        tail = text[key.end():] if key else text.split("judgment", 1)[-1]
        verdicts = [_verdict(m.group(0)) for m in _VERDICT.finditer(tail)]
        flags.append("regex_fallback" if verdicts else "unparseable")
    verdicts = _fit(verdicts, n_triples, None, flags)
    if any(v is None for v in verdicts) and "unparseable" not in flags:
        flags.append("some_unparseable")
    return TripleVerdicts([0.0 if v is None else v for v in verdicts], flags, verdicts=verdicts)


# --------------------------------------------------------------------------- base-model judges


def triple_for_prompt(triple: Triple) -> str:
    """How a triple is shown to a base-model judge: ``(subject, relation, object)`` on one line
    (line breaks collapsed, parts capped), so a triple cannot write an example of its own."""
    parts = [one_line(str(x), MAX_TRIPLE_PART_CHARS) for x in triple]
    return "(" + ", ".join(parts) + ")"


def parse_size_line(text: str | None) -> float | None:
    """A base-model specificity continuation: the number on its first line (``"3000"``,
    ``" about 3,000 people"``), or None (unscored) when that line holds none."""
    return _as_number(first_line(text))


#: the words after "no" that make it a phrase of not knowing ("no idea", "no clue"), no verdict
_UNKNOWING_AFTER_NO = frozenset({"idea", "clue", "answer", "information", "comment"})


def parse_holds_line(text: str | None) -> float | None:
    """A base-model factuality continuation: the first word of its first line, ``yes`` → 1.0
    (not hallucinated), ``no`` → 0.0 (hallucinated), anything else None (unscored); so is a
    ``no`` that opens a phrase of not knowing (:data:`_UNKNOWING_AFTER_NO`: "no idea")."""
    words = re.findall(r"[a-z]+", first_line(text).lower())
    if not words or words[0] == "no" and words[1:2] and words[1] in _UNKNOWING_AFTER_NO:
        return None
    return 1.0 if words[0] == "yes" else 0.0 if words[0] == "no" else None


def _unscored_flags(values: list[float | None], completions: list[Completion]) -> list[str]:
    """``unscored_<k>_of_<n>``: ``k`` triples whose answer was read but held no size or verdict
    (a refused or filtered triple was never read: its outcome flags it)."""
    missing = sum(v is None and not is_withheld(c) for v, c in zip(values, completions, strict=True))
    return [f"unscored_{missing}_of_{len(values)}"] if missing else []


def fewshot_judge_params(params: GenParams) -> GenParams:
    """``params`` for a base-model judge call: ``/completions``, the first blank line as the stop,
    :data:`FEWSHOT_JUDGE_MAX_TOKENS` tokens."""
    return completion_params(params, max_tokens=FEWSHOT_JUDGE_MAX_TOKENS)


# --------------------------------------------------------------------------- calling the judges


def path_for_prompt(path: Path) -> str:
    """How a path is shown to a judge: a JSON list of ``[subject, relation, object]`` triples."""
    return json.dumps(path, ensure_ascii=False)


def fewshot_messages(prompt_name: str, triple: Triple) -> tuple[list[dict[str, str]], str]:
    """The few-shot completion prompt ``prompt_name`` for one triple, ending at its open slot."""
    prompt = load_prompt(prompt_name)
    return user_message(prompt.render(triple=triple_for_prompt(triple)), base_model=True), prompt.tag


def specificity_messages(path: Path) -> tuple[list[dict[str, str]], str]:
    prompt = load_prompt(SPECIFICITY_PROMPT)
    return [{"role": "user", "content": prompt.render(path=path_for_prompt(path))}], prompt.tag


def factuality_messages(path: Path) -> tuple[list[dict[str, str]], str]:
    prompt = load_prompt(FACTUALITY_PROMPT)
    return [{"role": "user", "content": prompt.render(path=path_for_prompt(path))}], prompt.tag


@dataclass
class JudgeCall:
    """The parsed verdicts of one judge call, its raw text, and what it cost."""

    verdicts: TripleVerdicts
    raw: str
    prompt: str
    cost: float | None = None
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    #: refused/filtered: nothing was read from ``raw``, the triples are unscored; truncated: read as far as it goes
    outcome: Outcome = "answer"
    #: the model each of its calls' replies says answered (calls naming none left out)
    served_models: list[str] = field(default_factory=list)


async def _per_triple(client: CompletesChat, prompt_name: str, path: Path,
                      params: GenParams) -> tuple[list[Completion], str]:
    """One few-shot call per triple of ``path`` (the first failure propagates)."""
    calls = [fewshot_messages(prompt_name, t) for t in path]
    done = await asyncio.gather(*(client.complete(m, params, prompt_version=tag) for m, tag in calls))
    return list(done), calls[0][1] if calls else load_prompt(prompt_name).tag


def _outcome_of(completions: list[Completion]) -> Outcome:
    """One judge's outcome on a path from its calls: refused or filtered when any call was (its
    triple never read), else truncated when any was cut off at the token limit, else an answer."""
    outcomes = [call_outcome(c) for c in completions]
    return next((o for o in outcomes if o in NOT_AN_ANSWER), "truncated" if "truncated" in outcomes else "answer")


def _flag_outcome(verdicts: TripleVerdicts, outcome: Outcome) -> TripleVerdicts:
    """``verdicts`` flagged with a judge answer's outcome when it is not a plain answer (refused,
    filtered, truncated), so the scores tell an unread or cut-off verdict from an unreadable one."""
    if outcome != "answer":
        verdicts.flags.append(outcome)
    return verdicts


def _combined(completions: list[Completion], verdicts: TripleVerdicts, tag: str) -> JudgeCall:
    outcome = _outcome_of(completions)
    return JudgeCall(_flag_outcome(verdicts, outcome), json.dumps([c.text for c in completions], ensure_ascii=False),
                     tag, summed_cost([c.cost for c in completions]), summed_usage([c.usage for c in completions]),
                     bool(completions) and all(c.cached for c in completions), outcome,
                     [c.model for c in completions if c.model])


def _judged_text(c: Completion) -> str:
    """What a judge's verdicts are read from: nothing when it refused or was filtered (its triples unscored)."""
    return "" if is_withheld(c) else c.text


def unread_verdicts(n_triples: int) -> TripleVerdicts:
    """The verdicts of a judge answer that was refused or filtered: never parsed, every triple
    unscored (score 0, the paper's rule for a verdict it cannot read); only its outcome flags it."""
    return TripleVerdicts([0.0] * n_triples, [], sizes=[None] * n_triples, verdicts=[None] * n_triples)


def _single(c: Completion, read: Callable[[str, int], TripleVerdicts], n_triples: int, tag: str) -> JudgeCall:
    """One chat judge call on a path: its verdicts read from the answer with ``read``, unless the
    judge refused or was filtered."""
    verdicts = unread_verdicts(n_triples) if is_withheld(c) else read(c.text, n_triples)
    outcome = call_outcome(c)
    return JudgeCall(_flag_outcome(verdicts, outcome), c.refusal or c.text, tag, c.cost, c.usage, bool(c.cached),
                     outcome, [c.model] if c.model else [])


async def judge_specificity(client: CompletesChat, path: Path, params: GenParams, *,
                            base_model: bool = False) -> JudgeCall:
    """One specificity call for ``path`` (with ``base_model``: one few-shot call per triple, the raw
    text a JSON list of the continuations). Call failures propagate (the stage runtime records them
    as the unit's error, or stops the run on a stop error); unparseable output is flagged."""
    if base_model:
        done, tag = await _per_triple(client, SPECIFICITY_FEWSHOT_PROMPT, path, fewshot_judge_params(params))
        sizes = [parse_size_line(_judged_text(c)) for c in done]
        scores = [float(specificity_from_size(x)) for x in sizes]
        return _combined(done, TripleVerdicts(scores, ["fewshot", *_unscored_flags(sizes, done)], sizes), tag)
    messages, tag = specificity_messages(path)
    c = await client.complete(messages, params, prompt_version=tag)
    return _single(c, partial(parse_specificity, cut_off=call_outcome(c) == "truncated"), len(path), tag)


async def judge_factuality(client: CompletesChat, path: Path, params: GenParams, *,
                           base_model: bool = False) -> JudgeCall:
    """One factuality call for ``path`` (failures propagate, as in :func:`judge_specificity`)."""
    if base_model:
        done, tag = await _per_triple(client, FACTUALITY_FEWSHOT_PROMPT, path, fewshot_judge_params(params))
        verdicts = [parse_holds_line(_judged_text(c)) for c in done]
        scores = [0.0 if v is None else v for v in verdicts]
        return _combined(done, TripleVerdicts(scores, ["fewshot", *_unscored_flags(verdicts, done)], verdicts=verdicts),
                         tag)
    messages, tag = factuality_messages(path)
    c = await client.complete(messages, params, prompt_version=tag)
    return _single(c, parse_factuality, len(path), tag)
