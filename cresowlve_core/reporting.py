"""The report kit every report notebook uses: messages, tables, charts and the values they record.

- :func:`say` shows a Markdown message whose interpolated names stay text (:func:`untrusted.markdown`);
- :func:`table` turns a frame into an escaped HTML table for a reader: human column headers from
  :data:`HEADERS`, numbers right-aligned and rounded, p-values through :func:`~cresowlve_core.stats.format_p`,
  intervals in small type, ``–`` for a missing value, yes/no for booleans, no 0..n-1 row numbers;
- :func:`show` displays a frame (through :func:`table`), a pandas ``Styler``, a chart or anything else;
- :func:`jsonable` makes a value, a frame or a nested structure of them JSON-safe for ``record``;
- :class:`Section` bundles what one report section shows (title, prose, table, chart) with what it records.

Every string in a table or message may come from a run directory: all of it is escaped here.
Exports (CSV, LaTeX) keep the field names; only what a reader sees gets the headers of :data:`HEADERS`.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.stats import format_p
from cresowlve_core.untrusted import markdown

MISSING = "–"  # how every table shows a value that does not exist (never nan / None)
SCROLL_STYLE = "max-height: 640px; overflow: auto; display: block"
#: a cell with more characters than this wraps, within :data:`WRAP_STYLE`'s width
WRAP_CELL_CHARS = 60
WRAP_STYLE = "white-space: normal; min-width: 18em; max-width: 36em"
#: a table with more rows than this (one row per configuration × group, say) is shown collapsed, as text
LONG_TABLE_ROWS = 500

#: field name -> the column header a reader sees (one mapping for every report); a name not listed
#: is shown with its underscores as spaces
HEADERS: dict[str, str] = {
    # who and what
    "config": "configuration", "lang": "language", "run_id": "run", "judge_model": "judge model",
    "judge_protocol": "judge protocol", "query_id": "query", "metric_label": "metric", "feature_label": "feature",
    "reasoning_type": "reasoning type", "judge_status": "judge status", "judge_verdict": "judge verdict",
    "em_strict": "EM strict", "em_lenient": "EM lenient", "judge_coverage": "judge coverage",
    # counts
    "n": "n", "n_items": "items", "n_records": "records", "n_planned": "items planned", "n_error": "errors",
    "n_refused": "refused", "n_filtered": "filtered", "n_truncated": "truncated", "n_judged": "judged",
    "n_superseded": "superseded", "n_cached": "cached", "n_shared": "shared items", "n_matched": "matched items",
    "n_wrong": "wrong", "n_no_answer": "no answer", "n_no_answer_error": "no answer: error",
    "n_no_answer_withheld": "no answer: refused or filtered", "n_no_answer_truncated": "no answer: cut off",
    "n_no_answer_empty": "no answer: empty",
    "n_wrong_judge": "wrong (judge)", "n_wrong_em": "wrong (EM)",
    "n_no_item": "item missing", "n_to_label": "to label", "n_unknown": "unknown", "n_unscored": "unscored",
    "n_unjudged": "unjudged", "n_unpaired": "unpaired",
    "n_error_a": "errors (a)", "n_error_b": "errors (b)", "n_error_both": "errors (both)",
    "n_error_en": "errors (En)", "n_error_ru": "errors (Ru)", "n_shared_items": "shared items",
    "n_eff": "effective n", "n_queries": "queries", "n_paths": "paths", "scored_with": "scored with", "n_queries_no_population": "queries with no population", "n_valid": "valid paths",
    "n_factual": "factual paths", "n_kept": "kept paths", "n_not_judged": "not judged",
    "n_triples": "triples judged", "n_specificity_scored": "scored (specificity)",
    "n_factuality_scored": "scored (factuality)",
    "n_a_only": "queries (a only)", "n_b_only": "queries (b only)", "not_run": "not run",
    # estimates
    "p": "p", "q": "q (BH)", "p_holm": "p (Holm)", "p_sign_flip": "p (sign-flip)", "diff": "difference",
    "low": "low", "high": "high", "ci_low": "CI low", "ci_high": "CI high", "spearman_rho": "Spearman ρ",
    "spearman_low": "ρ low", "spearman_high": "ρ high", "spearman_p": "p (Spearman)",
    "spearman_p_holm": "p (Spearman, Holm)", "pearson_r": "Pearson r", "pearson_low": "r low",
    "pearson_high": "r high", "pearson_p": "p (Pearson)", "pearson_p_holm": "p (Pearson, Holm)",
    "mean_a": "mean (a)", "mean_b": "mean (b)", "chi2": "χ²", "dof": "df",
    "mean_paths": "paths per answer", "valid_rate": "valid", "factual_rate": "factual",
    "mean_kept": "kept per query", "max_strength": "best strength", "avg_pairwise_d": "pairwise distance",
    "avg_nu_path": "ν per path", "avg_nu_set": "ν per set", "recorded_valid": "valid (recorded)",
    "our_valid": "valid (our check)", "agree": "agreement", "difficulty_score": "difficulty score",
    "judge_coverage_en": "judge coverage En", "judge_coverage_ru": "judge coverage Ru",
    "model_error": "model errors", "judge_error": "judge errors", "not_an_answer": "not an answer",
    "input_tokens": "input tokens", "output_tokens": "output tokens", "reasoning_tokens": "reasoning tokens",
    "judge_input_tokens": "judge input tokens", "judge_output_tokens": "judge output tokens",
    "judge_cost": "judge cost",
}

_BETWEEN_TAGS = re.compile(r">\s+<")
# a text cell that reads as a number (a formatted p-value, a count with commas, a share): right-aligned
_NUMBER_LIKE = re.compile(r"^[<>≈~+\-−]?\s*[\d.,]+\s*%?$|^–$")
# columns that hold p-values: shown through format_p (``< 0.0001``, never ``0.0``)
_P_COLUMN = re.compile(r"^(p|q|p_holm|p_sign_flip)$|(_p|_p_holm|_q)$")
# columns that hold an interval bound or a whole interval: shown in small type
_INTERVAL_COLUMN = re.compile(r"(^|_)(low|high)($|@)|^ci_|\bCI\b|\[95%", re.I)


def header(name: Any) -> str:
    """The column header a reader sees for the field ``name`` (:data:`HEADERS`, else spaces for underscores).

    A name with a suffix after ``@`` (``utility@0.9``) keeps the suffix: ``utility at 0.9``."""
    text = str(name)
    if text in HEADERS:
        return HEADERS[text]
    base, at, rest = text.partition("@")
    if at:
        return f"{HEADERS.get(base, base.replace('_', ' '))} at {rest}"
    return text.replace("_", " ") if re.fullmatch(r"[A-Za-z0-9_]+", text) else text


def say(md: str) -> None:
    """Display a Markdown message (through :func:`untrusted.markdown`) in a notebook; print it elsewhere."""
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython ships with the notebook stack
        print(md)
        return
    display(Markdown(markdown(md)))


def say_where_from(source: str, notes: Iterable[str], synthetic: bool) -> None:
    """A stage report's provenance: the synthetic-data banner when any run is synthetic, the line
    saying where the runs came from, and one bullet per note of the loader."""
    if synthetic:
        from cresowlve_core.banners import show_banner

        show_banner("synthetic")
    say(source)
    for n in notes:
        say(f"- {n}")


def jsonable(value: Any) -> Any:
    """A JSON-safe copy for ``record``: a frame becomes its rows as dicts, NaN/inf/NA become None,
    numpy scalars Python ones, tuples lists (recursively)."""
    if isinstance(value, pd.DataFrame):
        return [jsonable(r) for r in value.to_dict(orient="records")]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


# --------------------------------------------------------------------------- tables


def _missing(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float | np.floating) and not math.isfinite(float(v))


def _decimals(values: Iterable[float], digits: int) -> int:
    """The decimals a float column needs: at most ``digits``, fewer when every value has fewer."""
    need = 0
    for v in values:
        text = f"{v:.{digits}f}".rstrip("0")
        need = max(need, len(text.split(".", 1)[1]) if "." in text else 0)
    return need


def _column_cells(name: Any, col: pd.Series, digits: int) -> tuple[list[str], str]:
    """A column's cells as text, and the cell class: ``""`` numbers, ``"t"`` text, ``"ci"`` an interval."""
    values = col.tolist()
    interval = bool(_INTERVAL_COLUMN.search(str(name)))
    numeric = pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype)
    if numeric and _P_COLUMN.search(str(name)):
        return [MISSING if _missing(v) else format_p(v) for v in values], "ci" if interval else ""
    floats = [float(v) for v in values if isinstance(v, float | np.floating) and not _missing(v)]
    places = _decimals(floats, digits)
    cells, texts = [], 0
    for v in values:
        if _missing(v):
            cells.append(MISSING)
        elif isinstance(v, bool | np.bool_):
            cells.append("yes" if v else "no")
        elif isinstance(v, float | np.floating):
            cells.append(f"{float(v):.{places}f}")
        elif isinstance(v, int | np.integer):
            cells.append(str(int(v)))
        else:
            cells.append(str(v))
            texts += not _NUMBER_LIKE.match(cells[-1])
    if interval:
        return cells, "ci"
    return cells, "t" if texts else ""


