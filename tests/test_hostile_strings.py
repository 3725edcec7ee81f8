"""Hostile strings from run directories stay text: a canary script planted in the model name, the grid
label, the judge model, an item id, the reference answer, the model's answer and the judge's output
runs 0 times in headless Chromium (every chart tooltip shown, as on hover), in every report that reads run directories (02, 03, 04, explore),
the index page, the ipywidgets explorer and the marimo explorer.

Each payload calls ``canary(field)``, a DevTools binding: any call is a script that ran. The check is
not vacuous: a page holding the raw payload records calls, and the rendered reports show the payload
as visible text. Skips without Chromium, like ``test_browser.py``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from chromium import CHROMIUM, Browser, marimo_run, websocket
from fakeserver import FakeServer

from cresowlve_core.cli import main
from cresowlve_core.items import Item, ItemView
from cresowlve_core.notebooks import run_notebook

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
              pytest.mark.skipif(websocket is None, reason="websocket-client is not installed (pip install -e '.[test]')")]

REPO = Path(__file__).resolve().parents[1]


def payload(field: str) -> str:
    """Markup that calls ``canary(field)`` if a page ever runs it (an event handler and a script)."""
    return f"<img src=x onerror=canary('{field}')><script>canary('{field}')</script>"


MODEL = "m" + payload("model")
LABEL = "L" + payload("label")
JUDGE = "j" + payload("judge_model")
ITEM_IDS = [f"chgk_{i}" + payload("item_id") for i in range(3)]


def _answers(req: Any) -> str:
    if "candidate_answer" in req.prompt:  # the judge: a hostile reply ending in a parseable verdict
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"{payload('judge_output')}\nVERDICT-{nonce}: INCORRECT"
    if "CATEGORY" in req.prompt:  # the error labeller
        return f"RATIONALE: {payload('rationale')}\nCATEGORY: Overthinking"
    return f"Thinking {payload('reasoning')}\n<Answer>{payload('answer')}</Answer>"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A grid of two hostile configurations (one labelled) run against the fake server, and every
    report that reads it rendered into one reports folder."""
    root = tmp_path_factory.mktemp("hostile")
    items = root / "items.jsonl"
    items.write_text("".join(json.dumps(Item(id=i, en=ItemView(question=f"Puzzle {n}: who?",
                                                                answer=payload("reference"))).model_dump()) + "\n"
                             for n, i in enumerate(ITEM_IDS)), encoding="utf-8")
    reports = root / "reports"
    with FakeServer(answers=_answers) as srv:
        conf = {"name": "hostile", "items": str(items), "langs": ["en"], "parallel": 1, "report": False,
                "runs_dir": str(root / "grid"), "options": {"concurrency": 2, "max_tokens": 64},
                "judge": {"model": JUDGE, "base_url": srv.base_url},
                "models": [{"model": MODEL, "base_url": srv.base_url, "label": LABEL},
                           {"model": MODEL + "2", "base_url": srv.base_url}]}
        (root / "grid.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
        assert main(["grid", str(root / "grid.yaml")]) == 0
        grid_json = next((root / "grid").rglob("grid.json"))
        cells = json.loads(grid_json.read_text())["cells"]
        run_dir = next(c["run_dir"] for c in cells if c["model"] == MODEL)
        run_notebook("02_evaluation", {"items": str(items), "model": MODEL, "base_url": srv.base_url,
                                       "judge_model": JUDGE, "judge_base_url": srv.base_url, "run_dir": run_dir,
                                       "max_tokens": 64, "concurrency": 2}, reports)
        run_notebook("03_analysis", {"runs": str(grid_json), "semantic_distance": False, "n_boot": 50, "n_perm": 50},
                     reports)
        run_notebook("04_error_analysis", {"runs": str(grid_json), "out_dir": str(root / "errors"), "limit": None,
                                           "labeller_model": MODEL, "labeller_base_url": srv.base_url,
                                           "make_demo": False, "n_boot": 50}, reports)
        run_notebook("explore", {"runs": str(grid_json), "items": str(items), "labels": str(root / "errors"),
                                 "n_static": 3}, reports)
    return {"root": root, "reports": reports, "grid_json": grid_json, "items": items}


# every chart's Vega view, kept as the page's vegaEmbed calls resolve (installed before any script runs)
KEEP_VIEWS = """(() => { let embed;
  Object.defineProperty(window, 'vegaEmbed', {configurable: true, get() { return embed; }, set(real) {
    embed = (...args) => real(...args).then(r => { (window.__views = window.__views || []).push(r.view); return r; });
    Object.assign(embed, real); }}); })()"""

# every mark that has a tooltip gets it shown, as Vega does on hover: the view's tooltip handler (the
# reports' vega-embed default, vega-tooltip) called with the mark and its tooltip value
SHOW_TOOLTIPS = """(() => { let shown = 0, hostile = 0, text = '';
  for (const view of window.__views || []) {
    const show = view.tooltip(), marks = [];
    (function walk(n) { if (!n) return; if (n.tooltip != null) marks.push(n);
      for (const c of (n.items || [])) walk(c); })(view.scenegraph().root);
    for (const mark of marks) {
      show(view._handler, new MouseEvent('pointermove', {clientX: 20, clientY: 20}), mark, mark.tooltip);
      const el = document.getElementById('vg-tooltip-element');
      shown += 1; if (JSON.stringify(mark.tooltip).includes('canary')) { hostile += 1; text += el ? el.textContent : ''; }
    }
  }
  return {shown, hostile, text}; })()"""


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    b.add_binding("canary")
    b.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_VIEWS)
    yield b
    b.close()


