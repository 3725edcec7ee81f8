"""CREATE under faults, through the stage runtime: a killed run, a torn last line, a wrong key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from create_fakes import FakeClient, one_hot, server_reply
from fakeserver import FakeServer

from cresowlve_core.create import generate as cg
from cresowlve_core.create import score as cs
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.runtime import ClientOptions

REPO = Path(__file__).resolve().parents[2]
NO_CACHE = ClientOptions(temperature=0.7, cache=False, concurrency=1)


def _complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_killed_generation_with_a_torn_last_line_resumes_without_resending(tmp_path):
    run_dir = tmp_path / "run"
    responses = run_dir / "responses.jsonl"
    with FakeServer(answers=server_reply, latency_s=0.4) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cresowlve_core.cli", "create", "generate", "--model", "fake-model", "--base-url",
             srv.base_url, "--limit", "6", "--concurrency", "1", "--no-cache", "--run-dir", str(run_dir)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")})
        try:
            deadline = time.monotonic() + 120
            while _complete_lines(responses) < 2 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()
        done_before = _complete_lines(responses)
        assert 2 <= done_before < 6, "the run finished or never started before the kill"
        with open(responses, "ab") as f:  # what a kill in the middle of a write leaves behind
            f.write(b'{"query_id": "torn", "sample": 0, "rou')
        sent_before = srv.total
        s = cg.generate(None, Endpoint(srv.base_url, "fake-model"), run_dir, limit=6, progress=False,
                        options=NO_CACHE)
        resent = srv.total - sent_before
    assert (s.n_ok, s.n_error, s.n_missing) == (6, 0, 0)
    assert resent == 6 - done_before  # only the units without a complete record were sent again
    assert len(s.repairs) == 1 and "torn" in s.repairs[0]
    assert (run_dir / "responses.jsonl.torn").read_bytes().startswith(b'{"query_id": "torn"')
    keys = [(r["query_id"], r["sample"], r["round"]) for r in map(json.loads, responses.read_text().splitlines())]
    assert len(keys) == len(set(keys)) == 6


def test_a_wrong_judge_key_stops_scoring_cleanly_and_keeps_what_finished(tmp_path, monkeypatch):
    client = FakeClient()
    cg.generate(None, Endpoint("http://fake.invalid/v1", "fake-model"), tmp_path, limit=2, client=client,
                progress=False)
    monkeypatch.setenv("JUDGE_KEY", "sk-test-WRONG-456")
    # the first path's two judge calls go through, then every request is refused with 401
    with FakeServer(answers=server_reply, faults=[None, None] + ["401"] * 20) as srv:
        judge = Endpoint(srv.base_url, "judge", "JUDGE_KEY")
        s = cs.score(tmp_path, judge, options=ClientOptions(cache=False, concurrency=1), embedder=one_hot,
                     progress=False)
        assert s.stopped and s.stopped.startswith("fatal")
        assert (s.n_to_judge, s.n_judged, s.n_judge_errors, s.n_not_judged) == (4, 1, 0, 3)
        m = json.loads((tmp_path / "score" / "manifest.json").read_text())
        assert m["stopped"] == s.stopped and m["finished_at"]
        assert "sk-test-WRONG-456" not in (tmp_path / "score" / "summary.json").read_text()
        # fixed key, same run: only the three paths not yet judged are sent
        before = srv.total
        srv.faults = None
        s2 = cs.score(tmp_path, judge, options=ClientOptions(cache=False, concurrency=1), embedder=one_hot,
                      progress=False)
        assert s2.stopped is None and s2.n_judged == 4 and srv.total - before == 3 * 2


def test_a_wrong_key_stops_generation_with_the_finished_answers_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("GEN_KEY", "sk-test-WRONG-789")
    with FakeServer(answers=server_reply, faults=[None, "401", "401", "401"]) as srv:
        ep = Endpoint(srv.base_url, "fake-model", "GEN_KEY")
        s = cg.generate(None, ep, tmp_path, limit=3, options=NO_CACHE, progress=False)
    assert s.stopped and s.stopped.startswith("fatal")
    assert (s.n_ok, s.n_error, s.n_missing) == (1, 0, 2)
    assert json.loads((tmp_path / "summary.json").read_text())["stopped"] == s.stopped
