"""Input limits, enforced by every stage's reader (cresowlve_core/inputs.py).

A NUL (or another control character) in a question or query, a question or query above 64 KB
(unless ``--max-input-chars`` raises it) and an empty field are refused with exit 2 and
``file:line`` before any request reaches the (fake) server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core.create.queries import QueriesFileError, load_queries
from cresowlve_core.inputs import DEFAULT_MAX_INPUT_CHARS, text_problem
from cresowlve_core.items import Item, ItemView
from cresowlve_core.sources.hub import ItemsFileError
from cresowlve_core.sources.sample import load_items

BIG = 70_000  # above the 65,536-character default


def items_with(tmp: Path, question: str) -> Path:
    """An items file whose second item (line 2) has ``question``."""
    items = S.eval_items()
    items[1] = Item(id=items[1].id, en=ItemView(question=question, answer="Answer1"))
    return S.write_items(tmp / "eval_items.jsonl", items)


def run_eval(srv: FakeServer, tmp: Path, items: Path, *extra: str) -> int:
    from cresowlve_core.cli import main

    return main(["eval", "--model", "fake-model", "--base-url", srv.base_url, "--items", str(items), "--lang", "en",
                 "--run-dir", str(tmp / "eval_run"), "--judge-model", "fake-judge", "--judge-base-url", srv.base_url,
                 "--max-tokens", "64", "--concurrency", "2", *extra])


def queries_with(tmp: Path, query: str) -> Path:
    """The first two shipped queries, the second (line 2) with ``query``."""
    rows = [q.model_dump() for q in load_queries(limit=2)]
    rows[1]["query"] = query
    path = tmp / "q.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def create_answers(req):
    """The CREATE fakes' reply; a plain one for the query they do not know (the long one)."""
    try:
        return S.create_answers(req)
    except StopIteration:
        return "No path found."


def run_create(srv: FakeServer, tmp: Path, queries: Path, *extra: str) -> int:
    from cresowlve_core.cli import main

    return main(["create", "generate", "--model", "fake-model", "--base-url", srv.base_url, "--limit", "2",
                 "--max-tokens", "512", "--run-dir", str(tmp / "create_run"), "--queries", str(queries), *extra])


# --------------------------------------------------------------------------- the shared check


@pytest.mark.parametrize("text,why", [("", "must not be empty"), ("  \n\t", "must not be empty"),
                                      ("a\x00b", "U+0000 at character 2"), ("a\x1bb", "U+001B"),
                                      ("a\rb", "U+000D"), ("a\x85b", "U+0085"),
                                      ("x" * (DEFAULT_MAX_INPUT_CHARS + 1), "--max-input-chars")])
def test_refused_texts(text, why):
    problem = text_problem(text, "question")
    assert problem is not None and problem.startswith("question: ") and why in problem


@pytest.mark.parametrize("text", ["tab\there", "two\nlines", "crlf\r\nline", "x" * DEFAULT_MAX_INPUT_CHARS,
                                  "Unicode \u2028 é 𝔸"])
def test_accepted_texts(text):
    assert text_problem(text, "question") is None


def test_an_answer_is_not_size_limited_but_a_question_can_be_raised():
    assert text_problem("x" * BIG, "answer", size_limited=False) is None
    assert text_problem("x" * BIG, "question", max_chars=100_000) is None
    assert "100,000" in (text_problem("x" * 100_001, "question", max_chars=100_000) or "")


# --------------------------------------------------------------------------- eval


def test_eval_refuses_a_nul_in_a_question_with_file_line_and_sends_nothing(tmp_path, capsys):
    items = items_with(tmp_path, "Who is\x00X?")
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, items) == 2
        assert srv.total == 0
    err = capsys.readouterr().err
    assert f"{items}:2 (id='chgk_0000000001'): en.question: control character U+0000" in err
    assert not (tmp_path / "eval_run").exists()


def test_eval_refuses_an_empty_answer_in_an_item_row(tmp_path, capsys):
    items = S.eval_items()
    items[2] = Item(id=items[2].id, en=ItemView(question="Puzzle number 2: who?", answer=" "))
    path = S.write_items(tmp_path / "eval_items.jsonl", items)
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, path) == 2
        assert srv.total == 0
    assert f"{path}:3 (id='chgk_0000000002'): en.answer: must not be empty" in capsys.readouterr().err


def test_eval_refuses_a_long_question_unless_max_input_chars_raises_it(tmp_path, capsys):
    items = items_with(tmp_path, "Puzzle number 1: " + "x" * BIG)
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, items) == 2
        assert srv.total == 0
        err = capsys.readouterr().err
        assert f"{items}:2" in err and "above the limit of 65,536" in err and "--max-input-chars" in err
        assert run_eval(srv, tmp_path, items, "--max-input-chars", "100000") == 0, capsys.readouterr().err
        assert srv.total == 8  # 4 answers + 4 verdicts: the long question was sent
    summary = json.loads((tmp_path / "eval_run" / "summary.json").read_text())
    assert summary["n_items"] == 4


def test_published_rows_are_checked_too(tmp_path):
    path = tmp_path / "pub.jsonl"
    row = {"id": "chgk_a", "question": "Who\x07?", "answer": "A", "explanation": None, "other_answers": None,
           "difficulty": None, "reasoning_type": None, "knowledge_domains": [], "creative_domains": [],
           "cultures": []}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ItemsFileError, match=r"pub\.jsonl:1 \(id='chgk_a'\): en\.question: control character U\+0007"):
        load_items(str(path), "en")


# --------------------------------------------------------------------------- CREATE


@pytest.mark.parametrize("query,why", [("", "query: must not be empty"), ("What\x00?", "U+0000")])
def test_create_refuses_an_empty_or_nul_query_and_sends_nothing(tmp_path, capsys, query, why):
    queries = queries_with(tmp_path, query)
    with FakeServer(answers=S.create_answers) as srv:
        assert run_create(srv, tmp_path, queries) == 2
        assert srv.total == 0
    err = capsys.readouterr().err
    assert f"{queries}:2: " in err and why in err


def test_create_refuses_a_long_query_unless_max_input_chars_raises_it(tmp_path, capsys):
    queries = queries_with(tmp_path, "What connects " + "y" * BIG + "?")
    with pytest.raises(QueriesFileError, match="--max-input-chars"):
        load_queries(queries)
    with FakeServer(answers=create_answers) as srv:
        assert run_create(srv, tmp_path, queries) == 2
        assert srv.total == 0
        assert "--max-input-chars" in capsys.readouterr().err
        assert run_create(srv, tmp_path, queries, "--max-input-chars", "100000") == 0, capsys.readouterr().err
        assert srv.total == 2  # both queries asked, the long one included
        assert any("y" * BIG in r.prompt for r in srv.requests)
