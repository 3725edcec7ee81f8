"""``cresowlve eval --batch``: the same evaluation run, with the model under test answered
through the OpenAI Batch API (half price at OpenAI).

Every call takes the one next step that the run directory's ``batch.json`` calls for:

* **none**: submit every item without an answer (the run's manifest is written first, so a run
  directory of another configuration is refused before anything is paid for); with ``--max-cost``,
  only when the whole batch's bound fits it (every request at its ``max_tokens``, at the Batch
  API's price: a batch is paid for whole), else refused (exit 2) before anything is sent;
* **running**: report the status and the provider's counts;
* **ended** (``completed``, ``expired``, ``cancelled``, ``failed``): record every finished answer
  into ``responses.jsonl`` at once (the judge, if any, runs live), record per-request errors with
  the provider's message, then archive ``batch.json`` under ``batches/``, so that the next call
  submits only what is still missing;
* **unreadable**: refuse (exit 2) and name the two ways forward (see ``llm/batch.py``).

Exit codes (docs/reliability.md): 0 once every item has its answer; 1 while a batch is submitted
or running, or when some items errored or were not run (run again); 3 when the batch failed as a
whole or was refused for a reason a live run stops on (the provider's reason is the last line).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core.evaluation import roles
from cresowlve_core.evaluation.runner import (
    EvalConfig,
    build_manifest,
    evaluate_async,
    load_eval_items,
    reask_truncated,
    record_key,
    refuse_changed_items,
    summary_line,
)
from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_USAGE
from cresowlve_core.items import Item
from cresowlve_core.llm.batch import BatchRequest, BatchResult, archive_batch, collect_batch, read_state, submit_batch
from cresowlve_core.llm.client import call_bound
from cresowlve_core.llm.pricing import PRICES_ENV, PriceTable, cost_text, usd
from cresowlve_core.llm.types import Completion, LLMError
from cresowlve_core.runtime import RESPONSES, ResumeError, RunDir, run_coro


@dataclass
class BatchStep:
    """What one ``eval --batch`` call did: the line for stdout, and either the run's summary (the
    exit code and last line then follow ``stage_exit``) or an exit code with its last line."""

    line: str
    summary: dict[str, Any] | None = None
    code: int = EXIT_INCOMPLETE
    last: str | None = None


def batch_evaluate(cfg: EvalConfig, resolved: roles.Roles | None = None) -> BatchStep:
    """Submit, report or collect, as ``batch.json`` calls for (see the module docstring).
    ``resolved``: ``cfg``'s roles, when the caller resolved them already."""
    resolved = resolved or roles.resolve(cfg)
    items = load_eval_items(cfg)
    state = read_state(cfg.run_dir)  # an unreadable file stops here, before any request
    if state is None:
        return _submit(cfg, items, resolved)
    result = collect_batch(resolved.answerer.endpoint, cfg.run_dir)
    if result is None:
        fresh = read_state(cfg.run_dir) or state
        counts = fresh.get("request_counts") or {}
        done = f"{counts.get('completed', 0)} of {counts.get('total') or fresh.get('n', '?')} done at the provider"
        return BatchStep(f"batch {fresh['batch_id']} is {fresh.get('status')} ({done})",
                         last=f"incomplete: batch {fresh['batch_id']} is still {fresh.get('status')}; "
                              "run the same command again to collect it")
    return _record(cfg, items, result, resolved)


