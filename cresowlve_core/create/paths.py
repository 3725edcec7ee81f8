"""Paths: parsing a model's answer into paths, and the structural validity of a path.

A *path* is a list of triples ``[head, relation, tail]``. A CREATE answer is a JSON object
``{"1": [[h, r, t], ...], "2": ...}`` inside ``<answer>…</answer>``.

Parsing (:func:`parse_answer`) is tolerant: it takes the last ``<answer>`` block (or an unclosed
one, or the whole text; at most :data:`MAX_PARSE_CHARS` of it), strips code fences, ``//`` comments and trailing commas, accepts Python literals
(tuples, single quotes), and when the object as a whole does not parse — typically because the
output was cut off — it recovers every *complete* path value it can find. What it had to do is
listed in ``flags``; output with no recoverable path is ``status="unparseable"`` with zero paths.

Validity (:func:`check_validity`) follows the CREATE authors' released scoring code, all
comparisons lower-cased, of whitespace-trimmed entities, and by substring containment:

* ``malformed_triple``: every triple has exactly three non-empty string parts;
* ``entity_a_not_in_first``: ``entity_a`` is a substring of some part of the first triple;
* ``entity_b_not_in_last``: ``entity_b`` is a substring of some part of the last triple;
* ``last_head_equals_tail``: the last triple's head differs from its tail;
* ``broken_chain_at_<i>``: triples ``i-1`` and ``i`` share an entity — some entity (head or
  tail) of triple ``i`` is a substring of some entity of triple ``i-1``. The direction matters and
  was checked against the authors' recorded flags: ``beijing → 2008 beijing olympics`` breaks the
  chain, ``8th united states congress → united states congress`` does not.

The authors' *recorded* flags in ``data/create/recorded`` agree with the chain and triple-shape
checks on 2978 of 2979 paths, but were computed without the entity-b and head≠tail checks; the
report shows how many recorded paths the full check would reject.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Triple = list[str]
Path = list[Triple]

_ANSWER_TAG = re.compile(r"<(/?)answer>", re.IGNORECASE)
#: the longest answer region parsed (the longest recorded CREATE answer, reasoning included, is
#: 69,500 characters, its paths 15,506): a longer one is cut here and flagged, so a degenerate
#: output cannot hold the event loop (bench/parsers.py: each parser < 0.25 s on 400 KB)
MAX_PARSE_CHARS = 50_000
_FENCE = re.compile(r"```[a-zA-Z]*")

ParseStatus = Literal["ok", "partial", "empty", "unparseable"]


@dataclass
class ParsedAnswer:
    """The paths found in one answer, and how they were found.

    ``status``: ``ok`` (the object parsed whole), ``partial`` (only some complete paths could be
    recovered), ``empty`` (a well-formed but empty answer), ``unparseable`` (nothing usable).
    """

    paths: list[Path]
    status: ParseStatus
    flags: list[str] = field(default_factory=list)


def _answer_region(text: str, flags: list[str]) -> str:
    """The last non-empty ``<answer>…</answer>`` block (the last block if all are empty), else
    the text after the last ``<answer>``, else the whole text. One pass over the tags: a lazy
    ``<answer>(.*?)</answer>`` search rescans to the end from every unclosed tag (16,000 of them
    took 38 s)."""
    blocks: list[str] = []
    opened = -1  # where the content of the block being read starts
    last_open = -1
    for tag in _ANSWER_TAG.finditer(text):
        if not tag.group(1):
            last_open = tag.end()
            if opened < 0:
                opened = tag.end()
        elif opened >= 0:
            blocks.append(text[opened : tag.start()])
            opened = -1
    if blocks:
        nonempty = [b for b in blocks if b.strip()]
        return (nonempty or blocks)[-1]
    if last_open >= 0:
        flags.append("unclosed_answer_tag")
        return text[last_open:]
    flags.append("no_answer_tag")
    return text


def _strip_fences(s: str, flags: list[str]) -> str:
    if "```" in s:
        flags.append("code_fence")
        return _FENCE.sub("", s)
    return s


# a string literal (double-quoted; single-quoted unless the quote follows a letter or digit, as in
# "don't"), running to the end of the text when unclosed; possessive (*+), so matching is linear
_STRING = r"""(?:"(?:[^"\\]|\\.?)*+(?:"|\Z)|(?<![^\W_])'(?:[^'\\]|\\.?)*+(?:'|\Z))"""
_CLEANUP = re.compile(rf"({_STRING})|//[^\n]*+|,(?=\s*+[\]}}])", re.DOTALL)
_STRUCTURE = re.compile(rf"{_STRING}|[\[\]{{}}()]", re.DOTALL)


def _drop_trailing_commas(s: str) -> str:
    """Remove ``//`` line comments and commas that directly precede a closing bracket.

    Both only outside string literals (so ``"https://..."`` survives). One regex pass (a
    character loop in Python took 0.4 s on 400 KB).
    """
    return _CLEANUP.sub(r"\1", s)


def _loads(s: str) -> Any:
    """JSON first, then a Python literal (tuples, single quotes); raises ValueError."""
    try:
        return json.loads(s)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise ValueError(str(exc)) from None


def _as_path(value: Any) -> Path | None:
    """A list of triples (each a list of strings), or None when ``value`` is not path-shaped."""
    if isinstance(value, dict):  # e.g. {"path": [...], "path probability": 0.2}
        value = value.get("path")
    if not isinstance(value, (list, tuple)) or not value:
        return None
    triples: Path = []
    for t in value:
        if not isinstance(t, (list, tuple)):  # an empty triple is kept: the path is malformed, not absent
            return None
        if any(isinstance(x, (list, tuple, dict)) for x in t):
            return None
        triples.append(["" if x is None else str(x).strip() for x in t])
    return triples


def _paths_from_object(obj: Any, flags: list[str]) -> list[Path]:
    if isinstance(obj, dict):
        values = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        values = list(obj)
        flags.append("list_instead_of_object")
    else:
        return []
    paths: list[Path] = []
    for v in values:
        p = _as_path(v)
        if p is None:
            flags.append("skipped_non_path_value")
        else:
            paths.append(p)
    return paths


def _balanced_spans(s: str, start: int) -> list[tuple[int, int]]:
    """Spans of the bracketed values (``[...]`` or ``{...}``) directly inside the container at ``start``.

    Stops quietly at the end of the text, so a truncated final value is simply not returned.
    Visits only brackets and string literals (one regex scan), not every character.
    """
    spans: list[tuple[int, int]] = []
    depth = 0
    value_start = -1
    for m in _STRUCTURE.finditer(s, start):
        ch = s[m.start()]
        if ch in "\"'":
            continue
        if ch in "[{(":
            depth += 1
            if depth == 2:
                value_start = m.start()
        else:
            if depth == 2 and value_start >= 0:
                spans.append((value_start, m.end()))
                value_start = -1
            depth -= 1
            if depth == 0:
                break
    return spans


def _recover_paths(s: str, flags: list[str]) -> list[Path]:
    start = min((i for i in (s.find("{"), s.find("[")) if i >= 0), default=-1)
    if start < 0:
        return []
    paths: list[Path] = []
    for a, b in _balanced_spans(s, start):
        try:
            p = _as_path(_loads(s[a:b]))
        except ValueError:
            p = None
        if p is not None:
            paths.append(p)
    return paths


def parse_answer(text: str | None) -> ParsedAnswer:
    """Parse a model's CREATE answer into paths (see module docstring)."""
    flags: list[str] = []
    if not text or not text.strip():
        return ParsedAnswer([], "unparseable", ["empty_output"])
    region = _strip_fences(_answer_region(text, flags), flags).strip()
    if len(region) > MAX_PARSE_CHARS:
        region = region[:MAX_PARSE_CHARS]
        flags.append(f"cut_at_{MAX_PARSE_CHARS}_chars")
    start = min((i for i in (region.find("{"), region.find("[")) if i >= 0), default=-1)
    if start < 0:
        flags.append("no_json")
        return ParsedAnswer([], "unparseable", flags)
    body = region[start:]
    cleaned = _drop_trailing_commas(body)
    if cleaned != body:
        flags.append("json_cleanup")
    end = max(cleaned.rfind("}"), cleaned.rfind("]"))
    try:
        obj = _loads(cleaned[: end + 1]) if end >= 0 else None
    except ValueError:
        obj = None
    if obj is not None:
        paths = _paths_from_object(obj, flags)
        if paths:
            return ParsedAnswer(paths, "ok", flags)
        if isinstance(obj, (dict, list)) and not obj:
            return ParsedAnswer([], "empty", flags + ["empty_answer"])
    paths = _recover_paths(cleaned, flags)
    if paths:
        return ParsedAnswer(paths, "partial", flags + ["recovered_partial"])
    return ParsedAnswer([], "unparseable", flags + ["unparseable"])


# --------------------------------------------------------------------------- validity


@dataclass(frozen=True)
class Validity:
    """Whether a path passes the structural checks, and every check it failed."""

    valid: bool
    reasons: tuple[str, ...] = ()


def _entities(t: Triple) -> tuple[str, ...]:
    """A triple's head and tail, lower-cased (none for an empty triple, which connects nothing)."""
    return (t[0].lower(), t[-1].lower()) if t else ()


def check_validity(path: Path, entity_a: str, entity_b: str) -> Validity:
    """The structural checks of the released CREATE scoring code (see module docstring)."""
    reasons: list[str] = []
    if not path:
        return Validity(False, ("empty_path",))
    # an empty part is no entity: as a substring of every entity it would connect any two triples
    if any(len(t) != 3 or not all(isinstance(x, str) and x.strip() for x in t) for t in path):
        reasons.append("malformed_triple")
    # the triples' parts are read stripped (:func:`_as_path`), so the entities are compared stripped too
    a, b = entity_a.strip().lower(), entity_b.strip().lower()
    if not any(a in str(x).lower() for x in path[0]):
        reasons.append("entity_a_not_in_first")
    if not any(b in str(x).lower() for x in path[-1]):
        reasons.append("entity_b_not_in_last")
    if len(path[-1]) >= 2 and str(path[-1][0]).lower() == str(path[-1][-1]).lower():
        reasons.append("last_head_equals_tail")
    for i in range(1, len(path)):
        prev, cur = _entities(path[i - 1]), _entities(path[i])
        if not any(e in p for e in cur for p in prev):
            reasons.append(f"broken_chain_at_{i}")
    return Validity(not reasons, tuple(reasons))


def normalise_path(path: Path) -> Path:
    """Lower-cased, whitespace-trimmed copy (how the recorded data stores paths)."""
    return [[str(x).strip().lower() for x in t] for t in path]
