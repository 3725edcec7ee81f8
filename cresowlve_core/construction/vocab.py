"""The label vocabularies of the CresOWLve annotation (paper §3.2, Fig. 2)."""

from __future__ import annotations

REASONING_TYPES: tuple[str, ...] = ("creative", "factual")

#: The 16 creative language and thinking concepts.
CONCEPTS: tuple[str, ...] = (
    "poem", "metaphor", "idiom", "proverb", "joke", "pun", "simile", "sarcasm", "hyperbole",
    "neologism", "analogy", "abstraction", "lateral thinking", "divergent thinking",
    "commonsense reasoning", "compositionality",
)

#: The paper's 34 coarse knowledge-domain groups.
DOMAIN_GROUPS: tuple[str, ...] = (
    "Literature", "Languages & Linguistics", "Philosophy", "Religious Studies", "History",
    "Art History & Visual Culture", "Visual Arts", "Performing Arts", "Film & Media Studies", "Music",
    "Design & Architecture", "Sociology", "Anthropology", "Political Science", "Economics",
    "Business Studies", "Law & Criminology", "Human Geography", "Physics", "Chemistry", "Biology",
    "Earth & Environmental Science", "Astronomy & Space Science", "Medicine & Health Sciences",
    "Engineering & Technology", "Physical Education & Sports", "Home Economics & Daily Life",
    "Psychology", "Education", "Communication", "Science", "Mathematics", "Archaeology", "Military",
)

#: Culture and language names the culture validator recognises (lower case). A value outside
#: this list is kept and counted as ``unrecognised``; a value in :data:`NOT_CULTURES` is flagged.
KNOWN_CULTURES: frozenset[str] = frozenset(v.strip() for v in """
russian, english, american, british, french, german, italian, greek, latin, roman, japanese, chinese,
spanish, portuguese, dutch, polish, czech, ukrainian, belarusian, jewish, hebrew, arabic, persian,
turkish, indian, korean, swedish, norwegian, danish, finnish, icelandic, scandinavian, irish,
scottish, welsh, canadian, australian, mexican, brazilian, argentinian, cuban, egyptian, african,
austrian, swiss, belgian, hungarian, romanian, bulgarian, serbian, croatian, georgian, armenian,
azerbaijani, kazakh, uzbek, tatar, mongolian, ingush, chechen, soviet, european, asian, biblical,
christian, muslim, islamic, buddhist, hindu, ancient greek, ancient roman, ancient egyptian,
byzantine, ottoman, viking, celtic, norse, slavic, yiddish, sanskrit, vietnamese, thai, indonesian,
filipino, malay, estonian, latvian, lithuanian, slovak, slovenian, bosnian, albanian, macedonian,
maltese, cypriot, lebanese, syrian, iraqi, iranian, afghan, pakistani, bangladeshi, tibetan, nepali,
sri lankan, nigerian, kenyan, ethiopian, south african, moroccan, algerian, tunisian, peruvian,
chilean, colombian, venezuelan, bolivian, ecuadorian, uruguayan, paraguayan, jamaican, haitian,
hawaiian, native american, aztec, maya, inca, babylonian, sumerian, assyrian, phoenician, etruscan,
belarusian, moldovan, kyrgyz, tajik, turkmen, bashkir, yakut, chuvash, udmurt, komi, karelian
""".split(",")) - {""}

#: Values an annotator writes that are not cultures (flagged, kept in their own field).
NOT_CULTURES: frozenset[str] = frozenset({
    "none", "n/a", "na", "general", "universal", "global", "worldwide", "western", "eastern",
    "modern", "contemporary", "unknown", "other", "various", "mixed", "multicultural", "no culture",
    "not applicable", "science", "popular culture", "pop culture",
})
