"""Small text helpers every stage uses (names of run directories, readable ids)."""

from __future__ import annotations

import re


def slug(text: str) -> str:
    """A file-name-safe form of ``text`` (case kept): ``openai/gpt-4.1`` -> ``openai-gpt-4.1``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


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
