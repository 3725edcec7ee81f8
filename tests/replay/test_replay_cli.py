"""What a new user sees, run as a new user would: ``cresowlve eval`` in a subprocess
against the replay server (tests/replay/server.py), which answers with recorded provider bodies.

The base URLs are loopback, so the provider profile is named with ``--provider`` (a real URL's
host selects it by itself). Each run uses the shipped demo items, three at most.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from replay.server import ReplayServer

from cresowlve_core.evaluation.solve import solve_messages, solve_prompt
from cresowlve_core.sources.sample import load_items

REPO = Path(__file__).resolve().parents[2]
CODE = Path(os.environ.get("REPLAY_CODE", REPO))  # the checkout whose CLI is run (default: this one)
KEY = "replay-test-key"


def run_eval(srv: ReplayServer, provider: str, run_dir: Path, *args: str, limit: int = 3) -> tuple[int, str]:
    """``cresowlve eval`` on the demo items against ``provider``'s route; (exit code, output)."""
    env = dict(os.environ, REPLAY_KEY=KEY, PYTHONPATH=str(CODE))
    cmd = [sys.executable, "-m", "cresowlve_core.cli", "eval", "--items", "demo", "--limit", str(limit),
           "--base-url", srv.base_url(provider), "--api-key-env", "REPLAY_KEY", "--provider", provider,
           "--concurrency", "1", "--no-cache", "--run-dir", str(run_dir), *args]
    proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def last_line(output: str) -> str:
    return [line for line in output.splitlines() if line.strip()][-1]


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The run's records, one per item in first-written order, each as last written (a judge
    verdict is appended as a newer record of its item)."""
    latest: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "responses.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            latest[rec["id"]] = rec
    return list(latest.values())


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def demo_prompt_words(n: int) -> list[int]:
    """Words of the first ``n`` demo solve prompts, counted as the replay server counts them."""
    prompt = solve_prompt("en", thinking=False)
    return [len(solve_messages(item.view("en"), prompt)[0]["content"].split()) for item in load_items("demo", "en")[:n]]


def test_gemini_with_effort_minimal_completes(tmp_path):
    with ReplayServer() as srv:
        code, out = run_eval(srv, "gemini", tmp_path / "run", "--model", "gemini-3-flash-preview", "--effort", "minimal")
        sent = srv.requests("gemini")
    assert code == 0, out
    assert [r["status"] for r in records(tmp_path / "run")] == ["ok"] * 3
    assert {e["api"] for e in sent} == {"/chat/completions"} and {e["status"] for e in sent} == {200}
    assert all("seed" not in e["body"] and e["body"].get("reasoning_effort") == "minimal" for e in sent)


def test_a_burst_of_six_list_wrapped_429s_is_ridden_out(tmp_path):
    with ReplayServer("gemini-burst") as srv:  # the recorded 429 six times (Retry-After: 0 keeps the test fast)
        code, out = run_eval(srv, "gemini", tmp_path / "run", "--model", "gemini-3-flash-preview", limit=1)
        statuses = [e["status"] for e in srv.requests("gemini")]
    assert code == 0, out
    assert statuses == [429] * 6 + [200]
    assert records(tmp_path / "run")[0]["status"] == "ok"
    assert "looks down" not in out


def test_a_list_wrapped_400_shows_its_inner_message(tmp_path):
    with ReplayServer() as srv:
        code, out = run_eval(srv, "gemini", tmp_path / "run", "--model", "gemini-3-flash-preview",
                             "--extra-body", '{"top_k": 40}')
    assert code == 3, out
    line = last_line(out)
    assert 'Invalid JSON payload received. Unknown name "top_k": Cannot find field.' in line
    assert '"error"' not in line and "fieldViolations" not in line  # the inner message, not the raw list


def test_openrouter_cost_is_the_sum_of_reported_usage_cost_and_max_cost_stops_on_it(tmp_path):
    model = "qwen/qwen3-235b-a22b-2507"
    with ReplayServer("openrouter-cost") as srv:  # usage.cost = 0.0125 on every answer
        code, out = run_eval(srv, "openrouter", tmp_path / "full", "--model", model)
        reported = [e["cost"] for e in srv.requests("openrouter")]
    assert code == 0, out
    assert len(reported) == 3
    assert summary(tmp_path / "full")["cost"] == pytest.approx(sum(reported))
    assert [r["cost"] for r in records(tmp_path / "full")] == pytest.approx(reported)
    assert all(r["thoughts"] for r in records(tmp_path / "full"))  # OpenRouter's message.reasoning is kept

    with ReplayServer("openrouter-cost") as srv:
        code, out = run_eval(srv, "openrouter", tmp_path / "capped", "--model", model, "--max-cost", "0.02")
        reported = [e["cost"] for e in srv.requests("openrouter")]
    assert code == 3, out
    assert "max-cost" in last_line(out) or "max_cost" in last_line(out)
    done = [r for r in records(tmp_path / "capped") if r["status"] == "ok"]
    assert 1 <= len(done) < 3
    assert summary(tmp_path / "capped")["cost"] == pytest.approx(sum(reported))


def test_a_reported_cost_above_the_price_table_raises_what_later_calls_hold(tmp_path):
    """gpt-5-mini is priced: a call asking for 4,096 tokens holds $0.0083 of the budget, but OpenRouter
    reports $0.0125 (its recorded usage is more tokens than asked for). The first call goes alone;
    from its answer on each call holds its bound times 1.5, so nine at once send three calls
    ($0.0375) within $0.045, where the bound alone would have let four go out ($0.05)."""
    with ReplayServer("openrouter-cost") as srv:
        code, out = run_eval(srv, "openrouter", tmp_path / "run", "--model", "openai/gpt-5-mini", "--max-cost", "0.045",
                             "--concurrency", "9", limit=9)
        reported = [e["cost"] for e in srv.requests("openrouter")]
    assert code == 3, out
    assert len(reported) == 3 and sum(reported) <= 0.045
    assert "each later call holds its bound times 1.51" in out and "OVER BUDGET" not in out
    spent = summary(tmp_path / "run")["spent_now"]["model"]
    assert spent["max_cost"] == 0.045 and spent["over_budget"] == 0
    assert f"| {len(reported)} item(s) run" in out  # the calls the budget refused did not run


def test_with_no_price_the_first_call_goes_alone_and_the_rest_hold_its_reported_cost(tmp_path):
    """An unpriced model on a provider that reports costs: one call until a cost is known ($0.0125),
    then each holds it, so a $0.03 budget sends two calls, not nine at once."""
    with ReplayServer("openrouter-cost") as srv:
        code, out = run_eval(srv, "openrouter", tmp_path / "run", "--model", "vendor/unpriced-model",
                             "--max-cost", "0.03", "--concurrency", "9", limit=9)
        reported = [e["cost"] for e in srv.requests("openrouter")]
    assert code == 3, out
    assert len(reported) == 2 and sum(reported) <= 0.03
    assert "has no price in prices.csv" in out and "OVER BUDGET" not in out


@pytest.mark.parametrize(("model", "extra"), [("gpt-4.1", ()), ("gpt-5-mini", ("--effort", "low"))],
                         ids=["chat-length", "responses-incomplete"])
def test_truncated_answers_are_counted_and_flagged(tmp_path, model, extra):
    with ReplayServer("truncate") as srv:  # half the items (by prompt hash) are cut off by the token limit
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", model, *extra, limit=6)
        sent = srv.requests("openai")
    assert code == 0, out
    assert {e["api"] for e in sent} == {"/responses" if extra else "/chat/completions"}
    cut = [e["truncated"] for e in sent]
    recs = records(tmp_path / "run")
    assert 0 < sum(cut) < len(cut)
    assert [r["truncated"] for r in recs] == cut  # one request per item, in order (concurrency 1)
    assert summary(tmp_path / "run")["n_truncated"] == sum(cut)
    assert all(r["em_lenient"] is False for r in recs if r["truncated"])
    assert "--max-tokens" in out  # above 2% truncated: the warning names the option


def test_a_gpt5_mini_judge_scores_every_item(tmp_path):
    items = load_items("demo", "en")[:3]
    answers = {item.view("en").question.strip()[:60]: item.view("en").answer for item in items[:2]}
    with ReplayServer(answers=answers) as srv:
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1", "--judge-model", "gpt-5-mini")
        judge_calls = [e for e in srv.requests("openai") if e["body"].get("model") == "gpt-5-mini"]
    assert code == 0, out
    assert len(judge_calls) == 3 and {e["status"] for e in judge_calls} == {200}
    recs = records(tmp_path / "run")
    assert [r["judge_verdict"] for r in recs] == ["CORRECT", "CORRECT", "INCORRECT"]
    s = summary(tmp_path / "run")
    assert (s["n_judged"], s["n_unscored"], s["n_judge_error"]) == (3, 0, 0)


def test_llamacpp_context_overflow_is_a_per_item_error(tmp_path):
    words = demo_prompt_words(3)
    limit = sorted(words)[1]  # the longest prompt overflows, the others fit
    with ReplayServer(context_limit=limit) as srv:
        code, out = run_eval(srv, "llama-cpp", tmp_path / "run", "--model", "qwen3-8b")
    assert code == 1, out
    recs = records(tmp_path / "run")
    assert [r["status"] for r in recs] == ["error" if w > limit else "ok" for w in words]
    failed = next(r for r in recs if r["status"] == "error")
    assert f"exceeds the available context size ({limit} tokens)" in failed["error"]


def test_insufficient_quota_stops_at_once(tmp_path):
    with ReplayServer("quota") as srv:
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1")
        n_requests = len(srv.requests("openai"))
    assert code == 3, out
    assert n_requests == 1  # not retried, and no other item sent
    assert "You exceeded your current quota" in last_line(out)


def test_retry_truncated_reasks_only_the_cut_answers_with_a_larger_budget(tmp_path):
    # answers are cut off while the token limit is below 1000 (half the items, by prompt hash)
    with ReplayServer(truncate_fraction=0.5, truncate_below=1000) as srv:
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1", "--max-tokens", "200", limit=6)
        assert code == 0, out
        n_cut = summary(tmp_path / "run")["n_truncated"]
        cut_cost = {r["id"]: r["cost"] for r in records(tmp_path / "run") if r["truncated"]}
        first = len(srv.log)
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1", "--max-tokens", "2000",
                             "--retry-truncated", limit=6)
        again = srv.log[first:]
    assert code == 0, out
    assert 0 < n_cut < 6
    assert len(again) == n_cut and not any(e["truncated"] for e in again)
    assert {e["body"].get("max_completion_tokens", e["body"].get("max_tokens")) for e in again} == {2000}
    assert summary(tmp_path / "run")["n_truncated"] == 0
    assert not any(r["truncated"] for r in records(tmp_path / "run"))
    # the cut-off answers were paid for: the run's cost keeps the answers it has, and names the ones replaced
    replaced = {r["id"]: r for r in records(tmp_path / "run") if r["n_replaced"]}
    assert set(replaced) == set(cut_cost) and all(r["n_replaced"] == 1 for r in replaced.values())
    assert all(replaced[i]["replaced_cost"] == pytest.approx(c) for i, c in cut_cost.items())
    s = summary(tmp_path / "run")
    assert s["n_replaced"] == n_cut and s["replaced_cost"] == pytest.approx(sum(cut_cost.values())) and s["replaced_cost"] > 0
    assert (f"| {n_cut} answer(s) replaced by answers asked again (--retry-truncated): "
            f"${s['replaced_cost']:.4f} spent on them, not in cost") in out, out


def test_the_analysis_cost_table_names_what_the_replaced_answers_cost(tmp_path):
    """Two runs whose cut-off answers were asked again with --retry-truncated: a priced model (OpenAI's recorded
    usage, the price table) and an unpriced one (vLLM's recorded usage, no price), and a third run as a version
    before replaced_cost wrote it (the fields removed). 03_analysis's cost table names what the replaced answers
    cost beside the costs, unknown where there is no price, nothing for the older run. Before: no column; that
    money was in no total."""
    from cresowlve_core.analysis.loading import load_runs
    from cresowlve_core.analysis.reliability import cost_display, cost_table

    runs = {"priced": ("openai", "gpt-4.1"), "unpriced": ("vllm", "my-unpriced"), "older": ("openai", "gpt-4o")}
    with ReplayServer(truncate_fraction=0.5, truncate_below=1000) as srv:
        for name, (provider, model) in runs.items():
            for budget in (("--max-tokens", "200"), ("--max-tokens", "2000", "--retry-truncated")):
                code, out = run_eval(srv, provider, tmp_path / name, "--model", model, *budget, limit=6)
                assert code == 0, out
    replaced = summary(tmp_path / "priced")
    assert replaced["n_replaced"] > 0 and replaced["replaced_cost"] > 0
    older = tmp_path / "older" / "responses.jsonl"
    fields = ("n_replaced", "n_verdicts_replaced", "replaced_cost")
    older.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k not in fields}) + "\n"
                             for line in older.read_text().splitlines()))
    rs = load_runs([str(tmp_path / name) for name in runs])
    shown = cost_display(cost_table(rs.responses, rs.runs)).set_index("config")["spent, not in cost"]
    n_cut = summary(tmp_path / "unpriced")["n_replaced"]
    assert shown.to_dict() == {
        "gpt-4.1": f"${replaced['replaced_cost']:.4f} ({replaced['n_replaced']} answer(s) replaced by --retry-truncated)",
        "my-unpriced": f"unknown ({n_cut} answer(s) replaced by --retry-truncated)",
        "gpt-4o": "–"}


def run_rescore(run_dir: Path) -> tuple[int, str]:
    """``cresowlve rescore`` of ``run_dir``; (exit code, output)."""
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run_dir)], cwd=CODE,
                          env=dict(os.environ, PYTHONPATH=str(CODE)), capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_judge_verdicts_withdrawn_by_rescore_keep_their_cost_when_the_judge_is_asked_again(tmp_path):
    """A judged run (OpenRouter's reported usage.cost, a second verdict each) whose first record's raw
    output now extracts another candidate and whose second is now a refusal: rescore withdraws both
    verdicts, and the next eval asks the judge again about the first. The withdrawn verdicts were paid
    for: the run's judge cost and the replaced cost add up to what the judge was paid, and both lines
    name them. Before: their cost vanished from every total, and summary.json counted nothing replaced."""
    run = tmp_path / "run"
    args = ("--model", "openai/gpt-5-mini", "--judge-model", "openai/gpt-5-mini", "--judge-repeat")
    with ReplayServer("openrouter-cost") as srv:  # usage.cost = 0.0125 on every answer and verdict
        code, out = run_eval(srv, "openrouter", run, *args)
        assert code == 0, out
        judged = records(run)
        first, second = judged[0]["id"], judged[1]["id"]
        edited = [{**judged[0], "raw_output": "<Answer>Copernicus</Answer>"}, {**judged[1], "outcome": "refused"}]
        with (run / "responses.jsonl").open("a") as f:  # the latest record of an item is the one read
            f.write("".join(json.dumps(r) + "\n" for r in edited))
        code, rescored = run_rescore(run)
        assert code == 1, rescored
        s = summary(run)
        assert (s["judge_cost"], s["n_verdicts_replaced"], s["replaced_cost"]) == pytest.approx((0.025, 2, 0.05))
        assert "| 2 paid judge verdict(s) withdrawn by rescore: $0.0500 spent on them, not in judge cost" in rescored
        code, out = run_eval(srv, "openrouter", run, *args)
        judge_paid = [e["cost"] for e in srv.requests("openrouter") if "candidate_answer" in json.dumps(e["body"])]
    assert code == 0, out
    assert len(judge_paid) == 8 and sum(judge_paid) == pytest.approx(0.1)  # 3 answers × 2 verdicts, then 2 again
    s = summary(run)
    assert s["judge_cost"] + s["replaced_cost"] == pytest.approx(sum(judge_paid))
    recs = {r["id"]: r for r in records(run)}
    assert (recs[first]["n_verdicts_replaced"], recs[first]["replaced_cost"]) == (1, pytest.approx(0.025))
    assert (recs[second]["judge_status"], recs[second]["judge_cost"]) == ("not_an_answer", None)
    assert "| 2 paid judge verdict(s) withdrawn by rescore: $0.0500 spent on them, not in judge cost" in out, out
    code, again = run_rescore(run)  # a rescore of the rescored run withdraws nothing more
    assert summary(run)["replaced_cost"] == pytest.approx(0.05), again
    # the judge has answered again: nothing is left withdrawn (before: exit 1, "1 judge verdict(s) withdrawn", forever)
    assert (code, summary(run)["n_verdicts_withdrawn"]) == (0, 0), again


def test_runs_names_what_the_withdrawn_verdicts_cost_beside_the_costs(tmp_path):
    """A judged run (OpenRouter's reported usage.cost, $0.0125 each) whose first answer now extracts another
    candidate: rescore withdraws its paid verdict, and ``cresowlve runs`` says what it cost beside the run's costs,
    which no longer count it. Before: the row showed "$0.0375 reported (judge $0.0250)" and nothing else, the
    $0.0125 in no total."""
    run = tmp_path / "run"
    with ReplayServer("openrouter-cost") as srv:
        code, out = run_eval(srv, "openrouter", run, "--model", "openai/gpt-5-mini", "--judge-model", "openai/gpt-5-mini")
    assert code == 0, out
    first = records(run)[0]
    with (run / "responses.jsonl").open("a") as f:
        f.write(json.dumps({**first, "raw_output": "<Answer>Copernicus</Answer>"}) + "\n")
    code, rescored = run_rescore(run)
    assert code == 1, rescored
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "runs", str(run)], cwd=CODE,
                          env=dict(os.environ, PYTHONPATH=str(CODE)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = [line for line in proc.stdout.splitlines() if str(run) in line][0]
    assert ("$0.0375 reported (judge $0.0250) + $0.0125 spent on 1 verdict(s) withdrawn by rescore, not in cost"
            in row), row


@pytest.mark.parametrize("rescored_again", [True, False], ids=["rescore-then-eval", "eval"])
def test_a_verdict_an_older_rescore_withdrew_keeps_its_cost(tmp_path, rescored_again):
    """A run rescored by a version that withdrew a verdict but left its judge cost on the record (judge_status
    not_run, judge_cost $0.0125, as its rescore wrote it), then rescored by this one, or evaluated again at
    once: the cost is moved to replaced_cost and the judge's totals add up to what it was paid. Before:
    the cost stayed where no total counts it, and the new verdict's cost replaced it."""
    run = tmp_path / "run"
    args = ("--model", "openai/gpt-5-mini", "--judge-model", "openai/gpt-5-mini")
    with ReplayServer("openrouter-cost") as srv:  # usage.cost = 0.0125 on every answer and verdict
        code, out = run_eval(srv, "openrouter", run, *args)
        assert code == 0, out
        judged = records(run)[0]
        withdrawn = {**judged, "raw_output": "<Answer>Copernicus</Answer>", "prediction": "Copernicus",
                     "judge_status": "not_run", "judge_verdict": None, "judge_raw": None,
                     "extra": {"verdict_withdrawn_by_rescore": {"judge_status": "scored", "judge_verdict": "INCORRECT",
                                                                "why": "the judge was shown another candidate answer "
                                                                       "than the rescored one"}}}
        with (run / "responses.jsonl").open("a") as f:
            f.write(json.dumps(withdrawn) + "\n")
        if rescored_again:
            code, rescored = run_rescore(run)
            assert code == 1 and summary(run)["replaced_cost"] == pytest.approx(0.0125), rescored
        code, out = run_eval(srv, "openrouter", run, *args)
        judge_paid = [e["cost"] for e in srv.requests("openrouter") if "candidate_answer" in json.dumps(e["body"])]
    assert code == 0, out
    s = summary(run)
    assert len(judge_paid) == 4 and s["judge_cost"] + s["replaced_cost"] == pytest.approx(sum(judge_paid))
    assert "| 1 paid judge verdict(s) withdrawn by rescore: $0.0125 spent on them, not in judge cost" in out, out


def test_azure_sends_the_key_in_api_key_and_a_content_filter_is_filtered_once(tmp_path):
    with ReplayServer(content_filter_fraction=0.5) as srv:  # half the prompts (by hash) hit the recorded filter 400
        code, out = run_eval(srv, "azure", tmp_path / "run", "--model", "gpt-4o", limit=6)
        sent = srv.requests("azure")
    filtered = [e["rule"] == "content filter (scenario)" for e in sent]
    assert 0 < sum(filtered) < len(sent)
    assert len(sent) == 6  # one request per item: the provider's filter is its final word, never re-asked
    assert code == 0, out
    assert all(e["headers"].get("api-key") == "<redacted>" and "authorization" not in e["headers"] for e in sent)
    recs = records(tmp_path / "run")
    assert all(r["em_lenient"] is False for r, f in zip(recs, filtered) if f)


def test_vllm_effort_goes_as_the_template_switch_and_reasoning_content_is_kept(tmp_path):
    with ReplayServer() as srv:
        code, out = run_eval(srv, "vllm", tmp_path / "run", "--model", "Qwen/Qwen3-8B", "--effort", "high")
        sent = srv.requests("vllm")
    assert code == 0, out
    assert all(e["body"]["chat_template_kwargs"] == {"enable_thinking": True} for e in sent)
    assert all("reasoning_effort" not in e["body"] for e in sent)
    assert all(r["thoughts"].startswith("Replay reasoning") for r in records(tmp_path / "run"))


# --------------------------------------------------------------------------- every reply is an outcome


def test_a_refusal_costs_one_request_and_shows_as_refused(tmp_path):
    with ReplayServer("refusal") as srv:  # half the solve prompts get OpenAI's recorded refusal
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1", limit=6)
        sent = srv.requests("openai")
    refusals = sum(e["rule"] == "refusal (scenario)" for e in sent)
    assert code == 0, out
    assert 0 < refusals < 6 and len(sent) == 6  # one request per item: a refusal is never re-asked
    line = next(ln for ln in out.splitlines() if ln.startswith("n="))  # the summary line (stdout)
    assert f"ok=6 ({refusals} refused)" in line
    recs = records(tmp_path / "run")
    assert sum(r["outcome"] == "refused" for r in recs) == refusals
    assert all(r["refusal"] == "I'm sorry, but I can't assist with that request." and r["em_lenient"] is False
               for r in recs if r["outcome"] == "refused")
    assert summary(tmp_path / "run")["n_refused"] == refusals


def test_a_filtered_partial_answer_is_never_scored_correct(tmp_path):
    items = load_items("demo", "en")[:6]
    answers = {item.view("en").question.strip()[:60]: item.view("en").answer for item in items}
    with ReplayServer("filtered", answers=answers) as srv:  # every other answer is the reference itself
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-5-mini", "--effort", "low",
                             "--judge-model", "gpt-4.1", limit=6)
        solve = [e for e in srv.requests("openai", "/responses")]
    filtered = sum(e["rule"] == "incomplete: content_filter (scenario)" for e in solve)
    assert code == 0, out
    assert 0 < filtered < 6 and len(solve) == 6
    recs = records(tmp_path / "run")
    cut = [r for r in recs if r["outcome"] == "filtered"]
    assert len(cut) == filtered and all(r["raw_output"] == "The first part of the answer is" for r in cut)
    assert all(r["em_lenient"] is False and r["judge_verdict"] != "CORRECT" for r in cut)
    assert all(r["judge_verdict"] == "CORRECT" for r in recs if r["outcome"] == "answer")


def test_a_chat_answer_its_filter_stopped_without_usage_leaves_the_total_a_lower_bound(tmp_path):
    """Azure's recorded finish_reason content_filter body carries no usage: those answers' cost is
    unknown, so the line gives the known part as a lower bound with the count, never a plain total."""
    with ReplayServer("filtered") as srv:
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4o", limit=6)
    recs = records(tmp_path / "run")
    unknown = [r for r in recs if r["cost"] is None]
    assert code == 0, out
    assert unknown and all(r["outcome"] == "filtered" for r in unknown) and len(unknown) < len(recs)
    known = sum(r["cost"] for r in recs if r["cost"] is not None)
    s = summary(tmp_path / "run")
    assert s["cost"] is None and s["n_cost_unknown"] == len(unknown) and s["cost_known"] == pytest.approx(known)
    assert f"cost ≥ ${known:.4f} ({len(unknown)} of {len(recs)} unknown)" in out
    from cresowlve_core.evaluation.listing import run_row

    assert f" ≥ ${known:.4f} " in run_row(tmp_path / "run").line()  # `cresowlve runs` too


def test_a_failed_response_shows_the_providers_reason(tmp_path):
    with ReplayServer(failed_fraction=1.0) as srv:
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-5-mini", "--effort", "low", limit=1)
        sent = srv.requests("openai")
    assert code == 1, out
    assert len(sent) == 6  # retried like a 5xx
    (rec,) = records(tmp_path / "run")
    assert rec["status"] == "error" and rec["outcome"] == "failed"
    assert "The model produced invalid content." in rec["error"] and "response has empty text" not in rec["error"]


def test_an_error_on_the_choice_inside_a_200_is_the_items_failure_never_an_answer(tmp_path):
    """OpenRouter's finish_reason "error" with the upstream's error on the choice: retried like the
    502 it names, then that item's error (outcome failed), never an empty or partial answer scored wrong."""
    with ReplayServer(choice_error_fraction=1.0) as srv:
        code, out = run_eval(srv, "openrouter", tmp_path / "run", "--model", "google/gemini-2.5-flash", limit=1)
        sent = srv.requests("openrouter")
    assert code == 1, out
    assert len(sent) == 6 and {e["rule"] for e in sent} == {"finish_reason error on the choice (scenario)"}
    (rec,) = records(tmp_path / "run")
    assert rec["status"] == "error" and rec["outcome"] == "failed"
    assert "an error on the answer inside HTTP 200 (502): This model is currently experiencing high demand." in rec["error"]
    assert summary(tmp_path / "run")["metrics"]["em_strict"]["n"] == 0  # not in any accuracy's n
    assert "This model is currently experiencing high demand." in last_line(out)  # the provider's words, not cut


def test_openrouter_200_carrying_402_stops_at_once(tmp_path):
    with ReplayServer("credits") as srv:
        code, out = run_eval(srv, "openrouter", tmp_path / "run", "--model", "qwen/qwen3-235b-a22b-2507")
        n_requests = len(srv.requests("openrouter"))
    assert code == 3, out
    assert n_requests == 1  # not retried, no other item sent
    assert "Insufficient credits. This account never purchased credits." in last_line(out)


def test_a_judge_named_by_a_deployment_that_refuses_temperature_judges_every_item(tmp_path):
    with ReplayServer("deployment") as srv:  # my-gpt5-deployment is a reasoning model the name does not reveal
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1", "--judge-model",
                             "my-gpt5-deployment")
        judge = [e for e in srv.requests("openai") if e["body"].get("model") == "my-gpt5-deployment"]
    assert code == 0, out
    assert [e["status"] for e in judge] == [400, 200, 200, 200]  # refused once, then every call without it
    assert "temperature" in judge[0]["body"] and all("temperature" not in e["body"] for e in judge[1:])
    s = summary(tmp_path / "run")
    assert (s["n_judged"], s["n_judge_error"]) == (3, 0)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    adapted = manifest["judge"]["adapted"]
    assert [(a["field"], a["action"]) for a in adapted] == [("temperature", "drop")]
    assert adapted[0]["reason"].startswith("Unsupported value: 'temperature' does not support 0")
    assert manifest["adapted"] == []  # the model under test was never refused
    assert "refused 'temperature'" in out


def test_vllm_max_tokens_over_the_context_stops_after_the_first_answer(tmp_path):
    with ReplayServer("vllm-context") as srv:  # a 2048-token context; the default budget is 4096
        code, out = run_eval(srv, "vllm", tmp_path / "run", "--model", "Qwen/Qwen3-8B")
        n_requests = len(srv.requests("vllm"))
    assert code == 3, out
    assert n_requests == 1
    line = last_line(out)
    assert "cannot be greater than the model's maximum context length (2048)" in line and "--max-tokens" in line


def test_a_429_with_reset_headers_is_waited_out(tmp_path):
    with ReplayServer("reset-headers") as srv:  # two TPM 429s, x-ratelimit-reset-tokens: 0.3s
        code, out = run_eval(srv, "openai", tmp_path / "run", "--model", "gpt-4.1", limit=1)
        statuses = [e["status"] for e in srv.requests("openai")]
    assert code == 0, out
    assert statuses == [429, 429, 200]


@pytest.mark.parametrize(("scenario", "provider", "args"), [
    ("refusal", "openai", ("--model", "gpt-4.1")),
    ("filtered", "openai", ("--model", "gpt-5-mini", "--effort", "low", "--judge-model", "gpt-4.1")),
    ("credits", "openrouter", ("--model", "qwen/qwen3-235b-a22b-2507")),
])
def test_http_workers_give_the_same_run_as_the_runs_own_loop(tmp_path, scenario, provider, args):
    """``--http-workers 2`` moves only the HTTP exchanges: the same requests, records and exit code."""
    runs = {}
    for workers in ("0", "2"):
        with ReplayServer(scenario) as srv:
            code, out = run_eval(srv, provider, tmp_path / workers, *args, "--http-workers", workers, limit=6)
            sent = [(e["path"], e["rule"]) for e in srv.requests(provider)]
            out = out.replace(srv.base_url(provider), "<base url>")  # each server has its own port
        assert (tmp_path / workers / "manifest.json").exists(), out
        written = (tmp_path / workers / "responses.jsonl").exists()  # the 402 stops before any record
        recs = [{k: v for k, v in r.items() if k != "latency_s"} for r in (records(tmp_path / workers) if written else [])]
        said = [ln for ln in out.splitlines() if ln.startswith(("n=", "stopped", "incomplete"))]
        runs[workers] = (code, said, sent, recs)
    assert runs["2"] == runs["0"]
    assert runs["0"][1] and runs["0"][2], "nothing to compare"
    assert bool(runs["0"][3]) == (scenario != "credits")
    manifest = json.loads((tmp_path / "2" / "manifest.json").read_text())
    assert manifest["options"]["http_workers"] == 2


def test_a_temperature_the_requests_do_not_carry_is_never_the_runs_label(tmp_path):
    """A reasoning model gets no temperature (its profile), and a deployment that refuses one gets it
    dropped (adapted): the runs table then says "provider default", not the temperature asked for,
    and a --temperature given for such a model is named as not sent before the run."""
    from cresowlve_core.analysis.loading import PROVIDER_DEFAULT, load_runs

    with ReplayServer() as srv:
        code, out = run_eval(srv, "openai", tmp_path / "gpt5", "--model", "gpt-5-mini", "--temperature", "0.7", limit=1)
        code4, out4 = run_eval(srv, "openai", tmp_path / "gpt4o", "--model", "gpt-4o", "--temperature", "0.7", limit=1)
        bodies = {e["body"]["model"]: e["body"] for e in srv.requests("openai")}
    assert (code, code4) == (0, 0), out + out4
    assert "temperature" not in bodies["gpt-5-mini"] and bodies["gpt-4o"]["temperature"] == 0.7
    assert "warning: --temperature 0.7 is not sent to gpt-5-mini (gpt-5-mini is a reasoning model on openai" in out
    assert "is not sent" not in out4
    with ReplayServer("deployment") as srv:  # refuses temperature by name: dropped after the first 400
        code, out = run_eval(srv, "openai", tmp_path / "deployment", "--model", "my-gpt5-deployment", limit=2)
    assert code == 0, out
    temps = load_runs(str(tmp_path / "*")).runs.set_index("run_id")["temperature"].to_dict()
    assert temps == {"gpt5": PROVIDER_DEFAULT, "gpt4o": 0.7, "deployment": PROVIDER_DEFAULT}


def test_a_seed_the_requests_do_not_carry_is_never_the_runs_label(tmp_path, monkeypatch):
    """Gemini's profile sends no seed (its endpoint refuses the field): a run with --seed 7 there has no seed in
    its runs table row and "not sent" in the report's seeds line, as a temperature that is not sent is the
    provider's default. Before: seed 7 in both, for requests that carried none."""
    import pandas as pd

    from cresowlve_core.analysis import report
    from cresowlve_core.analysis.loading import load_runs

    with ReplayServer() as srv:
        code, out = run_eval(srv, "gemini", tmp_path / "gemini", "--model", "gemini-2.5-flash", "--seed", "7", limit=1)
        code4, out4 = run_eval(srv, "openai", tmp_path / "gpt4o", "--model", "gpt-4o", "--seed", "7", limit=1)
        bodies = {e["body"]["model"]: e["body"] for p in ("gemini", "openai") for e in srv.requests(p)}
    assert (code, code4) == (0, 0), out + out4
    assert "seed" not in bodies["gemini-2.5-flash"] and bodies["gpt-4o"]["seed"] == 7
    rs = load_runs(str(tmp_path / "*"))
    seeds = rs.runs.set_index("run_id")["seed"].to_dict()
    assert seeds["gpt4o"] == 7 and pd.isna(seeds["gemini"]), seeds
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    assert report.seeds_section(rs, seed=0)["runs"]["gemini"]["seed"] is None
    assert "run seeds: 7, not sent." in said[-1]


def test_a_resume_asks_without_the_fields_the_run_dropped_before(tmp_path):
    """A run whose deployment refused 'temperature' (the recorded 400; dropped: the run is at the provider's
    default), resumed at another base URL that accepts it: the resume asks without it too, so every answer
    of the run is at the provider's default its manifest says. Before: the resume sent temperature 0.5, and
    3 answers at 0.5 joined 3 at the default under the label "provider default"."""
    run = tmp_path / "run"
    with ReplayServer("deployment", reasoning_aliases=("gpt-4o-mini",)) as refusing, ReplayServer() as accepting:
        code, out = run_eval(refusing, "openai", run, "--model", "gpt-4o-mini", "--temperature", "0.5", limit=3)
        code2, out2 = run_eval(accepting, "openai", run, "--model", "gpt-4o-mini", "--temperature", "0.5", limit=6)
        resumed = [e["body"] for e in accepting.requests("openai")]
    assert (code, code2) == (0, 0), out + out2
    assert len(resumed) == 3 and all("temperature" not in b for b in resumed), resumed
    assert [r["dropped_fields"] for r in records(run)] == [["temperature"]] * 6
    assert "two settings" not in out2


def test_a_resume_whose_endpoint_refuses_a_field_the_run_sent_says_the_run_mixes_two_settings(tmp_path):
    """The reverse: a run at temperature 0.5, resumed where the deployment refuses it (the recorded 400: dropped
    for the rest). Each record says which answers were asked without it, summary.json counts them and the
    summary line warns. Before: nothing in the records or the summary told the 3 answers at 0.5 from the 3 at
    the provider's default, and the manifest's 'adapted' labelled all 6 "provider default"."""
    run = tmp_path / "run"
    with ReplayServer() as accepting, ReplayServer("deployment", reasoning_aliases=("gpt-4o-mini",)) as refusing:
        code, out = run_eval(accepting, "openai", run, "--model", "gpt-4o-mini", "--temperature", "0.5", limit=3)
        code2, out2 = run_eval(refusing, "openai", run, "--model", "gpt-4o-mini", "--temperature", "0.5", limit=6)
    assert (code, code2) == (0, 0), out + out2
    assert [r["dropped_fields"] for r in records(run)] == [[]] * 3 + [["temperature"]] * 3
    assert summary(run)["dropped_answers"] == {"temperature": 3} and summary(run)["n_dropped_known"] == 6
    assert ("WARNING: 3 of 6 answers were asked without 'temperature' (the provider refused it), the others with "
            "it: two settings in one run") in out2
    from cresowlve_core.analysis.loading import load_runs

    notes = load_runs(str(run)).notes
    assert ("`run`: 3 of 6 answers were asked without `temperature` (the provider refused it), the others with it: "
            "two settings in one run.") in notes, notes


def test_rescoring_a_run_an_older_version_began_keeps_its_unrecorded_request_fields_unknown(tmp_path):
    """A run whose deployment refused 'temperature' for every answer: its first 3 records written by a version
    that did not record ``dropped_fields`` (the key removed, as that version wrote them), the next 3 by this one.
    A rescore keeps the first 3 unknown, so nothing says the run mixes two settings. Before: the rescored
    records said ``"dropped_fields": []`` (asked with temperature 0.5), n_dropped_known became 6 and the line
    warned "3 of 6 answers were asked without 'temperature' ..., the others with it: two settings in one run",
    although the manifest's 'adapted' says every answer went without it."""
    run = tmp_path / "run"
    with ReplayServer("deployment", reasoning_aliases=("gpt-4o-mini",)) as refusing:
        code, out = run_eval(refusing, "openai", run, "--model", "gpt-4o-mini", "--temperature", "0.5", limit=3)
        lines = [json.loads(line) for line in (run / "responses.jsonl").read_text().splitlines()]
        (run / "responses.jsonl").write_text("".join(json.dumps({k: v for k, v in rec.items() if k != "dropped_fields"})
                                                     + "\n" for rec in lines))
        code2, out2 = run_eval(refusing, "openai", run, "--model", "gpt-4o-mini", "--temperature", "0.5", limit=6)
    proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "rescore", "--run-dir", str(run)], cwd=CODE,
                          env=dict(os.environ, PYTHONPATH=str(CODE)), capture_output=True, text=True, timeout=120)
    assert (code, code2, proc.returncode) == (0, 0, 0), out + out2 + proc.stdout + proc.stderr
    assert [r["dropped_fields"] for r in records(run)] == [None] * 3 + [["temperature"]] * 3
    assert summary(run)["dropped_answers"] == {"temperature": 3} and summary(run)["n_dropped_known"] == 3
    assert "two settings" not in proc.stdout + proc.stderr


