"""Every chart of rendered HTML reports as a static PNG at 1,400 px, for a person to look at.

``python bench/screenshots.py OUT_DIR REPORT.html ...`` opens each report in headless Chromium
(``tests/chromium.py``, window 1,400 px wide), waits until every chart has drawn, and writes one PNG
per chart, ``OUT_DIR/REPORT__NN.png`` (the chart's own box), plus a line per chart with its title and
size. A table wider than the page is reported too. Never writes into ``reports/``.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chromium import Browser  # noqa: E402  (tests/chromium.py: the DevTools helpers)

_DRAWN = ("Array.from(document.querySelectorAll('.cresowlve-vega-chart'))"
          ".every(d => d.querySelector('svg, canvas') || d.textContent.includes('failed'))")
_BOXES = """JSON.stringify(Array.from(document.querySelectorAll('.cresowlve-vega-chart')).map(d => {
  const r = d.getBoundingClientRect();
  const t = d.querySelector('svg .role-title-text, svg .mark-text.role-title text');
  return {x: r.left + scrollX, y: r.top + scrollY, w: Math.max(r.width, d.scrollWidth), h: r.height,
          title: t ? t.textContent : ''};
}))"""
_WIDE_TABLES = """JSON.stringify(Array.from(document.querySelectorAll('table')).filter(t => {
  let box = t.parentElement;  // a table is cut off when it passes the page edge and no box around it scrolls
  while (box && getComputedStyle(box).overflowX !== 'auto' && getComputedStyle(box).overflowX !== 'scroll') {
    box = box.parentElement; }
  const edge = box ? box.getBoundingClientRect().right : document.documentElement.clientWidth;
  return !box && t.getBoundingClientRect().right > edge + 1; }).length)"""


def shoot(browser: Browser, report: Path, out: Path) -> list[str]:
    browser.open(report.resolve().as_uri(), ready=f"document.readyState === 'complete' && {_DRAWN}", timeout_s=180)
    lines = []
    for i, box in enumerate(json.loads(browser.evaluate(_BOXES)), 1):
        clip = {"x": box["x"], "y": box["y"], "width": max(1, box["w"]), "height": max(1, box["h"]), "scale": 1}
        data = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        png = out / f"{report.stem}__{i:02d}.png"
        png.write_bytes(base64.b64decode(data))
        lines.append(f"{png.name}: {box['title'] or '(untitled)'} {box['w']:.0f}x{box['h']:.0f}px")
    wide = json.loads(browser.evaluate(_WIDE_TABLES))
    lines.append(f"{report.name}: {wide} table(s) cut off at the page edge; {len(browser.errors)} browser error(s)")
    browser.screenshot(out / f"{report.stem}__page.png")  # the whole page: tables as they read
    return lines


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    browser = Browser()
    try:
        for report in map(Path, argv[1:]):
            print("\n".join(shoot(browser, report, out)), flush=True)
    finally:
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
