"""``cresowlve run`` (the main job) stops as docs/reliability.md says: the first
SIGTERM stops the notebook being rendered (its kernel shut down), skips the other reports, says
which were written and exits 143. Before: papermill's kernel client replaced the process's SIGTERM
handler while rendering, so no summary line was written and the exit code did not say why."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from fakeserver import FakeServer
from stophelp import last_line, spawn_cli, wait_until


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_sigterm_stops_the_report_being_rendered_and_skips_the_rest(tmp_path):
    reports = tmp_path / "reports"
    with FakeServer(answers=lambda r: "<Answer>Copernicus</Answer>", latency_s=0.5) as srv:
        env = {"CRESOWLVE_BASE_URL": srv.base_url, "CRESOWLVE_MODEL": "fake-model",
               "CRESOWLVE_JUDGE_MODEL": "fake-judge", "CRESOWLVE_JUDGE_BASE_URL": srv.base_url,
               "CRESOWLVE_REPORTS_DIR": str(reports), "CRESOWLVE_DATA_DIR": str(tmp_path / "data")}
        proc = spawn_cli(["run", "--quick"], env=env, ignore_sigint=True)  # a background job of a script
        wait_until("the first report", lambda: (reports / "00_data_overview.html").exists(), proc, timeout=240)
        wait_until("a request of 02_evaluation", lambda: srv.total >= 1, proc, timeout=240)
        below = descendants(proc.pid)  # the render's child process and its kernel
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "main job interrupted during 02_evaluation_en: 1 report(s) written (00_data_overview.html)" in stdout
    assert last_line(stderr).startswith("interrupted (SIGTERM): 1 report(s) written, stopped during 02_evaluation_en")
    assert sorted(p.name for p in reports.glob("*.html")) == ["00_data_overview.html", "index.html"]
    deadline = time.monotonic() + 10
    while any(alive(p) for p in below) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert below and not [p for p in below if alive(p)]  # no kernel left behind
