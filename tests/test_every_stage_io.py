"""U+2028, U+2029 and U+0085 in an answer, through every stage's files.

``str.splitlines()`` splits on these, JSON does not: an answer holding one used to make the
run directory unreadable (``responses.jsonl:1: not JSON``, exit 2 on every resume and rescore).
Every stage now writes them escaped and reads lines split on ``"\\n"`` only; old run directories
written raw stay readable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core import jsonl
from cresowlve_core.cli import main
from cresowlve_core.runtime.rundir import read_jsonl

SEPS = "\u2028\u2029\x85"
NOTE = f"note{SEPS}end"


def check_files(out: Path) -> int:
    """Every JSONL file under ``out`` reads back, holds no raw separator; returns how many hold
    the escaped note."""
    found = 0
    files = [p for p in out.rglob("*.jsonl")]
    assert files, f"no JSONL file under {out}"
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert not any(c in text for c in SEPS), f"{f}: a raw line separator was written"
        jsonl.read_jsonl(f)  # one record per "\n" line, all of them JSON objects
        found += "note\\u2028\\u2029\\u0085end" in text
    return found


# --------------------------------------------------------------------------- the reader and writer


def test_dumps_line_escapes_the_separators_and_round_trips():
    rec = {"a": f"x{SEPS}y", "b": "ü\n\t"}
    line = jsonl.dumps_line(rec)
    assert "\n" not in line and not any(c in line for c in SEPS)
    assert "\\u2028\\u2029\\u0085" in line and "ü" in line  # other text stays readable UTF-8
    assert json.loads(line) == rec
    assert len(str.splitlines(jsonl.dumps_lines([rec, rec]))) == 2


def test_old_files_written_raw_stay_readable(tmp_path):
    path = tmp_path / "responses.jsonl"
    raw = [{"id": "a", "raw_output": f"one{SEPS}two"}, {"id": "b", "raw_output": "\x1c\x1d\x1e\x0b\x0c"}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in raw), encoding="utf-8")
    assert len(path.read_text(encoding="utf-8").splitlines()) > 2  # what the old reader split into
    assert read_jsonl(path) == raw
    assert jsonl.read_jsonl(path) == raw


def test_a_torn_last_line_is_skipped_only_when_unterminated(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n{"a": 2', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}]
    path.write_text('{"a": 1}\n{"a": 2\n{"a": 3}\n', encoding="utf-8")
    with pytest.raises(Exception, match=r"r\.jsonl:2: not JSON"):
        read_jsonl(path)


def test_no_jsonl_reading_or_writing_outside_the_one_module():
    """A grep of the package: no ``splitlines`` over a file's text, no ``json.dumps(...) + "\\n"``."""
    import re

    pkg = Path(jsonl.__file__).parent
    bad = []
    for f in pkg.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        for n, line in enumerate(text.split("\n"), 1):
            if re.search(r"read_text\([^)]*\)\.splitlines\(\)|\.decode\([^)]*\)\.splitlines\(\)", line) and "prompts" not in str(f) \
                    and "pricing" not in str(f):
                bad.append(f"{f.name}:{n}")
            if re.search(r"json\.dumps\(.*\+ \"\\n\"", line) or "model_dump_json() + " in line:
                bad.append(f"{f.name}:{n}")
    assert bad == []


# --------------------------------------------------------------------------- every stage


def test_eval_resume_and_rescore_with_separators_in_answers(tmp_path, capsys):
    with FakeServer(answers=S.answers_with(S.eval_answers, NOTE)) as srv:
        code, out = S.run_eval(srv.base_url, tmp_path)
        assert code == 0, capsys.readouterr().err
        sent = srv.total
        assert sent == 8  # 4 answers + 4 verdicts
        again, _ = S.run_eval(srv.base_url, tmp_path)
        assert again == 0 and srv.total == sent  # resumed: nothing re-sent
    assert main(["rescore", "--run-dir", str(out)]) == 0
    assert check_files(out) >= 1
    recs = read_jsonl(out / "responses.jsonl")
    assert sum(NOTE in (r.get("raw_output") or "") for r in recs) >= 4


def test_eval_resumes_a_run_directory_written_raw(tmp_path, capsys):
    """A run directory of the old writer (raw separators) resumes and rescores."""
    with FakeServer(answers=S.answers_with(S.eval_answers, NOTE)) as srv:
        code, out = S.run_eval(srv.base_url, tmp_path)
        assert code == 0
        path = out / "responses.jsonl"
        raw = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in jsonl.read_jsonl(path))
        path.write_text(raw, encoding="utf-8")
        assert "\u2028" in path.read_text(encoding="utf-8")
        sent = srv.total
        assert S.run_eval(srv.base_url, tmp_path)[0] == 0 and srv.total == sent
    assert main(["rescore", "--run-dir", str(out)]) == 0


def test_create_generate_and_score_with_separators(tmp_path, capsys):
    with FakeServer(answers=S.answers_with(S.create_answers, NOTE)) as srv:
        code, out = S.run_create(srv.base_url, tmp_path)
        assert code == 0, capsys.readouterr().err
        s = S.run_create_score(srv.base_url, out)
        assert s.n_valid == 4
        sent = srv.total
        assert S.run_create(srv.base_url, tmp_path)[0] == 0
        assert S.run_create_score(srv.base_url, out).n_valid == 4 and srv.total == sent
    assert check_files(out) >= 1


def test_create_generate_accepts_a_queries_file_holding_u2028(tmp_path, capsys):
    from cresowlve_core.create.queries import load_queries

    rows = [q.model_dump() for q in load_queries(limit=2)]
    rows[0]["description"] = f"a{SEPS}b"
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert [q.description for q in load_queries(queries)] == [f"a{SEPS}b", rows[1]["description"]]
    with FakeServer(answers=S.create_answers) as srv:
        code, _ = S.run_create(srv.base_url, tmp_path, queries)
    assert code == 0, capsys.readouterr().err


def test_construction_steps_with_separators(tmp_path, capsys):
    with FakeServer(answers=S.answers_with(S.build_answers, NOTE)) as srv:
        code, out = S.run_build(srv.base_url, tmp_path)
        assert code == 0, capsys.readouterr().err
        sent = srv.total
        assert S.run_build(srv.base_url, tmp_path)[0] == 0 and srv.total == sent
    assert check_files(out / "steps") >= 1


def test_errors_labels_with_separators(tmp_path, capsys):
    with FakeServer(answers=S.answers_with(S.errors_answers, NOTE)) as srv:
        code, out = S.run_errors(srv.base_url, tmp_path)
        assert code == 0, capsys.readouterr().err
        sent = srv.total
        assert sent == 4 and S.run_errors(srv.base_url, tmp_path)[0] == 0 and srv.total == sent
    assert check_files(out) >= 1


def test_contamination_with_separators(tmp_path, capsys):
    with FakeServer(answers=S.answers_with(S.contamination_answers(), NOTE)) as srv:
        code, out = S.run_contamination(srv.base_url, tmp_path)
        assert code == 0, capsys.readouterr().err
        sent = srv.total
        assert S.run_contamination(srv.base_url, tmp_path)[0] == 0 and srv.total == sent
    assert check_files(out) >= 1


@pytest.mark.embeddings
def test_synth_with_separators(tmp_path):
    with FakeServer(answers=S.answers_with(S.synth_answers, NOTE)) as srv:
        code, out = S.run_synth(srv.base_url, tmp_path)
        assert code == 0
        sent = srv.total
        assert S.run_synth(srv.base_url, tmp_path)[0] == 0 and srv.total == sent
    assert check_files(out) >= 1
