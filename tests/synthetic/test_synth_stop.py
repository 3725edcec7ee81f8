"""``cresowlve synth`` stops and exits as docs/reliability.md says.

Before: after SIGTERM synth exited 3 (not 143); a dead verbaliser or solver exited 3 with a
line that did not say which; per-item errors exited 0 with no stderr line; an empty candidate
set exited 0 and said nothing.
"""

from __future__ import annotations

import json
import signal

import fakeserver
import pytest
from fakeserver import FakeServer
from stophelp import last_line, n_lines, signal_mid_step, spawn_cli, wait_until

from cresowlve_core.cli import main

VERBALISATION = ("<literal>Zqx person studied at a zqx school. Who?</literal>"
                 "<obfuscated>THIS zqx one is hidden. Who is THIS?</obfuscated><explanation>zqx reasons</explanation>")


def is_verbaliser(prompt: str) -> bool:
    return "Now the real task" in prompt


def answer(req) -> str:
    return VERBALISATION if is_verbaliser(req.prompt) else "Thinking...\n<Answer>nobody</Answer>"


def _args(tmp_path, base_url: str, *extra: str) -> list[str]:
    return ["synth", "--build-dir", str(tmp_path / "synth"), "--n", "6", "--band", "0", "1000000",
            "--verbaliser-model", "fake", "--verbaliser-base-url", base_url, "--solver-model", "fake",
            "--solver-base-url", base_url, "--concurrency", "2", "--no-cache", *extra]


@pytest.mark.parametrize("step,records,signum,ignore_sigint,code", [
    ("verbalise", "verbalise/responses.jsonl", signal.SIGTERM, False, 143),  # before: exit 3
    ("verbalise", "verbalise/responses.jsonl", signal.SIGTERM, True, 143),  # a background job of a script
    ("solve", "solve/responses.jsonl", signal.SIGINT, False, 130),
])
def test_a_signal_stops_the_step_skips_the_rest_and_writes_the_summary(tmp_path, step, records, signum,
                                                                        ignore_sigint, code):
    out = tmp_path / "synth"
    with FakeServer(answers=answer, latency_s=0.3) as srv:
        proc = spawn_cli(_args(tmp_path, srv.base_url), ignore_sigint=ignore_sigint)
        stdout, stderr, after = signal_mid_step(proc, srv, f"2 {step} records", lambda: n_lines(out, records) >= 2, signum, timeout=90)
    assert proc.returncode == code, stderr
    assert after <= 2, f"{after} requests after the signal (concurrency 2)"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["stopped_at"] == step
    assert summary["steps"][-1]["step"] == step and summary["steps"][-1]["n_ok"] < 6
    if step == "verbalise":
        assert not (out / "solve").exists()  # the rest was skipped
    name = "SIGTERM" if code == 143 else "Ctrl-C"
    assert last_line(stderr).startswith(f"interrupted ({name}): ")


@pytest.mark.parametrize("role", ["verbaliser", "solver"])
def test_a_dead_role_stops_with_exit_3_and_says_which(tmp_path, capsys, role):
    step = {"verbaliser": "verbalise", "solver": "solve"}[role]
    with FakeServer(answers=answer, faults=lambda r: "404" if is_verbaliser(r.prompt) == (role == "verbaliser")
                    else None) as srv:
        rc = main(_args(tmp_path, srv.base_url))
    err = capsys.readouterr().err
    assert rc == 3, err
    assert last_line(err).startswith(f"stopped early ({step}: fatal: ") and "HTTP 404" in last_line(err)
    summary = json.loads((tmp_path / "synth" / "summary.json").read_text())
    assert summary["stages"]["kept"] == 0 and summary["stopped_at"] == step


def test_per_item_errors_exit_1_with_a_last_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")
    with FakeServer(answers=answer, faults=lambda r: "400" if is_verbaliser(r.prompt) and r.index == 0
                    else None) as srv:
        rc = main(_args(tmp_path, srv.base_url))
    err = capsys.readouterr().err
    assert rc == 1, err  # before: exit 0 and no stderr line
    assert last_line(err).startswith("incomplete: 1 errored, 0 not run of 11 model tasks; most common error (1x): ")


def test_no_candidate_is_refused_and_says_why(tmp_path, capsys):
    rc = main(_args(tmp_path, "http://127.0.0.1:9/v1", "--band", "999999", "1000000"))
    err = capsys.readouterr().err
    assert rc == 2, err  # before: exit 0, nothing said
    assert last_line(err).startswith("error: no candidate") and "--band" in last_line(err)


