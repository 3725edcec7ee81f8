"""Run a parameterised notebook headless and publish it as an HTML report.

``run_notebook("00_data_overview", {"lang": "en"})``:

1. executes ``notebooks/00_data_overview.ipynb`` with papermill into ``reports/00_data_overview.ipynb``
   (the working directory is ``notebooks/`` so relative paths behave as in JupyterLab);
2. renders ``reports/00_data_overview.html`` with nbconvert: code hidden, charts embedded with the
   Vega libraries inlined once per page, so the report works offline;
3. refreshes ``reports/index.html``.

Inside a notebook, call :func:`setup` first and :func:`record` for the values tests should read
back (:func:`read_records`).
"""

from __future__ import annotations

import html
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cresowlve_core.paths import NOTEBOOKS_DIR, REPORTS_DIR
from cresowlve_core.secrets import find_secret_values, redact

RECORD_MIME = "application/vnd.cresowlve.record+json"
_CHART_MARK = "cresowlve-vega-chart"
_INDEX_JSON = "index.json"


# --------------------------------------------------------------------------- inside notebooks


def setup() -> None:
    """Configure display for reports: altair charts that render offline, wide pandas tables."""
    import altair as alt
    import pandas as pd

    alt.renderers.register("cresowlve", _altair_renderer)
    alt.renderers.enable("cresowlve")
    alt.data_transformers.disable_max_rows()
    pd.set_option("display.max_columns", 50)
    pd.set_option("display.width", 200)
    pd.set_option("display.precision", 3)


def _altair_renderer(spec: dict[str, Any], **_: Any) -> dict[str, Any]:
    """Both a Vega-Lite mimetype (JupyterLab renders it natively) and self-contained-page HTML.

    The HTML does not load anything from a CDN: the report page carries the Vega bundle once
    (see :func:`render_html`), and each chart waits for ``window.vegaEmbed``.
    """
    div = f"vis-{uuid.uuid4().hex[:12]}"
    payload = json.dumps(spec).replace("</", "<\\/")
    script = (
        f'<div id="{div}" class="{_CHART_MARK}"></div><script type="text/javascript">'
        f"(function(){{var spec={payload};function go(){{if(window.vegaEmbed){{"
        f'window.vegaEmbed("#{div}",spec,{{"actions":{{"export":true,"source":false,"compiled":false,"editor":false}}}});'
        f"}}else{{setTimeout(go,50);}}}}go();}})();</script>"
    )
    return {"application/vnd.vegalite.v5+json": spec, "text/html": script}


def record(key: str, value: Any) -> Any:
    """Store a JSON-serialisable value under ``key`` in the notebook output and return it."""
    from IPython.display import display

    json.dumps(value)  # fail loudly, here, on values tests could not read back
    display({RECORD_MIME: {key: value}}, raw=True)
    return value