def test_create_generate_names_the_papers_temperature_a_reasoning_model_is_not_sent(tmp_path):
    env = dict(os.environ, REPLAY_KEY=KEY, PYTHONPATH=str(CODE), CRESOWLVE_CACHE_DIR=str(tmp_path / "cache"))
    outs = {}
    with ReplayServer() as srv:
        for model in ("gpt-5-mini", "gpt-4o"):
            cmd = [sys.executable, "-m", "cresowlve_core.cli", "create", "generate", "--model", model, "--limit", "1",
                   "--base-url", srv.base_url("openai"), "--api-key-env", "REPLAY_KEY", "--provider", "openai",
                   "--no-cache", "--run-dir", str(tmp_path / model)]
            proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=120)
            outs[model] = proc.stderr
        bodies = {e["body"]["model"]: e["body"] for e in srv.requests("openai")}
    assert "temperature" not in bodies["gpt-5-mini"] and bodies["gpt-4o"]["temperature"] == 0.7
    assert "warning: temperature 0.7 is not sent to gpt-5-mini (gpt-5-mini is a reasoning model on openai" in outs["gpt-5-mini"]
    assert "is not sent" not in outs["gpt-4o"]
    sent = {m: json.loads((tmp_path / m / "manifest.json").read_text())["sent"] for m in outs}
    assert "temperature" not in sent["gpt-5-mini"] and sent["gpt-4o"]["temperature"] == 0.7


