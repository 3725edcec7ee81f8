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

**Review queue** (``review_queue.jsonl``): the construction pipeline's review API
(``cresowlve_core/construction``) is not there yet, so the queue is a simple JSONL of its own,
one object per survivor::

    {"id", "source": "synthetic", "question", "answer", "other_answers", "explanation",
     "literal_question", "source_triples", "solver": {"literal": ..., "obfuscated": ...},
     "difficulty_score", "verdicts": {"leaks": [], "creative_leap": "kept"},
     "decision": null, "reviewer": null, "note": null}

A reviewer fills ``decision`` (``keep`` / ``fix`` / ``ambiguous`` / ``other``) and ``note``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.answers import answer_names
from cresowlve_core.synthetic.facts import Candidate

#: The paper's knowledge-domain groups for each default domain.
DOMAIN_GROUPS = {
    "writers": "Literature", "books": "Literature", "musicians": "Music", "scientists": "Science",
    "films": "Film & Media Studies", "places": "Human Geography",
}


def other_answers(candidate: Candidate, source: KnowledgeSource) -> list[str]:
    """Anchor aliases, then each other valid answer's label and aliases (de-duplicated)."""
    anchor_label = source.english_label(candidate.anchor) or candidate.anchor
    names = [n.text for n in answer_names(source, [candidate.anchor], tokens=False) if n.kind == "alias"]
    for q in candidate.answers:
        if q != candidate.anchor:
            names += [n.text for n in answer_names(source, [q], tokens=False)]
    return [n for n in dict.fromkeys(names) if n != anchor_label]


def item_row(survivor: dict[str, Any], source: KnowledgeSource) -> dict[str, Any]:
    """One published-schema row plus the synthetic columns."""
    c: Candidate = survivor["candidate"]
    verb, solve = survivor["verbalisation"], survivor["solve"]
    others = other_answers(c, source)
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
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def write_items(survivors: Sequence[dict[str, Any]], source: KnowledgeSource, path: Path) -> Path:
    """``synthetic_items.jsonl`` (empty when nothing survived)."""
    return _write(path, [item_row(s, source) for s in survivors])


def write_review_queue(survivors: Sequence[dict[str, Any]], source: KnowledgeSource, path: Path) -> Path:
    """``review_queue.jsonl`` in the format of the module docstring. Decisions already made in an
    existing queue file are kept (matched by id)."""
    old: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                old[rec["id"]] = rec
    rows = []
    for s in survivors:
        row = item_row(s, source)
        solve = s["solve"]
        prev = old.get(row["id"], {})
        rows.append({
            "id": row["id"], "source": "synthetic", "question": row["question"], "answer": row["answer"],
            "other_answers": row["other_answers"], "explanation": row["explanation"],
            "literal_question": row["literal_question"], "source_triples": row["source_triples"],
            "solver": {side: {"answer": solve[side]["answer"], "correct": solve[side]["correct"],
                              "basis": solve[side]["basis"]} for side in ("literal", "obfuscated")},
            "difficulty_score": row["difficulty_score"],
            "verdicts": {"leaks": [], "creative_leap": solve["outcome"]},
            "decision": prev.get("decision"), "reviewer": prev.get("reviewer"), "note": prev.get("note"),
        })
    return _write(path, rows)
