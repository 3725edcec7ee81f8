"""The documented error-analysis commands, run as a user runs them from a clone:
`cresowlve errors label|report --out-dir data/errors` write into the project's data/errors (the
report used to write the labels and the annotation sample into notebooks/data/errors, because the
notebook ran in notebooks/), without --out-dir into <data dir>/errors, and the annotation app and the
explorer find what they wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeserver import FakeServer

from cresowlve_core import discover

REPO = Path(__file__).resolve().parents[2]


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cresowlve_core.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_documented_errors_commands_write_where_the_apps_look(tmp_path, isolated_dirs, monkeypatch):
    clone = tmp_path / "clone"  # a second checkout: its own project root
    clone.mkdir()
    (clone / "pyproject.toml").write_text('[project]\nname = "cresowlve-core"\n')
    def answer(req) -> str:  # every answer wrong; the labeller names a category (an unparsed label is exit 1)
        return "RATIONALE: r\nCATEGORY: Overthinking" if "CATEGORY" in str(req) else "Some thoughts. <Answer>Galileo</Answer>"

    with FakeServer(answers=answer) as srv:
        out = _cli(["eval", "--items", "demo", "--lang", "en", "--limit", "2", "--model", "m", "--base-url",
                    srv.base_url, "--run-dir", "data/runs/demo/m__en"], clone)
        assert out.returncode == 0, out.stderr[-2000:]
        label = ["--runs", "data/runs/demo/*", "--labeller-model", "lab", "--labeller-base-url", srv.base_url]
        out = _cli(["errors", "label", *label, "--out-dir", "data/errors"], clone)
        assert out.returncode == 0, out.stderr[-2000:]
        assert (clone / "data" / "errors" / "labels" / "lab" / "labels.jsonl").is_file()
        out = _cli(["errors", "report", *label, "--out-dir", "data/errors", "--reports-dir", str(tmp_path / "r")],
                   clone)
        assert out.returncode == 0, out.stderr[-2000:]
        out = _cli(["errors", "label", *label], clone)  # no --out-dir: the data dir's errors/
        assert out.returncode == 0, out.stderr[-2000:]
    sample = clone / "data" / "errors" / "annotations" / "sample.jsonl"
    assert sample.is_file() and len(sample.read_text().splitlines()) == 2  # the two wrong answers
    assert not (REPO / "notebooks" / "data").exists() and not (clone / "notebooks").exists()
    assert (isolated_dirs["data"] / "errors" / "labels" / "lab" / "labels.jsonl").is_file()
    monkeypatch.setenv("CRESOWLVE_DATA_DIR", str(clone / "data"))  # the clone's own data dir, as by default
    monkeypatch.chdir(clone)
    assert discover.newest_error_sample().path == sample
    assert discover.newest_error_labels().path == clone / "data" / "errors"


def test_errors_report_on_runs_that_match_nothing_is_an_empty_report_not_a_demo_evaluation(tmp_path):
    """A mistyped ``--runs``: the report says nothing matched and exits 1. Before, the notebook's
    ``make_demo`` default evaluated the demo items with the embedded model into OUT_DIR/eval and reported
    those answers (no embedded banner, since nothing was labelled), exit 0."""
    out = _cli(["errors", "report", "--runs", str(tmp_path / "typo" / "*"), "--out-dir", str(tmp_path / "errors"),
                "--reports-dir", str(tmp_path / "r")], REPO)
    assert out.returncode == 1, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1].startswith("empty report: no runs found at ")
    assert not (tmp_path / "errors" / "eval").exists()  # nothing was evaluated


def test_errors_report_on_other_runs_is_named_after_them_and_leaves_the_main_jobs_report(tmp_path):
    """``errors report --runs .../mine/*`` writes ``04_error_analysis_mine``, as ``cresowlve report
    04_error_analysis -p runs .../mine/*`` does. Before, it always wrote ``04_error_analysis``, replacing the
    main job's error-analysis report (of the demo runs) with one of other runs."""
    from test_errors_label import _items, write_run

    items = _items(2)
    (tmp_path / "mine").mkdir()
    write_run(tmp_path / "mine", "en", items, {it.id: False for it in items})
    reports = tmp_path / "r"
    reports.mkdir()
    (reports / "04_error_analysis.html").write_text("the main job's report")
    out = _cli(["errors", "report", "--runs", str(tmp_path / "mine" / "m__*"), "--out-dir", str(tmp_path / "errors"),
                "--reports-dir", str(reports)], REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (reports / "04_error_analysis.html").read_text() == "the main job's report"
    assert (reports / "04_error_analysis_mine.html").is_file()


@pytest.mark.parametrize("runs", ["typo/*", ["typo/a__en", "typo/a__ru"]])
def test_make_demo_stands_in_for_the_demo_runs_only_never_for_runs_that_match_nothing(tmp_path, monkeypatch, runs):
    """``cresowlve report 04_error_analysis -p runs data/runs/mien/*`` (and 05, which loads its runs the
    same way): the notebooks' ``make_demo`` default evaluated the demo items with the embedded model and
    reported on those answers, exit 0, as ``errors report`` did before it passed ``make_demo=False``."""
    from cresowlve_core import runtime
    from cresowlve_core.error_analysis.wrong import find_or_make_runs

    monkeypatch.setattr(runtime, "endpoint_or_embedded", lambda *a, **k: pytest.fail("a demo evaluation was made"))
    recorded: dict = {}
    monkeypatch.setattr("cresowlve_core.notebook_records.record",
                        lambda key, value: recorded.setdefault(key, value))
    given = str(tmp_path / runs) if isinstance(runs, str) else [str(tmp_path / r) for r in runs]
    data, source = find_or_make_runs(given, base_url=None, model=None, work_dir=tmp_path / "work", make_demo=True)
    assert data.empty and source.startswith("no runs found at ")
    assert recorded["empty"].startswith("no runs found at ")  # the empty report: exit 1, naming the runs
    assert not (tmp_path / "work").exists()


def test_errors_report_labels_with_the_seed_the_labels_were_made_with(tmp_path):
    """`errors label --seed 5`, then `errors report --seed 5` with the same labeller: the report resumes those
    labels (nothing asked again). Before, `errors report` had no --seed: it labelled with seed 0 and was refused,
    "holds another configuration (seed: 5 → 0)", exit 2, with no flag to give it the labels' seed."""
    def answer(req) -> str:
        return "RATIONALE: r\nCATEGORY: Overthinking" if "CATEGORY" in str(req) else "Some thoughts. <Answer>Galileo</Answer>"

    runs, errors = tmp_path / "runs", str(tmp_path / "errors")
    with FakeServer(answers=answer) as srv:
        out = _cli(["eval", "--items", "demo", "--lang", "en", "--limit", "2", "--model", "m", "--base-url",
                    srv.base_url, "--run-dir", str(runs / "m__en")], REPO)
        assert out.returncode == 0, out.stderr[-2000:]
        label = ["--runs", str(runs / "*"), "--labeller-model", "lab", "--labeller-base-url", srv.base_url,
                 "--out-dir", errors, "--seed", "5"]
        out = _cli(["errors", "label", *label], REPO)
        assert out.returncode == 0, out.stderr[-2000:]
        asked = srv.total
        out = _cli(["errors", "report", *label, "--reports-dir", str(tmp_path / "r")], REPO)
        assert out.returncode == 0, out.stderr[-2000:]
        assert srv.total == asked  # the labels of seed 5 resumed: nothing labelled again
