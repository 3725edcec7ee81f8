"""Pure parsers and validators of the construction steps' model output.

Every parser takes the model's text and returns a parsed value, or ``None`` when the text does
not have the expected shape: unparseable output is never guessed at. Validators check parsed
values against the vocabularies and return what they could not accept *separately* (out-of-
vocabulary labels, non-cultures, lost placeholders, answer-revealing facts), so nothing is
silently dropped. All parsers cap the text and scan it line by line (linear in its size).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cresowlve_core.construction.vocab import KNOWN_CULTURES, NOT_CULTURES, REASONING_TYPES
from cresowlve_core.inputs import text_problem
from cresowlve_core.llm.base_model import MAX_LINE_CHARS, first_line

#: Model output beyond this many characters is ignored by every parser.
MAX_TEXT = 20_000
#: a value that is no answer: nothing, or the prompt's placeholder ``...`` written back
_PLACEHOLDER = re.compile(r"[\s.…]*")


def _lines(text: str | None) -> list[str]:
    return (text or "")[:MAX_TEXT].splitlines()


def _field_line(text: str | None, name: str) -> str | None:
    """The value of the *last* ``NAME: value`` line (markdown bold and bullets tolerated)."""
    pattern = re.compile(rf"^[\s*#>-]*{re.escape(name)}[\s*]*:[\s*]*(.*)$", re.I)
    value = None
    for line in _lines(text):
        m = pattern.match(line)
        if m:
            value = m.group(1).strip().strip("*").strip()
    return value


# ---------------------------------------------------------------------------------------------
# Yes/no filters (needs external material, Russian-specific)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class YesNo:
    """A filter's verdict: ``yes`` means the item is removed by that filter."""

    yes: bool
    reason: str | None


_YES = {"yes", "y", "true", "да"}
_NO = {"no", "n", "false", "нет"}
#: ``A or B`` / ``A/B`` at the start of a value: the prompt's own choice (``YES or NO``,
#: ``creative or factual``) written back, which is no answer
_CHOICE = re.compile(r"^\s*(\w+)\s*(?:\bor\b|\bили\b|/|\|)\s*(\w+)", re.I)


def _names_both(value: str, first: set[str] | frozenset[str], second: set[str] | frozenset[str]) -> bool:
    """``value`` starts with an option of ``first`` and one of ``second`` joined as a choice."""
    m = _CHOICE.match(value.casefold())
    if m is None or m[1] == m[2]:
        return False
    return bool({m[1], m[2]} & first) and bool({m[1], m[2]} & second)


def parse_yes_no(text: str | None) -> YesNo | None:
    """``REASON: ...`` (optional) and ``ANSWER: YES|NO`` (the last such line wins); else None. The
    prompt's ``YES or NO`` written back is None: no answer, never its first word."""
    answer = _field_line(text, "ANSWER")
    if answer is None or _names_both(answer, _YES, _NO):
        return None
    word = re.split(r"[\s.,;:!()\[\]]+", answer.lower(), maxsplit=1)[0] if answer else ""
    if word in _YES:
        yes = True
    elif word in _NO:
        yes = False
    else:
        return None
    reason = _field_line(text, "REASON")
    return YesNo(yes=yes, reason=reason or None)


# ---------------------------------------------------------------------------------------------
# Translation
# ---------------------------------------------------------------------------------------------

TRANSLATION_FIELDS: tuple[str, ...] = ("question", "answer", "explanation", "other_answers")
REQUIRED_TRANSLATION_FIELDS: tuple[str, ...] = ("question", "answer")


