"""Run a parameterised notebook headless and publish it as an HTML report.

``run_notebook("00_data_overview", {"lang": "en"})``:

1. checks the parameters against the notebook's ``parameters`` cell (an unknown name is an error);
2. executes ``notebooks/00_data_overview.ipynb`` with papermill into ``REPORTS/00_data_overview.ipynb``
   (working directory ``notebooks/``, as in JupyterLab). The kernel sees ``CRESOWLVE_REPORTS_DIR``
   set to the reports directory, so every file the notebook writes by default lands there;
3. renders ``REPORTS/00_data_overview.html`` with nbconvert: code hidden, charts drawn by Vega with
   its libraries inlined once per page (no CDN, no require.js, no MathJax);
4. refreshes the landing page ``REPORTS/index.html`` (:func:`update_index`): per report its title,
   headline, models, date, parameters, banners and links to the executed notebook and exports.

Inside a notebook call :func:`setup` first, :func:`record` for values tests and the index read back
(:func:`read_records`), and :func:`headline` for the report's one-line result on the index page.

Chart outputs carry the standard Vega-Lite mime bundle (``application/vnd.vegalite.v5+json``), which
JupyterLab, VS Code and nbviewer render natively; the HTML report turns the same bundle into an
embedded chart. Under marimo (no IPython kernel) altair's own renderer is left alone, so marimo
draws charts itself, and :func:`record` displays nothing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cresowlve_core import paths
from cresowlve_core.argtypes import MAX_FILE_STEM
from cresowlve_core.banners import BANNER_KINDS, banner_html
from cresowlve_core.failures import IncompleteError, InputError, MissingInput, UsageError
from cresowlve_core.notebook_progress import render_progress
from cresowlve_core.notebook_records import RECORD_MIME, read_records
from cresowlve_core.notebook_records import headline as headline  # re-exported for notebooks
from cresowlve_core.notebook_records import in_ipython_kernel as _in_ipython_kernel
from cresowlve_core.notebook_records import record as record  # re-exported for notebooks
from cresowlve_core.outfiles import dumps_json
from cresowlve_core.secrets import scrub
from cresowlve_core.text import hashed_name, slug
from cresowlve_core.untrusted import one_line
from cresowlve_core.vega import VEGALITE_MIME as VEGALITE_MIME  # re-exported (tests, renderers)
from cresowlve_core.vega import VEGALITE_SCHEMA as VEGALITE_SCHEMA
from cresowlve_core.vega import html_spec, javascript_bundle, portable_spec

log = logging.getLogger(__name__)
_VEGALITE_ANY = re.compile(r"^application/vnd\.vegalite\.v(\d+)\+json$")
_CHART_MARK = "cresowlve-vega-chart"
_INDEX_JSON = "index.json"
_BANNER_ATTR = re.compile(r'data-banner="([a-z]+)"')
_PROGRESS_BAR = re.compile(r"\d+%\|")
EXPORT_SUFFIXES = (".csv", ".tex")
# Kernel flags for report runs: no "Kernel is running over TCP without encryption" warning per notebook,
# and no "ERROR | KeyboardInterrupt caught in kernel" now and then at the end: jupyter_client sends the
# kernel SIGINT before every shutdown request (KernelManager.shutdown_kernel), and a kernel still handling
# a message logs it as an error. A cell's own error reaches the report and papermill either way.
_KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]


# --------------------------------------------------------------------------- inside notebooks


def setup() -> None:
    """Configure display: standard Vega-Lite chart bundles, wide pandas tables with full cells."""
    import altair as alt
    import pandas as pd

    if _in_ipython_kernel():
        alt.renderers.register("cresowlve", vegalite_bundle)
        alt.renderers.enable("cresowlve")
    alt.data_transformers.disable_max_rows()
    pd.set_option("display.max_columns", 50)
    pd.set_option("display.width", 200)
    pd.set_option("display.precision", 3)
    pd.set_option("display.max_rows", None)  # reports show every row of a table, never the first/last 5
    pd.set_option("display.max_colwidth", 200)  # e.g. 00's pipeline_outcome, never cut at 50 characters


def vegalite_bundle(spec: dict[str, Any], **_: Any) -> dict[str, Any]:
    """The altair renderer: a Vega-Lite v5 mime bundle plus a plain-text fallback.

    JupyterLab 4, VS Code and nbviewer render ``application/vnd.vegalite.v5+json`` natively (altair 6
    labels its specs v6, a mimetype those front ends do not know yet). The spec goes through
    :func:`cresowlve_core.vega.portable_spec`, so JupyterLab's Vega-Lite 5.6 draws it too. There is
    deliberately no ``text/html`` entry: front ends prefer HTML over Vega, and chart HTML needs a
    script the notebook cannot provide. :func:`render_html` turns the bundle into an embedded chart.
    """
    v5 = portable_spec(spec)
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    label = f"<chart: {title}>" if isinstance(title, str) and title else "<chart>"
    return {VEGALITE_MIME: v5, "text/plain": label}


def banners_in(ipynb: str | Path) -> list[str]:
    """Banner kinds shown anywhere in an executed notebook (``banner_html`` outputs or records)."""
    nb = json.loads(Path(ipynb).read_text(encoding="utf-8"))
    found: list[str] = []
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            text = o.get("data", {}).get("text/html", "")
            found += _BANNER_ATTR.findall("".join(text) if isinstance(text, list) else str(text))
    recorded = read_records(ipynb).get("banners", [])
    found += [recorded] if isinstance(recorded, str) else list(recorded)
    return [k for k in BANNER_KINDS if k in found]


# --------------------------------------------------------------------------- running


class NotebookInputError(UsageError, ValueError):
    """A report notebook stopped on its input (a ``FileNotFoundError`` or ``ValueError`` raised in a
    cell, e.g. a glob that matches nothing): one line for the terminal, exit 2."""


#: exceptions raised in a notebook cell that mean "bad input", not a bug in the notebook
INPUT_ERRORS = ("FileNotFoundError", "ValueError", "InputError", "MissingInput",
                "RunDirError", "ResumeError",  # an unusable run directory, one of another configuration
                "ValidationError")  # a stage's configuration (pydantic) refusing a parameter, e.g. 02's lang


@dataclass
class RunResult:
    name: str
    ipynb: Path
    html: Path
    seconds: float
    records: dict[str, Any] = field(default_factory=dict)


def notebook_path(name: str) -> Path:
    """``notebooks/NAME.ipynb`` of the current project, or an explicit ``.ipynb`` path."""
    p = Path(name)
    if p.suffix == ".ipynb" and p.exists():
        return p.resolve()
    nb_dir = paths.notebooks_dir()
    cand = nb_dir / (p.stem + ".ipynb")
    if not cand.exists():
        known = ", ".join(sorted(q.stem for q in nb_dir.glob("*.ipynb")))
        raise MissingInput(f"no notebook {name!r}; known notebooks: {known}")
    return cand


def notebook_parameters(src: Path) -> dict[str, Any]:
    """The names and defaults of the notebook's ``parameters`` cell (papermill's reading of it)."""
    import papermill as pm

    return {k: v.get("default") for k, v in pm.inspect_notebook(str(src)).items()}


def check_parameters(src: Path, parameters: dict[str, Any]) -> None:
    """Raise ``ValueError`` (one line) on any unknown name, naming the known parameters, or on a value
    not of the kind of the parameter's default (:func:`_kind_problem`)."""
    known = notebook_parameters(src)
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise InputError(
            f"{src.stem}: unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"known: {', '.join(known) or '(none)'}"
        )
    for key, value in parameters.items():
        if (problem := _kind_problem(known[key], value) or _range_problem(key, value)) is not None:
            raise InputError(f"{src.stem}: parameter {key} {problem}, got {one_line(json.dumps(value, default=str), 80)}")


