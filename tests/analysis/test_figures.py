"""Figures a paper could use: ordered bins, no stack on a log axis, small multiples
past 8 configurations, value-sorted heatmap columns, human axis titles; and a static screenshot of each
at 1,400 px (kept under the test's artefact folder)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from cresowlve_core.analysis import breakdowns, charts, load_runs, write_synthetic_runs
from cresowlve_core.analysis.report import main_subset


def _difficulty(tmp_path: Path, configs: int):
    write_synthetic_runs(tmp_path / f"runs{configs}", n_items=60, configs=configs, seed=0)
    df, _ = main_subset(load_runs(str(tmp_path / f"runs{configs}" / "*")).responses)
    return df, breakdowns.by_difficulty(df, ["em_strict"], min_cell_n=5)


def test_many_configurations_become_small_multiples_sorted_by_accuracy(tmp_path):
    _, res = _difficulty(tmp_path, 10)
    spec = charts.difficulty_chart(res).to_dict()
    assert spec["facet"]["field"] == "config" and spec["columns"] == 6
    order = spec["facet"]["sort"]
    means = res.groupby("config")["acc"].mean()
    assert order == means.sort_values(ascending=False).index.tolist()
    layers = spec["spec"]["layer"]
    assert all(lay["encoding"]["xOffset"]["field"] == "series" for lay in layers)  # dodged error bars
    _, few = _difficulty(tmp_path, 3)
    few_spec = charts.difficulty_chart(few).to_dict()
    assert few_spec["facet"]["row"]["field"] == "metric_label"  # a handful stays overlaid, one panel per metric


def test_axis_titles_are_human_and_heatmap_columns_follow_accuracy(tmp_path):
    import pandas as pd

    rho = pd.DataFrame({"feature_label": ["Facts", "Domains"], "n": [40, 40], "spearman_rho": [0.2, -0.1],
                        "spearman_low": [0.0, -0.3], "spearman_high": [0.4, 0.1], "spearman_p_holm": [0.1, 0.5],
                        "pearson_r": [0.2, -0.1], "significant": [False, False]})
    text = json.dumps(charts.correlation_bars(rho, by_model=False).to_dict())
    assert '"title": "Spearman \\u03c1 with difficulty"' in text and "spearman_low\"" not in text.split('"title"')[1]
    grid = pd.DataFrame({"config": ["a", "b", "a", "b"], "lang": "en", "group": ["g1", "g1", "g2", "g2"], "n": 30,
                         "n_items": 30, "acc": [20.0, 80.0, 30.0, 70.0], "low": 10.0, "high": 90.0,
                         "overall": [25.0, 75.0, 25.0, 75.0], "q": 0.5, "flagged": False})
    heat = charts.group_heatmap(grid, "Domain", "EM").to_dict()
    assert heat["spec"]["layer"][0]["encoding"]["x"]["sort"] == ["b", "a"]  # best overall first


def test_notability_bins_are_in_numeric_order_and_not_stacked():
    from cresowlve_core.synthetic import report as sr
    from cresowlve_core.synthetic.domains import domains_by_name
    from cresowlve_core.synthetic.pipeline import SynthConfig, load_source

    cfg = SynthConfig(build_dir=tempfile.mkdtemp(prefix="synth-"))
    spec = sr.notability_section(load_source(cfg), domains_by_name(cfg.domains), cfg.band())["chart"].to_dict()
    enc = spec["spec"]["encoding"]
    assert spec["facet"]["field"] == "domain"  # one panel per domain
    assert "color" not in enc and enc["y"]["scale"]["type"] == "symlog"  # nothing stacked on the log axis
    assert enc["x"]["sort"] == "ascending"
    bins = {r["bin_start"] for r in spec["datasets"][spec["data"]["name"]]}
    assert all(isinstance(b, int) for b in bins)  # numbers, so "ascending" is 1, 2, 3, 4, 5, 6, 8, 10, ...


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium")
def test_every_figure_has_a_static_screenshot_at_1400_px(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from screenshots import main as shoot

    from cresowlve_core.notebooks import _chart_html
    from cresowlve_core.vega import javascript_bundle

    _, res = _difficulty(tmp_path, 12)
    page = tmp_path / "figures.html"
    page.write_text(f"<html><head><script>{javascript_bundle()}</script></head><body>"
                    f"{_chart_html(charts.difficulty_chart(res).to_dict())}</body></html>")
    out = Path(os.environ.get("CRESOWLVE_ARTEFACT_DIR") or tmp_path) / "screenshots"
    assert shoot([str(out), str(page)]) == 0
    png = out / "figures__01.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