def test_a_reasoning_model_asked_with_no_effort_is_named_as_reasoning_though_labelled_non_thinking(tmp_path, monkeypatch):
    """gpt-5-mini with no --effort reasons at its default (the recorded body has reasoning tokens):
    the summary line and the analysis's runs section say so; gpt-4o's line does not."""
    from cresowlve_core.analysis import load_runs, report

    with ReplayServer() as srv:
        code5, out5 = run_eval(srv, "openai", tmp_path / "runs" / "gpt5", "--model", "gpt-5-mini", limit=2)
        code4, out4 = run_eval(srv, "openai", tmp_path / "runs" / "gpt4o", "--model", "gpt-4o", limit=2)
    assert (code5, code4) == (0, 0), out5 + out4
    assert "WARNING: labelled non-thinking, but 2/2 answers show reasoning: the model reasoned anyway" in out5
    assert "labelled non-thinking" not in out4
    assert summary(tmp_path / "runs" / "gpt5")["n_unlabelled_reasoning"] == 2
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda obj: None)
    report.runs_section(load_runs(str(tmp_path / "runs" / "*")))
    notes = [s for s in said if "Thinking not declared" in s]
    assert len(notes) == 1 and "`gpt-5-mini`" in notes[0] and "2 of 2 answers" in notes[0]


