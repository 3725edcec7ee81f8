"""Every chart of rendered HTML reports as a static PNG at 1,400 px, for a person to look at.

``python bench/screenshots.py OUT_DIR REPORT.html ...`` opens each report in headless Chromium
(``tests/chromium.py``, window 1,400 px wide), waits until every chart has drawn, and writes one PNG
per chart, ``OUT_DIR/REPORT__NN.png`` (the chart's own box, as a reader sees it), a whole-page PNG
``OUT_DIR/REPORT__page.png`` (tables as they read), and the list of every chart,
``OUT_DIR/screenshots.tsv``: report, file, the section heading above the chart, the chart's title (its
own, else its axis titles), size, the share of non-white pixels in the PNG (decoded back by the
browser: 0 is a chart that drew nothing) and whether the chart is wider than the page. Each report's
line also counts tables cut off at the page edge and browser errors. Never writes into ``reports/``.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chromium import Browser  # noqa: E402  (tests/chromium.py: the DevTools helpers)

PAGE_WIDTH = 1400
_DRAWN = ("Array.from(document.querySelectorAll('.cresowlve-vega-chart'))"
          ".every(d => d.querySelector('svg, canvas') || d.textContent.includes('failed'))")
# Each chart's box, and the heading above it (the nearest h1-h4 before it in document order).
_BOXES = """JSON.stringify(Array.from(document.querySelectorAll('.cresowlve-vega-chart')).map(d => {
  const r = d.getBoundingClientRect();
  const heads = Array.from(document.querySelectorAll('h1, h2, h3, h4'))
    .filter(h => h.compareDocumentPosition(d) & Node.DOCUMENT_POSITION_FOLLOWING);
  const head = heads.length ? heads[heads.length - 1].textContent.replace(/\\u00b6/g, '').trim() : '';
  const g = d.querySelector('canvas, svg');
  const cut = g ? g.getBoundingClientRect().right > document.documentElement.clientWidth + 1 : false;
  return {id: d.id, x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height, cut: cut, section: head};
}))"""
_WIDE_TABLES = """JSON.stringify(Array.from(document.querySelectorAll('table')).filter(t => {
  let box = t.parentElement;  // a table is cut off when it passes the page edge and no box around it scrolls
  while (box && getComputedStyle(box).overflowX !== 'auto' && getComputedStyle(box).overflowX !== 'scroll') {
    box = box.parentElement; }
  const edge = box ? box.getBoundingClientRect().right : document.documentElement.clientWidth;
  return !box && t.getBoundingClientRect().right > edge + 1; }).length)"""
# The share of pixels of a PNG (base64) that are not white, decoded by the browser itself.
_INK = """(async () => {
  const img = new Image(); img.src = 'data:image/png;base64,%s'; await img.decode();
  const c = new OffscreenCanvas(img.width, img.height), g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const px = g.getImageData(0, 0, img.width, img.height).data; let ink = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i] < 235 || px[i + 1] < 235 || px[i + 2] < 235) ink++;
  return JSON.stringify({w: img.width, h: img.height, ink: ink / Math.max(1, img.width * img.height)});
})()"""
_EMBED = re.compile(r'vegaEmbed\("#(vis-[0-9a-f]+)", (.*?), \{"actions"')


@dataclass
class Shot:
    """One chart's screenshot and what the list says about it."""

    report: str
    file: str
    section: str
    title: str
    width: int
    height: int
    ink: float  # share of non-white pixels in the PNG
    wider_than_page: bool  # the chart passes the page's right edge: a reader must scroll to see it


    def problems(self, min_ink: float = 0.005, min_size: tuple[int, int] = (120, 40)) -> list[str]:
        """What makes this screenshot unusable as a static figure (empty when none)."""
        found = []
        if self.ink < min_ink:
            found.append(f"blank ({self.ink:.2%} of pixels not white)")
        if self.width < min_size[0] or self.height < min_size[1]:
            found.append(f"too small ({self.width}x{self.height}px)")
        if self.wider_than_page:
            found.append(f"wider than the {PAGE_WIDTH} px page")
        return found


def _text(title: Any) -> str:
    if isinstance(title, dict):
        title = title.get("text", "")
    return " ".join(title) if isinstance(title, list) else str(title or "")