#: parameters that mean the same in every report notebook, with the values they take (as the stage
#: commands' ``argtypes`` check them): a share of the items, never a percentage; seeds and bootstrap
#: iterations, never negative (numpy refuses them, deep in a cell)
_FRACTIONS = ("coverage_threshold", "factuality_threshold")
_NON_NEGATIVE = ("seed", "n_boot")


def _range_problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for ``key`` by :data:`_FRACTIONS` and :data:`_NON_NEGATIVE`, or None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if key in _FRACTIONS and not 0 <= value <= 1:
        return "is a fraction 0..1 (0.9: 90 %)"
    if key in _NON_NEGATIVE and value < 0:
        return "takes a whole number >= 0"
    return None


def _kind_problem(default_text: Any, value: Any) -> str | None:
    """What is wrong with ``value`` for a parameter whose default is ``default_text`` (its source text), or
    None. A ``True``/``False`` default takes only true or false (the string "False" would read as true),
    a number a number or null (``limit = None``: all items), a dict a JSON object, a string or list a
    string or a list (``runs``: a glob or a list of run directories). A ``None`` default takes anything."""
    import ast

    try:
        default = ast.literal_eval(str(default_text))
    except (ValueError, SyntaxError):
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "takes true or false"
    if isinstance(default, (int, float)):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, int) and isinstance(value, float):
            return "takes a whole number or null"
        return None if value is None or number else f"takes a {'whole ' if isinstance(default, int) else ''}number or null"
    if isinstance(default, dict):
        return None if isinstance(value, dict) else "takes a JSON object"
    if isinstance(default, (str, list)):
        return None if isinstance(value, (str, list)) else "takes a string or a list"
    return None


