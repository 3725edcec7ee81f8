"""Record types shared by every stage: a question as it comes from a pack, and a benchmark item.

The benchmark item follows the published schema of ``mismayil/cresowlve`` (configs ``en`` and ``ru``):
``id, question, answer, difficulty, explanation, other_answers, knowledge_domains,
creative_domains, cultures``. One :class:`Item` holds both language views.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

Lang = Literal["en", "ru"]
LANGS: tuple[Lang, ...] = ("en", "ru")

#: an item's annotated reasoning types: the analysis leaves ``factual`` items out of Table 1's creative subset
REASONING_TYPES = ("creative", "factual")

PUBLISHED_FIELDS = (
    "id",
    "question",
    "answer",
    "difficulty",
    "explanation",
    "other_answers",
    "knowledge_domains",
    "creative_domains",
    "cultures",
)


def _normalise_for_id(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold().replace("ё", "е")
    text = re.sub(r"[^\w]+", " ", text)
    return " ".join(text.split())


def content_id(question: str, answer: str) -> str:
    """Stable id: ``chgk_`` + 10 hex digits of SHA-256 over the normalised question and answer."""
    key = _normalise_for_id(question) + "\x1f" + _normalise_for_id(answer)
    return "chgk_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]


class ChgkQuestion(BaseModel):
    """One question block as parsed from a db.chgk.info text pack or a 4s pack.

    A block that could not be parsed cleanly is still returned, with ``flags`` naming why.
    """

    id: str
    number: str | None = None
    question: str = ""
    answer: str = ""
    other_answers: str | None = None
    rejected_answers: str | None = None
    comment: str | None = None
    sources: list[str] = Field(default_factory=list)
    authors: list[str] = Field(default_factory=list)
    tournament: str | None = None
    tour: str | None = None
    date: str | None = None
    handout: str | None = None
    taken: int | None = None
    teams: int | None = None
    take_rate: float | None = None
    difficulty: int | None = None
    source_file: str | None = None
    encoding: str | None = None
    raw: str = ""
    flags: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.flags


class ItemView(BaseModel):
    """The language-specific part of an item."""

    question: str
    answer: str
    explanation: str | None = None
    other_answers: str | None = None


class Item(BaseModel):
    """A bilingual CresOWLve benchmark item."""

    id: str
    difficulty: int | None = None
    knowledge_domains: list[str] = Field(default_factory=list)
    creative_domains: list[str] = Field(default_factory=list)
    cultures: list[str] = Field(default_factory=list)
    reasoning_type: str | None = None  # one of REASONING_TYPES (any case) where annotated
    atomic_facts: list[str] | None = None
    en: ItemView | None = None
    ru: ItemView | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    #: the hub snapshot file (``sources.hub.load_published``) or the user's items file (``sources.sample.load_items``)
    #: the item was read from; never read from or written to an items file, so an item saved and read again
    #: names the file it was read from, not the hub
    _loaded_from: dict[str, Any] | None = PrivateAttr(default=None)

    def view(self, lang: Lang) -> ItemView:
        v = getattr(self, lang)
        if v is None:
            raise KeyError(f"item {self.id} has no {lang!r} view")
        return v

    def has(self, lang: Lang) -> bool:
        return getattr(self, lang) is not None

    def published_row(self, lang: Lang) -> dict[str, Any]:
        """The item as one row of the published ``lang`` config."""
        v = self.view(lang)
        return {
            "id": self.id,
            "question": v.question,
            "answer": v.answer,
            "difficulty": self.difficulty,
            "explanation": v.explanation,
            "other_answers": v.other_answers,
            "knowledge_domains": list(self.knowledge_domains),
            "creative_domains": list(self.creative_domains),
            "cultures": list(self.cultures),
        }
