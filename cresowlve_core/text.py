"""Small text helpers every stage uses (names of run directories and configurations, readable ids)."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from cresowlve_core.failures import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UnsafeNameError(UsageError, ValueError):
    """A name that cannot name a directory (empty, ``.`` or ``..``): refused, exit 2."""


#: the longest :func:`slug` (ASCII): a file name has 255 bytes, and a slug gets suffixes (``__en``, ``_table1.csv``)
MAX_SLUG = 200


def slug(text: str) -> str:
    """The one file-name-safe form of a name, for every run directory and export (case kept).

    A name made only of ``A-Z a-z 0-9 . _ -`` is kept as it is (``gpt-4.1``). Otherwise every other
    run of characters becomes ``-`` and 8 hex digits of the name's SHA-256 are appended, so the rule
    is injective: ``openai/gpt-4.1`` -> ``openai-gpt-4.1-<hash>``, and two names that differ only
    in non-ASCII characters get two directories. A longer one than :data:`MAX_SLUG` is cut to fit it, with
    the hash. Empty names, ``.`` and ``..`` raise
    :class:`UnsafeNameError` (they would name the parent directory itself)."""
    if text.strip() in ("", ".", ".."):
        raise UnsafeNameError(f"{text!r} cannot name a directory (empty, '.' or '..'): choose another name")
    safe = _UNSAFE.sub("-", text).strip("-")
    if safe == text and len(safe) <= MAX_SLUG:
        return safe
    return hashed_name(safe, text)


def hashed_name(name: str, whole: str, limit: int = MAX_SLUG) -> str:
    """The start of ``name`` that leaves room in ``limit`` characters for ``-`` and 8 hex digits of the
    SHA-256 of ``whole`` (what it was made from), which follow it: two names that share a start stay apart."""
    return f"{name[:limit - 9].strip('.-') or 'x'}-{_digest(whole)}"


def _digest(text: str) -> str:
    """8 hex digits of the SHA-256 of ``text`` (what tells two names with one safe form apart)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


_ID_UNSAFE = re.compile(r"[^a-z0-9]+")


def id_part(text: str, max_len: int = 40) -> str:
    """A lower-case readable part of an id (``Morton Gould`` -> ``morton-gould``), for ids built from
    names (CREATE query ids). An ASCII name that fits ``max_len`` keeps its readable form, as ids
    always had; a name with a non-ASCII character, or one cut to ``max_len``, gets
    :func:`slug`'s hash of itself appended, so two names that differ only in non-ASCII characters
    (``Müller``, ``Möller``) or after ``max_len`` characters get two ids."""
    readable = _ID_UNSAFE.sub("-", text.lower()).strip("-")
    if text.isascii() and len(readable) <= max_len:
        return readable or "x"
    return f"{readable[:max_len].strip('-') or 'x'}-{_digest(text)}"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``1 configuration``, ``3 configurations`` (``plural_form`` for irregular nouns)."""
    return f"{n} {noun if n == 1 else (plural_form or noun + 's')}"


def shown(value: object, missing: str = "–") -> str:
    """A value for a table or a summary line: ``missing`` for None/NaN (never ``None`` or ``nan``),
    integral floats without ``.0``."""
    if value is None or (isinstance(value, float) and value != value):
        return missing
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def config_label(model: str, effort: str | None) -> str:
    """``"GPT-5.4 (medium)"``, or just the model name when there is no effort setting."""
    e = normalise_effort(effort)
    return f"{model} ({e})" if e else str(model)


def config_name(model: str, effort: Any, aliases: dict[str, str] | None = None) -> str:
    """The one name of a configuration in every table, chart, console line and ``cresowlve runs``:
    the grid's label of ``model`` (``aliases``: model -> label), else the model, with its effort
    (``gpt-5.4 (medium)``). Here, not in the analysis, so that naming a grid's cells imports no pandas."""
    return config_label((aliases or {}).get(str(model)) or str(model), effort)


#: the effort that asks a reasoning model not to reason (GPT-5.x ``none``): its answers should show none
NO_REASONING = "none"


def normalise_effort(effort: Any) -> str:
    """Effort as a lowercase string; ``None``, NaN, ``""`` and ``"-"`` all mean no setting."""
    if effort is None or (isinstance(effort, float) and math.isnan(effort)):
        return ""
    e = str(effort).strip().lower()
    return "" if e in {"", "-", "none_set"} else e
