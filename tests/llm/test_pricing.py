"""PriceTable and CostMeter: the bundled table, overrides, unknown models, budgets."""

from __future__ import annotations

from pathlib import Path

import pytest

from cresowlve_core.llm.pricing import CostMeter, ModelPrice, PriceTable
from cresowlve_core.llm.types import BudgetExceeded, Usage

U = Usage(input_tokens=1_000_000, output_tokens=500_000, reasoning_tokens=200_000)


def test_bundled_table_has_the_expected_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRESOWLVE_PRICES", raising=False)
    table = PriceTable.load()
    for model in ("gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-5", "gpt-5-mini", "gemma3-270m"):
        assert table.get(model) is not None, model
    assert table.get("gpt-4.1") == ModelPrice(2.0, 8.0, 0.5)
    # reasoning tokens are already inside output_tokens: billed once, as output
    assert table.cost("gpt-4.1", U) == pytest.approx(2.0 + 0.5 * 8.0)
    assert table.cost("gpt-4.1", U, batch=True) == pytest.approx((2.0 + 4.0) / 2)
    assert table.cost("gemma3-270m", U) == 0.0


def test_unknown_model_costs_none_never_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRESOWLVE_PRICES", raising=False)
    table = PriceTable.load()
    assert table.cost("my-local-llama", U) is None
    assert table.max_cost("my-local-llama", 10, 10) is None


def test_dated_snapshots_match_but_no_other_fuzzy_matching() -> None:
    table = PriceTable({"gpt-4.1": ModelPrice(2.0, 8.0)})
    assert table.get("gpt-4.1-2025-04-14") == ModelPrice(2.0, 8.0)
    assert table.get("gpt-4.1-mini") is None and table.get("gpt-4.1-mini-2025-04-14") is None


def test_missing_token_counts_make_cost_unknown_except_for_free_models() -> None:
    table = PriceTable({"paid": ModelPrice(1.0, 1.0), "free": ModelPrice(0.0, 0.0)})
    assert table.cost("paid", Usage(input_tokens=10)) is None
    assert table.cost("paid", Usage()) is None
    assert table.cost("free", Usage()) == 0.0


def test_env_override_extends_and_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = tmp_path / "mine.csv"
    override.write_text("# my prices\nmodel,input_per_mtok,output_per_mtok,batch_discount\n"
                        "gpt-4.1,1,1,0\nmy-model,3,4,0\n")
    monkeypatch.setenv("CRESOWLVE_PRICES", str(override))
    table = PriceTable.load()
    assert table.get("gpt-4.1") == ModelPrice(1.0, 1.0, 0.0)
    assert table.cost("my-model", Usage(input_tokens=1_000_000, output_tokens=1_000_000)) == pytest.approx(7.0)
    assert table.get("gpt-4o") is not None  # the rest of the bundled table is kept


def test_bad_rows_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("model,input_per_mtok,output_per_mtok,batch_discount\nx,cheap,1,0\n")
    with pytest.raises(ValueError, match="bad price row"):
        PriceTable.load(bad)


def test_cost_meter_separates_spent_from_run_cost() -> None:
    m = CostMeter()
    m.record(1.5, cached=False)
    m.record(2.0, cached=True)
    m.record(None, cached=False)
    assert m.summary() == {"spent": 1.5, "run_cost": 3.5, "n_calls": 3, "n_cached": 1, "n_unknown_cost": 1}


def test_cost_meter_reservations_enforce_the_budget() -> None:
    m = CostMeter(spent=6.0)
    m.reserve(3.0, max_cost=10.0)
    with pytest.raises(BudgetExceeded):
        m.reserve(2.0, max_cost=10.0)  # 6 spent + 3 in flight + 2 > 10
    m.release(3.0)
    m.reserve(2.0, max_cost=10.0)
    m.reserve(100.0, max_cost=None)  # no budget: anything goes
    assert m.reserved == pytest.approx(102.0)
