"""``cresowlve build`` stops and exits as docs/reliability.md says.

Before: a signal ended with an ``error:`` line instead of ``interrupted (…)``, and with SIGINT
ignored SIGTERM wrote no summary; per-item errors exited 0 with no stderr line; a build from an
empty pack exited 0 with no warning.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import fakeserver
import pytest
from fakeserver import FakeServer
from stophelp import last_line, n_lines, signal_mid_step, spawn_cli, wait_until
from test_construction_pipeline import DEMO, scripted

from cresowlve_core.cli import main
from cresowlve_core.construction.collect import SAMPLE_RULE
from cresowlve_core.construction.llm_steps import LLM_STEPS, refuse_changed_collection
from cresowlve_core.paths import shipped_data
from cresowlve_core.runtime.manifest import ResumeError, new_manifest


def _args(tmp_path: Path, base_url: str, *extra: str) -> list[str]:
    return ["build", "--source", DEMO, "--model", "fake", "--base-url", base_url, "--build-dir",
            str(tmp_path / "build"), "--no-cache", "--agreement-n", "3", "--concurrency", "2", *extra]


@pytest.mark.parametrize("signum,ignore_sigint,code", [(signal.SIGTERM, True, 143), (signal.SIGINT, False, 130)])
def test_a_signal_stops_the_step_skips_the_rest_and_writes_the_summary(tmp_path, signum, ignore_sigint, code):
    build = tmp_path / "build"
    with FakeServer(answers=scripted, latency_s=0.3) as srv:
        proc = spawn_cli(_args(tmp_path, srv.base_url), ignore_sigint=ignore_sigint,
                         env={"CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")})
        stdout, stderr, after = signal_mid_step(proc, srv, "2 translate records", lambda: n_lines(build, "steps/translate/records.jsonl") >= 2, signum, timeout=90)
    assert proc.returncode == code, stderr
    assert after <= 2, f"{after} requests after the signal (concurrency 2)"
    summary = json.loads((build / "build.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["stopped_at"] == "translate"
    assert list(summary["steps"]) == ["collect", "needs_material", "russian_specific", "translate"]
    assert not (build / "steps" / "reasoning").exists() and not (build / "export").exists()  # the rest: skipped
    name = "SIGTERM" if code == 143 else "Ctrl-C"
    assert last_line(stderr).startswith(f"interrupted ({name}): ") and "calls done" in last_line(stderr)


def test_per_item_errors_exit_1_with_a_last_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")
    with FakeServer(answers=scripted, faults=lambda r: "400" if r.index == 0 else None) as srv:
        rc = main(_args(tmp_path, srv.base_url))
    out = capsys.readouterr()
    assert rc == 1, out.err  # before: exit 0, no stderr line
    assert (tmp_path / "build" / "export" / "DATA_CARD.md").exists()  # the build finished, the item flagged
    assert last_line(out.err).startswith("incomplete: 1 errored, 0 not run of ") and "context length" in out.err


def test_a_build_from_an_empty_pack_is_refused_and_names_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack = tmp_path / "empty.txt"
    pack.write_text("", encoding="utf-8")
    rc = main(["build", "--source", str(pack), "--model", "fake", "--base-url", "http://127.0.0.1:9/v1",
               "--build-dir", str(tmp_path / "build")])
    err = capsys.readouterr().err
    assert rc == 2, err  # before: exit 0, no warning
    assert last_line(err).startswith("error: no usable question in ") and "empty.txt" in last_line(err)
    assert "empty" in last_line(err).split("empty.txt", 1)[1]  # the pack flag says why


def test_a_second_build_on_a_build_directory_in_use_is_refused_before_it_writes_or_sends(tmp_path, capsys):
    """Before: only the step run directory in use refused it. A second build, started while the first was
    on russian_specific, collected its own sample over the first's (collect/report.json, build.json),
    ran the steps the first had left and was refused only at the step the first held (by hand, with
    a larger --limit: 2 more needs_material and russian_specific calls, then exit 2 at translate)."""
    build = tmp_path / "build"
    with FakeServer(answers=scripted, latency_s=0.3) as srv:
        proc = spawn_cli(_args(tmp_path, srv.base_url), env={"CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")})
        try:
            wait_until("a russian_specific record", lambda: n_lines(build, "steps/russian_specific/records.jsonl") >= 1,
                       proc)
            sent = srv.total
            written = {f: (build / f).read_bytes() for f in ("collect/report.json", "build.json")}
            rc = main(_args(tmp_path, srv.base_url, "--limit", "4"))
            err = capsys.readouterr().err
            assert rc == 2 and last_line(err) == (f"error: {build} is in use by another process (lock .lock); "
                                                  "wait for it to finish, or use another run directory"), err
            assert {f: (build / f).read_bytes() for f in written} == written  # its own sample not written over
            assert srv.total - sent <= 4  # the first build's calls meanwhile (concurrency 2)
        finally:
            proc.communicate(timeout=120)
    assert proc.returncode in (0, 1)


def test_a_smaller_limit_is_refused_before_it_collects_over_the_build_and_a_larger_one_continues(tmp_path, capsys,
                                                                                                  monkeypatch):
    """``build --limit 4`` then ``--limit 2`` on one build directory was accepted: collect/report.json,
    build.json and the export were written for 2 items and every step's summary counted 2 while its
    records held 4 (no step manifest recorded the limit). The first step's manifest records it, and a
    smaller one is refused after collecting, before anything is written or sent (exit 2, naming it)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    build = tmp_path / "build"
    with FakeServer(answers=lambda req: "I cannot say.") as srv:  # nothing parses: no embedding model needed
        assert main(_args(tmp_path, srv.base_url, "--limit", "4")) == 1
        written = {f: (build / f).read_bytes() for f in ("collect/report.json", "build.json", "export/full.jsonl",
                                                          "steps/needs_material/manifest.json",
                                                          "steps/translate/summary.json")}
        sent = srv.total
        capsys.readouterr()
        rc = main(_args(tmp_path, srv.base_url, "--limit", "2"))
        err = capsys.readouterr().err
        assert rc == 2 and last_line(err).startswith(
            f"error: {build / 'steps' / 'needs_material'}: the run directory holds another configuration "
            "(limit: 4 → 2 (plans 2 of the 4 units it planned"), err
        assert srv.total == sent
        assert {f: (build / f).read_bytes() for f in written} == written
        assert main(_args(tmp_path, srv.base_url, "--limit", "5")) == 1
    summary = json.loads((build / "steps" / "needs_material" / "summary.json").read_text())
    assert summary["n_units"] == n_lines(build, "steps/needs_material/records.jsonl") == 5