class ReportFailed(IncompleteError, RuntimeError):
    """A report notebook failed to render (a cell raised, the kernel died, a timeout): the old report is
    left as it was, and the partial notebook is kept under ``.failed/`` for a look."""


#: where a failed render's partial notebook is kept: ``REPORTS/.failed/STEM/STEM.ipynb``
FAILED_DIR = ".failed"


def report_name(name: str, parameters: dict[str, Any]) -> str:
    """The file stem of a report rendered by hand: the notebook's name with its default inputs, else the
    notebook's name and a label derived from its inputs, so a report on other runs never overwrites the
    main job's (``03_analysis`` on ``data/runs/mine/*`` is ``03_analysis_mine``, on a grid's ``grid.json``
    ``03_analysis_GRID`` as the grid itself names it). Parameters equal to the notebook's defaults are
    not inputs; with no input-like parameter the label is a short hash of the parameters."""
    import hashlib

    src = notebook_path(name)
    defaults = notebook_parameters(src)
    changed = {k: v for k, v in parameters.items() if _literal(defaults.get(k)) != v}
    if not changed:
        return src.stem
    key = next((k for k in _INPUT_KEYS if changed.get(k)), None)
    label = _input_label(changed[key]) if key else ""
    if not label:
        label = hashlib.sha1(json.dumps(changed, sort_keys=True, default=str).encode()).hexdigest()[:8]
    stem = f"{src.stem}_{slug(label)}"
    return stem if len(stem) <= MAX_FILE_STEM else hashed_name(stem, label, MAX_FILE_STEM)  # a long list of runs


#: parameters that name what a report shows, most telling first
_INPUT_KEYS = ("runs", "user_runs", "run_dir", "build_dir", "out_dir", "items", "name", "model", "lang")


def _literal(text: Any) -> Any:
    """A default from papermill's reading of the parameters cell (source text) as a Python value."""
    import ast

    try:
        return ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return text


def _input_label(value: Any) -> str:
    """``data/runs/mine/*`` -> ``mine``; ``.../paper-table1/grid.json`` -> ``paper-table1``; a list of
    run directories -> their names joined (the first three, then ``+N``)."""
    if isinstance(value, (list, tuple)):
        names = [_input_label(v) for v in value]
        return "+".join(names[:3]) + (f"+{len(names) - 3}" if len(names) > 3 else "")
    parts = [q for q in Path(str(value)).parts if not any(ch in q for ch in "*?[")]
    if parts and parts[-1].endswith((".json", ".jsonl", ".parquet", ".yaml")):
        last = parts.pop()
        parts = parts or [Path(last).stem]
    return parts[-1] if parts else str(value)


def run_notebook(
    name: str,
    parameters: dict[str, Any] | None = None,
    reports_dir: Path | None = None,
    *,
    title: str | None = None,
    output_name: str | None = None,
    timeout_s: int | None = 3600,
    progress_every_s: float | None = None,
) -> RunResult:
    """Execute a notebook with papermill, render its HTML report, refresh the index.

    The notebook runs and renders in a staging folder inside the reports directory (the kernel's
    ``CRESOWLVE_REPORTS_DIR``, so its exports land there too); only when both succeeded do the ``.ipynb``,
    the ``.html`` and the exports move into place, so a failed render leaves the old report as it was
    and raises :class:`ReportFailed` (or :class:`NotebookInputError`). ``progress_every_s``: print which
    report is rendering and its cells done of cells to stderr at least that often.
    """
    src = notebook_path(name)
    params = dict(parameters or {})
    check_parameters(src, params)
    reports = Path(reports_dir or paths.reports_dir()).resolve()
    reports.mkdir(parents=True, exist_ok=True)
    stem = output_name or src.stem
    stage = Path(tempfile.mkdtemp(prefix=f".render-{stem}-", dir=reports))
    out_ipynb = stage / f"{stem}.ipynb"
    partial = reports / FAILED_DIR / stem / f"{stem}.ipynb"
    t0 = time.monotonic()
    kernel_env = {
        "CRESOWLVE_REPORTS_DIR": str(stage),  # every default output of the notebook goes here, then into place
        "CRESOWLVE_REPORT_STEM": stem,  # its exports are named after this render, not after the notebook
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # no "Loading weights: 0%" bars in reports
        "TQDM_DISABLE": "1",  # no frozen progress bars in reports (a bar given disable= explicitly is stripped)
    }
    saved = {k: os.environ.get(k) for k in kernel_env}
    os.environ.update(kernel_env)
    try:
        with render_progress(stem, progress_every_s) as engine:
            _execute(
                str(src),
                str(out_ipynb),
                partial,
                parameters=params,
                cwd=str(paths.project_root()),  # a relative path parameter means the same as on the command line
                kernel_name="python3",
                progress_bar=False,
                execution_timeout=timeout_s,
                extra_arguments=list(_KERNEL_ARGS),
                **engine,
            )
        _scrub_secrets(out_ipynb)
        title = title or _first_heading(out_ipynb) or stem
        render_html(out_ipynb, stage / f"{stem}.html", title=title)
        refuse_empty_over_results(out_ipynb, reports / f"{stem}.ipynb", partial)
    except BaseException as exc:
        _scrub_secrets(out_ipynb)
        _keep_failed(stage, partial.parent)
        mark_failed_render(reports, stem, exc, partial)
        raise
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    _publish(stage, reports)
    seconds = time.monotonic() - t0
    try:
        update_index(reports, stem, title, params, seconds)
    except ReportFailed as exc:  # the report is in place; only its card on the landing page is missing
        raise ReportFailed(f"{reports / stem}.html is written, but {exc}") from None
    ipynb = reports / f"{stem}.ipynb"
    return RunResult(stem, ipynb, reports / f"{stem}.html", seconds, read_records(ipynb))


