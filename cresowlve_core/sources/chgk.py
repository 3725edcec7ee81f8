r"""Read "What? Where? When?" (ChGK) question packs into :class:`ChgkQuestion` records.

Two formats are understood:

* ``db``: the plain-text export of db.chgk.info. Header fields (``Чемпионат:``, ``URL:``,
  ``Дата:``, ``Тур:``, ``Редактор:``, ``Инфо:``) set the context; each ``Вопрос N:`` opens a
  question block with ``Ответ:``, ``Зачет:``, ``Незачет:``, ``Комментарий:``, ``Источник(и):``,
  ``Автор(ы):``, ``Результат:`` and ``Сложность:`` fields. The site serves these files in KOI8-R
  and wraps prose greedily at 72 columns; paragraphs start with an indent.
* ``4s``: the markup of chgksuite. One marker per line (``?`` question, ``!`` answer, ``=``
  accepted, ``!=`` rejected, ``/`` comment, ``^`` sources, ``@`` authors, ``>`` handout, ``##``
  tour, ``###`` title, ``#DATE``, ``#EDITOR``, ``#`` comment); unmarked lines continue the previous
  field and ``- `` lines are list items. chgksuite writes a question's handout before its ``?``
  line; it is put in front of the question text as ``<раздатка>…</раздатка>``, as db packs have it.

Nothing is dropped silently: every block becomes a record, and a block that could not be parsed
cleanly carries ``flags`` naming why (``missing_answer``, ``unknown_field:…``, ...); a block whose
text holds bytes that could not be decoded (U+FFFD in their place) is flagged ``undecodable_text``.

Ids are :func:`~cresowlve_core.items.content_id` of question and answer. A block that lacks a
question or an answer gets ``"chgk_"`` + 10 hex digits of SHA-256 over its whitespace-normalised
raw text instead (prefixed with ``raw\x1f`` so it can never equal a content id), which keeps such
ids stable across reads and distinct between different malformed blocks.
"""

from __future__ import annotations

import hashlib
import html
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cresowlve_core.failures import InputError
from cresowlve_core.inputs import control_problem, text_problem
from cresowlve_core.items import ChgkQuestion, content_id

log = logging.getLogger(__name__)

PackFormat = Literal["db", "4s"]

#: db.chgk.info wraps prose greedily at this many columns.
WRAP_WIDTH = 72

# ---------------------------------------------------------------------------------------------
# Encoding detection
# ---------------------------------------------------------------------------------------------

#: Relative frequency of letters in Russian text (a property of the language, used for scoring).
_RU_LETTER_FREQ: dict[str, float] = {
    "о": 0.1097, "е": 0.0845, "а": 0.0801, "и": 0.0735, "н": 0.0670, "т": 0.0626,
    "с": 0.0547, "р": 0.0473, "в": 0.0454, "л": 0.0440, "к": 0.0349, "м": 0.0321,
    "д": 0.0298, "п": 0.0281, "у": 0.0262, "я": 0.0201, "ы": 0.0190, "ь": 0.0174,
    "г": 0.0170, "з": 0.0165, "б": 0.0159, "ч": 0.0144, "й": 0.0121, "х": 0.0097,
    "ж": 0.0094, "ш": 0.0073, "ю": 0.0064, "ц": 0.0048, "щ": 0.0036, "э": 0.0032,
    "ф": 0.0026, "ъ": 0.0004, "ё": 0.0004,
}  # fmt: skip
_MEAN_SELF_FREQ = sum(f * f for f in _RU_LETTER_FREQ.values()) / sum(_RU_LETTER_FREQ.values())
_SINGLE_BYTE_CANDIDATES = ("koi8-r", "cp1251")


_CYRILLIC_WORD = re.compile(r"[\u0400-\u04ff]+")
_RU_VOWELS = set("АЕЁИОУЫЭЮЯ")


def _case_plausibility(word: str) -> float:
    """Case plausibility of one Cyrillic word, from 0 to 1.

    1 for ``слово``/``Слово``, 0.75 for a ChGK stress mark (``слОво``), 0.5 for ``СЛОВО``,
    0 for anything else (``сЛОвО`` is what a wrong single-byte decoding produces).
    """
    if word.islower() or (word[0].isupper() and word[1:].islower()) or len(word) == 1:
        return 1.0
    if word.isupper():
        return 0.5
    upper = [ch for ch in word if ch.isupper()]
    if len(upper) == 1 and upper[0] in _RU_VOWELS:
        return 0.75
    return 0.0


