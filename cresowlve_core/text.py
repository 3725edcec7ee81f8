"""Small text helpers every stage uses (names of run directories, readable ids)."""

from __future__ import annotations

import re


def slug(text: str) -> str:
    """A file-name-safe form of ``text`` (case kept): ``openai/gpt-4.1`` -> ``openai-gpt-4.1``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"
