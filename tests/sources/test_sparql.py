"""The SPARQL source: builders reproduce the fixture queries exactly; responses parse; it drives stage 2."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import pytest

from cresowlve_core.sources import sparql
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.domains import PERIPHERAL_RELATIONS
from cresowlve_core.synthetic.facts import FactRules, choose_facts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sparql"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def replay() -> tuple[sparql.Fetch, list[str]]:
    """A fetch that answers only the recorded queries (anything else fails the test)."""
    table = {f["query"]: f["response"] for f in (json.loads(p.read_text()) for p in FIXTURES.glob("*.json"))}
    sent: list[str] = []

    def fetch(query: str) -> dict:
        sent.append(query)
        if query not in table:
            raise AssertionError(f"unrecorded query:\n{query}")
        return table[query]

    return fetch, sent


def test_builders_reproduce_the_fixture_queries():
    assert sparql.anchors_query(["Q5"], 20, 100, 3, 0) == fixture("anchors_humans")["query"]
    assert sparql.entity_query("Q109847") == fixture("entity_Q109847")["query"]
    assert sparql.facts_query("Q109847", PERIPHERAL_RELATIONS) == fixture("facts_Q109847")["query"]
    assert sparql.count_query("P463", "Q414188") == fixture("count_P463_Q414188")["query"]
    two = [("P463", "Q414188"), ("P463", "Q463303")]
    assert sparql.subjects_query(two) == fixture("subjects_P463_Q414188_P463_Q463303")["query"]
    q = sparql.anchors_query(["Q5"], 20, 100, 3, 0)
    assert "wikibase:sitelinks ?sitelinks" in q and "?sitelinks >= 20 && ?sitelinks <= 100" in q


@pytest.mark.parametrize("bad", ["Q1 } DROP", "q5", "P31", "", "Q0"])
def test_ids_are_validated_before_they_reach_a_query(bad):
    with pytest.raises(ValueError):
        sparql.entity_query(bad)
    with pytest.raises(ValueError):
        sparql.count_query("P463 ?x", "Q1")


def test_source_answers_from_the_fixtures():
    fetch, sent = replay()
    src = sparql.WikidataSparql(fetch, sitelinks_band=(20, 100), anchor_limit=3)
    assert isinstance(src, KnowledgeSource)
    assert src.entities_of_types(["Q5"]) == ["Q109847", "Q558844", "Q90"]
    assert src.notability("Q90") == 99 and src.english_label("Q558844") == "Jeff Chandler"
    assert src.description_of("Q90") is None
    assert src.aliases_of("Q109847") == ["Gunther Wilke"] and src.types_of("Q109847") == frozenset({"Q5"})
    assert src.facts_of("Q109847") == [("P463", "Q2370801"), ("P463", "Q414188"), ("P463", "Q463303")]
    assert src.n_subjects_with("P463", "Q414188") == 412
    assert src.subjects_with_all([("P463", "Q414188"), ("P463", "Q463303")]) == ["Q109847", "Q57065"]
    n = len(sent)
    src.subjects_with_all([("P463", "Q414188"), ("P463", "Q463303")])
    assert len(sent) == n  # memoised


def test_fact_choice_runs_on_the_sparql_source():
    fetch, _ = replay()
    src = sparql.WikidataSparql(fetch)
    got = choose_facts(src, "Q109847", "scientists", PERIPHERAL_RELATIONS, FactRules(max_answers=3), seed=0)
    assert not isinstance(got, str)
    # the only set matching the anchor alone needs all three academies
    assert got.facts == (("P463", "Q2370801"), ("P463", "Q414188"), ("P463", "Q463303"))
    assert got.n_match_each == (7800, 412, 14210) and got.answers == ("Q109847",)
    assert got.notability == 24


def test_a_candidate_record_names_its_relations_by_their_labels():
    """``candidates.jsonl`` labels each fact's relation (a ``P…`` id) as the in-memory graph does:
    the relation's label is asked for, never refused as "not a Wikidata item id"."""
    fetch, sent = replay()
    src = sparql.WikidataSparql(fetch)
    got = choose_facts(src, "Q109847", "scientists", PERIPHERAL_RELATIONS, FactRules(max_answers=3), seed=0)
    assert not isinstance(got, str)
    rec = got.to_record(src)
    assert rec["anchor_label"] == "Günther Wilke"
    assert [p for p, _ in rec["fact_labels"]] == ["member of"] * 3
    assert sparql.property_query("P463") in sent and src.english_label("P463") == "member of"


@pytest.mark.parametrize("unknown", [
    {"type": "uri", "value": "http://www.wikidata.org/.well-known/genid/a8d14fa93486370345412093add8f50c"},
    {"type": "bnode", "value": "t9283749"},
])
def test_an_unknown_value_instance_of_names_no_class_and_stops_nothing(unknown):
    """WDQS answers "instance of: unknown value" with a skolem IRI (a blank node before skolemisation;
    both forms from mediawiki.org, Wikidata_Query_Service/Blank_Node_Skolemization): the entity's
    label is still read and the unknown value is no class, where it used to stop the whole run."""
    response = copy.deepcopy(fixture("entity_Q414188")["response"])
    response["results"]["bindings"].append({"type": unknown})
    src = sparql.WikidataSparql(lambda query: response)
    assert src.english_label("Q414188") == "Göttingen Academy of Sciences"
    assert src.types_of("Q414188") == frozenset({"Q1966910"})


def test_bad_response_is_a_clear_error():
    with pytest.raises(sparql.SparqlError, match="results.bindings"):
        sparql.bindings({"oops": 1})


@pytest.mark.parametrize(("bindings", "says"), [
    ({"p": {"type": "uri", "value": "http://www.wikidata.org/prop/direct/P31"}}, "row 1 binds no o"),
    ("P31 Q5", "row 1 of results.bindings is not a mapping"),
    ({"p": "P31", "o": "Q5"}, "row 1 of results.bindings is not a mapping"),
], ids=["a-variable-missing", "a-row-of-text", "terms-of-text"])
def test_a_row_that_breaks_the_sparql_json_format_is_a_clear_error(bindings, says):
    """An endpoint's row without a variable the query always binds, or rows that are not SPARQL JSON
    terms, raised KeyError or AttributeError with a traceback; now the source's own error, naming the row."""
    src = sparql.WikidataSparql(lambda query: {"head": {"vars": ["p", "o"]}, "results": {"bindings": [bindings]}})
    with pytest.raises(sparql.SparqlError, match=says):
        src.facts_of("Q42")


def test_http_fetch_sends_json_get_and_retries(monkeypatch):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            return httpx.Response(503, text="busy", headers={"Retry-After": "0"})
        return httpx.Response(200, json=fixture("count_P463_Q414188")["response"])

    transport = httpx.MockTransport(handler)
    monkeypatch.setattr(httpx, "get", lambda url, **kw: httpx.Client(transport=transport).get(url, **kw))
    monkeypatch.setattr(sparql.time, "sleep", lambda s: None)
    fetch = sparql.http_fetch("https://example.invalid/sparql")
    assert sparql.bindings(fetch("SELECT 1"))[0]["n"] == "412"
    assert len(calls) == 2 and calls[1].url.params["format"] == "json"
    assert "cresowlve" in calls[1].headers["User-Agent"]
