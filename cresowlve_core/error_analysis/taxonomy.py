"""The seven error categories of the CresOWLve error analysis (paper §5), in our own words.

Each category has a stable slug (stored in label records), a display name, a definition the
labeller reads, and one worked few-shot example with an explanation of why it fits.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Category:
    slug: str
    name: str
    definition: str


CATEGORIES: tuple[Category, ...] = (
    Category("missing_creative_connection", "Missing creative connection",
             "The model recalls facts that bear on the puzzle but never makes the associative or "
             "metaphorical leap that ties the clues together, so the key idea never appears."),
    Category("overthinking", "Overthinking",
             "The correct answer (or the idea that leads to it) appears in the reasoning, and the model "
             "then talks itself out of it by reinterpreting or over-generalising."),
    Category("hallucination", "Hallucination or unsupported fabrication",
             "The model invents facts, quotations, sources or explanations that are neither in the "
             "question nor true, and its answer rests on them."),
    Category("incorrect_concept_anchoring", "Incorrect concept anchoring",
             "The model fixes on a wrong concept early and bends the remaining clues to fit it, "
             "drifting by association instead of testing the concept against every clue."),
    Category("wrong_hypothesis", "Wrong hypothesis",
             "The model infers a wrong rule, pattern or shared property from the clues and applies "
             "it consistently, reaching an answer that follows from the wrong rule."),
    Category("wrong_reference", "Wrong reference",
             "The model reasons about the wrong work, person, event or source: one that matches the "
             "clues on the surface but is not the one the question means."),
    Category("clue_misinterpretation", "Clue misinterpretation",
             "The model finds the right source, context or line of reasoning but picks the wrong "
             "specific element of it (the wrong word, person or detail the clue points at)."),
)

SLUGS: tuple[str, ...] = tuple(c.slug for c in CATEGORIES)
BY_SLUG: dict[str, Category] = {c.slug: c for c in CATEGORIES}
OTHER_PREFIX = "other: "
UNLABELLED = "unlabelled"


@dataclass(frozen=True)
class FewShot:
    category: str
    question: str
    answer: str
    prediction: str
    reasoning: str
    rationale: str


#: One example per category. Questions are from the paper's examples; the model reasoning and
#: the rationales are written for this project.
FEW_SHOT: tuple[FewShot, ...] = (
    FewShot("missing_creative_connection",
            "The Turkic poet Saif Sarai metaphorically describes a girl circling around her illustrious "
            "beloved. Whom, according to the translator, did Sarai precede by about one and a half centuries?",
            "Copernicus", "Alisher Navoi",
            "Saif Sarai is a 14th-century poet. A later poet in the same tradition would be Navoi, "
            "born about 150 years later.",
            "The model knows the dates but never reads 'circling around her illustrious beloved' as the "
            "Earth orbiting the Sun, so the heliocentric link to Copernicus is never made."),
    FewShot("overthinking",
            "In the game 'Virtua Tennis 4' a bomb is used instead of a ball: whoever ends up with the X "
            "on their side loses. Who created 'X' in 1986?",
            "The band Europe", "Nintendo",
            "A bomb with a timer... a countdown. 'The Final Countdown' by Europe came out in 1986. "
            "But X might be the game mechanic itself, 'hot potato' games were made by Nintendo, so Nintendo.",
            "The reasoning reaches 'countdown' and Europe, then abandons it for a broader reading of X."),
    FewShot("hallucination",
            "Wolf Schneider writes that one crystal of IT in the 1970s deprived 45,000 Swiss people of "
            "their jobs. Name IT.",
            "Quartz", "Salt",
            "Schneider's book 'Salz und Schweiz' describes how a single salt crystal discovery in 1973 "
            "collapsed the Swiss salt monopoly.",
            "The book and the 1973 discovery are invented; the answer rests on that fabricated source."),
    FewShot("incorrect_concept_anchoring",
            "In a wartime novel, contrails of airplanes and bursts of anti-aircraft shells form an "
            "unpleasant, in the hero's opinion, picture. What word did we replace with 'picture'?",
            "Melody", "Painting",
            "The sky is a canvas; contrails are brush strokes and the bursts are blots of paint, so the "
            "word is 'painting' or 'canvas'.",
            "It latches onto the visual-art idea at once and reinterprets every clue to fit it, never "
            "testing the musical-staff reading that 'unpleasant' hints at."),
    FewShot("wrong_hypothesis",
            "According to scientists, wrinkles on wet fingers serve the same function as X. After his "
            "father's death, Richard was proclaimed X. Name his surname.",
            "Cromwell", "Lionheart",
            "Wrinkles appear on wet fingers, so X must be something that adapts to water; Richard who "
            "adapted to campaigns overseas is Richard the Lionheart.",
            "It invents the rule 'X adapts to water' and applies it consistently; the intended shared "
            "property is protection (Lord Protector)."),
    FewShot("wrong_reference",
            "The name of this American mountain, on the crack of which a climber is crawling, matches the "
            "title of a cult 1983 film. Write this name.",
            "Scarface", "The Right Stuff",
            "Cult 1983 films: 'The Right Stuff' is about test pilots and climbing to the sky, a fitting "
            "name for a climbing wall.",
            "It reasons about the wrong 1983 film, one that matches the theme loosely, not the intended one."),
    FewShot("clue_misinterpretation",
            "In a description of a silent scene, Mikhail Belousov mentions a sound produced by THEM. "
            "THEIR sound was recognised as the best 36 years ago. Name THEM.",
            "Jaws", "Teeth",
            "A silent scene in Gogol's play: everyone is struck dumb; the sound is chattering teeth. "
            "Films about teeth won sound awards... so THEY are teeth.",
            "It finds the right context (astonishment, a dropping jaw, an award-winning film) but picks "
            "the wrong element of it: teeth instead of jaws."),
)


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"\w+", text))


_LOOKUP: dict[str, str] = {}
for _i, _c in enumerate(CATEGORIES, start=1):
    for _alias in (_c.slug, _c.slug.replace("_", " "), _c.name, str(_i)):
        _LOOKUP[_norm(_alias)] = _c.slug
_LOOKUP[_norm("hallucination")] = "hallucination"
_LOOKUP[_norm("unsupported fabrication")] = "hallucination"


def category_of(text: str) -> str | None:
    """The slug a category name, slug or number (1–7) refers to, else ``None``."""
    return _LOOKUP.get(_norm(text))


def display_name(label: str) -> str:
    """A readable name for a slug, an ``other: …`` label or ``unlabelled``."""
    if label in BY_SLUG:
        return BY_SLUG[label].name
    return label
