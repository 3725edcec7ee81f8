"""PriceTable and CostMeter: the bundled table, overrides, unknown models, budgets."""

from __future__ import annotations

from pathlib import Path

import pytest

from cresowlve_core.failures import InputError
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
    assert m.summary() == {"spent": 1.5, "run_cost": 3.5, "n_calls": 3, "n_cached": 1, "n_unknown_cost": 1,
                           "n_unusable": 0, "unusable_cost": 0.0, "n_unusable_unknown_cost": 0, "max_cost": None, "over_budget": 0.0}
    m.charge_unusable(0.25)  # billed with no text: spent, though no call's answer
    m.charge_unusable(None)
    assert (m.spent, m.run_cost, m.n_calls, m.n_unusable, m.unusable_cost) == (1.75, 3.75, 3, 2, 0.25)


def test_cost_meter_says_how_far_spending_passed_its_budget() -> None:
    m = CostMeter(budget=1.0)
    m.record(0.75, cached=False)
    assert m.over_budget == 0.0
    m.record(0.5, cached=False)
    m.record(9.0, cached=True)  # a cache hit spends nothing now
    assert m.summary()["over_budget"] == pytest.approx(0.25) and m.summary()["max_cost"] == 1.0


def test_cost_meter_reservations_enforce_the_budget() -> None:
    m = CostMeter(spent=6.0)
    m.reserve(3.0, max_cost=10.0)
    with pytest.raises(BudgetExceeded):
        m.reserve(2.0, max_cost=10.0)  # 6 spent + 3 in flight + 2 > 10
    m.release(3.0)
    m.reserve(2.0, max_cost=10.0)
    m.reserve(100.0, max_cost=None)  # no budget: anything goes
    assert m.reserved == pytest.approx(102.0)


def test_bundled_prices_are_dated_sourced_and_cover_the_paper_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row says when and where its price comes from; the paper's priced models and gpt-5.4 are in."""
    import csv
    import io

    from cresowlve_core.llm.pricing import DEFAULT_PRICES_PATH

    monkeypatch.delenv("CRESOWLVE_PRICES", raising=False)
    text = DEFAULT_PRICES_PATH.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO("\n".join(ln for ln in text.splitlines() if ln and not ln.startswith("#")))))
    for r in rows:
        assert r["as_of"] and (r["source"].startswith("https://") or r["source"] == "local"), r
        assert (float(r["input_per_mtok"]) > 0) or r["model"] == "gemma3-270m", r  # unknown is absent, never 0
    table = PriceTable.load()
    paper_rows = {  # paper Table 1 model -> the provider's API name priced in the file
        "GPT-4.1": "gpt-4.1", "GPT-4.1-mini": "gpt-4.1-mini", "GPT-5.4": "gpt-5.4",
        "Gemini-3-Flash": "gemini-3-flash-preview", "Gemini-3.1-Pro": "gemini-3.1-pro-preview",
        "DeepSeek-V3.2": "deepseek-chat", "GLM-5": "glm-5", "Mistral-Large-3-675B-Instruct": "mistral-large-2512",
        "C4AI-command-a": "command-a-03-2025",
    }
    paper = (Path(__file__).resolve().parents[2] / "data" / "cresowlve" / "paper_table1.csv").read_text()
    for paper_name, api_name in paper_rows.items():
        assert paper_name in paper and table.get(api_name) is not None, api_name
    # the open-weight rows are OpenRouter ids only (no first-party price): a paper display name never matches
    for name in ("Llama-3.3-70B-Instruct", "OLMo-2-32B-Instruct", "Qwen3-235B-A22B-Instruct", "Qwen3.5-397B-A17B"):
        assert table.get(name) is None and table.get(name.lower()) is None
    assert table.cost("gpt-5.4", Usage(input_tokens=1_000_000, output_tokens=1_000_000)) == pytest.approx(17.5)


