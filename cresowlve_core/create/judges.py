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
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from cresowlve_core.create.paths import MAX_PARSE_CHARS, Path, _drop_trailing_commas, _loads
from cresowlve_core.llm.types import Completion, GenParams, Usage
from cresowlve_core.prompts import load_prompt

StrengthScope = Literal["reference", "paper"]

SPECIFICITY_PROMPT = "create_specificity"
FACTUALITY_PROMPT = "create_factuality"


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


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = re.search(r"\d[\d,]*(?:\.\d+)?", value)
        if m:
            try:
                return float(m.group(0).replace(",", ""))
            except ValueError:
                return None
    return None


@dataclass
class TripleVerdicts:
    """One judge's per-triple output for one path."""

    scores: list[float]
    flags: list[str] = field(default_factory=list)
    sizes: list[float | None] | None = None  # specificity only: the estimated class sizes


def _fit(values: list[Any], n: int, fill: Any, flags: list[str]) -> list[Any]:
    if len(values) != n:
        flags.append(f"length_mismatch_{len(values)}_for_{n}")
    return (values + [fill] * n)[:n]


def parse_specificity(text: str, n_triples: int) -> TripleVerdicts:
    """Judge output (a JSON list of ``{"explanation", "judgment"}``) → scores 0-5 per triple."""
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
        found = re.findall(r'"?judgment"?\s*:\s*"?([\d][\d,]*(?:\.\d+)?)', text or "")
        sizes = [_as_number(x) for x in found]
        flags.append("regex_fallback" if found else "unparseable")
    sizes = _fit(sizes, n_triples, None, flags)
    if any(s is None for s in sizes) and "unparseable" not in flags:
        flags.append("some_unparseable")
    return TripleVerdicts([float(specificity_from_size(s)) for s in sizes], flags, sizes)


_VERDICT = re.compile(r"not\s+hallucinated|hallucinated", re.IGNORECASE)


def _verdict(value: Any) -> float | None:
    if isinstance(value, bool):
        return 0.0 if value else 1.0  # "hallucinated: true"
    if isinstance(value, (int, float)):
        return float(value) if value in (0, 1) else None
    if isinstance(value, str):
        v = value.strip().lower().replace("_", " ").replace("-", " ")
        if v.startswith("not hallucinated") or v in {"factual", "correct", "true"}:
            return 1.0
        if v.startswith("hallucinated") or v in {"incorrect", "false"}:
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
    if isinstance(obj, dict) and isinstance(obj.get("judgments"), list):
        raw = obj["judgments"]
    elif isinstance(obj, list):
        raw = obj
    if raw is not None:
        verdicts = [_verdict(v) for v in raw]
    else:
        tail = (text or "").split("judgments", 1)[-1]
        verdicts = [_verdict(m.group(0)) for m in _VERDICT.finditer(tail)]
        flags.append("regex_fallback" if verdicts else "unparseable")
    verdicts = _fit(verdicts, n_triples, None, flags)
    if any(v is None for v in verdicts) and "unparseable" not in flags:
        flags.append("some_unparseable")
    return TripleVerdicts([0.0 if v is None else v for v in verdicts], flags)


# --------------------------------------------------------------------------- calling the judges


def path_for_prompt(path: Path) -> str:
    """How a path is shown to a judge: a JSON list of ``[subject, relation, object]`` triples."""
    return json.dumps(path, ensure_ascii=False)


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


async def judge_specificity(client: CompletesChat, path: Path, params: GenParams) -> JudgeCall:
    """One specificity call for ``path``. Call failures propagate (the stage runtime records them
    as the unit's error, or stops the run on a stop error); unparseable output is flagged."""
    messages, tag = specificity_messages(path)
    c = await client.complete(messages, params, prompt_version=tag)
    return JudgeCall(parse_specificity(c.text, len(path)), c.text, tag, c.cost, c.usage, bool(c.cached))


async def judge_factuality(client: CompletesChat, path: Path, params: GenParams) -> JudgeCall:
    """One factuality call for ``path`` (failures propagate, as in :func:`judge_specificity`)."""
    messages, tag = factuality_messages(path)
    c = await client.complete(messages, params, prompt_version=tag)
    return JudgeCall(parse_factuality(c.text, len(path)), c.text, tag, c.cost, c.usage, bool(c.cached))
