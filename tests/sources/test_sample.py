"""Tests for cresowlve_core.sources.sample: the shipped demo items and load_items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cresowlve_core.items import Item, ItemView
from cresowlve_core.sources import sample
from cresowlve_core.sources.sample import (
    DEMO_ITEMS_NAME,
    DEMO_SOURCE_NAME,
    NoItemsError,
    build_demo_items,
    in_benchmark,
    items_to_jsonl,
    load_demo_items,
    load_items,
    shipped_path,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hub"
BENCHMARK_IDS = [
    "chgk_f12464c4c7",
    "chgk_b338b9556c",
    "chgk_83a712ed75",
    "chgk_d124832645",
    "chgk_f65f89f5bd",
    "chgk_e66ed999fd",
    "chgk_056f339e0d",
    "chgk_c97e6fd16d",
    "chgk_8947f691ac",
]


@pytest.fixture(scope="module")
def examples() -> dict[str, dict]:
    lines = shipped_path(DEMO_SOURCE_NAME).read_text(encoding="utf-8").splitlines()
    return {d["id"]: d for d in map(json.loads, lines)}


def test_rebuilding_equals_the_shipped_file():
    shipped = shipped_path(DEMO_ITEMS_NAME).read_text(encoding="utf-8")
    assert items_to_jsonl(build_demo_items()) == shipped


def test_demo_counts_and_benchmark_membership():
    items = load_demo_items(include_removed=True)
    assert len(items) == 15
    assert [it.id for it in load_demo_items()] == BENCHMARK_IDS
    assert sum(it.has("ru") for it in items) == 8
    assert [it.id for it in load_demo_items() if it.has("ru")] == [
        "chgk_83a712ed75",
        "chgk_c97e6fd16d",
        "chgk_8947f691ac",
    ]
    assert all(it.has("en") for it in items)


def test_demo_items_carry_source_fields(examples):
    for item in load_demo_items(include_removed=True):
        ex = examples[item.id]
        assert item.en.question == ex["question_en"] and item.en.answer == ex["answer_en"]
        assert item.en.explanation == ex.get("explanation_en")
        assert item.en.other_answers == ex.get("other_answers_en")
        assert item.difficulty == ex.get("difficulty")  # never invented
        assert item.reasoning_type == ex.get("reasoning_type")
        assert item.meta["pipeline_outcome"] == ex["pipeline_outcome"]
        assert item.meta["source"] == ex["source"]
        assert item.meta["in_benchmark"] == (item.id in BENCHMARK_IDS)
        if item.has("ru"):
            assert (item.ru.question, item.ru.answer) == (ex["question_ru"], ex["answer_ru"])
    by_id = {it.id: it for it in load_demo_items(include_removed=True)}
    # a Russian question without a Russian answer gives no ru view but is not lost
    physical = by_id["chgk_7e149044a7"]
    assert not physical.has("ru") and physical.meta["question_ru"].startswith("Статья в")
    assert by_id["chgk_8947f691ac"].reasoning_type == "factual"
    assert by_id["chgk_c97e6fd16d"].reasoning_type is None and by_id["chgk_c97e6fd16d"].difficulty is None
    assert by_id["chgk_83a712ed75"].cultures == ["english"]


def test_in_benchmark_rule():
    assert in_benchmark("kept") and in_benchmark("kept as factual (step 5)")
    assert in_benchmark("translated (step 3)")
    assert not in_benchmark("removed: outdated info (step 4, human validation)")


def test_example_without_english_is_skipped_with_a_warning(tmp_path, caplog):
    source = tmp_path / "ex.jsonl"
    rows = [
        {"id": "chgk_a", "pipeline_outcome": "kept", "question_en": "Q?", "answer_en": "A", "source": "s"},
        {"id": "chgk_b", "pipeline_outcome": "kept", "question_ru": "В?", "answer_ru": "О", "source": "s"},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = build_demo_items(source)
    assert [it.id for it in items] == ["chgk_a"]
    assert "chgk_b" in caplog.text


# --- load_items ---------------------------------------------------------------------------------


def test_load_items_demo():
    assert [it.id for it in load_items("demo", "en")] == BENCHMARK_IDS
    assert len(load_items("demo", "ru")) == 3


def test_load_items_paths():
    assert len(load_items(str(shipped_path(DEMO_ITEMS_NAME)), "ru")) == 8  # Item JSONL, all 15 items
    assert len(load_items(str(FIXTURES / "en.jsonl"), "en")) == 6  # published-schema JSONL
    parquet = FIXTURES / "snapshot" / "ru" / "test-00000-of-00001.parquet"
    assert [it.ru.answer for it in load_items(str(parquet), "ru")] == ["Мелодию", "Кромвель", "Кварц"]


def test_load_items_hub_specs(monkeypatch):
    calls = []

    def fake_load_published(lang):
        calls.append(lang)
        return [Item(id="chgk_1", **{lang: ItemView(question="Q?", answer="A")})]

    monkeypatch.setattr(sample, "load_published", fake_load_published)
    assert [it.id for it in load_items("hub:ru", "ru")] == ["chgk_1"]
    assert len(load_items("hub", "en")) == 1
    assert calls == ["ru", "en"]
    with pytest.raises(NoItemsError, match="asked for 'ru'"):
        load_items("hub:en", "ru")
    with pytest.raises(ValueError, match="hub:en or hub:ru"):
        load_items("hub:de", "en")


def test_load_items_errors(tmp_path):
    only_en = tmp_path / "items.jsonl"
    only_en.write_text(items_to_jsonl([Item(id="chgk_1", en=ItemView(question="Q?", answer="A"))]))
    with pytest.raises(NoItemsError, match="no items with a 'ru' view"):
        load_items(str(only_en), "ru")
    with pytest.raises(FileNotFoundError, match="demo"):
        load_items(str(tmp_path / "missing.jsonl"), "en")
    (tmp_path / "x.csv").write_text("id\n")
    with pytest.raises(ValueError, match=".jsonl or .parquet"):
        load_items(str(tmp_path / "x.csv"), "en")
    with pytest.raises(ValueError, match="lang"):
        load_items("demo", "fr")  # type: ignore[arg-type]
