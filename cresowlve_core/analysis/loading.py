"""Read evaluation run directories into one tidy table.

A run directory (see :mod:`cresowlve_core.evaluation.records`) is one model × effort ×
language and holds ``manifest.json`` plus ``responses.jsonl``. :func:`load_runs` reads any
number of them into a :class:`RunSet`:

* ``responses`` — one row per (run, item id, lang); on resume the **last** line per
  ``(id, lang)`` in a file wins (earlier lines that a retry replaced are counted as
  ``n_superseded``; an answer written before its judge verdict is not);
* ``runs`` — one row per run with its manifest fields and counts;
* ``notes`` — human-readable messages about anything skipped or odd.

Correctness: one float column (1.0 / 0.0 / NaN, so means ignore what is unknown) per metric of
the registry :data:`cresowlve_core.evaluation.metrics.METRICS` (today ``em_strict``,
``em_lenient``, ``judge``). A record's value comes from ``scores[name]`` when it is set, else
from the fields older runs wrote (``em_strict`` / ``em_lenient``; for the judge
``judge_verdict == "CORRECT"`` where ``judge_status == "scored"``). A new metric needs no change
here, only a registry entry. The one rule for **an item without an answer**, used by every
table of notebooks 02 and 03 alike:

* an errored or failed call (``status == "error"``, or ``outcome`` ``failed`` / ``error``: the
  model gave no answer) has **no value** (NaN) for every metric: it is never counted wrong, it
  leaves every paired and agreement statistic, and Table 1 counts it wrong at its lower bound and
  right at its upper; its count is shown separately (``n_error``, see :func:`no_answer`);
* a refused or filtered answer (``outcome`` ``refused`` / ``filtered``, ``status == "ok"``) is the
  model's own behaviour on the item: **not correct** for every metric, and it stays in n
  (``n_refused`` / ``n_filtered`` per run). Records written before ``outcome`` existed load as
  answers;
* anything else without a value (``unscored``, judge ``error`` / ``not_run``, an unset
  score) is NaN too: it leaves that metric's denominator and is reported as *coverage*.

``reasoning_type`` is lower-cased and stripped on load, so ``Creative`` = ``creative``.
* ``judge_repeat`` — a second, independent judge verdict of the *same* response, read from
  ``extra.judge_repeat`` (``"CORRECT"`` / ``"INCORRECT"``); this is the one mechanism used
  to measure the judge's repeatability (see :mod:`cresowlve_core.analysis.reliability`).

When several directories hold the same model × effort × language, the one that finished
last (manifest ``finished_at``, then ``started_at``, then directory name) is kept and the
others are listed in ``notes``.

Files are parsed with ``pyarrow.json`` against an explicit schema (fast, no per-row Python);
a file that does not fit the schema (a hand-made run, a run killed mid-write) falls back to a
tolerant line reader: it skips malformed lines, and reads a value not of its field's type (the
string ``"false"`` for ``em_strict``, ``"hard"`` for ``difficulty``) as no value, never as a guess;
a note names the lines of both.
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from cresowlve_core.evaluation.metrics import METRICS as METRIC_REGISTRY
from cresowlve_core.failures import InputError
from cresowlve_core.items import LANGS
from cresowlve_core.llm.types import NOT_AN_ANSWER, Outcome
from cresowlve_core.paths import project_root
from cresowlve_core.runtime.manifest import Manifest
from cresowlve_core.runtime.outcomes import served_as
from cresowlve_core.runtime.rundir import RESPONSES
from cresowlve_core.text import NO_REASONING, config_label, config_name, normalise_effort, plural  # noqa: F401 - named here too
from cresowlve_core.untrusted import one_line

MANIFEST = "manifest.json"
#: metric name -> label, in registry order (derived from the registry, never edited here)
METRIC_LABELS: dict[str, str] = {m.name: m.label for m in METRIC_REGISTRY}
MODEL_BASED: frozenset[str] = frozenset(m.name for m in METRIC_REGISTRY if m.model_based)
#: ``outcome`` values of a call that produced no answer (with ``status == "error"``)
NO_ANSWER_OUTCOMES: frozenset[str] = frozenset({"failed", "error"})
#: the ``status`` values a record can have (``evaluation.records.Status``) and the ``outcome`` values
#: (``llm.types.Outcome``); any other value (a record edited by hand, or written by a newer cresowlve)
#: says nothing this version can score: the record has no value, like an errored one
KNOWN_STATUSES: frozenset[str] = frozenset({"ok", "error"})
KNOWN_OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))
_LEGACY_BOOL = ("em_strict", "em_lenient")  # old records: a top-level boolean per formula metric

_USAGE = pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("reasoning_tokens", pa.int64())])
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("lang", pa.string()),
        ("status", pa.string()),
        ("outcome", pa.string()),
        ("model", pa.string()),
        ("effort", pa.string()),
        ("difficulty", pa.int64()),
        ("reasoning_type", pa.string()),
        ("knowledge_domains", pa.list_(pa.string())),
        ("creative_domains", pa.list_(pa.string())),
        ("cultures", pa.list_(pa.string())),
        ("n_atomic_facts", pa.int64()),
        ("usage", _USAGE),
        ("cost", pa.float64()),
        ("cached", pa.bool_()),
        ("answer", pa.string()),
        ("prediction", pa.string()),
        ("extraction", pa.string()),
        ("truncated", pa.bool_()),
        ("em_strict", pa.bool_()),
        ("em_lenient", pa.bool_()),
        ("scores", pa.struct([(m.name, pa.bool_()) for m in METRIC_REGISTRY])),
        ("judge_status", pa.string()),
        ("judge_verdict", pa.string()),
        ("judge_model", pa.string()),
        ("judge_usage", _USAGE),
        ("judge_cost", pa.float64()),
        ("synthetic", pa.bool_()),
        ("extra", pa.struct([("judge_repeat", pa.string())])),
        ("served_model", pa.string()),
        ("judge_served_model", pa.string()),
        ("n_replaced", pa.int64()),
        ("n_verdicts_replaced", pa.int64()),
        ("replaced_cost", pa.float64()),
    ]
)
#: the models the provider's replies named (for the answer, for the verdict): counted per run into the runs'
#: ``served_models`` / ``judge_served_models``, never kept per response
SERVED_COLUMNS = ("served_model", "judge_served_model")
#: what a record's answer replaced (answers asked again by ``--retry-truncated``, paid verdicts withdrawn by
#: ``rescore``) and what that cost: added up per run (:func:`replaced_spending`), never kept per response
REPLACED_COLUMNS = ("n_replaced", "n_verdicts_replaced", "replaced_cost")


@dataclass
class RunSet:
    """Everything the analysis needs from a set of run directories."""

    responses: pd.DataFrame
    runs: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    searched: str = ""
    aliases: dict[str, str] = field(default_factory=dict)
    """The grid's labels (run model name -> the ``label:`` of a grid config, the paper's name), as
    recorded in the ``grid.json`` named in ``runs`` or beside the run directories."""

    _creative: tuple[pd.DataFrame, int] | None = field(default=None, init=False, repr=False, compare=False)

    def creative(self) -> tuple[pd.DataFrame, int]:
        """:func:`main_subset` of the responses (the creative items and the number of factual ones
        left out), filtered once per run set: every section of the report counts this population."""
        if self._creative is None:
            self._creative = main_subset(self.responses)
        return self._creative

    @property
    def empty(self) -> bool:
        return self.responses.empty

    @property
    def synthetic(self) -> bool:
        """True when any input run is synthetic (manifest flag or any record flag)."""
        if self.runs.empty:
            return False
        return bool(self.runs["synthetic"].any())

    @property
    def langs(self) -> list[str]:
        return sorted(self.responses["lang"].dropna().unique().tolist()) if not self.empty else []

    def has_judge(self) -> bool:
        return bool(self.responses["judge"].notna().any()) if not self.empty else False

    @property
    def metrics(self) -> list[str]:
        """Metric names of the registry, in order (each one a column of ``responses``)."""
        return list(METRIC_LABELS)

    def served_notes(self) -> dict[str, str]:
        """Configuration -> :func:`served_as` of the models the provider's replies named for its answers,
        over its runs of every language (``""`` when they named only the requested model, or none)."""
        if self.runs.empty or "served_models" not in self.runs:
            return {}
        out: dict[str, str] = {}
        for config, g in self.runs.groupby("config", sort=False):
            served: Counter[str] = Counter()
            for counts in g["served_models"]:
                served.update(counts)
            calls = int(g["served_model_calls"].sum()) if "served_model_calls" in g else None
            out[str(config)] = served_as(str(g["model"].iloc[0]), dict(sorted(served.items())), calls)
        return out

    @property
    def incomplete(self) -> pd.DataFrame:
        """Runs that did not finish (see ``complete`` in ``runs``)."""
        return self.runs[~self.runs["complete"].astype(bool)] if not self.runs.empty else self.runs

    def labelled(self, aliases: dict[str, str] | None = None) -> RunSet:
        """This run set with its configurations named by the grid's labels (``GPT-4.1 (high)`` for
        ``openai/gpt-4.1 (high)``): the labels recorded in ``grid.json`` and ``aliases``. The model
        column keeps the run's model name (Table 1 matches on it). A label two models share, or one
        that would merge two configurations, is not used."""
        # keyed by the model name as the runs hold it (one line: :func:`_run_info`); a label is a name too
        merged = {one_line(k): one_line(v) for k, v in {**self.aliases, **(aliases or {})}.items()}
        names = display_labels(self.runs, merged)
        if not names:
            return self
        rename = lambda df: df.assign(config=df["config"].map(lambda c: names.get(c, c)))  # noqa: E731
        runs = rename(self.runs)
        runs["name"] = [merged[str(m)] if c in names else str(m)
                        for c, m in zip(self.runs["config"], self.runs["model"], strict=True)]
        return RunSet(rename(self.responses), runs, list(self.notes), self.searched, merged)


# ------------------------------------------------------------------ finding run directories


def _is_run_dir(p: Path) -> bool:
    return p.is_dir() and ((p / RESPONSES).exists() or (p / MANIFEST).exists())


def resolve_run_dirs(runs: str | Path | Sequence[str | Path] | None, root: Path | None = None) -> list[Path]:
    """Run directories named by ``runs``: a glob, a directory, a grid summary (``grid.json``
    written by ``cresowlve grid``), or a list of these.

    Relative paths and globs resolve against ``root`` (default: the *current project*,
    :func:`cresowlve_core.paths.project_root`, never the package's checkout nor the current
    directory), so a notebook executed from ``notebooks/`` finds the same runs, and a second clone
    sharing one venv finds its own. A directory that is not itself a run directory stands for its
    run subdirectories.
    """
    if runs is None:
        return []
    root = root if root is not None else project_root()
    entries: Sequence[str | Path] = [runs] if isinstance(runs, (str, Path)) else list(runs)
    found: list[Path] = []
    for entry in entries:
        p = Path(entry).expanduser()
        base = p if p.is_absolute() else root / p
        if any(ch in str(entry) for ch in "*?["):
            candidates = [Path(m) for m in sorted(glob.glob(str(base)))]
        elif base.is_file() and base.suffix == ".json":  # a grid summary (cresowlve grid) lists its cells
            candidates = [cell_run_dir(base, d, root) for d in _grid_run_dirs(base)]
        elif _is_run_dir(base):
            candidates = [base]
        elif base.is_dir():
            candidates = sorted(c for c in base.iterdir())
        else:
            candidates = []
        found.extend(c.resolve() for c in candidates if _is_run_dir(c))
    return list(dict.fromkeys(found))


def cell_run_dir(grid_file: Path, recorded: str | Path, root: Path) -> Path:
    """Where the cell of the grid summary ``grid_file`` whose ``run_dir`` is ``recorded`` lies. ``cresowlve grid``
    writes every cell beside its ``grid.json``: a cell recorded in another folder belongs to a grid that was
    copied or moved since (from another machine, where that path may name another run here), and is the
    folder of its name beside ``grid_file``; else the recorded path (a relative one against ``root``)."""
    path = Path(recorded)
    path = path if path.is_absolute() else root / path
    if path.parent.resolve() != grid_file.parent.resolve():
        return grid_file.parent / path.name
    return path


def grid_cells_missing(runs: str | Path | Sequence[str | Path] | None, dirs: Sequence[Path],
                       root: Path | None = None) -> list[str]:
    """``cell (status)`` of each cell of a grid summary (``grid.json``) named in ``runs`` that has no run
    directory among ``dirs``: a cell not run yet (the grid stopped before it, or it was added since), or one a
    copy of the grid's folder lacks."""
    root = root if root is not None else project_root()
    entries: Sequence[str | Path] = [] if runs is None else [runs] if isinstance(runs, (str, Path)) else list(runs)
    listed = {d.resolve() for d in dirs}
    out = []
    for entry in entries:
        path = Path(entry).expanduser()
        path = path if path.is_absolute() else root / path
        if any(ch in str(entry) for ch in "*?[") or not (path.is_file() and path.suffix == ".json"):
            continue
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells") or []
        except (OSError, ValueError, AttributeError):
            continue
        for cell in cells if isinstance(cells, list) else []:
            if not isinstance(cell, dict) or not cell.get("run_dir"):
                continue
            run_dir = cell_run_dir(path, str(cell["run_dir"]), root)
            if run_dir.resolve() not in listed:
                out.append(f"{one_line(cell.get('cell') or run_dir.name)} ({one_line(cell.get('status') or 'not_run')})")
    return out


