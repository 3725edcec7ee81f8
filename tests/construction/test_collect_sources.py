"""``collect``'s dataset sources (``cresowlve build --source FILE.jsonl``): read by the items reader,
so a file the eval accepts is accepted here, and a bad one is one error naming its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cresowlve_core.construction.collect import collect
from cresowlve_core.paths import shipped_data
from cresowlve_core.sources.hub import ItemsFileError

PUBLISHED_ROW = {"id": "chgk_a", "question": "Кто это?", "answer": "Он", "difficulty": 2, "explanation": None,
                 "other_answers": None, "knowledge_domains": [], "creative_domains": [], "cultures": []}
ITEM_ROW = {"id": "chgk_b", "ru": {"question": "Кто там?", "answer": "Я"}}


@pytest.mark.parametrize("row", [PUBLISHED_ROW, ITEM_ROW], ids=["published", "item"])
def test_a_dataset_file_with_a_byte_order_mark_is_read(tmp_path: Path, row: dict) -> None:
    path = tmp_path / "ru.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(row, ensure_ascii=False).encode() + b"\n")
    out, report = collect([str(path)])
    assert [c.id for c in out.kept] == [row["id"]] and report["sources"][0]["n"] == 1


@pytest.mark.parametrize("first, error", [
    (b"{not json", "ru.jsonl:1: not JSON"),
    (b"null", "ru.jsonl:1: expected a JSON object (one item per line), got null"),
    (b"42", "ru.jsonl:1: expected a JSON object (one item per line), got 42"),
    (b"\xff{}", "ru.jsonl:1: not UTF-8 (byte 0xff)"),
])
def test_a_dataset_file_whose_first_line_is_not_an_object_is_one_error_naming_it(tmp_path: Path, first: bytes,
                                                                                  error: str) -> None:
    # the format sniffing used to parse the first line on its own: a traceback and exit 1 for each
    path = tmp_path / "ru.jsonl"
    path.write_bytes(first + b"\n" + json.dumps(PUBLISHED_ROW, ensure_ascii=False).encode() + b"\n")
    with pytest.raises(ItemsFileError) as err:
        collect([str(path)])
    assert str(err.value).startswith(f"{tmp_path}/{error}")


def test_a_folder_of_packs_reads_an_upper_case_extension_too(tmp_path: Path) -> None:
    # B.TXT was left out of the folder without a word (read when named on its own: --source B.TXT)
    from cresowlve_core.paths import shipped_data

    packs = sorted(shipped_data("chgk").glob("*.txt"))[:2]
    folder = tmp_path / "packs"
    folder.mkdir()
    (folder / "a.txt").write_bytes(packs[0].read_bytes())
    (folder / "B.TXT").write_bytes(packs[1].read_bytes())
    _, report = collect([str(folder)])
    assert [Path(f["source"]).name for f in report["sources"][0]["files"]] == ["B.TXT", "a.txt"]
    assert all(f["n"] > 0 for f in report["sources"][0]["files"])


PACK_WITH_LEVELS = """Чемпионат:
Тестовый турнир

Вопрос 1:
Римляне назвали красную планету в честь бога войны. Назовите её.

Ответ:
Марс.

Сложность:
7

Вопрос 2:
Шахматисты нажимают на НЕЁ после каждого хода. Назовите ЕЁ.

Ответ:
Шахматные часы.

