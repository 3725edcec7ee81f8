"""One resume identity per run directory: every setting that changes an answer
or a verdict, changed on a finished run directory, is refused naming the field (old → new), and
the manifest is left as it was; or, under the archive-on-change rule, the old run is archived."""

from __future__ import annotations

import json

import pytest

from cresowlve_core.runtime import ResumeError, RunDir
from cresowlve_core.runtime.rundir import ARCHIVE_CHANGED_ENV

JUDGE = {"model": "j", "base_url": "https://judge.example/v1", "provider": "openai", "api": "chat",
         "prompt": "judge@3", "protocol": "nonce-verdict", "effort": None, "seed": 0, "temperature": 0.0,
         "max_tokens": 512, "repeat": False, "sent": {"temperature": 0.0, "seed": 0, "max_tokens": 512}}
OPTIONS = {"temperature": 0.0, "max_tokens": 4096, "seed": 0, "extra_body": {}, "provider": None, "concurrency": 8}


def fields(**change):
    base = {"run_id": "r", "model": "m", "base_url": "https://api.example.com/v1", "provider": "openai", "api": "chat",
            "lang": "en", "items": "demo", "effort": None, "prompts": ["solve_cot_en@2", "judge@3"],
            "temperature": 0.0, "max_tokens": 4096, "seed": 0, "options": OPTIONS, "judge": JUDGE,
            "sent": {"temperature": 0.0, "seed": 0, "max_tokens": 4096},
            "config": {"judge_extra_body": {}, "retry_truncated": False}}
    for key, value in change.items():
        head, _, tail = key.partition("__")
        if tail:
            base[head] = {**base[head], tail: value}
        else:
            base[head] = value
    return base


def manifest(**change):
    from cresowlve_core.runtime import new_manifest

    return new_manifest("eval", **fields(**change))


# (the change, the field the refusal names)
CHANGES = [
    ({"model": "m2"}, "model"),
    ({"base_url": "https://other.example.com/v1"}, "base_url"),
    ({"provider": "openrouter"}, "provider"),
    ({"api": "responses"}, "api"),
    ({"prompts": ["solve_cot_en@3", "judge@3"]}, "prompts"),
    ({"temperature": 0.5, "options__temperature": 0.5, "sent__temperature": 0.5}, "temperature: 0.0 → 0.5"),
    ({"sent__top_p": 0.9, "options__extra_body": {"top_p": 0.9}}, "top_p: None → 0.9"),
    ({"max_tokens": 100, "options__max_tokens": 100}, "max_tokens: 4096 → 100"),
    ({"seed": 1, "options__seed": 1}, "seed: 0 → 1"),
    ({"effort": "high"}, "effort: None → 'high'"),
    ({"options__extra_body": {"reasoning": {"enabled": True}}}, "options.extra_body"),
    ({"judge__model": "j2"}, "judge.model: 'j' → 'j2'"),
    ({"judge__base_url": "https://judge2.example/v1"}, "judge.base_url"),
    ({"judge__provider": "gemini"}, "judge.provider"),
    ({"judge__api": "responses"}, "judge.api"),
    ({"judge__prompt": "judge_paper@1"}, "judge.prompt"),
    ({"judge__protocol": "paper"}, "judge.protocol"),
    ({"judge__effort": "low"}, "judge.effort"),
    ({"judge__seed": 3}, "judge.seed"),
    ({"judge__temperature": 0.7}, "judge.temperature: 0.0 → 0.7"),
    ({"judge__max_tokens": 8192}, "judge.max_tokens"),
    ({"judge__sent": {"temperature": 0.0, "seed": 0, "max_tokens": 512, "top_p": 0.5}}, "judge.top_p"),
    ({"config__judge_extra_body": {"top_k": 5}}, "judge.extra_body"),
    ({"judge": None}, "judge: {"),
]


def _finished(tmp_path, monkeypatch):
    monkeypatch.delenv(ARCHIVE_CHANGED_ENV, raising=False)
    run = RunDir(tmp_path / "run")
    m = run.begin(manifest())
    run.append("responses.jsonl", {"id": "a", "lang": "en"})
    run.finish(m)
    return (tmp_path / "run" / "manifest.json").read_text()


@pytest.mark.parametrize(("change", "named"), CHANGES, ids=[next(iter(c)) for c, _ in CHANGES])
def test_every_setting_that_changes_an_answer_is_refused_and_the_manifest_kept(change, named, tmp_path,
                                                                                monkeypatch):
    before = _finished(tmp_path, monkeypatch)
    with pytest.raises(ResumeError) as exc:
        RunDir(tmp_path / "run").begin(manifest(**change))
    assert named in str(exc.value), str(exc.value)
    assert (tmp_path / "run" / "manifest.json").read_text() == before  # not rewritten
    assert not (tmp_path / "archive").exists()


@pytest.mark.parametrize(("change", "named"), CHANGES[:3] + CHANGES[5:6] + CHANGES[11:12],
                         ids=lambda v: str(v))
