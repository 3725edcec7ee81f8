"""``--judge-repeat``: the second verdict of each answer, against recorded provider replies (tests/replay).

The repeat is asked with the seed after the run's, so its judge prompt carries another nonce and hashes
differently from the first: the replay server's per-prompt fractions fail one call and not the other.
Of the demo items 1 to 3, the third one's second judge prompt is the one the fraction selects, in both
scenarios used here (its first verdict is given).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from replay.server import ReplayServer

from cresowlve_core import exitcodes
from cresowlve_core.evaluation.listing import run_row
from cresowlve_core.evaluation.runner import (
    EvalConfig,
    eval_stages,
    evaluate_async,
    load_eval_items,
    needs_judge,
    summary_line,
    with_repeat,
)

CHOICE_ERROR = "This model is currently experiencing high demand."


def repeat_config(srv: ReplayServer, run_dir: Path, provider: str = "openrouter",
                  judge_provider: str = "openrouter") -> EvalConfig:
    model = "openai/gpt-4o-mini" if provider == "openrouter" else "gpt-4o-mini"
    return EvalConfig(model=model, base_url=srv.base_url(provider), provider=provider, api_key_env="REPLAY_KEY",
                      judge_model=model, judge_base_url=srv.base_url(judge_provider), judge_provider=judge_provider,
                      judge_api_key_env="REPLAY_KEY", judge_repeat=True, run_dir=str(run_dir), items="demo",
                      concurrency=1, cache=False, backoff_base_s=0)


def run_three(srv: ReplayServer, run_dir: Path, **kw: str) -> dict:
    cfg = repeat_config(srv, run_dir, **kw)
    return asyncio.run(evaluate_async(cfg, load_eval_items(cfg)[1:4], progress=False)).summary


def latest(run_dir: Path) -> dict[str, dict]:
    recs = [json.loads(line) for line in (run_dir / "responses.jsonl").read_text().splitlines() if line.strip()]
    return {r["id"]: r for r in recs}


def judge_seeds(srv: ReplayServer) -> list[int]:
    return [e["body"].get("seed") for e in srv.requests() if "candidate_answer" in json.dumps(e["body"])]


def test_an_errored_second_verdict_is_counted_fails_the_exit_and_is_asked_again(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    run = tmp_path / "run"
    with ReplayServer("judge-choice-error") as srv:
        s = run_three(srv, run)
    errored = [r for r in latest(run).values() if r["extra"].get("judge_repeat_status") == "error"]
    assert len(errored) == 1 and errored[0]["judge_status"] == "scored"  # the first verdict is kept
    assert CHOICE_ERROR in errored[0]["extra"]["judge_repeat_raw"]
    assert (s["n_judge_repeat_owed"], s["n_judge_repeat_scored"], s["n_judge_repeat_error"]) == (3, 2, 1)
    assert CHOICE_ERROR in s["top_judge_repeat_error"][0]
    assert s["judge_cost"] is None  # a judge call errored: its cost is not known
    assert "repeat verdicts 2 of 3 (1 errored)" in summary_line(s)
    assert json.loads((run / "summary.json").read_text())["n_judge_repeat_error"] == 1
    assert exitcodes.report_exit({exitcodes.STAGES_RECORD: eval_stages(s)}) == exitcodes.EXIT_INCOMPLETE
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("incomplete: 1 errored, 0 not run of 3 repeat verdicts") and CHOICE_ERROR in last
    assert run_row(run).state == "incomplete (repeat verdicts: 1 errored, 0 not asked)"  # cresowlve list

    with ReplayServer() as srv:  # the provider answers again: resume asks the one second verdict only
        s = run_three(srv, run)
        seeds = judge_seeds(srv)
    assert seeds == [1]
    assert errored[0]["id"] in {k for k, r in latest(run).items() if r["extra"]["judge_repeat_status"] == "scored"}
    assert (s["n_judge_repeat_scored"], s["n_judge_repeat_error"]) == (3, 0)
    assert s["judge_cost"] is not None and s["judge_cost"] > 0
    assert exitcodes.report_exit({exitcodes.STAGES_RECORD: eval_stages(s)}) == exitcodes.EXIT_OK
    assert run_row(run).state == "done"


def test_a_second_verdict_the_judge_filtered_is_counted_unscored(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    with ReplayServer("content-filter") as srv:  # Azure's recorded content-filter 400 for half the prompts
        s = run_three(srv, tmp_path / "run", provider="openai", judge_provider="azure")
    filtered = [r for r in latest(tmp_path / "run").values() if r["extra"].get("judge_repeat_status") == "unscored"]
    assert len(filtered) == 1 and filtered[0]["extra"]["judge_repeat"] is None
    assert filtered[0]["extra"]["judge_repeat_outcome"] == "filtered"
    assert (s["n_judge_repeat_scored"], s["n_judge_repeat_unscored"], s["n_judge_repeat_error"]) == (2, 1, 0)
    assert "repeat verdicts 2 of 3 (1 unscored)" in summary_line(s)


def test_an_older_record_without_a_repeat_status_is_judged_again_only_without_a_verdict():
    first = {"status": "ok", "judge_status": "scored", "judge_verdict": "INCORRECT"}
    lost = {**first, "extra": {"judge_repeat": None, "judge_repeat_raw": "gave up after 6 attempts"}}
    given = {**first, "extra": {"judge_repeat": "CORRECT", "judge_repeat_raw": "VERDICT-X: CORRECT"}}
    assert needs_judge(lost, repeat=True) and not needs_judge(given, repeat=True)
    assert needs_judge(first, repeat=True) and not needs_judge(first)  # never asked: owed in a repeat run only
    edited = {**first, "extra": {"judge_repeat": "CORRECT", "judge_repeat_status": 5}}
    assert needs_judge(edited, repeat=True)  # a status outside the four: asked again, never left uncounted


def test_a_record_whose_extra_is_not_a_mapping_gets_its_second_verdict():
    """``extra`` edited by hand into a string: the second verdict is owed (none is recorded) and is stored
    in a fresh mapping. Before: AttributeError on resume."""
    rec = {"status": "ok", "judge_status": "scored", "judge_verdict": "INCORRECT", "judge_cost": 0.25,
           "extra": "hand-edited"}
    assert needs_judge(rec, repeat=True)
    again = {"judge_status": "scored", "judge_verdict": "INCORRECT", "judge_raw": "VERDICT-X: INCORRECT",
             "judge_outcome": "answer", "judge_cost": 0.25}
    out = with_repeat(rec, again)
    assert out["extra"]["judge_repeat_status"] == "scored" and out["judge_cost"] == 0.5