def spec_title(spec: dict[str, Any]) -> str:
    """A chart's own title, else the titles of the first view's axes (``y by x``)."""
    if _text(spec.get("title")):
        return _text(spec["title"])
    for key in ("spec", "hconcat", "vconcat", "concat", "layer"):
        inner = spec.get(key)
        for part in inner if isinstance(inner, list) else [inner] if isinstance(inner, dict) else []:
            if found := spec_title(part):
                return found
    enc = spec.get("encoding", {})
    axes = [_text(enc.get(a, {}).get("title")) for a in ("y", "x") if isinstance(enc.get(a), dict)]
    return " by ".join(a for a in axes if a)


def chart_titles(html: str) -> dict[str, str]:
    """Chart id -> title, from the specs inlined in a report page."""
    out = {}
    for m in _EMBED.finditer(html):
        try:
            out[m.group(1)] = spec_title(json.loads(m.group(2)))
        except (json.JSONDecodeError, AttributeError):
            out[m.group(1)] = ""
    return out


def shoot(browser: Browser, report: Path, out: Path) -> tuple[list[Shot], str]:
    """Screenshot every chart of one report; the shots and the report's summary line."""
    browser.open(report.resolve().as_uri(), ready=f"document.readyState === 'complete' && {_DRAWN}", timeout_s=180)
    titles = chart_titles(report.read_text(encoding="utf-8"))
    # the viewport as tall as the page: a capture beyond it would reflow the page (no scrollbar, wider
    # text) after the boxes were measured, and every clip would be shifted
    height = int(browser.evaluate("document.documentElement.scrollHeight"))
    browser.call("Emulation.setDeviceMetricsOverride", width=PAGE_WIDTH, height=height, deviceScaleFactor=1,
                 mobile=False)
    # the chart's action menu ("…") is an on-screen control, not part of the figure
    browser.evaluate("document.head.insertAdjacentHTML('beforeend', '<style>.vega-embed details "
                     "{visibility: hidden}</style>')")
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    shots = []
    for i, box in enumerate(json.loads(browser.evaluate(_BOXES)), 1):
        clip = {"x": box["x"], "y": box["y"], "width": max(1, box["w"]), "height": max(1, box["h"]), "scale": 1}
        data = browser.call("Page.captureScreenshot", format="png", clip=clip)["data"]
        png = out / f"{report.stem}__{i:02d}.png"
        png.write_bytes(base64.b64decode(data))
        decoded = json.loads(browser.evaluate(_INK % data))
        shots.append(Shot(report.stem, png.name, box["section"], titles.get(box["id"], ""), decoded["w"], decoded["h"],
                          round(decoded["ink"], 4), box["cut"]))
    wide = json.loads(browser.evaluate(_WIDE_TABLES))
    browser.screenshot(out / f"{report.stem}__page.png")
    browser.call("Emulation.clearDeviceMetricsOverride")
    return shots, f"{report.name}: {len(shots)} chart(s), {wide} table(s) cut off at the page edge, " \
                  f"{len(browser.errors)} browser error(s)"


def write_list(shots: list[Shot], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(Shot.__dataclass_fields__), delimiter="\t")
        w.writeheader()
        w.writerows(asdict(s) for s in shots)
    return path


def shoot_all(out: Path, reports: list[Path], echo: bool = True) -> list[Shot]:
    """Screenshot every chart of every report into ``out``; write ``out/screenshots.tsv``."""
    out.mkdir(parents=True, exist_ok=True)
    browser = Browser()
    shots: list[Shot] = []
    try:
        for report in reports:
            found, summary = shoot(browser, report, out)
            shots += found
            for s in found if echo else []:
                print(f"{s.file}: {s.section} | {s.title or '(untitled)'} {s.width}x{s.height}px, ink {s.ink:.1%}"
                      + "".join(f"; {p}" for p in s.problems()), flush=True)
            if echo:
                print(summary, flush=True)
    finally:
        browser.close()
    write_list(shots, out / "screenshots.tsv")
    return shots


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Every chart of rendered HTML reports as a static PNG at 1,400 px.")
    parser.add_argument("out_dir", type=Path, help="where the PNGs and screenshots.tsv go (never reports/)")
    parser.add_argument("reports", type=Path, nargs="+", help="rendered report HTML files")
    args = parser.parse_args(argv)
    shots = shoot_all(args.out_dir, args.reports)
    bad = sum(1 for s in shots if s.problems())
    print(f"{len(shots)} chart(s), {bad} with a problem; list: {args.out_dir / 'screenshots.tsv'}")
    if not shots or bad:
        print(f"incomplete: {'no chart found' if not shots else f'{bad} chart(s) blank, too small or cut off'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