def refuse_empty_over_results(staged: Path, published: Path, partial: Path) -> None:
    """Raise :class:`ReportFailed` when the render in ``staged`` is an empty report (its inputs matched
    nothing: the ``empty`` record) and ``published``, the report it would replace, is not: an empty
    page never replaces one with results (the failed render is kept at ``partial``)."""
    empty = read_records(staged).get("empty")
    if empty and published.exists() and not read_records(published).get("empty"):
        raise ReportFailed(f"{published.stem}: an empty report ({empty}) would replace the existing one; the old "
                           f"report is left untouched; the empty one is kept at {partial}")


def _publish(stage: Path, reports: Path) -> None:
    """Move a finished render into place: exports first, then the notebook, the HTML page last. Paths the
    notebook printed or recorded under the staging folder are rewritten to where the files now are."""
    files = sorted((p for p in stage.rglob("*") if p.is_file()),
                   key=lambda p: (p.suffix == ".html" and p.parent == stage, p.suffix == ".ipynb" and p.parent == stage))
    for p in files:
        if p.parent == stage and p.suffix in (".ipynb", ".html"):
            text = p.read_text(encoding="utf-8")
            for staged, published in zip(_spellings(stage), _spellings(reports), strict=True):
                text = text.replace(staged, published)
            p.write_text(text, encoding="utf-8")
        dest = reports / p.relative_to(stage)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(p, dest)
    shutil.rmtree(stage, ignore_errors=True)


def _spellings(folder: Path) -> tuple[str, str, str]:
    """The ways a report writes a folder's path: as it is (printed, recorded), as a Markdown message writes
    it in a code span (``say``: ``_`` by a ``-`` or ``/`` becomes ``&#95;``), and HTML-escaped (``&amp;``)."""
    import html

    from cresowlve_core.untrusted import markdown

    text = str(folder)
    return text, markdown(f"`{text}`").removeprefix("<code>").removesuffix("</code>"), html.escape(text, quote=False)


def _keep_failed(stage: Path, failed: Path) -> None:
    """A failed render: its staging folder becomes ``.failed/STEM`` (replacing an older failure)."""
    shutil.rmtree(failed, ignore_errors=True)
    failed.parent.mkdir(parents=True, exist_ok=True)
    os.replace(stage, failed)


#: how often a notebook's kernel is started when it exits before it answers (no cell has run)
KERNEL_START_ATTEMPTS = 3
#: jupyter_client's error for a kernel that exited before it answered its first request
KERNEL_START_DIED = "Kernel died before replying to kernel_info"


