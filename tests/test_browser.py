"""Reports checked in a real browser: headless Chromium loads every rendered report and the index.

Each altair chart must have drawn an SVG or canvas of non-zero size, and the page must log no
console error or uncaught exception. Skips cleanly when Chromium (Debian's ``chromium``) or
``websocket-client`` is missing; ``setup.sh`` installs Chromium when it runs as root.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cresowlve_core.notebooks import run_notebook

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
websocket = pytest.importorskip("websocket", reason="websocket-client is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")


class Browser:
    """One headless Chromium driven over the DevTools protocol (one page, console collected)."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="cresowlve-chromium-")
        self.proc = subprocess.Popen(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             "--no-first-run", "--no-default-browser-check", "--allow-file-access-from-files",
             f"--user-data-dir={self.profile}", "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        port = self._devtools_port()
        deadline = time.monotonic() + 20
        while True:
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
                page = next(t for t in targets if t.get("type") == "page")
                break
            except (OSError, StopIteration):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self._id = 0
        self.errors: list[str] = []
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)

    def _devtools_port(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                return int(m.group(1))
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("chromium did not start its DevTools endpoint")

    def _event(self, msg: dict[str, Any]) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout_s: float = 60) -> None:
        """Navigate and wait (in real time) until the JS expression ``ready`` is true."""
        self.errors = []
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while not self.evaluate(f"Boolean({ready})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: not ready after {timeout_s}s ({ready})")
            time.sleep(0.25)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


# Every chart container of a report, with the size of what Vega drew in it.
_CHARTS_JS = """(() => Array.from(document.querySelectorAll('.cresowlve-vega-chart')).map(div => {
  const g = div.querySelector('svg.marks, canvas.marks') || div.querySelector('svg, canvas');
  const r = g ? g.getBoundingClientRect() : {width: 0, height: 0};
  return {id: div.id, kind: g ? g.tagName.toLowerCase() : null, width: r.width, height: r.height,
          text: div.textContent.slice(0, 200)};
}))()"""
_CHARTS_DONE = ("Array.from(document.querySelectorAll('.cresowlve-vega-chart'))"
                ".every(d => d.querySelector('svg.marks, canvas.marks') || d.textContent.includes('failed'))")


def check_report(browser: Browser, html: Path, min_charts: int = 1) -> list[dict[str, Any]]:
    """Load one report; every chart drew something of non-zero size and nothing logged an error."""
    browser.open(html.as_uri(), ready=f"document.readyState === 'complete' && {_CHARTS_DONE}")
    charts = browser.evaluate(_CHARTS_JS)
    assert len(charts) >= min_charts, f"{html.name}: {len(charts)} charts"
    bad = [c for c in charts if c["kind"] not in ("svg", "canvas") or c["width"] <= 0 or c["height"] <= 0]
    assert not bad, f"{html.name}: charts not drawn: {bad}"
    assert not browser.errors, f"{html.name}: console errors: {browser.errors}"
    return charts


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A reports folder with the data overview and a synthetic analysis (charts in every section)."""
    from cresowlve_core.analysis import write_synthetic_runs

    root = tmp_path_factory.mktemp("site")
    reports = root / "reports"
    run_notebook("00_data_overview", {}, reports)
    write_synthetic_runs(root / "runs", n_items=120, configs=3, seed=0)
    run_notebook("03_analysis", {"runs": str(root / "runs" / "*"), "semantic_distance": False, "n_boot": 100},
                 reports, output_name="03_analysis_synthetic")
    return reports


def test_every_report_draws_its_charts_without_console_errors(browser, site):
    pages = sorted(site.glob("*.html"))
    names = {p.name for p in pages}
    assert {"00_data_overview.html", "03_analysis_synthetic.html", "index.html"} <= names
    drawn = {p.name: check_report(browser, p) for p in pages if p.name != "index.html"}
    assert len(drawn["00_data_overview.html"]) == 1
    assert len(drawn["03_analysis_synthetic.html"]) >= 4  # difficulty, groups, creative/factual, complexity...
    if os.environ.get("CRESOWLVE_SCREENSHOTS"):
        for p in pages:
            browser.open(p.as_uri())
            browser.screenshot(Path(os.environ["CRESOWLVE_SCREENSHOTS"]) / (p.stem + ".png"))


def test_index_page_loads_and_every_link_resolves(browser, site):
    browser.open((site / "index.html").as_uri())
    assert not browser.errors, browser.errors
    links = browser.evaluate("Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))")
    local = [h for h in links if not h.startswith(("http:", "https:", "#"))]
    assert local and all((site / h).exists() for h in local), [h for h in local if not (site / h).exists()]
    banner = browser.evaluate("(document.querySelector('.cresowlve-banner') || {}).textContent || ''")
    assert "SYNTHETIC DATA" in banner
    assert browser.evaluate("document.querySelectorAll('section.report').length") == 2


def test_the_check_fails_on_a_chart_that_cannot_draw(browser, tmp_path):
    """Not vacuous: a chart whose spec Vega rejects is reported (failed drawing and console error)."""
    from cresowlve_core.notebooks import _chart_html, _vega_bundle

    page = tmp_path / "broken.html"
    page.write_text(f"<html><head><script>{_vega_bundle()}</script></head><body>"
                    + _chart_html({"mark": "no-such-mark", "data": {"values": [{"a": 1}]}}) + "</body></html>")
    with pytest.raises(AssertionError, match="not drawn|console errors"):
        check_report(browser, page)