def _row_numbers_only(df: pd.DataFrame) -> bool:
    """Whether the index is pandas' default 0..n-1, which carries nothing a reader needs."""
    return isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1


def _flat(name: Any) -> Any:
    return " ".join(str(x) for x in name if str(x)) if isinstance(name, tuple) else name


@dataclass(frozen=True)
class Table:
    """An escaped HTML table (what :func:`table` returns); a notebook cell ending in one shows it."""

    html: str

    def _repr_html_(self) -> str:
        return self.html


def table(df: pd.DataFrame, digits: int = 3) -> Table:
    """``df`` as a reader's table, every row of it, inside a scrollable box.

    Headers through :func:`header`; floats to at most ``digits`` decimals (fewer when the column needs
    fewer); p-value columns (``p``, ``p_holm``, ``*_p``, ...) through ``format_p``; ``–`` for a missing
    value; booleans as yes/no; interval columns (``low``/``high``, ``ci_*``, ``95% CI``) in small type;
    text left-aligned, numbers right-aligned. A named index is kept as the first columns, pandas'
    0..n-1 row numbers are not. A frame longer than :data:`LONG_TABLE_ROWS` rows is shown whole but
    collapsed, as comma-separated text (:func:`long_table_html`)."""
    if len(df) > LONG_TABLE_ROWS:
        return Table(long_table_html(df, digits))
    index_names = [] if _row_numbers_only(df) else [n if n is not None else "" for n in df.index.names]
    frame = df.reset_index() if index_names else df
    columns = [_flat(c) for c in frame.columns]
    body = [_column_cells(name, frame.iloc[:, j], digits) for j, name in enumerate(columns)]
    e = html.escape
    head = "".join(f"<th>{e(header(c))}</th>" for c in columns)
    rows = []
    for i in range(len(frame)):
        cells = []
        for j, (texts, kind) in enumerate(body):
            tag = "th" if j < len(index_names) else "td"
            cls = f' class="{kind}"' if kind and tag == "td" else ""
            if len(texts[i]) > WRAP_CELL_CHARS:  # a long note wraps instead of pushing the columns after it off-screen
                cls += f' style="{WRAP_STYLE}"'
            cells.append(f"<{tag}{cls}>{e(texts[i])}</{tag}>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    inner = (f'<table class="dataframe"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return Table(f'<div class="cresowlve-table" style="{SCROLL_STYLE}">{inner}</div>')


def long_table_html(df: pd.DataFrame, digits: int = 3) -> str:
    """Every row of a long table as comma-separated text in a collapsed, scrollable block.

    An HTML table of 10,000 rows (360 runs × 30 groups) costs seconds of formatting and megabytes of
    markup; the same rows as CSV text are a quarter of the bytes and open on a click. The cells are
    :func:`table`'s (floats to at most ``digits`` decimals, p-values through ``format_p``, ``–``,
    yes/no): full float precision doubled the 360-run page's tables. The text is escaped (it holds
    run and label names); the headers are the reader's (:func:`header`)."""
    import csv
    import io

    frame = df if _row_numbers_only(df) else df.reset_index()
    columns = [_flat(c) for c in frame.columns]
    body = [_column_cells(name, frame.iloc[:, j], digits)[0] for j, name in enumerate(columns)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([header(c) for c in columns])
    writer.writerows(zip(*body, strict=True))
    summary = f"Table: {len(df):,} rows × {len(df.columns)} columns (comma-separated; click to open)"
    return (f'<details class="cresowlve-table"><summary>{summary}</summary>'
            f'<pre style="{SCROLL_STYLE}">{html.escape(buffer.getvalue())}</pre></details>')


def table_html(obj: Any, digits: int = 3) -> str:
    """The HTML :func:`show` displays for a frame (:func:`table`) or a pandas ``Styler`` (its own
    escaped rendering, in the same scrollable box, without the indentation between tags)."""
    if isinstance(obj, pd.DataFrame):
        return table(obj, digits).html
    inner = _BETWEEN_TAGS.sub("><", obj.to_html())
    return f'<div class="cresowlve-table" style="{SCROLL_STYLE}">{inner}</div>'


def show(obj: Any, digits: int = 3) -> None:
    """Display a frame (as :func:`table`), a ``Styler``, a :class:`Table`, a chart or anything IPython shows."""
    from IPython.display import HTML, display

    if isinstance(obj, pd.DataFrame) or type(obj).__name__ == "Styler":
        display(HTML(table_html(obj, digits)))
    elif isinstance(obj, Table):
        display(HTML(obj.html))
    else:
        display(obj)


# --------------------------------------------------------------------------- sections


@dataclass
class Section:
    """What one report section shows and records: a title (a ``###`` heading, optional), prose
    (Markdown, escaped by :func:`say`), a table and a chart (either may be None), and ``records``,
    the JSON value the notebook stores. :meth:`show` displays them in that order and returns the records."""

    records: Any = None
    prose: str = ""
    table: pd.DataFrame | None = None
    chart: Any = None
    title: str = ""
    digits: int = 3

    def show(self) -> Any:
        if self.title:
            say(f"### {self.title}")
        if self.prose:
            say(self.prose)
        if self.table is not None:
            show(self.table, self.digits)
        if self.chart is not None:
            show(self.chart)
        return jsonable(self.records)
