"""What a stopped stage's last line ends with (``exitcodes.stage_exit`` of ``runtime.errors.stop_reason``):
what to change when the same command would stop the same way, "run again to resume" when running it
again may be all it takes."""

from __future__ import annotations

import pytest

from cresowlve_core.exitcodes import EXIT_STOPPED, stage_exit, stop_parts
from cresowlve_core.llm.pricing import CostMeter
from cresowlve_core.llm.types import BudgetExceeded, LLMConfigError, LLMEndpointDown, LLMFatalError
from cresowlve_core.runtime.errors import stop_reason
from cresowlve_core.runtime.mapping import pipeline_summary


def last_line(summary: dict, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = stage_exit(summary)
    return code, capsys.readouterr().err.strip().splitlines()[-1]


def stopped(reason: str) -> dict:
    return {"n_items": 4, "n_ok": 1, "n_error": 0, "n_not_run": 3, "stopped": reason}


def test_the_judges_budget_names_its_own_flag(capsys):
    meter = CostMeter(role="judge")
    meter.record(0.03, cached=False)
    with pytest.raises(BudgetExceeded) as err:
        meter.reserve(0.01, 0.035)
    code, line = last_line(stopped(stop_reason(err.value)), capsys)
    assert code == EXIT_STOPPED
    assert line.startswith("stopped early (max_cost reached: the judge budget of $0.0350 would be exceeded")
    assert line.endswith("to go on: raise --judge-max-cost, or run again to spend up to $0.0350 more "
                         "(--judge-max-cost caps each run's new spending)")


def test_a_fatal_error_that_names_no_remedy_says_the_same_command_stops_the_same_way(capsys):
    code, line = last_line(stopped(stop_reason(LLMConfigError("unknown wire format 'x'"))), capsys)
    assert code == EXIT_STOPPED
    assert "run again to resume" not in line
    assert line.endswith("to go on: change what stopped the run (the same command stops the same way)")


def test_an_endpoint_down_and_an_old_summary_keep_run_again_to_resume(capsys):
    down = stop_reason(LLMEndpointDown("model 'm' at http://127.0.0.1:9/v1 looks down (connection refused)"))
    for reason in (down, "fatal: HTTP 401"):  # the second: a summary.json written before remedies were recorded
        code, line = last_line(stopped(reason), capsys)
        assert code == EXIT_STOPPED
        assert line == f"stopped early ({reason}): 1 of 4 items done, 0 errored, 3 not run; finished work is kept, " \
                       "run again to resume"


def test_a_pipeline_steps_stop_keeps_its_remedy_after_the_step_name(capsys):
    reason = stop_reason(LLMFatalError("HTTP 401: bad key", remedy="set a valid key in $K"))
    steps = [{"step": "perturbation", "n_units": 2, "n_ok": 0, "n_error": 0, "n_not_run": 2, "stopped": reason,
              "top_error": None}]
    code, line = last_line(pipeline_summary(steps), capsys)
    assert code == EXIT_STOPPED
    assert line == ("stopped early (perturbation: fatal: HTTP 401: bad key): 0 of 2 items done, 0 errored, 2 not run; "
                    "finished work is kept; to go on: set a valid key in $K")


def test_a_remedy_marker_inside_a_providers_message_is_not_taken_for_the_remedy():
    reason = stop_reason(LLMFatalError("HTTP 400: x; to go on: do something else", remedy="set a valid key in $K"))
    assert stop_parts(reason) == ("fatal: HTTP 400: x; to go on: do something else", "set a valid key in $K")