def test_under_the_archive_rule_the_old_run_is_archived_whole(change, named, tmp_path, monkeypatch, capsys):
    before = _finished(tmp_path, monkeypatch)
    monkeypatch.setenv(ARCHIVE_CHANGED_ENV, "1")
    run = RunDir(tmp_path / "run")
    m = run.begin(manifest(**change))
    run.finish(m)
    (archived,) = (tmp_path / "archive").iterdir()
    assert (archived / "manifest.json").read_text() == before
    assert not (tmp_path / "run" / "responses.jsonl").exists()  # the new manifest describes no old record
    assert named.split(":")[0] in capsys.readouterr().out


def test_settings_that_change_no_answer_resume(tmp_path, monkeypatch):
    _finished(tmp_path, monkeypatch)
    run = RunDir(tmp_path / "run")
    m = run.begin(manifest(options={**OPTIONS, "concurrency": 64}, base_url="https://api.example.com/v1/"))
    run.finish(m)
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["options"]["concurrency"] == 64


def test_retry_truncated_may_raise_the_budget(tmp_path, monkeypatch):
    _finished(tmp_path, monkeypatch)
    run = RunDir(tmp_path / "run")
    run.finish(run.begin(manifest(max_tokens=8192, options__max_tokens=8192,
                                  config={"judge_extra_body": {}, "retry_truncated": True})))


def test_a_manifest_written_before_a_field_existed_still_resumes(tmp_path, monkeypatch):
    monkeypatch.delenv(ARCHIVE_CHANGED_ENV, raising=False)
    (tmp_path / "run").mkdir()
    old = {k: v for k, v in fields().items() if k not in ("api", "provider", "sent")}
    old["kind"] = "eval"
    old["judge"] = {k: v for k, v in JUDGE.items() if k not in ("api", "sent")}
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(old))
    run = RunDir(tmp_path / "run")
    run.finish(run.begin(manifest()))


def test_a_manifest_written_before_the_judges_extra_body_existed_still_resumes(tmp_path, monkeypatch):
    """A judged run of e980689 (2026-11-30): its config has no judge_extra_body, its judge section no extra_body.
    Before, `cresowlve eval` with the same options refused it: "the run directory holds another configuration
    (judge.extra_body: None → {})"."""
    monkeypatch.delenv(ARCHIVE_CHANGED_ENV, raising=False)
    (tmp_path / "run").mkdir()
    old = {**fields(), "kind": "eval", "config": {"retry_truncated": False}}
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(old))
    run = RunDir(tmp_path / "run")
    run.finish(run.begin(manifest()))


def _planned(tmp_path, monkeypatch, **plan):
    monkeypatch.delenv(ARCHIVE_CHANGED_ENV, raising=False)
    run = RunDir(tmp_path / "run")
    run.finish(run.begin(manifest(**plan)))
    return (tmp_path / "run" / "manifest.json").read_text()


@pytest.mark.parametrize("first", [{"n_items": 3, "limit": 3}, {"n_items": 9, "limit": None}], ids=["limit", "all"])
def test_a_smaller_limit_is_refused_and_the_manifest_kept(first, tmp_path, monkeypatch):
    """Its plan would leave answered units out of the manifest and the summary while the records keep them."""
    before = _planned(tmp_path, monkeypatch, **first)
    with pytest.raises(ResumeError) as exc:
        RunDir(tmp_path / "run").begin(manifest(n_items=2, limit=2))
    assert f"limit: {first['limit']!r} → 2 (plans 2 of the {first['n_items']} units" in str(exc.value)
    assert (tmp_path / "run" / "manifest.json").read_text() == before


@pytest.mark.parametrize("later", [{"n_items": 3, "limit": 3}, {"n_items": 5, "limit": 5}, {"n_items": 9, "limit": None}],
                         ids=["same", "larger", "none"])
def test_the_same_a_larger_or_no_limit_continues_the_run(later, tmp_path, monkeypatch):
    _planned(tmp_path, monkeypatch, n_items=3, limit=3)
    run = RunDir(tmp_path / "run")
    run.finish(run.begin(manifest(**later)))
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["n_items"] == later["n_items"]


def test_an_items_file_is_identified_by_its_content_where_both_manifests_record_it(tmp_path, monkeypatch):
    """Both manifests record the items file's SHA-256: another path resumes (the evaluation checks each
    answered item's text), the paths recorded in ``items_history``. An old manifest without it is
    identified by its path, as before."""
    digest = {"items_sha256": "ab" * 32}
    _planned(tmp_path, monkeypatch, items="/alice/items.jsonl", **digest)
    run = RunDir(tmp_path / "run")
    run.finish(run.begin(manifest(items="/bob/items.jsonl", **digest)))
    run.finish(run.begin(manifest(items="/carol/items.jsonl", items_sha256="cd" * 32)))
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["items_history"] == ["/alice/items.jsonl", "/bob/items.jsonl", "/carol/items.jsonl"]
    _planned(tmp_path / "old", monkeypatch, items="/alice/items.jsonl")
    with pytest.raises(ResumeError, match="items: '/alice/items.jsonl' → '/bob/items.jsonl'"):
        RunDir(tmp_path / "old" / "run").begin(manifest(items="/bob/items.jsonl", **digest))
