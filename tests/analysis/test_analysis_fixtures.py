"""Helpers shared by the analysis tests: write small, hand-made run directories.

(Named ``test_*`` only so it sits among the files owned by the analysis tests; it has no tests.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def record(
    id: str,
    lang: str = "en",
    *,
    model: str = "m",
    effort: str | None = None,
    status: str = "ok",
    difficulty: int | None = 3,
    reasoning_type: str | None = "creative",
    em_strict: bool | None = False,
    em_lenient: bool | None = False,
    judge: str | None = None,
    judge_status: str | None = None,
    **extra_fields: Any,
) -> dict[str, Any]:
    """One ResponseRecord-shaped dict; ``judge="CORRECT"/"INCORRECT"`` marks it scored."""
    rec: dict[str, Any] = {
        "id": id,
        "lang": lang,
        "status": status,
        "model": model,
        "effort": effort,
        "difficulty": difficulty,
        "reasoning_type": reasoning_type,
        "knowledge_domains": [],
        "creative_domains": [],
        "cultures": [],
        "n_atomic_facts": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, "reasoning_tokens": None},
        "cost": None,
        "cached": False,
        "em_strict": em_strict,
        "em_lenient": em_lenient,
        "judge_status": judge_status or ("scored" if judge else "not_run"),
        "judge_verdict": judge,
        "synthetic": False,
        "extra": {},
    }
    rec.update(extra_fields)
    return rec


def write_run(
    path: Path,
    records: list[dict[str, Any]],
    *,
    model: str = "m",
    effort: str | None = None,
    lang: str = "en",
    thinking: bool = False,
    manifest: bool = True,
    **manifest_fields: Any,
) -> Path:
    """A run directory with ``manifest.json`` (unless ``manifest=False``) and ``responses.jsonl``."""
    path.mkdir(parents=True, exist_ok=True)
    if manifest:
        m = {
            "run_id": path.name,
            "model": model,
            "base_url": "http://x",
            "effort": effort,
            "thinking": thinking,
            "lang": lang,
            "items": "test",
            "n_items": len(records),
            "finished_at": "2026-01-01T00:00:00",  # pass finished_at=None for a run that never finished
            **manifest_fields,
        }
        (path / "manifest.json").write_text(json.dumps(m))
    with (path / "responses.jsonl").open("w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return path
