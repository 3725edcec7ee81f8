"""The one call ``notebooks/02_evaluation.ipynb`` makes: configure, start the local model if no
endpoint is given, evaluate (resuming), and return what the notebook displays."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core.evaluation.records import ResponseRecord
from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async, summary_line
from cresowlve_core.text import slug
from cresowlve_core.paths import RUNS_DIR


@dataclass
class NotebookRun:
    model: str
    run_dir: Path
    summary: dict[str, Any]
    line: str
    records: list[ResponseRecord]


def run(*, items: str, lang: str, model: str | None, base_url: str | None, run_dir: str | None = None,
        **options: Any) -> NotebookRun:
    from cresowlve_core.sources.sample import load_items

    with contextlib.ExitStack() as stack:
        if base_url is None:
            from cresowlve_core.llm.local import local_server

            srv = stack.enter_context(local_server())
            base_url, model = srv.base_url, srv.model
            if options.get("judge_model") == "local":
                options["judge_model"], options["judge_base_url"] = srv.model, srv.base_url
        if model is None:
            raise ValueError("model is required when base_url is given")
        run_dir = run_dir or str(RUNS_DIR / "notebook" / f"{slug(model)}__{lang}")
        cfg = EvalConfig(model=model, base_url=base_url, run_dir=run_dir, items=items, lang=lang,  # type: ignore[arg-type]
                         **{k: v for k, v in options.items() if v is not None})
        item_list = load_items(items, lang)  # type: ignore[arg-type]
        if cfg.limit is not None:
            item_list = item_list[: cfg.limit]
        outcome = _run_sync(evaluate_async(cfg, item_list, progress=False))
    return NotebookRun(model, outcome.run_dir, outcome.summary, summary_line(outcome.summary), outcome.records)


def _run_sync(coro: Any) -> Any:
    """Run a coroutine from a notebook cell, where an event loop may already be running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
