"""Strings read from run directories (model names, labels, ids, answers) shown as text, never run.

Everything a report, the index or an explorer shows from a run directory passes one of these:

- :func:`html_text` for a value placed in HTML;
- :func:`markdown` for a Markdown message as a whole (what :func:`cresowlve_core.reporting.say` displays): every ``<`` and ``&``
  becomes an entity, so no name can open an HTML tag, and every code span becomes a ``<code>``
  element whose text is escaped the same way, so a name inside backticks stays literal too;
- :func:`styler` for a table rendered by a pandas ``Styler`` (cells, row and column labels escaped;
  pandas escapes a plain ``DataFrame.to_html`` itself);
- :func:`markdown_cell` for a cell of a Markdown table written to a file (the data card);
- :func:`csv_cell` for a cell of an exported CSV (no spreadsheet formula, no bare carriage return);
- :func:`one_line` for a name or a provider's message placed in a terminal line or inside a
  Markdown sentence: no terminal escape, carriage return, bidirectional override or line break, so
  it can neither drive the terminal nor start a heading or a list.

Vega draws chart titles and labels as SVG or canvas text, and vega-tooltip escapes tooltip HTML by
default (the reports never override its ``sanitize``), so chart specs are left as they are.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

# a run of backticks (CommonMark opens a code span with one and closes it with a run of the same length)
_TICKS = re.compile(r"`+")
# characters Markdown (with nbconvert's math) gives a meaning to inside a line: written as numeric
# entities inside <code>; "_" only where it could start or end emphasis (never between two letters)
_MD_PUNCT = re.compile(r"[\\`*\[\]~<>&$]|(?<![^\W_])_|_(?![^\W_])")
# outside code spans: no HTML tag, no entity, no link (nbconvert's Markdown renderer allows
# javascript: links, so a name must not be able to open one), no math (nbconvert's renderer escapes
# the text between two "$" a second time, so an entity written for a "<" there was shown as "&lt;")
_OUTSIDE = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "&#91;", "$": "&#36;"}
# the ":" of a bare URL's "://": the renderer's autolink (mistune's url plugin, GFM's) matches the
# written characters, so as an entity it is shown as ":" and no longer makes the URL a link
_URL_COLON = re.compile(r":(?=//)")
# what a Markdown table cell escapes with a backslash (CommonMark escapes any ASCII punctuation this way)
_CELL_MARKUP = re.compile(r"[\\`\[\]<>&|$]")
# what may stand before a blockquote's ">" on its line: indentation and the markers of outer quotes
_QUOTE_PREFIX = re.compile(r"(?: {0,3}> ?)* {0,3}")
# what a spreadsheet reads as the start of a formula (OWASP "CSV injection")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# C0 and C1 controls but tab and line feed, and the bidirectional embeddings, overrides and isolates
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def one_line(value: Any, limit: int | None = None) -> str:
    """``value`` as one line of plain text: every control character (an ANSI or OSC escape's ESC, a
    carriage return, a bell, a bidirectional override) and every line break becomes a space, and runs
    of white space one space; at most ``limit`` characters."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split())
    return text if limit is None else text[:limit]


def html_text(value: Any) -> str:
    """``value`` as HTML text (``None`` as empty): ``<``, ``>``, ``&`` and quotes escaped."""
    return html.escape("" if value is None else str(value), quote=True)


def _entities(text: str) -> str:
    return _MD_PUNCT.sub(lambda m: f"&#{ord(m.group(0))};", text)


def _opens_blockquote(md: str, i: int) -> bool:
    """True when the ``>`` at ``md[i]`` is a blockquote marker: only spaces (and outer markers) before it
    on its line. Kept as written, it cannot open an HTML tag (only ``<`` can)."""
    return _QUOTE_PREFIX.fullmatch(md, md.rfind("\n", 0, i) + 1, i) is not None


def markdown(md: str) -> str:
    """A Markdown message with no raw HTML left in it, whatever the names interpolated into it.

    Outside code spans ``&``, ``<``, ``>``, ``[`` and ``$`` become entities (Markdown shows them as the characters),
    but a ``>`` that starts a line's blockquote stays one, and so does the ``:`` of a bare URL's ``://``, which
    the renderer would otherwise make a link (cutting the name at an entity it took into the URL);
    a code span (``` `name` ```, any number of backticks, found as CommonMark finds it) becomes
    ``<code>`` with its text written as entities, so the Markdown renderer neither runs nor
    reinterprets it. Emphasis, lists and headings written by the caller keep working.
    """
    out: list[str] = []
    i = 0
    while i < len(md):
        if md[i] == "\\" and i + 1 < len(md) and _MD_PUNCT.fullmatch(md[i + 1]):  # a backslash escape
            out.append(_entities(md[i + 1]))
            i += 2
            continue
        m = _TICKS.match(md, i) if md[i] == "`" else None
        if m is None:
            if md[i] == ">" and _opens_blockquote(md, i):
                out.append(">")
            elif _URL_COLON.match(md, i):
                out.append("&#58;")
            else:
                out.append(_OUTSIDE.get(md[i], md[i]))
            i += 1
            continue
        run = m.group(0)
        close = next((c for c in _TICKS.finditer(md, m.end()) if len(c.group(0)) == len(run)), None)
        if close is None:  # no closing run: the backticks are literal text
            out.append(_entities(run))
            i = m.end()
            continue
        body = md[m.end():close.start()].replace("\n", " ")
        if len(body) > 2 and body[0] == " " and body[-1] == " " and body.strip():
            body = body[1:-1]  # CommonMark strips one space on each side of a padded code span
        out.append(f"<code>{_entities(body)}</code>")
        i = close.end()
    return "".join(out)


def markdown_cell(value: Any) -> str:
    """``value`` as the text of one cell of a Markdown table in a file (``None`` as empty): one line
    (:func:`one_line`), and every character Markdown could read as more than text (``|`` that would end
    the cell, ``<`` that would open a tag, ``&``, ``[``, backticks, ``$`` math) backslash-escaped, so any
    Markdown viewer, and :func:`markdown` when a report shows the file, shows it as the character."""
    if value is None:
        return ""
    return _CELL_MARKUP.sub(lambda m: "\\" + m.group(0), one_line(value))


def styler(df: pd.DataFrame, **fmt: Any) -> Styler:
    """``df.style`` with every cell, row label and column label HTML-escaped; ``fmt`` goes to
    ``Styler.format`` (``na_rep``, ``precision``, ...). Numbers keep their formatting."""
    s = df.style.format(escape="html", **fmt)
    for axis in (0, 1):
        s = s.format_index(escape="html", axis=axis)
    return s


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string starting with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return gets a leading ``'`` (OWASP; a lone ``-`` stays as it is), and a carriage return inside it becomes a line
    feed, which the writer quotes (a bare one, unquoted, would end the row and let the rest start a
    cell of its own). Numbers and other values are returned unchanged, so a negative number stays a number."""
    if not isinstance(value, str):
        return value
    if value.startswith(_FORMULA_START) and value != "-":  # a lone "-" (no effort, no value) is no formula
        value = "'" + value
    return value.replace("\r\n", "\n").replace("\r", "\n")


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with :func:`csv_cell` applied to every string cell and every column label."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object or str(out[c].dtype).startswith("str"):
            out[c] = out[c].map(csv_cell)
    out.columns = [csv_cell(c) for c in out.columns]
    return out

