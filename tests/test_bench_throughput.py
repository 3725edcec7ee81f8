"""``bench/throughput.py --in-memory``: the run it measures is the real ``cresowlve eval``, with only
the HTTP exchange replaced, so its CPU figure is the run's own work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "throughput.py"


def _in_memory(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), "--in-memory", "0", "--", *args], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)


def test_the_in_memory_eval_is_the_command_with_its_records_and_no_network(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"chgk_{i:04x}", "en": {"question": f"Puzzle {i}?", "answer": "Venus"}})
                             + "\n" for i in range(12)), encoding="utf-8")
    run_dir = tmp_path / "run"
    # an unroutable base URL: any real connection attempt would fail the run
    rc = _in_memory(tmp_path, "eval", "--items", str(items), "--model", "bench-model", "--base-url",
                    "http://in-memory.invalid/v1", "--run-dir", str(run_dir), "--concurrency", "4", "--no-cache")
    assert rc.returncode == 0, rc.stderr
    records = [json.loads(line) for line in (run_dir / "responses.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 12
    assert {r["status"] for r in records} == {"ok"}
    assert {r["prediction"] for r in records} == {"Venus"}  # parsed from the bench's answer body
    assert "n=12 ok=12 error=0" in rc.stdout


def test_the_in_memory_eval_exits_with_the_commands_failure(tmp_path: Path) -> None:
    rc = _in_memory(tmp_path, "eval", "--items", str(tmp_path / "missing.jsonl"), "--model", "bench-model",
                    "--base-url", "http://in-memory.invalid/v1", "--run-dir", str(tmp_path / "run"))
    assert rc.returncode != 0
    assert "missing.jsonl" in rc.stderr
