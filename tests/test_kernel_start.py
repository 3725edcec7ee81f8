"""A notebook's kernel that exits as it starts (before any cell ran: jupyter_client's port race) is
started again, with a WARNING; any other failure is the report's failure at once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cresowlve_core import notebooks
from cresowlve_core.notebooks import KERNEL_START_ATTEMPTS, KERNEL_START_DIED, ReportFailed


def scripted_papermill(monkeypatch, failures: list[BaseException]) -> list[str]:
    """``papermill.execute_notebook`` raising ``failures`` in turn, then succeeding; returns its calls."""
    import papermill

    calls: list[str] = []

    def execute_notebook(src, out, **kwargs):
        calls.append(src)
        if failures:
            raise failures.pop(0)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    return calls


def test_a_kernel_that_died_starting_is_started_again_and_said(monkeypatch, tmp_path, caplog):
    calls = scripted_papermill(monkeypatch, [RuntimeError(KERNEL_START_DIED)])
    with caplog.at_level(logging.WARNING, logger="cresowlve_core.notebooks"):
        notebooks._execute("notebooks/07_create.ipynb", str(tmp_path / "out.ipynb"), tmp_path / "partial")
    assert len(calls) == 2
    assert any("07_create: the kernel exited as it started" in r.getMessage() and "attempt 2 of" in r.getMessage()
               for r in caplog.records)


def test_a_kernel_that_never_starts_fails_the_report_after_the_last_attempt(monkeypatch, tmp_path):
    calls = scripted_papermill(monkeypatch, [RuntimeError(KERNEL_START_DIED)] * KERNEL_START_ATTEMPTS)
    with pytest.raises(ReportFailed, match="07_create failed: RuntimeError: Kernel died before replying"):
        notebooks._execute("notebooks/07_create.ipynb", str(tmp_path / "out.ipynb"), tmp_path / "partial")
    assert len(calls) == KERNEL_START_ATTEMPTS


def test_other_failures_are_not_retried(monkeypatch, tmp_path):
    calls = scripted_papermill(monkeypatch, [RuntimeError("Cell execution timed out"), None])
    with pytest.raises(ReportFailed, match="Cell execution timed out"):
        notebooks._execute("notebooks/07_create.ipynb", str(tmp_path / "out.ipynb"), Path(tmp_path / "partial"))
    assert len(calls) == 1
