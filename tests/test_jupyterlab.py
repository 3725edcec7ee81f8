"""Executed report notebooks opened in a real JupyterLab: every chart draws, no JavaScript error.

JupyterLab 4.6 draws ``application/vnd.vegalite.v5+json`` with its own Vega-Lite 5.6.1, older than
the library of the HTML reports: a spec that draws there can fail here (the difficulty
chart of 02 and 03 failed with ``Duplicate signal name: "param_…_tuple"``). Each notebook opens in
a fresh workspace (``/lab/workspaces/NAME/tree/FILE?reset``) of a loopback JupyterLab, driven by
headless Chromium. Counted per chart: a canvas or SVG with marks of non-zero size (a chart draws
two elements; counting marks in total would hide a failed chart). Skips without Chromium.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from chromium import CHROMIUM, Browser, JupyterLab, lab_chart_outputs, lab_charts, websocket
from fakeserver import FakeServer

from cresowlve_core.notebooks import run_notebook

JUPYTER = Path(sys.executable).parent / "jupyter"
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.skipif(websocket is None, reason="websocket-client is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(shutil.which("jupyter-lab", path=str(JUPYTER.parent)) is None, reason="jupyterlab not installed"),
]


def _answers(req):
    if "candidate_answer" in req.prompt:
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"VERDICT-{nonce}: CORRECT"
    return "<Answer>Copernicus</Answer>"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The report notebooks with charts, executed as the main job does: overview, an evaluation
    (difficulty chart) and the analysis of synthetic runs (a chart in every section)."""
    from cresowlve_core.analysis import write_synthetic_runs

    root = tmp_path_factory.mktemp("lab")
    reports = root / "reports"
    run_notebook("00_data_overview", {}, reports)
    with FakeServer(answers=_answers) as srv:
        run_notebook("02_evaluation", {"items": "demo", "lang": "en", "model": "fake-model", "base_url": srv.base_url,
                                       "judge_model": "fake-judge", "run_dir": str(root / "run_en")},
                     reports, output_name="02_evaluation_en")
    write_synthetic_runs(root / "runs", n_items=120, configs=3, seed=0)
    run_notebook("03_analysis", {"runs": str(root / "runs" / "*"), "semantic_distance": False, "n_boot": 100,
                                 "n_perm": 100}, reports, output_name="03_analysis_synthetic")
    return reports


@pytest.fixture(scope="module")
def lab(executed):
    server = JupyterLab(executed)
    browser = Browser()
    yield server, browser
    browser.close()
    server.close()


def test_every_chart_of_every_executed_notebook_draws_in_jupyterlab(executed, lab):
    server, browser = lab
    results = {nb.name: lab_charts(browser, server, nb) for nb in sorted(executed.glob("*.ipynb"))}
    expected = {name: r["expected"] for name, r in results.items()}
    assert expected["00_data_overview.ipynb"] == 1
    assert expected["02_evaluation_en.ipynb"] >= 1  # accuracy by difficulty
    assert expected["03_analysis_synthetic.ipynb"] >= 9
    failed = {name: r for name, r in results.items() if r["drawn"] != r["expected"] or r["errors"] or r["console"]}
    assert not failed, f"charts not drawn in JupyterLab: {failed}"


def test_the_lab_check_fails_on_the_spec_jupyterlab_rejected(executed, lab, tmp_path):
    """Not vacuous: altair's own spec of the difficulty chart (selection hoisted to the top level,
    as before the fix) fails in this JupyterLab, and the check sees the error and the missing chart."""
    import pandas as pd

    from cresowlve_core.analysis import charts

    server, browser = lab
    df = pd.DataFrame([{"config": c, "lang": lang, "metric_label": "judge", "difficulty": d, "n": 10, "acc": 50.0,
                        "low": 40.0, "high": 60.0, "small": False} for c in "ab" for lang in ("en", "ru") for d in (1, 2)])
    raw = {**charts.difficulty_chart(df).to_dict(), "$schema": "https://vega.github.io/schema/vega-lite/v5.json"}
    nb = json.loads((executed / "00_data_overview.ipynb").read_text())
    nb["cells"] = [{"cell_type": "code", "execution_count": 1, "id": "raw", "metadata": {}, "source": "chart",
                    "outputs": [{"output_type": "display_data", "metadata": {},
                                 "data": {"application/vnd.vegalite.v5+json": raw, "text/plain": "<chart>"}}]}]
    broken = executed / "zz_unportable.ipynb"
    broken.write_text(json.dumps(nb))
    try:
        assert lab_chart_outputs(broken) == 1
        r = lab_charts(browser, server, broken, timeout_s=60)
    finally:
        broken.unlink()
    assert r["drawn"] == 0
    assert any("Duplicate signal name" in e for e in r["errors"]), r
