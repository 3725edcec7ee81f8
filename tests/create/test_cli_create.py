"""``cresowlve create generate`` and ``create score`` from the command line, against the fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeserver import FakeServer
from test_create_runs import answer_for, judge_reply

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cresowlve_core.cli", *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=600)


@pytest.mark.embeddings
def test_create_generate_then_score_from_the_cli(tmp_path):
    def reply(req):
        if "Path: " in req.prompt:
            return judge_reply(req.prompt)
        if "Query: " in req.prompt:
            return answer_for(req.prompt)
        return "?"

    env = {"CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")}
    run_dir = tmp_path / "create_run"
    with FakeServer(answers=reply) as srv:
        gen = _cli("create", "generate", "--model", "fake-model", "--base-url", srv.base_url, "--limit", "2",
                   "--run-dir", str(run_dir), env=env)
        assert gen.returncode == 0, gen.stderr
        assert json.loads(gen.stdout)["n_ok"] == 2
        score = _cli("create", "score", "--run-dir", str(run_dir), "--judge-model", "fake-judge",
                     "--judge-base-url", srv.base_url, env=env)
        assert score.returncode == 0, score.stderr
    summary = json.loads(score.stdout)
    assert summary["n_valid"] == 4
    assert all(u > 0 for u in summary["mean_utility"].values())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model"] == "fake-model" and manifest["seed"] == 0