def _execute(src: str, out: str, partial: Path, **kwargs: Any) -> None:
    """``papermill.execute_notebook``; a cell that stops on its input becomes :class:`NotebookInputError`,
    any other failure :class:`ReportFailed` (each naming the notebook, the error, and ``partial``, where
    the partial notebook is kept)."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    kept = f"the old report is left untouched; the partial notebook is {partial}"
    try:
        for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
            try:
                pm.execute_notebook(src, out, **kwargs)
                break
            except RuntimeError as exc:
                if KERNEL_START_DIED not in str(exc) or attempt == KERNEL_START_ATTEMPTS:
                    raise
                # jupyter_client picks the kernel's ports free and hands them over: another process
                # can take one in between, and the kernel exits before any cell runs. Start another.
                log.warning("%s: the kernel exited as it started (%s); starting another (attempt %d of %d)",
                            Path(src).stem, exc, attempt + 1, KERNEL_START_ATTEMPTS)
    except PapermillExecutionError as exc:
        if exc.ename in INPUT_ERRORS:
            raise NotebookInputError(f"{Path(src).stem}: {exc.ename}: {_cell_error_line(exc.evalue)} "
                                     f"(cell {exc.exec_count}; {kept})") from exc
        raise ReportFailed(f"{Path(src).stem} failed: {exc.ename}: {exc.evalue} (cell {exc.exec_count}); "
                           f"{kept}") from exc
    except Exception as exc:  # the kernel died, a cell timed out, ...
        raise ReportFailed(f"{Path(src).stem} failed: {type(exc).__name__}: {exc}; {kept}") from exc


def _cell_error_line(evalue: str) -> str:
    """A cell's error text as one line. A pydantic ``ValidationError``'s text (a header, then per problem
    the field on a line of its own, the message indented under it and a line with pydantic's URL) becomes
    ``HEADER: field: message; ...``, without the URLs."""
    lines = [ln for ln in evalue.splitlines() if ln.strip() and not ln.strip().startswith("For further information")]
    if len(lines) > 1 and re.match(r"\d+ validation errors? for ", lines[0]):
        problems, field = [], ""
        for ln in lines[1:]:
            if ln.startswith(" "):
                problems.append(f"{field}: {ln.strip()}" if field else ln.strip())
            else:
                field = ln.strip()
        return one_line(f"{lines[0]}: {'; '.join(problems)}")
    return one_line(evalue)


def _scrub_secrets(path: Path) -> None:
    """Papermill writes parameters into the notebook: make sure no key value ever lands on disk."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    clean = scrub(text)
    if clean != text:
        path.write_text(clean, encoding="utf-8")


# --------------------------------------------------------------------------- HTML


_TEMPLATE = "cresowlve_report.html.j2"
_TEMPLATE_SOURCE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


#: tables in reports: a wide one scrolls inside its own output box (never cut off at the page edge),
#: numbers right-aligned in tabular figures, compact cells; headers and text cells (class ``t`` of
#: :func:`cresowlve_core.reporting.table`) wrap, text left-aligned; intervals (class ``ci``) in small type
_TABLE_CSS = (
    ".jp-OutputArea-output{overflow-x:auto;max-width:100%}"
    ".jp-RenderedHTMLCommon table{font-size:12px;font-variant-numeric:tabular-nums;border-collapse:collapse}"
    ".jp-RenderedHTMLCommon td,.jp-RenderedHTMLCommon th{padding:2px 6px;white-space:nowrap}"
    ".jp-RenderedHTMLCommon td{text-align:right}.jp-RenderedHTMLCommon th{text-align:left}"
    ".jp-RenderedHTMLCommon thead th{white-space:normal;vertical-align:bottom;max-width:10em}"
    ".jp-RenderedHTMLCommon td.t{text-align:left;white-space:normal;min-width:6em;max-width:36em}"
    ".jp-RenderedHTMLCommon td.ci{font-size:10px;color:#555}"
)


def _chart_html(spec: Any) -> str:
    div = f"vis-{uuid.uuid4().hex[:12]}"
    payload = json.dumps(html_spec(spec) if isinstance(spec, dict) else spec).replace("</", "<\\/")
    return (
        f'<div id="{div}" class="{_CHART_MARK}"></div><script type="text/javascript">'
        f'vegaEmbed("#{div}", {payload}, {{"actions": {{"export": true, "source": false, '
        f'"compiled": false, "editor": false}}}}).catch(function (e) {{ console.error(e); '
        f'document.getElementById("{div}").textContent = "chart failed to render: " + e; }});</script>'
    )


_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _is_progress_bar(output: Any) -> bool:
    """A tqdm bar: a stderr stream with ``NN%|``, or a notebook widget (tqdm.auto in a kernel), whose
    static fallback is the same frozen text."""
    if output.get("output_type") == "stream":
        return output.get("name") == "stderr" and bool(_PROGRESS_BAR.search(_joined(output.get("text", ""))))
    data = output.get("data", {})
    return _WIDGET_MIME in data or bool(_PROGRESS_BAR.search(_joined(data.get("text/plain", ""))) and len(data) == 1)


def _joined(text: Any) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def _report_outputs(nb: Any) -> bool:
    """Prepare outputs for the HTML page; True when any chart is present."""
    has_chart = False
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        kept = []
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if RECORD_MIME in data:
                continue
            if _is_progress_bar(o):
                continue  # a progress bar frozen at its first frame says nothing in a report
            vl = next((k for k in data if _VEGALITE_ANY.match(k)), None)
            if vl is not None:
                o["data"] = {"text/html": _chart_html(data[vl])}
                o.get("metadata", {}).clear()
                has_chart = True
            kept.append(o)
        cell["outputs"] = kept
    return has_chart


#: the text of ``<script>`` and ``<style>`` elements and comments: not markup (to Python's html.parser,
#: which nbconvert's BeautifulSoup pass used, and to browsers)
_RAW_TEXT = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.S | re.I)
#: an ``<img>`` or ``<div>`` start tag (quoted attribute values may hold ``>``)
_START_TAG = re.compile(r"""<(img|div)\b((?:[^>"']|"[^"]*"|'[^']*')*?)(\s*/?>)""", re.I)
_ATTRIBUTE = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")
_NO_ALT = "No description has been provided for this image"
_FOCUSABLE = {"jp-Cell-inputWrapper", "jp-OutputArea-output"}  # nbconvert makes these divs focusable


