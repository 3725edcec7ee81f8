"""Figures a paper could use: ordered bins, no stack on a log axis, small multiples
past 8 configurations, value-sorted heatmap columns, human axis titles; and a static screenshot of each
at 1,400 px (kept under the test's artefact folder)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from cresowlve_core.analysis import breakdowns, charts, complexity, load_runs, write_synthetic_runs
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
    from cresowlve_core.synthetic.pipeline import SynthConfig

    cfg = SynthConfig(build_dir=tempfile.mkdtemp(prefix="synth-"))
    spec = sr.notability_section(cfg).chart.to_dict()
    enc = spec["spec"]["encoding"]
    assert spec["facet"]["field"] == "domain"  # one panel per domain
    assert "color" not in enc and enc["y"]["scale"]["type"] == "symlog"  # nothing stacked on the log axis
    assert enc["x"]["sort"] == "ascending"
    bins = {r["bin_start"] for r in spec["datasets"][spec["data"]["name"]]}
    assert all(isinstance(b, int) for b in bins)  # numbers, so "ascending" is 1, 2, 3, 4, 5, 6, 8, 10, ...


def _figures(tmp_path: Path, configs: int) -> dict[str, object]:
    """Every chart of the analysis report for ``configs`` synthetic configurations × 2 languages."""
    write_synthetic_runs(tmp_path / f"all{configs}", n_items=120, configs=configs, seed=0)
    rs = load_runs(str(tmp_path / f"all{configs}" / "*"))
    df, _ = main_subset(rs.responses)
    metrics = ["em_strict", "judge"]
    group = breakdowns.by_group(df, "knowledge_domains", min_group_size=10, n_perm=0, seed=0)
    feats, _ = complexity.item_features(df, semantic_distance=False)
    return {
        "difficulty": charts.difficulty_chart(breakdowns.by_difficulty(df, metrics)),
        "heatmap": charts.group_heatmap(group.table, "Knowledge domain", group.metric_label),
        "share": charts.difficulty_share_chart(breakdowns.difficulty_distribution(rs.responses)),
        "gap": charts.gap_chart(breakdowns.creative_vs_factual(rs.responses, metrics)),
        "boxplot": charts.complexity_boxplot(complexity.features_long(feats)),
        "rho_difficulty": charts.correlation_bars(complexity.difficulty_correlations(feats), by_model=False),
        "rho_by_model": charts.correlation_bars(complexity.performance_correlations(df, feats, "judge"), by_model=True),
    }


def test_gap_and_correlation_rows_follow_their_values(tmp_path):
    figs = _figures(tmp_path, 4)
    gap = figs["gap"].to_dict()
    rows = gap["datasets"][gap["data"]["name"]]
    means = pd.DataFrame(rows).groupby("config")["gap"].mean().sort_values(ascending=False)
    assert gap["spec"]["layer"][1]["encoding"]["y"]["sort"] == means.index.tolist()  # largest mean gap first
    rho = figs["rho_by_model"].to_dict()
    rows = pd.DataFrame(rho["datasets"][rho["data"]["name"]])
    order = rows.groupby("config")["spearman_rho"].mean().sort_values(ascending=False).index.tolist()
    assert rho["spec"]["layer"][1]["encoding"]["y"]["sort"] == order and rho["facet"]["column"]["field"] == "feature_label"
    assert charts.correlation_bars(rows.assign(spearman_rho=float("nan"))).to_dict()["mark"]["type"] == "text"


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium")
def test_every_figure_has_a_static_screenshot_at_1400_px(tmp_path):
    """Every analysis chart at 12 configurations (past the small-multiples threshold), drawn by Chromium
    at 1,400 px: each PNG has ink, a figure's size and fits the page."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from screenshots import shoot_all

    from cresowlve_core.notebooks import _chart_html
    from cresowlve_core.vega import javascript_bundle

    figs = _figures(tmp_path, 12)
    page = tmp_path / "figures.html"
    page.write_text(f"<html><head><script>{javascript_bundle()}</script></head><body>"
                    + "".join(f"<h2>{name}</h2>{_chart_html(c.to_dict())}" for name, c in figs.items())
                    + "</body></html>")
    out = Path(os.environ.get("CRESOWLVE_ARTEFACT_DIR") or tmp_path) / "screenshots" / "figures"
    shots = shoot_all(out, [page], echo=False)
    assert [s.section for s in shots] == list(figs)
    assert {s.section: s.problems() for s in shots if s.problems()} == {}
    assert shots[0].width <= 1400 and shots[0].height > 400  # the 12 small panels, on the page


