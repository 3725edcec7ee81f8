"""Batch API against the fake server: submit, poll, collect, no double submission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeserver import FakeServer

from cresowlve_core.llm.batch import collect_batch, submit_batch
from cresowlve_core.llm.pricing import ModelPrice, PriceTable
from cresowlve_core.llm.types import Endpoint, GenParams, LLMConfigError

PRICES = PriceTable({"batch-model": ModelPrice(1_000_000.0, 1_000_000.0, batch_discount=0.5)})


def reqs(n: int) -> list[tuple[str, list[dict[str, str]], GenParams]]:
    return [(f"item-{i}", [{"role": "user", "content": f"question {i}"}], GenParams(max_tokens=50)) for i in range(n)]


def test_submit_poll_collect(tmp_path: Path) -> None:
    with FakeServer(batch_polls=1, batch_fail_ids=["item-2"]) as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        bid = submit_batch(ep, reqs(4), tmp_path)
        state = json.loads((tmp_path / "batch.json").read_text())
        assert state["batch_id"] == bid and state["n"] == 4
        assert state["input_file_id"].startswith("file-") and state["submitted_at"]
        lines = [json.loads(x) for x in (tmp_path / "batch_input.jsonl").read_text().splitlines()]
        assert lines[0]["url"] == "/v1/chat/completions" and lines[0]["body"]["max_tokens"] == 50
        assert srv.total == 0  # nothing is answered before the batch runs

        assert collect_batch(ep, tmp_path, prices=PRICES) is None  # still in progress
        assert json.loads((tmp_path / "batch.json").read_text())["status"] == "in_progress"

        out = collect_batch(ep, tmp_path, prices=PRICES)
    assert out is not None and sorted(out) == ["item-0", "item-1", "item-3"]
    c = out["item-1"]
    assert c.text == "echo: question 1"
    assert (c.usage.input_tokens, c.usage.output_tokens) == (2, 3)
    assert c.cost == pytest.approx((2 + 3) * 0.5)  # half price
    final = json.loads((tmp_path / "batch.json").read_text())
    assert final["status"] == "completed" and final["failed_ids"] == ["item-2"]
    assert (tmp_path / "batch_output.jsonl").exists()


def test_resubmission_returns_the_recorded_batch(tmp_path: Path) -> None:
    with FakeServer() as srv:
        ep = Endpoint(srv.base_url, "batch-model")
        first = submit_batch(ep, reqs(2), tmp_path)
        again = submit_batch(ep, reqs(2), tmp_path)
        assert first == again and len(srv._batches) == 1


def test_only_chat_requests_and_unique_ids(tmp_path: Path) -> None:
    ep = Endpoint("http://127.0.0.1:1/v1", "batch-model")
    with pytest.raises(LLMConfigError):
        submit_batch(ep, [("a", [{"role": "user", "content": "x"}], GenParams(effort="low"))], tmp_path / "r1")
    with pytest.raises(ValueError, match="unique"):
        submit_batch(ep, reqs(1) + reqs(1), tmp_path / "r2")
    with pytest.raises(LLMConfigError, match="submit a batch first"):
        collect_batch(ep, tmp_path / "nothing")
