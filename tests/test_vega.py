"""The one chart helper: specs every targeted Vega-Lite renderer draws, and the HTML bundle."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import vl_convert as vlc

from cresowlve_core import vega
from cresowlve_core.analysis import charts


def _difficulty_frame() -> pd.DataFrame:
    return pd.DataFrame([{"config": c, "lang": lang, "metric_label": m, "difficulty": d, "n": 10, "acc": 50.0,
                          "low": 40.0, "high": 60.0, "small": False}
                         for c in "ab" for lang in ("en", "ru") for m in ("judge", "exact") for d in (1, 2)])


def _selections_at_top(spec: dict) -> list:
    return [p for p in spec.get("params", []) if "select" in p]


def test_portable_spec_moves_the_facet_selection_into_its_view():
    """Altair hoists the legend selection of the faceted difficulty chart to the top level with
    ``views``; JupyterLab's Vega-Lite 5.6.1 then fails (Duplicate signal name). It goes into the view."""
    raw = charts.difficulty_chart(_difficulty_frame()).to_dict()
    assert len(_selections_at_top(raw)) == 1 and _selections_at_top(raw)[0]["views"]  # altair's form
    spec = vega.portable_spec(raw)
    assert _selections_at_top(spec) == []
    inner = [p for layer in spec["spec"]["layer"] for p in layer.get("params", [])]
    assert [p["bind"] for p in inner] == ["legend"] and "views" not in inner[0]
    assert spec["$schema"] == vega.VEGALITE_SCHEMA
    assert vega.portable_spec(spec) == spec  # idempotent
    assert raw["params"][0]["views"]  # the input is not modified


@pytest.mark.parametrize("version", vlc.get_vegalite_versions())
def test_portable_spec_draws_with_every_vegalite_version(version):
    spec = vega.portable_spec(charts.difficulty_chart(_difficulty_frame()).to_dict())
    assert "<svg" in vlc.vegalite_to_svg(spec, vl_version=version)


def test_variables_stay_at_the_top_level():
    spec = vega.portable_spec({"params": [{"name": "k", "value": 3}], "mark": "point", "data": {"values": []}})
    assert spec["params"] == [{"name": "k", "value": 3}]


def test_html_spec_matches_the_inlined_libraries():
    """The HTML page draws Vega-Lite 6 specs with Vega 6: compiled and library versions agree."""
    spec = vega.html_spec(charts.difficulty_chart(_difficulty_frame()).to_dict())
    assert spec["$schema"] == vega.HTML_VEGALITE_SCHEMA
    compiled = vlc.vegalite_to_vega(spec, vl_version=vega.HTML_VEGALITE_VERSION)
    assert compiled["$schema"].endswith(f"/vega/v{vlc.get_vega_version().split('.')[0]}.json")


def test_the_bundle_is_built_once_and_read_from_the_cache_by_later_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path))
    code = ("import time, vl_convert as v; from cresowlve_core import vega; built = []\n"
            "orig = v.javascript_bundle\n"
            "v.javascript_bundle = lambda **k: built.append(1) or orig(**k)\n"
            "b = vega.javascript_bundle(); assert vega.javascript_bundle() is b\n"
            "print(len(built), len(b))")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert first[0] == "1" and second == ["0", first[1]]  # the second process built nothing, same script
    assert len(list((tmp_path / "vega").glob("bundle-*.js"))) == 1


def test_group_heatmap_names_the_models_above_and_below_every_panel():
    """34 groups x 18 models: each language panel carries the model names on top and bottom (before:
    only under the second panel, about 1,700 px below the first panel's cells)."""
    rows = [{"config": f"m{c}", "lang": lang, "group": f"g{g:02d}", "n": 60, "n_items": 30, "acc": 50.0, "low": 40.0,
             "high": 60.0, "overall": 50.0, "q": 0.5, "flagged": False}
            for c in range(18) for lang in ("en", "ru") for g in range(34)]
    spec = vega.portable_spec(charts.group_heatmap(pd.DataFrame(rows), "Domain", "Judge").to_dict())
    compiled = vlc.vegalite_to_vega(spec, vl_version="5.8")

    def axes(node, found):
        if isinstance(node, dict):
            found += [a for a in node.get("axes", []) if a.get("orient") in ("top", "bottom") and a.get("labels", True)
                      and not a.get("grid")]
            for v in node.values():
                axes(v, found)
        elif isinstance(node, list):
            for v in node:
                axes(v, found)
        return found

    cells = [m for m in compiled["marks"] if m.get("type") == "group" and "facet" in m.get("from", {})]
    assert len(cells) == 1  # the group Vega draws once per language panel
    assert sorted(a["orient"] for a in axes(cells[0], [])) == ["bottom", "top"]  # before: in a footer, once


def test_chart_data_keeps_six_significant_digits():
    spec = {"datasets": {"d": [{"acc": 43.859649122807014, "q": 1.23456789e-12, "n": 57, "label": "44", "x": float("nan")}]},
            "data": {"name": "d"}, "mark": "point"}
    row = vega.portable_spec(spec)["datasets"]["d"][0]
    assert row["acc"] == 43.8596 and row["q"] == 1.23457e-12 and row["n"] == 57 and row["label"] == "44"
    assert row["x"] != row["x"]  # NaN kept
    assert vega.portable_spec(vega.portable_spec(spec)) == vega.portable_spec(spec)
    assert spec["datasets"]["d"][0]["acc"] == 43.859649122807014  # the input is not changed
