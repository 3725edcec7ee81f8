"""The report kit: tables as a reader sees them (every row, human headers, escaped cells, p-values,
missing values, intervals), JSON-safe records and sections."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from cresowlve_core import reporting
from cresowlve_core.reporting import LONG_TABLE_ROWS, Section, header, jsonable, show, table, table_html


def cells(html: str) -> list[str]:
    return re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", html)


def headers(html: str) -> list[str]:
    return re.findall(r"<th>([^<]*)</th>", html.split("</thead>", 1)[0])


@pytest.fixture
def shown(monkeypatch):
    """What the kit displays (Markdown text and HTML), without a kernel."""
    out: list[str] = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **_: out.append(getattr(obj, "data", str(obj))))
    return out


def test_long_tables_are_never_cut_to_ten_rows(shown):
    df = pd.DataFrame({"x": range(150)})
    with pd.option_context("display.max_rows", 60, "display.min_rows", 10):
        show(df)
        assert "<td>149</td>" in shown[-1] and "<td>75</td>" in shown[-1] and "..." not in shown[-1]
    assert "overflow: auto" in shown[-1]


def test_tables_keep_their_cell_text_without_the_indentation_between_tags():
    df = pd.DataFrame({"name": ["two  spaces", "a & b"], "v": [1.5, 2.0]})
    html = table_html(df)
    assert cells(html) == ["name", "v", "two  spaces", "1.5", "a &amp; b", "2.0"]
    assert "\n" not in html and "> <" not in html and html.count("<tr") == 3


def test_tables_leave_out_pandas_row_numbers_but_keep_a_meaningful_index():
    numbered = table_html(pd.DataFrame({"v": [10, 20]}))
    assert headers(numbered) == ["v"] and cells(numbered) == ["v", "10", "20"]
    named = table_html(pd.DataFrame({"v": [10, 20]}, index=pd.Index(["gpt-4.1", "o3"], name="model")))
    assert headers(named) == ["model", "v"] and "<th>gpt-4.1</th>" in named


def test_long_tables_show_every_row_collapsed_and_escaped(shown):
    df = pd.DataFrame({"config": ["<b>x</b>"] * (LONG_TABLE_ROWS + 1), "v": range(LONG_TABLE_ROWS + 1)})
    show(df)
    html = shown[-1]
    assert html.startswith("<details") and f"{LONG_TABLE_ROWS + 1:,} rows" in html
    assert f"\n&lt;b&gt;x&lt;/b&gt;,{LONG_TABLE_ROWS}\n" in html and "<b>" not in html
    assert html.split("<pre", 1)[1].split(">", 1)[1].startswith("configuration,v\n")  # reader's headers, no row numbers


def test_headers_are_the_readers_names_from_one_mapping():
    df = pd.DataFrame({"config": ["a"], "n_error": [1], "p_holm": [0.01], "metric_label": ["EM strict"],
                       "utility@0.9": [1.5], "some_field": [2], "95% CI": ["[1, 2]"]})
    assert headers(table(df).html) == ["configuration", "errors", "p (Holm)", "metric", "utility at 0.9",
                                       "some field", "95% CI"]
    assert header("n_error") == reporting.HEADERS["n_error"] == "errors"


def test_cells_p_values_missing_values_booleans_and_intervals():
    df = pd.DataFrame({"p": [3e-7, float("nan")], "x": [None, 0.25], "ok": [True, None], "n": [3.0, 4.0],
                       "low": [0.1, 0.2], "name": ["<script>alert(1)</script>", "b"]})
    html = table(df).html
    assert re.findall(r"<td[^>]*>([^<]*)</td>", html) == [
        "&lt; 0.0001", "–", "yes", "3", "0.1", "&lt;script&gt;alert(1)&lt;/script&gt;",
        "–", "0.25", "–", "4", "0.2", "b"]
    assert '<td class="ci">0.1</td>' in html  # an interval bound in small type
    assert '<td class="t">b</td>' in html and "<td>3</td>" in html  # text left, numbers right (plain td)
    assert "<script>" not in html
    assert cells(table(pd.DataFrame({"v": [0.123456, 1.0]}), 2).html)[1:] == ["0.12", "1.00"]


def test_jsonable_makes_frames_and_nested_values_json_safe():
    rec = jsonable({"rows": pd.DataFrame({"a": [1.0, float("nan")], "b": ["x", None]}), "x": float("nan"),
                    "y": np.float64(0.5), "z": (1, float("inf")), "n": np.int64(3)})
    assert json.loads(json.dumps(rec, allow_nan=False)) == {
        "rows": [{"a": 1.0, "b": "x"}, {"a": None, "b": None}], "x": None, "y": 0.5, "z": [1, None], "n": 3}


def test_a_section_shows_title_prose_table_and_chart_and_returns_its_records(shown, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(reporting, "say", said.append)
    rec = Section({"k": np.int64(1)}, "Prose with `<b>name</b>`.", pd.DataFrame({"n_error": [1]}), "chart",
                  title="T").show()
    assert rec == {"k": 1} and said == ["### T", "Prose with `<b>name</b>`."]
    assert "<th>errors</th>" in shown[0] and shown[1] == "chart"


def test_long_tables_round_like_short_ones(shown):
    """A collapsed table's cells are the short table's: floats to the digits asked, p-values through
    format_p, yes/no, – for missing (full float precision doubled the 360-run page's group tables)."""
    n = LONG_TABLE_ROWS + 1
    df = pd.DataFrame({"config": ["a, b"] * n, "acc": [100 / 3] * n, "p": [1e-7] * n, "flagged": [True] * n,
                       "q": [float("nan")] * n})
    show(df, 2)
    text = shown[-1].split("<pre", 1)[1].split(">", 1)[1]
    assert text.splitlines()[:2] == ["configuration,acc,p,flagged,q (BH)", "&quot;a, b&quot;,33.33,&lt; 0.0001,yes,–"]


def test_a_long_note_wraps_and_short_cells_do_not():
    """03's "all runs" κ note ran on one line and pushed the κ column off a 1400 px screen."""
    from cresowlve_core.reporting import WRAP_STYLE

    note = "mean of 1 per-run κ (range 0.00–0.00), 1 run(s) undefined, left out; two-level bootstrap over runs"
    html = table(pd.DataFrame({"run": ["all runs"], "note": [note], "kappa": [0.5]})).html
    assert html.count(WRAP_STYLE) == 1 and f'style="{WRAP_STYLE}">{note}</td>' in html.replace("&#x27;", "'")
