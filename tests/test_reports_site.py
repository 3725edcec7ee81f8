"""The reports site and the paths behind it: landing page, banners, exports, project-relative paths,
and the test-isolation guard itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from conftest import REPO, changed_paths, fingerprint

from cresowlve_core import paths
from cresowlve_core.banners import banner_html, banner_text, export_banners, is_embedded_model
from cresowlve_core.notebooks import RECORD_MIME, VEGALITE_MIME, banners_in, run_notebook, update_index


def _executed(path: Path, records: dict, html_outputs: tuple[str, ...] = ()) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", data={RECORD_MIME: {k: v}, "text/plain": ""})
                    for k, v in records.items()]
    cell.outputs += [nbformat.v4.new_output("display_data", data={"text/html": h}) for h in html_outputs]
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), cell]
    nbformat.write(nb, str(path))
    return path


def test_index_is_a_landing_page_with_headline_models_banner_params_and_exports(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    _executed(reports / "02_evaluation_en.ipynb", {"headline": "EM 11.1% [2.0, 43.5] (n=9)"},
              (banner_html("embedded"),))
    (reports / "03_analysis_table1.csv").write_text("x\n")
    (reports / "03_analysis_table1.tex").write_text("x\n")
    _executed(reports / "03_analysis.ipynb", {"table1": {"n_rows": 2, "matched_paper": 1},
                                              "models": ["gpt-4.1", "gemma3-270m"]})
    run_dir = str(paths.project_root() / "data" / "runs" / "demo" / "gemma3-270m__en")
    update_index(reports, "02_evaluation_en", "Evaluation EN", {"model": "gemma3-270m", "run_dir": run_dir}, 3.0)
    update_index(reports, "03_analysis", "Analysis", {"runs": run_dir[: -len("gemma3-270m__en")] + "*"}, 2.0)
    page = (reports / "index.html").read_text()
    reg = json.loads((reports / "index.json").read_text())
    assert reg["02_evaluation_en"]["parameters"]["run_dir"] == "data/runs/demo/gemma3-270m__en"  # relative
    assert reg["03_analysis"]["parameters"]["runs"] == "data/runs/demo/*"
    assert "EM 11.1% [2.0, 43.5] (n=9)" in page  # explicit headline
    assert "Table 1: 2 configurations" not in page and "no headline: this report records none" in page
    assert "models: gemma3-270m" in page and "gpt-4.1, gemma3-270m" in page
    assert page.count("<details>") == 2 and "data/runs/demo/gemma3-270m__en" in page
    assert str(paths.project_root()) not in page
    assert 'class="cresowlve-banner" data-banner="embedded"' in page and "Affected: Evaluation EN" in page
    assert 'href="03_analysis_table1.csv"' in page and 'href="03_analysis_table1.tex"' in page
    assert reg["02_evaluation_en"]["exports"] == []  # another report's files are not claimed
    assert 'href="02_evaluation_en.ipynb"' in page and 'href="03_analysis.html"' in page
    assert "cdn" not in page.lower() and "<script" not in page


def test_a_render_that_exported_elsewhere_does_not_claim_the_exports_an_earlier_render_left(tmp_path):
    """``report 03_analysis -p export_dir DIR --name X`` over an earlier X: the card listed DIR's Table 1 and
    the earlier render's ``X_table1.*`` in reports/ (other runs) as this render's exports."""
    reports, elsewhere = tmp_path / "reports", tmp_path / "exp"
    reports.mkdir()
    elsewhere.mkdir()
    for folder in (reports, elsewhere):  # reports/: the earlier render's; exp/: this render's
        (folder / "03_analysis_runs_table1.csv").write_text("x\n")
        (folder / "03_analysis_runs_table1.tex").write_text("x\n")
    _executed(reports / "03_analysis_runs.ipynb", {"table1": {"csv": str(elsewhere / "03_analysis_runs_table1.csv"),
                                                              "tex": str(elsewhere / "03_analysis_runs_table1.tex")}})
    update_index(reports, "03_analysis_runs", "Analysis", {"export_dir": str(elsewhere)}, 2.0)
    reg = json.loads((reports / "index.json").read_text())
    assert reg["03_analysis_runs"]["exports"] == ["../exp/03_analysis_runs_table1.csv", "../exp/03_analysis_runs_table1.tex"]
    assert 'href="03_analysis_runs_table1.csv"' not in (reports / "index.html").read_text()


def test_banners_are_found_by_markup_and_by_record(tmp_path):
    a = _executed(tmp_path / "a.ipynb", {}, (banner_html("synthetic", "detail"),))
    b = _executed(tmp_path / "b.ipynb", {"banners": ["embedded"]})
    c = _executed(tmp_path / "c.ipynb", {"x": 1}, ("<p>plain</p>",))
    assert banners_in(a) == ["synthetic"] and banners_in(b) == ["embedded"] and banners_in(c) == []
    assert export_banners(synthetic=True, models=["openai/gpt-4.1", "local/gemma3-270m"]) == ["synthetic", "embedded"]
    assert is_embedded_model("gemma3-270m") and not is_embedded_model("gemma-3-27b-it")
    with pytest.raises(ValueError, match="unknown banner"):
        banner_text("fake")  # type: ignore[arg-type]


def test_table1_exports_carry_the_banner(tmp_path):
    from cresowlve_core.analysis import load_runs, write_synthetic_runs
    from cresowlve_core.analysis.table import results_long, write_table1_csv, write_table1_latex

    write_synthetic_runs(tmp_path / "runs", n_items=40, configs=2, seed=0)
    long = results_long(load_runs(str(tmp_path / "runs" / "*")))
    csv = pd.read_csv(write_table1_csv(long, tmp_path / "t.csv", synthetic=True))
    assert csv["warning"].str.startswith("WARNING: SYNTHETIC DATA").all()
    tex = write_table1_latex(long, tmp_path / "t.tex", synthetic=True).read_text()
    assert tex.startswith("% WARNING: SYNTHETIC DATA") and r"\textbf{SYNTHETIC DATA --- NOT RESULTS.}" in tex
    embedded = long.assign(model="gemma3-270m")
    csv = pd.read_csv(write_table1_csv(embedded, tmp_path / "e.csv"))
    assert csv["warning"].str.contains("EMBEDDED 270M BASE MODEL").all()
    assert "EMBEDDED 270M BASE MODEL" in write_table1_latex(embedded, tmp_path / "e.tex").read_text()
    real = long.assign(model="gpt-4.1")
    assert "warning" not in pd.read_csv(write_table1_csv(real, tmp_path / "r.csv")).columns
    assert "WARNING" not in write_table1_latex(real, tmp_path / "r.tex").read_text()


def test_reports_dir_governs_every_file_a_report_writes(tmp_path):
    """No export_dir: the Table 1 exports follow --reports-dir (the kernel's CRESOWLVE_REPORTS_DIR)."""
    from cresowlve_core.analysis import write_synthetic_runs

    write_synthetic_runs(tmp_path / "runs", n_items=40, configs=1, seed=0)
    reports = tmp_path / "elsewhere"
    res = run_notebook("03_analysis", {"runs": str(tmp_path / "runs" / "*"), "semantic_distance": False,
                                       "n_boot": 50}, reports)
    assert (reports / "03_analysis_table1.csv").exists() and (reports / "03_analysis_table1.tex").exists()
    assert not (paths.reports_dir() / "03_analysis_table1.csv").exists()
    assert res.records["table1"]["csv"] == str(reports / "03_analysis_table1.csv")
    page = (reports / "index.html").read_text()
    assert 'href="03_analysis_table1.csv"' in page and 'data-banner="synthetic"' in page
    import vl_convert as vlc

    nb = json.loads(res.ipynb.read_text())
    charts = [o["data"][VEGALITE_MIME] for c in nb["cells"] for o in c.get("outputs", []) if VEGALITE_MIME in o.get("data", {})]
    assert len(charts) >= 4
    for spec in charts:  # every chart of the analysis is valid Vega-Lite 5, as JupyterLab 4 draws it
        assert vlc.vegalite_to_vega(spec, vl_version="5.21")["marks"]


def test_paths_resolve_from_the_current_project_lazily(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    (clone / "notebooks").mkdir(parents=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "cresowlve-core"\n')
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    for var in ("CRESOWLVE_DATA_DIR", "CRESOWLVE_CACHE_DIR", "CRESOWLVE_REPORTS_DIR"):
        monkeypatch.delenv(var)
    monkeypatch.chdir(clone / "notebooks")  # a notebook's working directory
    assert paths.project_root() == clone.resolve()
    assert paths.DATA_DIR == clone.resolve() / "data" and paths.RUNS_DIR == clone.resolve() / "data" / "runs"
    assert paths.cache_dir() == clone.resolve() / "data" / "cache"
    assert paths.reports_dir() == clone.resolve() / "reports"
    assert paths.notebooks_dir() == paths.PACKAGE_REPO / "notebooks"  # the clone has no notebooks of its own
    assert paths.shipped_data("chgk") == paths.PACKAGE_REPO / "data" / "chgk"  # shipped inputs still found
    monkeypatch.setenv("CRESOWLVE_REPORTS_DIR", str(tmp_path / "r"))
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "c"))
    assert paths.REPORTS_DIR == tmp_path / "r" and paths.cache_dir() == tmp_path / "c"  # read on access
    monkeypatch.chdir(other)
    assert paths.project_root() == paths.PACKAGE_REPO  # not a cresowlve checkout: the package's own
    with pytest.raises(AttributeError):
        paths.NO_SUCH_DIR  # noqa: B018


def test_every_test_gets_its_own_dirs_away_from_the_checkout(isolated_dirs):
    for kind, d in isolated_dirs.items():
        assert not str(d).startswith(str(REPO)), kind
    assert paths.data_dir() == isolated_dirs["data"] and paths.cache_dir() == isolated_dirs["cache"]
    assert paths.reports_dir() == isolated_dirs["reports"]
    assert (paths.data_dir() / "chgk").is_symlink() and not (paths.data_dir() / "runs").exists()
    assert os.environ["CRESOWLVE_CACHE_DIR"] == str(isolated_dirs["cache"])


def test_the_session_guard_sees_added_changed_and_removed_files(tmp_path):
    (tmp_path / "data" / "cache").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("1")
    before = fingerprint(tmp_path)
    (tmp_path / "data" / "a.txt").write_text("2")
    (tmp_path / "data" / "cache").rmdir()
    (tmp_path / "data" / "runs" / "notebook").mkdir(parents=True)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "03_analysis_table1.csv").write_text("x")
    assert changed_paths(before, fingerprint(tmp_path)) == [
        "data/a.txt", "data/cache/", "data/runs/notebook/", "reports/03_analysis_table1.csv"]