Сложность:
3
"""


def test_a_pack_difficulty_outside_1_to_5_is_flagged_and_the_item_kept_unrated(tmp_path: Path) -> None:
    # "Сложность: 7" became difficulty 7: a stratified sample over levels 1-5 dropped the item without a
    # word, and without a sample the build ran every model step and then failed reading its own export
    pack = tmp_path / "levels.txt"
    pack.write_text(PACK_WITH_LEVELS, encoding="utf-8")
    out, _ = collect([str(pack)], per_level=5)
    by_answer = {c.ru.answer: c for c in out.kept}
    assert set(by_answer) == {"Марс.", "Шахматные часы."}
    assert by_answer["Марс."].difficulty is None and by_answer["Марс."].parser_flags == ["invalid_difficulty"]
    assert by_answer["Шахматные часы."].difficulty == 3
    assert out.counts["n_unrated"] == 1 and out.counts["parser_flags"] == {"invalid_difficulty": 1}


def test_a_dataset_file_with_text_that_cannot_be_sent_is_one_error_naming_the_item(tmp_path: Path) -> None:
    # a lone surrogate ("\udcff" is valid JSON) went on to the first model call: a traceback and exit 1
    path = tmp_path / "ru.jsonl"
    bad = {**PUBLISHED_ROW, "id": "chgk_bad", "question": "Назовите ЕЁ \udcff."}
    path.write_text(json.dumps(PUBLISHED_ROW) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ItemsFileError, match=r"1 item\(s\) with text that is not valid Unicode.*id 'chgk_bad'"):
        collect([str(path)])


def test_a_dataset_file_with_one_id_on_two_questions_is_refused_not_deduplicated(tmp_path: Path) -> None:
    # the second question was dropped as a "duplicate" of another question that shared its id
    path = tmp_path / "ru.jsonl"
    other = {**PUBLISHED_ROW, "question": "Кто ОН?", "answer": "Пушкин"}
    path.write_text(json.dumps(PUBLISHED_ROW) + "\n" + json.dumps(other) + "\n", encoding="utf-8")
    with pytest.raises(ItemsFileError, match=r"1 duplicate item id\(s\): 'chgk_a' \(items 1, 2\)"):
        collect([str(path)])


def test_a_stratified_sample_says_that_it_keeps_every_unrated_item(caplog: pytest.LogCaptureFixture) -> None:
    # the shipped packs have no difficulty: --per-level 2 kept all 315 items (8 model calls each) without a word
    import logging

    with caplog.at_level(logging.WARNING, logger="cresowlve_core.construction.collect"):
        out, _ = collect(None, per_level=2)
    n = out.counts["n_sampled"]
    assert out.counts["n_unrated"] == n > 10
    said = f"per_level=2 samples difficulty levels 1-5 only: {n} of the {n} sampled items have no difficulty"
    assert said in caplog.text


def test_a_build_from_hub_ru_offline_names_the_builds_own_option(monkeypatch: pytest.MonkeyPatch) -> None:
    # the error ended "pass a local file instead: --items PATH.parquet ... or --items demo": options of
    # `cresowlve eval` that `cresowlve build` refuses
    from huggingface_hub.errors import LocalEntryNotFoundError

    from cresowlve_core.sources import hub
    from cresowlve_core.sources.hub import HubUnavailableError

    def not_cached(**kwargs: object) -> str:
        raise LocalEntryNotFoundError("not cached")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "snapshot_download", not_cached)
    with pytest.raises(HubUnavailableError) as err:
        collect(["hub:ru"])
    assert "--source PATH.parquet or PATH.jsonl" in str(err.value) and "--items" not in str(err.value)


def test_a_build_from_hub_ru_reports_the_snapshot_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The collect report of ``hub:ru`` names the snapshot's revision and the file read, with its SHA-256."""
    import hashlib
    import shutil

    from cresowlve_core.sources import hub

    snapshot = tmp_path / "snapshots" / "0123abcd"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "hub" / "snapshot", snapshot)
    monkeypatch.setattr(hub, "snapshot_download", lambda **kwargs: str(snapshot))
    _, report = collect(["hub:ru"])
    parquet = snapshot / "ru" / "test-00000-of-00001.parquet"
    assert report["sources"] == [{"source": "hub:ru", "kind": "dataset", "n": 3, "items_files": [
        {"repo": "mismayil/cresowlve", "revision": "0123abcd", "path": "ru/test-00000-of-00001.parquet",
         "sha256": hashlib.sha256(parquet.read_bytes()).hexdigest(), "n_items": 3}]}]


