"""``cresowlve contamination run`` prints the verdict table."""

from __future__ import annotations

import re

from fakeserver import FakeServer
from test_contamination_pipeline import fake_model, make_items, write_runs

from cresowlve_core.cli import main


def test_contamination_run_cli_prints_the_verdict(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items)) as srv:
        rc = main(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                   "--perturber-model", "fake", "--perturber-base-url", srv.base_url, "--quiz-model", "fake",
                   "--quiz-base-url", srv.base_url, "--max-items", "4"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    # 4 items per set (--max-items 4) are below the floor of 20: no signal is tested, no verdict is given
    assert "overall: not tested: too few items (n = 4; at least 20 per set)" in out.out
    assert "BCQ target: items right in a majority of repeats" in out.out and "too few items (n = 4): not tested" in out.out
    assert "likely contaminated" not in out.out and not re.search(r"\b(nan|None)\b", out.out, re.I)
    assert "EMBEDDED" not in out.err
