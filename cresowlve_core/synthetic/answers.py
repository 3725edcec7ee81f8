"""Names of the valid answers: leak detection (stage 3) and alias-aware exact match (stage 4).

The valid answers of a candidate are *all* subjects having all its facts (``answers``), the
anchor first. Their names are English labels and aliases from the knowledge source.

* **Leaks.** A name leaks when its normalised form occurs as whole words in the normalised text
  (case-folded, NFKC, punctuation to spaces; :func:`cresowlve_core.evaluation.scoring.normalize`).
  Names shorter than :data:`SHORT_NAME` characters after normalising (``"MA"``, ``"GAB"``) are
  matched case-sensitively on the raw text instead, and names equal to a placeholder word are
  ignored. Tokens of a label of :data:`LABEL_TOKEN_MIN`+ letters (a surname, "Godfather") count
  too, since a surname alone gives the answer away.
* **Exact match.** A prediction is correct when it normalises to the label or an alias of any
  valid answer; the basis records which (``label:Q42`` / ``alias:Q42:Douglas Noël Adams``).
  The aliases file joins aliases with ``", "``, so an alias containing a comma comes back in
  pieces; a piece that is itself the label of *another* entity (``Massachusetts`` for Boston)
  or shorter than :data:`SHORT_NAME` characters is not accepted as an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cresowlve_core.evaluation.scoring import normalize
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.synthetic.verbalise import PLACEHOLDERS

SHORT_NAME = 4
LABEL_TOKEN_MIN = 5
_STOP = {"the", "and", "of", "for", "from", "with", "part", "university", "county", "river", "saint", "city",
         "national", "american", "british", "french", "german", "film", "movie", "house", "world"}


@dataclass(frozen=True)
class Name:
    qid: str
    text: str
    kind: str  # label | alias | label_token


def answer_names(source: KnowledgeSource, qids: Sequence[str], *, tokens: bool = True) -> list[Name]:
    """Labels, aliases and (with ``tokens``) long label tokens of every answer, de-duplicated."""
    out: list[Name] = []
    seen: set[tuple[str, str]] = set()

    def add(qid: str, text: str, kind: str) -> None:
        key = (qid, normalize(text))
        if key[1] and key not in seen:
            seen.add(key)
            out.append(Name(qid, text, kind))

    for q in qids:
        label = source.english_label(q)
        if label:
            add(q, label, "label")
            if tokens:
                for tok in normalize(label).split():
                    if len(tok) >= LABEL_TOKEN_MIN and tok not in _STOP:
                        add(q, tok, "label_token")
        for a in source.aliases_of(q):
            add(q, a, "alias")
    return out


def find_leaks(text: str, names: Sequence[Name]) -> list[Name]:
    """The names that occur in ``text`` (see the module docstring)."""
    norm = f" {normalize(text)} "
    hits = []
    for n in names:
        key = normalize(n.text)
        if n.text.strip() in PLACEHOLDERS or not key:
            continue
        if len(key) < SHORT_NAME:
            if re.search(rf"(?<!\w){re.escape(n.text.strip())}(?!\w)", text):
                hits.append(n)
        elif f" {key} " in norm:
            hits.append(n)
    return hits


def other_labels(source: KnowledgeSource) -> set[str] | None:
    """The normalised English labels of every entity of ``source`` (None for a source without a
    label table, e.g. online Wikidata): an alias piece equal to one of them names another entity."""
    labels = getattr(source, "labels", None)
    return {normalize(v) for v in labels.values()} if isinstance(labels, dict) else None


def accepted_names(source: KnowledgeSource, qids: Sequence[str], other_labels: set[str] | None = None) -> list[Name]:
    """The names exact match accepts: labels, and alias pieces that are long enough and not the
    label of another entity (``other_labels``: normalised labels of every other entity)."""
    names = answer_names(source, qids, tokens=False)
    own = {normalize(source.english_label(q) or "") for q in qids}
    keep = []
    for n in names:
        key = normalize(n.text)
        if n.kind == "alias" and (len(key) < SHORT_NAME or (other_labels and key in other_labels and key not in own)):
            continue
        keep.append(n)
    return keep


def match_answer(prediction: str | None, names: Sequence[Name]) -> str | None:
    """The basis of a correct prediction (``label:QID`` or ``alias:QID:text``), else ``None``."""
    pred = normalize(prediction)
    if not pred:
        return None
    for n in names:
        if normalize(n.text) == pred:
            return f"{n.kind}:{n.qid}" if n.kind == "label" else f"{n.kind}:{n.qid}:{n.text}"
    return None
