"""The last line of a stopped ``cresowlve eval``, against the replay server's recorded replies: a stop that
the same command would hit again (a rejected key, an unknown model, a refused effort, an exhausted quota,
a spent budget) ends with what to change; an endpoint that looked down keeps "run again to resume".

Exit codes stay 3 (``exitcodes.EXIT_CODES_HELP``). Before: every one of them ended "finished work is kept,
run again to resume", which invited the same command again, and the same stop.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from replay.server import ReplayServer

REPO = Path(__file__).resolve().parents[2]
CODE = Path(os.environ.get("REPLAY_CODE", REPO))
RESUME = "finished work is kept, run again to resume"


def run_eval(base_url: str, provider: str, run_dir: Path, *args: str, key: str = "replay-test-key") -> tuple[int, str]:
    """``cresowlve eval`` on three demo items; (exit code, the last line of its output)."""
    env = dict(os.environ, REPLAY_KEY=key, PYTHONPATH=str(CODE))
    cmd = [sys.executable, "-m", "cresowlve_core.cli", "eval", "--items", "demo", "--limit", "3",
           "--base-url", base_url, "--api-key-env", "REPLAY_KEY", "--provider", provider,
           "--concurrency", "1", "--no-cache", "--run-dir", str(run_dir), *args]
    proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return proc.returncode, lines[-1]


def test_a_rejected_key_names_the_variable_to_set(tmp_path):
    with ReplayServer(api_key="the-right-key") as srv:  # the recorded 401 invalid_api_key for any other key
        code, line = run_eval(srv.base_url("openai"), "openai", tmp_path / "run", "--model", "gpt-4.1", key="sk-wrong")
    assert code == 3, line
    assert "HTTP 401: Incorrect API key provided" in line
    assert line.endswith("; finished work is kept; to go on: set a valid key in $REPLAY_KEY"), line


def test_runs_lists_a_stopped_run_with_what_to_change(tmp_path):
    """`cresowlve runs` cut the reason at 60 characters, before its cause: "stopped: fatal: model 'gpt-4.1' at
    http://127.0.0.1:PORT/openai/v1 f"; the row now ends with what to change."""
    from cresowlve_core.evaluation.listing import run_row

    with ReplayServer(api_key="the-right-key") as srv:
        run_eval(srv.base_url("openai"), "openai", tmp_path / "run", "--model", "gpt-4.1", key="sk-wrong")
    state = run_row(tmp_path / "run").state
    assert state.startswith("stopped: fatal: model 'gpt-4.1' at ") and "…" in state
    assert state.endswith("; to go on: set a valid key in $REPLAY_KEY"), state


def test_an_unknown_model_names_the_model_to_check(tmp_path):
    with ReplayServer() as srv:  # the recorded 404 model_not_found
        code, line = run_eval(srv.base_url("openai"), "openai", tmp_path / "run", "--model", "gpt-no-such-model")
    assert code == 3, line
    assert "HTTP 404" in line and RESUME not in line
    assert line.endswith("to go on: check the model name 'gpt-no-such-model' and the base URL "
                         "(the endpoint does not serve them)"), line


def test_a_refused_effort_says_to_choose_another_effort_on_the_run_and_on_its_resume(tmp_path):
    # the OpenRouter profile sends the effort as a `reasoning` object, which Gemini refuses by name (recorded 400)
    with ReplayServer() as srv:
        args = ("--model", "gemini-3-flash-preview", "--effort", "high")
        first = run_eval(srv.base_url("gemini"), "openrouter", tmp_path / "run", *args)
        again = run_eval(srv.base_url("gemini"), "openrouter", tmp_path / "run", *args)
    for code, line in (first, again):
        assert code == 3, line
        assert "refused the effort 'high'" in line and RESUME not in line
        assert line.endswith("; to go on: choose another --effort (model 'gemini-3-flash-preview' at "
                             f"{srv.base_url('gemini')} refuses 'high')"), line


