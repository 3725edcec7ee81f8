"""``contamination run`` stops as docs/reliability.md says.

Before: Ctrl-C or SIGTERM during a quiz was absorbed by that quiz and the pipeline went on (161
more requests, then exit 3); with SIGINT ignored SIGTERM wrote no summary; a dead perturber still
gave "no evidence of contamination" and exit 0; per-item errors exited 0 with no stderr line.
"""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import fakeserver
import pytest
from fakeserver import FakeServer
from stophelp import last_line, n_lines, signal_mid_step, spawn_cli
from test_contamination_pipeline import fake_model, make_items, write_runs

from cresowlve_core.cli import main


def _args(tmp_path, base_url: str, *extra: str) -> list[str]:
    """``contamination run`` over the runs of ``write_runs``, both roles at ``base_url``."""
    return ["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
            "--perturber-model", "fake", "--perturber-base-url", base_url, "--quiz-model", "fake",
            "--quiz-base-url", base_url, "--concurrency", "2", *extra]


@pytest.mark.parametrize("step,records,signum,ignore_sigint,code", [
    ("perturb", "perturb/*/perturbations.jsonl", signal.SIGINT, False, 130),
    ("bdq", "*/*/bdq/bdq.jsonl", signal.SIGTERM, False, 143),
    ("bdq", "*/*/bdq/bdq.jsonl", signal.SIGTERM, True, 143),  # a background job of a script
])
def test_a_signal_stops_the_step_skips_the_rest_and_writes_the_summary(tmp_path, step, records, signum,
                                                                        ignore_sigint, code):
    items = make_items()
    write_runs(tmp_path, items)
    out = tmp_path / "out"
    with FakeServer(answers=fake_model(items), latency_s=0.15) as srv:
        proc = spawn_cli(_args(tmp_path, srv.base_url), ignore_sigint=ignore_sigint, env={"CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")})
        stdout, stderr, after = signal_mid_step(proc, srv, f"2 {step} records", lambda: n_lines(out, records) >= 2, signum, timeout=60)
    assert proc.returncode == code, stderr
    assert after <= 2, f"{after} requests after the signal (concurrency 2)"  # before: 161, then exit 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["stopped_at"].endswith({"perturb": "perturbation",
                                                                                   "bdq": "BDQ"}[step])
    assert [s["step"] for s in summary["steps"]][-1] == summary["stopped_at"]  # nothing ran after it
    assert not list(out.glob("*/*/bcq")) and not list(out.glob("*/*/completion"))
    name = "SIGTERM" if code == 143 else "Ctrl-C"
    assert last_line(stderr).startswith(f"interrupted ({name}): ")
    assert "no evidence" not in stdout and "overall" not in stdout


def _dead(prompt_marker: str):
    def fault(req):
        return "404" if prompt_marker in req.prompt else None
    return fault


@pytest.mark.parametrize("role,marker,stopped_at", [
    ("perturber", "Rewrite the question below", "perturbation"),
    ("quiz-taker", "four-option quiz", "m BDQ"),
])
def test_a_dead_role_stops_the_stage_with_exit_3_and_no_verdict(tmp_path, capsys, monkeypatch, role, marker,
                                                                 stopped_at):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items), faults=_dead(marker)) as srv:
        rc = main(_args(tmp_path, srv.base_url))
        to_dead_role = sum(marker in r.prompt for r in srv.requests)
        after_it = [r for r in srv.requests if r.index > min(q.index for q in srv.requests if marker in q.prompt)
                    and marker not in r.prompt]
    out = capsys.readouterr()
    assert rc == 3, out.err  # before (perturber): "no evidence of contamination", exit 0
    assert "overall" not in out.out and "evidence" not in out.out
    line = last_line(out.err)
    assert line.startswith(f"stopped early ({stopped_at}: fatal: ") and "HTTP 404" in line
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stopped_at"] == stopped_at and summary["stopped"].startswith(f"{stopped_at}: fatal: ")
    assert to_dead_role <= 2 and after_it == []  # stopped at its first fatal answers (concurrency 2); nothing after


