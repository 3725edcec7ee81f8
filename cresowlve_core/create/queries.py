"""CREATE queries: the shipped set, and building new ones from the knowledge graph (Algorithm 1).

A query asks for ways to connect ``entity_a`` with someone or something related to ``entity_b``
through ``rel_b``. The default set is the 24 real CREATE queries in
``data/create/queries.jsonl``.

**Algorithm 1** (:func:`build_queries`), on the shipped Wikidata subset:

1. for each relation ``r`` of :data:`CREATE_RELATIONS` form the classes ``C(r, c)``: the members
   ``x`` with ``(x, r, c)`` — or, for the film relations of :data:`WORK_RELATIONS` (director,
   screenwriter, cast member, producer), where the film is the subject, ``(c, r, x)``;
2. keep compact classes (``min_class_size <= |C| <= max_class_size``) and visit them in a seeded
   random order;
3. take two members ``x1 != x2`` (both notable: degree ``>= min_degree``), picked by the seeded
   generator, and one *informative* outgoing edge ``(x2, r', y)`` of ``x2``: ``r'`` not in
   :data:`UNINFORMATIVE_RELATIONS`, ``y`` labelled, ``y`` not ``x1`` nor ``c``, and — as in the
   paper — ``(x1, r', y)`` not in the graph (the start entity must not satisfy the target itself);
4. the source path is ``(x1, r, c), (x2, r, c), (x2, r', y)``; ``entity_a = x1``,
   ``entity_b = y``, ``rel_b = label(r')``;
5. verbalise it: ``verbalise="llm"`` asks a model with prompt ``create_verbalise`` (the paper used
   gpt-4o-mini); ``verbalise="template"`` is a deterministic offline fallback.

Relations P39, P2175 and P2293 have no triples in the shipped subset; they are skipped, and the
builder reports which relations yielded nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from cresowlve_core import jsonl
from cresowlve_core.failures import InputError, UsageError, validation_problems
from cresowlve_core.inputs import text_problem
from cresowlve_core.llm.types import GenParams, LLMError
from cresowlve_core.paths import shipped_data
from cresowlve_core.prompts import load_prompt
from cresowlve_core.runtime import STOP_ERRORS, run_coro
from cresowlve_core.runtime.outcomes import call_outcome, is_withheld
from cresowlve_core.sources.kg import KnowledgeGraph, load_kg
from cresowlve_core.text import id_part

log = logging.getLogger(__name__)


def default_queries_path() -> Path:
    """The shipped queries, resolved when called (found with a data dir elsewhere too)."""
    return shipped_data("create", "queries.jsonl")
CREATE_RELATIONS: tuple[str, ...] = (
    "P166", "P39", "P40", "P463", "P54", "P57", "P58", "P161", "P162", "P2175", "P2293",
)  # fmt: skip
WORK_RELATIONS = frozenset({"P57", "P58", "P161", "P162"})
UNINFORMATIVE_RELATIONS = frozenset(
    {
        "P31",  # instance of
        "P279",  # subclass of
        "P21",  # sex or gender
        "P17",  # country
        "P103",  # native language
        "P1412",  # languages spoken, written or signed
        "P407",  # language of work or name
        "P364",  # original language of film or TV show
        "P421",  # located in time zone
        "P1343",  # described by source
        "P2888",  # exact match
        "P973",  # described at URL
        "P910",  # topic's main category
        "P1344",  # participant in (very broad in this subset)
    }
)
VERBALISE_PROMPT = "create_verbalise"


class CreateQuery(BaseModel):
    """One CREATE query; ``id`` is derived from the category and ``entity_a`` when absent."""

    id: str = ""
    query: str
    entity_a: str
    entity_b: str
    rel_b: str
    description: str = ""
    source_triples_qid: list[list[str]] = Field(default_factory=list)
    source_path: list[list[str]] = Field(default_factory=list)
    #: how a built query's text was written (:func:`build_queries`): ``llm``, ``template``, or the
    #: template in place of the model's text, with why (``template (the model refused)``)
    verbalisation: str | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            self.id = query_id(self.description, self.entity_a, self.entity_b)


def query_id(description: str, entity_a: str, entity_b: str) -> str:
    """A readable, stable id: ``<category>__<entity_a>__<entity_b>`` (:func:`cresowlve_core.text.id_part`)."""
    return "__".join(x for x in (description, id_part(entity_a), id_part(entity_b)) if x)


class QueriesFileError(UsageError, ValueError):
    """A CREATE queries file cannot be used; the message names the file and line."""


def load_queries(path: Path | str | None = None, limit: int | None = None, *,
                 max_input_chars: int | None = None) -> list[CreateQuery]:
    """Read queries (JSON lines); default: the 24 shipped CREATE queries.

    Every check runs here, before a run directory is touched: the file must exist and be UTF-8
    JSON Lines (split on ``"\\n"`` only, so U+2028 inside a string is kept), every line a valid
    query, the ids unique, and at least one query left. Each ``query`` text must pass the input
    limits of :mod:`cresowlve_core.inputs` (not empty, no control character but tab and newline,
    at most 64 KB unless ``max_input_chars`` raises it), and so must ``entity_a``, ``entity_b`` and
    ``rel_b`` but for the size (an empty entity would pass the path checks of every path: it is a
    substring of every triple). Each problem is one
    :class:`QueriesFileError` naming ``file:line``.
    """
    p = Path(path) if path else default_queries_path()
    if not p.is_file():
        raise QueriesFileError(f"{p}: no such queries file" if not p.exists() else f"{p}: not a file")
    queries: list[CreateQuery] = []
    lines: dict[str, list[int]] = defaultdict(list)
    for lineno, row in jsonl.read_jsonl_numbered(p, error=QueriesFileError, what="query"):
        if unknown := [key for key in row if key not in CreateQuery.model_fields]:  # a misspelt key would be dropped
            raise QueriesFileError(f"{p}:{lineno}: unknown field(s) {', '.join(map(repr, unknown))}: a CREATE query "
                                   f"has {', '.join(CreateQuery.model_fields)}")
        try:
            q = CreateQuery(**row)
        except ValidationError as exc:
            raise QueriesFileError(f"{p}:{lineno}: not a CREATE query ({validation_problems(exc)})") from None
        except TypeError as exc:
            raise QueriesFileError(f"{p}:{lineno}: not a CREATE query ({exc})") from None
        if (problem := text_problem(q.query, "query", max_chars=max_input_chars)) is not None:
            raise QueriesFileError(f"{p}:{lineno}: {problem}")  # the same limits as eval's items
        for field in ("entity_a", "entity_b", "rel_b"):  # an empty entity is in every triple: no path would be invalid
            if (problem := text_problem(getattr(q, field), field, size_limited=False)) is not None:
                raise QueriesFileError(f"{p}:{lineno}: {problem}")
        queries.append(q)
        lines[q.id].append(lineno)
    dupes = {k: v for k, v in lines.items() if len(v) > 1}
    if dupes:
        shown = "; ".join(f"{k!r} (lines {', '.join(map(str, v))})" for k, v in list(dupes.items())[:5])
        raise QueriesFileError(f"{p}: {len(dupes)} duplicate query id(s): {shown}; ids must be unique "
                               "(an id is derived from description, entity_a and entity_b when absent)")
    if not queries:
        raise QueriesFileError(f"{p}: no queries in the file")
    return queries[:limit] if limit is not None else queries


# --------------------------------------------------------------------------- Algorithm 1


@dataclass(frozen=True)
class SourcePath:
    """Three Wikidata triples ``(x1, r, c), (x2, r, c), (x2, r', y)`` (as stored: subject first)."""

    relation: str
    category: str
    triples: tuple[tuple[str, str, str], ...]
    entity_a: str  # qid of x1
    entity_b: str  # qid of y
    rel_b: str  # pid of r'


def relation_classes(kg: KnowledgeGraph, relation: str) -> dict[str, list[str]]:
    """``c -> sorted members`` of each class ``C(relation, c)`` (see module docstring for direction)."""
    classes: dict[str, set[str]] = defaultdict(set)
    for s, o in kg.by_relation.get(relation, []):
        if relation in WORK_RELATIONS:
            classes[s].add(o)
        else:
            classes[o].add(s)
    return {c: sorted(m) for c, m in classes.items()}


def _class_triple(relation: str, category: str, member: str) -> tuple[str, str, str]:
    return (category, relation, member) if relation in WORK_RELATIONS else (member, relation, category)


def _informative_edges(
    kg: KnowledgeGraph, x1: str, x2: str, category: str, max_target_degree: int
) -> list[tuple[str, str]]:
    edges = []
    for p, y in kg.out_edges.get(x2, []):
        if p in UNINFORMATIVE_RELATIONS or y in (x1, x2, category):
            continue
        if kg.degree[y] > max_target_degree:  # hubs (e.g. a large country) make a vague target
            continue
        if y not in kg.labels or p not in kg.relation_labels:
            continue
        if kg.has(x1, p, y):
            continue
        edges.append((p, y))
    return sorted(set(edges))


def sample_source_paths(
    kg: KnowledgeGraph,
    relations: Sequence[str] = CREATE_RELATIONS,
    per_relation: int = 2,
    seed: int = 0,
    min_degree: int = 3,
    min_class_size: int = 2,
    max_class_size: int = 60,
    max_target_degree: int = 300,
) -> list[SourcePath]:
    """Seeded sampling of source paths, at most one per class and ``per_relation`` per relation.

    Targets ``y`` with degree above ``max_target_degree`` are skipped, and no two source paths
    share the same ``(entity_a, rel_b, entity_b)``.
    """
    rng = random.Random(seed)
    out: list[SourcePath] = []
    seen: set[tuple[str, str, str]] = set()
    for r in relations:
        classes = relation_classes(kg, r)
        categories = sorted(c for c, m in classes.items() if min_class_size <= len(m) <= max_class_size)
        rng.shuffle(categories)
        found = 0
        for c in categories:
            if found >= per_relation:
                break
            if c not in kg.labels:
                continue
            notable = [x for x in classes[c] if kg.degree[x] >= min_degree and x in kg.labels]
            if len(notable) < 2:
                continue
            x1, x2 = rng.sample(notable, 2)
            edges = _informative_edges(kg, x1, x2, c, max_target_degree)
            if not edges:
                x1, x2 = x2, x1
                edges = _informative_edges(kg, x1, x2, c, max_target_degree)
            edges = [(p, y) for p, y in edges if (x1, p, y) not in seen]
            if not edges:
                continue
            p, y = rng.choice(edges)
            seen.add((x1, p, y))
            triples = (_class_triple(r, c, x1), _class_triple(r, c, x2), (x2, p, y))
            out.append(SourcePath(r, c, triples, x1, y, p))
            found += 1
    return out


def _short_description(kg: KnowledgeGraph, qid: str) -> str:
    return kg.descriptions.get(qid, "").strip()


def verbalise_template(sp: SourcePath, kg: KnowledgeGraph) -> str:
    """Deterministic offline verbalisation of a source path."""
    a = kg.label(sp.entity_a)
    desc = _short_description(kg, sp.entity_a)
    start = f"{a} ({desc})" if desc else a
    return (
        f"What are different ways of connecting {start} and someone or something that has "
        f"the relation '{kg.label(sp.rel_b)}' to {kg.label(sp.entity_b)}?"
    )


def _labelled_path(sp: SourcePath, kg: KnowledgeGraph) -> list[list[str]]:
    return [[kg.label(s), kg.label(p), kg.label(o)] for s, p, o in sp.triples]


def verbalise_messages(sp: SourcePath, kg: KnowledgeGraph) -> tuple[list[dict[str, str]], str]:
    prompt = load_prompt(VERBALISE_PROMPT)
    text = prompt.render(
        entity_a=kg.label(sp.entity_a),
        entity_a_description=_short_description(kg, sp.entity_a) or "no description",
        rel_b=kg.label(sp.rel_b),
        entity_b=kg.label(sp.entity_b),
        source_path=json.dumps(_labelled_path(sp, kg), ensure_ascii=False),
    )
    return [{"role": "user", "content": text}], prompt.tag


def clean_verbalisation(text: str | None) -> str | None:
    """The first non-empty line of a model's answer, unquoted; None if it is not a question."""
    for line in (text or "").splitlines():
        line = re.sub(r"^(question|query)\s*:\s*", "", line.strip(), flags=re.IGNORECASE)
        line = line.strip().strip('"').strip("'").strip()
        if len(line) > 15 and line.endswith("?"):
            return line
    return None


async def verbalise_llm(client: Any, sp: SourcePath, kg: KnowledgeGraph, params: Any) -> tuple[str, str]:
    """Ask a model to verbalise; falls back to the template. Returns ``(query, how)``: ``llm``, or
    ``template (<why>)`` when the model refused, was filtered, failed or wrote no question."""
    messages, tag = verbalise_messages(sp, kg)
    try:
        c = await client.complete(messages, params, prompt_version=tag)
        if is_withheld(c):  # a refusal or a filter: the template
            why = "the model refused" if call_outcome(c) == "refused" else "the provider's filter"
            q = None
        else:
            q = clean_verbalisation(c.text)
            why = "no question in the model's text"
    except STOP_ERRORS:  # a wrong key or a spent budget stops the build
        raise
    except LLMError as exc:  # one failed call: the template is a safe fallback
        q, why = None, f"the call failed: {type(exc).__name__}"
    return (q, "llm") if q else (verbalise_template(sp, kg), f"template ({why})")


def to_query(sp: SourcePath, kg: KnowledgeGraph, text: str, verbalisation: str | None = None) -> CreateQuery:
    return CreateQuery(
        query=text,
        verbalisation=verbalisation,
        entity_a=kg.label(sp.entity_a),
        entity_b=kg.label(sp.entity_b),
        rel_b=kg.label(sp.rel_b),
        description=f"{sp.category}__{sp.relation}",
        source_triples_qid=[list(t) for t in sp.triples],
        source_path=_labelled_path(sp, kg),
    )


def build_queries(
    kg: KnowledgeGraph | None = None,
    *,
    relations: Sequence[str] = CREATE_RELATIONS,
    per_relation: int = 2,
    seed: int = 0,
    min_degree: int = 3,
    max_class_size: int = 60,
    max_target_degree: int = 300,
    verbalise: Literal["template", "llm"] = "template",
    client: Any = None,
    params: Any = None,
) -> list[CreateQuery]:
    """Algorithm 1 end to end. ``verbalise="llm"`` needs ``client`` (anything with async ``complete``)."""
    kg = kg or load_kg()
    sources = sample_source_paths(
        kg,
        relations,
        per_relation=per_relation,
        seed=seed,
        min_degree=min_degree,
        max_class_size=max_class_size,
        max_target_degree=max_target_degree,
    )
    if verbalise == "template":
        return [to_query(sp, kg, verbalise_template(sp, kg), "template") for sp in sources]
    if client is None:
        raise InputError("verbalise='llm' needs a client")
    if params is None:
        params = GenParams(temperature=0.0, seed=seed, max_tokens=200)

    async def run() -> list[tuple[str, str]]:
        return await asyncio.gather(*(verbalise_llm(client, sp, kg, params) for sp in sources))

    texts = run_coro(run())
    templated = [how for _, how in texts if how != "llm"]
    if templated:
        log.warning("%d of %d queries verbalised by the template instead of the model (the first: %s); "
                    "each query's `verbalisation` says how it was written", len(templated), len(texts), templated[0])
    return [to_query(sp, kg, text, how) for sp, (text, how) in zip(sources, texts)]
