"""Exit codes of ``cresowlve`` commands and the one rule that maps a stage's summary to one.

Below :mod:`cresowlve_core.cli` and the stages, so that a stage and every command module (``cli/errors.py``,
``cli/contamination.py``, ...) can use :func:`stage_exit`.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cresowlve_core.failures import EXIT_INCOMPLETE, EXIT_OK, EXIT_STOPPED, EXIT_USAGE

__all__ = ["EXIT_INCOMPLETE", "EXIT_OK", "EXIT_STOPPED", "EXIT_USAGE", "EXIT_SIGINT", "EXIT_SIGTERM",
           "EXIT_CODES_HELP", "STAGES_RECORD", "interrupt_code", "interrupted_line", "report_exit", "reports_exit",
           "resume_advice", "stage_exit", "stage_record", "stop_parts"]

EXIT_SIGINT = 130  # Ctrl-C (128 + SIGINT)
EXIT_SIGTERM = 143  # SIGTERM (128 + SIGTERM)

EXIT_CODES_HELP = """\
exit codes:
  0    done: every item (unit) finished
  1    finished, but some items errored or were not run; the last line says how many
       and names the most common error with its count; run again to retry them.
       Also: a step's model answered but none of its output could be read (no verdict,
       no option, no label), or replies were cut off at the token limit before it: the
       output is kept, the last line says which step and what would read it. Output
       that could not be read for only some items is counted and named on the stage's
       line and in its report.
       Also a bug: its traceback is printed and the last line asks for a report
  2    refused before any request: a bad argument, an unreadable items file, an unusable
       run directory (a file, unwritable, in use by another process), a run directory of
       another configuration, a missing key variable
  3    stopped early: a fatal provider error (wrong key, model or endpoint; endpoint down),
       --max-cost reached, or a full disk; finished work is kept; the last line ends with
       what to change first (a valid key, another --effort, a higher --max-cost) or, when
       the endpoint was down, "run again to resume"
  130  interrupted by Ctrl-C (SIGINT); finished work, summary.json and finished_at are written
  143  terminated by SIGTERM; same as 130
"""

def interrupt_code() -> int:
    """130 after Ctrl-C, 143 after SIGTERM (the signal recorded by :mod:`cresowlve_core.runtime.stop`)."""
    from cresowlve_core.runtime import stop

    return EXIT_SIGTERM if stop.requested() == signal.SIGTERM else EXIT_SIGINT


def interrupted_line(done: str = "") -> str:
    """The last line of an interrupted command: ``interrupted (SIGTERM): <done>; run again to resume``."""
    name = "SIGTERM" if interrupt_code() == EXIT_SIGTERM else "Ctrl-C"
    return f"interrupted ({name}){': ' + done if done else ''}; run again to resume"


def _field(summary: Any, *names: str) -> Any:
    """The first of ``names`` found on a summary dict or a result object (methods are called)."""
    for name in names:
        if isinstance(summary, Mapping):
            if name in summary:
                return summary[name]
        elif hasattr(summary, name):
            value = getattr(summary, name)
            return value() if callable(value) else value
    return None


def sent_phrase(n_sent: int, n_left: int, already: str) -> str:
    """What a run sent, for its summary line: ``"N sent"``, or, when it sent nothing, why only if
    that is the reason (``already``: everything was done before); with ``n_left`` units still
    errored or not run, a stop or a refusal is the reason, and the last line names it."""
    if n_sent:
        return f"{n_sent} sent"
    return "nothing sent" if n_left else f"nothing sent ({already})"


def stop_parts(stopped: str) -> tuple[str, str | None]:
    """A stop reason (``summary["stopped"]``, :func:`~cresowlve_core.runtime.errors.stop_reason`) as
    (why the run stopped, what to change before the same command can get further, or None when
    running it again may be all it takes)."""
    from cresowlve_core.runtime.errors import TO_GO_ON

    reason, sep, remedy = stopped.rpartition(TO_GO_ON)
    return (reason, remedy) if sep and remedy else (stopped, None)


def resume_advice(remedy: str | None) -> str:
    """The end of a stopped run's last line: the change a re-run needs first, else "run again to resume"."""
    if remedy:
        return f"finished work is kept; to go on: {remedy}"
    return "finished work is kept, run again to resume"


