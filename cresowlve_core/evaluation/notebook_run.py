"""The one call ``notebooks/02_evaluation.ipynb`` makes: configure, start the embedded model if no
endpoint is given, evaluate (resuming), and return what the notebook displays."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core.evaluation.records import ResponseRecord
from cresowlve_core.evaluation.runner import (
    EvalConfig,
    EvalOutcome,
    eval_stages,
    evaluate_async,
    load_eval_items,
    refuse_incompatible,
    summary_line,
)
from cresowlve_core.exitcodes import STAGES_RECORD
from cresowlve_core.items import Item
from cresowlve_core.llm.types import LLMFatalError
from cresowlve_core.notebook_records import record
from cresowlve_core.paths import runs_dir
from cresowlve_core.runtime import SUMMARY, endpoint_or_embedded, planned_endpoint, run_coro, stop_reason
from cresowlve_core.text import slug
from cresowlve_core.untrusted import one_line


@dataclass
class NotebookRun:
    model: str
    run_dir: Path
    summary: dict[str, Any]
    line: str
    records: list[ResponseRecord]
    embedded: bool  # built on the embedded 270M base model: the report shows the banner


def config(*, items: str, lang: str, model: str, base_url: str, run_dir: str | None = None,
           api_key_env: str | None = None, **options: Any) -> EvalConfig:
    """The :class:`EvalConfig` the notebook runs with these parameters (``None`` options take the
    config's defaults). The main job builds its resume check with this very function."""
    run_dir = run_dir or str(runs_dir() / "notebook" / f"{slug(model)}__{lang}")
    return EvalConfig(model=model, base_url=base_url, api_key_env=api_key_env, run_dir=run_dir, items=items,
                      lang=lang,  # type: ignore[arg-type]
                      **{k: v for k, v in options.items() if v is not None})


def run(*, items: str, lang: str, model: str | None, base_url: str | None, run_dir: str | None = None,
        api_key_env: str | None = None, **options: Any) -> NotebookRun:
    """Evaluate into ``run_dir`` (default ``data/runs/notebook/MODEL__LANG``). With ``base_url``
    None the embedded model answers, and ``judge_model="local"`` makes it the judge too."""
    if model is None and base_url is None:  # another configuration in run_dir is refused before the server starts
        with planned_endpoint(None, None) as (planned, _):
            refuse_incompatible(config(items=items, lang=lang, model=planned.model, base_url=planned.base_url,
                                       run_dir=run_dir, **_local_judge(options, planned.model, planned.base_url)))
    with endpoint_or_embedded(model, base_url, api_key_env) as (endpoint, embedded):
        if embedded:
            options = _local_judge(options, endpoint.model, endpoint.base_url)
        cfg = config(items=items, lang=lang, model=endpoint.model, base_url=endpoint.base_url,
                     api_key_env=endpoint.api_key_env, run_dir=run_dir, **options)
        to_run = load_eval_items(cfg)
        try:
            outcome = run_coro(evaluate_async(cfg, to_run, progress=False))
        except LLMFatalError as exc:  # a wrong key, model or effort stopped the run: as eval, from its summary
            if (stopped := stopped_outcome(cfg, to_run, exc)) is None:
                raise
            outcome = stopped
    # what `cresowlve eval` would exit with: `cresowlve report 02_evaluation` exits the same
    record(STAGES_RECORD, eval_stages(outcome.summary))
    return NotebookRun(endpoint.model, outcome.run_dir, outcome.summary, summary_line(outcome.summary),
                       outcome.records, embedded)


def stopped_outcome(cfg: EvalConfig, items: list[Item], exc: LLMFatalError) -> EvalOutcome | None:
    """The outcome of a run ``exc`` stopped (:func:`evaluate_async` raises it once the run's summary is
    written), as ``cresowlve eval`` reads it: its summary, stopped by ``exc`` with what to change, and the
    records it finished; None when there is no summary (the stop came before the run began)."""
    path = Path(cfg.run_dir) / SUMMARY
    if not path.exists():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary["stopped"] = summary.get("stopped") or one_line(stop_reason(exc))
    outcome = EvalOutcome(run_dir=Path(cfg.run_dir), summary=summary, stopped=summary["stopped"])
    outcome._keys = [(it.id, cfg.lang) for it in items]
    return outcome


def _local_judge(options: dict[str, Any], model: str, base_url: str) -> dict[str, Any]:
    """``options`` with ``judge_model="local"`` made the embedded model at ``base_url``."""
    if options.get("judge_model") != "local":
        return options
    return {**options, "judge_model": model, "judge_base_url": base_url}
