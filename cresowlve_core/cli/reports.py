"""``cresowlve report|serve-reports|run``: render a notebook's report, serve the reports, the main job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cresowlve_core import argtypes, exitcodes
from cresowlve_core.cli.common import _params, _port_in_use, _usage_error
from cresowlve_core.cli.options import add_reports_dir
from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_USAGE


def cmd_report(a: argparse.Namespace) -> int:
    from cresowlve_core import notebook_progress, paths
    from cresowlve_core.notebooks import (
        ReportFailed,
        check_parameters,
        notebook_path,
        replaced_parameters,
        report_headline,
        report_name,
        run_notebook,
    )
    from cresowlve_core.untrusted import one_line

    params = _params(a.param)
    check_parameters(notebook_path(a.notebook), params)  # a refused parameter renders nothing and replaces nothing
    if (empty := next((k for k, v in params.items() if isinstance(v, str) and not v.strip()), None)) is not None:
        # a notebook reads "" as not given (`out_dir or tempfile.mkdtemp()`): the default, not what was asked
        return _usage_error(f"{a.notebook}: parameter {empty} is empty: give a value, or leave it out for the notebook's default")
    if a.notebook == "03_analysis" and params.get("compare"):  # an unknown name is refused before rendering
        import ast

        from cresowlve_core.analysis.paired import check_compare
        from cresowlve_core.notebooks import notebook_parameters

        try:
            default_runs = ast.literal_eval(str(notebook_parameters(notebook_path(a.notebook)).get("runs")))
        except (ValueError, SyntaxError):
            default_runs = None
        check_compare(params.get("runs", default_runs), params["compare"], params.get("aliases"))
    stem = a.name or report_name(a.notebook, params)  # named by its inputs: never the main job's report
    if a.name is None:  # a derived name two sets of inputs can share (data/runs/mine/gpt* and mine/claude*)
        reports = Path(a.reports_dir or paths.reports_dir()).resolve()
        if (before := replaced_parameters(reports, a.notebook, stem, params)) is not None:
            print(f"note: {stem} was rendered with {_shown_parameters(before)}; this render "
                  f"({_shown_parameters(params)}) replaces it and its exports: --name NAME keeps both",
                  file=sys.stderr)
    try:
        res = run_notebook(a.notebook, params, Path(a.reports_dir) if a.reports_dir else None,
                           output_name=stem, progress_every_s=notebook_progress.PROGRESS_EVERY_S)
    except ReportFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{res.html}  ({res.seconds:.1f}s)")
    if (head := report_headline(res.records)) is not None:  # it may name a configuration from a run directory
        print(one_line(head))
    if res.records.get("empty"):
        print(f"empty report: {res.records['empty']}", file=sys.stderr)
        return EXIT_INCOMPLETE
    code = exitcodes.report_exit(res.records)  # the model work the report ran, as its stage command would exit
    if a.open:
        served = serve_reports(res.html.parent, a.port, open_page=res.html.name)
        return code or served
    return code


def _shown_parameters(parameters: dict[str, Any]) -> str:
    """``runs='data/runs/mine/gpt*'``: a report's parameters on one line."""
    from cresowlve_core.untrusted import one_line

    return one_line(", ".join(f"{k}={v!r}" for k, v in sorted(parameters.items())) or "the default parameters", 200)


def serve_reports(directory: Path, port: int, open_page: str = "index.html") -> int:
    """Serve ``directory`` on 127.0.0.1 until Ctrl-C (reports are static offline HTML; see serve.py)."""
    from cresowlve_core.serve import make_server

    if not (directory / open_page).is_file():  # a fresh checkout's reports/ holds only .gitkeep
        missing = f" (no {open_page})" if directory.is_dir() else ""
        print(f"error: no reports at {directory}{missing}: render one with `cresowlve report NOTEBOOK` or "
              "`cresowlve run`", file=sys.stderr)
        return EXIT_USAGE
    if (busy := _port_in_use(port)) is not None:
        return _usage_error(busy)
    with make_server(directory, port) as httpd:
        print(f"serving {directory} at http://127.0.0.1:{httpd.server_address[1]}/{open_page}  (Ctrl-C stops)",
              flush=True)
        from cresowlve_core.runtime import stop

        try:
            with stop.interruptible():  # Ctrl-C and SIGTERM end the (blocking) server at once
                httpd.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


def cmd_serve_reports(a: argparse.Namespace) -> int:
    from cresowlve_core.paths import reports_dir

    return serve_reports(Path(a.reports_dir) if a.reports_dir else reports_dir(), a.port)


def cmd_run(a: argparse.Namespace) -> int:
    from cresowlve_core.mainjob import MainJobInterrupted, main_job

    try:
        written = main_job(reports_dir=Path(a.reports_dir) if a.reports_dir else None, quick=a.quick)
    except MainJobInterrupted as exc:  # the notebook being rendered was stopped; the rest skipped
        print(exitcodes.interrupted_line(f"{len(exc.written)} report(s) written, stopped during {exc.current}, "
                                         "the rest skipped"), file=sys.stderr)
        return exitcodes.interrupt_code()
    return exitcodes.reports_exit(written)  # the model work of each report, as its stage command would exit


def add_serve_reports_parser(sub: Any) -> None:
    """Register ``cresowlve serve-reports``."""
    p = sub.add_parser("serve-reports", help="serve reports/ on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=argtypes.port, default=8766, help="TCP port on 127.0.0.1 (default: 8766)")
    add_reports_dir(p, "directory served", written=False)
    p.set_defaults(fn=cmd_serve_reports)


def add_report_parser(sub: Any) -> None:
    """Register ``cresowlve report``."""
    p = sub.add_parser("report", help="execute a notebook headless and render its HTML report")
    p.add_argument("--open", action="store_true",
                   help="then serve the reports on 127.0.0.1 and print the report's address (default: off)")
    p.add_argument("--port", type=argtypes.port, default=8766, help="port for --open (default: 8766)")
    p.add_argument("notebook", help="name in notebooks/ (e.g. 03_analysis) or a path")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("KEY", "VALUE"),
                   help="set a notebook parameter; VALUE is JSON where it parses, else a string; "
                        "repeatable (default: the notebook's own defaults)")
    p.add_argument("--name", type=argtypes.file_stem, default=None,
                   help="file stem of the report (default: the notebook's name, plus a label of its inputs "
                        "when they are not the defaults, e.g. 03_analysis_mine for -p runs 'data/runs/mine/*')")
    add_reports_dir(p)
    p.set_defaults(fn=cmd_report)


def add_run_parser(sub: Any) -> None:
    """Register ``cresowlve run``."""
    p = sub.add_parser("run", help="the main job: demo evaluation + every report, on the embedded model "
                       "unless CRESOWLVE_BASE_URL/CRESOWLVE_MODEL are set")
    add_reports_dir(p, "where the reports go")
    p.add_argument("--quick", action="store_true", help="fewer items (for smoke tests) (default: off)")
    p.set_defaults(fn=cmd_run)
