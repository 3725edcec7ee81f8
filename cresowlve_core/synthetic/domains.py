"""Target domains of anchor entities, defined by entity types (``instance of``).

The Wikidata subset has no occupation (P106) triples, so the person domains (writers,
musicians, scientists) are humans (Q5) whose English description names the occupation
(``description_pattern``, a case-insensitive whole-word regular expression). Every domain is
configurable: pass your own :class:`Domain` list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from cresowlve_core.failures import InputError
from cresowlve_core.sources.kg import PERIPHERAL_RELATIONS, KnowledgeSource

HUMAN = "Q5"


@dataclass(frozen=True)
class Domain:
    """Anchors of a domain: instances of any of ``types``, optionally filtered by description."""

    name: str
    types: tuple[str, ...]
    description_pattern: str | None = None
    relations: tuple[str, ...] = field(default=PERIPHERAL_RELATIONS)

    @cached_property
    def _regex(self) -> re.Pattern[str] | None:
        return re.compile(rf"\b(?:{self.description_pattern})\b", re.I) if self.description_pattern else None

    def members(self, source: KnowledgeSource) -> list[str]:
        """Sorted entities of the domain in ``source``."""
        found = source.entities_of_types(self.types)
        if self._regex is None:
            return found
        rx = self._regex
        return [q for q in found if rx.search(source.description_of(q) or "")]


DEFAULT_DOMAINS: tuple[Domain, ...] = (
    Domain("writers", (HUMAN,), r"writer|novelist|poet|playwright|author|essayist|journalist|screenwriter"),
    Domain("musicians", (HUMAN,), r"musician|singer|composer|guitarist|pianist|rapper|songwriter|conductor|violinist|drummer"),
    Domain("scientists", (HUMAN,), r"scientist|physicist|chemist|mathematician|biologist|astronomer|economist|engineer|physician|inventor"),
    Domain("films", ("Q11424",)),  # film
    Domain("books", ("Q7725634", "Q571", "Q47461344")),  # literary work, book, written work
    Domain("places", ("Q515", "Q1549591", "Q1637706", "Q200250")),  # city, big city, million city, metropolis
)


def domains_by_name(names: Sequence[str] | None) -> list[Domain]:
    """The default domains named (all of them for ``None``); an unknown name is an error."""
    if names is None:
        return list(DEFAULT_DOMAINS)
    known = {d.name: d for d in DEFAULT_DOMAINS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"unknown domain(s) {unknown}; known: {sorted(known)}")
    return [known[n] for n in names]
