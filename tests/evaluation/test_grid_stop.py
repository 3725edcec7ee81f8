"""``cresowlve grid`` stops and exits as docs/reliability.md says.

Before: Ctrl-C or SIGTERM cancelled the grid without writing ``grid.json`` (a traceback or
``interrupted`` without counts), and every unfinished grid exited 1, a dead model's cells too.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import fakeserver
import pytest
import yaml
from fakeserver import FakeServer
from stophelp import Gate, last_line, n_lines, signal_mid_step, spawn_cli
from test_grid import reply

from cresowlve_core.cli import main
from cresowlve_core.evaluation.grid import GRID_FILE


def write_config(tmp_path: Path, base_url: str, **extra) -> Path:
    cfg = {"name": "stop", "items": "demo", "langs": ["en", "ru"], "limit": 8, "parallel": 1,
           "runs_dir": str(tmp_path / "grid"), "report": True,
           "options": {"concurrency": 2, "max_tokens": 32, "cache_path": str(tmp_path / "cache.sqlite")},
           "models": [{"model": "model-a", "base_url": base_url}, {"model": "model-b", "base_url": base_url}],
           **extra}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("signum,ignore_sigint,code", [(signal.SIGTERM, True, 143), (signal.SIGINT, False, 130)])
def test_a_signal_stops_the_running_cell_skips_the_rest_and_the_report(tmp_path, signum, ignore_sigint, code):
    gate = Gate(reply, quota=2)  # 2 answers, then the next requests wait: the first cell cannot finish first
    with gate, FakeServer(answers=gate) as srv:
        config = write_config(tmp_path, srv.base_url)
        proc = spawn_cli(["grid", str(config)], ignore_sigint=ignore_sigint,
                         env={"CRESOWLVE_REPORTS_DIR": str(tmp_path / "reports")})

        def answered_and_waiting() -> bool:
            return n_lines(tmp_path / "grid", "*/responses.jsonl") >= 2 and bool(gate.held())

        stdout, stderr, after = signal_mid_step(proc, srv, "2 answers", answered_and_waiting, signum, timeout=90,
                                                on_signal=gate.release_held)
    assert proc.returncode == code, stderr
    assert after <= 2, f"{after} requests after the signal (concurrency 2)"
    cells = {c["cell"]: c["status"] for c in json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"]}
    assert cells == {"model-a__en": "interrupted", "model-a__ru": "not_run", "model-b__en": "not_run",
                     "model-b__ru": "not_run"}
    assert not list((tmp_path / "reports").glob("03_analysis*"))  # the report was skipped
    name = "SIGTERM" if code == 143 else "Ctrl-C"
    assert last_line(stderr) == f"interrupted ({name}): 0 of 4 cells done; the report was skipped; run again to resume"


def test_per_item_errors_exit_1(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, "This model's maximum context length is 16 tokens")
    with FakeServer(answers=reply, faults=lambda r: "400" if r.index == 0 else None) as srv:
        rc = main(["grid", str(write_config(tmp_path, srv.base_url, report=False, limit=2))])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert last_line(err).startswith("incomplete: 1 of 4 cells not done (model-a__en)")