def test_a_run_at_effort_none_whose_model_reasoned_is_named_in_the_analysis(tmp_path, monkeypatch):
    """gpt-5-mini at --effort none (filed as a thinking run; the recorded Responses body has reasoning): its
    eval line warns, and the analysis's runs section names it with its n, never as "thinking not verified".
    Before: the runs section read the count only for runs filed non-thinking, and said nothing."""
    from cresowlve_core.analysis import load_runs, report

    with ReplayServer() as srv:
        code, out = run_eval(srv, "openai", tmp_path / "runs" / "none", "--model", "gpt-5-mini", "--effort", "none",
                             limit=2)
    assert code == 0, out
    assert "WARNING: labelled effort none, but 2/2 answers show reasoning" in out
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda obj: None)
    rs = load_runs(str(tmp_path / "runs" / "*"))
    assert bool(rs.runs["thinking"].iloc[0]) and rs.runs["n_no_reasoning"].isna().all()
    report.runs_section(rs)
    notes = [s for s in said if "show reasoning" in s or "Thinking not" in s]
    assert len(notes) == 1 and notes[0].startswith("- **Reasoning at effort none** for `gpt-5-mini (none)` (en)")
    assert "2 of 2 answers (refused and filtered ones included) show reasoning" in notes[0]


def test_the_evaluation_report_continues_a_run_made_with_provider_when_given_that_provider(tmp_path, monkeypatch):
    """A loopback server selects no profile by itself: a run made with ``--provider openai`` is
    reported by ``02_evaluation`` with ``-p provider openai`` as the same configuration, nothing sent
    again; without it the report refuses, naming the provider, as an input error (exit 2, as ``eval``'s refusal
    of another configuration), and the run is left as it was."""
    from cresowlve_core.notebooks import NotebookInputError, run_notebook

    monkeypatch.setenv("REPLAY_KEY", KEY)
    run = tmp_path / "run"
    with ReplayServer() as srv:
        code, out = run_eval(srv, "openai", run, "--model", "gpt-4o", "--max-tokens", "384")
        assert code == 0, out
        sent = len(srv.requests("openai"))
        params = {"model": "gpt-4o", "base_url": srv.base_url("openai"), "api_key_env": "REPLAY_KEY",
                  "run_dir": str(run), "limit": 3}
        with pytest.raises(NotebookInputError, match="ResumeError: .*provider: 'openai' → 'generic'"):
            run_notebook("02_evaluation", params, tmp_path / "reports")
        result = run_notebook("02_evaluation", {**params, "provider": "openai"}, tmp_path / "reports")
        assert len(srv.requests("openai")) == sent == 3
    assert result.html.exists() and "n=3 ok=3" in result.html.read_text(encoding="utf-8")