def _grid_run_dirs(path: Path) -> list[Path]:
    """The run directory of each cell a grid summary (``grid.json``) lists. Raises :class:`InputError`
    naming the file for one that is not such a summary (damaged, hand-edited, another JSON file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable grid summary ({type(exc).__name__}: {exc})") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("run_dir"), str) for c in cells):
        raise InputError(f"{path}: not a grid summary (a JSON object whose 'cells' each name a 'run_dir', as "
                         "`cresowlve grid` writes it)")
    return [Path(c["run_dir"]) for c in cells]


# ------------------------------------------------------------------ reading one run


def why_unreadable(exc: ValueError) -> str:
    """One line on why a manifest could not be read: the JSON error, or the first field refused."""
    from pydantic import ValidationError

    if isinstance(exc, json.JSONDecodeError):
        return one_line(f"not JSON ({exc})")
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(map(str, first.get("loc") or ()))
        return one_line(f"{where + ': ' if where else ''}{first.get('msg')}")
    return one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The manifest as a dict validated against the runtime :class:`Manifest` (unknown keys kept)."""
    path = run_dir / MANIFEST
    if not path.exists():
        return None
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise InputError("manifest.json is not a JSON object")
    validated = Manifest.model_validate(raw).model_dump()
    return {**raw, **validated}


