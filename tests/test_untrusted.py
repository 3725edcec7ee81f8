"""cresowlve_core.untrusted: names become text in HTML, Markdown, Styler tables and CSV cells."""

from __future__ import annotations

import re

import pandas as pd
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from cresowlve_core.untrusted import csv_cell, csv_frame, html_text, markdown, styler

IMG = "<img src=x onerror=alert(1)>"


def rendered(md: str) -> str:
    """What nbconvert's Markdown renderer (the HTML reports') makes of ``markdown(md)``."""
    return markdown2html_mistune(markdown(md))


def test_markdown_leaves_no_tag_outside_or_inside_code_spans():
    for md in [f"model {IMG}", f"`{IMG}`", f"``a`{IMG}``", f"`` ` `` {IMG} `", f"\\`{IMG}`", f"**{IMG}**",
               f"### {IMG}", f"- {IMG}\n- <script>alert(1)</script>", "[x](javascript:alert(1))"]:
        html = rendered(md)
        assert "<img" not in html and "<script" not in html, (md, html)
        assert 'href="javascript' not in html, (md, html)


def test_markdown_keeps_the_callers_formatting_and_shows_names_literally():
    html = rendered(f"**Verdict** for `a*b_c_` and {IMG}: coverage < 80% & more")
    assert "<strong>Verdict</strong>" in html
    assert "<code>a*b_c_</code>" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "coverage &lt; 80% &amp; more" in html
    assert rendered("`chgk_0123ab`") == "<p><code>chgk_0123ab</code></p>\n"


def test_html_text_escapes_quotes_and_none():
    assert html_text('"><b>') == "&quot;&gt;&lt;b&gt;" and html_text(None) == ""


def test_styler_escapes_cells_and_both_labels_and_keeps_number_formats():
    df = pd.DataFrame({IMG: [IMG, 1.23456, None]}, index=[IMG, "b", "c"])
    html = styler(df, na_rep="–", precision=2).to_html()
    assert not re.search(r"<img", html) and html.count("&lt;img") == 3
    assert ">1.23<" in html and ">–<" in html


def test_csv_cells_never_start_a_formula_but_numbers_stay_numbers():
    for bad in ("=1+1", "+1", "-2+3", "@SUM(A1)", "\tx"):
        assert csv_cell(bad) == "'" + bad
    assert csv_cell("\rx") == "'\nx"
    assert csv_cell(-1.5) == -1.5 and csv_cell("gpt-4.1") == "gpt-4.1"
    assert csv_cell("-") == "-" and csv_cell("--") == "'--"  # Table 1's "no effort" was exported as "'-"
    out = csv_frame(pd.DataFrame({"=name": ["=HYPERLINK(1)", "ok"], "acc": [-3.0, 2.0]}))
    assert list(out.columns) == ["'=name", "acc"]
    assert out["=name" if "=name" in out else "'=name"].tolist() == ["'=HYPERLINK(1)", "ok"]
    assert out["acc"].tolist() == [-3.0, 2.0]


def test_a_carriage_return_inside_a_csv_cell_cannot_start_a_cell_of_its_own():
    """pandas quotes a cell with a line feed but not one with a bare carriage return, which a reader
    takes as the end of the row: "x\r=2+5" would put a formula at the start of a cell."""
    import csv
    import io

    text = csv_frame(pd.DataFrame({"model": ["x\r=2+5", "y\r\n@SUM(A1)"], "n": [1, 2]})).to_csv(index=False)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["model", "n"], ["x\n=2+5", "1"], ["y\n@SUM(A1)", "2"]]
    assert not any(cell.startswith(("=", "@")) for row in rows for cell in row)


def test_one_line_keeps_no_terminal_escape_carriage_return_override_or_line_break():
    from cresowlve_core.untrusted import one_line

    hostile = "m\x1b[2J\x1b]8;;http://evil\x07link\rOVR\u202egnp.exe\n\n# HEAD\t- x"
    assert one_line(hostile) == "m [2J ]8;;http://evil link OVR gnp.exe # HEAD - x"
    assert one_line("a" * 600, 500) == "a" * 500


def test_a_blockquote_stays_a_blockquote_and_every_other_angle_bracket_is_text():
    """The data card opens with quoted notes (``> WARNING: ...``): the 01 report showed a literal ``>``."""
    md = "> WARNING: a <b>name</b> > here\n  > > nested\ntext > not a quote"
    assert markdown(md) == ("> WARNING: a &lt;b&gt;name&lt;/b&gt; &gt; here\n  > > nested\ntext &gt; not a quote")
    html = rendered(md)
    assert html.startswith("<blockquote>") and "<b>" not in html and "&lt;b&gt;name" in html


def test_a_url_in_a_name_is_shown_whole_and_makes_no_link():
    """A model named ``=HYPERLINK("http://x")|<b>x</b>`` in the judge-coverage sentence of 03_analysis was
    rendered as a link to ``http://x%22)%7C%3Cb%3Ex%3C/b&amp;gt`` whose text ended in a literal ``&gt``:
    the renderer's autolink took the escaper's ``&gt`` into the URL."""
    for name, shown in [('=HYPERLINK("http://x")|<b>x</b>', "=HYPERLINK(&quot;http://x&quot;)|&lt;b&gt;x&lt;/b&gt;"),
                        ("https://evil.example/a?b=1&c=<d>", "https://evil.example/a?b=1&amp;c=&lt;d&gt;")]:
        html = rendered(f"lowest {name} / en")
        assert "<a " not in html and "href" not in html, html
        assert html == f"<p>lowest {shown} / en</p>\n"
    assert rendered("`http://x`") == "<p><code>http://x</code></p>\n"


def test_a_name_between_two_dollars_is_shown_as_it_is():
    """``No published row for: m $a<b>&c$ x`` in 03_analysis showed ``m $a&lt;b&gt;&amp;c$ x``: the
    renderer read ``$...$`` as math and escaped the escaped text again."""
    assert rendered("No published row for: m $a<b>&c$ x, y $5") == (
        "<p>No published row for: m $a&lt;b&gt;&amp;c$ x, y $5</p>\n")
    assert rendered("$$`a`$$") == "<p>$$<code>a</code>$$</p>\n"
