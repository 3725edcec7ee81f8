"""Tests for cresowlve_core.sources.hub, offline: the hub download is monkeypatched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError

from cresowlve_core.items import Item, ItemView
from cresowlve_core.paths import cache_dir
from cresowlve_core.sources import hub
from cresowlve_core.sources.hub import (
    HubUnavailableError,
    ItemsFileError,
    PublishedDataError,
    find_split_files,
    load_published,
    read_published_file,
    write_published_file,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hub"
SNAPSHOT = FIXTURES / "snapshot"
EN_PARQUET = SNAPSHOT / "en" / "test-00000-of-00001.parquet"
RU_PARQUET = SNAPSHOT / "ru" / "test-00000-of-00001.parquet"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- reading the fixture ------------------------------------------------------------------------


@pytest.mark.parametrize(("lang", "parquet", "n"), [("en", EN_PARQUET, 6), ("ru", RU_PARQUET, 3)])
def test_fixture_parquet_matches_its_jsonl_rows(lang, parquet, n):
    items = read_published_file(parquet, lang)
    assert len(items) == n
    assert [it.published_row(lang) for it in items] == _rows(FIXTURES / f"{lang}.jsonl")
    assert all(it.has(lang) and not it.has("ru" if lang == "en" else "en") for it in items)


def test_fixture_values_nulls_and_lists():
    items = {it.id: it for it in read_published_file(EN_PARQUET, "en")}
    melody = items["chgk_83a712ed75"]
    assert melody.en.answer == "Melody."
    assert melody.en.other_answers == "Music, score, cacophony."
    assert melody.difficulty == 3
    assert melody.knowledge_domains == ["Visual Arts", "Literature", "Music", "Military"]
    assert melody.creative_domains == ["metaphor", "lateral thinking"]
    assert melody.cultures == ["english"]
    poster = items["chgk_17cad876d2"]
    assert poster.en.explanation is None and poster.en.other_answers is None
    assert poster.difficulty is None and poster.cultures == []
    assert items["chgk_f12464c4c7"].en.other_answers is None
    ru = {it.id: it for it in read_published_file(RU_PARQUET, "ru")}
    assert ru["chgk_c97e6fd16d"].ru.answer == "Кромвель"


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_round_trip(tmp_path, suffix):
    items = read_published_file(EN_PARQUET, "en")
    path = write_published_file(items, tmp_path / f"out{suffix}", "en")
    again = read_published_file(path, "en")
    assert [it.model_dump() for it in again] == [it.model_dump() for it in items]


def test_parquet_schema_is_the_published_one(tmp_path):
    items = read_published_file(EN_PARQUET, "en")
    schema = pq.read_schema(write_published_file(items, tmp_path / "x.parquet", "en"))
    assert schema.names == list(hub.PUBLISHED_FIELDS)
    assert str(schema.field("difficulty").type) == "int64"
    assert str(schema.field("cultures").type) == "list<element: string>"


def test_write_requires_the_language_view(tmp_path):
    item = Item(id="chgk_0000000000", en=ItemView(question="Q?", answer="A"))
    with pytest.raises(KeyError, match="chgk_0000000000"):
        write_published_file([item], tmp_path / "ru.jsonl", "ru")


# --- validation ---------------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (lambda r: r.pop("answer"), "answer", "is missing"),
        (lambda r: r.update(question=None), "question", "non-empty string"),
        (lambda r: r.update(difficulty=7), "difficulty", "integer 1-5"),
        (lambda r: r.update(difficulty="3"), "difficulty", "integer 1-5"),
        (lambda r: r.update(explanation=["x"]), "explanation", "string or null"),
        (lambda r: r.update(cultures=None), "cultures", "list of strings"),
        (lambda r: r.update(knowledge_domains=["ok", 3]), "knowledge_domains", "list of strings"),
    ],
)
def test_invalid_row_names_row_id_and_field(tmp_path, change, field, fragment):
    rows = _rows(FIXTURES / "en.jsonl")
    change(rows[2])
    path = _write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(PublishedDataError) as err:
        read_published_file(path, "en")
    message = str(err.value)
    assert "row 2" in message and "chgk_056f339e0d" in message and repr(field) in message
    assert fragment in message


def test_missing_parquet_column_is_an_error(tmp_path):
    table = pq.read_table(EN_PARQUET).drop_columns(["cultures"])
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(PublishedDataError, match="cultures"):
        read_published_file(tmp_path / "bad.parquet", "en")


def test_extra_columns_and_float_difficulty_are_accepted(tmp_path):
    rows = _rows(FIXTURES / "en.jsonl")
    rows[0]["source"] = "extra"
    rows[0]["difficulty"] = 3.0
    items = read_published_file(_write_jsonl(tmp_path / "x.jsonl", rows), "en")
    assert len(items) == 6 and items[0].difficulty == 3


def test_bad_json_line_and_bad_suffix(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"id": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ItemsFileError, match=r"x\.jsonl:2: not JSON"):
        read_published_file(tmp_path / "x.jsonl", "en")
    with pytest.raises(PublishedDataError, match="parquet or .jsonl"):
        read_published_file(tmp_path / "x.csv", "en")


# --- locating splits in a snapshot --------------------------------------------------------------


def test_find_split_files_from_card_and_from_layout(tmp_path):
    assert find_split_files(SNAPSHOT, "en") == [EN_PARQUET]
    assert find_split_files(SNAPSHOT, "ru", "test") == [RU_PARQUET]
    # without a dataset card, the usual directory layouts are recognised
    (tmp_path / "data" / "en").mkdir(parents=True)
    shutil.copy(EN_PARQUET, tmp_path / "data" / "en" / "test-00000-of-00001.parquet")
    assert [p.name for p in find_split_files(tmp_path, "en")] == ["test-00000-of-00001.parquet"]
    with pytest.raises(FileNotFoundError, match="no ru/test data files"):
        find_split_files(tmp_path, "ru")
    with pytest.raises(FileNotFoundError):
        find_split_files(SNAPSHOT, "en", "train")


def _card_declaring_data_english(root: Path, prefix: bytes = b"", tail: bytes = b"card\n") -> Path:
    """A snapshot whose card declares ``data/english/*.parquet`` (6 rows) for en/test, beside a
    2-row ``en/test-*.parquet`` that the folder layout alone would pick."""
    (root / "data" / "english").mkdir(parents=True)
    (root / "en").mkdir()
    shutil.copy(EN_PARQUET, root / "data" / "english" / "part0.parquet")
    pq.write_table(pq.read_table(EN_PARQUET).slice(0, 2), root / "en" / "test-00000-of-00001.parquet")
    card = (b"---\nconfigs:\n- config_name: en\n  data_files:\n  - split: test\n"
            b"    path: data/english/*.parquet\n---\n")
    (root / "README.md").write_bytes(prefix + card + tail)
    return root


def test_card_with_a_byte_order_mark_is_read(tmp_path):
    plain = _card_declaring_data_english(tmp_path / "plain")
    bom = _card_declaring_data_english(tmp_path / "bom", prefix=b"\xef\xbb\xbf")
    assert [p.name for p in find_split_files(plain, "en")] == ["part0.parquet"]
    assert [p.name for p in find_split_files(bom, "en")] == ["part0.parquet"]
    assert len(load_published("en", local_path=bom)) == 6


def test_card_that_is_not_utf8_is_an_error_naming_it(tmp_path):
    root = _card_declaring_data_english(tmp_path, tail=b"caf\xe9\n")
    with pytest.raises(PublishedDataError, match=r"README\.md:8: not UTF-8 \(byte 0xe9\)") as err:
        load_published("en", local_path=root)
    assert "\n" not in str(err.value)


_FIXTURE_CARD = (SNAPSHOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("card", "error", "fragment"),
    [
        # the declared pattern matches nothing, while en/test-*.parquet is there to be guessed
        (_FIXTURE_CARD.replace("path: en/test-*", "path: data/en/test-*"), FileNotFoundError,
         "config 'en' split 'test' names 'data/en/test-*', which matches no file"),
        # one of two declared patterns matches nothing: not a silently partial split
        (_FIXTURE_CARD.replace("path: en/test-*", "path:\n    - en/test-*\n    - en/extra-*.parquet"),
         FileNotFoundError, "names 'en/extra-*.parquet', which matches no file"),
        # the config declares other splits only
        (_FIXTURE_CARD.replace("split: test\n    path: en", "split: validation\n    path: en"),
         FileNotFoundError, "config 'en' declares no files for split 'test' (its splits: ['validation'])"),
        # the card declares configs, but not this one
        (_FIXTURE_CARD.replace("config_name: en", "config_name: english"), FileNotFoundError,
         "declares configs ['english', 'ru'], not 'en'"),
        (_FIXTURE_CARD.replace("configs:", "configs: ["), PublishedDataError,
         "README.md:3: the front matter is not valid YAML"),
    ],
)
def test_a_card_declaring_configs_is_the_file_list(tmp_path, card, error, fragment):
    root = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, root)
    (root / "README.md").write_text(card, encoding="utf-8")
    with pytest.raises(error) as err:
        load_published("en", local_path=root)
    assert fragment in str(err.value) and str(root / "README.md") in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("../outside/*.parquet", "leaves the snapshot ('..')"),
        ("en/../../outside/*.parquet", "leaves the snapshot ('..')"),
        ("/OUTSIDE/*.parquet", "is absolute"),
        ("[1]", "is not a file pattern"),
    ],
)
def test_a_card_path_outside_the_snapshot_is_refused(tmp_path, path, fragment):
    """A card's data file pattern names files of the snapshot only: the ru items one level up are not
    read as the en split."""
    root = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, root)
    (tmp_path / "outside").mkdir()
    shutil.copy(RU_PARQUET, tmp_path / "outside" / "x.parquet")
    path = path.replace("/OUTSIDE", str(tmp_path / "outside"))
    (root / "README.md").write_text(_FIXTURE_CARD.replace("path: en/test-*", f"path: {path}"), encoding="utf-8")
    with pytest.raises(PublishedDataError) as err:
        load_published("en", local_path=root)
    assert fragment in str(err.value) and str(root / "README.md") in str(err.value)
    assert "config 'en' split 'test' path" in str(err.value)


_EN_DATA_FILES = "  data_files:\n  - split: test\n    path: en/test-*\n"


@pytest.mark.parametrize(
    ("data_files", "splits"),
    [
        ("  data_files: en/test-*\n", ["train"]),  # a bare pattern is the train split, as the hub reads it
        ("  data_files:\n  - en/test-*\n", ["train"]),
        ("  data_files:\n    test: en/test-*\n", ["test"]),  # a {split: path} mapping
        ("  data_files:\n    validation: [en/test-*]\n", ["validation"]),
    ],
)
def test_card_data_files_forms_name_their_splits(tmp_path, data_files, splits):
    root = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, root)
    assert _EN_DATA_FILES in _FIXTURE_CARD
    (root / "README.md").write_text(_FIXTURE_CARD.replace(_EN_DATA_FILES, data_files), encoding="utf-8")
    assert find_split_files(root, "en", splits[0]) == [root / "en" / "test-00000-of-00001.parquet"]
    if "test" not in splits:  # not read as the test split
        with pytest.raises(FileNotFoundError) as err:
            load_published("en", local_path=root)
        assert f"config 'en' declares no files for split 'test' (its splits: {splits!r})" in str(err.value)


@pytest.mark.parametrize("front_matter", ["title: a card without configs\n", "just a title\n", "configs: []\n"])
def test_a_card_without_configs_leaves_the_folder_layout(tmp_path, front_matter):
    root = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, root)
    (root / "README.md").write_text(f"---\n{front_matter}---\n# card\n", encoding="utf-8")
    assert find_split_files(root, "en") == [root / "en" / "test-00000-of-00001.parquet"]


# --- load_published -----------------------------------------------------------------------------


def test_load_published_from_local_paths():
    assert len(load_published("en", local_path=SNAPSHOT)) == 6
    assert len(load_published("ru", local_path=SNAPSHOT)) == 3
    assert [it.id for it in load_published("en", local_path=EN_PARQUET)][0] == "chgk_83a712ed75"
    with pytest.raises(ValueError, match="lang"):
        load_published("de", local_path=SNAPSHOT)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("second", "first"),
    [
        # a second shard repeating the first
        ("en/test-copy.parquet", "en/test-00000-of-00001.parquet"),
        # the same split kept as JSON Lines beside its Parquet file (the card's en/test-* takes both)
        ("en/test-00000-of-00001.parquet", "en/test-00000-of-00001.jsonl"),
    ],
)
def test_an_id_in_two_files_of_a_split_is_an_error_naming_both(tmp_path, second, first):
    root = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, root)
    if first.endswith(".jsonl"):
        shutil.copy(FIXTURES / "en.jsonl", root / first)
    else:
        shutil.copy(EN_PARQUET, root / second)
    with pytest.raises(PublishedDataError) as err:
        load_published("en", local_path=root)
    assert str(err.value) == (f"{root / second}: row 0 (id='chgk_83a712ed75'): the id repeats {root / first}: row 0; "
                              "a split holds each item once")


def _two_shard_cache_snapshot(tmp_path: Path) -> Path:
    """A snapshot in the hub cache's layout: the en split in two shards (3 rows each), each a link to
    its blob, as huggingface_hub writes them."""
    blobs, root = tmp_path / "blobs", tmp_path / "snapshots" / "0123abcd"
    blobs.mkdir()
    shutil.copytree(SNAPSHOT, root)
    (root / "en" / "test-00000-of-00001.parquet").unlink()
    table = pq.read_table(EN_PARQUET)
    for i in range(2):
        pq.write_table(table.slice(3 * i, 3), blobs / f"blob{i}")
        (root / "en" / f"test-0000{i}-of-00002.parquet").symlink_to(Path("../../../blobs") / f"blob{i}")
    return root


def test_a_split_in_two_shards_is_read_whole(tmp_path):
    root = _two_shard_cache_snapshot(tmp_path)
    assert len(load_published("en", local_path=root)) == 6


def test_a_shard_whose_blob_is_gone_is_an_error_not_a_smaller_split(tmp_path):
    root = _two_shard_cache_snapshot(tmp_path)
    (tmp_path / "blobs" / "blob1").unlink()
    with pytest.raises(FileNotFoundError) as err:
        load_published("en", local_path=root)
    msg = str(err.value)
    assert msg.startswith(f"{root / 'en' / 'test-00001-of-00002.parquet'} links to ../../../blobs/blob1, which is missing")
    assert "the en/test files under" in msg and "are incomplete" in msg


@pytest.mark.parametrize("card", [True, False])  # the card's en/test-*, or the folder layout
def test_a_missing_shard_is_an_error_not_a_smaller_split(tmp_path, card):
    root = _two_shard_cache_snapshot(tmp_path)
    (root / "en" / "test-00001-of-00002.parquet").unlink()
    if not card:
        (root / "README.md").unlink()
    with pytest.raises(FileNotFoundError) as err:
        load_published("en", local_path=root)
    assert str(err.value).startswith(f"{root / 'en'}: 1 of 2 shards missing (test-00001-of-00002.parquet): ")


class FakeHub:
    """Stands in for huggingface_hub.snapshot_download and records its calls."""

    def __init__(self, cached: bool, fail: bool = False) -> None:
        self.cached, self.fail = cached, fail
        self.calls: list[dict] = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if kwargs.get("local_files_only"):
            if not self.cached:
                raise LocalEntryNotFoundError("not cached")
            return str(SNAPSHOT)
        if self.fail:
            raise OSError("network unreachable")
        return str(SNAPSHOT)


def test_cached_snapshot_needs_no_network(monkeypatch):
    fake = FakeHub(cached=True)
    monkeypatch.setattr(hub, "snapshot_download", fake)
    items = load_published("en")
    assert len(items) == 6
    assert len(fake.calls) == 1 and fake.calls[0]["local_files_only"] is True
    assert fake.calls[0]["repo_id"] == "mismayil/cresowlve"
    assert fake.calls[0]["repo_type"] == "dataset"
    assert Path(fake.calls[0]["cache_dir"]) == cache_dir() / "hub"


def test_uncached_snapshot_is_downloaded_into_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    fake = FakeHub(cached=False)
    monkeypatch.setattr(hub, "snapshot_download", fake)
    assert len(load_published("ru", cache_dir=tmp_path)) == 3
    assert [c.get("local_files_only", False) for c in fake.calls] == [True, False]
    assert all(Path(c["cache_dir"]) == tmp_path for c in fake.calls)


def test_offline_without_cache_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake = FakeHub(cached=False)
    monkeypatch.setattr(hub, "snapshot_download", fake)
    with pytest.raises(HubUnavailableError, match="HF_HUB_OFFLINE"):
        load_published("en")
    assert len(fake.calls) == 1  # never tried to download


def test_download_failure_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "snapshot_download", FakeHub(cached=False, fail=True))
    with pytest.raises(HubUnavailableError, match="network unreachable"):
        load_published("en")


def test_download_failure_is_one_line_with_a_local_file_hint(monkeypatch):
    """``--items hub:en`` offline says it downloads from the hub and how to avoid it."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def unreachable(**kwargs):
        if kwargs.get("local_files_only"):
            raise LocalEntryNotFoundError("not cached")
        raise OSError("Name or service not known\n  (a long multi-line trace from the HTTP stack)\n  ...")

    monkeypatch.setattr(hub, "snapshot_download", unreachable)
    with pytest.raises(HubUnavailableError) as err:
        load_published("en")
    msg = str(err.value)
    assert "\n" not in msg
    assert "from the Hugging Face hub" in msg and "Name or service not known" in msg
    assert "--items PATH.parquet or PATH.jsonl" in msg