def test_a_collection_of_other_items_is_refused_before_it_collects_over_the_build(tmp_path, capsys, monkeypatch):
    """A build resumed with another --source (or --per-level) collected other items into the same step
    directories: a source holding 5 of the demo's 8 Russian items, after a build of all 8, made every
    step's summary count 5 while its records held 8, and wrote the export without the 3 (no step manifest
    records the sources or the sample). A collection that leaves out items the first step holds records
    of is refused before anything is written or sent, naming the directory and how many."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    build = tmp_path / "build"
    lines = Path(DEMO).read_text(encoding="utf-8").splitlines(keepends=True)
    russian = [line for line in lines if json.loads(line).get("ru")]
    fewer = tmp_path / "fewer.jsonl"
    fewer.write_text("".join(russian[:5]), encoding="utf-8")
    with FakeServer(answers=lambda req: "I cannot say.") as srv:  # nothing parses: no embedding model needed
        assert main(_args(tmp_path, srv.base_url)) == 1
        written = {f: (build / f).read_bytes() for f in ("collect/report.json", "build.json", "export/full.jsonl",
                                                          "steps/needs_material/summary.json")}
        sent = srv.total
        capsys.readouterr()
        rc = main(["build", "--source", str(fewer), *_args(tmp_path, srv.base_url)[3:]])  # DEMO's place
        err = capsys.readouterr().err
        assert srv.total == sent
    assert rc == 2 and last_line(err).startswith(
        f"error: {build / 'steps' / 'needs_material'}: holds the records of 3 item(s) this build does not collect ("), err
    assert "another --source, --per-level or --limit" in last_line(err)
    assert {f: (build / f).read_bytes() for f in written} == written


def test_a_pilot_build_extended_with_a_larger_limit_continues_and_sends_only_the_new_items(tmp_path, capsys,
                                                                                           monkeypatch):
    """A fresh random draw per --limit: on the shipped rusch16 pack, ``--limit 17`` then ``--limit 22`` in
    one build directory was refused (exit 2, "holds the records of 1 item(s) this build does not collect
    ... another --source, --per-level or --limit"), though only the limit grew. The samples of one seed
    are nested: the larger build keeps the pilot's 17 items and asks the model about the 5 new ones only."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    build = tmp_path / "build"
    pack = str(shipped_data("chgk") / "rusch16.txt")
    with FakeServer(answers=lambda req: "I cannot say.") as srv:  # nothing parses: no embedding model needed
        assert main(["build", "--source", pack, *_args(tmp_path, srv.base_url, "--limit", "17")[3:]]) == 1
        pilot = {json.loads(line)["key"] for line in
                 (build / "steps" / "needs_material" / "records.jsonl").read_text(encoding="utf-8").splitlines()}
        sent = srv.total
        capsys.readouterr()
        rc = main(["build", "--source", pack, *_args(tmp_path, srv.base_url, "--limit", "22")[3:]])
        err = capsys.readouterr().err
        assert rc == 1, err  # nothing parses, as in the pilot: not refused
        assert srv.total - sent == 5 * len(LLM_STEPS)
    manifest = json.loads((build / "steps" / "needs_material" / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["limit"], manifest["n_items"], manifest["seed"], manifest["sample"]) == (22, 22, 0, SAMPLE_RULE)
    records = (build / "steps" / "needs_material" / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(pilot) == 17 and pilot < {json.loads(line)["key"] for line in records}


@pytest.mark.parametrize("recorded", [None, SAMPLE_RULE], ids=["older-cresowlve", "same-rule"])
def test_a_build_directory_sampled_by_an_older_rule_is_refused_naming_the_rule(tmp_path, recorded):
    """A build directory of an older cresowlve recorded no sampling rule: its --limit sample was another
    random draw, so resuming it with the same options collects other items. Refused (never mixed), and
    the error says the sampling rule changed, not only that an option did."""
    step = tmp_path / "build" / "steps" / "needs_material"
    step.mkdir(parents=True)
    extra = {} if recorded is None else {"sample": recorded}
    manifest = new_manifest("construction_needs_material", items="build:demo", n_items=2, limit=2, **extra)
    (step / "manifest.json").write_text(manifest.model_dump_json(), encoding="utf-8")
    (step / "records.jsonl").write_text('{"key": "chgk_a"}\n{"key": "chgk_b"}\n', encoding="utf-8")
    with pytest.raises(ResumeError) as exc:
        refuse_changed_collection(tmp_path / "build", 2, ["chgk_a", "chgk_c"])
    said = str(exc.value)
    assert "holds the records of 1 item(s) this build does not collect (chgk_b)" in said
    assert ("sample: none recorded: an older cresowlve's random draw → seeded-rank" in said) == (recorded is None)
    assert "another --source, --per-level or --limit" in said


def test_a_smaller_collection_under_the_archive_rule_moves_every_step_directory_aside(tmp_path, capsys, monkeypatch):
    """Under the archive-on-change rule (the main job: its --quick demo build of 2 items after one of 3)
    a smaller --limit archived the first step's directory only: the seven later steps kept the records
    of the items left out while their summaries and the export counted the others. Every step directory
    is moved to steps/archive/ and the build starts afresh, said in one line."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    build = tmp_path / "build"
    with FakeServer(answers=lambda req: "I cannot say.") as srv:  # nothing parses: no embedding model needed
        assert main(_args(tmp_path, srv.base_url, "--limit", "4")) == 1
        capsys.readouterr()
        monkeypatch.setenv("CRESOWLVE_ARCHIVE_CHANGED", "1")
        assert main(_args(tmp_path, srv.base_url, "--limit", "2")) == 1
    out = capsys.readouterr().out
    for step in LLM_STEPS:
        assert n_lines(build, f"steps/{step}/records.jsonl") == 2, step
    assert len(list((build / "steps" / "archive").iterdir())) == len(LLM_STEPS)
    assert f"moved the build's {len(LLM_STEPS)} step directories to {build / 'steps' / 'archive'} and starting afresh" in out