def russian_score(text: str) -> float:
    """How much ``text`` looks like Russian: about 3 for real text, below 2 for mojibake.

    Two signals over the Cyrillic words: twice the mean letter frequency, normalised so that
    Russian text scores 1 (a wrong single-byte decoding permutes letters and scores about 0.6),
    plus the share of letters in words with a plausible case pattern (KOI8-R and CP1251 swap the
    case ranges, so mojibake looks like ``пФЧЕФ``). Box-drawing characters and U+FFFD, which only
    a wrong decoding produces in Russian prose, are penalised.
    """
    words = _CYRILLIC_WORD.findall(text)
    bad = sum(1 for ch in text if "\u2500" <= ch <= "\u25ff" or ch == "\ufffd")
    n_letters = sum(len(w) for w in words)
    if not n_letters:
        return -float(bad)
    freq = sum(_RU_LETTER_FREQ.get(ch.lower(), 0.0) for w in words for ch in w) / n_letters
    case = sum(_case_plausibility(w) * len(w) for w in words) / n_letters
    return 2.0 * freq / _MEAN_SELF_FREQ + case - 5.0 * bad / n_letters


def _utf8_valid_share(data: bytes) -> float:
    """Share of non-ASCII characters that decode as valid UTF-8 (1.0 for pure ASCII)."""
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    good = sum(1 for ch in text if ord(ch) > 127) - bad
    return good / (good + bad) if good + bad else 1.0


