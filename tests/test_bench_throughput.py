"""``bench/throughput.py --in-memory``: the run it measures is the real ``cresowlve eval``, with only
the HTTP exchange replaced, so its CPU figure is the run's own work."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


def test_the_budget_names_every_step_and_the_whole_run_beside_them(capsys: Any) -> None:
    spec = importlib.util.spec_from_file_location("bench_throughput", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.budget(c=4, latency=0.001, small=8, large=24)  # its files are in temporary directories it removes
    rows = dict(re.findall(r"^  (\S.*?)\s+(-?\d+\.\d) us", capsys.readouterr().out, re.M))
    assert list(rows) == ["waiting (asyncio.sleep at C, the floor)", "LLMClient.complete, in-memory transport",
                          "the answer's record (extract, score, validate)",
                          "map_with_resume and the record's write (fsync)", "loading and checking the items file",
                          "sum of the steps", "cresowlve eval, no HTTP (the whole run)",
                          "the rest (prompts, progress, summary, GC, ...)"]
    steps = [float(v) for k, v in rows.items() if k not in ("sum of the steps",) and "whole run" not in k
             and not k.startswith("the rest")]
    assert float(rows["sum of the steps"]) == pytest.approx(sum(steps), abs=0.1 * len(steps))
    # printed with a figure only when both in-memory evals exited 0 (else the line says "failed")
    assert "cresowlve eval, no HTTP (the whole run)" in rows