def _attributes(text: str) -> dict[str, str]:
    """The attributes of a start tag's text after its name (names lower-cased, as HTML parsers do)."""
    out: dict[str, str] = {}
    for name, value in _ATTRIBUTE.findall(text):
        out.setdefault(name.lower(), value[1:-1] if value[:1] in "\"'" and value else value)
    return out


def _accessible_tags(html: str) -> tuple[str, int]:
    """What nbconvert's HTMLExporter does to a page after its template, without parsing the whole page
    with BeautifulSoup (a second of CPU for a report of a few MB): every ``<img>`` without ``alt`` gets
    nbconvert's placeholder text, every input wrapper and output ``div`` (classes ``jp-Cell-inputWrapper``,
    ``jp-OutputArea-output``) ``tabindex="0"``. Returns the page and how many images lacked ``alt``.
    Tags inside script or style text or comments are left alone."""
    missing_alt = 0

    def tag(m: re.Match[str]) -> str:
        nonlocal missing_alt
        name, attrs, end = m.group(1).lower(), m.group(2), m.group(3)
        found = _attributes(attrs)
        if name == "img" and "alt" not in found:
            missing_alt += 1
            return f'{m.group(0)[: m.start(3) - m.start(0)]} alt="{_NO_ALT}"{end}'
        if name == "div" and _FOCUSABLE & set(found.get("class", "").split()) and "tabindex" not in found:
            return f'{m.group(0)[: m.start(3) - m.start(0)]} tabindex="0"{end}'
        return m.group(0)

    parts, last = [], 0
    for raw in _RAW_TEXT.finditer(html):
        parts += [_START_TAG.sub(tag, html[last : raw.start()]), raw.group(0)]
        last = raw.end()
    parts.append(_START_TAG.sub(tag, html[last:]))
    return "".join(parts), missing_alt


def _report_exporter(template_loader: Any) -> Any:
    """An nbconvert HTMLExporter (the report template, code hidden) whose conversion skips the
    BeautifulSoup pass that follows the template (:func:`_accessible_tags` makes the same changes)."""
    from nbconvert import HTMLExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class ReportExporter(HTMLExporter):  # type: ignore[misc]
        def from_notebook_node(self, nb: Any, resources: Any = None, **kw: Any) -> tuple[str, Any]:  # type: ignore[override]
            # HTMLExporter.from_notebook_node (nbconvert 7) up to its template, then the same edits
            langinfo = nb.metadata.get("language_info", {})
            lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
            highlight_code = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
            resources = self._init_resources(resources)
            filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self,
                                                     resources=resources)
            self.register_filter("highlight_code", highlight_code)
            self.register_filter("filter_data_type", filter_data_type)
            html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
            html, missing_alt = _accessible_tags(html)
            if missing_alt:
                self.log.warning("Alternative text is missing on %s image(s).", missing_alt)
            return html, resources

    exporter = ReportExporter(extra_loaders=[template_loader], template_file=_TEMPLATE)
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    return exporter


def render_html(ipynb: Path, out: Path, title: str | None = None) -> Path:
    """Render an executed notebook to a self-contained HTML page without code or CDN scripts."""
    import jinja2
    import nbformat

    nb = nbformat.read(str(ipynb), as_version=4)
    nb.metadata.pop("widgets", None)  # widget state would pull the widget manager from a CDN
    has_chart = _report_outputs(nb)
    exporter = _report_exporter(jinja2.DictLoader({_TEMPLATE: _TEMPLATE_SOURCE}))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or ipynb.stem}})
    body = body.replace("</head>", f"<style>{_TABLE_CSS}</style>\n</head>", 1)
    if has_chart:
        body = body.replace("</head>", f"<script>{javascript_bundle()}</script>\n</head>", 1)
    body = scrub(body)
    out.write_text(body, encoding="utf-8")
    return out


