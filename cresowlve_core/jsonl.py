"""The one JSON Lines reader and writer of the project: run directories, stage outputs, input files.

Two rules make a JSONL file survive any text a model can produce:

* **Lines are split on ``"\\n"`` only.** ``str.splitlines()`` also splits on U+2028, U+2029,
  U+0085, U+001C-U+001E, ``\\v`` and ``\\f``, all of which may appear raw inside a JSON string,
  so one answer holding U+2028 used to make a whole run directory unreadable.
* **Records are written with those separators escaped** (``\\u2028``, ``\\u2029``, ``\\u0085``), so
  a file this module writes is also read correctly by tools that split on them (``jq`` in some
  versions, editors, JavaScript's line handling). Everything else stays readable UTF-8.

Files written before this module (raw separators inside strings) are read unchanged: a raw U+2028
inside a JSON string is valid JSON.

:func:`~cresowlve_core.jsontext.dumps` (re-exported here) is also **the one JSON writer** of the project (JSON Lines here, whole JSON files in
:mod:`cresowlve_core.outfiles`, the response cache, the reports index): a float that is not finite
(``NaN``, ``Infinity``) is written as ``null`` (unknown), and ``allow_nan=False`` guarantees that no
file the project writes ever holds ``NaN`` or ``Infinity``, which strict JSON readers (pandas with
pyarrow, JavaScript, ``jq``) refuse.

Every problem (not UTF-8, a line that is not JSON, a line that is not an object) is one error
naming the file and line. A torn *last* line (a kill or a full disk mid-write; it has no ``"\\n"``
after it) can be skipped on request (``torn_tail_ok``), the run-directory convention.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cresowlve_core.failures import UsageError
from cresowlve_core.jsontext import dumps, finite

__all__ = ["JSONLError", "dumps", "dumps_line", "dumps_lines", "finite", "iter_jsonl_numbered", "iter_lines",
           "parse_jsonl", "read_jsonl", "read_jsonl_numbered", "read_line_at", "read_text", "scan_jsonl", "write_jsonl"]

log = logging.getLogger(__name__)

#: Characters that some line readers treat as line ends although JSON allows them raw in strings.
_SEPARATOR_ESCAPES = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


class JSONLError(UsageError, ValueError):
    """A JSON Lines file cannot be read; the message names the file and line."""


def dumps_line(record: Any) -> str:
    """One record as one JSON line (no trailing newline): :func:`dumps`, line separators escaped."""
    line = dumps(record)
    if "\u2028" in line or "\u2029" in line or "\x85" in line:  # rare: the translation costs more than the scans
        return line.translate(_SEPARATOR_ESCAPES)
    return line


def dumps_lines(records: Iterable[Any]) -> str:
    """Many records as JSON Lines text, each line ending in ``"\\n"``."""
    return "".join(dumps_line(r) + "\n" for r in records)


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every non-blank line of ``text``, split on ``"\\n"`` only."""
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield lineno, line


def not_json(exc: json.JSONDecodeError) -> str:
    """``not JSON (PROBLEM at column N)``: the decoder's message without its own trailing "at" (its
    ``Unterminated string starting at`` and ``Invalid control character at`` end with one)."""
    return f"not JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"


def _object(line: str, where: str | Path, lineno: int, torn_tail: bool, error: type[Exception],
            what: str) -> dict[str, Any] | None:
    """The JSON object on one line; None for a torn last line (``torn_tail``: skipped with a warning)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        if torn_tail:
            log.warning("%s: ignoring a torn last line (the run was killed mid-write)", where)
            return None
        raise error(f"{where}:{lineno}: {not_json(exc)}") from None
    if not isinstance(row, dict):
        shown = line.strip()
        shown = shown if len(shown) <= 40 else shown[:40] + "..."
        raise error(f"{where}:{lineno}: expected a JSON object (one {what} per line), got {shown}")
    return row


def parse_jsonl(text: str, where: str | Path, *, torn_tail_ok: bool = False,
                error: type[Exception] = JSONLError, what: str = "record") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of JSON Lines ``text``.

    ``where`` names the source in errors (``file:line: ...``). With ``torn_tail_ok`` a last line
    that is not terminated by ``"\\n"`` and does not parse is skipped with a warning instead of
    being an error. ``error`` is the exception class raised (default :class:`JSONLError`); ``what``
    names one line's content in errors ("one record per line").
    """
    rows: list[tuple[int, dict[str, Any]]] = []
    last = text.count("\n") + 1  # the number of the unterminated last segment
    for lineno, line in iter_lines(text):
        row = _object(line, where, lineno, torn_tail_ok and lineno == last, error, what)
        if row is not None:
            rows.append((lineno, row))
    return rows


