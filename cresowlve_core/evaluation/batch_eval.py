"""``cresowlve eval --batch``: the same evaluation run, with the model under test answered
through the OpenAI Batch API (half price at OpenAI).

First call: submits every pending item and stores the batch id in the run directory
(``batch.json``). Later calls: report the status, and once the batch is complete score its
answers into ``responses.jsonl`` (the judge, if any, runs live), then archive ``batch.json`` so
that a further call can submit whatever is still missing (e.g. items that failed in the batch).
"""

from __future__ import annotations

from pathlib import Path

from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, load_eval_items, record_key, summary_line
from cresowlve_core.evaluation.solve import solve_messages, solve_prompt
from cresowlve_core.llm.batch import BATCH_FILE, collect_batch, submit_batch
from cresowlve_core.runtime import RESPONSES, RunDir, run_coro


def batch_evaluate(cfg: EvalConfig) -> str:
    """Submit or collect; returns a one-line status for the user."""
    items = load_eval_items(cfg)
    run = RunDir(cfg.run_dir)
    state_path = Path(cfg.run_dir) / BATCH_FILE
    if not state_path.exists():
        previous = run.latest(RESPONSES, record_key)
        pending = [it for it in items if (previous.get((it.id, cfg.lang)) or {}).get("status") != "ok"]
        if not pending:
            return "nothing to submit: every item already has an answer"
        prompt = solve_prompt(cfg.lang, cfg.thinking)
        requests = [(it.id, solve_messages(it.view(cfg.lang), prompt), cfg.gen_params()) for it in pending]
        batch_id = submit_batch(cfg.endpoint(), requests, cfg.run_dir)
        return f"submitted batch {batch_id} with {len(requests)} items; run the same command again to collect"
    results = collect_batch(cfg.endpoint(), cfg.run_dir)
    if results is None:
        return f"batch still running; status saved in {state_path}"
    outcome = run_coro(evaluate_async(cfg, items, completions=results))
    state_path.rename(state_path.with_name(f"batch_collected_{len(list(state_path.parent.glob('batch_collected_*')))}.json"))
    return f"collected {len(results)} answers | " + summary_line(outcome.summary)
