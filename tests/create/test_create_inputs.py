"""``create --queries`` errors name file:line, every check runs before
anything is written, and the lock is taken before the manifest is touched."""

from __future__ import annotations

import json

import pytest
from create_fakes import server_reply
from fakeserver import FakeServer

from cresowlve_core.cli import main
from cresowlve_core.create.queries import QueriesFileError, load_queries
from cresowlve_core.runtime import RunDir


def _rows() -> list[dict]:
    return [q.model_dump() for q in load_queries(limit=3)]


def _write(path, lines: list[str]):
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def _generate(base_url: str, queries, run_dir) -> int:
    return main(["create", "generate", "--model", "fake-model", "--base-url", base_url, "--queries", str(queries),
                 "--max-tokens", "64", "--run-dir", str(run_dir)])


@pytest.mark.parametrize("lines, message", [
    (lambda r: [json.dumps(r[0]), "{not json"], r"q\.jsonl:2: not JSON \(Expecting property name"),
    (lambda r: [json.dumps(r[0]), "42"], r"q\.jsonl:2: expected a JSON object \(one query per line\), got 42"),
    (lambda r: [json.dumps(r[0]), "", json.dumps({k: v for k, v in r[1].items() if k != "entity_b"})],
     r"q\.jsonl:3: not a CREATE query \(entity_b: Field required\)"),
    (lambda r: [json.dumps(r[0]), json.dumps(r[1]), json.dumps(r[0])],
     r"q\.jsonl: 1 duplicate query id\(s\): '.+' \(lines 1, 3\); ids must be unique"),
    (lambda r: ["", "  "], r"q\.jsonl: no queries in the file"),
    # a misspelt key was dropped: 'descripton' left the query without its category, and its id without it
    (lambda r: [json.dumps(r[0]), json.dumps({**r[1], "descripton": "Q1__P166"})],
     r"q\.jsonl:2: unknown field\(s\) 'descripton': a CREATE query has id, query, entity_a, entity_b, rel_b, "
     r"description, "),
])
def test_queries_file_errors_name_the_file_and_line(tmp_path, lines, message):
    path = _write(tmp_path / "q.jsonl", lines(_rows()))
    with pytest.raises(QueriesFileError, match=message):
        load_queries(path)


@pytest.mark.parametrize("field", ["entity_a", "entity_b", "rel_b"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_entity_or_relation_is_refused_naming_the_line(tmp_path, field, value):
    # an empty entity_a is a substring of every triple: every path passed its check, without a word
    from cresowlve_core.create.paths import check_validity

    assert check_validity([["Leonard Bernstein", "award received", "Grammy"]], "", "Grammy").valid
    rows = _rows()
    path = _write(tmp_path / "q.jsonl", [json.dumps(rows[0]), json.dumps({**rows[1], "id": "q2", field: value})])
    with pytest.raises(QueriesFileError) as err:
        load_queries(path)
    assert str(err.value) == f"{path}:2: {field}: must not be empty"


def test_cp1251_queries_file_names_the_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_bytes(json.dumps(_rows()[0]).encode() + b"\n" + '{"query": "Вопрос"}\n'.encode("cp1251"))
    with pytest.raises(QueriesFileError, match=r"q\.jsonl:2: not UTF-8 \(byte 0x"):
        load_queries(path)


def test_duplicate_query_ids_are_refused_before_anything_is_written(tmp_path, capsys):
    rows = _rows()
    queries = _write(tmp_path / "dup.jsonl", [json.dumps(rows[0]), json.dumps(rows[0])])
    run_dir = tmp_path / "run"
    with FakeServer(answers=server_reply) as srv:
        code = _generate(srv.base_url, queries, run_dir)
        assert srv.total == 0
    err = capsys.readouterr().err
    assert code == 2 and "dup.jsonl: 1 duplicate query id(s)" in err and "(lines 1, 2)" in err
    assert not (run_dir / "manifest.json").exists()  # before: written, then the refusal


def test_a_second_process_refused_by_the_lock_leaves_the_manifest_untouched(tmp_path, capsys):
    queries = _write(tmp_path / "q.jsonl", [json.dumps(r) for r in _rows()[:2]])
    run_dir = tmp_path / "run"
    with FakeServer(answers=server_reply) as srv:
        assert _generate(srv.base_url, queries, run_dir) == 0
        before = (run_dir / "manifest.json").read_bytes()
        sent = srv.total
        with RunDir(run_dir).lock():  # another process holds the run directory (flock: per open file)
            code = _generate(srv.base_url, queries, run_dir)
        assert srv.total == sent
    assert code == 2 and "is in use by another process" in capsys.readouterr().err
    assert (run_dir / "manifest.json").read_bytes() == before  # before: rewritten with a new resumed_at