def read_records(ipynb: str | Path) -> dict[str, Any]:
    """Every value stored with :func:`record` in an executed notebook (later keys win)."""
    nb = json.loads(Path(ipynb).read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if RECORD_MIME in data:
                out.update(data[RECORD_MIME])
    return out


# --------------------------------------------------------------------------- running


@dataclass
class RunResult:
    name: str
    ipynb: Path
    html: Path
    seconds: float
    records: dict[str, Any] = field(default_factory=dict)


def notebook_path(name: str) -> Path:
    p = Path(name)
    if p.suffix == ".ipynb" and p.exists():
        return p.resolve()
    cand = NOTEBOOKS_DIR / (p.stem + ".ipynb")
    if not cand.exists():
        known = ", ".join(sorted(q.stem for q in NOTEBOOKS_DIR.glob("*.ipynb")))
        raise FileNotFoundError(f"no notebook {name!r}; known notebooks: {known}")
    return cand


def run_notebook(
    name: str,
    parameters: dict[str, Any] | None = None,
    reports_dir: Path | None = None,
    *,
    title: str | None = None,
    output_name: str | None = None,
    timeout_s: int | None = 3600,
) -> RunResult:
    """Execute a notebook with papermill, render its HTML report, refresh the index."""
    import papermill as pm

    src = notebook_path(name)
    reports = Path(reports_dir or REPORTS_DIR)
    reports.mkdir(parents=True, exist_ok=True)
    stem = output_name or src.stem
    out_ipynb = reports / f"{stem}.ipynb"
    params = dict(parameters or {})
    t0 = time.monotonic()
    env_before = os.environ.get("CRESOWLVE_REPORT")
    os.environ["CRESOWLVE_REPORT"] = "1"
    try:
        pm.execute_notebook(
            str(src),
            str(out_ipynb),
            parameters=params,
            cwd=str(src.parent),
            kernel_name="python3",
            progress_bar=False,
            execution_timeout=timeout_s,
        )
    finally:
        if env_before is None:
            os.environ.pop("CRESOWLVE_REPORT", None)
        else:
            os.environ["CRESOWLVE_REPORT"] = env_before
        _scrub_secrets(out_ipynb)
    title = title or _first_heading(out_ipynb) or stem
    html_path = render_html(out_ipynb, reports / f"{stem}.html", title=title)
    seconds = time.monotonic() - t0
    update_index(reports, stem, title, params, seconds)
    return RunResult(stem, out_ipynb, html_path, seconds, read_records(out_ipynb))


def _scrub_secrets(path: Path) -> None:
    """Papermill writes parameters into the notebook: make sure no key value ever lands on disk."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    clean = redact(text, find_secret_values())
    if clean != text:
        path.write_text(clean, encoding="utf-8")


def render_html(ipynb: Path, out: Path, title: str | None = None) -> Path:
    """Render an executed notebook to a self-contained HTML page without code."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(ipynb), as_version=4)
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = [o for o in cell.get("outputs", []) if RECORD_MIME not in o.get("data", {})]
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or ipynb.stem}})
    if _CHART_MARK in body:
        body = body.replace("</head>", f"<script>{_vega_bundle()}</script>\n</head>", 1)
    body = redact(body, find_secret_values())
    out.write_text(body, encoding="utf-8")
    return out


_BUNDLE: str | None = None


def _vega_bundle() -> str:
    global _BUNDLE
    if _BUNDLE is None:
        import vl_convert as vlc

        _BUNDLE = vlc.javascript_bundle().replace("</script", "<\\/script")
    return _BUNDLE


def _first_heading(ipynb: Path) -> str | None:
    nb = json.loads(ipynb.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            src = "".join(cell.get("source", []))
            m = re.search(r"^#\s+(.+)$", src, re.M)
            if m:
                return m.group(1).strip()
    return None


def update_index(
    reports: Path, stem: str, title: str, parameters: dict[str, Any], seconds: float
) -> Path:
    """Record this report in ``index.json`` and rewrite ``index.html`` from it."""
    reg_path = reports / _INDEX_JSON
    registry: dict[str, Any] = json.loads(reg_path.read_text()) if reg_path.exists() else {}
    registry[stem] = {
        "title": title,
        "html": f"{stem}.html",
        "ipynb": f"{stem}.ipynb",
        "parameters": parameters,
        "rendered_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
    }
    reg_path.write_text(redact(json.dumps(registry, indent=2, default=str), find_secret_values()))
    rows = []
    for key in sorted(registry):
        r = registry[key]
        params = ", ".join(f"{k}={v!r}" for k, v in r["parameters"].items()) or "defaults"
        rows.append(
            f'<tr><td><a href="{html.escape(r["html"])}">{html.escape(r["title"])}</a></td>'
            f"<td><code>{html.escape(key)}</code></td><td>{html.escape(params)}</td>"
            f'<td>{html.escape(r["rendered_at"])}</td><td>{r["seconds"]} s</td>'
            f'<td><a href="{html.escape(r["ipynb"])}">.ipynb</a></td></tr>'
        )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>CresOWLve reports</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.4em .8em;text-align:left}"
        "code{font-size:90%}</style></head><body><h1>CresOWLve reports</h1>"
        "<p>Each report is a notebook from <code>notebooks/</code>, executed headless with papermill "
        "and rendered without code. Regenerate one with <code>cresowlve report NAME -p key value</code>.</p>"
        "<table><tr><th>Report</th><th>Notebook</th><th>Parameters</th><th>Rendered (UTC)</th>"
        "<th>Took</th><th>Executed</th></tr>" + "".join(rows) + "</table></body></html>"
    )
    out = reports / "index.html"
    out.write_text(redact(page, find_secret_values()), encoding="utf-8")
    return out
