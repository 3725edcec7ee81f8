"""CREATE queries: the shipped set and Algorithm 1 on the shipped Wikidata subset."""

from __future__ import annotations

import pytest

from cresowlve_core.create.queries import (
    WORK_RELATIONS,
    build_queries,
    clean_verbalisation,
    load_queries,
    relation_classes,
    sample_source_paths,
)
from cresowlve_core.llm.types import Completion, LLMError, LLMFatalError
from cresowlve_core.sources.kg import KnowledgeGraph, load_kg


def test_shipped_queries():
    qs = load_queries()
    assert len(qs) == 24
    assert len({q.id for q in qs}) == 24
    q = qs[0]
    assert (q.entity_a, q.rel_b, q.entity_b) == ("Morton Gould", "discography", "Benny Carter discography")
    assert q.id == "Q935843__P166__morton-gould__benny-carter-discography"
    assert len(q.source_path) == 3 and q.source_path[-1][1] == q.rel_b
    assert load_queries(limit=3) == qs[:3]


def tiny_kg() -> KnowledgeGraph:
    triples = [
        ("A1", "P166", "PRIZE"), ("A2", "P166", "PRIZE"),
        ("A2", "P19", "CITY"), ("A2", "P31", "HUMAN"),
        ("A1", "P19", "TOWN"),
        ("FILM", "P161", "B1"), ("FILM", "P161", "B2"), ("B2", "P26", "C"),
        ("B2", "P27", "D"), ("B1", "P27", "D"),  # both satisfy (P27, D): never a usable target
        ("X", "P1", "A1"), ("X", "P1", "A2"), ("X", "P1", "B1"), ("X", "P1", "B2"),
    ]  # fmt: skip
    labels = {q: q.title() for q in ("A1", "A2", "PRIZE", "CITY", "TOWN", "HUMAN", "FILM", "B1", "B2", "C", "D", "X")}
    rels = {
        "P166": "award received", "P19": "place of birth", "P31": "instance of", "P161": "cast member",
        "P26": "spouse", "P27": "country of citizenship", "P1": "p1",
    }  # fmt: skip
    return KnowledgeGraph(triples, labels=labels, descriptions={"A1": "a person"}, relation_labels=rels)


def test_relation_classes_direction():
    kg = tiny_kg()
    assert relation_classes(kg, "P166") == {"PRIZE": ["A1", "A2"]}
    assert "P161" in WORK_RELATIONS and relation_classes(kg, "P161") == {"FILM": ["B1", "B2"]}


def test_algorithm_1_on_a_tiny_graph():
    kg = tiny_kg()
    sources = sample_source_paths(kg, ["P166", "P161", "P2175"], per_relation=1, seed=0, min_degree=1)
    by_rel = {s.relation: s for s in sources}
    assert set(by_rel) == {"P166", "P161"}  # P2175 has no triples
    award = by_rel["P166"]
    # the expanded member's informative edge: P31 is excluded as uninformative
    assert award.rel_b == "P19" and award.triples[2][1:] in {("P19", "CITY"), ("P19", "TOWN")}
    x1, x2 = award.triples[0][0], award.triples[1][0]
    assert {x1, x2} == {"A1", "A2"} and award.entity_a == x1 and award.triples[2][0] == x2
    film = by_rel["P161"]
    assert film.triples[0] == ("FILM", "P161", "B1")  # the film is the subject; B1 starts
    assert film.triples[2] == ("B2", "P26", "C")  # (P27, D) is excluded: B1 satisfies it already


def test_build_queries_is_seeded_and_consistent():
    kg = load_kg()
    a = build_queries(kg, per_relation=1, seed=3)
    b = build_queries(kg, per_relation=1, seed=3)
    assert [q.model_dump() for q in a] == [q.model_dump() for q in b]
    assert a != build_queries(kg, per_relation=1, seed=4)
    assert len(a) >= 6  # P39, P2175, P2293 have no triples here; P40 classes are all singletons
    for q in a:
        (s1, r, o1), (s2, r2, o2), (x2, p, y) = q.source_triples_qid
        assert r == r2 and p not in {"P31", "P21", "P279"}
        if r in WORK_RELATIONS:
            assert s1 == s2 and x2 == o2 and q.description == f"{s1}__{r}"
        else:
            assert o1 == o2 and x2 == s2 and q.description == f"{o1}__{r}"
        assert q.entity_b == kg.label(y) and q.rel_b == kg.label(p)
        assert not kg.has(kg_qid(q), p, y)
        assert q.entity_a in q.query and q.entity_b in q.query and q.query.endswith("?")