def _submit(cfg: EvalConfig, items: list[Item], resolved: roles.Roles) -> BatchStep:
    run = RunDir(cfg.run_dir)
    with run.lock():
        before = run.read_manifest()
        run.begin(build_manifest(cfg, len(items), resolved, items))  # refuses a run directory of another configuration
        previous = run.latest(RESPONSES, record_key)
        try:
            refuse_changed_items(run, previous, items, cfg.lang)
        except ResumeError:
            run.abandon(before)
            raise
        # without an answer, or (--retry-truncated) cut off at a smaller budget than this run's
        pending = [it for it in items if (prev := previous.get((it.id, cfg.lang)) or {}).get("status") != "ok"
                   or reask_truncated(cfg, prev)]
        if pending:
            answerer = resolved.answerer
            requests = [(it.id, answerer.messages(it.view(cfg.lang)), answerer.params) for it in pending]
            if (refused := _over_budget(cfg, answerer.endpoint.model, requests)) is not None:
                return BatchStep(f"not submitted: {len(pending)} of {len(items)} items", code=EXIT_USAGE,
                                 last=f"refused: {refused}; nothing was submitted")
            batch_id = submit_batch(answerer.endpoint, requests, cfg.run_dir)
    if not pending:
        outcome = run_coro(evaluate_async(cfg, items, completions={}, progress=False, resolved=resolved))
        return BatchStep("nothing to submit: every item already has an answer | " + summary_line(outcome.summary),
                         summary=outcome.summary)
    return BatchStep(f"submitted batch {batch_id} with {len(pending)} of {len(items)} items",
                     last=f"incomplete: batch {batch_id} submitted ({len(pending)} items, none answered yet); "
                          "run the same command again to collect it")


def _over_budget(cfg: EvalConfig, model: str, requests: list[BatchRequest]) -> str | None:
    """Why ``--max-cost`` forbids submitting ``requests`` as one batch (a batch is paid for whole, so
    its bound must fit: every request at its ``max_tokens``, at the Batch API's price), else None."""
    budget = cfg.options.max_cost
    if budget is None:
        return None
    prices = PriceTable.load()
    bounds = [call_bound(prices, model, messages, params, batch=True)[1] for _, messages, params in requests]
    if any(b is None for b in bounds):
        return (f"--max-cost is set but {model!r} has no price, so the batch's cost cannot be bounded: add it to a CSV "
                f"named by ${PRICES_ENV}")
    total = sum(b for b in bounds if b is not None)
    if total > budget:
        return (f"the batch of {len(requests)} requests may cost up to {usd(total)} at its --max-tokens, above "
                f"--max-cost {usd(budget)}: raise the budget, lower --max-tokens, or submit fewer items (--limit)")
    return None


def _record(cfg: EvalConfig, items: list[Item], result: BatchResult, resolved: roles.Roles) -> BatchStep:
    """Persist what an ended batch produced, then free the run directory for the next batch."""
    wanted = {it.id for it in items}
    completions: dict[str, Completion | LLMError] = {cid: c for cid, c in result.answers.items() if cid in wanted}
    completions.update({cid: LLMError(msg, outcome="failed" if cid in result.failed else "error")
                        for cid, msg in result.errors.items() if cid in wanted})
    stopped = f"batch {result.batch_id} {result.status}: {result.reason}" if result.reason else None
    outcome = run_coro(evaluate_async(cfg, items, completions=completions, stopped=stopped, progress=False,
                                      resolved=resolved))
    archived = archive_batch(cfg.run_dir)
    billed = ""
    if result.unusable:  # as a live run's summary line names them (runner.unusable_note)
        known = sum(c for c in result.unusable.values() if c is not None)
        n_unknown = sum(c is None for c in result.unusable.values())
        billed = (f" ({len(result.unusable)} billed with no text: "
                  f"{cost_text(known, n_unknown, len(result.unusable))}, not in cost)")
    kept = (f"batch {result.batch_id} {result.status}: {len(result.answers)} of {result.n_submitted} answers kept, "
            f"{len(result.errors)} errored{billed}, {len(result.not_run)} not run")
    if result.unknown:
        kept += f", {len(result.unknown)} line(s) for requests not in this batch ignored"
    if (result.errors or result.not_run) and not result.reason:
        kept += " (the next run submits only those)"
    where = f"; archived as {Path(archived).relative_to(cfg.run_dir)}" if archived else ""
    return BatchStep(f"{kept}{where} | " + summary_line(outcome.summary), summary=outcome.summary)
