"""Online Wikidata as a :class:`~cresowlve_core.sources.kg.KnowledgeSource`, through SPARQL.

For users with network access: ``WikidataSparql()`` can replace the shipped subset in the
synthetic pipeline. It builds the queries the paper describes (App. D): anchors of a type
inside a *sitelinks* band (default 20–100, the paper's "identifiable but not iconic"), the
anchor's facts, and how many subjects share one fact or all of them. Notability is the
sitelink count.

The query builders (``*_query``) are pure functions, and every id is validated before it goes
into a query (``Q123`` / ``P123`` only), so no user text reaches the endpoint. Responses are
parsed from the standard SPARQL 1.1 JSON results format. ``fetch`` is injectable: tests replay
response fixtures (``tests/fixtures/sparql/``); the default sends an HTTP GET to the Wikidata
Query Service with a descriptive User-Agent, as its usage policy asks, retrying 429/5xx.
Results are memoised per query for the object's lifetime.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cresowlve_core.failures import InputError, StoppedError
from cresowlve_core.sources.kg import PERIPHERAL_RELATIONS, Fact

WDQS_URL = "https://query.wikidata.org/sparql"
USER_AGENT = "cresowlve-synthetic/0.1 (research prototype; https://github.com/mismayil/cresowlve)"
PREFIXES = (
    "PREFIX wd: <http://www.wikidata.org/entity/>\n"
    "PREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
    "PREFIX wikibase: <http://wikiba.se/ontology#>\n"
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    "PREFIX skos: <http://www.w3.org/2004/02/skos/core#>\n"
    "PREFIX schema: <http://schema.org/>\n"
)
_QID = re.compile(r"Q[1-9][0-9]*")
_PID = re.compile(r"P[1-9][0-9]*")
_ENTITY_IRI = "http://www.wikidata.org/entity/"
_DIRECT_IRI = "http://www.wikidata.org/prop/direct/"
#: WDQS writes an "unknown value" (somevalue) as a skolem IRI under this base; before skolemisation,
#: and on other endpoints, it is a blank node (``_:t123`` here)
_SOME_VALUE_IRI = "http://www.wikidata.org/.well-known/genid/"

Fetch = Callable[[str], dict[str, Any]]


class SparqlError(StoppedError, RuntimeError):
    """The endpoint failed, or answered something that is not SPARQL JSON results."""


def _qid(x: str) -> str:
    if not isinstance(x, str) or not _QID.fullmatch(x):
        raise InputError(f"not a Wikidata item id: {x!r}")
    return x


def _pid(x: str) -> str:
    if not isinstance(x, str) or not _PID.fullmatch(x):
        raise InputError(f"not a Wikidata property id: {x!r}")
    return x


def _values(var: str, ids: Iterable[str], prefix: str, check: Callable[[str], str]) -> str:
    items = " ".join(f"{prefix}:{check(i)}" for i in ids)
    if not items:
        raise InputError(f"VALUES ?{var} needs at least one id")
    return f"VALUES ?{var} {{ {items} }}"


# --------------------------------------------------------------------------- query builders


def anchors_query(types: Sequence[str], min_sitelinks: int, max_sitelinks: int, limit: int, seed: int = 0) -> str:
    """Entities of any of ``types`` with an English label and sitelinks in the band (the paper's
    anchor query), with their description; ``limit`` of them in a seeded pseudo-random order
    (``MD5(item IRI + seed)``), so the sample is not biased towards low QIDs."""
    if not 0 <= min_sitelinks <= max_sitelinks or limit < 1:
        raise InputError("need 0 <= min_sitelinks <= max_sitelinks and limit >= 1")
    return (PREFIXES + "SELECT DISTINCT ?item ?sitelinks ?label ?description WHERE {\n"
            f"  {_values('type', types, 'wd', _qid)}\n"
            "  ?item wdt:P31 ?type ;\n"
            "        wikibase:sitelinks ?sitelinks ;\n"
            "        rdfs:label ?label .\n"
            "  FILTER(LANG(?label) = \"en\")\n"
            f"  FILTER(?sitelinks >= {int(min_sitelinks)} && ?sitelinks <= {int(max_sitelinks)})\n"
            "  OPTIONAL { ?item schema:description ?description . FILTER(LANG(?description) = \"en\") }\n"
            "}\n"
            f"ORDER BY MD5(CONCAT(STR(?item), \"{int(seed)}\"))\nLIMIT {int(limit)}\n")


def facts_query(qid: str, relations: Sequence[str]) -> str:
    """The ``(relation, object)`` facts of ``qid`` over ``relations`` (item objects only)."""
    props = " ".join(f"wdt:{_pid(p)}" for p in relations)
    if not props:
        raise InputError("facts_query needs at least one relation")
    return (PREFIXES + "SELECT ?p ?o WHERE {\n"
            f"  VALUES ?p {{ {props} }}\n"
            f"  wd:{_qid(qid)} ?p ?o .\n"
            "  FILTER(STRSTARTS(STR(?o), \"http://www.wikidata.org/entity/Q\"))\n"
            "}\nORDER BY ?p ?o\n")


def count_query(relation: str, obj: str) -> str:
    """How many subjects have ``relation obj``."""
    return (PREFIXES + "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {\n"
            f"  ?s wdt:{_pid(relation)} wd:{_qid(obj)} .\n"
            "}\n")


def subjects_query(facts: Sequence[Fact], limit: int = 1000) -> str:
    """Subjects having every fact (at most ``limit``)."""
    if not facts:
        raise InputError("subjects_query needs at least one fact")
    lines = "".join(f"  ?s wdt:{_pid(p)} wd:{_qid(o)} .\n" for p, o in facts)
    return PREFIXES + "SELECT DISTINCT ?s WHERE {\n" + lines + f"}}\nORDER BY ?s\nLIMIT {int(limit)}\n"


def entity_query(qid: str) -> str:
    """English label, aliases, description, types and sitelinks of one entity."""
    q = _qid(qid)
    return (PREFIXES + "SELECT ?label ?alias ?description ?type ?sitelinks WHERE {\n"
            f"  OPTIONAL {{ wd:{q} rdfs:label ?label . FILTER(LANG(?label) = \"en\") }}\n"
            f"  OPTIONAL {{ wd:{q} skos:altLabel ?alias . FILTER(LANG(?alias) = \"en\") }}\n"
            f"  OPTIONAL {{ wd:{q} schema:description ?description . FILTER(LANG(?description) = \"en\") }}\n"
            f"  OPTIONAL {{ wd:{q} wdt:P31 ?type . }}\n"
            f"  OPTIONAL {{ wd:{q} wikibase:sitelinks ?sitelinks . }}\n"
            "}\n")


def property_query(pid: str) -> str:
    """English label and description of one property (a fact's relation, shown beside its object)."""
    p = _pid(pid)
    return (PREFIXES + "SELECT ?label ?description WHERE {\n"
            f"  OPTIONAL {{ wd:{p} rdfs:label ?label . FILTER(LANG(?label) = \"en\") }}\n"
            f"  OPTIONAL {{ wd:{p} schema:description ?description . FILTER(LANG(?description) = \"en\") }}\n"
            "}\n")


# --------------------------------------------------------------------------- responses


def bindings(response: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of a SPARQL JSON result as ``{var: value}``."""
    try:
        rows = response["results"]["bindings"]
    except (KeyError, TypeError) as exc:
        raise SparqlError(f"not a SPARQL JSON result (no results.bindings): {str(response)[:200]}") from exc
    if not isinstance(rows, list):
        raise SparqlError(f"not a SPARQL JSON result (results.bindings is not a list): {str(rows)[:200]}")
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not all(isinstance(v, dict) for v in row.values()):
            raise SparqlError(f"not a SPARQL JSON result (row {i} of results.bindings is not a mapping of "
                              f"variables to terms): {str(row)[:200]}")
    return [{k: _term(v) for k, v in row.items()} for row in rows]


def _with(rows: list[dict[str, str]], *names: str) -> list[dict[str, str]]:
    """``rows``, each checked to bind ``names`` (the query's variables that are not OPTIONAL)."""
    for i, row in enumerate(rows, 1):
        if missing := [n for n in names if n not in row]:
            raise SparqlError(f"the endpoint's row {i} binds no {', '.join(missing)} (a variable the query always "
                              f"binds): {str(row)[:200]}")
    return rows


def _term(binding: dict[str, Any]) -> str:
    """A bound value as text; a blank node keeps its ``_:`` prefix, so it is never read as an IRI or a literal."""
    value = str(binding.get("value", ""))
    return f"_:{value}" if binding.get("type") == "bnode" else value


def _is_some_value(term: str) -> bool:
    """Wikidata's "unknown value": a skolem IRI or a blank node, not an entity."""
    return term.startswith((_SOME_VALUE_IRI, "_:"))


def _local(iri: str, base: str) -> str:
    if not iri.startswith(base):
        raise SparqlError(f"unexpected IRI {iri!r} (expected {base}...)")
    return iri[len(base):]


def http_fetch(url: str = WDQS_URL, *, timeout_s: float = 60.0, attempts: int = 4,
               user_agent: str = USER_AGENT) -> Fetch:
    """A fetch function for a live endpoint (GET, ``format=json``), retrying 429 and 5xx."""
    import httpx

    def fetch(query: str) -> dict[str, Any]:
        delay = 1.0
        last = ""
        for attempt in range(attempts):
            try:
                r = httpx.get(url, params={"query": query, "format": "json"}, timeout=timeout_s,
                              headers={"User-Agent": user_agent, "Accept": "application/sparql-results+json"})
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if r.status_code == 200:
                    try:
                        return r.json()
                    except ValueError as exc:
                        raise SparqlError(f"{url} answered non-JSON: {r.text[:200]!r}") from exc
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                if r.status_code not in (429, 500, 502, 503, 504):
                    break
                delay = float(r.headers.get("Retry-After", delay)) if r.headers.get("Retry-After", "").isdigit() else delay
            if attempt + 1 < attempts:
                time.sleep(delay)
                delay *= 2
        raise SparqlError(f"SPARQL query to {url} failed: {last}")

    return fetch


class WikidataSparql:
    """Wikidata through SPARQL, satisfying :class:`~cresowlve_core.sources.kg.KnowledgeSource`."""

    name = "wikidata-sparql"
    notability_measure = "sitelinks"

    def __init__(self, fetch: Fetch | None = None, *, sitelinks_band: tuple[int, int] = (20, 100),
                 anchor_limit: int = 500, subject_limit: int = 1000, seed: int = 0):
        self.fetch = fetch or http_fetch()
        self.seed = seed
        self._known: dict[str, dict[str, Any]] = {}  # label/description/sitelinks seen in anchor rows
        self.sitelinks_band = sitelinks_band
        self.anchor_limit = anchor_limit
        self.subject_limit = subject_limit
        self._memo: dict[str, list[dict[str, str]]] = {}
        self.n_queries = 0

    def _rows(self, query: str) -> list[dict[str, str]]:
        if query not in self._memo:
            self.n_queries += 1
            self._memo[query] = bindings(self.fetch(query))
        return self._memo[query]

    def _entity(self, qid: str) -> dict[str, Any]:
        rows = self._rows(entity_query(qid))
        first = lambda k: next((r[k] for r in rows if r.get(k)), None)  # noqa: E731
        return {
            "label": first("label"),
            "description": first("description"),
            "aliases": list(dict.fromkeys(r["alias"] for r in rows if r.get("alias"))),
            # an "instance of: unknown value" names no class
            "types": frozenset(_local(r["type"], _ENTITY_IRI) for r in rows
                               if r.get("type") and not _is_some_value(r["type"])),
            "sitelinks": int(first("sitelinks") or 0),
        }

    def english_label(self, qid: str) -> str | None:
        """The English label of an item (``Q…``) or of a relation (``P…``), as the in-memory graph
        gives both."""
        if qid in self._known:
            return self._known[qid]["label"]
        if _PID.fullmatch(qid):
            return next((r["label"] for r in self._rows(property_query(qid)) if r.get("label")), None)
        return self._entity(qid)["label"]

    def aliases_of(self, qid: str) -> list[str]:
        return list(self._entity(qid)["aliases"])

    def description_of(self, qid: str) -> str | None:
        if qid in self._known:
            return self._known[qid]["description"]
        return self._entity(qid)["description"]

    def types_of(self, qid: str) -> frozenset[str]:
        return self._entity(qid)["types"]

    def notability(self, qid: str) -> int:
        if qid in self._known:
            return int(self._known[qid]["sitelinks"])
        return int(self._entity(qid)["sitelinks"])

    def facts_of(self, qid: str, relations: Sequence[str] | None = None) -> list[Fact]:
        rows = _with(self._rows(facts_query(qid, relations or PERIPHERAL_RELATIONS)), "p", "o")
        return sorted({(_local(r["p"], _DIRECT_IRI), _local(r["o"], _ENTITY_IRI)) for r in rows})

    def n_subjects_with(self, relation: str, obj: str) -> int:
        rows = _with(self._rows(count_query(relation, obj)), "n")
        return int(rows[0]["n"]) if rows else 0

    def subjects_with(self, relation: str, obj: str) -> list[str]:
        return self.subjects_with_all([(relation, obj)])

    def subjects_with_all(self, facts: Sequence[Fact]) -> list[str]:
        rows = _with(self._rows(subjects_query(facts, self.subject_limit)), "s")
        return sorted({_local(r["s"], _ENTITY_IRI) for r in rows})

    def entities_of_types(self, types: Iterable[str]) -> list[str]:
        lo, hi = self.sitelinks_band
        rows = _with(self._rows(anchors_query(list(types), lo, hi, self.anchor_limit, self.seed)), "item")
        for r in rows:
            q = _local(r["item"], _ENTITY_IRI)
            self._known.setdefault(q, {"label": r.get("label") or None, "description": r.get("description") or None,
                                       "sitelinks": int(r.get("sitelinks") or 0)})
        return sorted({_local(r["item"], _ENTITY_IRI) for r in rows})