def _executions(browser: Browser, url: str, ready: str = "document.readyState === 'complete'",
                settle_s: float = 1.0) -> list[str]:
    """Load ``url`` and return the canary calls it made (after the page settled), every chart
    tooltip shown (:data:`SHOW_TOOLTIPS`)."""
    browser.bindings = []
    browser.open(url, ready=ready)
    time.sleep(settle_s)  # late handlers (images failing to load, charts drawing)
    browser.evaluate(SHOW_TOOLTIPS)
    time.sleep(0.5)  # an image in a tooltip fails to load
    browser.evaluate("1")  # drain the events that arrived meanwhile
    return list(browser.bindings)


def test_the_canary_counts_a_script_that_runs(browser, tmp_path):
    """Not vacuous: the same payloads placed raw in a page are counted."""
    page = tmp_path / "raw.html"
    page.write_text(f"<html><body>{MODEL}{ITEM_IDS[0]}</body></html>", encoding="utf-8")
    calls = _executions(browser, page.as_uri())
    assert calls.count("model") == 2 and calls.count("item_id") == 2, calls


def test_no_report_runs_a_planted_script(browser, hostile):
    pages = sorted(hostile["reports"].glob("*.html"))
    assert {p.name for p in pages} >= {"02_evaluation.html", "03_analysis.html", "04_error_analysis.html",
                                       "explore.html", "index.html"}
    calls, tips = {}, {}
    for p in pages:
        calls[p.name] = _executions(browser, p.as_uri())
        tips[p.name] = browser.evaluate(SHOW_TOOLTIPS)
    assert all(c == [] for c in calls.values()), {k: (len(c), sorted(set(c))) for k, c in calls.items() if c}
    # tooltips that name the hostile configurations show them as text (04's error shares do)
    assert tips["04_error_analysis.html"]["hostile"] > 0, tips
    assert all(MODEL in t["text"] for t in tips.values() if t["hostile"]), tips
    # the payloads are there, shown as text
    text = {p.name: browser_text(browser, p) for p in pages}
    assert MODEL in text["02_evaluation.html"] and MODEL in text["03_analysis.html"]
    assert LABEL in text["03_analysis.html"]
    assert ITEM_IDS[0] in text["explore.html"] and payload("judge_output") in text["explore.html"]
    assert payload("answer") in text["explore.html"] and payload("reference") in text["explore.html"]
    assert MODEL in text["index.html"]


def browser_text(browser: Browser, page: Path) -> str:
    browser.open(page.as_uri())
    return str(browser.evaluate("document.body.textContent"))  # folded <details> too


def test_the_ipywidgets_explorer_runs_no_planted_script(browser, hostile, tmp_path):
    """Every HTML the widget browser shows (its HTML widgets' values, as the front end sets them as
    innerHTML), for every item, in one page."""
    import ipywidgets as W

    from cresowlve_core import explore as X

    ex = X.load_explorer(str(hostile["grid_json"]), str(hostile["items"]), labels=str(hostile["root"] / "errors"))
    widget = X.browser(ex)

    def html_of(w: Any) -> list[str]:
        out = [w.value] if isinstance(w, W.HTML) else []
        for child in getattr(w, "children", ()):
            out += html_of(child)
        return out

    listing = next(w for w in _walk(widget) if isinstance(w, W.Select))
    parts = html_of(widget)
    for _label, key in listing.options:  # choosing each item refreshes the detail view
        listing.value = key
        parts += html_of(widget)
    assert any(ITEM_IDS[0].split("<")[0] in p for p in parts)
    page = tmp_path / "widgets.html"
    page.write_text("<html><body>" + "".join(parts) + "</body></html>", encoding="utf-8")
    assert _executions(browser, page.as_uri()) == []
    assert payload("judge_output") in browser_text(browser, page)


# the page's text, shadow roots included (marimo draws outputs inside custom elements)
_DEEP_TEXT = """((function t(n) { let s = n.nodeType === 3 ? n.data : '';
  for (const c of (n.shadowRoot ? [n.shadowRoot, ...n.childNodes] : n.childNodes)) s += t(c); return s; })(document.body))"""


def _walk(w: Any) -> list[Any]:
    return [w] + [x for c in getattr(w, "children", ()) for x in _walk(c)]


def test_the_marimo_explorer_runs_no_planted_script(browser, hostile, tmp_path):
    marimo = Path(sys.executable).parent / "marimo"
    if not marimo.exists():
        pytest.skip("marimo is not installed in this environment")
    args = ["--runs", str(hostile["grid_json"]), "--items", str(hostile["items"]),
            "--labels", str(hostile["root"] / "errors")]
    with marimo_run(REPO / "notebooks" / "explore.py", tmp_path, args) as url:
        ready = f"{_DEEP_TEXT}.includes({json.dumps(payload('answer'))})"  # the answer card has drawn
        calls = _executions(browser, url, ready=f"document.body !== null && {ready}", settle_s=3.0)
        text = str(browser.evaluate(_DEEP_TEXT))
    assert calls == [], f"marimo explorer: {len(calls)} script executions: {calls}"
    assert payload("answer") in text
