"""One exception base carries the exit code: the CLI exits with ``exc.exit_code`` after one line; any
other exception is a bug (traceback, exit 1, a line asking for a report)."""

from __future__ import annotations

import errno
import importlib
import inspect
import os
import pkgutil
from pathlib import Path

import pytest

import cresowlve_core
from cresowlve_core import cli
from cresowlve_core.construction.build import BuildStopped
from cresowlve_core.evaluation import runner
from cresowlve_core.failures import (
    CresowlveError,
    DiskFull,
    IncompleteError,
    InputError,
    MissingInput,
    StoppedError,
    UsageError,
    WriteDenied,
    failed_write,
)
from cresowlve_core.llm.http import TransportError
from cresowlve_core.llm.types import (
    BudgetExceeded,
    BudgetUnenforceable,
    LLMConfigError,
    LLMEndpointDown,
    LLMError,
    LLMFatalError,
)
from cresowlve_core.notebooks import ReportFailed
from cresowlve_core.runtime.manifest import ResumeError
from cresowlve_core.runtime.rundir import RunDirError
from cresowlve_core.sources.hub import ItemsFileError
from cresowlve_core.sources.sparql import SparqlError

ARGS = ["eval", "--items", "demo", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--no-cache"]


def _raising(exc: BaseException):
    def evaluate(*args, **kwargs):
        raise exc

    return evaluate


def _run(monkeypatch, capsys, tmp_path, exc: BaseException) -> tuple[int, str]:
    monkeypatch.setattr(runner, "evaluate", _raising(exc))
    code = cli.main([*ARGS, "--run-dir", str(tmp_path / "run")])
    return code, capsys.readouterr().err


def test_a_planted_key_error_in_a_stage_shows_its_traceback_and_exits_1(tmp_path, monkeypatch, capsys):
    def evaluate(*args, **kwargs):
        return {}["planted"]

    monkeypatch.setattr(runner, "evaluate", evaluate)
    code = cli.main([*ARGS, "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback (most recent call last)" in err and "KeyError: 'planted'" in err
    assert err.strip().splitlines()[-1] == cli.BUG_LINE


@pytest.mark.parametrize("exc", [ValueError("a bug"), OSError(errno.EACCES, "Permission denied", "/x"),
                                 TransportError("an internal signal that escaped")],
                         ids=["ValueError", "OSError", "internal"])
def test_anything_but_a_project_error_with_an_exit_code_is_a_bug(tmp_path, monkeypatch, capsys, exc):
    code, err = _run(monkeypatch, capsys, tmp_path, exc)
    assert code == 1 and "Traceback" in err and err.strip().splitlines()[-1] == cli.BUG_LINE


@pytest.mark.parametrize(("exc", "code"), [
    (UsageError("bad flag"), 2), (InputError("bad file"), 2), (MissingInput("no such file"), 2),
    (ItemsFileError("items.jsonl: line 3: not JSON"), 2), (ResumeError("another configuration"), 2),
    (RunDirError("locked"), 2), (LLMConfigError("no key"), 2), (LLMError("gave up"), 2),
    (StoppedError("stopped"), 3), (LLMFatalError("wrong key"), 3), (LLMEndpointDown("down"), 3),
    (BudgetExceeded("max cost"), 3), (BudgetUnenforceable("no price", "add a price"), 3),
    (BuildStopped("solve", "max cost"), 3), (SparqlError("endpoint failed"), 3),
    (DiskFull(errno.ENOSPC, "No space left on device", "/run/responses.jsonl"), 3),
    (WriteDenied(errno.EACCES, "Permission denied", "/run/manifest.json.tmp"), 3),
    (IncompleteError("half done"), 1), (ReportFailed("01 failed"), 1),
], ids=lambda x: type(x).__name__ if isinstance(x, BaseException) else str(x))
def test_each_project_error_exits_with_its_code_after_one_line(tmp_path, monkeypatch, capsys, exc, code):
    got, err = _run(monkeypatch, capsys, tmp_path, exc)
    assert got == code == exc.exit_code
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_full_disk_is_stopped_and_names_the_file():
    exc = OSError(errno.ENOSPC, "No space left on device")
    full = failed_write(exc, "/run/responses.jsonl")
    assert isinstance(full, DiskFull) and isinstance(full, OSError) and full.__cause__ is exc
    assert full.exit_code == 3 and full.filename == "/run/responses.jsonl"
    assert str(full).startswith("disk full writing /run/responses.jsonl (No space left on device)")
    other = OSError(errno.ENAMETOOLONG, "File name too long")
    assert failed_write(other, "/run/x.json") is other and other.filename == "/run/x.json"


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS], ids=errno.errorcode.get)
def test_a_refused_write_is_stopped_and_names_the_file(code):
    """A run directory made unwritable after the run began (its permissions, a file system remounted
    read-only): a stop naming the file and the reason, not a bug. Before: the PermissionError reached
    the CLI as is, a 'bug:' traceback and exit 1."""
    exc = OSError(code, os.strerror(code), "/run/manifest.json.tmp")
    stop = failed_write(exc, "/run/manifest.json")
    assert isinstance(stop, WriteDenied) and isinstance(stop, OSError) and stop.__cause__ is exc
    assert stop.exit_code == 3 and stop.filename == "/run/manifest.json.tmp"
    assert str(stop) == (f"cannot write /run/manifest.json.tmp ({os.strerror(code)}); finished work is kept, "
                         "make it writable and run again")


def _project_exception_classes() -> list[type[Exception]]:
    """Every ``Exception`` class the package defines (an interrupt, a ``KeyboardInterrupt``, is not one)."""
    found: dict[str, type[Exception]] = {}
    for mod in pkgutil.walk_packages(cresowlve_core.__path__, "cresowlve_core."):
        module = importlib.import_module(mod.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{name}"] = obj
    return list(found.values())


def test_every_project_exception_derives_from_the_base():
    classes = _project_exception_classes()
    assert len(classes) >= 30
    assert [c.__qualname__ for c in classes if not issubclass(c, CresowlveError)] == []


def test_a_report_exits_with_its_most_severe_stage_and_zero_without_one(capsys):
    """``cresowlve report``'s exit code: each stage the report ran, as its own command would exit
    (each printing its line), the most severe of them; a report that ran no model exits 0."""
    from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_OK, EXIT_STOPPED, report_exit, stage_record

    done = stage_record({"n_items": 3, "n_ok": 3, "n_error": 0, "n_not_run": 0})
    errored = stage_record({"n_items": 3, "n_ok": 1, "n_error": 2, "n_not_run": 0, "top_error": ("HTTP 400", 2)})
    stopped = stage_record({"n_calls": 4, "n_ok": 1, "n_error": 0, "n_missing": 3, "stopped": "max_cost reached"},
                           "calls")
    assert report_exit({}) == report_exit({"stages": []}) == report_exit({"stages": [done]}) == EXIT_OK
    assert capsys.readouterr().err == ""
    assert report_exit({"stages": [done, errored]}) == EXIT_INCOMPLETE
    assert capsys.readouterr().err.strip() == ("incomplete: 2 errored, 0 not run of 3 items; most common error (2x): "
                                               "HTTP 400; run again to retry them")
    assert report_exit({"stages": [stopped, errored]}) == EXIT_STOPPED
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("stopped early (max_cost reached): 1 of 4 calls done") and lines[1].startswith("incomplete")


def test_the_main_job_exits_with_the_reports_whose_model_work_was_left_undone(tmp_path, capsys):
    """``cresowlve run`` exited 0 whatever its reports' model calls did: it now reads each rendered
    notebook's stages, names each report's line, and its last line lists the reports left incomplete."""
    import json

    from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_OK, reports_exit, stage_record
    from cresowlve_core.notebook_records import RECORD_MIME

    def rendered(name: str, records: dict) -> Path:
        cells = [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {RECORD_MIME: records}}]}]
        (tmp_path / f"{name}.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
        return tmp_path / f"{name}.html"

    done = stage_record({"n_items": 9, "n_ok": 9, "n_error": 0, "n_not_run": 0})
    errored = stage_record({"n_items": 3, "n_ok": 1, "n_error": 2, "n_not_run": 0, "top_error": ("HTTP 400", 2)})
    en, ru = rendered("02_evaluation_en", {"stages": [done]}), rendered("02_evaluation_ru", {"stages": [errored]})
    analysis, index = rendered("03_analysis", {"headline": "Table 1"}), tmp_path / "index.html"  # no notebook beside it
    assert reports_exit([en, analysis, index]) == EXIT_OK and capsys.readouterr().err == ""
    assert reports_exit([en, ru, analysis, index]) == EXIT_INCOMPLETE
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("02_evaluation_ru: incomplete: 2 errored, 0 not run of 3 items; most common error (2x): "
                        "HTTP 400; run again to retry them")
    assert lines[-1].startswith("incomplete: 1 report(s) left model work errored, not run or unparsed (02_evaluation_ru;")


def test_the_main_jobs_last_line_names_what_to_change_when_a_reports_model_work_stopped(tmp_path, capsys):
    """A report whose stage stopped on a rejected key: its own line ends with what to change, and the last line
    of ``cresowlve run`` said "run again to retry it", which meets the same 401 again."""
    import json

    from cresowlve_core.exitcodes import EXIT_STOPPED, reports_exit, stage_record
    from cresowlve_core.llm.types import LLMFatalError
    from cresowlve_core.notebook_records import RECORD_MIME
    from cresowlve_core.runtime.errors import stop_reason

    def rendered(name: str, records: dict) -> Path:
        cells = [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {RECORD_MIME: records}}]}]
        (tmp_path / f"{name}.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
        return tmp_path / f"{name}.html"

    reason = stop_reason(LLMFatalError("HTTP 401: Incorrect API key provided", remedy="set a valid key in $OPENAI_API_KEY"))
    stopped = stage_record({"n_items": 3, "n_ok": 0, "n_error": 0, "n_not_run": 3, "stopped": reason})
    errored = stage_record({"n_items": 3, "n_ok": 1, "n_error": 2, "n_not_run": 0, "top_error": ("HTTP 400", 2)})
    ru, en = rendered("02_evaluation_ru", {"stages": [errored]}), rendered("02_evaluation_en", {"stages": [stopped]})
    assert reports_exit([ru, en]) == EXIT_STOPPED
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].endswith("; finished work is kept; to go on: set a valid key in $OPENAI_API_KEY")
    assert lines[-1] == ("incomplete: 2 report(s) left model work errored, not run or unparsed (02_evaluation_ru, "
                         "02_evaluation_en; their lines are above); to go on: set a valid key in $OPENAI_API_KEY "
                         "(02_evaluation_en)")


