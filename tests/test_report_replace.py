"""Reports are replaced atomically and named by what they show; long renders say where they are."""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from cresowlve_core import mainjob
from cresowlve_core.cli import main
from cresowlve_core.notebooks import FAILED_DIR, ReportFailed, report_name, run_notebook


def _notebook(path: Path) -> Path:
    """A small report: a parameters cell, an export into the reports dir, a tqdm bar, a slow cell that
    fails on request."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('marker = "v1"\nfail = False\nruns = "data/runs/demo/*"\npause = 0.0\nempty = False')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Tiny report"),
        params,
        nbformat.v4.new_code_cell(
            "import os, time\nfrom pathlib import Path\n"
            "out = Path(os.environ['CRESOWLVE_REPORTS_DIR']) / (os.environ['CRESOWLVE_REPORT_STEM'] + '_t.csv')\n"
            "out.write_text('marker\\n' + marker + '\\n')\nprint('exported', out)\n"
            "if empty:\n    from cresowlve_core.notebooks import record\n    record('empty', 'no runs found at ' + runs)"),
        nbformat.v4.new_code_cell("from tqdm.auto import tqdm\nfor _ in tqdm(range(3), disable=False):\n    pass"),
        nbformat.v4.new_code_cell("time.sleep(pause)\nif fail:\n    raise ZeroDivisionError('on purpose ' + marker)\nprint(marker)"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def _files(reports: Path, stem: str) -> dict[str, bytes]:
    return {s: (reports / f"{stem}{s}").read_bytes() for s in (".ipynb", ".html", "_t.csv")}


def test_a_failing_render_leaves_the_old_report_intact(tmp_path):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    run_notebook(str(nb), {"marker": "first"}, reports)
    before = _files(reports, "tiny")
    assert b"first" in before["_t.csv"] and b"first" in before[".html"]
    with pytest.raises(ReportFailed) as err:
        run_notebook(str(nb), {"marker": "second", "fail": True}, reports)
    partial = reports / FAILED_DIR / "tiny" / "tiny.ipynb"
    assert "ZeroDivisionError: on purpose" in str(err.value) and "old report is left untouched" in str(err.value)
    assert str(partial) in str(err.value) and "second" in partial.read_text()
    assert _files(reports, "tiny") == before  # the .ipynb, the .html and the export of the good render
    assert not list(reports.glob(".render-*"))  # no staging folder left behind
    run_notebook(str(nb), {"marker": "third"}, reports)  # a later good render replaces all three
    assert all(b"third" in v for v in _files(reports, "tiny").values())
    assert "/.render-" not in (reports / "tiny.html").read_text()  # printed paths point where the files are


def test_the_landing_page_marks_a_report_whose_last_render_failed_until_one_succeeds(tmp_path):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    run_notebook(str(nb), {"marker": "first"}, reports)
    assert 'class="failed"' not in (reports / "index.html").read_text()
    with pytest.raises(ReportFailed):
        run_notebook(str(nb), {"marker": "<b>second</b>", "fail": True}, reports)
    page = (reports / "index.html").read_text()
    card = page[page.index('id="tiny"'):]
    assert "The last render of this report\nfailed" in card and "ZeroDivisionError: on purpose" in card
    assert f'href="{FAILED_DIR}/tiny/tiny.ipynb"' in card
    assert "on purpose &lt;b&gt;second&lt;/b&gt;" in card and "<b>second" not in page  # the error is text, escaped
    assert (reports / "tiny.html").read_bytes().count(b"first")  # the earlier page is still the one linked
    run_notebook(str(nb), {"marker": "third"}, reports)
    assert 'class="failed"' not in (reports / "index.html").read_text()


def test_an_empty_report_never_replaces_one_with_results(tmp_path, capsys):
    """`cresowlve report 03_analysis -p runs 'data/runs/nothing/*' --name 03_analysis` replaced the main
    job's report with a page saying "no runs found" (exit 1). An empty render over a report with results
    is a failed render: the old report stays, the card says why, the empty one is kept under .failed."""
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    run_notebook(str(nb), {"marker": "first"}, reports)
    before = _files(reports, "tiny")
    assert main(["report", str(nb), "-p", "runs", "data/runs/nothing/*", "-p", "empty", "true", "--name", "tiny",
                 "--reports-dir", str(reports)]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (f"error: tiny: an empty report (no runs found at data/runs/nothing/*) would replace the existing "
                    f"one; the old report is left untouched; the empty one is kept at {reports / FAILED_DIR}/tiny/tiny.ipynb")
    assert _files(reports, "tiny") == before
    assert "an empty report (no runs found at data/runs/nothing/*)" in (reports / "index.html").read_text()
    # an empty report where there was none, or over an empty one, is written as before (exit 1 saying so)
    for _ in range(2):
        assert main(["report", str(nb), "-p", "empty", "true", "--name", "tiny-empty", "--reports-dir", str(reports)]) == 1
        assert capsys.readouterr().err.strip().splitlines()[-1] == "empty report: no runs found at data/runs/demo/*"
    assert (reports / "tiny-empty.html").exists()


def test_a_first_render_that_fails_leaves_no_card(tmp_path):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    with pytest.raises(ReportFailed):
        run_notebook(str(nb), {"fail": True}, reports)
    assert not (reports / "index.html").exists()


def test_the_cli_exits_non_zero_and_says_the_old_report_is_kept(tmp_path, capsys):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    assert main(["report", str(nb), "--reports-dir", str(reports)]) == 0
    before = _files(reports, "tiny")
    assert main(["report", str(nb), "-p", "fail", "true", "--name", "tiny", "--reports-dir", str(reports)]) == 1
    assert "the old report is left untouched" in capsys.readouterr().err.strip().splitlines()[-1]
    assert _files(reports, "tiny") == before


def test_a_hand_run_and_the_main_jobs_coexist(tmp_path):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    run_notebook(str(nb), {"runs": str(tmp_path / "demo" / "*"), "marker": "main"}, reports, output_name="tiny")
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/*", "-p", "marker", "hand",
                 "--reports-dir", str(reports)]) == 0
    assert main(["report", str(nb), "-p", "marker", "named", "--name", "mine-v2", "--reports-dir", str(reports)]) == 0
    assert b"main" in (reports / "tiny.html").read_bytes()
    assert b"hand" in (reports / "tiny_mine.html").read_bytes()
    assert b"named" in (reports / "mine-v2_t.csv").read_bytes()
    page = (reports / "index.html").read_text()
    assert all(f'href="{s}.html"' in page for s in ("tiny", "tiny_mine", "mine-v2"))
    assert 'href="tiny_mine_t.csv"' in page and 'href="tiny_t.csv"' in page


def test_a_report_on_other_inputs_under_the_same_derived_name_says_it_replaces_it(tmp_path, capsys):
    # data/runs/mine/gpt* and data/runs/mine/claude* are both "tiny_mine": the second render replaced the
    # first report and its export without a word
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/gpt*", "--reports-dir", str(reports)]) == 0
    assert "note:" not in capsys.readouterr().err
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/claude*", "--reports-dir", str(reports)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: tiny_mine was rendered with runs='data/runs/mine/gpt*'; this render "
                     "(runs='data/runs/mine/claude*') replaces it and its exports: --name NAME keeps both"]
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/claude*", "--reports-dir", str(reports)]) == 0
    assert "note:" not in capsys.readouterr().err  # the same inputs rendered again: nothing is lost
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/gpt*", "--name", "tiny_mine",
                 "--reports-dir", str(reports)]) == 0
    assert "note:" not in capsys.readouterr().err  # a name given by hand: the user chose to replace it


def test_a_refused_parameter_says_nothing_of_replacing_the_report(tmp_path, capsys):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/gpt*", "--reports-dir", str(reports)]) == 0
    capsys.readouterr()
    before = _files(reports, "tiny_mine")
    for typo in (["-p", "pase", "1"], ["-p", "fail", "False"]):  # an unknown name; a string where true/false is due
        assert main(["report", str(nb), "-p", "runs", "data/runs/mine/claude*", *typo, "--reports-dir", str(reports)]) == 2
        [line] = capsys.readouterr().err.splitlines()  # the error alone: no "this render replaces it" note
        assert line.startswith("error: tiny: ")
    assert _files(reports, "tiny_mine") == before


def test_a_damaged_registry_is_named_by_the_render_not_raised_by_the_replace_check(tmp_path, capsys):
    """The check for a replaced report reads index.json before the render: a damaged one must leave the
    render to name it (exit 1, one error line), not raise from the check."""
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    reports.mkdir()
    (reports / "index.json").write_text("[1, 2]", encoding="utf-8")
    assert main(["report", str(nb), "-p", "runs", "data/runs/mine/gpt*", "--reports-dir", str(reports)]) == 1
    err = capsys.readouterr().err
    assert "index.json is not a registry of reports (not a JSON object)" in err and "Traceback" not in err
    assert (reports / "index.json").read_text(encoding="utf-8") == "[1, 2]"


def test_a_report_name_fits_a_file_name(tmp_path, capsys):
    # before: a 300-character --name, or a derived name of four long run directories, crashed at the staging
    # folder with "OSError: [Errno 36] File name too long" and the "bug:" line
    runs = [f"data/runs/grid/paper/{'qwen-qwen3-235b-a22b-thinking-2507__adaptive__en-' * 2}{i}" for i in range(4)]
    stems = {report_name("03_analysis", {"runs": r}) for r in (runs, runs[::-1], runs[:3])}
    assert len(stems) == 3 and all(len(s) <= 200 for s in stems), stems
    with pytest.raises(SystemExit) as exc:
        main(["report", "03_analysis", "--name", "n" * 300, "--reports-dir", str(tmp_path / "reports")])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "argument --name: a name of 300 characters is too long for its files: at most 200")
    assert not (tmp_path / "reports").exists()


def test_report_names_derive_from_the_inputs():
    assert report_name("03_analysis", {}) == "03_analysis"
    assert report_name("03_analysis", {"runs": "data/runs/demo/*"}) == "03_analysis"  # the default inputs
    assert report_name("03_analysis", {"runs": "data/runs/mine/*"}) == "03_analysis_mine"
    assert report_name("03_analysis", {"runs": "data/runs/grid/paper-table1/grid.json"}) == "03_analysis_paper-table1"
    # a list of runs: the joined names through the one slug rule (which adds a hash of what it rewrote)
    assert re.fullmatch(r"03_analysis_a__en-a__ru-[0-9a-f]{8}",
                        report_name("03_analysis", {"runs": ["data/runs/a__en", "data/runs/a__ru"]}))
    hashed = report_name("03_analysis", {"n_boot": 10})
    assert hashed.startswith("03_analysis_") and hashed != report_name("03_analysis", {"n_boot": 20})


def test_progress_lines_and_no_progress_bar_in_the_html(tmp_path, capsys):
    nb, reports = _notebook(tmp_path / "tiny.ipynb"), tmp_path / "reports"
    res = run_notebook(str(nb), {"pause": 1.5}, reports, progress_every_s=0.3)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("  rendering tiny: ")]
    assert len(lines) >= 3, lines
    assert any("of 5 cells done" in x for x in lines) and any("cell 5 running" in x for x in lines)
    page = res.html.read_text()
    assert "0/3" not in page and "3/3" not in page and "it/s" not in page and "%|" not in page
    assert ".jp-OutputArea-output{overflow-x:auto" in page  # a wide table scrolls in its own box, never cut off


def test_the_main_job_prints_progress_of_the_report_it_renders(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(mainjob, "PROGRESS_EVERY_S", 0.3)
    nb = _notebook(tmp_path / "tiny.ipynb")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                   os.environ.get("PYTHONPATH")])))
    with mainjob.Renderer() as renderer:
        html = renderer.render(str(nb), {"pause": 2.0}, tmp_path / "reports", output_name="tiny_main")
    assert html.name == "tiny_main.html"
    lines = [x for x in capfd.readouterr().err.splitlines() if x.startswith("  rendering tiny_main: ")]
    assert len(lines) >= 3 and any("cells done" in x for x in lines), lines


def test_a_report_run_by_hand_prints_the_same_progress_lines(tmp_path, capsys, monkeypatch):
    from cresowlve_core import notebook_progress

    monkeypatch.setattr(notebook_progress, "PROGRESS_EVERY_S", 0.3)
    nb = _notebook(tmp_path / "tiny.ipynb")
    assert main(["report", str(nb), "-p", "pause", "2.0", "--name", "tiny_hand",
                 "--reports-dir", str(tmp_path / "reports")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("  rendering tiny_hand: ")]
    assert len(lines) >= 3 and any("of 5 cells done" in x for x in lines), lines


def test_the_main_jobs_renders_share_one_child_and_each_sees_the_environment_of_its_time(tmp_path, monkeypatch):
    """The main job's reports render one after the other in one child process; each render runs with
    the environment the main job has when it asks for it (the embedded model's provider entry is set
    after the first report)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Environment"),
                nbformat.v4.new_code_cell("import os\nprint('mark', os.environ.get('CRESOWLVE_TEST_MARK'), 'renderer', os.getppid())")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "env.ipynb"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                   os.environ.get("PYTHONPATH")])))
    seen = []
    with mainjob.Renderer() as renderer:
        for mark in ("first", "second"):
            monkeypatch.setenv("CRESOWLVE_TEST_MARK", mark)
            html = renderer.render(str(tmp_path / "env.ipynb"), {}, tmp_path / "reports", output_name=f"env_{mark}")
            seen.append(re.search(r"mark (\w+) renderer (\d+)", html.read_text()).groups())
    assert [m for m, _ in seen] == ["first", "second"]
    assert seen[0][1] == seen[1][1] != str(os.getpid())  # both kernels were started by the same child