def _cells(configs: int, groups: int = 34) -> pd.DataFrame:
    """A model × group table as by_group returns it: ``configs`` models, two languages, every 7th cell marked."""
    rows = [{"config": f"m{c:03d}", "thinking": False, "lang": lang, "group": f"g{g:02d}", "n": 60, "n_items": 30,
             "k": 30, "acc": float((c * 7 + g * 3) % 100), "low": 40.0, "high": 60.0, "overall": float(c % 100),
             "p": 0.5, "q": 0.01 if (c + g) % 7 == 0 else 0.5, "flagged": (c + g) % 7 == 0}
            for c in range(configs) for lang in ("en", "ru") for g in range(groups)]
    return pd.DataFrame(rows)


def test_heatmap_panels_sit_side_by_side_within_the_page():
    spec = charts.group_heatmap(_cells(18), "Domain", "Judge").to_dict()
    assert spec["facet"]["column"]["field"] == "language" and "row" not in spec["facet"]  # one screen tall
    assert 2 * spec["spec"]["width"] + 380 <= charts.PAGE_WIDTH  # both panels, the names and the legend
    assert len(next(iter(spec["datasets"].values()))) == 18 * 2 * 34  # every cell, with its interval


def test_many_configurations_draw_one_row_per_group_not_a_column_per_configuration():
    table = _cells(180)
    spec = charts.group_heatmap(table, "Domain", "Judge").to_dict()
    rows = pd.DataFrame(next(iter(spec["datasets"].values())))
    summary = rows[rows["kind"] == "summary"].set_index(["language", "group"])
    assert len(summary) == 2 * 34  # a row per language and group, whatever the number of configurations
    en = table[(table["lang"] == "en") & (table["group"] == "g05")]["acc"]
    assert summary.loc[("CresOWLve-En", "g05"), "median"] == en.median()
    assert summary.loc[("CresOWLve-En", "g05"), ["min", "max"]].tolist() == [en.min(), en.max()]
    marked = rows[rows["kind"] == "marked"]
    assert len(marked) == int(table["flagged"].sum())  # every marked cell stays visible, as a dot
    assert spec["facet"]["column"]["field"] == "language" and spec["spec"]["width"] * 2 < charts.PAGE_WIDTH


def test_typed_channels_give_the_spec_of_altairs_shorthands():
    """charts._tooltips and charts._when build channel objects directly (altair's matching of bare
    names and condition dicts costs milliseconds a channel); the spec is the same as from the shorthands."""
    import altair as alt

    frame = pd.DataFrame({"config": ["a", "b"], "acc": [40.0, 60.0], "flagged": [True, False]})
    base = alt.Chart(frame).mark_rect()
    typed = base.encode(
        x=alt.X("config:N"), x2=alt.X2("acc:Q"), text=alt.Text("config:N"), yOffset=alt.YOffset("config:N"),
        stroke=charts._when(alt.StrokeValue, "datum.flagged", "red", None),
        strokeWidth=charts._when(alt.StrokeWidthValue, "datum.flagged", 2.5, 0),
        color=charts._when(alt.ColorValue, "datum.acc > 50", "black", "white"),
        tooltip=charts._tooltips("config", "acc", alt.Tooltip("acc:Q", format=".1f")),
    )
    shorthand = base.encode(
        x="config:N", x2="acc:Q", text="config:N", yOffset="config:N",
        stroke=alt.condition("datum.flagged", alt.value("red"), alt.value(None)),
        strokeWidth=alt.condition("datum.flagged", alt.value(2.5), alt.value(0)),
        color=alt.condition("datum.acc > 50", alt.value("black"), alt.value("white")),
        tooltip=["config", "acc", alt.Tooltip("acc:Q", format=".1f")],
    )
    assert typed.to_dict() == shorthand.to_dict()
    zero = alt.Chart(frame).mark_rule()
    assert zero.encode(x=alt.XDatum(0)).to_dict() == zero.encode(x=alt.datum(0)).to_dict()
