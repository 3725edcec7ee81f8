"""A report notebook that stops on its input is one line on the terminal and exit 2, not a papermill
traceback: the documented `cresowlve report 07_create -p user_runs '["data/runs/create/*"]'`
before any CREATE run exists (commands of the README, run as a new user)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_notebook_stopped_by_its_input_is_one_line_and_exit_2(tmp_path):
    # a project of its own with no CREATE run (the checkout's data/ may hold the main job's)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "cresowlve-core"\n')
    out = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "report", "07_create", "-p", "user_runs",
                          '["data/runs/create/*"]', "--reports-dir", str(tmp_path / "reports")],
                         capture_output=True, text=True, timeout=600, cwd=project,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 07_create: MissingInput: user_runs: 'data/runs/create/*' matches no run")
    assert "the old report is left untouched" in last
    assert str(tmp_path / "reports" / ".failed" / "07_create_create" / "07_create_create.ipynb") in last  # the partial one


def test_a_parameter_the_stage_config_refuses_is_one_line_and_exit_2(tmp_path, capsys):
    """``-p lang de``: the notebook's EvalConfig (pydantic) refuses it in a cell. Before, that was "02_evaluation
    failed: ValidationError: 1 validation error for EvalConfig" and pydantic's lines, with its URL, exit 1."""
    from cresowlve_core.cli import main

    code = main(["report", "02_evaluation", "-p", "model", "x", "-p", "base_url", "http://127.0.0.1:9/v1",
                 "-p", "run_dir", str(tmp_path / "run"), "-p", "lang", "de", "--reports-dir", str(tmp_path / "reports")])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line.startswith("error: 02_evaluation: ValidationError: 1 validation error for EvalConfig: lang: "
                           "Input should be 'en' or 'ru' [type=literal_error, input_value='de', input_type=str] (cell ")
    assert "errors.pydantic.dev" not in line and "the old report is left untouched" in line
