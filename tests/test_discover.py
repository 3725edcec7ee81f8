"""The apps find what exists: the review, annotation and explorer apps default to
the newest build, annotation sample, error labels and runs under the data dir, and say where they
looked when nothing is there. Each app is run headless (in-process ``app.run()``; the annotation app
also through ``marimo export html``) in temporary data dirs (tests/conftest.py isolates them)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cresowlve_core import discover
from cresowlve_core import explore as X
from cresowlve_core.error_analysis.annotation import write_sample
from cresowlve_core.sources.sample import load_items

sys.path.insert(0, str(Path(__file__).resolve().parent / "analysis"))  # the analysis tests' run writers
from test_analysis_fixtures import record, write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EN = sorted(it.id for it in load_items("demo", "en"))


def _app(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_app", REPO / "notebooks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def _age(path: Path, seconds_ago: float) -> Path:
    t = path.stat().st_mtime - seconds_ago
    os.utime(path, (t, t))
    return path


def _build(data: Path, name: str, seconds_ago: float) -> Path:
    d = data / "builds" / name
    d.mkdir(parents=True)
    (d / "build.json").write_text("{}")
    _age(d / "build.json", seconds_ago)
    return d


def _sample(folder: Path, n: int = 2, seconds_ago: float = 0) -> Path:
    rows = pd.DataFrame([{"key": f"k{i}", "config": "m", "lang": "en", "id": f"i{i}", "question": "Name X.",
                          "answer": "a", "prediction": "b", "reasoning": "X is"} for i in range(n)])
    return _age(write_sample(rows, folder / "annotations" / "sample.jsonl"), seconds_ago)


def _labels(out_dir: Path, seconds_ago: float = 0) -> Path:
    f = out_dir / "labels" / "gpt-4o" / "labels.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"key": f"m|en|{EN[0]}|0000000000", "status": "ok", "config": "m", "lang": "en",
                             "id": EN[0], "label": "overthinking", "labeller": "gpt-4o"}) + "\n")
    return _age(f, seconds_ago)


def _run(path: Path, seconds_ago: float = 0, **manifest) -> Path:
    write_run(path, [record(EN[0], model=path.name, prediction="p", em_strict=False)], model=path.name, **manifest)
    for f in path.iterdir():
        _age(f, seconds_ago)
    return path


# ---- the rules (cresowlve_core.discover)


def test_nothing_found_names_where_it_looked(isolated_dirs):
    data = isolated_dirs["data"]
    for found in (discover.newest_build(), discover.newest_error_sample(), discover.newest_error_labels(),
                  discover.newest_runs()):
        assert not found and found.path is None
        assert found.nothing().startswith(f"no {found.what} found (looked for `{data}")
    assert str(data / "runs" / "errors") in discover.newest_error_sample().nothing()
    assert str(data / "errors") in discover.newest_error_labels().nothing()


def test_the_newest_of_each_kind(isolated_dirs):
    data = isolated_dirs["data"]
    _build(data, "demo", 100)
    new = _build(data, "demo-gemma", 10)
    (data / "builds" / "not_a_build").mkdir()  # no build.json: never chosen
    assert discover.newest_build().path == new

    _sample(data / "errors", seconds_ago=100)  # cresowlve errors report's default --out-dir
    main_job = _sample(data / "runs" / "errors" / "gemma", seconds_ago=10)  # the main job's
    assert discover.newest_error_sample().path == main_job
    _labels(data / "runs" / "errors" / "gemma", seconds_ago=100)
    _labels(data / "errors", seconds_ago=10)
    assert discover.newest_error_labels().path == data / "errors"

    runs = data / "runs"
    _run(runs / "demo" / "gemma__en", 300)
    _run(runs / "demo" / "gemma__ru", 200)
    assert discover.newest_runs().path == runs / "demo" / "*"
    _run(runs / "synthetic" / "s__en", 1, synthetic=True)  # synthetic runs are never the default
    _run(runs / "archive" / "old__en", 1)  # nor archived ones
    assert discover.newest_runs().path == runs / "demo" / "*"
    _run(runs / "gpt-4.1__en", 50)  # cresowlve eval's default run directory
    assert discover.newest_runs().path == runs / "*"


# ---- the apps, headless


def test_review_app_opens_the_newest_build_or_says_where_it_looked(isolated_dirs):
    _, defs = _app("review").run()
    assert defs["session"] is None and defs["build_dir"].value == ""
    assert f"no build found (looked for `{isolated_dirs['data'] / 'builds'}" in defs["problem"]
    assert "cresowlve build" in defs["problem"]

    new = _build(isolated_dirs["data"], "demo-gemma", 0)
    _build(isolated_dirs["data"], "demo", 100)
    _, defs = _app("review").run()
    assert defs["build_dir"].value == str(new)
    assert "queue" in defs["problem"]  # a build without a review queue yet: the session's own error


def test_annotate_app_opens_the_newest_sample_or_says_where_it_looked(isolated_dirs):
    _, defs = _app("annotate_errors").run()
    assert defs["sample_path"].value == "" and defs["row"] is None
    assert f"no annotation sample found (looked for `{isolated_dirs['data'] / 'errors'}" in defs["problem"]

    path = _sample(isolated_dirs["data"] / "runs" / "errors" / "gemma", n=3)
    _, defs = _app("annotate_errors").run()
    assert defs["sample_path"].value == str(path)
    assert defs["problem"].startswith("enter your name")  # the sample is found; only the annotator is missing


def test_explorer_defaults_to_the_newest_runs_and_labels(isolated_dirs):
    data = isolated_dirs["data"]
    ex = X.load_explorer()
    assert not ex.has_runs and not ex.has_labels
    assert any(n.startswith(f"no evaluation runs found (looked for `{data / 'runs'}") for n in ex.notes)
    assert any(n.startswith("no error labels found (looked for") for n in ex.notes)

    _run(data / "runs" / "demo" / "m", 10)
    _labels(data / "runs" / "errors" / "gemma")
    ex = X.load_explorer()
    assert ex.has_runs and ex.runs_spec == str(data / "runs" / "demo" / "*")
    assert len(ex.labels) == 1 and not any(n.startswith("no ") for n in ex.notes)
    assert not X.load_explorer(labels="").has_labels  # explicitly none
    # the main job's folder of error-analysis folders, as the docs show it (--labels data/runs/errors)
    assert len(X.resolve_label_files("data/runs/errors", root=data.parent)) == 1

    _, defs = _app("explore").run()
    assert defs["runs_in"].value == str(data / "runs" / "demo" / "*")
    assert defs["labels_in"].value == str(data / "runs" / "errors" / "gemma") and defs["ex"].has_labels


def test_annotate_app_exported_headless_shows_the_newest_sample(isolated_dirs, tmp_path):
    """``marimo export html`` of the app, as a user runs it: no --sample, the annotator on the command line."""
    marimo = Path(sys.executable).parent / "marimo"
    if not marimo.exists():
        pytest.skip("marimo is not installed in this environment")
    _sample(isolated_dirs["data"] / "runs" / "errors" / "gemma", n=3)
    app = tmp_path / "app" / "annotate_errors.py"  # a copy: marimo may write a session cache beside the app
    app.parent.mkdir()
    shutil.copy(REPO / "notebooks" / "annotate_errors.py", app)
    out = tmp_path / "annotate.html"
    proc = subprocess.run([str(marimo), "export", "html", str(app), "-o", str(out), "--", "--annotator", "ann"],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = out.read_text(encoding="utf-8")
    assert "Item 1 of 3" in page and "Name X." in page and "marimo+error" not in page


def test_explorer_prefers_the_labels_of_the_loaded_runs_and_counts_the_others_apart(isolated_dirs):
    """A grid run after the error analysis: the newest labels belong to other runs. The explorer
    takes the newest labels of the runs it shows; labels of answers not loaded are not 'stale'."""
    data = isolated_dirs["data"]
    _run(data / "runs" / "demo" / "m", 10)  # config "m": the answers the labels below are for
    mine = data / "runs" / "errors" / "gemma"
    _labels(mine, seconds_ago=100)
    other = data / "errors"
    f = _labels(other, seconds_ago=1)  # newer, but for config "x"
    f.write_text(f.read_text().replace('"config": "m"', '"config": "x"').replace('"m|en|', '"x|en|'))
    _age(f, 1)
    assert discover.error_label_dirs() == [other, mine]
    ex = X.load_explorer()
    assert ex.labels["path"].str.startswith(str(mine)).all() and len(ex.labels) == 1
    assert "(1 stale)" in ex.summary()  # written for another output of the loaded answer (hash 0000000000)
    both = X.load_explorer(labels=[str(mine), str(other)])
    assert "(1 stale, 1 for answers not loaded)" in both.summary()
