"""``cresowlve build`` as a new user runs it, against the replay server's recorded refusals: a
refused filter or annotation is counted as refused wherever the build is summarised (its line,
its last line, the data card), never as unparseable output and never silently kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from replay.server import ReplayServer
from test_replay_cli import CODE, KEY, last_line

from cresowlve_core.construction.llm_steps import LLM_STEPS
from cresowlve_core.failures import error_line


def build_against(tmp_path: Path, scenario: str = "refusal", model: str = "gpt-4o", provider: str = "openai",
                  seed: int = 0, **knobs: float) -> tuple[subprocess.CompletedProcess[str], Path, int]:
    """``cresowlve build`` of 6 items (the sample of ``seed``) on a replay scenario, on ``provider``'s route
    (named with ``--provider`` when it is openai): (the command, the build directory, how many recorded
    refusals the server sent)."""
    env = dict(os.environ, REPLAY_KEY=KEY, PYTHONPATH=str(CODE), CRESOWLVE_DATA_DIR=str(tmp_path / "data"),
               CRESOWLVE_CACHE_DIR=str(tmp_path / "cache"), CRESOWLVE_REPORTS_DIR=str(tmp_path / "reports"))
    build = tmp_path / "build"
    with ReplayServer(scenario, **knobs) as srv:
        cmd = [sys.executable, "-m", "cresowlve_core.cli", "build", "--limit", "6", "--model", model,
               "--base-url", srv.base_url(provider), "--api-key-env", "REPLAY_KEY",
               *(["--provider", "openai"] if provider == "openai" else []),
               "--build-dir", str(build), "--no-cache", "--agreement-n", "2", "--seed", str(seed)]
        proc = subprocess.run(cmd, cwd=CODE, env=env, capture_output=True, text=True, timeout=600)
        served = [e for e in srv.requests("openai") if e["rule"] == "refusal (scenario)"]
    return proc, build, len(served)


def refused_records(build: Path, outcome: str = "refused") -> dict[str, int]:
    """Each model step's records of ``outcome``."""
    counts = {}
    for step in LLM_STEPS:
        recs = [json.loads(line) for line in (build / "steps" / step / "records.jsonl").read_text().splitlines()]
        counts[step] = sum(r.get("outcome") == outcome for r in recs)
    return counts


