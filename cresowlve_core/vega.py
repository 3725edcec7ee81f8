"""The one place a chart spec becomes output: every altair chart of the project, in every front end.

Charts are built with altair (``analysis/charts.py``, ``construction/charts.py``, …) and reach the
reader through two renderers:

* **notebook front ends** (JupyterLab 4, VS Code, nbviewer) draw ``application/vnd.vegalite.v5+json``
  with their own, older Vega-Lite: JupyterLab 4.6 ships Vega-Lite 5.6.1 with Vega 5.33;
* **the HTML reports** inline the Vega-Lite 6 / Vega 6 libraries of ``vl_convert``
  (:func:`javascript_bundle`) and draw the same spec relabelled Vega-Lite 6 (:func:`html_spec`), so
  the compiled spec and the Vega library agree (no "compiled spec uses Vega v5, but current version
  is v6" warning on every chart page).

:func:`portable_spec` turns altair's spec into one that every one of these renderers draws. Altair 5+
hoists every selection of a layered or faceted chart to the top level (``params`` with ``views``);
Vega-Lite 5.6.1 compiles such a selection inside a facet once per facet cell and Vega rejects the
result (``Duplicate signal name: "param_…_tuple"``: the difficulty chart of 02 and 03 failed in
JupyterLab). The selection is moved back into the view that defines it, the form every Vega-Lite 5
and 6 release compiles. A spec bug of this kind is fixed here, once, for every chart.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

VEGALITE_MIME = "application/vnd.vegalite.v5+json"
VEGALITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
#: The Vega-Lite library inlined into HTML reports; vl_convert bundles it with Vega 6, which is what
#: Vega-Lite 6 compiles for (Vega-Lite 5 compiles for Vega 5: a version warning on every page).
HTML_VEGALITE_VERSION = "6.4"
HTML_VEGALITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"


def _views(node: Any, found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every named view (unit spec with a ``name``) of a spec, by name."""
    if isinstance(node, dict):
        if isinstance(node.get("name"), str) and "mark" in node:
            found.setdefault(node["name"], node)
        for key, value in node.items():
            if key not in ("data", "datasets", "encoding", "params"):
                _views(value, found)
    elif isinstance(node, list):
        for value in node:
            _views(value, found)
    return found


SIGNIFICANT_DIGITS = 6  # of every number in a chart's data (each tooltip and label shows fewer)


def _rounded(value: Any) -> Any:
    """``value`` (a dataset's rows) with every float to :data:`SIGNIFICANT_DIGITS` significant digits:
    ``43.859649122807014`` is written ``43.8596``, a third of the bytes, and still ``43.9`` in a ``.1f``
    tooltip. Infinite and NaN values are kept as they are."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if value == value and abs(value) != float("inf") else value
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def portable_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` that Vega-Lite 5.6 (JupyterLab 4) up to 6.x draws, labelled Vega-Lite 5.

    Top-level selection parameters scoped to views (``{"name": …, "select": …, "views": [v]}``) move
    into the first view they name; parameters without ``views`` (variables) stay on top. The numbers of
    the top-level ``datasets`` (where altair puts every chart's data) keep :data:`SIGNIFICANT_DIGITS`
    significant digits. Idempotent.
    """
    out = copy.deepcopy({k: v for k, v in spec.items() if k != "datasets"})
    if isinstance(spec.get("datasets"), dict):
        out["datasets"] = {name: _rounded(rows) for name, rows in spec["datasets"].items()}
    params = out.get("params")
    if isinstance(params, list):
        views = _views({k: v for k, v in out.items() if k != "params"}, {})
        kept = []
        for p in params:
            targets = [views[v] for v in p.get("views", []) if isinstance(v, str) and v in views] \
                if isinstance(p, dict) and "select" in p else []
            if not targets:
                kept.append(p)
                continue
            local = {k: v for k, v in p.items() if k != "views"}
            target = targets[0]
            if not any(q.get("name") == local["name"] for q in target.get("params", [])):
                target["params"] = [*target.get("params", []), local]
        if kept:
            out["params"] = kept
        else:
            out.pop("params")
    out["$schema"] = VEGALITE_SCHEMA
    return out


def html_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec the HTML report draws: portable, labelled for the inlined Vega-Lite 6."""
    return {**portable_spec(spec), "$schema": HTML_VEGALITE_SCHEMA}


_BUNDLE: str | None = None


def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one inline script for the HTML reports.

    Building it (``vl_convert.javascript_bundle``) takes seconds of CPU; it is built once, kept for
    the process and written to ``<cache>/vega/`` (keyed by the vl_convert and Vega-Lite versions),
    so later processes (each ``cresowlve report``) read it instead of building it again.
    """
    global _BUNDLE
    if _BUNDLE is not None:
        return _BUNDLE
    import vl_convert as vlc

    from cresowlve_core import paths

    version = getattr(vlc, "__version__", "unknown")
    cached = paths.cache_dir() / "vega" / f"bundle-vl-convert-{version}-vega-lite-{HTML_VEGALITE_VERSION}.js"
    try:
        _BUNDLE = cached.read_text(encoding="utf-8")
        return _BUNDLE
    except OSError:
        pass
    # vl_convert's stub marks the optional `snippet` as required
    bundle = vlc.javascript_bundle(vl_version=HTML_VEGALITE_VERSION).replace("</script", "<\\/script")  # type: ignore[call-arg]
    _BUNDLE = bundle
    _write_quietly(cached, bundle)
    return bundle


def _write_quietly(path: Path, text: str) -> None:
    """Best-effort cache write (atomic; a read-only or full cache only costs the next process time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def count_ticks(max_count: float) -> dict[str, Any]:
    """Axis settings for a count axis: whole-number ticks only. Vega's ``tickMinStep`` still puts a
    tick at 0.5 on an axis that ends at 1 (drawn "1" under ``format="d"``: the labels 0, 1, 1), so
    up to 10 the ticks are listed; above, a minimum step of 1 is enough."""
    top = int(max_count) if max_count == max_count else 0  # NaN: an empty chart
    if top <= 10:
        return {"format": "d", "values": list(range(0, max(top, 1) + 1))}
    return {"format": "d", "tickMinStep": 1}
