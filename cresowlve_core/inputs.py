"""Input limits shared by every stage's reader: eval items (also as the error labeller and the
contamination tests read them), CREATE queries, the construction's packs and dataset files, the
knowledge graph of the synthetic pipeline and CREATE.

One function, :func:`text_problem`, decides whether a question, answer, query or graph line may be
sent to a model; :func:`control_problem` finds a control character in a whole file's text with its
line. Each reader raises its own input-error type (a ``ValueError``, exit 2) with the problem
prefixed by ``file:line`` (or the item id where there is no line). The limits:

- the text is not empty or only whitespace;
- no control character other than tab and newline (a CR is allowed only as part of a CRLF line
  end): a NUL or an escape code in a question is refused, never sent;
- a question or query is at most :data:`DEFAULT_MAX_INPUT_CHARS` characters (64 KB), unless the
  command's ``--max-input-chars N`` raises it. Answers are not size-limited (they are not sent
  to the model under test).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from typing import Any

#: the largest question or query accepted without ``--max-input-chars`` (65,536 characters)
DEFAULT_MAX_INPUT_CHARS = 65_536

# Unicode's control characters (category Cc: U+0000-001F, U+007F-009F) but tab and newline; a CR
# only where it is not part of a CRLF line end
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


def _bad_control(text: str) -> tuple[int, str] | None:
    """The 1-based position and character of the first disallowed control character, or None."""
    m = _CONTROL.search(text)
    return None if m is None else (m.start() + 1, m.group(0))


def _control_message(ch: str) -> str:
    return f"control character U+{ord(ch):04X}"


def control_problem(text: str) -> tuple[int, str] | None:
    """The 1-based line (lines end at ``\\n``) of the first disallowed control character in a file's
    text and the problem, e.g. ``(3, "control character U+0000 at column 7 ...")``, or None."""
    m = _CONTROL.search(text)
    if m is None:
        return None
    line = text.count("\n", 0, m.start()) + 1
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return line, (f"{_control_message(m.group(0))} at column {column} (only tab and newline are allowed); "
                  "remove it")


def add_max_input_chars(parser: argparse.ArgumentParser, what: str = "a question") -> None:
    """The one ``--max-input-chars N`` flag of every command that reads inputs for a model."""
    from cresowlve_core.argtypes import positive_int

    parser.add_argument("--max-input-chars", type=positive_int, default=None,
                        help=f"refuse {what} longer than N characters (default: {DEFAULT_MAX_INPUT_CHARS}, 64 KB)")


def run_input_limit(manifest: Mapping[str, Any], given: int | None = None) -> int | None:
    """The question size limit to read an evaluation run's items under again (the error labeller,
    the contamination tests, their reports): ``given`` (a ``--max-input-chars``) when set, else the
    limit the run accepted its items under (its manifest's ``config.max_input_chars``), else None
    (:data:`DEFAULT_MAX_INPUT_CHARS`). A run made with a raised limit is read under that limit."""
    if given is not None:
        return given
    config = manifest.get("config")
    limit = config.get("max_input_chars") if isinstance(config, Mapping) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


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
        return f"{field}: {_control_message(ch)} at character {pos} (only tab and newline are allowed); remove it"
    limit = DEFAULT_MAX_INPUT_CHARS if max_chars is None else max_chars
    if size_limited and len(text) > limit:
        return (f"{field}: {len(text):,} characters, above the limit of {limit:,}; "
                "pass --max-input-chars N to raise it")
    return None
