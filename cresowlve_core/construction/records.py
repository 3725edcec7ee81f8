"""The record a build carries from step to step, and what every step returns.

A :class:`Candidate` is one question on its way into the benchmark: its Russian view, the
English view once translated, where it came from, every flag raised on the way and every step's
verdict. Steps never modify a candidate in place; they return copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from cresowlve_core.items import Item, ItemView


class Candidate(BaseModel):
    """A question in a build (see the module docstring)."""

    id: str
    difficulty: int | None = None
    ru: ItemView
    en: ItemView | None = None
    handout: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    parser_flags: list[str] = Field(default_factory=list, description="flags of the pack parser, carried through")
    review_flags: list[str] = Field(default_factory=list, description="flags that ask a human to look")
    verdicts: dict[str, Any] = Field(default_factory=dict, description="step name -> that step's parsed output")
    reasoning_type: str | None = None
    concepts: list[str] = Field(default_factory=list)
    domains_free: list[str] = Field(default_factory=list, description="knowledge domains as the annotator wrote them")
    domains: list[str] = Field(default_factory=list, description="the paper's coarse groups")
    cultures: list[str] = Field(default_factory=list)
    atomic_facts: list[str] | None = None

    def with_verdict(self, step: str, verdict: Any, *, review_flags: Sequence[str] = (), **updates: Any) -> Candidate:
        """A copy with ``step``'s verdict recorded and ``review_flags`` added."""
        flags = [*self.review_flags, *(f"{step}:{f}" for f in review_flags if f"{step}:{f}" not in self.review_flags)]
        return self.model_copy(update={"verdicts": {**self.verdicts, step: verdict}, "review_flags": flags, **updates},
                               deep=True)

    def to_item(self) -> Item:
        """The benchmark item: coarse domains, concepts, cultures, reasoning type, atomic facts;
        provenance, verdicts and flags go to ``meta``."""
        return Item(
            id=self.id, difficulty=self.difficulty, knowledge_domains=list(self.domains),
            creative_domains=list(self.concepts), cultures=list(self.cultures), reasoning_type=self.reasoning_type,
            atomic_facts=self.atomic_facts, en=self.en, ru=self.ru,
            meta={"provenance": self.provenance, "verdicts": self.verdicts, "parser_flags": self.parser_flags,
                  "review_flags": self.review_flags, "domains_free": self.domains_free, "handout": self.handout},
        )


@dataclass
class StepOutput:
    """What one step did: the candidates going on, the ones it removed, and its counts."""

    name: str
    kept: list[Candidate]
    removed: list[Candidate] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None

    @property
    def n_in(self) -> int:
        return len(self.kept) + len(self.removed)

    def summary(self) -> dict[str, Any]:
        """Counts in and out plus the step's own counts (JSON-serialisable)."""
        return {"step": self.name, "n_in": self.n_in, "n_out": len(self.kept), "n_removed": len(self.removed),
                **self.counts, **({"stopped": self.stopped} if self.stopped else {})}
