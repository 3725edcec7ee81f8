"""Survivors out: benchmark items (published schema + provenance) and the human review queue.

**Items** (``synthetic_items.jsonl``): one row per survivor in the published schema of
``mismayil/cresowlve`` (``id, question, answer, difficulty, explanation, other_answers,
knowledge_domains, creative_domains, cultures``), the obfuscated puzzle as ``question``, the
anchor's label as ``answer``, and ``other_answers`` listing, ``"; "``-separated, the anchor's
aliases and the labels and aliases of every other subject having all the facts (the paper's
"multiple valid answers"). ``difficulty`` (1–5, a human rating) stays null; the automatic
``difficulty_score`` goes in its own column, with ``source_triples`` (``[[s, p, o], ...]``),
``literal_question``, ``anchor`` and ``answers`` (QIDs). The loader
(:func:`cresowlve_core.sources.sample.load_items`) ignores the extra columns, so
``cresowlve eval --items synthetic_items.jsonl`` evaluates them like any benchmark item.

**Review queue** (``review/queue.jsonl``): the construction pipeline's queue file, one card per
survivor in the shape of :func:`cresowlve_core.construction.review.review_card` (``ru`` is null,
the puzzle is the ``en`` view, the literal version, triples, solver answers and difficulty score
are under ``synthetic``). Reviewers use that pipeline's ``ReviewSession``; decisions go to
``review/decisions__<reviewer>.jsonl`` in its format (codes ``keep``, ``other`` with a note, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cresowlve_core import jsonl
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.answers import accepted_names, other_labels
from cresowlve_core.synthetic.facts import Candidate

#: The paper's knowledge-domain groups for each default domain.
DOMAIN_GROUPS = {
    "writers": "Literature", "books": "Literature", "musicians": "Music", "scientists": "Science",
    "films": "Film & Media Studies", "places": "Human Geography",
}


def other_answers(candidate: Candidate, source: KnowledgeSource, labels: set[str] | None) -> list[str]:
    """Anchor aliases, then each other valid answer's label and aliases (de-duplicated): the names
    the creative-leap filter accepts (:func:`~cresowlve_core.synthetic.answers.accepted_names`, with
    ``labels`` the normalised labels of every entity), so an alias piece too short to trust or naming
    another entity is no accepted answer of the exported item either."""
    anchor_label = source.english_label(candidate.anchor) or candidate.anchor
    qids = [candidate.anchor, *(q for q in candidate.answers if q != candidate.anchor)]
    names = [n.text for n in accepted_names(source, qids, labels)
             if not (n.qid == candidate.anchor and n.kind == "label")]
    return [n for n in dict.fromkeys(names) if n != anchor_label]


def item_row(survivor: dict[str, Any], source: KnowledgeSource, labels: set[str] | None) -> dict[str, Any]:
    """One published-schema row plus the synthetic columns (``labels``: :func:`other_answers`'s)."""
    c: Candidate = survivor["candidate"]
    verb, solve = survivor["verbalisation"], survivor["solve"]
    others = other_answers(c, source, labels)
    return {
        "id": c.id,
        "question": verb["obfuscated"],
        "answer": source.english_label(c.anchor) or c.anchor,
        "difficulty": None,
        "explanation": verb["explanation"],
        "other_answers": "; ".join(others) if others else None,
        "knowledge_domains": [DOMAIN_GROUPS[c.domain]] if c.domain in DOMAIN_GROUPS else [],
        "creative_domains": [],
        "cultures": [],
        "source_triples": [[c.anchor, p, o] for p, o in c.facts],
        "difficulty_score": solve.get("difficulty_score"),
        "literal_question": verb["literal"],
        "anchor": c.anchor,
        "answers": list(c.answers),
    }


def _write(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return jsonl.write_jsonl(path, rows)


def write_items(survivors: Sequence[dict[str, Any]], source: KnowledgeSource, path: Path) -> Path:
    """``synthetic_items.jsonl`` (empty when nothing survived)."""
    labels = other_labels(source)
    return _write(path, [item_row(s, source, labels) for s in survivors])


def review_card(survivor: dict[str, Any], source: KnowledgeSource, labels: set[str] | None) -> dict[str, Any]:
    """A card in the construction review queue's shape (:func:`cresowlve_core.construction.review.review_card`):
    no Russian view, the puzzle as the English view, the synthetic evidence under ``synthetic``."""
    row = item_row(survivor, source, labels)
    solve = survivor["solve"]
    return {
        "id": row["id"], "difficulty": None, "ru": None,
        "en": {"question": row["question"], "answer": row["answer"], "explanation": row["explanation"],
               "other_answers": row["other_answers"]},
        "needs_material": {"llm": None, "reason": None, "precheck": []},
        "russian_specific": {"llm": None, "reason": None},
        "translation_flags": [], "review_flags": ["synthetic"],
        "handout": None, "provenance": {"source": "synthetic", "anchor": row["anchor"], "answers": row["answers"]},
        "model_labels": {"reasoning_type": "creative", "concepts": [], "domains": row["knowledge_domains"], "cultures": []},
        "synthetic": {
            "literal_question": row["literal_question"], "source_triples": row["source_triples"],
            "difficulty_score": row["difficulty_score"], "creative_leap": solve["outcome"],
            "solver": {side: {"answer": solve[side]["answer"], "correct": solve[side]["correct"],
                              "basis": solve[side]["basis"]} for side in ("literal", "obfuscated")},
        },
    }


def write_review_queue(survivors: Sequence[dict[str, Any]], source: KnowledgeSource, build_dir: Path) -> Path:
    """``<build>/review/queue.jsonl``: the construction pipeline's queue file, so its
    :class:`~cresowlve_core.construction.review.ReviewSession` (and the panel built on it) reviews
    the survivors and saves decisions in its own ``decisions__<reviewer>.jsonl`` format.
    Decisions already saved are untouched."""
    from cresowlve_core.construction.review import QUEUE, review_dir

    labels = other_labels(source)
    return _write(review_dir(build_dir) / QUEUE, [review_card(s, source, labels) for s in survivors])
