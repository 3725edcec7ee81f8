"""Run directories record their layout (``format_version``); an older layout is read through one
upgrade function (runtime/manifest.upgrade_manifest), a newer one is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.runtime import RunDir, RunDirError, new_manifest
from cresowlve_core.runtime.manifest import FORMAT_VERSION, Manifest, upgrade_manifest

#: an evaluation run directory of layout 1: no kind, ``prompt: {name, version}``, no ``format_version``,
#: records with top-level em booleans and no ``scores``
OLD_EVAL_MANIFEST = {"run_id": "old", "model": "m", "base_url": "http://x/v1", "lang": "en", "items": "test",
                     "n_items": 2, "prompt": {"name": "solve_cot_en", "version": "2"}}
OLD_RECORDS = [
    {"id": "chgk_1", "lang": "en", "status": "ok", "model": "m", "answer": "A", "prediction": "A",
     "raw_output": "<Answer>A</Answer>", "em_strict": True, "em_lenient": True},
    {"id": "chgk_2", "lang": "en", "status": "ok", "model": "m", "answer": "B", "prediction": "C",
     "raw_output": "<Answer>C</Answer>", "em_strict": False, "em_lenient": False},
]


def _old_eval_run(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps(OLD_EVAL_MANIFEST), encoding="utf-8")
    (path / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in OLD_RECORDS), encoding="utf-8")
    return path


def test_an_old_evaluation_run_directory_reads_in_the_current_layout(tmp_path):
    run = _old_eval_run(tmp_path / "old")
    m = RunDir(run).read_manifest()
    assert m is not None and m.format_version == FORMAT_VERSION == 2
    assert m.kind == "eval" and m.prompts == ["solve_cot_en@2"]
    loaded = load_runs(str(run))
    assert loaded.responses["em_strict"].tolist() == [1.0, 0.0]
    assert loaded.responses["em_lenient"].tolist() == [1.0, 0.0]
    assert json.loads((run / "manifest.json").read_text()) == OLD_EVAL_MANIFEST  # reading rewrites nothing


def test_a_create_generation_manifest_of_layout_1_becomes_the_runtimes():
    old = {"kind": "create", "model": "old-model", "seed": 3, "temperature": 0.7, "max_tokens": 4096,
           "variation": "resample", "n_samples": 2, "queries_path": "data/create/queries.jsonl", "n_queries": 5}
    new = upgrade_manifest(old)
    assert new["kind"] == "create_generate" and new["items"] == "shipped" and new["n_items"] == 5
    assert new["identity"] == {"variation": "resample", "n_samples": 2, "n_rounds": 1, "seed": 3,
                               "temperature": 0.7, "max_tokens": 4096}
    assert new["format_version"] == FORMAT_VERSION
    mine = upgrade_manifest({**old, "queries_path": "/elsewhere/mine.jsonl"})
    assert mine["items"] == "/elsewhere/mine.jsonl"


def test_a_current_manifest_passes_unchanged():
    current = new_manifest("eval", model="m", base_url="http://127.0.0.1:9/v1", prompts=["solve_cot_en@2"])
    data = current.model_dump(mode="json")
    assert upgrade_manifest(data) == data
    assert Manifest.model_validate(data) == current


def test_a_newer_layout_is_refused(tmp_path):
    run = tmp_path / "new"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({**OLD_EVAL_MANIFEST, "kind": "eval",
                                                   "format_version": FORMAT_VERSION + 1}), encoding="utf-8")
    with pytest.raises(RunDirError, match="format_version 3 is newer than this cresowlve reads"):
        RunDir(run).read_manifest()


def test_a_run_directory_records_its_format_version_in_the_manifest_and_the_summary(tmp_path):
    run = RunDir(tmp_path / "run")
    manifest = run.begin(new_manifest("eval", model="m", base_url="http://127.0.0.1:9/v1"))
    run.finish(manifest, summary={"n_items": 0})
    assert json.loads((run.path / "manifest.json").read_text())["format_version"] == FORMAT_VERSION
    assert json.loads((run.path / "summary.json").read_text()) == {"format_version": FORMAT_VERSION, "n_items": 0}


def test_resuming_an_old_run_directory_records_the_current_layout(tmp_path):
    run = RunDir(_old_eval_run(tmp_path / "old"))
    old = run.read_manifest()
    assert old is not None
    resumed = run.begin(new_manifest("eval", model="m", base_url="http://x/v1", lang="en", items="test",
                                     prompts=["solve_cot_en@2"]))
    run.finish(resumed)
    assert json.loads((run.path / "manifest.json").read_text())["format_version"] == FORMAT_VERSION
