"""``cresowlve contamination run`` prints the verdict table."""

from __future__ import annotations

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
    assert "overall" in out.out and "BCQ accuracy on target" in out.out
    assert "EMBEDDED" not in out.err