def test_a_judge_effort_the_provider_refuses_stops_the_run_and_keeps_no_verdict(tmp_path):
    """``--judge-effort high`` sent to Gemini as OpenRouter's ``reasoning`` object, which Gemini refuses by name
    (recorded 400). Before: the judge's client dropped the field, the verdicts were given at the provider's
    default effort and recorded as the verdicts of a judge at 'high' (exit 0). Now the run stops (exit 3) with
    no verdict recorded, naming --judge-effort; its resume stops again before asking the judge."""
    with ReplayServer() as srv:
        url = srv.base_url("gemini")
        args = ("--model", "gemini-3-flash-preview", "--judge-model", "gemini-3-flash-preview",
                "--judge-provider", "openrouter", "--judge-effort", "high")
        first = run_eval(url, "gemini", tmp_path / "run", *args)
        asked = len(srv.requests("gemini", "chat"))
        again = run_eval(url, "gemini", tmp_path / "run", *args)
        assert len(srv.requests("gemini", "chat")) == asked  # the manifest holds the refusal: nothing sent
    for code, line in (first, again):
        assert code == 3, line
        assert "refused the effort 'high'" in line and "set by --judge-effort" in line, line
        assert line.endswith(f"; to go on: choose another --judge-effort (model 'gemini-3-flash-preview' at {url} "
                             "refuses 'high')"), line
    lines = [json.loads(x) for x in (tmp_path / "run" / "responses.jsonl").read_text().splitlines()]
    latest = {r["id"]: r for r in lines}  # the answer is on disk before its judge is asked; the last line is the record
    assert [(r["status"], r["judge_status"], r["judge_verdict"]) for r in latest.values()] == [("ok", "error", None)]


def test_an_exhausted_quota_says_to_add_credit_or_set_another_key(tmp_path):
    with ReplayServer("quota") as srv:  # the recorded insufficient_quota 429
        code, line = run_eval(srv.base_url("openai"), "openai", tmp_path / "run", "--model", "gpt-4.1")
    assert code == 3, line
    assert "You exceeded your current quota" in line
    assert line.endswith("to go on: add credit or quota to the account of the key in $REPLAY_KEY, or set another key")


def test_a_token_budget_over_the_context_says_to_lower_it(tmp_path):
    with ReplayServer("vllm-context") as srv:  # the recorded "cannot be greater than the model's maximum context length"
        code, line = run_eval(srv.base_url("vllm"), "vllm", tmp_path / "run", "--model", "Qwen/Qwen3-8B")
    assert code == 3, line
    assert "cannot be greater than the model's maximum context length (2048)" in line
    assert line.endswith("; to go on: lower --max-tokens (--judge-max-tokens for eval's judge) below the context "
                         "length, or serve the model with a longer context"), line


def test_a_spent_budget_says_to_raise_it_and_what_running_again_spends(tmp_path):
    with ReplayServer("openrouter-cost") as srv:  # usage.cost = 0.0125 on every answer
        code, line = run_eval(srv.base_url("openrouter"), "openrouter", tmp_path / "run",
                              "--model", "qwen/qwen3-235b-a22b-2507", "--max-cost", "0.02")
    assert code == 3, line
    assert line.startswith("stopped early (max_cost reached: budget of $0.0200 would be exceeded")
    assert line.endswith("; finished work is kept; to go on: raise --max-cost, or run again to spend up to $0.0200 "
                         "more (--max-cost caps each run's new spending)"), line


def test_a_budget_below_one_call_says_to_raise_it_above_that_call(tmp_path):
    with ReplayServer("openrouter-cost") as srv:  # the first call goes alone (no price), then holds $0.0125
        code, line = run_eval(srv.base_url("openrouter"), "openrouter", tmp_path / "run",
                              "--model", "qwen/qwen3-235b-a22b-2507", "--max-cost", "0.01")
    assert code == 3, line
    assert line.endswith("; to go on: raise --max-cost above $0.0125, what one call may cost"), line


def test_a_budget_that_an_answer_of_unknown_cost_cannot_hold_stops_as_a_stop_with_what_to_change(tmp_path):
    """OpenRouter's recorded answer with its ``usage.cost`` a string (not a usable cost) for a model with no price:
    the first answer is kept, the budget cannot be enforced and the run stops. Before: exit 2 ("refused before any
    request") with one ``error:`` line and no summary line, though a request was sent and its answer kept."""
    with ReplayServer("openrouter-cost", cost="0.0125") as srv:
        code, line = run_eval(srv.base_url("openrouter"), "openrouter", tmp_path / "run",
                              "--model", "z-ai/glm-4.6", "--max-cost", "1")
    assert code == 3, line
    assert line.startswith("stopped early (fatal: max_cost is set, model 'z-ai/glm-4.6' at "), line
    assert "has no price and it reported no cost for an answer, so the budget cannot be enforced): 1 of 3 items done" in line
    assert line.endswith("; finished work is kept; to go on: add its price to a CSV named by $CRESOWLVE_PRICES"), line


def test_a_judge_budget_on_a_judge_with_no_price_stops_after_the_answers_it_let_through(tmp_path):
    """The judge's price is first needed at its first call, after the model's answer was sent and kept. Before:
    exit 2 ("refused before any request") with one ``error:`` line; now the run's stop, exit 3, with what to change."""
    with ReplayServer() as srv:
        code, line = run_eval(srv.base_url("vllm"), "vllm", tmp_path / "run", "--model", "Qwen/Qwen3-8B",
                              "--judge-model", "Qwen/Qwen3-32B", "--judge-max-cost", "1")
    assert code == 3, line
    assert line.startswith("stopped early (fatal: max_cost is set but there is no price for model 'Qwen/Qwen3-32B' "), line
    assert "reports no cost): 1 of 3 items done, 0 errored, 2 not run" in line, line
    assert line.endswith("; to go on: add its price to prices.csv or a CSV named by $CRESOWLVE_PRICES"), line


