"""Notebooks run headless under papermill and render offline HTML reports with an index."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakeserver import FakeServer

from cresowlve_core.notebooks import RECORD_MIME, VEGALITE_MIME, render_html, run_notebook

REPO = Path(__file__).resolve().parents[1]


def _chart_outputs(ipynb):
    nb = json.loads(ipynb.read_text())
    return [o for c in nb["cells"] for o in c.get("outputs", []) if VEGALITE_MIME in o.get("data", {})]


@pytest.fixture(scope="module")
def overview_renders() -> dict[str, object]:
    """The default render of 00_data_overview, made by the first test of this file that needs it and
    read by the others (the same notebook with the same parameters gives the same outputs)."""
    return {}


def _overview(renders: dict[str, object], reports_dir: Path):
    if "res" not in renders:
        renders["res"] = run_notebook("00_data_overview", {}, reports_dir)
    return renders["res"]


def test_data_overview_renders_offline_html_and_index(tmp_path, capfd, overview_renders):
    res = run_notebook("00_data_overview", {}, tmp_path)  # rendered here: capfd sees what its kernel writes
    overview_renders["res"] = res
    assert res.ipynb.exists() and res.html.exists()
    html = res.html.read_text()
    assert "vegaEmbed" in html and "cresowlve-vega-chart" in html  # chart JS is inlined, not fetched
    assert not re.search(r"cdn\.|cdnjs|jsdelivr|unpkg|require\.js|mathjax", html, re.I)
    assert not re.search(r"<script[^>]+src=", html)  # no external script at all
    assert "overview.pack_table()" not in html  # code cells are hidden
    assert "removed: requires physical materials (step 1, LLM filter)" in html  # pipeline_outcome not cut
    rec = res.records
    assert rec["questions_per_pack"] == {"ingush16.txt": 60, "kubok_olgi_2015.4s": rec["questions_per_pack"]["kubok_olgi_2015.4s"],
                                         "ruch17st.txt": 90, "rusch16.txt": 90}
    assert rec["demo_items_per_lang"]["en"] >= 1
    assert rec["headline"].startswith("4 ChGK packs")
    index = (tmp_path / "index.html").read_text()
    assert 'href="00_data_overview.html"' in index and rec["headline"] in index
    assert json.loads((tmp_path / "index.json").read_text())["00_data_overview"]["html"] == "00_data_overview.html"
    assert "without encryption" not in capfd.readouterr().err  # the kernel's TCP warning is silenced


def test_data_overview_tables_are_the_report_kits(tmp_path, overview_renders):
    """00 showed pandas' own tables: row numbers 0..n-1 before each row, field names as headers
    (with_zachet), True/False for in_benchmark, and "no flagged blocks" as printed text. Its tables
    now go through reporting.show, as every other report's."""
    html = _overview(overview_renders, tmp_path).html.read_text()
    assert html.count('class="cresowlve-table"') == 3  # packs, demo items, removed items (no flagged block)
    assert "with zachet" in html and "with_zachet" not in html and "in benchmark" in html
    assert not re.search(r"<th>\s*0\s*</th>", html)  # no row numbers
    assert not re.search(r">\s*(True|False)\s*<", html)
    assert "No flagged blocks." in html


def test_chart_outputs_carry_the_standard_vegalite_bundle(tmp_path, overview_renders):
    """JupyterLab/VS Code/nbviewer render charts natively: Vega-Lite v5 mimetype, no waiting HTML."""
    import vl_convert as vlc

    res = _overview(overview_renders, tmp_path)
    charts = _chart_outputs(res.ipynb)
    assert len(charts) == 1
    for o in charts:
        assert set(o["data"]) == {VEGALITE_MIME, "text/plain"}  # no text/html that front ends would prefer
        spec = o["data"][VEGALITE_MIME]
        assert spec["$schema"].endswith("/vega-lite/v5.json")
        vg = vlc.vegalite_to_vega(spec, vl_version="5.21")  # valid Vega-Lite 5, as JupyterLab 4 draws it
        assert vg["marks"]
    nb = json.loads(res.ipynb.read_text())
    records = [o for c in nb["cells"] for o in c.get("outputs", []) if RECORD_MIME in o.get("data", {})]
    assert records and all("".join(o["data"]["text/plain"]) == "" for o in records)  # invisible, never "no renderer"


