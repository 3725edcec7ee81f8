"""Stage 2: peripheral facts that identify the anchor jointly, not singly.

For an anchor ``a``, the *usable* facts are its out-edges ``(p, o)`` with ``p`` a peripheral
relation, ``o`` an entity with an English label, and at least ``min_each`` subjects having the
fact (so no single fact names the anchor by itself). Among all sets of ``min_facts`` to
``max_facts`` usable facts, the pipeline keeps the one whose conjunction matches the fewest
subjects (ideally the anchor alone, at most ``max_answers``), then prefers fewer facts, then
facts that are individually less specific (a larger smallest ``n_match_each``); remaining ties
are broken by a seeded random key. Every count is computed on the knowledge source itself.

The candidate contract (one line of ``candidates.jsonl`` each): ``anchor`` (QID), ``facts``
(``[[PID, QID], ...]``), ``n_match_each``, ``n_match_all`` and ``answers`` (sorted QIDs of every
subject having all the facts; "s has (p, o)" means the triple ``s p o`` is in the source).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cresowlve_core.failures import InputError
from cresowlve_core.sources.kg import Fact, KnowledgeSource


@dataclass(frozen=True)
class FactRules:
    """How fact sets are chosen (each default documented)."""

    min_facts: int = 2  # the paper's example uses two facts
    max_facts: int = 4
    min_each: int = 2  # a single fact must match at least this many subjects (it never identifies alone)
    max_answers: int = 3  # the conjunction may match at most this many subjects (1 = anchor alone)
    max_pool: int = 10  # at most this many usable facts are combined (seeded choice), bounding the search

    def __post_init__(self) -> None:
        if not 1 <= self.min_facts <= self.max_facts:
            raise InputError(f"need 1 <= min_facts <= max_facts, got {self.min_facts}, {self.max_facts}")
        if self.min_each < 2:
            raise InputError("min_each must be at least 2: a fact held by one subject identifies it alone")
        if self.max_answers < 1 or self.max_pool < self.min_facts:
            raise InputError("max_answers must be >= 1 and max_pool >= min_facts")


@dataclass(frozen=True)
class Candidate:
    """One anchor with its fact set and the counts that justify it."""

    anchor: str
    domain: str
    facts: tuple[Fact, ...]
    n_match_each: tuple[int, ...]
    answers: tuple[str, ...]
    notability: int

    @property
    def n_match_all(self) -> int:
        return len(self.answers)

    @property
    def id(self) -> str:
        """``synth_`` + 10 hex digits over the anchor and its facts (stable across runs)."""
        key = self.anchor + "|" + ";".join(f"{p}={o}" for p, o in self.facts)
        return "synth_" + hashlib.sha256(key.encode()).hexdigest()[:10]

    def to_record(self, source: KnowledgeSource | None = None) -> dict[str, Any]:
        """The ``candidates.jsonl`` line (labels added when a source is given)."""
        rec: dict[str, Any] = {
            "id": self.id,
            "anchor": self.anchor,
            "domain": self.domain,
            "facts": [[p, o] for p, o in self.facts],
            "n_match_each": list(self.n_match_each),
            "n_match_all": self.n_match_all,
            "answers": list(self.answers),
            "notability": self.notability,
        }
        if source is not None:
            rec["anchor_label"] = source.english_label(self.anchor)
            rec["fact_labels"] = [[source.english_label(p) or p, source.english_label(o) or o] for p, o in self.facts]
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Candidate:
        return cls(rec["anchor"], rec.get("domain", ""), tuple((p, o) for p, o in rec["facts"]),
                   tuple(rec["n_match_each"]), tuple(rec["answers"]), int(rec.get("notability", 0)))


def usable_facts(source: KnowledgeSource, anchor: str, relations: Sequence[str], min_each: int) -> list[tuple[Fact, int]]:
    """The anchor's peripheral facts with their subject counts (sorted by fact)."""
    allowed = set(relations)
    out = []
    for p, o in sorted(set(source.facts_of(anchor))):
        if p not in allowed or o == anchor or not source.english_label(o):
            continue
        n = source.n_subjects_with(p, o)
        if n >= min_each:
            out.append(((p, o), n))
    return out


def choose_facts(source: KnowledgeSource, anchor: str, domain: str, relations: Sequence[str],
                 rules: FactRules, seed: int) -> Candidate | str:
    """The best fact set for ``anchor`` (see the module docstring), or the reason there is none."""
    usable = usable_facts(source, anchor, relations, rules.min_each)
    if len(usable) < rules.min_facts:
        return f"fewer than {rules.min_facts} peripheral facts shared with >= {rules.min_each} subjects ({len(usable)})"
    rng = random.Random(f"{seed}:{anchor}")
    if len(usable) > rules.max_pool:
        usable = sorted(rng.sample(usable, rules.max_pool))
    best: tuple[tuple[Any, ...], Candidate] | None = None
    for k in range(rules.min_facts, min(rules.max_facts, len(usable)) + 1):
        for combo in itertools.combinations(usable, k):
            facts = tuple(f for f, _ in combo)
            answers = source.subjects_with_all(facts)
            tie = rng.random()
            if anchor not in answers or len(answers) > rules.max_answers:
                continue
            counts = tuple(n for _, n in combo)
            score = (len(answers), k, -min(counts), tie)
            if best is None or score < best[0]:
                best = (score, Candidate(anchor, domain, facts, counts, tuple(answers), source.notability(anchor)))
    if best is None:
        return f"no set of {rules.min_facts}-{rules.max_facts} facts matches at most {rules.max_answers} subjects"
    return best[1]
