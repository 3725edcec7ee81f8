"""Reports checked in a real browser: headless Chromium loads every rendered report and the index.

Each altair chart must have drawn an SVG or canvas of non-zero size, and the page must log no
console error or uncaught exception. Skips cleanly when Chromium (Debian's ``chromium``) or
``websocket-client`` is missing; ``setup.sh`` installs Chromium when it runs as root.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from chromium import CHROMIUM, Browser, websocket

from cresowlve_core.notebooks import run_notebook

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
              pytest.mark.skipif(websocket is None, reason="websocket-client is not installed (pip install -e '.[test]')")]


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
    mismatch = [w for w in browser.warnings if "current version" in w]  # vega-embed: spec vs library version
    assert not mismatch, f"{html.name}: Vega version warnings: {mismatch}"
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


def _screenshots():
    """bench/screenshots.py, the script a person runs to look at every chart."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "bench" / "screenshots.py"
    spec = importlib.util.spec_from_file_location("screenshots", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there while it executes
    spec.loader.exec_module(module)
    return module


def artefact_dir(tmp_path: Path, name: str) -> Path:
    """Where a test keeps its screenshots: ``$CRESOWLVE_ARTEFACT_DIR/screenshots/NAME`` when set (CI keeps
    them), else the test's temporary folder."""
    root = os.environ.get("CRESOWLVE_ARTEFACT_DIR")
    return (Path(root) / "screenshots" if root else tmp_path) / name


def test_every_chart_has_a_static_screenshot_at_1400_px(site, tmp_path):
    """Each chart of each report as the PNG a reader sees at 1,400 px: it drew (pixels not white, decoded
    back from the file), has a figure's size and fits the page; the list names every one."""
    shots_mod = _screenshots()
    out = artefact_dir(tmp_path, "reports")
    pages = sorted(p for p in site.glob("*.html") if p.name != "index.html")
    shots = shots_mod.shoot_all(out, pages, echo=False)
    per_report = {p.stem: sum(1 for s in shots if s.report == p.stem) for p in pages}
    assert per_report["00_data_overview"] == 1 and per_report["03_analysis_synthetic"] >= 8, per_report
    for s in shots:
        png = out / s.file
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", s.file
        assert not s.problems(), (s.file, s.title, s.problems())
        assert s.title, f"{s.file}: a chart without a title or axis titles"
    listed = (out / "screenshots.tsv").read_text(encoding="utf-8").splitlines()
    assert len(listed) == 1 + len(shots) and all(s.file in "\n".join(listed) for s in shots)


def test_the_screenshot_check_fails_on_a_blank_or_cut_off_chart(tmp_path):
    """Not vacuous: a chart that draws nothing is blank, one wider than the page is cut off."""
    from cresowlve_core.notebooks import _chart_html
    from cresowlve_core.vega import javascript_bundle

    page = tmp_path / "bad.html"
    empty = {"mark": "point", "data": {"values": []}, "width": 300, "height": 200,
             "config": {"view": {"stroke": None}}}
    wide = {"mark": "bar", "data": {"values": [{"a": "x", "b": 1}]}, "width": 2000, "height": 100,
            "encoding": {"x": {"field": "b", "type": "quantitative"}, "y": {"field": "a", "type": "nominal"}}}
    page.write_text(f"<html><head><script>{javascript_bundle()}</script></head><body>"
                    + _chart_html(empty) + _chart_html(wide) + "</body></html>")
    blank, cut = _screenshots().shoot_all(tmp_path / "shots", [page], echo=False)
    assert any(p.startswith("blank") for p in blank.problems()), blank
    assert any(p.startswith("wider than") for p in cut.problems()), cut


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
    from cresowlve_core.notebooks import _chart_html
    from cresowlve_core.vega import javascript_bundle

    page = tmp_path / "broken.html"
    page.write_text(f"<html><head><script>{javascript_bundle()}</script></head><body>"
                    + _chart_html({"mark": "no-such-mark", "data": {"values": [{"a": 1}]}}) + "</body></html>")
    with pytest.raises(AssertionError, match="not drawn|console errors"):
        check_report(browser, page)