def test_contamination_stops_at_its_budget_before_a_call_it_cannot_afford(tmp_path):
    """``contamination run --max-cost`` caps each step as a build's steps are capped: a budget below
    one perturbation call's bound (gpt-4o's price) sends nothing, skips the later steps and exits 3
    with the budget in the last line."""
    env = dict(os.environ, REPLAY_KEY=KEY, PYTHONPATH=str(CODE))
    with ReplayServer() as srv:
        for lang in ("en", "ru"):
            code, out = run_eval(srv, "openai", tmp_path / "runs" / f"gpt-4o__{lang}", "--model", "gpt-4o",
                                 "--lang", lang)
            assert code == 0, out
        evaluated = len(srv.requests("openai"))
        roles = []
        for role in ("perturber", "quiz"):
            roles += [f"--{role}-model", "gpt-4o", f"--{role}-base-url", srv.base_url("openai"),
                      f"--{role}-api-key-env", "REPLAY_KEY"]
        cmd = [sys.executable, "-m", "cresowlve_core.cli", "contamination", "run", "--runs", str(tmp_path / "runs" / "*"),
               "--out-dir", str(tmp_path / "contamination"), *roles, "--max-cost", "0.0001", "--no-cache"]
        proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=120)
        sent = len(srv.requests("openai")) - evaluated
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert sent == 0
    assert last_line(out).startswith("stopped early (perturbation: max_cost reached: budget of $0.0001 would be exceeded")