def test_unknown_notebook_parameter_is_an_error(tmp_path, capsys):
    from cresowlve_core.cli import main

    assert main(["report", "00_data_overview", "-p", "include_removd", "false", "--reports-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: 00_data_overview: unknown parameter include_removd; known: include_removed"
    assert not any(tmp_path.iterdir())  # nothing rendered over an existing report


@pytest.mark.parametrize(("notebook", "key", "value", "why"), [
    ("00_data_overview", "include_removed", "False", 'takes true or false, got "False"'),  # a string: true in Python
    ("03_analysis", "min_group_size", "abc", 'takes a whole number or null, got "abc"'),
    ("03_analysis", "n_boot", "2.5", "takes a whole number or null, got 2.5"),
    ("03_analysis", "coverage_threshold", "[0.9]", "takes a number or null, got [0.9]"),
    ("03_analysis", "aliases", "GPT-4.1", 'takes a JSON object, got "GPT-4.1"'),
    ("07_create", "discount", "1", "takes a string or a list, got 1"),
    ("03_analysis", "coverage_threshold", "90", "is a fraction 0..1 (0.9: 90 %), got 90"),  # greyed out every metric
    ("07_create", "factuality_threshold", "-0.5", "is a fraction 0..1 (0.9: 90 %), got -0.5"),
    ("03_analysis", "n_boot", "-1", "takes a whole number >= 0, got -1"),  # numpy's error, naming no parameter
    ("04_error_analysis", "seed", "-1", "takes a whole number >= 0, got -1"),
    # an empty string: `out_dir or tempfile.mkdtemp()` put the labels in a temporary folder, `build_dir` the same
    ("04_error_analysis", "out_dir", '""', "is empty: give a value, or leave it out for the notebook's default"),
    ("06_synthetic", "build_dir", " ", "is empty: give a value, or leave it out for the notebook's default"),
])
def test_a_parameter_value_the_notebook_cannot_take_is_an_error(tmp_path, capsys, notebook, key, value, why):
    from cresowlve_core.cli import main

    assert main(["report", notebook, "-p", key, value, "--reports-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {notebook}: parameter {key} {why}"
    assert not any(tmp_path.iterdir())  # nothing rendered


@pytest.mark.parametrize("notebook", sorted(p.stem for p in (REPO / "notebooks").glob("0*.ipynb")))
def test_every_name_a_parameters_cell_assigns_is_a_parameter_the_report_accepts(notebook):
    import ast

    from cresowlve_core.notebooks import notebook_parameters

    src = REPO / "notebooks" / f"{notebook}.ipynb"
    cells = json.loads(src.read_text(encoding="utf-8"))["cells"]
    [cell] = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assigned = {n.id for node in ast.parse("".join(cell["source"])).body if isinstance(node, ast.Assign)
                for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    assert assigned == set(notebook_parameters(src))  # e.g. 06's band_low: `-p band_low 5` is accepted


def test_report_html_drops_progress_bars_and_records(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="Loading weights:   0%|          | 0/101 [00:00<?, ?it/s]"),
        nbformat.v4.new_output("stream", name="stderr", text="a real warning\n"),
        nbformat.v4.new_output("display_data", data={RECORD_MIME: {"k": 1}, "text/plain": ""}),
        nbformat.v4.new_output("display_data", data={VEGALITE_MIME: {"mark": "bar", "data": {"values": []}},
                                                      "text/plain": "<chart>"}),
    ]
    nb.cells = [cell]
    src = tmp_path / "n.ipynb"
    nbformat.write(nb, str(src))
    html = render_html(src, tmp_path / "n.html").read_text()
    assert "Loading weights" not in html and "a real warning" in html and "vegaEmbed(" in html
    assert RECORD_MIME not in html


def test_report_html_has_the_tags_nbconvert_would_give_it(tmp_path):
    """render_html skips nbconvert's BeautifulSoup pass and adds its alt texts and tabindex itself: the
    page parses to the same document as nbconvert's own HTMLExporter output, also with markup-like text
    in scripts, styles and comments (left alone), in a textarea (html.parser reads tags there), attributes
    holding ``>`` and upper case."""
    import base64

    import jinja2
    import nbformat
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    from cresowlve_core import notebooks

    png = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                                         "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")).decode()
    hostile = ('<div class="jp-OutputArea-output x" title="a>b"><IMG SRC="data:," WIDTH=1><img alt src="y">'
               '<img alt="kept" src="z"/></div><textarea><img src="t"><div class="jp-OutputArea-output"></textarea>'
               '<!-- <img src="c"> --><style>/* <img src="s"> */</style><div class="jp-OutputArea-outputs">x</div>')
    nb = nbformat.v4.new_notebook()
    md = nbformat.v4.new_markdown_cell('# T\n\n![](data:image/png;base64,' + png + ') <img src="data:,">')
    code = nbformat.v4.new_code_cell("x")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<img>"}),
        nbformat.v4.new_output("display_data", data={"text/html": hostile}),
        nbformat.v4.new_output("display_data", data={VEGALITE_MIME: {"mark": "bar", "title": '<img src="v">',
                                                                      "data": {"values": []}}}),
        nbformat.v4.new_output("stream", name="stdout", text='<img src="q"> & <div class="jp-OutputArea-output">'),
    ]
    nb.cells = [md, code]
    notebooks._report_outputs(nb)
    loader = jinja2.DictLoader({notebooks._TEMPLATE: notebooks._TEMPLATE_SOURCE})
    stock = HTMLExporter(extra_loaders=[loader], template_file=notebooks._TEMPLATE)
    stock.exclude_input = stock.exclude_input_prompt = stock.exclude_output_prompt = True
    resources = {"metadata": {"name": "n"}}
    expected = stock.from_notebook_node(nbformat.from_dict(nb), resources=dict(resources))[0]
    page = notebooks._report_exporter(loader).from_notebook_node(nbformat.from_dict(nb), resources=dict(resources))[0]
    assert str(BeautifulSoup(page, features="html.parser")) == expected
    assert expected.count('alt="No description has been provided for this image"') == 4  # png, md img, IMG, textarea
    assert expected.count('tabindex="0"') >= 4 and '<img src=\\"v\\">' in page and '<img src="c">' in page


def test_marimo_export_draws_charts_and_hides_records(tmp_path):
    """The README's marimo route: convert, then export (headless run) shows charts, no unknown mimetype."""
    marimo = Path(sys.executable).parent / "marimo"
    if not marimo.exists():
        pytest.skip("marimo not installed in this environment")
    app = tmp_path / "explore_overview.py"
    subprocess.run([str(marimo), "convert", str(REPO / "notebooks" / "00_data_overview.ipynb"), "-o", str(app)],
                   check=True, capture_output=True, timeout=120)
    out = tmp_path / "overview.html"
    subprocess.run([str(marimo), "export", "html", str(app), "-o", str(out)], check=True, capture_output=True,
                   timeout=300, cwd=REPO)
    page = out.read_text()
    assert re.search(r"application/vnd\.vegalite\.v\d\+json", page)  # marimo draws the chart itself
    assert RECORD_MIME not in page and "Unsupported" not in page


def test_evaluation_notebook_never_writes_the_key(tmp_path, monkeypatch):
    key = "sk-notebook-SECRET-0123456789abcdef"
    monkeypatch.setenv("NB_PROVIDER_KEY", key)

    def answers(req):
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"VERDICT-{nonce}: INCORRECT"
        return "I was given the key? no.\n<Answer>Copernicus</Answer>"

    with FakeServer(answers=answers, api_key=key) as srv:
        res = run_notebook(
            "02_evaluation",
            {"items": "demo", "lang": "en", "model": "fake-model", "base_url": srv.base_url,
             "api_key_env": "NB_PROVIDER_KEY", "judge_model": "fake-judge", "judge_api_key_env": "NB_PROVIDER_KEY",
             "run_dir": str(tmp_path / "run"), "limit": 4},
            tmp_path / "reports",
        )
    summary = res.records["summary"]
    assert summary["n_ok"] == 4 and summary["n_judged"] == 4 and summary["judge_accuracy"] == 0.0
    for path in [res.ipynb, res.html, *(tmp_path / "run").iterdir(), tmp_path / "reports" / "index.html"]:
        assert key not in path.read_text()
    assert "NB_PROVIDER_KEY" in res.ipynb.read_text()  # the variable name is fine
