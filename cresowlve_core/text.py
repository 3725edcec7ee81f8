"""Small text helpers every stage uses (names of run directories, readable ids)."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UnsafeNameError(ValueError):
    """A name that cannot name a directory (empty, ``.`` or ``..``): refused, exit 2."""


def slug(text: str) -> str:
    """The one file-name-safe form of a name, for every run directory and export (case kept).

    A name made only of ``A-Z a-z 0-9 . _ -`` is kept as it is (``gpt-4.1``). Otherwise every other
    run of characters becomes ``-`` and 8 hex digits of the name's SHA-256 are appended, so the rule
    is injective: ``openai/gpt-4.1`` -> ``openai-gpt-4.1-<hash>``, and two names that differ only
    in non-ASCII characters get two directories. Empty names, ``.`` and ``..`` raise
    :class:`UnsafeNameError` (they would name the parent directory itself)."""
    if text.strip() in ("", ".", ".."):
        raise UnsafeNameError(f"{text!r} cannot name a directory (empty, '.' or '..'): choose another name")
    safe = _UNSAFE.sub("-", text).strip("-")
    if safe == text:
        return safe
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return f"{safe.strip('.') or 'x'}-{digest}"


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
