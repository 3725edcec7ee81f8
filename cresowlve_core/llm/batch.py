"""The OpenAI Batch API: submit many chat requests at half price, collect them later.

``submit_batch`` writes ``run_dir/batch_input.jsonl``, uploads it (``purpose="batch"``),
creates a batch on ``/v1/chat/completions`` with a 24 h window and records
``{batch_id, input_file_id, submitted_at, n, endpoint, model}`` in ``run_dir/batch.json``.
If ``batch.json`` already exists it returns the recorded id instead of submitting again
(delete the file to force a new batch), so re-running a notebook never pays twice.

``collect_batch`` returns ``None`` while the batch is still running (the status and request
counts are logged and stored in ``batch.json``), raises ``LLMError`` if the batch failed,
expired or was cancelled, and otherwise downloads the output to
``run_dir/batch_output.jsonl`` and returns ``{custom_id: Completion}``. Requests that failed
inside a finished batch are left out of the dict (and counted in ``batch.json`` under
``failed_ids``); the caller can re-run them. Costs use the table's ``batch_discount``.

Only the chat API is supported (``GenParams.effort`` must be unset and ``api`` chat/None).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import openai

from cresowlve_core.llm.openai_wire import BadResponse, build_request, parse_chat
from cresowlve_core.llm.pricing import PriceTable
from cresowlve_core.llm.types import (
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMError,
)

log = logging.getLogger(__name__)

BATCH_FILE = "batch.json"
INPUT_FILE = "batch_input.jsonl"
OUTPUT_FILE = "batch_output.jsonl"
FAILED_STATES = frozenset({"failed", "expired", "cancelled", "cancelling"})

BatchRequest = tuple[str, list[dict[str, Any]], GenParams]


def _client(endpoint: Endpoint) -> openai.OpenAI:
    return openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), max_retries=3, timeout=120.0)


def _request_body(endpoint: Endpoint, messages: list[dict[str, Any]], params: GenParams) -> dict[str, Any]:
    if params.resolved_api() != "chat":
        raise LLMConfigError("the Batch API path supports chat requests only (no effort, api='chat')")
    return build_request(endpoint.model, messages, params)[1]


def _read_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / BATCH_FILE
    if not path.exists():
        raise LLMConfigError(f"no {BATCH_FILE} in {run_dir}: submit a batch first")
    return json.loads(path.read_text(encoding="utf-8"))


def _write_state(run_dir: Path, state: dict[str, Any]) -> None:
    tmp = run_dir / (BATCH_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2, ensure_ascii=False), encoding="utf-8")
    tmp.replace(run_dir / BATCH_FILE)


def submit_batch(endpoint: Endpoint, requests: list[BatchRequest], run_dir: str | Path) -> str:
    """Submit ``(custom_id, messages, params)`` requests; returns the batch id (see module doc)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if (run_dir / BATCH_FILE).exists():
        state = _read_state(run_dir)
        log.warning("batch %s already submitted from %s; not submitting again", state["batch_id"], run_dir)
        return str(state["batch_id"])
    ids = [cid for cid, _, _ in requests]
    if len(set(ids)) != len(ids):
        raise ValueError("custom ids must be unique within a batch")
    if not requests:
        raise ValueError("no requests to submit")
    lines = [
        json.dumps(
            {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
             "body": _request_body(endpoint, messages, params)},
            ensure_ascii=False,
        )
        for cid, messages, params in requests
    ]
    input_path = run_dir / INPUT_FILE
    input_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    client = _client(endpoint)
    try:
        with input_path.open("rb") as fh:
            uploaded = client.files.create(file=(INPUT_FILE, fh), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    except openai.APIError as exc:
        raise LLMError(f"batch submission to {endpoint.describe()} failed: {type(exc).__name__}: {exc.message}") from None
    finally:
        client.close()
    state = {
        "batch_id": batch.id,
        "input_file_id": uploaded.id,
        "submitted_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "n": len(requests),
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "status": batch.status,
    }
    _write_state(run_dir, state)
    log.info("submitted batch %s (%d requests) to %s", batch.id, len(requests), endpoint.describe())
    return str(batch.id)


def _parse_output_line(line: dict[str, Any]) -> Completion | None:
    resp = line.get("response")
    if line.get("error") or not isinstance(resp, dict) or resp.get("status_code") != 200:
        return None
    body = resp.get("body")
    if not isinstance(body, dict):
        return None
    try:
        completion = parse_chat(body)
    except BadResponse:
        return None
    return completion if completion.text.strip() else None


def collect_batch(
    endpoint: Endpoint, run_dir: str | Path, *, prices: PriceTable | None = None
) -> dict[str, Completion] | None:
    """The finished batch's completions by custom id, or ``None`` while it is still running."""
    run_dir = Path(run_dir)
    state = _read_state(run_dir)
    prices = prices if prices is not None else PriceTable.load()
    client = _client(endpoint)
    try:
        batch = client.batches.retrieve(state["batch_id"])
        counts = batch.request_counts
        state.update(
            status=batch.status,
            checked_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            request_counts=counts.model_dump() if counts is not None else None,
        )
        _write_state(run_dir, state)
        if batch.status in FAILED_STATES:
            raise LLMError(f"batch {batch.id} at {endpoint.describe()} ended as {batch.status!r}: {batch.errors}")
        if batch.status != "completed":
            log.info("batch %s is %s (%s)", batch.id, batch.status, state["request_counts"])
            return None
        if not batch.output_file_id:
            raise LLMError(f"batch {batch.id} completed without an output file")
        content = client.files.content(batch.output_file_id).content
    except openai.APIError as exc:
        raise LLMError(f"batch collection from {endpoint.describe()} failed: {type(exc).__name__}: {exc.message}") from None
    finally:
        client.close()

    (run_dir / OUTPUT_FILE).write_bytes(content)
    results: dict[str, Completion] = {}
    for raw_line in content.decode("utf-8").splitlines():
        if not raw_line.strip():
            continue
        line = json.loads(raw_line)
        completion = _parse_output_line(line)
        if completion is None:
            continue
        completion.cost = prices.cost(endpoint.model, completion.usage, batch=True)
        if completion.cost is None and completion.model:
            completion.cost = prices.cost(completion.model, completion.usage, batch=True)
        results[str(line.get("custom_id"))] = completion
    submitted = _submitted_ids(run_dir)
    state["failed_ids"] = sorted(submitted - results.keys()) if submitted else []
    state["collected"] = len(results)
    _write_state(run_dir, state)
    return results


def _submitted_ids(run_dir: Path) -> set[str]:
    path = run_dir / INPUT_FILE
    if not path.exists():
        return set()
    return {json.loads(ln)["custom_id"] for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()}
