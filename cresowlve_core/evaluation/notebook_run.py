"""The one call ``notebooks/02_evaluation.ipynb`` makes: configure, start the embedded model if no
endpoint is given, evaluate (resuming), and return what the notebook displays."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core.evaluation.records import ResponseRecord
from cresowlve_core.evaluation.runner import (
    EvalConfig,
    evaluate_async,
    load_eval_items,
    refuse_incompatible,
    summary_line,
)
from cresowlve_core.paths import runs_dir
from cresowlve_core.runtime import endpoint_or_embedded, run_coro
from cresowlve_core.text import slug


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
        with _planned_embedded() as (planned_model, planned_url):
            refuse_incompatible(config(items=items, lang=lang, model=planned_model, base_url=planned_url,
                                       run_dir=run_dir, **_local_judge(options, planned_model, planned_url)))
    with endpoint_or_embedded(model, base_url, api_key_env) as (endpoint, embedded):
        if embedded:
            options = _local_judge(options, endpoint.model, endpoint.base_url)
        cfg = config(items=items, lang=lang, model=endpoint.model, base_url=endpoint.base_url,
                     api_key_env=endpoint.api_key_env, run_dir=run_dir, **options)
        outcome = run_coro(evaluate_async(cfg, load_eval_items(cfg), progress=False))
    return NotebookRun(endpoint.model, outcome.run_dir, outcome.summary, summary_line(outcome.summary),
                       outcome.records, embedded)


def _local_judge(options: dict[str, Any], model: str, base_url: str) -> dict[str, Any]:
    """``options`` with ``judge_model="local"`` made the embedded model at ``base_url``."""
    if options.get("judge_model") != "local":
        return options
    return {**options, "judge_model": model, "judge_base_url": base_url}


@contextlib.contextmanager
def _planned_embedded() -> Iterator[tuple[str, str]]:
    """The embedded model's name and a base URL it will answer at (the resume rule ignores a loopback
    port), mapped to its ``embedded`` profile for the block as the running server maps its own."""
    from cresowlve_core.llm.local import DEFAULT_PORT, HOST, LOCAL_MODEL, PROFILE
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    before = os.environ.get(PROVIDERS_ENV)
    os.environ[PROVIDERS_ENV] = ",".join(filter(None, [before, f"{HOST}:{DEFAULT_PORT}={PROFILE}"]))
    try:
        yield LOCAL_MODEL, f"http://{HOST}:{DEFAULT_PORT}/v1"
    finally:
        if before is None:
            os.environ.pop(PROVIDERS_ENV, None)
        else:
            os.environ[PROVIDERS_ENV] = before