def test_synth_ends_with_one_summary_line_and_says_nothing_sent_on_a_rerun(tmp_path, capsys):
    with FakeServer(answers=answer) as srv:
        assert main(_args(tmp_path, srv.base_url)) == 0
        first = capsys.readouterr().out.strip().splitlines()
        n_calls = srv.total
        assert main(_args(tmp_path, srv.base_url)) == 0
        again = capsys.readouterr().out.strip().splitlines()
    summary = json.loads((tmp_path / "synth" / "summary.json").read_text())  # the JSON stays in its file
    assert len(first) == 1 and not first[0].lstrip().startswith("{"), first
    assert first[0].startswith(f"synth: {summary['stages']['candidates']} candidates → ")
    # a task is a verbalisation (one call) or a puzzle put to the solver in both versions (two calls): the line
    # said "N model calls, N sent" with N the tasks, fewer than the requests the server answered
    n_verbalise, n_solve = (s["n_units"] for s in summary["steps"])
    assert n_calls == n_verbalise + 2 * n_solve and n_solve > 0
    assert (f"{summary['calls']['n_items']} model tasks ({n_verbalise} verbalisations and {n_solve} puzzles asked "
            f"in both versions: {n_calls} model calls), {summary['calls']['n_items']} sent") in first[0]
    assert first[0].endswith(str(tmp_path / "synth" / "summary.json"))
    assert len(again) == 1 and "nothing sent" in again[0], again


def test_synth_whose_verbaliser_output_never_parses_exits_1(tmp_path, capsys):
    with FakeServer(answers=lambda req: "<Answer>nobody</Answer>") as srv:
        rc = main(_args(tmp_path, srv.base_url))
    err = capsys.readouterr().err
    assert rc == 1, err  # before: exit 0 with "0 parsed" only in the summary line
    assert last_line(err).startswith("incomplete: no verbalisation parsed: 6 of 6 answered, 0 parsed")


def test_a_second_synth_on_a_build_directory_in_use_is_refused_before_it_writes_or_sends(tmp_path, capsys):
    """Before: only the step run directory in use refused it. A second synth with more candidates, started
    while the first was solving, rewrote candidates.jsonl (8 lines), verbalised the 2 new candidates
    (the verbaliser's manifest and summary rewritten to 8), and only then exited 2 "in use"; the first
    build's summary.json said 6 candidates beside the 8 of candidates.jsonl."""
    out = tmp_path / "synth"
    with FakeServer(answers=answer, latency_s=0.3) as srv:
        proc = spawn_cli(_args(tmp_path, srv.base_url))  # --n 6
        try:
            wait_until("a solve record", lambda: n_lines(out, "solve/responses.jsonl") >= 1, proc)
            sent = srv.total
            candidates = (out / "candidates.jsonl").read_text()
            rc = main(_args(tmp_path, srv.base_url, "--n", "8"))
            err = capsys.readouterr().err
            assert rc == 2 and last_line(err) == (f"error: {out} is in use by another process (lock .lock); "
                                                  "wait for it to finish, or use another run directory"), err
            assert (out / "candidates.jsonl").read_text() == candidates
            assert not [r for r in srv.requests[sent:] if is_verbaliser(r.prompt)]  # no verbaliser call of its own
        finally:
            proc.communicate(timeout=90)
    assert proc.returncode == 0
    assert n_lines(out, "verbalise/responses.jsonl") == 6
    assert json.loads((out / "summary.json").read_text())["stages"]["candidates"] == 6


@pytest.mark.parametrize("flag,step", [("--verbaliser-max-tokens", "verbalise"), ("--solver-max-tokens", "solve")])
def test_a_changed_setting_is_refused_naming_the_step_it_belongs_to(tmp_path, capsys, flag, step):
    """Before: both refusals read "error: the run directory holds another configuration (max_tokens: 1024 → 512;
    ...)", without saying whether the verbaliser's or the solver's budget had changed."""
    out = tmp_path / "synth"
    with FakeServer(answers=answer) as srv:
        assert main(_args(tmp_path, srv.base_url)) == 0
        sent = srv.total
        rc = main(_args(tmp_path, srv.base_url, flag, "512"))
        assert srv.total == sent
    err = capsys.readouterr().err
    assert rc == 2 and last_line(err).startswith(
        f"error: {out / step}: the run directory holds another configuration (max_tokens: 1024 → 512"), err