@dataclass
class ParsedTranslation:
    """Translated fields (``None`` where missing) and the flags that send the item to review."""

    fields: dict[str, str | None]
    flags: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Question and answer both present: the English view can be built."""
        return all(self.fields.get(f) for f in REQUIRED_TRANSLATION_FIELDS)


def _tag(text: str, name: str) -> tuple[str | None, int]:
    """The first ``<name>…</name>`` body (stripped) and how many opening tags there are."""
    lower = text.lower()
    open_tag, close_tag = f"<{name}>", f"</{name}>"
    count = lower.count(open_tag)
    start = lower.find(open_tag)
    if start < 0:
        return None, 0
    end = lower.find(close_tag, start + len(open_tag))
    if end < 0:
        return None, count
    return text[start + len(open_tag):end].strip(), count


_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[A-Za-z]")


def is_untranslated(text: str) -> bool:
    """More Cyrillic than Latin letters: the Russian copied back, not an English field."""
    return len(_CYRILLIC.findall(text)) > len(_LATIN.findall(text))


def breaks_input_rules(name: str, text: str) -> bool:
    """The English question or answer holds what an eval of the export refuses (a control character:
    :func:`~cresowlve_core.inputs.text_problem`)."""
    return name in REQUIRED_TRANSLATION_FIELDS and text_problem(text, f"en.{name}", size_limited=False) is not None


def parse_translation(text: str | None, source_fields: Iterable[str] = TRANSLATION_FIELDS) -> ParsedTranslation:
    """Read ``<question>``, ``<answer>``, ``<explanation>``, ``<other_answers>`` tags.

    ``source_fields`` are the fields the Russian item has. A missing, unclosed or empty tag of a
    source field gives ``missing_tag:<field>`` / ``empty_tag:<field>`` (empty, or the reply
    format's ``...`` written back) and leaves the field
    ``None``: it never falls back to the Russian text. A tag with more Cyrillic than Latin letters
    (the Russian copied back) gives ``untranslated:<field>``, a question or answer with a control
    character (which an eval of the export refuses) ``invalid_text:<field>``; each leaves it
    ``None`` too. A repeated
    tag is flagged ``repeated_tag:<field>`` (the first is used).
    """
    body = (text or "")[:MAX_TEXT]
    wanted = set(source_fields)
    out: dict[str, str | None] = {}
    flags: list[str] = []
    for name in TRANSLATION_FIELDS:
        value, count = _tag(body, name)
        if count > 1:
            flags.append(f"repeated_tag:{name}")
        if name not in wanted:
            out[name] = None
            continue
        if value is None:
            flags.append(f"missing_tag:{name}")
        elif _PLACEHOLDER.fullmatch(value):  # nothing, or the reply format's "..." written back
            flags.append(f"empty_tag:{name}")
            value = None
        elif is_untranslated(value):
            flags.append(f"untranslated:{name}")
            value = None
        elif breaks_input_rules(name, value):
            flags.append(f"invalid_text:{name}")
            value = None
        out[name] = value or None
    return ParsedTranslation(out, flags)


# ---------------------------------------------------------------------------------------------
# Placeholders (ИКС -> X, ОН -> HE, ...)
# ---------------------------------------------------------------------------------------------

_CYR_CAPS = re.compile(r"(?<![\w])[А-ЯЁ]{2,}(?![\w])")
_LAT_CAPS = re.compile(r"(?<![A-Za-z])[A-Z]+(?![a-z])")
_RU_PRONOUNS = frozenset(
    "ОН ОНА ОНО ОНИ ЕГО ЕЁ ЕЕ ЕМУ ЕЙ ИМ ИХ НЁМ НЕМ НЕЙ НИХ НИМ НИМИ ЕЮ ИМИ НЕГО НЕЁ НЕЕ НЕМУ".split()
)
_EN_PRONOUNS = frozenset("HE SHE IT THEY HIM HER HIS ITS THEM THEIR THEIRS HERS".split())
_LETTER_PLACEHOLDERS = (("ИКС", "X"), ("ИГРЕК", "Y"), ("ЗЕТ", "Z"))


def placeholder_kinds(ru_text: str) -> dict[str, list[str]]:
    """The ALL-CAPS placeholders of a Russian text by kind: ``X``, ``Y``, ``Z`` (ИКС, ИГРЕК, ЗЕТ
    and their inflections), ``pronoun`` (ОН, ЕГО, ...), ``word`` (any other ALL-CAPS word, e.g.
    ЕВА, or an acronym)."""
    kinds: dict[str, list[str]] = {}
    for token in dict.fromkeys(_CYR_CAPS.findall(ru_text or "")):
        kind = next((lat for cyr, lat in _LETTER_PLACEHOLDERS if token.startswith(cyr)), None)
        if kind is None:
            kind = "pronoun" if token in _RU_PRONOUNS else "word"
        kinds.setdefault(kind, []).append(token)
    return kinds


def lost_placeholders(ru_text: str, en_text: str | None) -> list[str]:
    """Placeholder kinds of ``ru_text`` with no ALL-CAPS counterpart in ``en_text``.

    ``X``/``Y``/``Z`` need that capital letter; ``pronoun`` needs an ALL-CAPS English pronoun (HE,
    IT, ...); ``word`` needs some ALL-CAPS English word other than ``I``/``A``. Returns e.g.
    ``["X:ИКС,ИКСОМ"]``; empty when every kind survived.
    """
    en_caps = set(_LAT_CAPS.findall(en_text or "")) - {"I", "A"}
    lost = []
    for kind, tokens in placeholder_kinds(ru_text).items():
        if kind in ("X", "Y", "Z"):
            ok = kind in en_caps
        elif kind == "pronoun":
            ok = bool(en_caps & _EN_PRONOUNS)
        else:
            ok = bool(en_caps - {"X", "Y", "Z"} - _EN_PRONOUNS) or bool(en_caps & _EN_PRONOUNS)
        if not ok:
            lost.append(f"{kind}:{','.join(tokens)}")
    return lost


# ---------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------

_NONE_VALUES = {"", "none", "n/a", "na", "-", "нет", "no"}


def normalise_label(value: str) -> str:
    """Lower case, NFKC, hyphens/underscores to spaces, outer quotes/punctuation and numbering removed."""
    value = unicodedata.normalize("NFKC", value).casefold()
    value = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", value)
    value = value.replace("_", " ").replace("-", " ")
    value = value.strip(" \t\"'«»“”‘’.`*[]()")
    return " ".join(value.split())


def parse_label_list(text: str | None, name: str, *, sep: str = r"[,;]") -> list[str] | None:
    """The values on the last ``NAME: a, b, c`` line (``none`` gives ``[]``); None if there is no
    such line, or it holds nothing but blanks and punctuation (the prompt's ``NAME: ...`` written
    back is no answer, not "none")."""
    line = _field_line(text, name)
    if line is None:
        return None
    values = [v.strip() for v in re.split(sep, line[:2000])]
    if all(_PLACEHOLDER.fullmatch(v) for v in values):
        return None
    values = [v for v in values if normalise_label(v) not in _NONE_VALUES]
    return list(dict.fromkeys(values))


def parse_reasoning_type(text: str | None) -> str | None:
    """The first word of the last ``TYPE: ...`` line, normalised (``creative``, ``factual`` or an
    out-of-vocabulary word for :func:`check_vocab`); None if there is no such line, it is empty, or
    it is the prompt's ``creative or factual`` written back."""
    line = _field_line(text, "TYPE")
    if line is not None and _names_both(normalise_label(line), {REASONING_TYPES[0]}, {REASONING_TYPES[1]}):
        return None
    words = normalise_label(line or "").split()
    return words[0].strip(".,;:") if words else None


def check_vocab(values: Iterable[str], vocabulary: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split values into ``(known, out_of_vocabulary)``: known ones in the vocabulary's own
    spelling (matched after :func:`normalise_label`), unknown ones normalised. Order kept,
    duplicates removed."""
    canon = {normalise_label(v): v for v in vocabulary}
    known: list[str] = []
    oov: list[str] = []
    for value in values:
        norm = normalise_label(value)
        if not norm:
            continue
        target = known if norm in canon else oov
        item = canon.get(norm, norm)
        if item not in target:
            target.append(item)
    return known, oov


def check_cultures(values: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """Normalise culture names to lower case and split them into ``(cultures, not_cultures,
    unrecognised)``. ``cultures`` includes the unrecognised ones (kept, but counted); values
    such as ``general`` or ``none`` are not cultures and go only to ``not_cultures``."""
    cultures: list[str] = []
    flagged: list[str] = []
    unrecognised: list[str] = []
    for value in values:
        norm = normalise_label(value)
        norm = re.sub(r"\s+(culture|language|people)$", "", norm)
        if not norm:
            continue
        if norm in NOT_CULTURES:
            flagged.append(norm) if norm not in flagged else None
            continue
        if norm not in cultures:
            cultures.append(norm)
            if norm not in KNOWN_CULTURES:
                unrecognised.append(norm)
    return cultures, flagged, unrecognised


# ---------------------------------------------------------------------------------------------
# Knowledge decomposition (atomic facts)
# ---------------------------------------------------------------------------------------------

_LIST_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•])\s+(.*\S)\s*$")


def parse_facts(text: str | None) -> list[str] | None:
    """The list items after a ``FACTS:`` line (numbered or bulleted); None without a header or items."""
    lines = _lines(text)
    start = None
    for i, line in enumerate(lines):
        if re.match(r"^[\s*#]*FACTS[\s*]*:", line, re.I):
            start = i + 1
    if start is None:
        return None
    facts = []
    for line in lines[start:]:
        m = _LIST_ITEM.match(line)
        if m:
            facts.append(m.group(1).strip())
        elif facts and line.strip():
            break
    return facts or None


def _norm_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold().replace("ё", "е")
    return " " + " ".join(re.sub(r"[^\w]+", " ", text).split()) + " "


def check_facts(facts: Iterable[str], answer: str) -> tuple[list[str], list[str], list[str]]:
    """Split facts into ``(ok, revealing, not_questions)``: a fact that contains the answer
    (its words in order, optional ``[...]`` parts removed) reveals it; one not ending in ``?``
    is not phrased as a question. Only ``ok`` facts fill ``Item.atomic_facts``."""
    core = re.sub(r"\[[^\]]*\]", " ", answer or "")
    needle = _norm_text(core)
    ok, revealing, not_questions = [], [], []
    for fact in facts:
        if needle.strip() and needle in _norm_text(fact):
            revealing.append(fact)
        elif not fact.rstrip().endswith("?"):
            not_questions.append(fact)
        else:
            ok.append(fact)
    return ok, revealing, not_questions


# ---------------------------------------------------------------------------------------------
# A base model's few-shot continuations (llm/base_model.py)
# ---------------------------------------------------------------------------------------------

#: The reply line a continuation stands for, per step: a base model completes the open slot of its
#: few-shot prompt (``Handout:``, ``Reasoning:``, ...) and the first line of the continuation is
#: read as that line of the chat reply, by the chat reply's own parser.
FEWSHOT_REPLY_LINE: dict[str, str] = {"needs_material": "ANSWER", "russian_specific": "ANSWER", "reasoning": "TYPE",
                                      "concepts": "LABELS", "domains": "DOMAINS", "cultures": "CULTURES",
                                      "facts": "FACTS"}
_QUESTION_END = re.compile(r"(?<=\?)\s+")


def fewshot_reply(step: str, continuation: str | None) -> str:
    """The chat-reply form of a few-shot continuation's first line, for the step's chat parser:
    ``" yes"`` -> ``"ANSWER: yes"``; ``" pun, joke"`` -> ``"LABELS: pun, joke"``; facts on one line
    (``"Who ...? What ...?"``) -> a ``FACTS:`` line and one numbered item per question. An empty
    first line gives ``""``, which every chat parser reads as unparseable (never guessed)."""
    line = first_line(continuation)
    if not line:
        return ""
    name = FEWSHOT_REPLY_LINE[step]
    if step == "facts":
        facts = [f.strip() for f in _QUESTION_END.split(line) if f.strip()]
        return "FACTS:\n" + "\n".join(f"{i}. {f}" for i, f in enumerate(facts, start=1))
    return f"{name}: {line}"




def first_line_ended(continuation: str | None) -> bool:
    """Whether a line break follows the continuation's first non-blank line: the line is whole, even
    when the continuation itself ran on to the token limit."""
    lines = (continuation or "")[:MAX_LINE_CHARS].lstrip().splitlines(keepends=True)
    return bool(lines) and lines[0] != lines[0].splitlines()[0]  # kept its line break


def parse_fewshot_translation(continuations: dict[str, str | None], source_fields: Iterable[str],
                              cut: Mapping[str, str] | None = None) -> ParsedTranslation:
    """The English fields from a base model's per-field continuations (``field -> continuation``; the
    first line of each is the field). A source field that was not asked gives ``not_asked:<field>``,
    an empty line ``empty_field:<field>``, a line with more Cyrillic than Latin letters (the Russian
    copied back) ``untranslated:<field>``, a question or answer with a control character
    ``invalid_text:<field>``, a field in ``cut`` (``field -> why``: ``too_long``, the
    Russian did not fit the prompt; ``line_cut``, the line ended at the token limit)
    ``<why>:<field>``; each leaves the field ``None``, never the Russian text or a partial one."""
    wanted = set(source_fields)
    cut = cut or {}
    out: dict[str, str | None] = {}
    flags: list[str] = []
    for name in TRANSLATION_FIELDS:
        out[name] = None
        if name not in wanted:
            continue
        if name not in continuations:
            flags.append(f"not_asked:{name}")
            continue
        line = first_line(continuations[name])
        if _PLACEHOLDER.fullmatch(line):  # nothing, or "..."
            flags.append(f"empty_field:{name}")
        elif name in cut:
            flags.append(f"{cut[name]}:{name}")
        elif is_untranslated(line):
            flags.append(f"untranslated:{name}")
        elif breaks_input_rules(name, line):
            flags.append(f"invalid_text:{name}")
        else:
            out[name] = line
    return ParsedTranslation(out, flags)