def test_an_answer_holding_a_lone_surrogate_is_kept_flagged_and_scored(tmp_path):
    """Before: ``UnicodeEncodeError: ... surrogates not allowed`` from the record writer, a traceback,
    exit 1 and a run directory with a manifest and no record."""
    with ReplayServer("lone-surrogate", lone_surrogate_fraction=1.0) as srv:
        code, out = run_eval(srv, "ollama", tmp_path / "run", "--model", "qwen3:0.6b")
        rules = {e["rule"] for e in srv.requests("ollama")}
    assert code == 0, out
    assert rules == {"an answer ending in a lone surrogate (scenario)"}
    recs = records(tmp_path / "run")
    assert [(r["status"], r["outcome"], r["invalid_utf8"]) for r in recs] == [("ok", "answer", True)] * 3
    assert all(r["raw_output"].endswith("</Answer>\ufffd") and r["prediction"].startswith("replay-") for r in recs)
    assert "lone UTF-16 surrogate" in out and "Traceback" not in out


def test_vllms_flat_error_inside_a_200_is_classified_by_its_code(tmp_path):
    """A proxy in front of vLLM passes its flat ``{"object": "error", ..., "code": 400}`` on with HTTP 200.
    Before: "response has no choices", the overflowing item sent 6 times and its reason lost."""
    words = demo_prompt_words(3)
    limit = sorted(words)[1]  # the longest prompt overflows, the others fit
    with ReplayServer("vllm-proxy-200", context_limit=limit) as srv:
        code, out = run_eval(srv, "vllm", tmp_path / "run", "--model", "Qwen/Qwen3-8B", "--max-tokens", "20")
        rules = [e["rule"] for e in srv.requests("vllm")]
    assert code == 1, out
    assert rules.count("context length inside HTTP 200, a proxy in front (scenario)") == 1 and len(rules) == 3
    recs = records(tmp_path / "run")
    assert [r["status"] for r in recs] == ["error" if w > limit else "ok" for w in words]
    failed = next(r for r in recs if r["status"] == "error")
    assert f"an error inside HTTP 200 (400): This model's maximum context length is {limit} tokens." in failed["error"]


