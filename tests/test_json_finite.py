"""No file the project writes holds ``NaN`` or ``Infinity``: one JSON writer (``jsonl.dumps``,
``allow_nan=False``) writes a non-finite float as ``null``, and usage that is not a usable number
(a provider sending ``NaN``, ``1e999``, a negative count) is unknown, never a dropped answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core import jsonl, outfiles
from cresowlve_core.llm.cache import canonical_json

ODD = {"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": {"d": np.float32("nan"), "e": np.float64(2.0)},
       "f": (float("nan"),), "g": np.array([1.0, np.nan]), "h": np.int64(3)}
BARE = re.compile(r"\bNaN\b|-?\bInfinity\b")


def test_the_one_writer_never_writes_nan_or_infinity(tmp_path: Path) -> None:
    strict = {"parse_constant": lambda c: pytest.fail(f"non-standard constant {c}")}
    for text in (jsonl.dumps(ODD), jsonl.dumps_line(ODD), outfiles.dumps_json(ODD), canonical_json(ODD)):
        assert not BARE.search(text), text
        json.loads(text, **strict)
    assert [json.loads(line, **strict) for line in jsonl.dumps_lines([ODD, ODD]).split("\n") if line]
    assert json.loads(jsonl.dumps(ODD)) == {"a": None, "b": [None, None, 1.5], "c": {"d": None, "e": 2.0},
                                           "f": [None], "g": [1.0, None], "h": 3}
    outfiles.write_json(tmp_path / "s.json", ODD)
    jsonl.write_jsonl(tmp_path / "r.jsonl", [ODD])
    assert not any(BARE.search(p.read_text()) for p in tmp_path.iterdir())


def test_no_json_writer_outside_the_one_module() -> None:
    """A grep of the package: files are written through jsonl.dumps (outfiles.write_json, write_jsonl),
    never with json.dump / json.dumps / DataFrame.to_json straight to a file."""
    pkg = Path(jsonl.__file__).parent
    bad = []
    for f in pkg.rglob("*.py"):
        for n, line in enumerate(f.read_text(encoding="utf-8").split("\n"), 1):
            if re.search(r"json\.dump\(|\.to_json\(|write_text\([^)]*json\.dumps", line):
                bad.append(f"{f.relative_to(pkg)}:{n}")
    assert bad == []


ODD_USAGE = {"prompt_tokens": float("nan"), "completion_tokens": float("inf"), "total_tokens": -5}


def no_bare_constants(out: Path) -> list[str]:
    """Files under ``out`` holding a bare NaN or Infinity (what ``grep -l 'NaN\\|Infinity'`` would find)."""
    return [str(p) for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")
            and BARE.search(p.read_text(encoding="utf-8", errors="replace"))]


def test_eval_keeps_answers_with_nan_usage_and_writes_no_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"), FakeServer(answers=S.eval_answers, usage_override=ODD_USAGE) as srv:
        code, out = S.run_eval(srv.base_url, tmp_path)
        assert code == 0, capsys.readouterr().err
        assert srv.total == 8  # 4 answers + 4 verdicts, none retried
    recs = jsonl.read_jsonl(out / "responses.jsonl")
    assert {r["status"] for r in recs} == {"ok"}
    assert all(r["usage"]["input_tokens"] is None and r["usage"]["output_tokens"] is None for r in recs)
    assert no_bare_constants(out) == []
    warned = [r for r in caplog.records if "not a usable number" in r.getMessage()]
    assert 1 <= len(warned) <= 2  # one per client (the model's and the judge's)


@pytest.mark.parametrize("stage", ["create", "build", "errors", "contamination"])
def test_every_stage_writes_no_nan_from_nan_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str], stage: str) -> None:
    answers = {"create": S.create_answers, "build": S.build_answers, "errors": S.errors_answers,
               "contamination": S.contamination_answers()}[stage]
    run = {"create": S.run_create, "build": S.run_build, "errors": S.run_errors,
           "contamination": S.run_contamination}[stage]
    with FakeServer(answers=answers, usage_override=ODD_USAGE) as srv:
        code, out = run(srv.base_url, tmp_path)
    assert code == 0, capsys.readouterr().err
    assert no_bare_constants(out) == []
