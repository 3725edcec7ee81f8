"""Input limits shared by every stage's reader (eval items, CREATE queries).

One function, :func:`text_problem`, decides whether a question, answer or query text may be sent
to a model; each reader raises its own input-error type (a ``ValueError``, exit 2) with the
problem prefixed by ``file:line`` (or the item id where there is no line). The limits:

- the text is not empty or only whitespace;
- no control character other than tab and newline (a CR is allowed only as part of a CRLF line
  end): a NUL or an escape code in a question is refused, never sent;
- a question or query is at most :data:`DEFAULT_MAX_INPUT_CHARS` characters (64 KB), unless the
  command's ``--max-input-chars N`` raises it. Answers are not size-limited (they are not sent
  to the model under test).
"""

from __future__ import annotations

import unicodedata

#: the largest question or query accepted without ``--max-input-chars`` (65,536 characters)
DEFAULT_MAX_INPUT_CHARS = 65_536

_ALLOWED_CONTROLS = frozenset("\t\n")


def _bad_control(text: str) -> tuple[int, str] | None:
    """The 1-based position and character of the first disallowed control character, or None."""
    for i, ch in enumerate(text):
        if ch in _ALLOWED_CONTROLS or unicodedata.category(ch) != "Cc":
            continue
        if ch == "\r" and text[i + 1:i + 2] == "\n":  # CRLF line end
            continue
        return i + 1, ch
    return None


def text_problem(text: object, field: str, *, max_chars: int | None = None, size_limited: bool = True) -> str | None:
    """Why ``text`` (the ``field`` of one input) is refused, as ``"field: ..."``, or None if it is fine.

    ``max_chars`` (None: :data:`DEFAULT_MAX_INPUT_CHARS`) applies when ``size_limited``.
    """
    if not isinstance(text, str):
        return f"{field}: must be a string, got {type(text).__name__}"
    if not text.strip():
        return f"{field}: must not be empty"
    if (bad := _bad_control(text)) is not None:
        pos, ch = bad
        return (f"{field}: control character U+{ord(ch):04X} at character {pos} (only tab and newline "
                "are allowed); remove it")
    limit = DEFAULT_MAX_INPUT_CHARS if max_chars is None else max_chars
    if size_limited and len(text) > limit:
        return (f"{field}: {len(text):,} characters, above the limit of {limit:,}; "
                "pass --max-input-chars N to raise it")
    return None