def kg_qid(q) -> str:
    """The QID of entity_a (x1): the object of a film triple, else the subject."""
    (s, r, o), _, _ = q.source_triples_qid
    return o if r in WORK_RELATIONS else s


class VerbaliseClient:
    def __init__(self, text: str | None, error: type[LLMError] = LLMError):
        self.text = text
        self.error = error
        self.n = 0

    async def complete(self, messages, params, *, prompt_version):
        self.n += 1
        assert prompt_version == "create_verbalise@1" and "Target entity:" in messages[0]["content"]
        if self.text is None:
            raise self.error("down")
        return Completion(text=self.text)


def test_llm_verbalisation_and_template_fallback():
    kg = tiny_kg()
    good = VerbaliseClient('Question: "What are different ways of connecting A1 and someone born in City?"\n')
    qs = build_queries(kg, relations=["P166"], per_relation=1, min_degree=1, verbalise="llm", client=good)
    assert good.n == 1 and qs[0].query == "What are different ways of connecting A1 and someone born in City?"
    down = VerbaliseClient(None)
    qs = build_queries(kg, relations=["P166"], per_relation=1, min_degree=1, verbalise="llm", client=down)
    assert qs[0].query.startswith("What are different ways of connecting ") and "place of birth" in qs[0].query
    with pytest.raises(LLMFatalError):  # a wrong key stops the build instead of silently templating
        build_queries(kg, relations=["P166"], per_relation=1, min_degree=1, verbalise="llm",
                      client=VerbaliseClient(None, LLMFatalError))
    with pytest.raises(ValueError):
        build_queries(kg, verbalise="llm")
    assert clean_verbalisation("no question here") is None


def test_shipped_queries_and_recorded_runs_are_found_with_a_data_dir_elsewhere(tmp_path):
    """CRESOWLVE_DATA_DIR pointing at an empty folder hid the shipped queries (QueriesFileError in 07_create)."""
    import os
    import subprocess
    import sys

    code = ("from cresowlve_core.create.queries import load_queries; from cresowlve_core.create.scored import "
            "recorded_dir; print(len(load_queries()), recorded_dir().is_dir())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CRESOWLVE_DATA_DIR": str(tmp_path / "empty")})
    assert out.stdout.split() == ["24", "True"], out.stderr[-1000:]


def test_a_templated_query_says_so_when_the_model_was_asked(caplog):
    """verbalise="llm" falls back to the template when the model refuses, fails or writes no question.
    Before: the query carried the template's text with nothing saying the model did not write it;
    now each query's ``verbalisation`` says how it was written, and one WARNING counts the fallbacks."""
    from outcome_double import refused

    class Refusing:
        async def complete(self, messages, params, *, prompt_version):
            return refused()

    kg = tiny_kg()
    kwargs = dict(relations=["P166"], per_relation=1, min_degree=1)
    good = VerbaliseClient("What are different ways of connecting A1 and someone born in City?")
    assert [q.verbalisation for q in build_queries(kg, verbalise="llm", client=good, **kwargs)] == ["llm"]
    assert [q.verbalisation for q in build_queries(kg, **kwargs)] == ["template"]
    for client, why in ((Refusing(), "the model refused"), (VerbaliseClient(None), "the call failed: LLMError"),
                        (VerbaliseClient("Sure! Here it is."), "no question in the model's text")):
        caplog.clear()
        with caplog.at_level("WARNING", logger="cresowlve_core.create.queries"):
            (q,) = build_queries(kg, verbalise="llm", client=client, **kwargs)
        assert q.verbalisation == f"template ({why})" and "place of birth" in q.query
        assert [r.getMessage() for r in caplog.records] == [
            f"1 of 1 queries verbalised by the template instead of the model (the first: template ({why})); "
            "each query's `verbalisation` says how it was written"]
