"""A run directory of another configuration: refused by default; archived and started afresh when
asked (``archive_changed=True`` or the main job's ``CRESOWLVE_ARCHIVE_CHANGED=1``)."""

from __future__ import annotations

import json

import pytest

from cresowlve_core.runtime import ResumeError, RunDir, new_manifest
from cresowlve_core.runtime.rundir import ARCHIVE_CHANGED_ENV


def _run(tmp_path, prompt: str) -> RunDir:
    run = RunDir(tmp_path / "step")
    m = run.begin(new_manifest("construction_reasoning", model="m", prompts=[prompt], n_items=2))
    run.append("records.jsonl", {"key": "a", "prompt": prompt})
    run.finish(m)
    return run


def test_another_configuration_is_refused_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv(ARCHIVE_CHANGED_ENV, raising=False)
    _run(tmp_path, "p@1")
    with pytest.raises(ResumeError, match=r"prompts: \['p@1'\] → \['p@2'\]"):
        RunDir(tmp_path / "step").begin(new_manifest("construction_reasoning", model="m", prompts=["p@2"], n_items=2))
    assert not (tmp_path / "archive").exists()


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_another_configuration_is_archived_when_asked(tmp_path, monkeypatch, capsys, how):
    monkeypatch.delenv(ARCHIVE_CHANGED_ENV, raising=False)
    _run(tmp_path, "p@1")
    kwargs = {"archive_changed": True} if how == "argument" else {}
    if how == "environment":
        monkeypatch.setenv(ARCHIVE_CHANGED_ENV, "1")
    run = RunDir(tmp_path / "step")
    m = run.begin(new_manifest("construction_reasoning", model="m", prompts=["p@2"], n_items=2), **kwargs)
    run.append("records.jsonl", {"key": "a", "prompt": "p@2"})
    run.finish(m)
    archived = list((tmp_path / "archive").iterdir())
    assert len(archived) == 1 and archived[0].name.startswith("step-")
    old = [json.loads(x) for x in (archived[0] / "records.jsonl").read_text().splitlines()]
    new = [json.loads(x) for x in (tmp_path / "step" / "records.jsonl").read_text().splitlines()]
    assert old == [{"key": "a", "prompt": "p@1"}] and new == [{"key": "a", "prompt": "p@2"}]
    assert json.loads((tmp_path / "step" / "manifest.json").read_text())["prompts"] == ["p@2"]
    assert "moved it to" in capsys.readouterr().out


def test_the_same_configuration_resumes_and_archives_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(ARCHIVE_CHANGED_ENV, "1")
    _run(tmp_path, "p@1")
    run = RunDir(tmp_path / "step")
    m = run.begin(new_manifest("construction_reasoning", model="m", prompts=["p@1"], n_items=2))
    run.finish(m)
    assert not (tmp_path / "archive").exists()
    assert (tmp_path / "step" / "records.jsonl").read_text().count("\n") == 1