def _first_heading(ipynb: Path) -> str | None:
    nb = json.loads(ipynb.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            src = "".join(cell.get("source", []))
            m = re.search(r"^#\s+(.+)$", src, re.M)
            if m:
                return m.group(1).strip()
    return None


# --------------------------------------------------------------------------- the index page


def _relative(value: Any, reports: Path) -> Any:
    """Absolute paths in parameters, shown relative to the project root (or ``~``)."""
    if isinstance(value, list):
        return [_relative(v, reports) for v in value]
    if not isinstance(value, str) or not value.startswith(("/", "~")):
        return value
    p = Path(value).expanduser()
    for base in (paths.project_root(), reports):
        try:
            rel = p.relative_to(base)
            return str(rel) if str(rel) != "." else "."
        except ValueError:
            continue
    try:
        return "~/" + str(p.relative_to(Path.home()))
    except ValueError:
        return value


def report_headline(records: dict[str, Any]) -> str | None:
    """The one-line result of an executed report: its ``headline`` record (each report notebook records
    its own with :func:`headline`), else None (the index page says the report records none)."""
    text = records.get("headline")
    return text if isinstance(text, str) else None


def _models(records: dict[str, Any], parameters: dict[str, Any]) -> list[str]:
    """The models a report is about: its ``models`` record (a list of names), and every ``model`` or
    ``*_model`` parameter with its role (``gpt-4.1 (judge)``)."""
    explicit = records.get("models")
    found = [str(m) for m in explicit] if isinstance(explicit, list) else []
    for key, value in parameters.items():  # model, judge_model, labeller_model, quiz_model, ...
        if (key == "model" or key.endswith("_model")) and value and isinstance(value, str):
            role = None if key in ("model", "local_model") else key.removesuffix("_model")
            # a recorded name that says more of the same model stands for it: "gpt-4o (served as ...)"
            # for the model, "gpt-4o (judge; served as ...)" for the judge
            more = f"{value} ({role}; served as " if role else f"{value} (served as "
            if not any(m.startswith(more) for m in found):
                found.append(value + (f" ({role})" if role else ""))
    return list(dict.fromkeys(found))


def _recorded_paths(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [p for v in value.values() for p in _recorded_paths(v)]
    if isinstance(value, list):
        return [p for v in value for p in _recorded_paths(v)]
    return [value] if isinstance(value, str) and value.endswith(EXPORT_SUFFIXES) else []


def _exports(reports: Path, stem: str, stems: list[str], records: dict[str, Any]) -> list[str]:
    """CSV/LaTeX files of a report: the recorded paths that exist when its render records any (a render
    that wrote elsewhere, ``export_dir``, does not own the ``STEM_*`` an earlier render left beside it),
    else ``STEM_*.csv|tex`` beside it."""
    found: list[Path] = []
    recorded = _recorded_paths(records)
    for s in recorded:
        p = Path(s)
        p = p if p.is_absolute() else reports / p
        if p.exists():
            found.append(p.resolve())
    for p in [] if recorded else sorted(reports.glob(f"{stem}_*")):
        owner = max((s for s in stems if p.name.startswith(s + "_")), key=len, default=stem)
        if p.suffix in EXPORT_SUFFIXES and owner == stem:
            found.append(p.resolve())
    return [os.path.relpath(p, reports) for p in dict.fromkeys(found)]


def update_index(
    reports: Path, stem: str, title: str, parameters: dict[str, Any], seconds: float
) -> Path:
    """Record this report in ``index.json`` and rewrite the landing page ``index.html``."""
    registry = _read_index(reports)
    ipynb = reports / f"{stem}.ipynb"
    records = read_records(ipynb) if ipynb.exists() else {}
    headline_text = report_headline(records)
    registry[stem] = {
        "title": title,
        "html": f"{stem}.html",
        "ipynb": f"{stem}.ipynb",
        "parameters": {k: _relative(v, reports) for k, v in parameters.items()},
        "rendered_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "headline": headline_text,
        "models": _models(records, parameters),
        "banners": banners_in(ipynb) if ipynb.exists() else [],
    }
    for key, entry in registry.items():  # exports may appear after an earlier report was indexed
        rec = read_records(reports / entry["ipynb"]) if (reports / entry["ipynb"]).exists() else {}
        entry["exports"] = _exports(reports, key, list(registry), rec)
    return _write_index(reports, registry)


def replaced_parameters(reports: Path, name: str, stem: str, parameters: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters the report ``stem`` of ``reports`` was last rendered with (as ``index.json`` records
    them) when they are not ``parameters`` of notebook ``name`` (either side's notebook defaults left out):
    a render under that name replaces a report of other inputs and its exports. None when there is no
    such report, or it had the same parameters."""
    try:
        entry = _read_index(reports).get(stem)
    except (OSError, ReportFailed):  # an unreadable index: the render names it
        return None
    before = entry.get("parameters") if isinstance(entry, dict) else None
    if not isinstance(before, dict):
        return None
    defaults = {k: _literal(v) for k, v in notebook_parameters(notebook_path(name)).items()}

    def given(params: dict[str, Any]) -> dict[str, Any]:
        shown = {k: _relative(v, reports) for k, v in params.items()}  # as index.json records them
        return {k: v for k, v in shown.items() if defaults.get(k) != v}

    return before if given(before) != given(parameters) else None


#: what every report's entry in ``index.json`` holds (the landing page shows each)
_INDEX_ENTRY_KEYS = ("title", "html", "ipynb", "rendered_at")


def _read_index(reports: Path) -> dict[str, Any]:
    """The registry of rendered reports (``index.json``; empty before the first report). A registry that
    is not one (damaged, hand-edited) is a :class:`ReportFailed` naming the file: its other reports' cards
    are not dropped by rewriting it."""
    reg_path = reports / _INDEX_JSON
    if not reg_path.exists():
        return {}
    try:
        registry = json.loads(reg_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = f"not JSON: {exc}"
    else:
        if not isinstance(registry, dict):
            why = "not a JSON object"
        elif (bad := next((k for k, e in registry.items() if not isinstance(e, dict) or "seconds" not in e
                           or not all(isinstance(e.get(f), str) for f in _INDEX_ENTRY_KEYS)), None)) is not None:
            why = f"entry {one_line(bad, 60)!r} lacks a report's {', '.join(_INDEX_ENTRY_KEYS)} or seconds"
        else:
            return registry
    raise ReportFailed(f"{reg_path} is not a registry of reports ({one_line(why, 200)}): the landing page cannot be "
                       f"updated from it; move {reg_path.name} away and the next report starts a new one")


def _write_index(reports: Path, registry: dict[str, Any]) -> Path:
    """Write ``registry`` to ``index.json`` and the landing page ``index.html`` from it; the page's path."""
    (reports / _INDEX_JSON).write_text(scrub(dumps_json(registry)), encoding="utf-8")
    out = reports / "index.html"
    out.write_text(scrub(index_page(registry)), encoding="utf-8")
    return out


def mark_failed_render(reports: Path, stem: str, exc: BaseException, partial: Path) -> None:
    """Note on the landing page's card of ``stem`` that its last render failed (when, why, where the
    partial notebook is), so the earlier page it still links is not read as the latest; the next
    successful render replaces the card. A report never rendered before has no card to mark. A
    landing page that cannot be rewritten leaves the failure to the command's own error."""
    try:
        registry = _read_index(reports)
        if not isinstance(registry.get(stem), dict):
            return
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else (one_line(str(exc)) or type(exc).__name__)
        registry[stem]["last_failure"] = {"at": datetime.now(UTC).isoformat(timespec="seconds"),
                                          "error": why[:400], "partial": os.path.relpath(partial, reports)}
        _write_index(reports, registry)
    except (OSError, ValueError, ReportFailed) as err:
        log.warning("could not mark %s's failed render on %s: %s", stem, reports / "index.html", err)


_INDEX_TEMPLATE = "index.html.j2"


def index_page(registry: dict[str, Any]) -> str:
    """The landing page (``templates/index.html.j2``, autoescaped): a banner per kind of non-result,
    then one card per report."""
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["tojson_text"] = lambda v: json.dumps(v, default=str)  # the text, escaped by the template
    env.filters["basename"] = lambda p: Path(p).name
    kinds: dict[str, list[str]] = {}
    for r in registry.values():
        for b in r.get("banners", []):
            kinds.setdefault(b, []).append(r["title"])
    banners = [Markup(banner_html(k, "Affected: " + "; ".join(titles) + "."))  # type: ignore[arg-type]
               for k, titles in kinds.items() if k in BANNER_KINDS]  # banner_html escapes its text
    reports = [(k, {"banners": [], "exports": [], "models": [], "parameters": {}, "headline": None, "last_failure": None,
                     **registry[k]})
               for k in sorted(registry)]
    return env.get_template(_INDEX_TEMPLATE).render(banners=banners, reports=reports)
