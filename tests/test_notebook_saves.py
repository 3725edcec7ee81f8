"""A report's notebook is written to disk at most every SAVE_EVERY_S seconds while it executes, and always
when it ends: finished, failed in a cell, or with its kernel dead (the partial notebook is kept)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill.engines
import papermill.execute
import pytest

from cresowlve_core import notebook_progress
from cresowlve_core.notebooks import FAILED_DIR, ReportFailed, run_notebook


def _notebook(path: Path, last: str) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('marker = "v1"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Saves"), params,
                *(nbformat.v4.new_code_cell(f"print('cell {i}', marker)") for i in range(4)),
                nbformat.v4.new_code_cell(last)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def writes(monkeypatch):
    """Every notebook write papermill makes, by its engine during execution and by execute_notebook after
    it, as the text of the cells' outputs."""
    seen: list[str] = []
    original = papermill.engines.write_ipynb

    def counting(nb, path):
        seen.append(str([c.get("outputs") for c in nb.cells]))
        return original(nb, path)

    monkeypatch.setattr(papermill.engines, "write_ipynb", counting)
    monkeypatch.setattr(papermill.execute, "write_ipynb", counting)
    return seen


@pytest.mark.parametrize("progress", [None, 0.2])
def test_a_report_is_saved_at_its_start_and_its_end_not_around_every_cell(tmp_path, writes, monkeypatch, progress):
    monkeypatch.setattr(notebook_progress, "SAVE_EVERY_S", 3600.0)
    nb = _notebook(tmp_path / "saves.ipynb", "print('last', marker)")
    result = run_notebook(str(nb), {"marker": "ok"}, tmp_path / "reports", progress_every_s=progress)
    assert len(writes) == 2  # the parameterised notebook before the first cell, the executed one once at the end
    assert "last', 'ok" not in writes[0].replace('"', "'") and "last ok" in writes[-1]
    text = result.ipynb.read_text()
    assert all(f"cell {i} ok" in text for i in range(4)) and "last ok" in text


def test_without_the_interval_every_cell_is_saved_as_papermill_does(tmp_path, writes, monkeypatch):
    monkeypatch.setattr(notebook_progress, "SAVE_EVERY_S", 0.0)
    nb = _notebook(tmp_path / "saves.ipynb", "print('last', marker)")
    run_notebook(str(nb), {"marker": "ok"}, tmp_path / "reports")
    assert len(writes) >= 2 * 6  # before and after each of the six cells (code and Markdown alike)


def test_a_cell_error_keeps_the_partial_notebook(tmp_path, writes, monkeypatch):
    monkeypatch.setattr(notebook_progress, "SAVE_EVERY_S", 3600.0)
    nb = _notebook(tmp_path / "saves.ipynb", "raise ZeroDivisionError('on purpose')")
    with pytest.raises(ReportFailed, match="ZeroDivisionError"):
        run_notebook(str(nb), {"marker": "err"}, tmp_path / "reports")
    partial = (tmp_path / "reports" / FAILED_DIR / "saves" / "saves.ipynb").read_text()
    assert all(f"cell {i} err" in partial for i in range(4)) and "on purpose" in partial


def test_a_dead_kernel_keeps_the_partial_notebook(tmp_path, writes, monkeypatch):
    monkeypatch.setattr(notebook_progress, "SAVE_EVERY_S", 3600.0)
    nb = _notebook(tmp_path / "saves.ipynb", "import os\nos._exit(1)")
    with pytest.raises(ReportFailed):
        run_notebook(str(nb), {"marker": "dead"}, tmp_path / "reports")
    partial = (tmp_path / "reports" / FAILED_DIR / "saves" / "saves.ipynb").read_text()
    assert all(f"cell {i} dead" in partial for i in range(4))
