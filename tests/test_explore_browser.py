"""Both explorers in headless Chromium: the red embedded-model banner is on screen when an error
label they show came from the embedded model (the answers being a named model's).

The ipywidgets explorer is the executed ``explore.ipynb`` opened in JupyterLab; the marimo one is
``marimo run notebooks/explore.py``. Visible means: the banner element is laid out (non-zero size),
not hidden, and red. Skips without Chromium, websocket-client, JupyterLab or marimo.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest
from chromium import CHROMIUM, Browser, JupyterLab, marimo_run, websocket

from cresowlve_core.error_analysis.wrong import output_hash
from cresowlve_core.sources.sample import load_items

sys.path.insert(0, str(Path(__file__).resolve().parent / "analysis"))
from test_analysis_fixtures import record, write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.skipif(websocket is None, reason="websocket-client is not installed (pip install -e '.[test]')"),
]

# the banner as the page shows it: searched in the document and in every shadow root (marimo's outputs).
# JupyterLab's sanitizer drops data-* attributes from an untrusted notebook's HTML: found by class and text.
BANNER_JS = """(() => {
  const find = (root) => {
    const hit = Array.from(root.querySelectorAll('.cresowlve-banner'))
      .find(b => b.textContent.includes('EMBEDDED 270M BASE MODEL'));
    if (hit) return hit;
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) { const h = find(el.shadowRoot); if (h) return h; }
    }
    return null;
  };
  const b = find(document);
  if (!b) return null;
  const r = b.getBoundingClientRect(), s = getComputedStyle(b);
  return {width: r.width, height: r.height, display: s.display, visibility: s.visibility,
          background: s.backgroundColor, text: b.textContent};
})()"""


def _inputs(root: Path) -> tuple[Path, Path]:
    """A run of a named model (one wrong answer) and that answer's error label by the embedded model."""
    item = load_items("demo", "en")[0]
    write_run(root / "runs" / "a_en", [record(item.id, model="gpt-4o", prediction="Kepler", em_strict=False,
                                              thoughts="t")], model="gpt-4o")
    labels = root / "errors" / "labels" / "embedded"
    labels.mkdir(parents=True)
    rec = {"key": f"gpt-4o|en|{item.id}|{output_hash('Kepler', 't')}", "status": "ok", "config": "gpt-4o", "lang": "en",
           "id": item.id, "label": "wrong_reference", "rationale": "r", "labeller": "gemma3-270m"}
    (labels / "labels.jsonl").write_text(json.dumps(rec) + "\n")
    return root / "runs", root / "errors"


def _wait_banner(browser: Browser, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        state = browser.evaluate(BANNER_JS)
        if (state and state["height"] > 0) or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def _assert_visible(state: dict | None) -> None:
    assert state is not None, "no embedded banner on the page"
    assert state["width"] > 0 and state["height"] > 0, state
    assert state["display"] != "none" and state["visibility"] == "visible", state
    assert state["background"] == "rgb(176, 0, 32)", state  # #b00020
    assert "EMBEDDED 270M BASE MODEL" in state["text"] and "Error labels of gemma3-270m" in state["text"]


@pytest.mark.skipif(shutil.which("jupyter-lab", path=str(BIN)) is None, reason="jupyterlab not installed")
def test_jupyterlab_explorer_shows_the_embedded_banner_for_embedded_labels(tmp_path):
    from cresowlve_core.notebooks import run_notebook

    runs, labels = _inputs(tmp_path)
    reports = tmp_path / "reports"
    res = run_notebook("explore", {"runs": str(runs / "*"), "labels": str(labels)}, reports)
    lab, browser = JupyterLab(reports), Browser()
    try:
        browser.open(lab.notebook_url(res.ipynb.name, "explore"),
                     ready="document.querySelector('.jp-NotebookPanel .jp-Cell') !== null", timeout_s=120)
        _assert_visible(_wait_banner(browser, 60))
    finally:
        browser.close()
        lab.close()


@pytest.mark.skipif(not (BIN / "marimo").exists(), reason="marimo not installed")
def test_marimo_explorer_shows_the_embedded_banner_for_embedded_labels(tmp_path):
    runs, labels = _inputs(tmp_path)
    browser = Browser()
    try:
        with marimo_run(REPO / "notebooks" / "explore.py", tmp_path, ["--runs", str(runs / "*"),
                                                                      "--labels", str(labels)]) as url:
            browser.open(url, timeout_s=60)
            _assert_visible(_wait_banner(browser, 120))
    finally:
        browser.close()