def test_per_item_errors_exit_1_with_a_last_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    # completion calls for item 3 fail with a 400 that names the context length: a per-item error, not fatal
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")
    with FakeServer(answers=fake_model(items),
                    faults=lambda r: "400" if "Вопрос номер 3:" in r.prompt and "Rewrite" not in r.prompt
                    and "four-option" not in r.prompt else None) as srv:
        rc = main(_args(tmp_path, srv.base_url))
        assert srv.total > 0
    out = capsys.readouterr()
    assert rc == 1, out.err  # before: exit 0, no stderr line
    assert "overall" in out.out  # the verdict of what was measured is printed
    assert last_line(out.err).startswith("incomplete: 2 errored, 0 not run of ")


def test_runs_without_a_paired_configuration_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    args = _args(tmp_path, "http://127.0.0.1:9/v1")  # nothing is sent: the port is never connected to
    args[3] = str(tmp_path / "runs" / "m__en")  # --runs: an English run without its Russian pair
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2 and last_line(err).startswith("error: no configuration with paired En and Ru runs"), err


def _bdq_prefers_b_on_the_first_four(items):
    """``fake_model``, but a BDQ question (the rewrites only: no "однажды" of the original) of the first
    four items of each set (in id order) is answered B, of the others A: with four items per set the
    BDQ finds A and C non-preferred, with eight only C."""
    model = fake_model(items)
    first = {0, 1, 2, 3, 22, 23, 24, 25, 43, 44, 45, 46}

    def answer(req) -> str:
        if "four-option quiz" in req.prompt and "однажды" not in req.prompt:
            return "B" if any(f"Вопрос номер {i}:" in req.prompt for i in first) else "A"
        return model(req)

    return answer


def test_more_items_that_may_move_the_bcq_positions_are_refused_before_any_call(tmp_path, capsys, monkeypatch):
    """The BCQ recorded the positions the BDQ of 4 items per set measured (A, C); resumed with 8 the
    BDQ's new answers may move them. Before: the perturbation and the BDQ sent 24 calls, then the BCQ
    refused "another configuration" (exit 2). Now the refusal comes first: nothing sent or written."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=_bdq_prefers_b_on_the_first_four(items)) as srv:
        assert main(_args(tmp_path, srv.base_url, "--max-items", "4")) == 0, capsys.readouterr().err
        bcq = json.loads((tmp_path / "out" / "m" / "fake" / "bcq" / "manifest.json").read_text())
        assert bcq["identity"]["non_preferred"] == ["A", "C"]
        files = {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file() and p.name != ".lock"}
        srv.reset()
        rc = main(_args(tmp_path, srv.base_url, "--max-items", "8"))
        assert (rc, srv.total) == (2, 0), capsys.readouterr().err
    last = last_line(capsys.readouterr().err)
    assert last.startswith(f"error: {tmp_path / 'out' / 'm' / 'fake' / 'bcq'}: the run directory holds another "
                           "configuration (identity: the BCQ placed the original at A, C"), last
    assert "the BDQ has 12 answers for these items and is to ask up to 12 more, whose answers may move them" in last
    assert files == {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file() and p.name != ".lock"}


def test_a_retried_bdq_error_that_cannot_move_the_bcq_positions_is_resumed(tmp_path, capsys, monkeypatch):
    """One BDQ question errored (a per-item 400: the context length); the BCQ was placed by the other 11 answers (10 A,
    one invalid: B and C non-preferred). One more answer cannot lift B or C to N/4 = 3, so the
    resume asks that one question, and nothing else, and ends complete."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")
    fail = {"on": True}

    def fault(req):
        bdq = "four-option quiz" in req.prompt and "однажды" not in req.prompt
        return "400" if fail["on"] and bdq and "Вопрос номер 0:" in req.prompt else None

    with FakeServer(answers=fake_model(items), faults=fault) as srv:
        assert main(_args(tmp_path, srv.base_url, "--max-items", "4")) == 1
        bcq = json.loads((tmp_path / "out" / "m" / "fake" / "bcq" / "manifest.json").read_text())
        assert bcq["identity"]["non_preferred"] == ["B", "C"]
        fail["on"] = False
        srv.reset()
        rc = main(_args(tmp_path, srv.base_url, "--max-items", "4"))
        assert (rc, srv.total) == (0, 1), capsys.readouterr().err