def test_the_main_jobs_last_line_does_not_promise_a_retry_when_only_unparsed_outputs_are_left(tmp_path, capsys):
    """Reports whose calls all answered but whose outputs did not parse: a second ``cresowlve run`` sends
    nothing for them (the outputs are kept and read again), so its last line must not say "run again to
    retry it"; with an errored report beside them it still does."""
    import json

    from cresowlve_core.exitcodes import EXIT_INCOMPLETE, reports_exit, stage_record
    from cresowlve_core.notebook_records import RECORD_MIME

    def rendered(name: str, records: dict) -> Path:
        cells = [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {RECORD_MIME: records}}]}]
        (tmp_path / f"{name}.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
        return tmp_path / f"{name}.html"

    unparsed = stage_record({"n_items": 4, "n_ok": 4, "n_error": 0, "n_not_run": 0},
                            unparsed="no label parsed: 4 of 4 replies unlabelled")
    errored = stage_record({"n_items": 3, "n_ok": 1, "n_error": 2, "n_not_run": 0, "top_error": ("HTTP 400", 2)})
    errors, create = rendered("04_error_analysis", {"stages": [unparsed]}), rendered("07_create", {"stages": [unparsed]})
    assert reports_exit([errors, create]) == EXIT_INCOMPLETE
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == ("incomplete: 2 report(s) left model work errored, not run or unparsed (04_error_analysis, "
                    "07_create; their lines are above); a re-run sends nothing for it: the outputs that did not "
                    "parse are kept and read the same way")
    ru = rendered("02_evaluation_ru", {"stages": [errored]})
    assert reports_exit([errors, ru]) == EXIT_INCOMPLETE
    assert capsys.readouterr().err.splitlines()[-1].endswith("; run again to retry it")