def test_an_endpoint_that_looked_down_keeps_run_again_to_resume(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, line = run_eval(f"http://127.0.0.1:{port}/v1", "generic", tmp_path / "run", "--model", "m")
    assert code == 3, line
    assert "looks down (connection refused" in line and line.endswith(RESUME), line


def _grid(tmp_path: Path, limit: int, options: str, model: str, key: str) -> subprocess.CompletedProcess[str]:
    """``cresowlve grid`` (one worker) of one ``model`` (a YAML mapping) over ``limit`` demo items in
    English, with ``options`` added to the grid's, its key variable ``REPLAY_KEY`` set to ``key``."""
    config = tmp_path / "g.yaml"
    config.write_text(f"name: g\nitems: demo\nlangs: [en]\nlimit: {limit}\nreport: false\nruns_dir: {tmp_path / 'runs'}\n"
                      f"options: {{concurrency: 1, cache: false{options}}}\nmodels:\n  - {model}\n")
    env = dict(os.environ, REPLAY_KEY=key, PYTHONPATH=str(CODE))
    return subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", str(config), "--workers", "1"],
                          cwd=CODE, env=env, capture_output=True, text=True, timeout=120)


def test_a_grid_whose_cell_met_a_rejected_key_names_the_variable_to_set(tmp_path):
    with ReplayServer(api_key="the-right-key") as srv:
        proc = _grid(tmp_path, 2, "", f"{{model: gpt-4.1, base_url: '{srv.base_url('openai')}', provider: openai, "
                     "api_key_env: REPLAY_KEY}", "sk-wrong")
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 3, proc.stderr
    assert "HTTP 401: Incorrect API key provided" in line
    assert line.endswith("; finished work is kept; to go on: set a valid key in $REPLAY_KEY (gpt-4.1__en)"), line


def test_the_evaluation_report_stopped_by_a_rejected_key_exits_as_eval_does(tmp_path):
    """`cresowlve report 02_evaluation` over the recorded 401: the notebook's cell raised the stop, and the report
    "failed" (exit 1: "error: 02_evaluation failed: LLMFatalError: ..."), with no page and no remedy. It is
    rendered and exits 3 with eval's last line, as a report that calls a model exits as its stage would."""
    with ReplayServer(api_key="the-right-key") as srv:
        env = dict(os.environ, REPLAY_KEY="sk-wrong", PYTHONPATH=str(CODE), CRESOWLVE_REPORTS_DIR=str(tmp_path / "reports"))
        cmd = [sys.executable, "-m", "cresowlve_core.cli", "report", "02_evaluation", "-p", "model", "gpt-4.1",
               "-p", "base_url", srv.base_url("openai"), "-p", "provider", "openai", "-p", "api_key_env", "REPLAY_KEY",
               "-p", "run_dir", str(tmp_path / "run"), "-p", "limit", "3", "--name", "r"]
        proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=300)
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 3, proc.stderr
    assert (tmp_path / "reports" / "r.html").exists()
    assert line.startswith("stopped early (fatal: model 'gpt-4.1' at ") and "HTTP 401" in line
    assert line.endswith("0 of 3 items done, 0 errored, 3 not run; finished work is kept; to go on: set a valid key "
                         "in $REPLAY_KEY"), line


def test_a_grid_whose_cell_spent_its_budget_names_the_grids_setting_not_evals_flag(tmp_path):
    """A grid sets the budget as `options.max_cost` in its YAML: its last line said "raise --max-cost", a flag
    `cresowlve grid` does not take."""
    with ReplayServer("openrouter-cost") as srv:  # usage.cost = 0.0125 on every answer
        proc = _grid(tmp_path, 3, ", max_cost: 0.02", f"{{model: qwen/qwen3-235b-a22b-2507, base_url: "
                     f"'{srv.base_url('openrouter')}', provider: openrouter, api_key_env: REPLAY_KEY}}", "replay-test-key")
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 3, proc.stderr
    assert "--max-cost" not in line.rsplit("; finished work is kept", 1)[1]
    assert line.endswith("; finished work is kept; to go on: raise options.max_cost, or run again to spend up to "
                         "$0.0200 more (options.max_cost caps each run's new spending) "
                         f"({next(d for d in (tmp_path / 'runs').iterdir() if d.is_dir()).name})"), line
