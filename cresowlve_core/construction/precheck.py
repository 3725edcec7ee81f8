"""The deterministic handout pre-check of the "needs external material" step (paper §3.1).

A question that shows the players a picture or a handout cannot be answered from its text. This
check looks for the markers packs use for that; its hits are stored and reported beside the
LLM's verdict, even where the LLM disagrees.
"""

from __future__ import annotations

import re

#: Marker name -> pattern (case-insensitive) over the question text and its handout field.
HANDOUT_MARKERS: dict[str, re.Pattern[str]] = {
    "pic": re.compile(r"\((?:pic|img)\b", re.I),
    "razdatka": re.compile(r"раздат", re.I),
    "razdali": re.compile(r"\bразда(?:л[аи]?|ём|ем|дим)\b", re.I),
    "pered_vami": re.compile(r"перед\s+вами", re.I),
    "vashemu_vnimaniyu": re.compile(r"вашему\s+вниманию", re.I),
    "na_ekrane": re.compile(r"на\s+экране", re.I),
    "handout_en": re.compile(r"\bhandout\b|\bin front of you\b|\bwe (?:have )?distributed\b", re.I),
}


def handout_markers(question: str, handout: str | None = None) -> list[str]:
    """Names of the handout markers found (``handout_field`` if the parser extracted a handout)."""
    text = (question or "")[:20_000]
    hits = [name for name, pattern in HANDOUT_MARKERS.items() if pattern.search(text)]
    if handout:
        hits.append("handout_field")
    return hits
