"""Packs in unusual shapes: UTF-16 is decoded, an empty pack is a warning."""

from __future__ import annotations

import logging

import pytest

from cresowlve_core.paths import REPO_ROOT
from cresowlve_core.sources.chgk import detect_encoding, parse_pack, read_pack

PACKS = REPO_ROOT / "data" / "chgk"


@pytest.fixture(scope="module")
def ingush_text() -> str:
    return (PACKS / "ingush16.txt").read_bytes().decode("koi8-r")


@pytest.mark.parametrize(
    "codec,prefix,expected",
    [
        ("utf-16-le", b"\xff\xfe", "utf-16"),
        ("utf-16-be", b"\xfe\xff", "utf-16"),
        ("utf-16-le", b"", "utf-16-le"),
        ("utf-16-be", b"", "utf-16-be"),
    ],
)
def test_utf16_pack_is_detected_and_parsed_like_the_original(ingush_text, codec, prefix, expected):
    data = prefix + ingush_text.encode(codec)
    assert detect_encoding(data) == expected
    report = parse_pack(data, name="ingush16.txt")
    original = parse_pack(ingush_text, name="ingush16.txt")
    assert report.encoding == expected
    assert report.n_decode_errors == 0 and not report.pack_flags
    assert [q.model_dump(exclude={"encoding"}) for q in report.questions] == [
        q.model_dump(exclude={"encoding"}) for q in original.questions
    ]
    assert report.n_blocks == 60


def test_utf16_4s_pack():
    text = (PACKS / "kubok_olgi_2015.4s").read_text(encoding="utf-8")
    report = parse_pack(b"\xff\xfe" + text.encode("utf-16-le"), name="kubok.4s")
    assert report.format == "4s" and report.encoding == "utf-16"
    assert report.n_blocks == parse_pack(text, name="kubok.4s").n_blocks > 0


def test_single_byte_packs_are_not_taken_for_utf16(ingush_text):
    assert detect_encoding(ingush_text.encode("koi8-r")) == "koi8-r"
    assert detect_encoding(ingush_text.encode("cp1251")) == "cp1251"


@pytest.mark.parametrize("content,flag", [(b"", "empty"), (b"\n  \n", "empty"), ("Чемпионат:\nКубок\n\nДата:\n01-Jan-2016\n".encode("koi8-r"), "no_questions")])
def test_empty_pack_is_a_warning(tmp_path, caplog, content, flag):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with caplog.at_level(logging.INFO, logger="cresowlve_core.sources.chgk"):
        questions = read_pack(path)
    assert questions == []
    [rec] = caplog.records
    assert rec.levelno == logging.WARNING
    assert "0 blocks" in rec.getMessage() and flag in rec.getMessage()


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_packs_joined_with_their_byte_order_marks_read_as_each_one_alone(ingush_text, line_end):
    """``cat a.txt b.txt`` of two packs saved as UTF-8 with a BOM: the second BOM hid the second pack's
    ``Чемпионат:`` line, which was read into the last answer of the first pack ("Магас.\\n\\ufeffЧемпионат:…"
    style), and the second pack's questions kept the first one's tournament, all flagged ok."""
    other = (PACKS / "rusch16.txt").read_bytes().decode("koi8-r")
    bom = b"\xef\xbb\xbf"
    parts = [text.replace("\n", line_end).encode("utf-8") for text in (ingush_text, other)]
    joined = parse_pack(bom + parts[0] + bom + parts[1], name="all.txt")
    alone = [parse_pack(bom + part, name="all.txt") for part in parts]
    assert joined.pack_flags == ["inner_byte_order_marks:1"]
    fields = ("id", "number", "question", "answer", "other_answers", "comment", "tournament", "flags")
    assert [q.model_dump(include=set(fields)) for q in joined.questions] == [
        q.model_dump(include=set(fields)) for report in alone for q in report.questions]
    assert not any("\ufeff" in q.raw for q in joined.questions)


def test_a_4s_pack_joined_after_another_keeps_its_own_header():
    first = "### Турнир А\n\n? Назовите столицу Ингушетии.\n! Магас.\n"
    second = "### Турнир Б\n\n? ЕГО называют ключом Нила. Назовите ЕГО.\n! Анх.\n"
    report = parse_pack(("\ufeff" + first + "\ufeff" + second).encode("utf-8"), name="all.4s")
    assert [(q.tournament, q.answer) for q in report.questions] == [("Турнир А", "Магас."), ("Турнир Б", "Анх.")]
    assert report.pack_flags == ["inner_byte_order_marks:1"]
