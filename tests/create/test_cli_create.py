"""``cresowlve create generate`` and ``create score`` from the command line, against the fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from create_fakes import server_reply
from fakeserver import FakeServer

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cresowlve_core.cli", *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=600)


@pytest.mark.embeddings
def test_create_generate_then_score_from_the_cli(tmp_path):
    env = {"CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")}
    run_dir = tmp_path / "create_run"
    with FakeServer(answers=server_reply) as srv:
        gen = _cli("create", "generate", "--model", "fake-model", "--base-url", srv.base_url, "--limit", "2",
                   "--max-tokens", "512", "--run-dir", str(run_dir), env=env)
        assert gen.returncode == 0, gen.stderr
        assert gen.stdout.startswith("create generate fake-model (original): 2 of 2 calls answered")
        assert "2 sent" in gen.stdout and len(gen.stdout.splitlines()) == 1
        again = _cli("create", "generate", "--model", "fake-model", "--base-url", srv.base_url, "--limit", "2",
                     "--max-tokens", "512", "--run-dir", str(run_dir), env=env)
        assert again.returncode == 0 and "nothing sent" in again.stdout, again.stdout
        score = _cli("create", "score", "--run-dir", str(run_dir), "--judge-model", "fake-judge",
                     "--judge-base-url", srv.base_url, env=env)
        assert score.returncode == 0, score.stderr
        assert srv.total == 2 + 8  # 2 answers, 4 valid paths x 2 judges
        rescore = _cli("create", "score", "--run-dir", str(run_dir), "--judge-model", "fake-judge",
                       "--judge-base-url", srv.base_url, env=env)
        assert rescore.returncode == 0 and "nothing sent" in rescore.stdout and srv.total == 10
    assert score.stdout.startswith("create score by fake-judge: 4 of 4 paths judged") and "4 sent" in score.stdout
    summary = json.loads((run_dir / "score" / "summary.json").read_text())
    assert summary["n_valid"] == 4 and summary["n_judged"] == 4 and summary["judge_model"] == "fake-judge"
    assert all(u > 0 for u in summary["mean_utility"].values())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model"] == "fake-model" and manifest["seed"] == 0 and manifest["max_tokens"] == 512
    assert manifest["temperature"] == 0.7
    judge_manifest = json.loads((run_dir / "score" / "manifest.json").read_text())
    assert judge_manifest["kind"] == "create_score" and judge_manifest["temperature"] == 0.0


def test_create_generate_stops_on_a_wrong_key_with_exit_code_3(tmp_path):
    env = {"CRESOWLVE_CACHE_DIR": str(tmp_path / "cache"), "FAKE_KEY": "sk-test-WRONG-123"}
    with FakeServer(answers=server_reply, api_key="right") as srv:
        gen = _cli("create", "generate", "--model", "fake-model", "--base-url", srv.base_url, "--api-key-env",
                   "FAKE_KEY", "--limit", "2", "--run-dir", str(tmp_path / "run"), env=env)
    assert gen.returncode == 3, gen.stderr
    assert "stopped early" in gen.stderr and "sk-test-WRONG-123" not in gen.stdout + gen.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["stopped"].startswith("fatal")


def test_the_generate_and_score_lines_print_no_terminal_escape_from_a_model_name(tmp_path):
    """The one line of ``create generate`` names the model, that of ``create score`` the judge: an ANSI or
    OSC escape in either (a name the command line refuses: argtypes.model_name; a caller of the library
    may pass one) reaches the terminal as spaces."""
    from cresowlve_core.create.records import CostTotal, GenerateSummary, ScoreSummary, generate_line, score_line

    hostile = "\x1b[2J\x1b]0;pwned\x07"
    counts = {name: 0 for name, f in GenerateSummary.model_fields.items() if f.annotation is int}
    line = generate_line(GenerateSummary.model_construct(**counts, model="m" + hostile, variation="original",
                                                         generation_cost=CostTotal(), run_dir=str(tmp_path)))
    assert line.startswith("create generate m [2J ]0;pwned (original): ") and "\x1b" not in line and "\x07" not in line
    fields = {name: 0 for name, f in ScoreSummary.model_fields.items() if f.annotation is int}
    line = score_line(ScoreSummary.model_construct(**fields, judge_model="j" + hostile, mean_utility={},
                                                   judge_cost=CostTotal(), score_dir=str(tmp_path)))
    assert line.startswith("create score by j [2J ]0;pwned: ") and "\x1b" not in line and "\x07" not in line
