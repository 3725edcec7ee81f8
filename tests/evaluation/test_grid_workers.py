"""``cresowlve grid --workers N``: cells in worker processes give what one process gives, keep each
cell's ``max_cost``, and exit as the in-process grid does (docs/reliability.md)."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest
import yaml
from fakeserver import FakeServer
from stophelp import Gate, last_line, n_lines, signal_mid_step, spawn_cli
from test_grid import reply

from cresowlve_core.cli import main
from cresowlve_core.evaluation.grid import GRID_FILE
from cresowlve_core.evaluation.grid_run import run_grid
from cresowlve_core.evaluation.grid_workers import deal, slot_shares, start_method

# what differs between two runs of the same items: times, durations, ids and paths
VOLATILE = {"started_at", "finished_at", "written_at", "created_at", "latency_s", "latency_ms", "elapsed_s",
            "run_dir", "judge_latency_s", "judge_latency_ms", "wall_s", "duration_s", "ts", "at", "id_request",
            "response_id", "judge_response_id", "n_sent", "n_cached", "cached", "judge_cached"}


def write_config(tmp_path: Path, base_url: str, name: str, **extra) -> Path:
    cfg = {"name": name, "items": "demo", "langs": ["en", "ru"], "limit": 3, "parallel": 2,
           "runs_dir": str(tmp_path / name), "report": False,
           "options": {"concurrency": 2, "max_tokens": 32, "cache_path": str(tmp_path / f"{name}.sqlite")},
           "judge": {"model": "fake-judge"},
           "models": [{"model": "model-a", "label": "GPT-4.1", "base_url": base_url},
                      {"model": "model-b", "base_url": base_url, "efforts": ["medium"], "api": "chat"}],
           **extra}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def stable(obj):
    """``obj`` without the fields that record when, how fast or where."""
    if isinstance(obj, dict):
        # a cell line's last part is what this grid run sent and what the cache answered: like n_cached,
        # it depends on which cell of a language asked a shared verdict first
        return {k: v.rsplit(" | ", 1)[0] if k == "line" and isinstance(v, str) else stable(v)
                for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [stable(v) for v in obj]
    return obj


def cell_files(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for run in sorted(p for p in root.iterdir() if p.is_dir()):
        recs = [json.loads(line) for line in (run / "responses.jsonl").read_text().splitlines()]
        out[run.name] = {"records": sorted((stable(r) for r in recs), key=lambda r: json.dumps(r, sort_keys=True)),
                         "summary": stable(json.loads((run / "summary.json").read_text()))}
    return out


def test_slots_are_dealt_over_the_workers():
    assert slot_shares(3, 2) == [2, 1] and slot_shares(4, 2) == [2, 2] and slot_shares(2, 2) == [1, 1]


def test_requests_in_flight_are_dealt_evenly_over_the_workers():
    d = deal(3, 2, [16] * 36)  # the paper's shape: 2 cells per worker at 12, 24 in flight in each
    assert d.slots == [2, 2] and d.concurrency(16) == 12
    d = deal(5, 2, [16] * 10)
    assert d.slots == [3, 3] and d.concurrency(16) == 13  # 78 in flight, not above 5 x 16
    assert deal(4, 2, [16]).slots == [2, 2] and deal(4, 2, [16]).concurrency(16) == 16  # already even
    assert deal(3, 3, [7]).slots == [1, 1, 1] and deal(3, 3, [7]).concurrency(7) == 7
    d = deal(3, 2, [16, 1])  # a cell at concurrency 1 would get none: cells are dealt whole as before
    assert d.slots == [2, 1] and d.concurrency(1) == 1 and d.concurrency(16) == 16


def test_dealt_requests_in_flight_never_exceed_parallel_cells_at_their_own_concurrency():
    import random

    rng = random.Random(29)
    for _ in range(2000):
        parallel = rng.randint(1, 9)
        workers = rng.randint(1, parallel)
        own = [rng.choice([1, 2, 3, 4, 8, 16, 17, 64]) for _ in range(rng.randint(1, 20))]
        d = deal(parallel, workers, own)
        assert len(d.slots) == workers
        limit = sum(sorted(own, reverse=True)[:parallel])  # the most in one process: `parallel` cells in flight
        dealt = sorted((d.concurrency(c) for c in own), reverse=True)[:sum(d.slots)]
        assert sum(dealt) <= limit, (parallel, workers, own, d)
        assert all(1 <= d.concurrency(c) <= c for c in own)  # never above a cell's own concurrency
        if all(c == own[0] for c in own) and len(set(d.slots)) > 1:  # uneven only where a cell would get none
            assert d.concurrency(own[0]) == own[0] and own[0] * parallel // (workers * max(d.slots)) == 0


def test_three_cells_over_two_workers_keep_the_requests_in_flight(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 24)
    with FakeServer(answers=reply, latency_s=0.05) as srv:
        config = write_config(tmp_path, srv.base_url, "deal", items=str(items), limit=24, parallel=3,
                              options={"concurrency": 4, "max_tokens": 32, "cache": False})
        out = run_grid(config, progress=False, workers=2)
        assert srv.max_in_flight <= 3 * 4  # never more than `parallel` cells at their concurrency
    assert out["n_done"] == 4
    for c in out["cells"]:  # 2 cells per worker at 3 (3 x 4 requests over 2 workers x 2 cells)
        manifest = json.loads((Path(c["run_dir"]) / "manifest.json").read_text())
        assert manifest["options"]["concurrency"] == 3


def _sent(requests) -> tuple[int, Counter[str]]:
    """(answers asked, judge prompts asked with their counts) among ``requests``."""
    judge = Counter(r.prompt for r in requests if r.body.get("model") == "fake-judge")
    return len(requests) - sum(judge.values()), judge


def test_two_workers_write_the_same_records_and_summaries_as_one_process(tmp_path):
    with FakeServer(answers=reply) as srv:
        one = run_grid(write_config(tmp_path, srv.base_url, "one"), progress=False, workers=1)
        sent_one = list(srv.requests)
        two = run_grid(write_config(tmp_path, srv.base_url, "two"), progress=False, workers=2)
        sent_two = srv.requests[len(sent_one):]
        written = json.loads((tmp_path / "two" / GRID_FILE).read_text())
        again = run_grid(write_config(tmp_path, srv.base_url, "two"), progress=False, workers=2)
        assert srv.total == len(sent_one) + len(sent_two)  # a finished grid is skipped, with workers too
        # every answer and verdict either worker got is in the cache they share: another grid of the
        # same cells on that cache (its own run directories) asks nothing
        shared = write_config(tmp_path, srv.base_url, "three",
                              options={"concurrency": 2, "max_tokens": 32, "cache_path": str(tmp_path / "two.sqlite")})
        three = run_grid(shared, progress=False, workers=2)
        assert srv.total == len(sent_one) + len(sent_two) and three["n_done"] == 4
    for sent in (sent_one, sent_two):
        answers, judged = _sent(sent)
        # 12 answers; the two models' predictions are the same, so 6 distinct verdicts, each asked by
        # the first cell that needs it and taken from the cache by the other, unless the two cells
        # of a language ran at the same time (in two workers, or in one process's two slots)
        assert answers == 4 * 3 and len(judged) == 2 * 3 and max(judged.values()) <= 2
    assert stable(one) == {**stable(two), "name": "one"} and two["n_done"] == 4
    assert all(c["skipped"] for c in again["cells"])
    assert cell_files(tmp_path / "one") == cell_files(tmp_path / "two")
    assert stable(written) == stable(two)


def test_workers_are_forked_only_from_a_process_with_one_thread(monkeypatch):
    import threading

    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert start_method() == "fork"  # a CLI command: the workers start with its modules and items loaded
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert start_method() == "spawn"  # another thread could hold a lock at the fork (a notebook, a test's server)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr("sys.platform", "darwin")
    assert start_method() == "spawn"


def test_forked_workers_of_the_command_write_what_one_process_writes(tmp_path):
    """The command runs with one thread, so its workers are forked (this test's process runs the fake
    server in a thread: run_grid here spawns them); the records and summaries are those of one process."""
    import subprocess
    import sys

    with FakeServer(answers=reply) as srv:
        run_grid(write_config(tmp_path, srv.base_url, "one"), progress=False, workers=1)
        one = dict(srv.by_prompt)
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid",
                               str(write_config(tmp_path, srv.base_url, "forked")), "--workers", "2"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        forked = {p: n - one.get(p, 0) for p, n in srv.by_prompt.items() if n > one.get(p, 0)}

    def judged(counts: dict[str, int], yes: bool = True) -> dict[str, int]:
        return {p: n for p, n in counts.items() if ("candidate_answer" in p) == yes}

    assert judged(forked, False) == judged(one, False)  # every cell's answers sent from a worker, the same requests
    # the same verdict asked by two cells at once is sent once or twice (the second may find it in the shared cache)
    assert judged(forked).keys() == judged(one).keys() and all(1 <= n <= 2 for n in judged(forked).values())
    assert "2 workers" in proc.stderr  # (the progress bar's name: the cells ran in worker processes)
    assert cell_files(tmp_path / "one") == cell_files(tmp_path / "forked")
    manifests = [json.loads((d / "manifest.json").read_text()) for d in sorted((tmp_path / "forked").glob("*__*"))]
    assert len(manifests) == 4 and all("git_sha" in m for m in manifests)


@pytest.mark.parametrize("parallel", [2, 3])  # 3: two cells per worker at a share of their concurrency
def test_max_cost_is_never_exceeded_with_two_workers(tmp_path, monkeypatch, capsys, parallel):
    prices = tmp_path / "prices.csv"
    # 1,000 USD per million tokens: each call's upper bound is a few cents (32 output tokens + prompt)
    prices.write_text("model,input_per_mtok,output_per_mtok,batch_discount\n"
                      "model-a,1000,1000,0.5\nmodel-b,1000,1000,0.5\nfake-judge,1000,1000,0.5\n")
    monkeypatch.setenv("CRESOWLVE_PRICES", str(prices))
    max_cost = 1.0
    with FakeServer(answers=reply) as srv:
        config = write_config(tmp_path, srv.base_url, "budget", limit=12, parallel=parallel, options={
            "concurrency": 3, "max_tokens": 32, "max_cost": max_cost, "cache_path": str(tmp_path / "b.sqlite")})
        rc = main(["grid", str(config), "--workers", "2"])
    err = capsys.readouterr().err
    assert rc == 3, err  # --max-cost reached: exit 3, as a single eval
    grid = json.loads((tmp_path / "budget" / GRID_FILE).read_text())
    assert "stopped" in {c["status"] for c in grid["cells"]} <= {"stopped", "done"}
    for c in grid["cells"]:
        s = json.loads((Path(c["run_dir"]) / "summary.json").read_text())
        spent = s["spent_now"]["model"]["spent"]  # max_cost caps the model under test (the judge has no cap)
        assert 0 < spent <= max_cost, s["spent_now"]
        if c["status"] == "stopped":
            assert s["stopped"].startswith("max_cost reached") and s["n_not_run"] > 0


def test_an_errored_cell_exits_non_zero_with_workers(tmp_path, capsys):
    with FakeServer(answers=reply, faults=lambda r: "404" if r.body.get("model") == "model-b" else None) as srv:
        rc = main(["grid", str(write_config(tmp_path, srv.base_url, "dead")), "--workers", "2"])
    err = capsys.readouterr().err
    assert rc == 3, err  # a model that does not exist stops its cells; the other cells ran
    assert last_line(err).startswith("stopped early (2 cell(s) stopped; model-b-medium__")
    statuses = {c["cell"]: c["status"] for c in json.loads((tmp_path / "dead" / GRID_FILE).read_text())["cells"]}
    assert statuses["model-a__en"] == statuses["model-a__ru"] == "done"


def write_items(path: Path, n: int) -> Path:
    """``n`` items with an En and a Ru view (the demo items have 3 in Ru), so both languages' cells have more work than the test lets the server answer."""
    from cresowlve_core.items import Item, ItemView

    items = [Item(id=f"chgk_{i:010x}", difficulty=1 + i % 5, reasoning_type="creative",
                  en=ItemView(question=f"Puzzle {i}?", answer="Copernicus"),
                  ru=ItemView(question=f"Загадка {i}?", answer="Коперник")) for i in range(n)]
    path.write_text("".join(it.model_dump_json() + "\n" for it in items), encoding="utf-8")
    return path


