"""Stages 1–2 together: sample anchors and choose their fact sets, writing the build directory.

``candidates.jsonl`` holds one :class:`~cresowlve_core.synthetic.facts.Candidate` per line (the
contract in :mod:`cresowlve_core.synthetic.facts`); ``anchors.jsonl`` holds every anchor tried,
with its outcome (the candidate id, or why it has none), so no anchor is dropped silently.
No model is called: the files are rewritten deterministically from the seed on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cresowlve_core import jsonl
from cresowlve_core.failures import InputError
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.anchors import AnchorPool, anchor_pool
from cresowlve_core.synthetic.domains import Domain
from cresowlve_core.synthetic.facts import Candidate, FactRules, choose_facts
from cresowlve_core.synthetic.notability import NotabilityBand

CANDIDATES = "candidates.jsonl"
ANCHORS = "anchors.jsonl"


@dataclass
class CandidateBuild:
    """What stages 1–2 produced."""

    candidates: list[Candidate]
    tried: list[dict[str, Any]]  # one record per anchor tried
    pools: list[AnchorPool] = field(default_factory=list)
    asked: int | None = None  # the candidates asked for (``n``)
    max_tries: int | None = None  # the anchors that could be tried at most

    def shortfall(self) -> str | None:
        """Why fewer candidates than asked were built, in words (None: as many as asked)."""
        if self.asked is None or len(self.candidates) >= self.asked:
            return None
        why = (f"the limit of {self.max_tries} anchors tried was reached" if self.max_tries is not None
               and len(self.tried) >= self.max_tries else
               f"every anchor in the band was tried ({len(self.tried)}, each in anchors.jsonl with its outcome)")
        return f"{len(self.candidates)} of {self.asked} asked: {why}"

    def counts(self) -> dict[str, Any]:
        return {
            "domain_members": {p.domain.name: p.n_members for p in self.pools},
            "labelled": {p.domain.name: p.n_labelled for p in self.pools},
            "in_band": {p.domain.name: len(p.order) for p in self.pools},
            "anchors_tried": len(self.tried),
            "candidates": len(self.candidates),
            "candidates_by_domain": {p.domain.name: sum(c.domain == p.domain.name for c in self.candidates)
                                     for p in self.pools},
            "unique_answer": sum(c.n_match_all == 1 for c in self.candidates),
        }


def build_candidates(source: KnowledgeSource, domains: Sequence[Domain], band: NotabilityBand, rules: FactRules,
                     n: int, seed: int, max_tries: int | None = None) -> CandidateBuild:
    """Up to ``n`` candidates, the domains taking turns: a domain's turn tries its next anchors
    (in seeded order) until one yields a fact set, so candidates are balanced over domains; at
    most ``max_tries`` anchors in all (default ``50 * n``)."""
    if n < 1:
        raise InputError(f"n must be at least 1, got {n}")
    pools = [anchor_pool(source, d, band, seed) for d in domains]
    limit = max_tries if max_tries is not None else 50 * n
    out: list[Candidate] = []
    tried: list[dict[str, Any]] = []
    seen: set[str] = set()
    queues = [(p.domain, iter(p.order)) for p in pools]
    while queues and len(out) < n and len(tried) < limit:
        alive = []
        for domain, it in queues:  # each domain's turn ends at its next candidate
            if len(out) >= n or len(tried) >= limit:
                break
            got_one = False
            for qid in it:
                if qid in seen:
                    continue
                seen.add(qid)
                got = choose_facts(source, qid, domain.name, domain.relations, rules, seed)
                rec: dict[str, Any] = {"anchor": qid, "label": source.english_label(qid), "domain": domain.name,
                                       "notability": source.notability(qid)}
                if isinstance(got, Candidate):
                    out.append(got)
                    rec |= {"status": "candidate", "candidate": got.id}
                else:
                    rec |= {"status": "no_fact_set", "reason": got}
                tried.append(rec)
                if isinstance(got, Candidate) or len(tried) >= limit:
                    got_one = True
                    break
            if got_one:
                alive.append((domain, it))
        queues = alive
    return CandidateBuild(out, tried, pools, n, limit)


def write_build(build: CandidateBuild, source: KnowledgeSource, build_dir: Path) -> Path:
    """Write ``candidates.jsonl`` and ``anchors.jsonl``; return the candidates path."""
    build_dir.mkdir(parents=True, exist_ok=True)
    jsonl.write_jsonl(build_dir / ANCHORS, build.tried)
    path = build_dir / CANDIDATES
    jsonl.write_jsonl(path, [c.to_record(source) for c in build.candidates])
    return path


def read_candidates(build_dir: Path) -> list[Candidate]:
    """The candidates of a build directory, in file order."""
    path = Path(build_dir) / CANDIDATES
    return [Candidate.from_record(rec) for rec in jsonl.read_jsonl(path)]


def check_contract(path: Path, source: KnowledgeSource) -> list[str]:
    """Re-derive every count of ``candidates.jsonl`` from ``source``; the list of violations."""
    problems: list[str] = []
    for i, rec in jsonl.read_jsonl_numbered(path):
        missing = [k for k in ("anchor", "facts", "n_match_each", "n_match_all", "answers") if k not in rec]
        if missing:
            problems.append(f"line {i}: missing {missing}")
            continue
        facts = [tuple(f) for f in rec["facts"]]
        each = [source.n_subjects_with(p, o) for p, o in facts]
        answers = source.subjects_with_all(facts)
        if each != rec["n_match_each"]:
            problems.append(f"line {i}: n_match_each {rec['n_match_each']} != {each}")
        if answers != rec["answers"] or len(answers) != rec["n_match_all"]:
            problems.append(f"line {i}: answers {rec['answers']} (n={rec['n_match_all']}) != {answers}")
        if rec["anchor"] not in answers:
            problems.append(f"line {i}: the anchor {rec['anchor']} lacks its own facts")
    return problems