def _utf16_without_bom(data: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` if the bytes look like BOM-less UTF-16, else None.

    Text in UTF-16 has a zero byte in one of every two positions for ASCII characters (and
    ``0x04`` for Cyrillic): at least 30% of the even or odd bytes are zero, and the other
    half almost never is. Single-byte encodings and UTF-8 never contain zero bytes in text.
    """
    sample = data[:65536]
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]
    z_even, z_odd = even.count(0) / len(even), odd.count(0) / len(odd)
    if z_odd >= 0.3 and z_even < 0.05:
        return "utf-16-le"
    if z_even >= 0.3 and z_odd < 0.05:
        return "utf-16-be"
    return None


def detect_encoding(data: bytes) -> str:
    """Guess the encoding of a Russian text file: ``"utf-8"``, ``"utf-16"``, ``"koi8-r"`` or ``"cp1251"``.

    A byte-order mark decides (UTF-8, or UTF-16 as ``"utf-16"``); BOM-less UTF-16 is recognised
    by its zero bytes (``"utf-16-le"``/``"utf-16-be"``). UTF-8 wins if the bytes decode strictly,
    or if at least 90% of the non-ASCII characters are valid UTF-8 (a UTF-8 file with a few
    corrupt bytes; KOI8-R or CP1251 Cyrillic almost never forms valid UTF-8 sequences).
    Otherwise the single-byte decoding with the higher :func:`russian_score` wins; ties go to
    KOI8-R, the db.chgk.info default.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if (utf16 := _utf16_without_bom(data)) is not None:
        return utf16
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if _utf8_valid_share(data) >= 0.9:
        return "utf-8"
    scores = {enc: russian_score(data.decode(enc, errors="replace")) for enc in _SINGLE_BYTE_CANDIDATES}
    return max(_SINGLE_BYTE_CANDIDATES, key=lambda enc: scores[enc])


def decode_pack(data: bytes) -> tuple[str, str, int]:
    """Decode pack bytes; returns ``(text, encoding, number of undecodable bytes replaced)``."""
    encoding = detect_encoding(data)
    text = data.decode(encoding, errors="replace")
    n_errors = text.count("\ufffd")
    if encoding == "utf-8":
        n_errors -= data.count(b"\xef\xbf\xbd")  # U+FFFD already present in the file
    return text.removeprefix("\ufeff"), encoding, max(n_errors, 0)


#: a byte-order mark at the start of a line: the start of another file appended to this one
#: (``cat a.txt b.txt`` of packs saved with a BOM), where it would hide the header it precedes
_INNER_BOM = re.compile("(?m)^\ufeff")


def drop_inner_boms(text: str) -> tuple[str, int]:
    """``text`` without the byte-order marks that start a line, and how many there were."""
    text, n = _INNER_BOM.subn("", text)
    return text, n


def detect_format(text: str, suffix: str = "") -> PackFormat:
    """``"4s"`` or ``"db"``: the file extension decides unless the content clearly disagrees."""
    db_hits = len(re.findall(r"(?m)^Вопрос\s+\S+?:", text))
    s4_hits = len(re.findall(r"(?m)^\?(?:\s|$)", text))
    suffix = suffix.lower()
    if suffix == ".4s" and (s4_hits or not db_hits):
        return "4s"
    if suffix == ".txt" and (db_hits or not s4_hits):
        return "db"
    return "4s" if s4_hits > db_hits else "db"


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


@dataclass
class PackReport:
    """The records read from one pack, with counts of what went wrong."""

    questions: list[ChgkQuestion]
    format: PackFormat
    encoding: str
    source_file: str | None = None
    headers: list[dict[str, str]] = field(default_factory=list)
    """One dict per header section (tournament/tour), field name -> value, in file order."""
    pack_flags: list[str] = field(default_factory=list)
    """Problems that belong to no question (undecodable bytes, unknown header fields)."""
    n_decode_errors: int = 0

    @property
    def n_blocks(self) -> int:
        return len(self.questions)

    @property
    def n_ok(self) -> int:
        return sum(1 for q in self.questions if q.ok)

    @property
    def n_flagged(self) -> int:
        return self.n_blocks - self.n_ok

    @property
    def flags(self) -> Counter[str]:
        """How many records carry each flag."""
        return Counter(flag for q in self.questions for flag in q.flags)

    def summary(self) -> str:
        """One line: file, format, encoding and counts."""
        top = ", ".join(f"{k}={v}" for k, v in self.flags.most_common(5))
        extra = f" [{top}]" if top else ""
        pack = f"; pack: {', '.join(self.pack_flags)}" if self.pack_flags else ""
        return (
            f"{self.source_file or '<memory>'} ({self.format}, {self.encoding}): "
            f"{self.n_blocks} blocks, {self.n_ok} ok, {self.n_flagged} flagged{extra}{pack}"
        )


# ---------------------------------------------------------------------------------------------
# Shared field helpers
# ---------------------------------------------------------------------------------------------

_NUMBERED_ITEM = re.compile(r"^\s*(\d+)[.)]\s+(.*)$")
_URL_START = re.compile(r"^\(?(?:https?://|www\.)", re.I)
_RESULT = re.compile(r"^\s*(\d+)\s*(?:/|из)\s*(\d+)\s*\.?\s*$", re.I)
_INT = re.compile(r"^\s*(\d+)\s*\.?\s*$")
_PIC = re.compile(r"\((?:pic|img|aud):?\s+[^)\n]+\)", re.I)  # aud: db.chgk.info's audio handout
_RAZDATKA_OPEN = re.compile(r"<раздатка>", re.I)
_RAZDATKA_CLOSE = re.compile(r"</раздатка>", re.I)
_BRACKET_HANDOUT = re.compile(r"\[\s*Раздаточный\s+материал\s*:?", re.I)


def _is_wrapped(prev: str, line: str, width: int = WRAP_WIDTH) -> bool:
    """True if the break between ``prev`` and ``line`` is the exporter's greedy line wrap.

    A greedy wrapper only breaks when the next word would not fit; an indented line, a
    preformatted ``|`` line or a break after an over-long line is a real break.
    """
    if not line or line[:1].isspace() or line.startswith("|") or prev.startswith("|"):
        return False
    prev = prev.rstrip()
    if len(prev) > width:
        return False
    return len(prev) + 1 + len(line.split()[0]) > width


def unwrap(lines: list[str], width: int = WRAP_WIDTH) -> str:
    """Join wrapped db.chgk.info lines into text; real line breaks are kept as newlines."""
    out: list[str] = []
    prev: str | None = None
    for line in lines:
        if not line.strip():
            prev = None
            continue
        if out and prev is not None and _is_wrapped(prev, line, width):
            out[-1] += " " + line.strip()
        else:
            out.append(line.rstrip() if line.startswith("|") else line.strip())
        prev = line
    return "\n".join(out)


def split_sources_db(lines: list[str], width: int = WRAP_WIDTH) -> list[str]:
    """Sources of a db.chgk.info block: numbered items, else one per (unwrapped) line.

    Numbered items (``   1. ...``) run until the next number. Unnumbered lines are joined when
    the break is a greedy wrap, except that a URL after a line ending in ``.``/``)`` or after
    another URL starts a new source (a book reference followed by its link).
    """
    nonblank = [line for line in lines if line.strip()]
    if not nonblank:
        return []
    items: list[str] = []
    if _NUMBERED_ITEM.match(nonblank[0]):
        for line in nonblank:
            m = _NUMBERED_ITEM.match(line)
            if m or not items:
                items.append((m.group(2) if m else line).strip())
            else:
                items[-1] += " " + line.strip()
        return [item for item in items if item]
    prev = ""
    for line in nonblank:
        text = line.strip()
        starts_new = _URL_START.match(text) and (
            prev.rstrip().endswith((".", ")")) or _URL_START.match(prev.strip()) is not None
        )
        if items and _is_wrapped(prev, line, width) and not starts_new:
            items[-1] += " " + text
        else:
            items.append(text)
        prev = line
    return items


def split_authors(text: str) -> list[str]:
    """Split an author line on ``", "`` outside parentheses; ``"A (X, Y), B"`` -> 2 authors."""
    parts: list[str] = []
    depth = 0
    current = ""
    i = 0
    while i < len(text):
        ch = text[i]
        depth += {"(": 1, ")": -1}.get(ch, 0)
        depth = max(depth, 0)
        if depth == 0 and text.startswith(", ", i):
            parts.append(current)
            current = ""
            i += 2
            continue
        current += ch
        i += 1
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _find_closing_bracket(text: str, start: int) -> int:
    """Index of the ``]`` closing the ``[`` at ``start``, or -1."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def extract_handout(text: str) -> tuple[str | None, list[str]]:
    """Find handouts in a question text; returns ``(handout or None, flags)``.

    Recognises ``<раздатка>…</раздатка>`` and ``[Раздаточный материал: …]`` (their inner text)
    and ``(pic: file)`` / ``(img file)`` / ``(aud: file)`` markers elsewhere (the marker itself). Several handouts
    are joined with newlines. An unclosed handout runs to the end and is flagged.
    """
    spans: list[tuple[int, int, str]] = []
    flags: list[str] = []
    for m in _RAZDATKA_OPEN.finditer(text):
        close = _RAZDATKA_CLOSE.search(text, m.end())
        end = close.start() if close else len(text)
        if close is None:
            flags.append("unclosed_handout")
        spans.append((m.start(), close.end() if close else end, text[m.end() : end]))
    for m in _BRACKET_HANDOUT.finditer(text):
        if any(s <= m.start() < e for s, e, _ in spans):
            continue
        bracket = _find_closing_bracket(text, m.start())
        if bracket < 0:
            flags.append("unclosed_handout")
            bracket = len(text)
        spans.append((m.start(), bracket + 1, text[m.end() : bracket]))
    for m in _PIC.finditer(text):
        if not any(s <= m.start() < e for s, e, _ in spans):
            spans.append((m.start(), m.end(), m.group(0)))
    parts = [_dedent(inner) for _, _, inner in sorted(spans)]
    parts = [p for p in parts if p]
    return ("\n".join(parts) if parts else None), sorted(set(flags))


def _dedent(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _parse_result(text: str) -> tuple[int | None, int | None, float | None, list[str]]:
    m = _RESULT.match(text)
    if not m:
        return None, None, None, ["unparsable_result"]
    taken, teams = int(m.group(1)), int(m.group(2))
    if teams == 0 or taken > teams:
        return taken, teams, None, ["invalid_result"]
    return taken, teams, taken / teams, []


#: the difficulty levels of the benchmark (the published schema's 1-5)
DIFFICULTY_LEVELS = range(1, 6)


def _parse_difficulty(text: str) -> tuple[int | None, list[str]]:
    """The block's difficulty level, or None with a flag: ``unparsable_difficulty`` for a value that
    is not a number, ``invalid_difficulty`` for a number outside 1-5 (the item is then unrated)."""
    m = _INT.match(text)
    if not m:
        return None, ["unparsable_difficulty"]
    level = int(m.group(1))
    return (level, []) if level in DIFFICULTY_LEVELS else (None, ["invalid_difficulty"])


#: what a decoding writes in place of bytes it cannot read
_REPLACEMENT = "\ufffd"


def _raw_id(raw: str) -> str:
    key = "raw\x1f" + " ".join(raw.split())
    return "chgk_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]


@dataclass
class _Block:
    """A question block while it is being collected."""

    start: int
    number: str | None
    context: dict[str, str | None]
    fields: dict[str, list[str]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    end: int = 0

    def add(self, key: str, lines: list[str]) -> None:
        if key in self.fields:
            self.flags.append(f"duplicate_field:{key}")
            self.fields[key].extend(lines)
        else:
            self.fields[key] = list(lines)


@dataclass
class _Parts:
    """Field values of a block, already turned into text, ready for :func:`_make_question`."""

    question: str = ""
    answer: str = ""
    accepted: str = ""
    rejected: str = ""
    comment: str = ""
    sources: list[str] = field(default_factory=list)
    authors: str = ""
    result: str | None = None
    difficulty: str | None = None


def _make_question(
    block: _Block, parts: _Parts, raw: str, source_file: str | None, encoding: str
) -> ChgkQuestion:
    flags = list(block.flags)
    handout, handout_flags = extract_handout(parts.question)
    flags += handout_flags
    taken = teams = difficulty = None
    take_rate = None
    if parts.result is not None:
        taken, teams, take_rate, f = _parse_result(parts.result)
        flags += f
    if parts.difficulty is not None:
        difficulty, f = _parse_difficulty(parts.difficulty)
        flags += f
    if _REPLACEMENT in raw:  # bytes the decoding could not read (or a file already written with them)
        flags.append("undecodable_text")
    if not parts.question.strip():
        flags.append("missing_question")
    if not parts.answer.strip():
        flags.append("missing_answer")
    has_both = bool(parts.question.strip() and parts.answer.strip())
    return ChgkQuestion(
        id=content_id(parts.question, parts.answer) if has_both else _raw_id(raw),
        number=block.number,
        question=parts.question,
        answer=parts.answer,
        other_answers=parts.accepted or None,
        rejected_answers=parts.rejected or None,
        comment=parts.comment or None,
        sources=parts.sources,
        authors=split_authors(parts.authors),
        tournament=block.context.get("tournament"),
        tour=block.context.get("tour"),
        date=block.context.get("date"),
        handout=handout,
        taken=taken,
        teams=teams,
        take_rate=take_rate,
        difficulty=difficulty,
        source_file=source_file,
        encoding=encoding,
        raw=raw,
        flags=flags,
    )


# ---------------------------------------------------------------------------------------------
# db.chgk.info plain text
# ---------------------------------------------------------------------------------------------

_DB_QUESTION = re.compile(r"^Вопрос(?:\s+(?P<num>[^:\s]+))?\s*:[ \t]*(?P<rest>.*)$")
_DB_FIELD = re.compile(
    r"^(?P<label>Ответ|Зач[её]т|Незач[её]т|Комментарий|Источник(?:и|\(и\))?|Автор(?:ы|\(ы\))?"
    r"|Результат|Сложность|Чемпионат|URL|Дата|Тур|Редактор(?:ы|\(ы\))?|Инфо)\s*:[ \t]*(?P<rest>.*)$"
)
_DB_UNKNOWN_FIELD = re.compile(r"^(?P<label>[A-ZА-ЯЁ][\w()\-]{1,30}(?: [\w()\-]{1,30})?):\s*$")
_DB_BLOCK_KEYS = {
    "ответ": "answer", "зачет": "accepted", "зачёт": "accepted", "незачет": "rejected",
    "незачёт": "rejected", "комментарий": "comment", "источник": "sources",
    "источники": "sources", "источник(и)": "sources", "автор": "authors", "авторы": "authors",
    "автор(ы)": "authors", "результат": "result", "сложность": "difficulty",
}  # fmt: skip
_DB_HEADER_KEYS = {
    "чемпионат": "tournament", "url": "url", "дата": "date", "тур": "tour",
    "редактор": "editor", "редакторы": "editor", "редактор(ы)": "editor", "инфо": "info",
}  # fmt: skip


@dataclass
class _Segment:
    """A field header line and the lines of its value, as line indices into the file."""

    kind: str  # "question", "block", "header", "unknown" or "preamble"
    key: str
    label: str
    number: str | None
    lines: list[str]
    start: int
    end: int  # exclusive


def _db_segments(lines: list[str]) -> list[_Segment]:
    segments: list[_Segment] = []
    current = _Segment("preamble", "", "", None, [], 0, 0)
    for i, line in enumerate(lines):
        seg: _Segment | None = None
        if m := _DB_QUESTION.match(line):
            seg = _Segment("question", "question", "Вопрос", m.group("num"), [m.group("rest")], i, i)
        elif m := _DB_FIELD.match(line):
            label = m.group("label")
            low = label.lower()
            kind = "block" if low in _DB_BLOCK_KEYS else "header"
            key = _DB_BLOCK_KEYS.get(low) or _DB_HEADER_KEYS[low]
            seg = _Segment(kind, key, label, None, [m.group("rest")], i, i)
        elif (m := _DB_UNKNOWN_FIELD.match(line)) and (i == 0 or not lines[i - 1].strip()):
            label = m.group("label")
            seg = _Segment("unknown", label, label, None, [], i, i)
        if seg is None:
            current.lines.append(line)
            continue
        current.end = i
        segments.append(current)
        current = seg
    current.end = len(lines)
    segments.append(current)
    for seg in segments:  # a value written on the header line is not a paragraph start
        if seg.lines and not seg.lines[0].strip():
            seg.lines = seg.lines[1:]
        seg.lines = [html.unescape(line) for line in seg.lines]
    return segments


def _db_parts(block: _Block) -> _Parts:
    f = block.fields
    text = {k: unwrap(v) for k, v in f.items() if k != "sources"}
    return _Parts(
        question=text.get("question", ""),
        answer=text.get("answer", ""),
        accepted=text.get("accepted", ""),
        rejected=text.get("rejected", ""),
        comment=text.get("comment", ""),
        sources=split_sources_db(f.get("sources", [])),
        authors=" ".join(text.get("authors", "").split("\n")),
        result=text.get("result"),
        difficulty=text.get("difficulty"),
    )


def parse_db(text: str, *, source_file: str | None = None, encoding: str = "utf-8") -> PackReport:
    """Parse db.chgk.info plain text (already decoded)."""
    lines = text.splitlines()
    context: dict[str, str | None] = {"tournament": None, "tour": None, "date": None}
    headers: list[dict[str, str]] = []
    pack_flags: list[str] = []
    questions: list[ChgkQuestion] = []
    block: _Block | None = None

    def close() -> None:
        nonlocal block
        if block is None:
            return
        raw = "\n".join(lines[block.start : block.end]).strip("\n")
        questions.append(_make_question(block, _db_parts(block), raw, source_file, encoding))
        block = None

    def section(key: str) -> dict[str, str]:
        """The header dict ``key`` goes to: a tournament or a repeated tour opens a new one."""
        if not headers or key == "tournament" or (key == "tour" and "tour" in headers[-1]):
            headers.append({})
        return headers[-1]

    for seg in _db_segments(lines):
        value = unwrap(seg.lines)
        if seg.kind == "preamble":
            if value:
                block = _Block(seg.start, None, dict(context), {"question": seg.lines}, ["stray_text"])
                block.end = seg.end
                close()
        elif seg.kind == "header":
            close()
            if seg.key == "tournament":
                context.update(tournament=value or None, tour=None, date=None)
            elif seg.key in ("tour", "date"):
                context[seg.key] = value or None
            target = section(seg.key)
            target[seg.key] = f"{target[seg.key]}\n{value}" if seg.key in target else value
        elif seg.kind == "question":
            close()
            block = _Block(seg.start, seg.number, dict(context))
            block.add("question", seg.lines)
            if seg.number is None:
                block.flags.append("missing_number")
        elif seg.kind == "block":
            if block is None:
                block = _Block(seg.start, None, dict(context), flags=["missing_question_header"])
            block.add(seg.key, seg.lines)
        else:  # unknown field: keep it visible
            if block is not None:
                block.flags.append(f"unknown_field:{seg.label}")
            else:
                pack_flags.append(f"unknown_header_field:{seg.label}")
                section(seg.label)[seg.label] = value
        if block is not None:
            block.end = seg.end
    close()
    _flag_duplicates(questions)
    return PackReport(questions, "db", encoding, source_file, [h for h in headers if h], pack_flags)


# ---------------------------------------------------------------------------------------------
# chgksuite 4s markup
# ---------------------------------------------------------------------------------------------

_4S_LINE = re.compile(r"^(?P<m>###LJ|###|##|#EDITOR|#DATE|#|!=|№№|№|[?!=/^@>])(?=\s|$)\s?(?P<rest>.*)$")
_4S_LIST_ITEM = re.compile(r"^-(?:\s+(?P<rest>.*)|$)")
_4S_BLOCK_KEYS = {
    "?": "question", "!": "answer", "=": "accepted", "!=": "rejected", "/": "comment",
    "^": "sources", "@": "authors", ">": "handout",
}  # fmt: skip
_4S_HEADER_KEYS = {
    "###LJ": "lj_title", "###": "tournament", "##": "tour", "#DATE": "date",
    "#EDITOR": "editor", "#": "comment",
}  # fmt: skip
#: chgksuite's label override at the start of a field (``! !!Ответ~на~блиц 1. Кот.``): the label it
#: prints instead of "Ответ:", ``~`` for spaces; a display label, not part of the answer or question
_4S_LABEL_OVERRIDE = re.compile(r"^!!\S* ")
_4S_ESCAPE = re.compile(r"\\([_*~\[\]\\])")
_LIST_MARK = "\x00"  # prefix of a list item inside a collected field


def _4s_render(lines: list[str]) -> str:
    """Text of a 4s field: plain lines as they are, list items numbered ``1.``, ``2.``, ..."""
    out: list[str] = []
    n = 0
    for line in lines:
        if line.startswith(_LIST_MARK):
            n += 1
            out.append(f"{n}. {line[1:].strip()}")
        elif line.strip():
            out.append(line.strip())
    return "\n".join(out)


def _4s_parts(block: _Block) -> _Parts:
    f = block.fields
    sources = [line.lstrip(_LIST_MARK).strip() for line in f.get("sources", [])]
    authors = [line.lstrip(_LIST_MARK).strip() for line in f.get("authors", [])]
    question = _4s_render(f.get("question", []))
    handout = _4s_render(f.get("handout", []))
    if handout and question:  # read with its question, found by extract_handout (alone: missing_question)
        question = f"<раздатка>\n{handout}\n</раздатка>\n{question}"
    return _Parts(
        question=question,
        answer=_4s_render(f.get("answer", [])),
        accepted=_4s_render(f.get("accepted", [])),
        rejected=_4s_render(f.get("rejected", [])),
        comment=_4s_render(f.get("comment", [])),
        sources=[s for s in sources if s],
        authors=", ".join(a for a in authors if a),
    )


def parse_4s(text: str, *, source_file: str | None = None, encoding: str = "utf-8") -> PackReport:
    """Parse chgksuite 4s markup (already decoded).

    Questions are numbered 1, 2, ... in file order unless a ``№`` line gives the number; a ``№№ N``
    line (chgksuite's counter) numbers the next question N and those after it N+1, ...; a value
    that is not a number is a pack flag, ``unparsable_question_counter:LINE``.
    Header lines (``###``, ``##``, ``#DATE``, ``#EDITOR``, ``#``) close the current question;
    unmarked lines after them continue the header value.
    """
    lines = text.splitlines()
    context: dict[str, str | None] = {"tournament": None, "tour": None, "date": None}
    sections: list[dict[str, list[str]]] = [{}]
    questions: list[ChgkQuestion] = []
    block: _Block | None = None
    target: list[str] | None = None  # where continuation lines go
    counter = 0
    explicit_number: str | None = None
    pack_flags: list[str] = []

    def close() -> None:
        nonlocal block
        if block is not None:
            raw = "\n".join(lines[block.start : block.end]).strip("\n")
            questions.append(_make_question(block, _4s_parts(block), raw, source_file, encoding))
        block = None

    for i, original in enumerate(lines):
        line = _4S_ESCAPE.sub(r"\1", original)
        m = _4S_LINE.match(line)
        if m is None:
            if not line.strip():
                continue
            item = _4S_LIST_ITEM.match(line)
            content = (_LIST_MARK + (item.group("rest") or "")) if item else line
            if target is None:  # text before any marker, or right after a № line
                close()
                block = _Block(i, None, dict(context), {"question": []}, ["stray_text"])
                target = block.fields["question"]
            target.append(content)
            if block is not None:
                block.end = i + 1
            continue
        marker, rest = m.group("m"), m.group("rest").strip()
        if marker in _4S_HEADER_KEYS:
            close()
            key = _4S_HEADER_KEYS[marker]
            if key == "tour":
                sections.append({})
            if key in ("tournament", "tour", "date"):
                context[key] = rest or None
            target = sections[-1].setdefault(key, [])
            target.append(rest)
            continue
        if marker == "№№":
            close()
            if re.fullmatch(r"[0-9]{1,9}", rest):
                counter = int(rest) - 1
            else:
                pack_flags.append(f"unparsable_question_counter:{i + 1}")
            target = None
            continue
        if marker == "№":
            close()
            explicit_number = rest or None
            target = None
            continue
        key = _4S_BLOCK_KEYS[marker]
        if key == "question" and block is not None and set(block.fields) == {"handout"}:
            counter += 1  # the question of the handout just read: the same block
            block.number = explicit_number or str(counter)
            explicit_number = None
        elif key == "question":
            close()
            counter += 1
            block = _Block(i, explicit_number or str(counter), dict(context))
            explicit_number = None
        elif key == "handout" and (block is None or not set(block.fields) <= {"question", "handout"}):
            close()  # chgksuite writes a handout before its "?": it starts the next question
            block = _Block(i, None, dict(context))
        elif block is None:
            block = _Block(i, None, dict(context), flags=["missing_question_header"])
        rest = _4S_LABEL_OVERRIDE.sub("", rest, count=1)
        block.add(key, [rest] if rest else [])
        target = block.fields[key]
        block.end = i + 1
    close()
    _flag_duplicates(questions)
    headers = [
        {k: "\n".join(x.lstrip(_LIST_MARK).strip() for x in v if x.strip()) for k, v in sec.items()}
        for sec in sections
        if sec
    ]
    return PackReport(questions, "4s", encoding, source_file, headers, pack_flags)


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def _flag_duplicates(questions: list[ChgkQuestion]) -> None:
    """Flag every repeat of an id already seen in the same pack (the record is kept)."""
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            q.flags.append("duplicate")
        seen.add(q.id)


def parse_pack(data: bytes | str, *, name: str | None = None, fmt: PackFormat | None = None) -> PackReport:
    """Parse a pack from bytes (encoding detected) or from text.

    ``name`` is recorded as ``source_file`` and its extension guides the format guess; ``fmt``
    forces the format. A byte-order mark at the start of a line (packs joined into one file) is
    dropped and counted in a pack flag, ``inner_byte_order_marks:N``.
    """
    if isinstance(data, bytes):
        text, encoding, n_errors = decode_pack(data)
    else:
        text, encoding, n_errors = data.removeprefix("\ufeff"), "utf-8", 0
    text, n_boms = drop_inner_boms(text)
    fmt = fmt or detect_format(text, Path(name).suffix if name else "")
    parser = parse_4s if fmt == "4s" else parse_db
    report = parser(text, source_file=name, encoding=encoding)
    report.n_decode_errors = n_errors
    if n_errors:
        report.pack_flags.insert(0, f"decode_errors:{n_errors}")
    if n_boms:
        report.pack_flags.append(f"inner_byte_order_marks:{n_boms}")
    if not report.questions:
        report.pack_flags.append("empty" if not text.strip() else "no_questions")
    return report


def read_pack_report(path: str | Path) -> PackReport:
    """Read one pack file (format from extension and content, encoding detected)."""
    path = Path(path)
    return parse_pack(path.read_bytes(), name=path.name)


class PackInputError(InputError):
    """A pack breaks the input limits (:mod:`cresowlve_core.inputs`); the message names ``file:line``."""


def _block_line(text: str, raw: str) -> int | None:
    """The 1-based line where a block's raw text starts in its pack's text (lines end at ``\\n``)."""
    at = text.replace("\r\n", "\n").find(raw) if raw else -1
    return None if at < 0 else text.replace("\r\n", "\n").count("\n", 0, at) + 1


def read_pack_checked(path: str | Path, *, max_input_chars: int | None = None) -> PackReport:
    """:func:`read_pack_report` for a build: a pack with a control character other than tab and
    newline, or a question above the input size limit (``max_input_chars``; None: 64 KB), raises
    :class:`PackInputError` naming ``file:line``, before anything is sent. A block without a
    question or an answer stays a flagged record (``missing_question``, ``missing_answer``)."""
    path = Path(path)
    data = path.read_bytes()
    text = drop_inner_boms(decode_pack(data)[0])[0]  # the text the parser reads, so a block's raw text is found
    if (bad := control_problem(text)) is not None:
        raise PackInputError(f"{path}:{bad[0]}: {bad[1]}")
    report = parse_pack(data, name=path.name)
    for q in report.questions:
        if q.question.strip() and (problem := text_problem(q.question, "question", max_chars=max_input_chars)):
            line = _block_line(text, q.raw)
            where = f"{path}:{line}" if line is not None else f"{path} (question {q.number})"
            raise PackInputError(f"{where}: {problem}")
    return report


def read_pack(path: str | Path) -> list[ChgkQuestion]:
    """Read one pack file and log a one-line summary (a warning if anything was flagged,
    including an empty pack or one in which no question was found)."""
    report = read_pack_report(path)
    level = logging.WARNING if report.n_flagged or report.pack_flags else logging.INFO
    log.log(level, report.summary())
    return report.questions