def test_refused_construction_calls_are_counted_as_refused_in_the_line_the_last_line_and_the_card(tmp_path: Path) -> None:
    proc, build, served = build_against(tmp_path)
    out = proc.stdout + proc.stderr
    # the replay answers construction prompts with text no parser reads: exit 1, "no model output parsed"
    assert proc.returncode == 1, out
    refused = refused_records(build)
    assert served and sum(refused.values()) == served  # every recorded refusal is one refused record
    step = next(s for s in LLM_STEPS if 0 < refused[s] < 6)
    k = refused[step]
    line = proc.stdout.splitlines()[0]
    assert re.search(rf"; refused: [^;]*\b{step} {k}/6\b", line), line
    assert f"{step} 0 of {6 - k} answers parsed ({k} refused)" in last_line(out)
    card = (build / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert f"| {step} | 6 | {k} | 0 | {6 - k} | 0 | 0 | 0 |" in card


def test_a_build_every_call_of_which_was_refused_is_finished_and_says_so(tmp_path: Path) -> None:
    """Refusals are final answers of the provider: nothing to retry, nothing unparseable (exit 0),
    and the line and the card say every call was refused."""
    proc, build, served = build_against(tmp_path, refusal_fraction=1.0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert served == sum(refused_records(build).values()) > 0
    line = proc.stdout.splitlines()[0]
    assert "unparseable: none; refused: needs_material 6/6, russian_specific 6/6, translate 6/6" in line, line
    card = (build / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert all(f"| {step} | 6 | 6 | 0 | 0 | 0 | 0 | 0 |" in card for step in LLM_STEPS), card


def test_a_construction_answer_cut_off_at_the_token_limit_is_flagged_and_counted(tmp_path: Path) -> None:
    """Read as it is (its last label or fact may be cut), flagged ``<step>:truncated`` for review, and
    counted in the data card."""
    proc, build, _ = build_against(tmp_path, "truncate")
    cut = refused_records(build, "truncated")
    assert sum(cut.values()) > 0, proc.stdout + proc.stderr
    # no translation parses: listed with the other steps (before: translate was left out of the line)
    assert re.search(r"; unparseable: [^;]*\btranslate 6/6\b", proc.stdout.splitlines()[0]), proc.stdout
    card = (build / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    items = [json.loads(line) for line in (build / "export" / "full.jsonl").read_text().splitlines()]
    for step, k in cut.items():
        row = next(line for line in card.splitlines() if line.startswith(f"| {step} | 6 |"))
        assert row.endswith(f"| {k} |"), row
        assert sum(f"{step}:truncated" in it["meta"]["review_flags"] for it in items) == k, step


def test_construction_answers_cut_off_at_the_token_limit_are_named_on_the_build_line_and_the_last_line(tmp_path: Path) -> None:
    """The recorded truncation on half the calls: the build line listed every step as unparseable and the
    last line said "0 of 6 answers parsed", with no word of the token limit that cut them (only the data
    card counted them). Both now say how many answers of each step were cut off."""
    proc, build, _ = build_against(tmp_path, "truncate")
    cut = {step: k for step, k in refused_records(build, "truncated").items() if k}
    assert cut, proc.stdout + proc.stderr
    line = proc.stdout.splitlines()[0]
    assert "; truncated: " + ", ".join(f"{step} {k}/6" for step, k in cut.items()) + ";" in line, line
    for step, k in cut.items():
        assert f"{step} 0 of 6 answers parsed ({k} cut at the token limit)" in last_line(proc.stdout + proc.stderr)


def test_each_construction_steps_manifest_records_what_was_sent_and_what_the_provider_refused(tmp_path: Path) -> None:
    """A deployment name hides a reasoning model that refuses a temperature: the first request of
    each step carries the temperature the step's manifest says it sends (``sent``), and the
    manifest records that it was then dropped (``adapted``), so no step claims a temperature its
    answers were not decoded with."""
    proc, build, _ = build_against(tmp_path, "deployment", model="my-gpt5-deployment")
    out = proc.stdout + proc.stderr
    for step in LLM_STEPS:
        manifest = json.loads((build / "steps" / step / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["sent"]["temperature"] == manifest["temperature"] == 0.0, manifest
        assert [(a["field"], a["action"]) for a in manifest["adapted"]] == [("temperature", "drop")], (step, out)
        assert manifest["adapted"][0]["reason"].startswith("Unsupported value: 'temperature'")


def test_a_build_every_call_of_which_overflows_the_context_names_one_error_summed_over_the_steps(tmp_path: Path) -> None:
    """llama.cpp's recorded context overflow on every call: the last line's most common error is one
    message counted over every step (before: its count in one step), and the data card says that
    every model call errored, so the funnel is not read as a result. Seed 7: a sample of 6 items whose
    prompts overflow by the same counts in more than one step (the message names the counts)."""
    proc, build, _ = build_against(tmp_path, "llamacpp-overflow", model="gpt-oss", provider="llama-cpp", seed=7)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    by_step = [Counter(error_line(r["error"]) for r in map(json.loads, (build / "steps" / step / "records.jsonl")
                                                             .read_text().splitlines())) for step in LLM_STEPS]
    total = sum(by_step, Counter())
    assert total.total() == 48 and all("exceeds the available context size" in e for e in total)
    m = re.search(r"most common error \((\d+)x\): (.*); run again to retry them$", last_line(out))
    assert m, last_line(out)
    assert int(m[1]) == total[m[2]] == max(total.values())
    assert int(m[1]) > max(step[m[2]] for step in by_step)  # the message recurs across steps
    card = (build / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "> Incomplete build: 48 of 48 model calls errored (" in card


def test_a_build_whose_calls_were_all_refused_says_so_above_its_funnel_and_in_the_reports_headline(
        tmp_path: Path, monkeypatch) -> None:
    """Every call refused (recorded refusal): the data card opened with a funnel of "−needs external material 0"
    beside the paper's 295, and the report's headline read as a finished funnel, with no word that no filter or
    label got a verdict (only the model steps table, further down, counted the refusals)."""
    from cresowlve_core.construction.build import BuildConfig, run_build
    from cresowlve_core.construction.export import funnel_headline

    monkeypatch.setenv("REPLAY_KEY", KEY)
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    with ReplayServer("refusal", refusal_fraction=1.0) as srv:
        res = run_build(BuildConfig(build_dir=str(tmp_path / "build"), limit=6, model="gpt-4o",
                                    base_url=srv.base_url("openai"), api_key_env="REPLAY_KEY", cache=False,
                                    agreement_n=2), progress=False)
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    head, funnel = card.split("## Funnel", 1)
    assert "> No verdict: 48 of 48 model calls refused (final answers, not asked again; " in head, head
    assert funnel_headline(res["funnel"], res["calls_note"]).endswith(" — 48 of 48 model calls refused")
