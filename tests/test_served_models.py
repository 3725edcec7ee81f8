"""Every model-calling stage records the model the provider's reply says answered (``served_model``),
counts it in its summary and warns on its summary line when more than one model answered under one
label (runtime/outcomes.py ``served_models`` / ``served_note``; eval: tests/evaluation/test_eval_providers.py).

The served model is the one OpenAI's recorded Chat Completions reply names when asked for ``gpt-4o-mini``:
the dated snapshot ``gpt-4o-mini-2024-07-18`` (tests/replay/fixtures/SOURCES.md). The texts are the stages'
own scripted answers (tests/stage_runs.py); only the reply's ``model`` is the recorded one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core import jsonl

RECORDED = Path(__file__).resolve().parent / "replay" / "fixtures" / "openai" / "chat_gpt4o_mini_success.json"
SNAPSHOT = json.loads(RECORDED.read_text(encoding="utf-8"))["body"]["model"]
LATER = "gpt-4o-mini-2025-01-01"  # a second snapshot behind the same alias (invented name)


class TwoSnapshots(FakeServer):
    """Replies naming :data:`SNAPSHOT` and :data:`LATER` in turn: one label, two models."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._turn = itertools.count()

    def build_body(self, req: Any, reply: Any, *, empty_text: bool = False) -> dict[str, Any]:
        body = super().build_body(req, reply, empty_text=empty_text)
        body["model"] = (SNAPSHOT, LATER)[next(self._turn) % 2]
        return body


def _create(srv: FakeServer, tmp: Path, capsys: Any) -> tuple[Path, list[dict[str, int]], str]:
    from cresowlve_core.create.records import score_line

    code, out = S.run_create(srv.base_url, tmp)
    assert code == 0
    line = capsys.readouterr().out
    scored = S.run_create_score(srv.base_url, out)
    generated = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return out, [generated["served_models"], scored.judge_served_models], line + score_line(scored)


def _build(srv: FakeServer, tmp: Path, capsys: Any) -> tuple[Path, list[dict[str, int]], str]:
    code, out = S.run_build(srv.base_url, tmp)
    line = capsys.readouterr().out
    steps = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "steps").glob("*/summary.json"))]
    return out, [s["served_models"] for s in steps if "served_models" in s], line


def _errors(srv: FakeServer, tmp: Path, capsys: Any) -> tuple[Path, list[dict[str, int]], str]:
    code, out = S.run_errors(srv.base_url, tmp)
    line = capsys.readouterr().out
    labels = [json.loads(p.read_text(encoding="utf-8")) for p in out.glob("labels/*/summary.json")]
    return out, [s["served_models"] for s in labels], line


def _contamination(srv: FakeServer, tmp: Path, capsys: Any) -> tuple[Path, list[dict[str, int]], str]:
    code, out = S.run_contamination(srv.base_url, tmp)
    line = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return out, [s["served_models"] for s in summary["steps"] if s["n_ok"]], line


def _synth(srv: FakeServer, tmp: Path, capsys: Any) -> tuple[Path, list[dict[str, int]], str]:
    from cresowlve_core.synthetic.pipeline import summary_line

    code, out = S.run_synth(srv.base_url, tmp)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return out, list(summary["served_models"].values()), summary_line(summary, out)


STAGES: dict[str, tuple[Callable[..., tuple[Path, list[dict[str, int]], str]], Any]] = {
    "create": (_create, S.create_answers), "build": (_build, S.build_answers), "errors": (_errors, S.errors_answers),
    "contamination": (_contamination, S.contamination_answers()), "synth": (_synth, S.synth_answers)}


def served_in_records(out: Path) -> list[Any]:
    """The ``served_model`` of every record (and solver side) in the stage's JSONL files that has one."""
    found: list[Any] = []

    def walk(rec: Any) -> None:
        if isinstance(rec, dict):
            if "served_model" in rec:
                found.append(rec["served_model"])
            for v in rec.values():
                walk(v)
        elif isinstance(rec, list):
            for v in rec:
                walk(v)

    for f in out.rglob("*.jsonl"):
        walk(jsonl.read_jsonl(f))
    return found


@pytest.mark.parametrize("stage", list(STAGES))
def test_each_record_names_the_model_that_answered_and_the_summary_counts_it(stage, tmp_path, capsys):
    run, answers = STAGES[stage]
    with FakeServer(answers=answers, model=SNAPSHOT) as srv:
        out, served, line = run(srv, tmp_path, capsys)
    recorded = served_in_records(out)
    assert recorded and set(recorded) == {SNAPSHOT}
    assert served and all(list(s) == [SNAPSHOT] and s[SNAPSHOT] > 0 for s in served)
    assert "models the provider named" not in line


@pytest.mark.parametrize("stage", list(STAGES))
def test_answers_from_two_models_under_one_label_are_counted_and_warned(stage, tmp_path, capsys):
    run, answers = STAGES[stage]
    with TwoSnapshots(answers=answers) as srv:
        out, served, line = run(srv, tmp_path, capsys)
    assert set(served_in_records(out)) == {SNAPSHOT, LATER}
    assert any(set(s) == {SNAPSHOT, LATER} for s in served)
    assert "from 2 models the provider named: gpt-4o-mini-2024-07-18 (" in line


def test_a_base_model_perturbers_synonym_calls_are_counted(tmp_path, monkeypatch):
    """Lexical substitution (a base-model perturber): the record is one question, its calls are the synonym
    calls inside it; each names the model that answered, and the perturbation step counts every one."""
    from test_contamination_substitute import base_model_answer, write_runs

    from cresowlve_core.contamination.pipeline import Role, run_contamination
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    write_runs(tmp_path)
    with FakeServer(answers=base_model_answer, model=SNAPSHOT) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        role = Role("gemma3-270m", srv.base_url)
        c = run_contamination(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", perturber=role,
                              quiz_taker=role, make_demo=False, concurrency=1, progress=False)
    (folder,) = (tmp_path / "out" / "perturb").iterdir()
    calls = [s for r in jsonl.read_jsonl(folder / "perturbations.jsonl") for s in r["synonyms"]]
    assert calls and {s["served_model"] for s in calls} == {SNAPSHOT}
    (step,) = [s for s in c.summary()["steps"] if s["step"] == "perturbation"]
    assert step["served_models"] == {SNAPSHOT: len(calls)}
    assert json.loads((folder / "summary.json").read_text(encoding="utf-8"))["served_models"] == {SNAPSHOT: len(calls)}


def test_a_base_model_translations_field_calls_are_counted(tmp_path, tmp_cache, monkeypatch):
    """A base model translates one field per call: each field's call names the model that answered, and the
    translate step counts every call (question + answer + accepted answers per item)."""
    from test_construction_fewshot import DEMO, BuildConfig, _base_model_reply, _run_steps

    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    with FakeServer(answers=_base_model_reply, model=SNAPSHOT) as srv:
        monkeypatch.setenv(PROVIDERS_ENV, f"{srv.base_url.split('/')[2]}=embedded")
        cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), sources=[DEMO], model="gemma3-270m",
                          base_url=srv.base_url, cache=False)
        _run_steps(cfg)
    recs = jsonl.read_jsonl(cfg.path / "steps" / "translate" / "records.jsonl")
    calls = [m for r in recs for m in r["field_served_models"].values()]
    assert len(calls) > len(recs) and set(calls) == {SNAPSHOT}
    summary = json.loads((cfg.path / "steps" / "translate" / "summary.json").read_text(encoding="utf-8"))
    assert summary["served_models"] == {SNAPSHOT: len(calls)}