def test_paths_a_report_says_in_markdown_point_where_the_files_are_published(tmp_path):
    """An export path shown with ``say`` (a code span) in a reports folder whose path Markdown escapes
    (``_`` by a ``/``, ``&``): the published .ipynb named the staging folder, deleted after the render
    ("Exported `/tmp/V/&#95;rep/.render-03_analysis_s1-kp9t40zy/03_analysis_s1_table1.csv`"), since only
    the path as printed was rewritten."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Says a path"), nbformat.v4.new_code_cell(
        "import os\nfrom pathlib import Path\nfrom cresowlve_core.reporting import say\n"
        "out = Path(os.environ['CRESOWLVE_REPORTS_DIR']) / 'x_table1.csv'\nout.write_text('x')\n"
        "say(f'Exported `{out}`.')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "says.ipynb"))
    reports = tmp_path / "_reports & co"
    run_notebook(str(tmp_path / "says.ipynb"), {}, reports)
    for page in ("says.ipynb", "says.html"):
        text = (reports / page).read_text()
        assert ".render-" not in text, page
    assert "_reports &amp; co/x_table1.csv" in (reports / "says.html").read_text()
    assert (reports / "x_table1.csv").is_file()


def test_the_printed_headline_is_one_plain_line(tmp_path, capsys):
    """A report's headline can name a configuration from someone's run directory (07's top configuration):
    ``cresowlve report`` prints it with no terminal escape and no line break."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('name = "x"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "from cresowlve_core.notebook_records import headline\nheadline('highest: ' + name + ' 1.0');")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "head.ipynb"))
    hostile = "m\x1b[2J\x1b]0;pwned\x07\n\n# FAKE"
    assert main(["report", str(tmp_path / "head.ipynb"), "-p", "name", hostile, "--name", "head",
                 "--reports-dir", str(tmp_path / "reports")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[-1] == "highest: m [2J ]0;pwned # FAKE 1.0"