def test_the_evaluation_report_exits_as_eval_would_when_its_items_errored(tmp_path):
    """``cresowlve report 02_evaluation`` runs (or continues) an evaluation: with every item refused by
    llama.cpp's recorded context overflow it rendered and exited 0; now it exits 1 with eval's last
    line, and 0 once a server that answers lets the same command finish the run."""
    def report(srv: ReplayServer) -> tuple[int, str]:
        env = dict(os.environ, REPLAY_KEY=KEY, PYTHONPATH=str(CODE), CRESOWLVE_REPORTS_DIR=str(tmp_path / "reports"))
        cmd = [sys.executable, "-m", "cresowlve_core.cli", "report", "02_evaluation", "-p", "model", "qwen3",
               "-p", "base_url", srv.base_url("llama-cpp"), "-p", "provider", "llama-cpp", "-p", "api_key_env",
               "REPLAY_KEY", "-p", "run_dir", str(tmp_path / "run"), "-p", "limit", "3", "--name", "r"]
        proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout + proc.stderr

    with ReplayServer("llamacpp-overflow", context_limit=5) as srv:
        code, out = report(srv)
    assert code == 1, out
    assert (tmp_path / "reports" / "r.html").exists()  # the report is written, and says what it holds
    assert last_line(out).startswith("incomplete: 3 errored, 0 not run of 3 items; most common error")
    assert "exceeds the available context size" in last_line(out)
    with ReplayServer() as srv:
        code, out = report(srv)
        assert len(srv.requests("llama-cpp")) == 3  # the errored items, asked again
    assert code == 0, out