def test_usd_never_shows_a_small_amount_as_zero() -> None:
    from cresowlve_core.llm.pricing import usd

    assert [usd(x) for x in (0.0, 0.0125, 12.5, 0.00005, 0.0000012)] == [
        "$0.0000", "$0.0125", "$12.5000", "$0.00005", "$0.0000012"]
    with pytest.raises(BudgetExceeded, match=r"budget of \$0\.00001 would be exceeded"):
        CostMeter().reserve(0.001, max_cost=0.00001)


HEADER = "model,input_per_mtok,output_per_mtok,batch_discount\n"


@pytest.mark.parametrize("row, problem", [
    ("m,nan,nan,0", "input_per_mtok must be a finite number >= 0, got 'nan'"),
    ("m,1,inf,0", "output_per_mtok must be a finite number >= 0, got 'inf'"),
    ("m,-100,1,0", "input_per_mtok must be a finite number >= 0, got '-100'"),
    ("m,1,1,1.5", "batch_discount must be between 0 and 1, got '1.5'"),
    ("m,1", "output_per_mtok is missing"),
])
def test_a_price_that_is_not_a_finite_amount_is_refused_naming_file_and_line(tmp_path: Path, row: str,
                                                                             problem: str) -> None:
    # a NaN price used to switch --max-cost off (cost $nan, exit 0), a negative one to pay it back,
    # and a short row to end the run in a TypeError traceback
    prices = tmp_path / "mine.csv"
    prices.write_text("# my prices\n" + HEADER + row + "\n")
    with pytest.raises(InputError) as err:
        PriceTable.load(prices)
    assert str(err.value).startswith(f"bad price row in {prices}:3: ") and str(err.value).endswith(f"({problem})")


def test_a_row_with_more_fields_than_the_header_is_refused(tmp_path: Path) -> None:
    # decimal commas ("0,50" and "2,00") were read as input 0 and output 50, the rest dropped silently
    prices = tmp_path / "mine.csv"
    prices.write_text("model,input_per_mtok,output_per_mtok\nmy-model,0,50,2,00\n")
    with pytest.raises(InputError) as err:
        PriceTable.load(prices)
    assert str(err.value).startswith(f"bad price row in {prices}:2: ")
    assert str(err.value).endswith("(2 more field(s) than the header's 3: a decimal comma (write 2.50) or an "
                                   "unquoted comma in a note?)")


def test_a_second_row_for_a_model_is_refused_naming_both_lines(tmp_path: Path) -> None:
    # the later row used to replace the earlier one silently: a model priced 200/800 then 0/0 was free,
    # and --max-cost never stopped it
    prices = tmp_path / "mine.csv"
    prices.write_text(HEADER + "my-model,200,800,0\n# a free local row, pasted later\nmy-model,0,0,0\n")
    with pytest.raises(InputError) as err:
        PriceTable.load(prices)
    assert str(err.value).startswith(f"bad price row in {prices}:4: ")
    assert str(err.value).endswith("('my-model' already has a price on line 2: keep one row per model)")


def test_a_spreadsheets_csv_with_a_byte_order_mark_and_crlf_is_read(tmp_path: Path) -> None:
    prices = tmp_path / "mine.csv"
    prices.write_bytes(b"\xef\xbb\xbf" + (HEADER + "my-model,3,4,0.5\n").replace("\n", "\r\n").encode())
    assert PriceTable.load(prices).get("my-model") == ModelPrice(3.0, 4.0, 0.5)


@pytest.mark.parametrize("what", ["missing", "folder", "not-utf8"])
def test_a_price_table_that_cannot_be_read_is_one_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               what: str) -> None:
    path = tmp_path / "mine.csv"
    if what == "folder":
        path.mkdir()
    elif what == "not-utf8":
        path.write_bytes(HEADER.encode() + b"m,\xff1,1,0\n")
    monkeypatch.setenv("CRESOWLVE_PRICES", str(path))
    with pytest.raises(InputError, match=f"^price table {path}: "):  # a FileNotFoundError traceback before
        PriceTable.load()