def test_a_question_with_no_cyrillic_is_set_aside_not_translated_as_if_russian(tmp_path: Path, capsys) -> None:
    # a published file has no language: a build's own export/creative/en/test.jsonl read as Russian, and the
    # English question was "translated" to English and exported as the item's Russian view
    from cresowlve_core.cli import main

    english = {**PUBLISHED_ROW, "id": "chgk_en", "question": "Name IT in English, X.", "answer": "Mars"}
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps(PUBLISHED_ROW) + "\n" + json.dumps(english) + "\n", encoding="utf-8")
    out, report = collect([str(mixed)])
    assert [c.id for c in out.kept] == ["chgk_a"]
    assert report["unusable"] == [{"id": "chgk_en", "source_file": str(mixed), "number": None, "flags": ["not_russian"]}]
    only_en = tmp_path / "en.jsonl"
    only_en.write_text(json.dumps(english) + "\n", encoding="utf-8")
    rc = main(["build", "--source", str(only_en), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
               "--build-dir", str(tmp_path / "b"), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and err.endswith("1 unusable block(s) (1 not in Russian): nothing to build, nothing was sent"), err


PACK_WITH_ZACHET = """Вопрос 1:
Назовите столицу Ингушетии.

Ответ:
Магас.

Зачёт:
Магас (город).

Незачёт:
Назрань.
"""


@pytest.mark.parametrize(("name", "text"), [
    ("zachet.txt", PACK_WITH_ZACHET),
    ("zachet.4s", "? Назовите столицу Ингушетии.\n! Магас.\n= Магас (город).\n!= Назрань.\n"),
], ids=["db", "4s"])
def test_a_packs_nezachet_reaches_the_review_card_and_the_export(tmp_path: Path, name: str, text: str) -> None:
    # the zachet became other_answers, but the nezachet (answers a judge must not accept) was dropped
    # without a word: no field of the candidate, its review card or full.jsonl held it
    from cresowlve_core.construction.review import review_card

    pack = tmp_path / name
    pack.write_text(text, encoding="utf-8")
    out, _ = collect([str(pack)])
    [cand] = out.kept
    assert cand.ru.other_answers == "Магас (город)."
    assert review_card(cand)["provenance"]["rejected_answers"] == "Назрань."
    assert cand.to_item().meta["provenance"]["rejected_answers"] == "Назрань."


def test_the_items_of_a_smaller_limit_are_among_those_of_a_larger_one_with_the_same_seed() -> None:
    # a fresh random draw per limit: on the shipped rusch16 pack, --limit 17 kept an item --limit 22 did
    # not, so a pilot build could not be extended (or compared with the larger build) item for item
    pack = [str(shipped_data("chgk") / "rusch16.txt")]
    limits = (5, 16, 17, 22, 30)
    kept = {n: {c.id for c in collect(pack, limit=n)[0].kept} for n in limits}
    assert all(len(kept[n]) == n and kept[n] < kept[m] for n, m in zip(limits, limits[1:]))
    assert {c.id for c in collect(pack, limit=17, seed=1)[0].kept} != kept[17]  # the seed still chooses


def test_the_items_of_a_smaller_per_level_sample_are_among_those_of_a_larger_one(tmp_path: Path) -> None:
    # one generator drew every level: a larger sample of level 1 moved the draws of the levels after it
    rows = [{**PUBLISHED_ROW, "id": f"chgk_{i:02d}", "question": f"Вопрос номер {i}?", "difficulty": 1 + i % 5}
            for i in range(60)]
    path = tmp_path / "ru.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    kept = {n: {c.id for c in collect([str(path)], per_level=n)[0].kept} for n in range(1, 13)}
    assert all(len(kept[n]) == 5 * n and kept[n] < kept[n + 1] for n in range(1, 12))
