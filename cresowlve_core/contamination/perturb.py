"""Three word-level perturbations of each question (one ``map_with_resume`` run).

The perturber rewrites the question three times with synonym swaps. :func:`parse_perturbations`
reads the three numbered lines; :func:`problems` says why a set cannot be used in a quiz (fewer
than three, one equal to the original or to another, a capitalised placeholder lost). Such an
item is reported with its reason, never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cresowlve_core.contamination.rouge import words
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.prompts import load_prompt
from cresowlve_core.runtime import ClientOptions, MapResult, RunDir, map_with_resume, new_manifest

PROMPT = "contamination_perturb"
PERTURBATIONS = "perturbations.jsonl"
MAX_PARSE_CHARS = 20_000
_NUMBERED = re.compile(r"^\s*[*#>]*\s*(?:option|rewrite|вариант)?\s*([1-3])\s*[.):]\s*[*]*\s*(.*?)\s*$", re.I)
_PLACEHOLDER_LETTERS = frozenset("XYZNХ")


@dataclass(frozen=True)
class QuizItem:
    """One question that goes into the quizzes: which set and configuration it belongs to."""

    lang: str
    id: str
    question: str


def parse_perturbations(text: str | None) -> list[str] | None:
    """The three numbered rewrites (``1.``/``2.``/``3.``, also ``1)`` or ``Option 1:``), with
    continuation lines joined; None unless all three are present and non-empty."""
    if not text:
        return None
    found: dict[int, list[str]] = {}
    current: int | None = None
    for line in text[:MAX_PARSE_CHARS].splitlines():
        m = _NUMBERED.match(line)
        if m and int(m.group(1)) not in found:
            current = int(m.group(1))
            found[current] = [m.group(2)]
        elif current is not None and line.strip():
            found[current].append(line.strip())
        elif not line.strip():
            current = None if current == 3 else current
    out = [" ".join(found.get(i, [])).strip().strip("\"“”«»") for i in (1, 2, 3)]
    return out if all(out) else None


def placeholders(question: str) -> list[str]:
    """Capitalised placeholders of a ChGK question: all-caps words of 2+ letters, and X/Y/Z/N."""
    toks = re.findall(r"\w+", question)
    return sorted({t for t in toks if t.isalpha() and t.isupper() and (len(t) >= 2 or t in _PLACEHOLDER_LETTERS)})


def problems(original: str, perturbations: list[str] | None) -> list[str]:
    """Why these perturbations cannot make a quiz (empty list: they can)."""
    if perturbations is None:
        return ["no three numbered rewrites in the reply"]
    out = []
    norm = [" ".join(words(p)) for p in perturbations]
    orig = " ".join(words(original))
    if any(n == orig for n in norm):
        out.append("a rewrite equals the original")
    if len(set(norm)) < 3:
        out.append("two rewrites are the same")
    for ph in placeholders(original):
        if any(ph not in re.findall(r"\w+", p) for p in perturbations):
            out.append(f"placeholder {ph} lost")
    return out


def perturb_messages(unit: QuizItem) -> tuple[list[dict[str, str]], str]:
    prompt = load_prompt(PROMPT)
    return [{"role": "user", "content": prompt.render(question=unit.question.strip())}], prompt.tag


async def aperturb(units: Sequence[QuizItem], run: RunDir, client: LLMClient, options: ClientOptions, *,
                   progress: bool = True) -> MapResult[QuizItem]:
    """Perturb every question into ``run/perturbations.jsonl`` (resumable)."""
    prompt = load_prompt(PROMPT)
    manifest = run.begin(new_manifest(
        "contamination_perturb", model=client.endpoint.model, base_url=client.endpoint.base_url,
        api_key_env=client.endpoint.api_key_env, n_items=len(units), prompts=[prompt.tag], seed=options.seed,
        temperature=options.temperature, max_tokens=options.max_tokens, options=options.model_dump()))

    async def call(unit: QuizItem, previous: dict[str, Any] | None) -> dict[str, Any]:
        messages, tag = perturb_messages(unit)
        c = await client.complete(messages, options.gen_params(), prompt_version=tag)
        parsed = parse_perturbations(c.text)
        return {"key": [unit.lang, unit.id], "status": "ok", "perturbations": parsed,
                "problems": problems(unit.question, parsed), "raw": c.text, "usage": c.usage.model_dump(),
                "cost": c.cost}

    result = await map_with_resume(run, PERTURBATIONS, units, key=lambda u: (u.lang, u.id), call=call,
                                   concurrency=options.concurrency, progress=progress, desc="perturbing")
    recs = list(result.records.values())
    run.finish(manifest, stopped=result.stopped, summary={
        "n_units": result.n_units, "n_done": result.n_done, "n_error": result.n_error,
        "n_usable": sum(r.get("status") == "ok" and not r.get("problems") for r in recs), "stopped": result.stopped})
    return result