def _read_tolerant(path: Path) -> tuple[pa.Table, int, list[tuple[int, str, Any]]]:
    """Slow path: line by line, skipping lines that are not JSON objects. Returns the table, the number of
    lines skipped, and each value that does not fit its field's type (line number, field, value)."""
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    bad = 0
    with path.open("rb") as fh:  # split on "\n" only, one line decoded at a time
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except ValueError:  # not JSON, or not UTF-8 (a torn or corrupted write): unreadable alike
                bad += 1
                continue
            if isinstance(obj, dict):
                rows.append(obj)
                lines.append(lineno)
            else:
                bad += 1
    table, misfits = _table_from_rows(rows)
    return table, bad, sorted(((lines[i], name, value) for i, name, value in misfits), key=lambda m: m[0])


def _fit(value: Any, typ: pa.DataType) -> tuple[Any, bool]:
    """``value`` as a field of type ``typ`` holds it, and whether it fits. A missing value is None and
    fits; a value of another kind is None (no value), never guessed: the string ``"false"`` is not true,
    ``"hard"`` is no difficulty. Whole numbers written as ``2.0`` or ``"2"``, and 0 / 1 for a boolean, fit."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None, True
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if pa.types.is_boolean(typ):
        if isinstance(value, (bool, np.bool_)):
            return bool(value), True
        return (bool(value), True) if number and value in (0, 1) else (None, False)
    if pa.types.is_integer(typ):
        if number and float(value).is_integer():
            return int(value), True
        text = value.strip() if isinstance(value, str) else ""
        return (int(text), True) if text.lstrip("+-").isdigit() else (None, False)
    if pa.types.is_floating(typ):
        return (float(value), True) if number else (None, False)
    if pa.types.is_string(typ):
        return str(value), True
    if pa.types.is_list(typ):
        return ([str(v) for v in value], True) if isinstance(value, (list, tuple)) else (None, False)
    if pa.types.is_struct(typ):
        if not isinstance(value, dict):
            return None, False
        fitted = {f.name: _fit(value.get(f.name), f.type) for f in typ}
        return {k: v for k, (v, _) in fitted.items()}, all(ok for _, ok in fitted.values())
    return value, True


def _table_from_rows(rows: list[dict[str, Any]]) -> tuple[pa.Table, list[tuple[int, str, Any]]]:
    """Records of loosely typed JSON as a :data:`SCHEMA` table (missing fields become null), and each
    value that does not fit its field (row index, field, value): it is read as no value."""
    misfits: list[tuple[int, str, Any]] = []
    arrays = []
    for fld in SCHEMA:
        values = []
        for i, row in enumerate(rows):
            raw = row.get(fld.name)
            if fld.name == "extra":  # only extra.judge_repeat is read; a list means its first repeat
                raw = {"judge_repeat": _as_verdict(raw.get("judge_repeat"))} if isinstance(raw, dict) else raw
            value, fits = _fit(raw, fld.type)
            if not fits:
                misfits.append((i, fld.name, raw))
            values.append(value)
        arrays.append(pa.array(values, type=fld.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA), misfits


def _as_verdict(v: Any) -> str | None:
    """``extra.judge_repeat`` as a verdict string; a list means the first repeat."""
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return None if v is None else str(v)


def read_responses(path: Path) -> tuple[pa.Table, list[str]]:
    """All lines of one ``responses.jsonl`` as an Arrow table in file order, plus notes."""
    notes: list[str] = []
    if not path.exists() or path.stat().st_size == 0:
        return SCHEMA.empty_table(), notes
    opts = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(path, parse_options=opts)
        table.validate(full=True)  # the JSON reader lets bytes that are not UTF-8 into string columns
        return table, notes
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    table, bad, misfits = _read_tolerant(path)
    if bad:
        notes.append(f"`{path.parent.name}`: skipped {bad} malformed line(s) in {RESPONSES}.")
    if misfits:
        shown = "; ".join(f"line {line} `{name}` {one_line(repr(value))[:60]}" for line, name, value in misfits[:3])
        notes.append(f"`{path.parent.name}`: {plural(len(misfits), 'value')} in {RESPONSES} not of the field's type, "
                     f"read as no value (never guessed): {shown}" + (f"; {len(misfits) - 3} more" if len(misfits) > 3 else "") + ".")
    return table, notes


# ------------------------------------------------------------------ the whole set


def _run_info(run_dir: Path, manifest: dict[str, Any] | None, table: pa.Table) -> dict[str, Any]:
    first: dict[str, Any] = table.slice(0, 1).to_pylist()[0] if table.num_rows else {}
    m = manifest or {}
    model = one_line(m.get("model") or first.get("model") or run_dir.name)  # a name, never a line break
    effort = m.get("effort") if manifest is not None else first.get("effort")
    thinking = bool(m["thinking"]) if "thinking" in m else bool(normalise_effort(effort))
    asked_reasoning = thinking and normalise_effort(effort) != NO_REASONING
    judge = m.get("judge") or {}
    planned = m.get("n_items")
    return {
        "run_id": m.get("run_id") or run_dir.name,
        "path": str(run_dir),
        "model": str(model),
        "effort": normalise_effort(effort),
        "config": config_label(str(model), effort),
        "name": str(model),  # the model as the tables name it: the grid's label once labelled()
        "thinking": thinking,
        "lang": language(m.get("lang") or first.get("lang")),
        "judge_model": judge.get("model") if isinstance(judge, dict) else None,
        "judge_protocol": judge.get("protocol") if isinstance(judge, dict) else None,
        "seed": sent_seed(m),
        "judge_seed": sent_seed(judge) if isinstance(judge, dict) else None,
        "temperature": sent_temperature(m),
        "stopped": m.get("stopped"),
        "manifest": manifest is not None,
        "synthetic_manifest": bool(m.get("synthetic", False)),
        "started_at": m.get("started_at"),
        "finished_at": m.get("finished_at"),
        "n_planned": int(planned) if planned is not None else None,
        # a run that asked for reasoning: answers that show none, over its answers less the refused and filtered
        # ones; else (non-thinking, or effort none, which asks for none): answers that show some, over its answers
        "n_no_reasoning": _summary_value(run_dir, "n_no_reasoning") if asked_reasoning else None,
        "n_unlabelled_reasoning": None if asked_reasoning else _summary_value(run_dir, "n_unlabelled_reasoning"),
        "n_reasoning_checked": _reasoning_checked(run_dir, asked_reasoning),
        **unusable_spending(_summary_value(run_dir, "unusable_spent") or _summary_value(run_dir, "spent_now")),
        "provider": m.get("provider"),
        "base_url": m.get("base_url"),
        "api": m.get("api"),
        "max_tokens": m.get("max_tokens"),
        "prompts": ", ".join(map(str, m.get("prompts") or [])) or None,
        "items_spec": str(m["items"]) if m.get("items") is not None else None,
    }


def replaced_spending(table: pa.Table) -> dict[str, int | float]:
    """What the latest records of a run (``table``) replaced, as the run's summary adds it up: the answers asked
    again by ``--retry-truncated`` (``n_replaced``), the paid verdicts ``rescore`` withdrew
    (``n_verdicts_replaced``), the known part of what they cost (``replaced_cost``) and the records whose
    replaced cost is unknown (``n_replaced_cost_unknown``). A record written before these fields replaced
    nothing this version can name."""
    answers, verdicts = (pc.fill_null(table[c], 0) for c in ("n_replaced", "n_verdicts_replaced"))
    replaced = pc.or_(pc.greater(answers, 0), pc.greater(verdicts, 0))
    cost = table["replaced_cost"].filter(replaced)
    return {"n_replaced": pc.sum(answers).as_py() or 0, "n_verdicts_replaced": pc.sum(verdicts).as_py() or 0,
            "replaced_cost": pc.sum(cost).as_py() or 0.0, "n_replaced_cost_unknown": cost.null_count}


def unusable_spending(spent_now: Any) -> dict[str, int | float]:
    """The billed answers with no text the client asked again (``n_unusable``, every role's, over the run's passes:
    its summary's ``unusable_spent``, or in a summary written before it, ``spent_now``, the last pass's), the known part of their cost (``unusable_cost``) and those of unknown
    cost (``n_unusable_unknown_cost``); a meter that is not what the runner writes counts its answers as of
    unknown cost; none without a summary, or of a version that did not record them."""
    out: dict[str, int | float] = {"n_unusable": 0, "unusable_cost": 0.0, "n_unusable_unknown_cost": 0}
    for meter in (spent_now or {}).values() if isinstance(spent_now, dict) else ():
        n = meter.get("n_unusable") if isinstance(meter, dict) else None
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            continue
        cost, unknown = meter.get("unusable_cost"), meter.get("n_unusable_unknown_cost")
        readable = (isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost)
                    and cost >= 0 and isinstance(unknown, int) and not isinstance(unknown, bool) and 0 <= unknown <= n)
        out["n_unusable"] += n
        out["unusable_cost"] += cost if readable else 0.0
        out["n_unusable_unknown_cost"] += unknown if readable else n
    return out


def language(value: Any) -> str | None:
    """A language as the tables compare it: stripped and lower-cased (``EN`` is ``en``); None when unset."""
    text = "" if value is None else str(value).strip().lower()
    return text or None


#: the runs table's temperature of a run whose requests carried none: the provider decoded at its default
PROVIDER_DEFAULT = "provider default"


def sent_temperature(m: dict[str, Any]) -> float | str | None:
    """The temperature the run's requests carried: the manifest's ``sent`` fields (a reasoning
    model's profile sends none) less what the provider refused and the client dropped
    (``adapted``); :data:`PROVIDER_DEFAULT` when none was sent. A manifest that records no sent
    fields (written before ``sent`` existed; every run since sends at least its token limit) gives
    its requested ``temperature``."""
    if not m.get("sent"):
        return m.get("temperature")
    dropped = any(isinstance(a, dict) and a.get("field") == "temperature" and a.get("action") == "drop"
                  for a in m.get("adapted") or [])
    return PROVIDER_DEFAULT if dropped or "temperature" not in m["sent"] else m["sent"]["temperature"]


def sent_seed(m: dict[str, Any]) -> int | None:
    """The seed the requests of a run (or of its judge: the manifest's ``judge`` section) carried: None when
    they carried none (a profile that sends no seed, such as Gemini's; the Responses API; a seed the provider
    refused and the client dropped), as :func:`sent_temperature`. A manifest that records no sent fields
    gives its requested ``seed``."""
    if not m.get("sent"):
        return m.get("seed")
    dropped = any(isinstance(a, dict) and a.get("field") == "seed" and a.get("action") == "drop"
                  for a in m.get("adapted") or [])
    return None if dropped else m["sent"].get("seed")


def _reasoning_checked(run_dir: Path, asked_reasoning: bool) -> int | None:
    """The answers the summary's reasoning check counted over (None when the summary does not say): every
    answer (``n_ok``), less the refused and filtered ones for a run that asked for reasoning."""
    n_ok = _summary_value(run_dir, "n_ok")
    if not isinstance(n_ok, int):
        return None
    if not asked_reasoning:
        return n_ok
    withheld = [_summary_value(run_dir, k) or 0 for k in ("n_refused", "n_filtered")]
    return n_ok - sum(w for w in withheld if isinstance(w, int))


def _summary_value(run_dir: Path, key: str) -> Any:
    """One value of the run's ``summary.json`` (None when absent or unreadable)."""
    path = run_dir / "summary.json"
    try:
        stat = path.stat()
    except OSError:
        return None
    summary = _read_summary(str(path), stat.st_mtime_ns, stat.st_size)
    return summary.get(key) if isinstance(summary, dict) else None


@functools.lru_cache(maxsize=1024)
def _read_summary(path: str, mtime_ns: int, size: int) -> Any:
    """A ``summary.json`` parsed once per version of the file (its path, modification time and size: a
    rewritten summary is read again); None when unreadable. Callers only read it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _legacy_score(df: pd.DataFrame, name: str) -> np.ndarray:
    """A metric's value from the fields runs wrote before ``scores`` existed (NaN if none)."""
    if name in _LEGACY_BOOL and name in df.columns:
        return df[name].astype("float64").to_numpy(copy=True)
    if name == "judge":
        scored = df["judge_status"].isin(JUDGED_STATUSES).to_numpy(dtype=bool)
        verdict = judge_verdicts(df)
        return np.where(scored & (verdict == verdict), verdict, np.nan)  # a verdict it does not read: no value
    return np.full(len(df), np.nan)


#: the ``judge_status`` values of a record whose ``judge_verdict`` is a verdict on it
JUDGED_STATUSES = ("scored", "not_an_answer")


def legacy_record_score(rec: dict[str, Any], name: str) -> bool | None:
    """:func:`_legacy_score` for one record read as a dict: a metric's value from the fields runs wrote
    before ``scores`` existed (a top-level ``em_strict`` / ``em_lenient`` boolean; the judge's
    ``judge_verdict`` of a record its ``judge_status`` calls judged); None when it has none."""
    if name in _LEGACY_BOOL:
        value = rec.get(name)
        return value if isinstance(value, bool) else None
    if name == "judge" and rec.get("judge_status") in JUDGED_STATUSES:
        return {"CORRECT": True, "INCORRECT": False}.get(str(rec.get("judge_verdict")).strip().upper())
    return None


def judge_verdicts(df: pd.DataFrame) -> np.ndarray:
    """``judge_verdict`` as 1.0 (``CORRECT``) / 0.0 (``INCORRECT``), compared case- and space-insensitively,
    as ``extra.judge_repeat`` is; NaN for no verdict or any other text (``"maybe"`` is no verdict, never a
    wrong one)."""
    codes, texts = pd.factorize(df["judge_verdict"])  # a few distinct texts: read each once (-1: none)
    values = [{"CORRECT": 1.0, "INCORRECT": 0.0}.get(str(t).strip().upper(), np.nan) for t in texts]
    return np.asarray([*values, np.nan], dtype=float)[codes]


def no_answer(df: pd.DataFrame) -> np.ndarray:
    """Boolean mask: the call produced no answer (``status == "error"`` or ``outcome`` failed /
    error), or its status or outcome is one this version does not know (:func:`unknown_status`).
    Such an item has no value for any metric and leaves every paired statistic."""
    err = df["status"].eq("error").to_numpy(dtype=bool) if "status" in df else np.zeros(len(df), dtype=bool)
    if "outcome" in df:
        err = err | df["outcome"].isin(NO_ANSWER_OUTCOMES).to_numpy(dtype=bool)
    return err | unknown_status(df)


def unknown_status(df: pd.DataFrame) -> np.ndarray:
    """Boolean mask: a ``status`` outside :data:`KNOWN_STATUSES` or an ``outcome`` outside
    :data:`KNOWN_OUTCOMES` (a missing one is known: records written before ``outcome`` existed)."""
    out = np.zeros(len(df), dtype=bool)
    for col, known in (("status", KNOWN_STATUSES), ("outcome", KNOWN_OUTCOMES)):
        if col in df:
            out |= (df[col].notna() & ~df[col].isin(known)).to_numpy(dtype=bool)
    return out


def record_status_unknown(rec: dict[str, Any]) -> bool:
    """:func:`unknown_status` for one record read as a dict."""
    status, outcome = rec.get("status"), rec.get("outcome")
    return (status is not None and status not in KNOWN_STATUSES) or (outcome is not None and outcome not in KNOWN_OUTCOMES)


def record_without_answer(rec: dict[str, Any]) -> bool:
    """:func:`no_answer` for one record read as a dict."""
    return rec.get("status") == "error" or rec.get("outcome") in NO_ANSWER_OUTCOMES or record_status_unknown(rec)


def not_an_answer(df: pd.DataFrame) -> np.ndarray:
    """Boolean mask: a refused or filtered answer (the model's behaviour, counted not correct)."""
    if "outcome" not in df:
        return np.zeros(len(df), dtype=bool)
    return df["outcome"].isin(NOT_AN_ANSWER).to_numpy(dtype=bool) & ~no_answer(df)


def _finish_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Derive one float column per registry metric and flatten usage (vectorised)."""
    missing = no_answer(df)
    refused = not_an_answer(df)
    for name in METRIC_LABELS:
        col = f"scores.{name}"
        new = df.pop(col).astype("float64").to_numpy() if col in df.columns else np.full(len(df), np.nan)
        vals = np.where(np.isnan(new), _legacy_score(df, name), new)
        vals[missing] = np.nan  # no answer: no value, never wrong
        if name not in MODEL_BASED:
            vals[refused] = 0.0  # a refusal has nothing to match: not correct
        elif "run_id" in df.columns:  # ...and the judge, in runs this model scored, never accepts it
            judged_run = pd.Series(~np.isnan(vals)).groupby(df["run_id"].to_numpy()).transform("any").to_numpy(bool)
            vals[refused & judged_run] = 0.0
        df[name] = vals
    df["reasoning_type"] = df["reasoning_type"].astype("string").str.strip().str.lower().astype(object)
    df.loc[df["reasoning_type"].isna(), "reasoning_type"] = None
    rep = df.pop("extra.judge_repeat").astype("string").str.upper()
    df["judge_repeat"] = np.where(rep.isin(["CORRECT", "INCORRECT"]), rep.eq("CORRECT").astype(float), np.nan)
    rename = {f"usage.{k}": k for k in ("input_tokens", "output_tokens", "reasoning_tokens")}
    rename |= {f"judge_usage.{k}": f"judge_{k}" for k in ("input_tokens", "output_tokens", "reasoning_tokens")}
    df = df.rename(columns=rename)
    for col in ("difficulty", "n_atomic_facts"):
        df[col] = df[col].astype("float64")
    for col in ("cached", "synthetic"):
        df[col] = df[col].fillna(False).astype(bool)
    return df


def _empty_responses() -> pd.DataFrame:
    table = SCHEMA.empty_table().drop_columns([*SERVED_COLUMNS, *REPLACED_COLUMNS]).flatten()
    df = table.to_pandas()
    for c in ("run_id", "config", "thinking"):
        df[c] = pd.Series(dtype=object)
    return _finish_columns(df)


def _shared_names(infos: Sequence[dict[str, Any]]) -> list[str]:
    """A note for each configuration name two kept runs of one language share with another model or effort
    (the model ``m (low)`` and the model ``m`` at effort ``low`` are both ``m (low)``): Table 1 keeps their
    rows apart, but every breakdown by configuration pools their answers."""
    seen: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for info in infos:
        key = (str(info["config"]), str(info["lang"]))
        seen.setdefault(key, set()).add((str(info["model"]), normalise_effort(info["effort"]) or "-"))
    return [f"`{one_line(name)}` ({one_line(lang)}) names {len(pairs)} configurations ("
            + "; ".join(f"model {one_line(m)!r}, effort {one_line(e)}" for m, e in sorted(pairs))
            + "): Table 1 gives each its row, but the breakdowns by configuration pool their answers; rename a "
            "model (a grid's `label`) to keep them apart." for (name, lang), pairs in seen.items() if len(pairs) > 1]


def load_runs(runs: str | Path | Sequence[str | Path] | None, root: Path | None = None) -> RunSet:
    """Load every run directory named by ``runs`` (see :func:`resolve_run_dirs`)."""
    searched = ", ".join(map(str, runs)) if isinstance(runs, (list, tuple)) else str(runs)
    dirs = resolve_run_dirs(runs, root)
    notes: list[str] = []
    infos: list[dict[str, Any]] = []
    tables: list[pa.Table] = []
    for d in dirs:
        try:
            manifest = read_manifest(d)
        except ValueError as exc:  # json.JSONDecodeError and pydantic's ValidationError among them
            notes.append(f"`{d.name}`: manifest.json could not be read ({why_unreadable(exc)}); using the records: "
                         "its settings (judge, temperature, items planned) are unknown here.")
            manifest = None
        if manifest is not None and manifest.get("kind", "eval") != "eval":  # a CREATE, synth, errors... run
            notes.append(f"`{one_line(d.name)}`: a run directory of {one_line(manifest['kind'], 40)!r}, not of "
                         "`cresowlve eval`: left out (its records are not answers to items).")
            continue
        table, file_notes = read_responses(d / RESPONSES)
        notes.extend(file_notes)
        info = _run_info(d, manifest, table)
        info["n_lines"] = table.num_rows
        infos.append(info)
        tables.append(table)

    if without := grid_cells_missing(runs, dirs, root):
        notes.append(f"{plural(len(without), 'cell')} of the grid without a run directory, so not in any table "
                     f"below: {', '.join(without)}.")
    _tell_apart_run_ids(infos, notes)
    runs_df = pd.DataFrame(infos)
    aliases = grid_aliases(runs, dirs, root)
    if runs_df.empty:
        return RunSet(_empty_responses(), _empty_runs(), notes, searched, aliases)

    keep = _pick_latest(runs_df, notes)
    notes.extend(_shared_names([infos[i] for i in keep]))
    parts: list[pa.Table] = []
    for i in keep:
        t = tables[i]
        if t.num_rows == 0:
            continue
        info = infos[i]
        if info["lang"] is not None:
            t = t.set_column(t.schema.get_field_index("lang"), "lang", pc.fill_null(t["lang"], str(info["lang"])))
        # compared as the run's language is: stripped and lower-cased (a record's "EN" is the run's "en")
        t = t.set_column(t.schema.get_field_index("lang"), "lang", pc.utf8_lower(pc.utf8_trim_whitespace(t["lang"])))
        # an answer is counted, scored and paired by its item: a record naming none cannot be (nor can one
        # record of several without an id replace the others, as a retry of one item would)
        named = pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(t["id"]), ""), False)
        no_id = ~np.asarray(named.to_numpy(zero_copy_only=False), dtype=bool)
        if no_id.any():
            notes.append(f"`{one_line(Path(info['path']).name)}`: {plural(int(no_id.sum()), 'record')} without an "
                         f"item `id` left out: an answer is counted, scored and paired by its item.")
            t = t.filter(pa.array(~no_id))
        earlier = _superseded_lines(t)
        # a judged run writes each answer before asking the judge: that line is not a superseded answer
        awaiting_judge = earlier & _equals(t["status"], "ok") & _equals(t["judge_status"], "not_run")
        infos[i]["n_superseded"] = int(earlier.sum() - awaiting_judge.sum())
        t = t.filter(pa.array(~earlier))
        finished = _equals(t["status"], "ok")
        judged = finished & (_equals(t["judge_status"], "scored") | _equals(t["judge_status"], "unscored"))
        for column, calls in zip(SERVED_COLUMNS, (finished, judged), strict=True):
            # counted in Arrow: one name per distinct value, not one per record
            counts = pc.value_counts(t[column].filter(pa.array(calls))).flatten()
            info[f"{column}s"] = dict(sorted((k, n) for k, n in zip(counts[0].to_pylist(), counts[1].to_pylist()) if k))
            info[f"{column}_calls"] = int(calls.sum())  # the answers (verdicts) whose reply could name a model
        t = t.drop_columns(list(SERVED_COLUMNS))
        info.update(replaced_spending(t))
        t = t.drop_columns(list(REPLACED_COLUMNS))
        run_columns = {"run_id": info["run_id"], "config": info["config"], "thinking": info["thinking"],
                       "model": info["model"], "effort": info["effort"]}
        for name, value in run_columns.items():
            column = pa.repeat(pa.scalar(value, type=pa.bool_() if name == "thinking" else pa.string()), t.num_rows)
            at = t.schema.get_field_index(name)
            t = t.set_column(at, name, column) if at >= 0 else t.append_column(name, column)
        parts.append(t)
    # one conversion of one contiguous table: every column of the frame is a single block, so the
    # sections' filters and group-bys do not walk one chunk per run
    responses = (_finish_columns(pa.concat_tables(parts).combine_chunks().flatten().to_pandas())
                 if parts else _empty_responses())

    _note_unknown_statuses(responses, infos, notes)
    _note_unread_verdicts(responses, infos, notes)
    runs_df = pd.DataFrame([infos[i] for i in keep]).reset_index(drop=True)
    runs_df["n_superseded"] = runs_df.get("n_superseded", pd.Series(0, index=runs_df.index)).fillna(0).astype(int)
    outcome = responses["outcome"]
    counts = responses.assign(_err=no_answer(responses), _ref=outcome.eq("refused") & ~no_answer(responses),
                              _fil=outcome.eq("filtered") & ~no_answer(responses)).groupby("run_id").agg(
        n_records=("id", "size"),
        n_error=("_err", "sum"),
        n_refused=("_ref", "sum"),
        n_filtered=("_fil", "sum"),
        any_synthetic=("synthetic", "any"),
        n_judged=("judge", "count"),
    )
    runs_df = runs_df.join(counts, on="run_id")
    for c in ("n_records", "n_error", "n_refused", "n_filtered", "n_judged"):
        runs_df[c] = runs_df[c].fillna(0).astype(int)
    runs_df["n_truncated"] = runs_df["run_id"].map(truncated_answers(responses)).astype(object)
    for column in SERVED_COLUMNS:  # a run without records: no reply named a model
        runs_df[f"{column}s"] = [s if isinstance(s, dict) else {} for s in runs_df.get(f"{column}s", [None] * len(runs_df))]
        runs_df[f"{column}_calls"] = runs_df.get(f"{column}_calls", pd.Series(0, index=runs_df.index)).fillna(0).astype(int)
    runs_df["served_as"] = [served_as(m, s, n) for m, s, n in zip(runs_df["model"], runs_df["served_models"],
                                                                   runs_df["served_model_calls"], strict=True)]
    runs_df["judge_served_as"] = [served_as(m, s, n) for m, s, n in zip(runs_df["judge_model"], runs_df["judge_served_models"],
                                                                         runs_df["judge_served_model_calls"], strict=True)]
    runs_df["complete"] = [_is_complete(r) for r in runs_df.to_dict(orient="records")]
    notes.extend(_summaries_of_other_answers(runs_df, responses))
    notes.extend(mixed_settings(runs_df))
    runs_df["synthetic"] = runs_df["synthetic_manifest"] | runs_df["any_synthetic"].astype("boolean").fillna(
        False
    ).astype(bool)
    runs_df = runs_df.drop(columns=["any_synthetic"])
    notes.extend(_language_notes(runs_df))
    for _, r in runs_df.iterrows():
        if r["n_records"] == 0:
            stopped = _given(r, "stopped")
            notes.append(f"`{Path(r['path']).name}`: no response records "
                         + (f"(stopped: {one_line(stopped)})." if stopped else "yet."))
        elif not r["complete"]:
            notes.append(f"`{Path(r['path']).name}` did not finish: {unfinished_reason(r)}.")
        notes.extend(_mixed_request_notes(Path(r["path"])))
    return RunSet(responses, runs_df, notes, searched, aliases)


#: the runs table's columns read from a run's summary.json (its reasoning check), not from its records
SUMMARY_COLUMNS = ("n_no_reasoning", "n_unlabelled_reasoning", "n_reasoning_checked")


def _summaries_of_other_answers(runs_df: pd.DataFrame, responses: pd.DataFrame) -> list[str]:
    """Clear the :data:`SUMMARY_COLUMNS` of each run whose summary.json counts another number of answers than
    its records hold (the summary of an earlier pass: a resumed run stopped before it wrote its own; or
    records appended since), with a note naming the run: they describe other answers than the tables count."""
    answered = responses["status"].eq("ok").groupby(responses["run_id"]).sum()
    notes = []
    for i in runs_df.index:
        run_dir = Path(str(runs_df.at[i, "path"]))
        said, held = _summary_value(run_dir, "n_ok"), int(answered.get(runs_df.at[i, "run_id"], 0))
        if not isinstance(said, int) or said == held or runs_df.loc[i, list(SUMMARY_COLUMNS)].isna().all():
            continue
        runs_df.loc[i, list(SUMMARY_COLUMNS)] = None
        notes.append(f"`{one_line(run_dir.name)}`: its summary.json counts {plural(said, 'answer')}, its records "
                     f"{held} (a summary of an earlier pass, or records added since): its reasoning check is not "
                     f"shown; `cresowlve rescore --run-dir {one_line(str(run_dir))}` recomputes it from the records.")
    return notes


def truncated_answers(responses: pd.DataFrame) -> dict[str, int | None]:
    """Per run, its answers cut off by the token limit, counted on its records (as its summary counts them
    when it is of these records; one of an earlier pass is not); None for a run none of whose records says
    (written before truncation was flagged)."""
    flagged = responses["truncated"]
    cut = responses.assign(_cut=flagged.eq(True).to_numpy(dtype=bool) & ~no_answer(responses),
                           _said=flagged.notna()).groupby("run_id").agg(n=("_cut", "sum"), said=("_said", "any"))
    return {str(run_id): int(r.n) if r.said else None for run_id, r in cut.iterrows()}


def _mixed_request_notes(run_dir: Path) -> list[str]:
    """One note per field that some answers of the run were asked without (the provider refused it and the
    client dropped it) and others with it (its summary's ``dropped_answers``): two settings under one run, whose
    manifest labels them all by the drop."""
    known, dropped = _summary_value(run_dir, "n_dropped_known"), _summary_value(run_dir, "dropped_answers")
    if not isinstance(known, int) or not isinstance(dropped, dict):
        return []
    return [f"`{one_line(run_dir.name)}`: {n} of {known} answers were asked without `{one_line(field, 40)}` (the "
            "provider refused it), the others with it: two settings in one run."
            for field, n in dropped.items() if isinstance(n, int) and 0 < n < known]


def _language_notes(runs_df: pd.DataFrame) -> list[str]:
    """One note per run whose language the tables cannot show: none recorded (every table groups by
    language and leaves it out), or one that is neither En nor Ru (Table 1 and the En-vs-Ru comparison
    have columns for those two only)."""
    notes = []
    for r in runs_df.itertuples(index=False):
        name = one_line(Path(str(r.path)).name)
        if r.lang is None or pd.isna(r.lang):
            notes.append(f"`{name}`: no language recorded (neither its manifest nor its records name one): its "
                         f"{plural(int(r.n_records), 'record')} are left out of every table below.")
        elif r.lang not in LANGS:
            notes.append(f"`{name}`: language {one_line(repr(r.lang))} is neither en nor ru: Table 1 and the En-vs-Ru "
                         f"comparison, which show those two only, leave out its {plural(int(r.n_records), 'record')}.")
    return notes


def _note_unread_verdicts(responses: pd.DataFrame, infos: list[dict[str, Any]], notes: list[str]) -> None:
    """One note per run with records the judge marked judged whose verdict is neither CORRECT nor INCORRECT."""
    judged = responses["judge_status"].isin(JUDGED_STATUSES).to_numpy(dtype=bool)
    odd = responses.loc[judged & np.isnan(judge_verdicts(responses)), ["run_id", "judge_verdict"]]
    paths = {info["run_id"]: Path(info["path"]).name for info in infos}
    for run_id, g in odd.groupby("run_id", sort=True):
        values = ", ".join(one_line(repr(v)) for v in sorted(set(g["judge_verdict"].dropna().astype(str)))[:5])
        notes.append(f"`{one_line(paths.get(run_id, run_id))}`: {plural(len(g), 'judged record')} with a verdict that is "
                     f"neither CORRECT nor INCORRECT ({values or 'none'}): no judge value (as if unscored), never wrong.")
    # a verdict on a record the judge's status does not call judged (none, unscored, error) is not read
    stray = responses.loc[~judged & responses["judge_verdict"].notna().to_numpy(dtype=bool), ["run_id", "judge_status"]]
    for run_id, g in stray.groupby("run_id", sort=True):
        statuses = ", ".join(sorted({one_line(repr(v)) if isinstance(v, str) else "none" for v in g["judge_status"]}))
        notes.append(f"`{one_line(paths.get(run_id, run_id))}`: {plural(len(g), 'record')} with a `judge_verdict` but "
                     f"`judge_status` {statuses}, not scored or not_an_answer: the verdict is not read (no judge value).")


def _note_unknown_statuses(responses: pd.DataFrame, infos: list[dict[str, Any]], notes: list[str]) -> None:
    """One note per run with records of a status or outcome this version does not know."""
    odd = responses.loc[unknown_status(responses), ["run_id", "status", "outcome"]]
    paths = {info["run_id"]: Path(info["path"]).name for info in infos}
    for run_id, g in odd.groupby("run_id", sort=True):
        values = [f"{col} {one_line(repr(v))}" for col, known in (("status", KNOWN_STATUSES), ("outcome", KNOWN_OUTCOMES))
                  for v in sorted(set(g[col].dropna()) - known)]
        notes.append(f"`{one_line(paths.get(run_id, run_id))}`: {plural(len(g), 'record')} with a status or outcome "
                     f"this version does not know ({', '.join(values)}): no value for any metric (never counted "
                     "right or wrong), counted with the errored items.")


#: the kinds of :func:`setting_mixes`
JUDGE_MIX, PROMPT_MIX = "judge", "prompt"


def setting_mixes(runs: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """What runs (rows of the runs frame: ``judge_model``, ``judge_protocol``, ``prompts``) do not share
    although one table compares them: more than one judge (model and protocol) (:data:`JUDGE_MIX`:
    judge -> its runs), or one prompt in more than one version (:data:`PROMPT_MIX`: ``solve_cot_en@1``
    and ``solve_cot_en@2`` -> their runs). A prompt of one language or one style only is not a mix."""
    judges: dict[str, list[dict[str, Any]]] = {}
    versions: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        if _given(r, "judge_model") or _given(r, "judge_protocol"):
            name = f"{_given(r, 'judge_model') or '?'}, protocol {_given(r, 'judge_protocol') or '?'}"
            judges.setdefault(name, []).append(r)
        for prompt in str(_given(r, "prompts") or "").split(", "):
            name, sep, _ = prompt.rpartition("@")
            if sep:
                versions.setdefault(name, {}).setdefault(prompt, []).append(r)
    mixes = [(JUDGE_MIX, judges)] if len(judges) > 1 else []
    return mixes + [(PROMPT_MIX, by_version) for _, by_version in sorted(versions.items()) if len(by_version) > 1]


def mixed_settings(runs_df: pd.DataFrame) -> list[str]:
    """:func:`setting_mixes` of the analysed runs as notes naming each configuration and language."""
    notes = []
    for kind, groups in setting_mixes(runs_df.to_dict(orient="records")):
        where = "; ".join(f"{one_line(key)} ("
                          + ", ".join(f"`{one_line(r['config'])}` / {one_line(r['lang'] or '?')}" for r in rows) + ")"
                          for key, rows in sorted(groups.items()))
        notes.append(f"These runs were judged differently: {where}. Their LLM-judge numbers, and every comparison "
                     "between them, measure the judges as well as the runs." if kind == JUDGE_MIX else
                     f"These runs used different versions of one prompt: {where}. Their answers or verdicts were "
                     "asked for differently.")
    return notes


def _tell_apart_run_ids(infos: list[dict[str, Any]], notes: list[str]) -> None:
    """Give runs that share a ``run_id`` (the directory's name by default: ``gpt41/run`` and
    ``gpt4o/run`` are both ``run``) their path below the folder they share as their id, so each run
    keeps its own records and counts."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for info in infos:
        by_id.setdefault(str(info["run_id"]), []).append(info)
    for run_id, same in by_id.items():
        if len(same) < 2:
            continue
        paths = [Path(info["path"]) for info in same]
        shared = Path(os.path.commonpath(paths))
        for info, path in zip(same, paths, strict=True):
            info["run_id"] = path.relative_to(shared).as_posix() if path != shared else str(path)
        ids = ", ".join(f"`{one_line(info['run_id'])}`" for info in same)
        notes.append(f"{len(same)} run directories carry the run id `{one_line(run_id)}`; they are told apart by "
                     f"their paths: {ids}.")


def _superseded_lines(t: pa.Table) -> np.ndarray:
    """Boolean mask of the lines a later line of the same ``(id, lang)`` replaces (the last one wins;
    a missing id or language is one value, as in pandas' ``duplicated``). Computed in Arrow: turning
    the key columns of every run into pandas strings first cost seconds at 360 runs."""
    keys = t.select(["id", "lang"]).append_column("_line", pa.array(np.arange(t.num_rows, dtype=np.int64)))
    last = keys.group_by(["id", "lang"], use_threads=False).aggregate([("_line", "max")])["_line_max"]
    earlier = np.ones(t.num_rows, dtype=bool)
    earlier[last.to_numpy()] = False
    return earlier


def _equals(column: pa.ChunkedArray, value: str) -> np.ndarray:
    """Boolean mask: ``column == value`` (a missing value is not equal)."""
    return np.asarray(pc.fill_null(pc.equal(column, value), False).to_numpy(zero_copy_only=False), dtype=bool)


def display_labels(runs_df: pd.DataFrame, aliases: dict[str, str]) -> dict[str, str]:
    """Configuration name -> the same configuration named with its grid label, for the models a
    grid labelled; empty when a label would merge two configurations."""
    if not aliases or runs_df.empty:
        return {}
    pairs = runs_df.drop_duplicates("config")[["config", "model", "effort"]]
    out = {str(c): config_name(str(m), e, aliases) for c, m, e in pairs.itertuples(index=False)
           if aliases.get(str(m))}
    targets = [*out.values(), *(str(c) for c in pairs["config"] if str(c) not in out)]
    return out if len(set(targets)) == len(targets) else {}


GRID_FILE = "grid.json"  # written by ``cresowlve grid`` in the grid's directory, beside its cells


def grid_aliases(runs: str | Path | Sequence[str | Path] | None, dirs: Sequence[Path] = (),
                 root: Path | None = None) -> dict[str, str]:
    """The ``aliases`` (run model name -> grid label) recorded in every ``grid.json`` named in
    ``runs`` or lying beside one of the run directories ``dirs`` (a grid's cells sit in its folder)."""
    root = root if root is not None else project_root()
    entries: Sequence[str | Path] = [] if runs is None else [runs] if isinstance(runs, (str, Path)) else list(runs)
    files = [p if p.is_absolute() else root / p for p in map(Path, entries) if p.suffix == ".json"]
    files += [d.parent / GRID_FILE for d in dirs]
    out: dict[str, str] = {}
    for f in dict.fromkeys(files):
        if not f.is_file():
            continue
        try:
            recorded = json.loads(f.read_text(encoding="utf-8")).get("aliases")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(recorded, dict):
            out.update({one_line(k): one_line(v) for k, v in recorded.items() if v})  # names: one line, as _run_info's
    return out


def _given(run: Any, key: str) -> Any:
    """``run[key]`` from a row of the runs frame, None where missing or NA: a column that holds text
    for some runs holds NaN (truthy) for the others, not None."""
    value = run.get(key)
    return None if value is None or pd.isna(value) else value


def _is_complete(run: dict[str, Any]) -> bool:
    """Finished (``finished_at`` set, not stopped early) with a record for every planned item.

    A run without a manifest (no plan known) counts as complete when it has records.
    """
    planned = _given(run, "n_planned")
    if not run.get("manifest"):
        return int(run.get("n_records") or 0) > 0
    finished = bool(_given(run, "finished_at")) and not _given(run, "stopped")
    return finished and (planned is None or int(run.get("n_records") or 0) >= int(planned))


def unfinished_reason(run: Any) -> str:
    """``"120 of 2061 planned items; stopped: max cost"`` for a run that did not finish."""
    planned = _given(run, "n_planned")
    done = int(run.get("n_records") or 0)
    parts = [f"{done} of {int(planned)} planned items" if planned is not None else f"{done} items"]
    if _given(run, "stopped"):
        parts.append(f"stopped: {one_line(run.get('stopped'))}")
    elif not _given(run, "finished_at"):
        parts.append("never marked finished")
    return "; ".join(parts)


def _empty_runs() -> pd.DataFrame:
    cols = [
        "run_id",
        "path",
        "model",
        "effort",
        "config",
        "name",
        "thinking",
        "lang",
        "judge_model",
        "synthetic",
        "n_planned",
        "n_records",
        "n_error",
        "n_refused",
        "n_filtered",
        "n_judged",
        "n_superseded",
        "n_lines",
        "complete",
        "seed",
        "temperature",
    ]
    return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})


def _pick_latest(runs_df: pd.DataFrame, notes: list[str]) -> list[int]:
    """Indices of the runs to keep: the latest per model × effort × lang."""
    order = runs_df.assign(
        _fin=runs_df["finished_at"].fillna(""), _start=runs_df["started_at"].fillna(""), _name=runs_df["path"]
    ).sort_values(["_fin", "_start", "_name"])
    keep: list[int] = []
    for _, grp in order.groupby(["model", "effort", "lang"], sort=False, dropna=False):
        idx = grp.index.tolist()
        keep.append(idx[-1])
        kept = Path(runs_df.at[idx[-1], "path"]).name
        lang = _given(runs_df.loc[idx[-1]], "lang") or "no language recorded"
        for dropped in idx[:-1]:
            name = Path(runs_df.at[dropped, "path"]).name
            changed = _setting_changes(runs_df, dropped, idx[-1])
            if changed:  # same model, effort and language, but not the same run: say what differs
                notes.append(f"`{name}` has the model, effort and language of the later run `{kept}` "
                             f"({runs_df.at[dropped, 'config']} / {lang}) but another "
                             f"setting ({changed}): only `{kept}` is analysed; analyse the other in its own report.")
            else:
                notes.append(f"`{name}` duplicates {runs_df.at[dropped, 'config']} / {lang}; "
                             f"kept the later run `{kept}`.")
    return sorted(keep)


#: the run settings besides model, effort and language that make two runs different configurations
DISTINCT_SETTINGS = ("base_url", "provider", "api", "temperature", "seed", "max_tokens", "prompts", "items_spec",
                     "judge_model", "judge_protocol")


def _setting_changes(runs_df: pd.DataFrame, a: int, b: int) -> str:
    """``"base_url X → Y, temperature 0 → 0.7"``: the settings two runs' manifests give differently
    (a setting either manifest leaves out is not compared)."""
    parts = []
    for col in DISTINCT_SETTINGS:
        if col not in runs_df.columns:
            continue
        x, y = runs_df.at[a, col], runs_df.at[b, col]
        if x is None or y is None or pd.isna(x) or pd.isna(y) or x == y:
            continue
        parts.append(f"{col} {x} → {y}")
    return ", ".join(parts)


def main_subset(responses: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The creative subset the paper reports on: drop items annotated ``factual``.

    Items with no ``reasoning_type`` are kept. Returns the subset and the number dropped.
    """
    factual = reasoning_is(responses, "factual")
    return responses.loc[~factual], int(factual.sum())


def reasoning_is(responses: pd.DataFrame, kind: str) -> np.ndarray:
    """Boolean mask: ``reasoning_type`` equals ``kind`` case- and space-insensitively."""
    rt = responses["reasoning_type"].astype("string").str.strip().str.lower()
    return rt.eq(kind.lower()).fillna(False).to_numpy(dtype=bool)