def test_an_out_dir_on_a_read_only_file_system_is_refused_in_one_line_with_nothing_to_quiz(tmp_path, capsys, monkeypatch):
    """Before: with nothing to quiz, the summary's folder was made only at the end, and its mkdir's
    OSError (EROFS) ended in a traceback and "bug" (exit 1); now the folder is made or refused first."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    write_runs(tmp_path, make_items())
    out = tmp_path / "out"
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self == out or out in self.parents:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    args = _args(tmp_path, "http://127.0.0.1:9/v1")  # nothing is sent: the port is never connected to
    args[3] = str(tmp_path / "runs" / "m__en")  # --runs: an English run without its Russian pair
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2 and last_line(err).startswith(f"error: cannot create {out}:"), err
    assert "Read-only file system" in last_line(err) and "Traceback" not in err
    assert not out.exists()


def test_bdq_errors_that_may_move_the_bcq_positions_leave_the_bcq_to_the_rerun(tmp_path, capsys, monkeypatch):
    """Three of the 12 BDQ questions errored (a per-item 400: the context length); the other 9 answers (all A)
    make B and C non-preferred, but 3 more answers could lift B to N/4 = 3. Before: the BCQ was placed at
    B, C from the 9 answers, the run exited 1 with "run again to retry them", and the re-run was refused
    (exit 2, "the BDQ has 9 answers for these items and is to ask up to 3 more, whose answers may move
    them; use another run directory"), nothing retried. Now the BCQ waits (its 36 questions not run, the
    verdict says why) and the re-run asks exactly the 3 BDQ questions and the 36 BCQ ones."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")
    fail = {"on": True}

    def fault(req):
        bdq = "four-option quiz" in req.prompt and "однажды" not in req.prompt
        return "400" if fail["on"] and bdq and any(f"Вопрос номер {i}:" in req.prompt for i in (0, 1, 2)) else None

    with FakeServer(answers=fake_model(items), faults=fault) as srv:
        assert main(_args(tmp_path, srv.base_url, "--max-items", "4")) == 1
        out = capsys.readouterr()
        assert last_line(out.err).startswith("incomplete: 3 errored, 36 not run of "), out.err
        assert "BCQ not run: the BDQ has 9 answers and 3 questions left to ask (errored)" in out.out
        assert not (tmp_path / "out" / "m" / "fake" / "bcq" / "manifest.json").exists()
        fail["on"] = False
        srv.reset()
        rc = main(_args(tmp_path, srv.base_url, "--max-items", "4"))
        assert (rc, srv.total) == (0, 3 + 36), capsys.readouterr().err


def test_the_reports_bcq_section_says_why_the_bcq_waits(tmp_path, monkeypatch):
    """The BCQ left to the re-run (above): the 05 report's BCQ section said only "No BCQ answers."."""
    from cresowlve_core.contamination import report
    from cresowlve_core.contamination.pipeline import Role, run_contamination

    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")

    def fault(req):
        bdq = "four-option quiz" in req.prompt and "однажды" not in req.prompt
        return "400" if bdq and any(f"Вопрос номер {i}:" in req.prompt for i in (0, 1, 2)) else None

    with FakeServer(answers=fake_model(items), faults=fault) as srv:
        res = run_contamination(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False,
                                perturber=Role("fake", srv.base_url), quiz_taker=Role("fake", srv.base_url),
                                max_items_per_set=4)
    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda *a, **k: None)
    report.bcq_section(res)
    assert "No BCQ answers: the BCQ not run: the BDQ has 9 answers and 3 questions left to ask (errored)" in said[-1]