def test_ctrl_c_stops_every_worker_and_writes_the_grid_summary(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 12)
    # each cell's first 2 requests are answered, the later ones held (the server decides, not its latency):
    # at the signal both cells have answered and wait on their requests, neither can have finished
    gate = Gate(reply, quota=2, key=lambda req: (req.body.get("model"), "Загадка" in req.prompt))
    with gate, FakeServer(answers=gate) as srv:
        config = write_config(tmp_path, srv.base_url, "stop", items=str(items), limit=12, judge=None)
        proc = spawn_cli(["grid", str(config), "--workers", "2"])

        def both_cells_answering() -> bool:
            answered = sum(n_lines(d, "responses.jsonl") > 0 for d in (tmp_path / "stop").glob("*__*"))
            return answered == 2 and len(gate.held()) == 2

        stdout, stderr, after = signal_mid_step(proc, srv, "answers in two cells", both_cells_answering, signal.SIGINT,
                                                on_signal=gate.release_held)
    assert proc.returncode == 130, stderr
    assert after <= 4, f"{after} requests after the signal (2 cells x concurrency 2)"
    cells = {c["cell"]: c["status"] for c in json.loads((tmp_path / "stop" / GRID_FILE).read_text())["cells"]}
    assert sorted(cells.values()) == ["interrupted", "interrupted", "not_run", "not_run"], cells
    assert last_line(stderr) == "interrupted (Ctrl-C): 0 of 4 cells done; the report was skipped; run again to resume"


def test_the_last_line_names_every_stopped_cell_a_dead_worker_s_too(tmp_path, monkeypatch, capsys):
    """A budget stops one cell and a worker process is killed under another: the last line names both
    (it named the first alone, so the cell of the dead worker was in no line on stderr)."""
    import cresowlve_core.evaluation.grid_run as grid_run

    def row(cell: str, status: str, error: str | None, line: str | None) -> dict:
        return {"cell": cell, "config": cell, "lang": "en", "status": status, "error": error, "line": line,
                "stopped": None}

    out = {"cells": [row("costly__en", "stopped", None, "n=9 ok=4 | STOPPED: max_cost reached"),
                     row("slow__en", "failed", "the worker process running this cell exited with code -9", None),
                     row("fine__en", "done", None, "n=9 ok=9")],
           "n_cells": 3, "n_done": 1, "aliases": {}}
    monkeypatch.setattr(grid_run, "run_grid", lambda *a, **k: out)
    rc = main(["grid", str(tmp_path / "g.yaml"), "--workers", "2"])
    last = last_line(capsys.readouterr().err)
    assert rc == 3, last
    assert last.startswith("stopped early (2 cell(s) stopped; costly__en: n=9 ok=4"), last
    assert "also stopped: slow__en" in last, last