def read_text(path: str | Path, *, error: type[Exception] = JSONLError) -> str:
    """A JSONL file's text: UTF-8, a byte-order mark accepted; otherwise ``error`` naming the line."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}:{bad_line}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8") from None


def read_jsonl_numbered(path: str | Path, *, torn_tail_ok: bool = False, error: type[Exception] = JSONLError,
                        what: str = "record") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every record of ``path`` (the rules of :func:`parse_jsonl`), read one
    line at a time (:func:`scan_jsonl`): the file's text is never held beside its records."""
    return list(iter_jsonl_numbered(path, torn_tail_ok=torn_tail_ok, error=error, what=what))


def iter_jsonl_numbered(path: str | Path, *, torn_tail_ok: bool = False, error: type[Exception] = JSONLError,
                        what: str = "record") -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl_numbered` one record at a time: a reader that turns each record into something
    else never holds the file's records beside what it makes of them."""
    for lineno, _, row in _scan(Path(path), torn_tail_ok, error, what):
        yield lineno, row


def scan_jsonl(path: str | Path, *, torn_tail_ok: bool = False, error: type[Exception] = JSONLError,
               what: str = "record") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(byte offset of the line, object)`` for every record of ``path``, read one line at a time.

    The same rules and errors as :func:`read_jsonl_numbered` (split on ``"\\n"`` only, UTF-8 with an
    optional byte-order mark, a torn last line skipped with ``torn_tail_ok``), but the file is never
    held whole: memory stays that of one line. :func:`read_line_at` reads a line again by its offset.
    """
    for _, offset, row in _scan(Path(path), torn_tail_ok, error, what):
        yield offset, row


def _scan(path: Path, torn_tail_ok: bool, error: type[Exception],
          what: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(line number, byte offset, object)`` for every record of ``path`` (:func:`scan_jsonl`)."""
    with path.open("rb") as f:
        offset = 0
        for lineno, raw in enumerate(f, 1):
            start, offset = offset, offset + len(raw)
            try:
                line = raw.decode("utf-8-sig" if start == 0 else "utf-8")
            except UnicodeDecodeError as exc:
                raise error(f"{path}:{lineno}: not UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8") from None
            if not line.strip():
                continue
            row = _object(line, path, lineno, torn_tail_ok and not raw.endswith(b"\n"), error, what)
            if row is not None:
                yield lineno, start, row


def read_line_at(path: str | Path, offset: int) -> dict[str, Any]:
    """The record whose line starts at byte ``offset`` of ``path`` (an offset :func:`scan_jsonl` gave)."""
    with Path(path).open("rb") as f:
        f.seek(offset)
        row: dict[str, Any] = json.loads(f.readline().decode("utf-8-sig" if offset == 0 else "utf-8"))
    return row


def read_jsonl(path: str | Path, *, torn_tail_ok: bool = False, missing_ok: bool = False,
               error: type[Exception] = JSONLError) -> list[dict[str, Any]]:
    """Every record of ``path`` in file order; ``[]`` for a missing file if ``missing_ok``."""
    if missing_ok and not Path(path).exists():
        return []
    return [row for _, row in read_jsonl_numbered(path, torn_tail_ok=torn_tail_ok, error=error)]


def write_jsonl(path: str | Path, records: Iterable[Any], *, transform: Any = None) -> Path:
    """Write ``records`` as JSON Lines atomically (a temporary file, fsynced, then renamed).

    The text goes through the redaction choke point (:func:`cresowlve_core.secrets.scrub`), or
    through ``transform`` (``str -> str``) instead when one is given.
    """
    from cresowlve_core.outfiles import write_text

    path = Path(path)
    text = dumps_lines(records)
    if transform is not None:
        text = transform(text)
    return write_text(path, text)
