"""``synth`` with ``CRESOWLVE_DATA_DIR`` elsewhere: the shipped knowledge graph is still found (it was
fixed from the data directory at import, so synth exited 2 with "no triples"), and the user's data
(the response cache) goes where the variable says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fakeserver import FakeServer
from test_synth_stop import answer

REPO = Path(__file__).resolve().parents[2]


def test_synth_finds_the_shipped_graph_with_a_data_dir_elsewhere(tmp_path):
    data = tmp_path / "elsewhere" / "data"
    env = {**os.environ, "CRESOWLVE_DATA_DIR": str(data), "PYTHONPATH": str(REPO)}
    env.pop("CRESOWLVE_CACHE_DIR", None)  # the cache follows the data dir
    with FakeServer(answers=answer) as srv:
        out = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "synth", "--build-dir",
                              str(tmp_path / "synth"), "--n", "2", "--band", "0", "1000000",
                              "--verbaliser-model", "fake", "--verbaliser-base-url", srv.base_url,
                              "--solver-model", "fake", "--solver-base-url", srv.base_url, "--concurrency", "2"],
                             capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        sent = srv.total
    assert out.returncode in (0, 1), out.stderr[-2000:]
    assert "no triples" not in out.stderr
    assert sent > 0 and (tmp_path / "synth" / "summary.json").exists()
    assert (data / "cache" / "responses.sqlite").exists()  # user data under CRESOWLVE_DATA_DIR