def stage_exit(summary: Any, *, unit: str = "items") -> int:
    """The exit code of a stage command, printing a last line to stderr unless all is done.

    ``summary`` is a runtime :class:`~cresowlve_core.runtime.MapResult`, a stage summary dict
    (``n_items``, ``n_ok``, ``n_error``, ``n_not_run``, ``stopped``, ``top_error``) or an object
    with those attributes (CREATE's ``n_calls``/``n_missing`` and ``n_to_judge``/``n_judged``/
    ``n_judge_errors``/``n_not_judged`` are understood too). ``unparsed``: a sentence saying which
    steps parsed no unit's output (exit 1 with it). ``over_budget``: a sentence saying which role spent
    more than its ``max_cost`` (named in a stop's line). Codes: see :data:`EXIT_CODES_HELP`.
    """
    from cresowlve_core.runtime.mapping import INTERRUPTED

    n = _field(summary, "n_items", "n_units", "n_calls", "n_to_judge") or 0
    n_ok = _field(summary, "n_ok", "n_done", "n_judged")
    n_error = _field(summary, "n_error", "n_judge_errors") or 0
    n_not_run = _field(summary, "n_not_run", "n_missing", "n_not_judged") or 0
    stopped = _field(summary, "stopped")
    top = _field(summary, "top_error")
    done = f"{n_ok if n_ok is not None else n - n_error - n_not_run} of {n} {unit} done"
    left = f"{n_error} errored, {n_not_run} not run"
    common = f"; most common error ({top[1]}x): {top[0]}" if top else ""
    if stopped == INTERRUPTED:
        print(interrupted_line(f"{done}, {left}"), file=sys.stderr)
        return interrupt_code()
    if stopped:
        over = _field(summary, "over_budget")  # a sentence: spending that passed a budget (see runner.over_budget)
        reason, to_go_on = stop_parts(str(stopped))
        print(f"stopped early ({reason}{'; ' + over if over else ''}): {done}, {left}{common}; "
              f"{resume_advice(to_go_on)}", file=sys.stderr)
        return EXIT_STOPPED
    if n_error or n_not_run:
        print(f"incomplete: {left} of {n} {unit}{common}; run again to retry them", file=sys.stderr)
        return EXIT_INCOMPLETE
    if unparsed := _field(summary, "unparsed"):  # every call answered, but nothing could be read
        print(f"incomplete: {unparsed}; the model's output is kept in the run directory", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_OK


#: the record (``notebook_records.record``) in which a report lists the model work it ran, one
#: :func:`stage_record` per stage; ``cresowlve report`` exits with :func:`report_exit` of it
STAGES_RECORD = "stages"
#: what :func:`stage_exit` reads of a summary (under any of its names)
_STAGE_FIELDS = ("n_items", "n_units", "n_calls", "n_to_judge", "n_ok", "n_done", "n_judged", "n_error",
                 "n_judge_errors", "n_not_run", "n_missing", "n_not_judged", "stopped", "top_error", "over_budget",
                 "unparsed")


def stage_record(summary: Any, unit: str = "items", **extra: Any) -> dict[str, Any]:
    """A stage's summary (a dict, a pydantic summary or a result object) as a report records it:
    the fields :func:`stage_exit` reads, its ``unit`` and ``extra`` (``unparsed=...``), JSON-ready."""
    if hasattr(summary, "model_dump"):
        summary = summary.model_dump()
    found = {name: _field(summary, name) for name in _STAGE_FIELDS}
    out = {k: v for k, v in {**found, **extra}.items() if v is not None}
    if isinstance(out.get("top_error"), tuple):
        out["top_error"] = list(out["top_error"])
    return {"unit": unit, **out}


def _severity(code: int) -> int:
    return {EXIT_OK: 0, EXIT_INCOMPLETE: 1, EXIT_STOPPED: 2}.get(code, 3)  # an interruption outranks all


def report_exit(records: Mapping[str, Any]) -> int:
    """The exit code of ``cresowlve report``: :func:`stage_exit` of each stage the report ran
    (:data:`STAGES_RECORD`; each prints its last line), the most severe; 0 for a report that ran no model."""
    codes = [stage_exit(stage, unit=stage.get("unit", "items")) for stage in records.get(STAGES_RECORD) or []]
    return max(codes, key=_severity, default=EXIT_OK)


def _left_to_send(stage: Mapping[str, Any]) -> bool:
    """Whether a stage left calls that a re-run sends again (errored, not run, stopped), unlike outputs
    that were answered but did not parse (``unparsed``): those are kept and read the same way again."""
    return bool(stage.get("stopped") or any(_field(stage, name) for name in (
        "n_error", "n_judge_errors", "n_not_run", "n_missing", "n_not_judged")))


def reports_exit(htmls: Sequence[Path]) -> int:
    """The exit code of ``cresowlve run``: :func:`report_exit` of each report it rendered (read from the
    executed notebook beside each HTML file), each line named by its report, then one last line listing
    the reports whose model work was left errored, not run or unparsed; 0 when there is none."""
    import contextlib
    import io

    from cresowlve_core.notebook_records import read_records
    from cresowlve_core.runtime.mapping import INTERRUPTED

    worst, left, retried = EXIT_OK, [], False  # retried: some left work a re-run sends again
    to_go_on: list[tuple[str, str]] = []  # (report, what to change) of each stop a re-run would meet again
    for html in htmls:
        ipynb = html.with_suffix(".ipynb")
        records = read_records(ipynb) if ipynb.exists() else {}
        lines = io.StringIO()
        with contextlib.redirect_stderr(lines):
            code = report_exit(records)
        if code != EXIT_OK:
            left.append(html.stem)
            worst = max(worst, code, key=_severity)
            for line in lines.getvalue().splitlines():
                print(f"{html.stem}: {line}", file=sys.stderr)
            retried = retried or any(_left_to_send(stage) for stage in records.get(STAGES_RECORD) or [])
        stops = (stop_parts(str(stage["stopped"]))[1] for stage in records.get(STAGES_RECORD) or []
                 if stage.get("stopped") and stage["stopped"] != INTERRUPTED)
        to_go_on += [(html.stem, remedy) for remedy in stops if remedy]
    if left:
        advice = (f"to go on: {to_go_on[0][1]} ({to_go_on[0][0]})" if to_go_on  # the first; the others are above
                  else "run again to retry it" if retried
                  else "a re-run sends nothing for it: the outputs that did not parse are kept and read the same way")
        print(f"incomplete: {len(left)} report(s) left model work errored, not run or unparsed ({', '.join(left)}; "
              f"their lines are above); {advice}", file=sys.stderr)
    return worst