def test_answers_the_judge_errored_on_are_work_left_and_the_next_run_judges_only_them(tmp_path):
    """The judge (llama.cpp with a smaller context than its prompts) answers every judge prompt with its
    recorded context overflow: the answers are kept, but no verdict was given, so the run is not done
    (exit 1, the last line naming the judge's error); the next run, with a judge whose context fits,
    sends only the judge's calls and exits 0. Before: exit 0, the summary line silent about the errors."""
    limit = max(demo_prompt_words(3))  # every solve prompt fits; the longer judge prompts do not
    with ReplayServer("llamacpp-overflow", context_limit=limit) as srv:
        code, out = run_eval(srv, "llama-cpp", tmp_path / "run", "--model", "qwen3-8b", "--judge-model", "qwen3-8b")
        judge_calls = [e for e in srv.requests("llama-cpp") if "candidate_answer" in json.dumps(e["body"])]
    assert code == 1, out
    assert len(judge_calls) == 3 and {e["status"] for e in judge_calls} == {400}
    assert [(r["status"], r["judge_status"]) for r in records(tmp_path / "run")] == [("ok", "error")] * 3
    assert "judge errors 3" in next(ln for ln in out.splitlines() if ln.startswith("n="))
    last = last_line(out)
    assert last.startswith("incomplete: 3 errored, 0 not run of 3 judge verdicts"), last
    assert "exceeds the available context size" in last
    with ReplayServer() as srv:
        code, out = run_eval(srv, "llama-cpp", tmp_path / "run", "--model", "qwen3-8b", "--judge-model", "qwen3-8b")
        sent = srv.requests("llama-cpp")
    assert code == 0, out
    assert len(sent) == 3 and all("candidate_answer" in json.dumps(e["body"]) for e in sent)  # the judge only
    assert summary(tmp_path / "run")["n_judged"] == 3


def test_gemini_thinking_run_counts_its_hidden_thinking_as_reasoning(tmp_path):
    """The recorded Gemini reply counts 28 thinking tokens in total_tokens only: a thinking run's answers
    show that reasoning (no 'answers show no reasoning' warning) and pay for it as output."""
    with ReplayServer() as srv:
        code, out = run_eval(srv, "gemini", tmp_path / "run", "--model", "gemini-3-flash-preview", "--effort", "low")
    assert code == 0, out
    s = summary(tmp_path / "run")
    assert (s["output_tokens"], s["reasoning_tokens"], s["n_no_reasoning"]) == (3 * 34, 3 * 28, 0)
    assert "show no reasoning" not in last_line(out)