def test_index_page_escapes_every_value_it_shows(tmp_path):
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    _executed(tmp_path / "r.ipynb", {"headline": "h" + hostile, "models": ["m" + hostile]})
    update_index(tmp_path, "r", "t" + hostile, {"model": "p" + hostile, hostile: 1}, 1.0)
    page = (tmp_path / "index.html").read_text()
    assert "<script" not in page and "<img" not in page
    for shown in ("h", "m", "t", "p"):
        assert f"{shown}&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page


@pytest.mark.parametrize(("registry", "why"), [
    ('{"r": {"title": 5', "not JSON: "),
    ("[1, 2]", "not a JSON object"),
    ('{"old": {"title": "t"}}', "entry 'old' lacks a report's title, html, ipynb, rendered_at or seconds"),
])
def test_a_damaged_registry_is_one_error_naming_it_and_is_left_as_it_is(tmp_path, registry, why):
    """A damaged or hand-edited reports/index.json ended every `cresowlve report` in a JSONDecodeError,
    TypeError or KeyError traceback and 'bug: ... not a problem with your input'."""
    from cresowlve_core.notebooks import ReportFailed, mark_failed_render

    _executed(tmp_path / "r.ipynb", {"headline": "h"})
    (tmp_path / "index.json").write_text(registry)
    with pytest.raises(ReportFailed) as exc:
        update_index(tmp_path, "r", "t", {}, 1.0)
    assert str(exc.value).startswith(f"{tmp_path / 'index.json'} is not a registry of reports ({why}")
    assert str(exc.value).endswith("move index.json away and the next report starts a new one")
    mark_failed_render(tmp_path, "r", RuntimeError("a cell raised"), tmp_path / "partial.ipynb")  # logged, not raised
    assert (tmp_path / "index.json").read_text() == registry and not (tmp_path / "index.html").exists()
