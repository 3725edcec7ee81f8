"""``cresowlve build`` end to end as a subprocess, against the scripted replies of the paper's items.

A first run writes the exports and the data card; a second run of the same command resumes from
the step records and sends no request; a rejected key (HTTP 401) stops the build with exit code 3
and a last line naming the step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fakeserver import FakeServer
from test_construction_pipeline import DEMO, SCRIPTED_DOMAINS, scripted

from cresowlve_core.exitcodes import EXIT_STOPPED
from cresowlve_core.sources.hub import read_published_file


def _build(tmp_path: Path, base_url: str, build_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRESOWLVE_CACHE_DIR": str(tmp_path / "cache"), "CRESOWLVE_DATA_DIR": str(tmp_path / "data"),
           "CRESOWLVE_REPORTS_DIR": str(tmp_path / "reports")}
    cmd = [sys.executable, "-m", "cresowlve_core.cli", "build", "--source", DEMO, "--model", "fake",
           "--base-url", base_url, "--build-dir", str(build_dir), "--no-cache", "--agreement-n", "3"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def test_build_command_exports_and_a_rerun_sends_nothing(tmp_path: Path, construction_domain_embeddings) -> None:
    build_dir = tmp_path / "build"
    construction_domain_embeddings(tmp_path / "cache", SCRIPTED_DOMAINS)
    with FakeServer(answers=scripted) as srv:
        first = _build(tmp_path, srv.base_url, build_dir)
        assert first.returncode == 0, first.stderr[-2000:]
        sent = srv.total
        # 8 items x 2 filters, 7 left after the Russian-specific filter x (translate + 5 annotations)
        assert sent == 8 * 2 + 7 * 6
        second = _build(tmp_path, srv.base_url, build_dir)
        assert second.returncode == 0, second.stderr[-2000:]
        assert srv.total == sent  # resumed from the step records: not one request more
    line, card_line = first.stdout.splitlines()
    assert line.startswith("build ") and "collected 8 (15 read: 7 unusable) → −needs material 0 → −Russian-specific 1" in line
    assert "final 7" in line and "unparseable: none" in line and f"{sent} sent" in line
    assert "(7 not human-validated)" in line  # no decision saved: every final item is unreviewed, and said so
    again = second.stdout.splitlines()[0]
    assert "nothing sent" in again and again.split(";")[:2] == line.split(";")[:2]
    data_card = Path(card_line.removeprefix("data card: "))
    export = build_dir / "export"
    for subset in ("creative", "factual"):
        for lang in ("en", "ru"):
            for ext in ("parquet", "jsonl"):
                assert (export / subset / lang / f"test.{ext}").is_file()
    assert len(read_published_file(export / "creative" / "en" / "test.parquet", "en")) == 6
    assert (export / "full.jsonl").is_file()
    card = data_card.read_text(encoding="utf-8")
    assert data_card == export / "DATA_CARD.md"
    assert "| −Russian-specific | 1 | 799 |" in card and "not yet annotated" in card.lower()
    assert (build_dir / "review" / "agreement_queue.jsonl").read_text().count("\n") == 3
    assert not (tmp_path / "data" / "builds").exists()  # only the build directory given


def test_a_build_whose_model_output_never_parses_exits_1_with_the_counts(tmp_path: Path) -> None:
    with FakeServer(answers=lambda req: "no idea") as srv:
        res = _build(tmp_path, srv.base_url, tmp_path / "build")
    assert res.returncode == 1, res.stderr[-2000:]
    last = [line for line in res.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("incomplete: no model output parsed in ") and "needs_material 0 of 8 answers parsed," in last
    assert "unparseable: needs_material 8/8, russian_specific 8/8" in res.stdout  # the funnel line shows them


def test_build_command_stops_with_exit_3_on_a_rejected_key(tmp_path: Path) -> None:
    with FakeServer(answers=scripted, api_key="the-right-key") as srv:
        res = _build(tmp_path, srv.base_url, tmp_path / "build")
    assert res.returncode == EXIT_STOPPED
    last = [line for line in res.stderr.splitlines() if line.strip()][-1]  # docs/reliability.md's exit-3 line
    assert last.startswith("stopped early (needs_material: fatal: ") and "401" in last
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert not (tmp_path / "build" / "export").exists()  # stopped: no card from an unfiltered build


def test_the_construction_report_of_a_build_stopped_by_a_rejected_key_exits_3_as_build_does(tmp_path: Path) -> None:
    """`cresowlve report 01_construction` (and so `cresowlve run`, which renders it) on a wrong key: before,
    the cell after the stopped step raised BuildStopped, the render failed with a traceback (exit 1) and
    the main job skipped its remaining reports."""
    env = {**os.environ, "CRESOWLVE_CACHE_DIR": str(tmp_path / "cache"), "CRESOWLVE_DATA_DIR": str(tmp_path / "data"),
           "CRESOWLVE_REPORTS_DIR": str(tmp_path / "reports")}
    build_dir = tmp_path / "build"
    with FakeServer(answers=scripted, api_key="the-right-key") as srv:
        cmd = [sys.executable, "-m", "cresowlve_core.cli", "report", "01_construction", "-p", "model", "fake",
               "-p", "base_url", srv.base_url, "-p", "build_dir", str(build_dir), "-p", "limit", "2",
               "--reports-dir", str(tmp_path / "reports")]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == EXIT_STOPPED, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    last = [line for line in res.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("stopped early (needs_material: fatal: ") and "401" in last, last
    assert list((tmp_path / "reports").glob("01_construction*.html"))  # the report is rendered
    assert not (build_dir / "export").exists()  # stopped: nothing exported as if the build were done
    assert '"stopped_at": "needs_material"' in (build_dir / "build.json").read_text()
