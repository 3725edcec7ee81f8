"""Stages 1–2 on a tiny hand-made graph with known answers: notability band, anchors, joint identification."""

from __future__ import annotations

import json

import pytest

from cresowlve_core.sources.kg import KnowledgeGraph, load_kg
from cresowlve_core.synthetic.anchors import anchor_pool
from cresowlve_core.synthetic.candidates import build_candidates, check_contract, write_build
from cresowlve_core.synthetic.domains import Domain, domains_by_name
from cresowlve_core.synthetic.facts import FactRules, choose_facts
from cresowlve_core.synthetic.notability import DEFAULT_BAND, NotabilityBand, band_from_percentiles

AWARD, SCHOOL, CLUB = "P166", "P69", "P463"
RELS = (AWARD, SCHOOL, CLUB)


def tiny() -> KnowledgeGraph:
    """Writers W1..W5 and a footballer W6. Subjects per fact: P {W1, W2, W3, W6}, S {W1, W2, W4, W5},
    C {W1, W3, W6}. Jointly: P+S -> {W1, W2}; P+C -> {W1, W3, W6}; S+C -> {W1}; P+S+C -> {W1}.
    W5's award UNIQUE is held by nobody else, so it is never usable."""
    t = [
        ("W1", AWARD, "P"), ("W2", AWARD, "P"), ("W3", AWARD, "P"),
        ("W1", SCHOOL, "S"), ("W2", SCHOOL, "S"), ("W4", SCHOOL, "S"),
        ("W1", CLUB, "C"), ("W3", CLUB, "C"),
        ("W5", AWARD, "UNIQUE"), ("W5", SCHOOL, "S"),
        ("W6", AWARD, "P"), ("W6", CLUB, "C"),
        ("W1", "P17", "COUNTRY"),  # not a peripheral relation
    ]  # fmt: skip
    labels = {q: q.lower() for q in ("W1", "W2", "W3", "W4", "W5", "W6", "P", "S", "C", "UNIQUE", "COUNTRY")}
    types = {w: frozenset({"Q5"}) for w in ("W1", "W2", "W3", "W4", "W5", "W6")}
    desc = {w: "novelist" for w in ("W1", "W2", "W3", "W4", "W5")} | {"W6": "footballer"}
    return KnowledgeGraph(t, labels=labels, types=types, descriptions=desc)


WRITERS = Domain("writers", ("Q5",), "novelist", RELS)


def test_joint_identification_counts_known_answers():
    kg = tiny()
    got = choose_facts(kg, "W1", "writers", RELS, FactRules(), seed=0)
    assert not isinstance(got, str)
    # S + C identifies W1 alone with two facts; each fact alone matches several subjects
    assert got.facts == ((CLUB, "C"), (SCHOOL, "S"))
    assert got.n_match_each == (3, 4) and got.answers == ("W1",) and got.n_match_all == 1
    # W3 has P and C only: their conjunction matches W1, W3 and the non-writer W6
    got3 = choose_facts(kg, "W3", "writers", RELS, FactRules(max_answers=3), seed=0)
    assert got3.facts == ((AWARD, "P"), (CLUB, "C")) and got3.answers == ("W1", "W3", "W6")
    assert got3.n_match_each == (4, 3)


def test_fact_set_answers_are_every_subject_with_all_facts():
    kg = tiny()
    got = choose_facts(kg, "W2", "writers", RELS, FactRules(max_answers=3), seed=0)
    assert got.facts == ((AWARD, "P"), (SCHOOL, "S"))
    assert got.answers == ("W1", "W2") and got.n_match_each == (4, 4)


def test_anchors_without_a_fact_set_give_a_reason():
    kg = tiny()
    assert "fewer than 2" in choose_facts(kg, "W5", "writers", RELS, FactRules(), seed=0)  # UNIQUE is held by one
    assert "at most 1" in choose_facts(kg, "W2", "writers", RELS, FactRules(max_answers=1), seed=0)
    with pytest.raises(ValueError):
        FactRules(min_each=1)


def test_notability_band_and_anchor_pool():
    kg = tiny()
    band = NotabilityBand(3, 4)
    assert band.contains(3) and band.contains(4) and not band.contains(5)
    pool = anchor_pool(kg, WRITERS, band, seed=0)
    assert pool.n_members == 5  # W6 is filtered out by its description
    assert sorted(pool.order) == sorted(q for q in ("W1", "W2", "W3", "W4", "W5") if 3 <= kg.degree[q] <= 4)
    with pytest.raises(ValueError):
        NotabilityBand(5, 2)
    assert band_from_percentiles(list(range(1, 201))) == NotabilityBand(150, 199)


def test_default_band_follows_its_documented_rule():
    kg = load_kg()
    pool = sorted({q for d in domains_by_name(None) for q in d.members(kg) if kg.english_label(q)})
    derived = band_from_percentiles([kg.degree[q] for q in pool])
    assert DEFAULT_BAND.low == derived.low == 3
    assert 20 <= derived.high < 25 and DEFAULT_BAND.high == 20  # p99.5 (~21.8), rounded down to 20


def test_candidates_are_seeded_and_meet_the_contract(tmp_path):
    kg = load_kg()
    domains = domains_by_name(["writers", "films"])
    one = build_candidates(kg, domains, DEFAULT_BAND, FactRules(), n=6, seed=3)
    two = build_candidates(kg, domains, DEFAULT_BAND, FactRules(), n=6, seed=3)
    other = build_candidates(kg, domains, DEFAULT_BAND, FactRules(), n=6, seed=4)
    assert [c.to_record() for c in one.candidates] == [c.to_record() for c in two.candidates]
    assert [c.anchor for c in one.candidates] != [c.anchor for c in other.candidates]
    assert [c.domain for c in one.candidates] == ["writers", "films"] * 3  # the domains take turns
    path = write_build(one, kg, tmp_path)
    assert check_contract(path, kg) == []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        assert all(n >= 2 for n in rec["n_match_each"]) and 1 <= rec["n_match_all"] <= 3
        assert rec["anchor"] in rec["answers"] and rec["answers"] == sorted(rec["answers"])
        assert DEFAULT_BAND.contains(kg.degree[rec["anchor"]]) and kg.english_label(rec["anchor"])
    tried = [json.loads(x) for x in (tmp_path / "anchors.jsonl").read_text().splitlines()]
    assert len(tried) == len(one.tried) and all(r["status"] in ("candidate", "no_fact_set") for r in tried)
    assert all(r.get("reason") for r in tried if r["status"] == "no_fact_set")


def test_contract_checker_catches_a_wrong_count(tmp_path):
    kg = tiny()
    bad = {"anchor": "W1", "facts": [[SCHOOL, "S"], [CLUB, "C"]], "n_match_each": [4, 3], "n_match_all": 2,
           "answers": ["W1", "W6"]}
    (tmp_path / "c.jsonl").write_text(json.dumps(bad) + "\n")
    problems = check_contract(tmp_path / "c.jsonl", kg)
    assert len(problems) == 1 and "answers" in problems[0]  # W6 has S and C: answers are W1 and W6
