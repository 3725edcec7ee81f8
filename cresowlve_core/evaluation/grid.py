"""Grid runs: models × efforts × languages from one YAML file, then the analysis report.

``cresowlve grid CONFIG.yaml`` evaluates every cell of the grid into its own run directory
(``<runs_dir>/<model>[-<effort>]__<lang>``), a bounded number of cells at once, with one progress
bar over all items. It resumes like a single run: a finished cell is skipped, an unfinished one
continues. It writes ``<runs_dir>/grid.json`` (every cell, its status and summary line, and the
display names that ``03_analysis`` uses to match the paper's rows) and then renders
``03_analysis`` over the grid unless ``report: false``.

A config (see ``configs/paper_table1.yaml`` for the paper's 18 configurations)::

    name: my-grid
    items: demo                 # demo | hub:{lang} | a path; "{lang}" is replaced per language
    langs: [en, ru]
    parallel: 2                 # cells evaluated at once
    retry_truncated: false      # true: re-ask the answers cut off by the token limit, if options.max_tokens is larger
    runs_dir: data/runs/grid/my-grid   # default: data/runs/grid/<name>
    options: {concurrency: 8, max_cost: 5}       # ClientOptions for every cell
    judge: {model: gpt-4o, base_url: https://api.openai.com/v1, api_key_env: OPENAI_API_KEY}
    # the judge takes the model options too: provider, api, effort, max_tokens, temperature, extra_body,
    # and max_cost: its own budget per cell (options.max_cost caps the model under test)
    models:
      - model: gpt-4.1-mini
        label: GPT-4.1-mini     # the paper's name, for the Table-1 overlay
        base_url: https://api.openai.com/v1
        api_key_env: OPENAI_API_KEY
        provider: openai        # profile (docs/providers.md); default: detected from the base URL
        efforts: [null]         # null = no effort (chain-of-thought prompt)
        options: {}             # per-model ClientOptions overrides
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator
from tqdm.auto import tqdm

from cresowlve_core import argtypes, outfiles
from cresowlve_core.evaluation.config import finite_temperature
from cresowlve_core.evaluation.runner import (
    EvalConfig,
    eval_stages,
    evaluate_async,
    load_eval_items,
    sent_now,
    summary_line,
    truncation_warning,
)
from cresowlve_core.evaluation.scoring import JudgeProtocol
from cresowlve_core.failures import InputError, UsageError
from cresowlve_core.items import Item, Lang
from cresowlve_core.llm.options import finite_extra_body
from cresowlve_core.llm.profiles import get_profile
from cresowlve_core.llm.types import EFFORTS
from cresowlve_core.paths import runs_dir
from cresowlve_core.runtime import (
    INTERRUPTED,
    STOP_ERRORS,
    SUMMARY,
    ClientOptions,
    ResumeError,
    RunDirError,
    now_iso,
    stop,
    stop_reason,
)
from cresowlve_core.runtime.provenance import read_git_sha
from cresowlve_core.text import config_name, slug
from cresowlve_core.untrusted import one_line

GRID_FILE = "grid.json"
#: how a grid re-asks the answers cut off by the token limit (:func:`~cresowlve_core.evaluation.runner.truncation_warning`)
TRUNCATED_RETRY = "a larger options.max_tokens and retry_truncated: true in the grid config"


def _known_effort(effort: str | None) -> str | None:
    """An effort the command line's ``--effort`` takes (:data:`EFFORTS`, in any case: ``High`` is
    ``high``), or None (no effort)."""
    if effort is None:
        return None
    if effort.lower() not in EFFORTS:
        raise ValueError(f"unknown effort {effort!r}; one of {', '.join(EFFORTS)}, or null for none")
    return effort.lower()


def _base_url(url: str | None) -> str | None:
    """A base URL as ``--base-url`` takes it (:func:`~cresowlve_core.argtypes.http_url`): http(s) with a host,
    without an API path the client appends, surrounding whitespace stripped; never echoed with its credentials."""
    if url is None:
        return None
    try:
        return argtypes.http_url(url)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


def _named_model(model: str) -> str:
    """A model's name (:func:`~cresowlve_core.argtypes.model_name_problem`) that can name its run
    directories (:func:`~cresowlve_core.text.slug`)."""
    if (problem := argtypes.model_name_problem(model)) is not None:
        raise ValueError(problem)
    slug(model)  # UnsafeNameError (a ValueError) for "." and ".."
    return model


def _named_judge(model: str) -> str:
    """A judge's model name (a blank one would leave every cell unjudged, run after run)."""
    if (problem := argtypes.model_name_problem(model)) is not None:
        raise ValueError(problem + (" (leave out judge: for a grid without a judge)" if not model.strip() else ""))
    return model


def _key_variable(name: str | None) -> str | None:
    """A key variable's name, not blank: an empty one was read as none, and the requests went without a key."""
    if name is not None and not name.strip():
        raise ValueError("must not be empty (leave it out for a server that takes no key)")
    return name


def _known_provider(provider: str | None) -> str | None:
    if provider is not None:
        get_profile(provider)  # UnknownProvider (a ValueError) names the known ones
    return provider


class GridJudge(BaseModel):
    """The judge of every cell: any model, with the same options as a model under test."""

    model_config = ConfigDict(extra="forbid")
    model: str
    base_url: str | None = None  # default: each model's
    api_key_env: str | None = None
    protocol: JudgeProtocol = "nonce-verdict"  # or "paper": the paper's bare yes/no judge
    provider: str | None = None  # profile (llm/profiles.py); default: detected from the base URL
    api: Literal["chat", "responses", "completions"] | None = None
    effort: str | None = None
    max_tokens: int | None = Field(None, ge=1)  # default: 512, or 8192 for a thinking judge
    temperature: float | Literal["protocol", "default"] | None = "protocol"  # "default": none sent
    extra_body: dict[str, Any] = Field(default_factory=dict)
    max_cost: float | None = Field(None, ge=0, allow_inf_nan=False)  # USD of new judge calls per cell; options.max_cost caps the model

    _effort = field_validator("effort")(_known_effort)
    _provider = field_validator("provider")(_known_provider)
    _temperature = field_validator("temperature")(finite_temperature)
    _api_key_env = field_validator("api_key_env")(_key_variable)
    _extra_body = field_validator("extra_body")(finite_extra_body)
    _model = field_validator("model")(_named_judge)
    _base_url = field_validator("base_url")(_base_url)


class GridModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    label: str | None = None  # display name matched against the paper's rows
    base_url: str
    api_key_env: str | None = None
    provider: str | None = None  # profile (llm/profiles.py); default: detected from the base URL
    # at least one (null: no effort): an empty list would leave the model out of the grid
    efforts: list[str | None] = Field(default_factory=lambda: list[str | None]([None]), min_length=1)
    api: Literal["chat", "responses", "completions"] | None = None
    prompt_style: Literal["cot", "plain"] | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # read as ClientOptions by load_grid

    _provider = field_validator("provider")(_known_provider)
    _base_url = field_validator("base_url")(_base_url)
    _model = field_validator("model")(_named_model)
    _api_key_env = field_validator("api_key_env")(_key_variable)

    @field_validator("efforts")
    @classmethod
    def _known_efforts(cls, v: list[str | None]) -> list[str | None]:
        return [_known_effort(effort) for effort in v]


class GridConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    items: str = "demo"
    langs: list[Lang] = Field(default_factory=lambda: ["en", "ru"], min_length=1)  # type: ignore[arg-type]
    limit: int | None = Field(None, ge=1)
    #: re-ask the answers cut off by the token limit with options.max_tokens, when it is larger than theirs
    retry_truncated: bool = False
    parallel: int = Field(2, ge=1)
    runs_dir: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    judge: GridJudge | None = None
    models: list[GridModel]
    report: bool = True

    @field_validator("name")
    @classmethod
    def _usable_name(cls, v: str) -> str:
        slug(v)  # UnsafeNameError (a ValueError) for "", "." and "..": the grid's folder would be runs/ itself
        return v

    @field_validator("models")
    @classmethod
    def _some_models(cls, v: list[GridModel]) -> list[GridModel]:
        if not v:
            raise InputError("a grid needs at least one model")
        return v

    @field_validator("models")
    @classmethod
    def _one_name_per_configuration(cls, v: list[GridModel]) -> list[GridModel]:
        """Two models whose configurations would have one name (a label shared, or a label that is another
        model's name) would be one configuration in every table of the analysis and in ``cresowlve runs``."""
        aliases = {m.model: m.label for m in v if m.label}
        named: dict[str, set[str]] = {}
        for m in v:
            for effort in m.efforts:
                named.setdefault(config_name(m.model, effort, aliases), set()).add(m.model)
        if shared := {name: models for name, models in named.items() if len(models) > 1}:
            name, models = next(iter(shared.items()))
            raise ValueError(f"the configurations of {', '.join(sorted(models))} would all be named {name!r} "
                             "(a label is the name of one model's configurations): give each its own label")
        return v

    def directory(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir else runs_dir() / "grid" / slug(self.name)


class Cell(BaseModel):
    """One run of the grid."""

    model: GridModel
    effort: str | None
    lang: Lang
    run_dir: Path

    @property
    def name(self) -> str:
        return self.run_dir.name

    def eval_config(self, grid: GridConfig) -> EvalConfig:
        options = ClientOptions(**{**grid.options, **self.model.options,
                                   **({"provider": self.model.provider} if self.model.provider else {})})
        judge = grid.judge
        judge_opts: dict[str, Any] = {}
        if judge:
            judge_opts = dict(judge_provider=judge.provider, judge_api=judge.api, judge_effort=judge.effort,
                              judge_max_tokens=judge.max_tokens, judge_extra_body=judge.extra_body, judge_max_cost=judge.max_cost,
                              judge_temperature=None if judge.temperature == "default" else judge.temperature)
        return EvalConfig(
            model=self.model.model, base_url=self.model.base_url, api_key_env=self.model.api_key_env,
            run_dir=str(self.run_dir), items=grid.items.replace("{lang}", self.lang), lang=self.lang,
            effort=self.effort, api=self.model.api, prompt_style=self.model.prompt_style, limit=grid.limit,
            retry_truncated=grid.retry_truncated,
            judge_model=judge.model if judge else None, judge_protocol=judge.protocol if judge else "nonce-verdict",
            judge_base_url=(judge.base_url or self.model.base_url) if judge else None,
            # the judge's own key variable; else the model's when the judge shares its base URL
            judge_api_key_env=(judge.api_key_env or (None if judge.base_url else self.model.api_key_env)) if judge else None,
            options=options, **judge_opts,
        )


class _GridLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: PyYAML keeps the last one and drops
    the first without a word (a second ``options:`` would drop the first one's ``max_cost``)."""


def _mapping_once(loader: _GridLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    lines: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *defaults": keys written beside it override its keys
            continue
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        try:
            if key in lines:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (lines {lines[key]} and {line}); keep one", key_node.start_mark)
        except TypeError:  # an unhashable key: construct_mapping says so
            continue
        lines[key] = line
    return loader.construct_mapping(node, deep=deep)


_GridLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_once)


def load_grid(path: str | Path) -> GridConfig:
    """Read and validate a grid config (one clear error naming the file otherwise)."""
    p = Path(path)
    try:
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=_GridLoader)  # a SafeLoader
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at byte {exc.start}); "
                         "save the grid config as UTF-8") from None
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{p}: cannot read the grid config: {str(exc).splitlines()[0]}") from exc
    if not isinstance(raw, dict):
        raise InputError(f"{p}: a grid config is a YAML mapping (name, items, langs, models, ...)")
    from pydantic import ValidationError

    try:
        grid = GridConfig.model_validate(raw)
    except ValidationError as exc:
        raise GridConfigError(p, [_problem(e) for e in exc.errors()]) from exc
    if problems := _options_problems(grid):
        raise GridConfigError(p, problems)
    return grid


def _options_problems(grid: GridConfig) -> list[str]:
    """Every ``options`` block (the grid's, each model's) read as :class:`ClientOptions`, as its cells
    will read it: an unknown key or a bad value, one ``where: what`` each."""
    from pydantic import ValidationError

    blocks = [("options", grid.options), *((f"models.{i}.options", m.options) for i, m in enumerate(grid.models))]
    problems: list[str] = []
    for where, block in blocks:
        try:
            ClientOptions.model_validate(block)
        except ValidationError as exc:
            problems += [_problem(e, root=ClientOptions, prefix=where) for e in exc.errors()]
    return problems


class GridConfigError(UsageError, ValueError):
    """A grid config with bad keys or values: one line per problem (``problems``)."""

    def __init__(self, path: Path, problems: list[str]):
        self.problems = problems
        super().__init__(f"{path}: invalid grid config ({len(problems)} problem(s)): " + "; ".join(problems))

    def lines(self) -> list[str]:
        head = str(self).split(": invalid grid config", 1)[0]
        return [f"{head}: invalid grid config ({len(self.problems)} problem(s)):", *(f"  {x}" for x in self.problems)]


def _problem(error: Any, root: Any = GridConfig, prefix: str = "") -> str:
    """One pydantic error of ``root`` (read at ``prefix`` of the config) as ``where: what`` (an
    unknown key with the nearest known one)."""
    import difflib

    loc = [str(x) for x in error.get("loc", ())]
    where = ".".join([prefix, *loc] if prefix else loc) or "config"
    if error.get("type") == "extra_forbidden" and loc:
        model: Any = root
        for part in loc[:-1]:  # the model the unknown key sits in (models.0 -> ModelSpec)
            field = getattr(model, "model_fields", {}).get(part)
            if field is not None:
                inner = [a for a in getattr(field.annotation, "__args__", ()) if hasattr(a, "model_fields")]
                model = inner[0] if inner else getattr(field.annotation, "model_fields", None) and field.annotation
        known = list(getattr(model, "model_fields", {})) if model else []
        close = difflib.get_close_matches(loc[-1], known, n=1)
        return f"{where}: unknown key" + (f" (did you mean {close[0]!r}?)" if close else "") + \
            (f"; known: {', '.join(known)}" if known and not close else "")
    if error.get("type") == "missing":
        return f"{where}: required"
    return f"{where}: {error.get('msg')}"


def cells(grid: GridConfig) -> list[Cell]:
    out = []
    for m in grid.models:
        for effort in m.efforts:
            stem = slug(m.model) + (f"-{effort}" if effort else "")
            for lang in grid.langs:
                out.append(Cell(model=m, effort=effort, lang=lang, run_dir=grid.directory() / f"{stem}__{lang}"))
    names = [c.name for c in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"two cells of the grid would share a run directory: {', '.join(dupes)}")
    return out


def cell_finished(grid: GridConfig, cell: Cell, items: CellItems | None = None) -> bool:
    """A cell whose summary shows every item answered (no error, none left, not stopped) and, for a
    judged cell, every answer judged (no judge error, none left), run with the configuration the grid
    config now gives it (:func:`holds_its_configuration`): a finished cell whose settings or limit
    were edited since is run again, so that its evaluation continues it (a larger limit) or refuses
    it naming what changed, never skipped as done."""
    s = _read_summary(cell)
    if s is None:
        return False
    done = not s.get("stopped") and s.get("n_error") == 0 and s.get("n_not_run") == 0 and not work_left(s)
    if grid.retry_truncated and s.get("n_truncated"):  # its evaluation re-asks those a larger budget may finish
        return False
    return done and holds_its_configuration(grid, cell, items or CellItems())


def holds_its_configuration(grid: GridConfig, cell: Cell, items: CellItems) -> bool:
    """Whether the cell's run directory holds a run of the cell's configuration: its manifest has the
    same resume identity (:func:`~cresowlve_core.runtime.manifest.identity_changes`: model, endpoint,
    items, prompts, the settings that shape an answer, the judge), the same item limit and as many
    items as its items file gives now (``items``: the grid's loader; a file that grew since is run again,
    so that its evaluation asks the new items)."""
    from cresowlve_core.evaluation.runner import build_manifest
    from cresowlve_core.runtime.manifest import Manifest, identity_changes

    try:
        old = Manifest.model_validate_json((cell.run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none, or one that cannot be read: the cell's evaluation says why
        return False
    cfg = cell.eval_config(grid)
    if old.limit != cfg.limit:
        return False
    try:
        if old.n_items != len(items(cfg)):
            return False
        new = build_manifest(cfg, old.n_items or 0)
    except Exception:  # noqa: BLE001 - a configuration that cannot run: the cell's evaluation reports it
        return False
    # an items file edited since (its content, where both record it): its evaluation checks each answered item
    if (was := getattr(old, "items_sha256", None)) is not None and was != getattr(new, "items_sha256", None):
        return False
    return not identity_changes(old, new)


#: the status of a cell whose judge replied to every answer but gave no verdict: not resumable work, yet
#: not done (``cresowlve eval`` exits 1 for it)
NO_VERDICTS = "no verdicts"


def judge_gave_no_verdict(summary: dict[str, Any]) -> bool:
    """A judged cell whose every judge reply was unscored (:func:`~cresowlve_core.evaluation.runner.eval_stages`)."""
    return any(stage.get("unparsed") for stage in eval_stages(summary))


def work_left(summary: dict[str, Any]) -> bool:
    """A cell's summary with items errored or not run, or answers its judge errored on or has not judged."""
    return bool(summary.get("n_error") or summary.get("n_not_run") or summary.get("n_judge_error")
                or summary.get("n_judge_not_run"))


async def run_cell(grid: GridConfig, cell: Cell, items: list[Item],
                   on_record: Callable[[dict[str, Any]], None], cfg: EvalConfig | None = None) -> dict[str, Any]:
    """Evaluate one cell (``cfg``: its configuration, by default ``cell.eval_config(grid)``):
    ``{"status", "summary"}``, or ``{"status", "error"}`` when it could not run."""
    await asyncio.to_thread(read_git_sha)  # the manifest's git SHA, read off the event loop (provenance.git_sha)
    try:
        out = await evaluate_async(cfg or cell.eval_config(grid), items, progress=False, on_record=on_record)
        status = "interrupted" if out.stopped == INTERRUPTED else "stopped" if out.stopped else "done"
        return {"status": status, "summary": out.summary}
    except (RunDirError, ResumeError) as exc:  # in use by another process, or of another configuration: nothing sent
        return {"status": "refused", "error": str(exc).splitlines()[0]}
    except Exception as exc:  # noqa: BLE001 - one cell's fatal error must not stop the other cells
        failed = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        if isinstance(exc, STOP_ERRORS):  # a wrong key, model or effort: its stop reason says what to change
            failed["stopped"] = one_line(stop_reason(exc))
        return failed


class CellItems:
    """The items of a grid's cells, loaded once per items spec, language and limits: the cells share
    them (a grid of 18 models in two languages reads its item sets twice, not 36 times, and holds
    them once). A cell does not change the items it is given."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str, int | None, int | None], list[Item]] = {}

    def __call__(self, cfg: EvalConfig) -> list[Item]:
        key = (cfg.items, cfg.lang, cfg.limit, cfg.max_input_chars)
        if key not in self._loaded:
            self._loaded[key] = load_eval_items(cfg)
        return self._loaded[key]


def default_workers() -> int:
    """The cores this process may run on (``--workers``' default)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


async def run_grid_async(grid: GridConfig, *, progress: bool = True) -> dict[str, Any]:
    """Evaluate every unfinished cell (``grid.parallel`` at once) and write ``grid.json``."""
    all_cells = cells(grid)
    items = CellItems()
    todo = [c for c in all_cells if not cell_finished(grid, c, items)]
    loaded = {c.name: items(c.eval_config(grid)) for c in todo}
    bar = tqdm(total=sum(len(v) for v in loaded.values()), desc=f"grid {one_line(grid.name)} ({len(todo)} cells)",
               unit="item", disable=not progress, dynamic_ncols=True)
    slots = asyncio.Semaphore(grid.parallel)
    results: dict[str, dict[str, Any]] = {}

    async def one(cell: Cell) -> None:
        try:
            async with slots:
                if stop.requested() is not None:  # Ctrl-C / SIGTERM: the cells not started are skipped
                    return
                results[cell.name] = await run_cell(grid, cell, loaded[cell.name], lambda _r: bar.update(1))
        except asyncio.CancelledError:  # waiting for a slot when the grid was stopped
            if stop.requested() is None:
                raise

    try:
        await asyncio.gather(*(one(c) for c in todo))
    except asyncio.CancelledError:  # the stop (runtime/stop.py): every cell has returned; write grid.json
        if stop.requested() is None:
            raise
    finally:
        bar.close()
    out = write_grid_summary(grid, all_cells, results)
    return {**out, "stopped": INTERRUPTED} if stop.requested() is not None else out


def cell_line(summary: dict[str, Any], *, ran_now: bool) -> str:
    """A cell's summary line and what this grid run did for it. Its cost is the run directory's (answers
    of earlier runs and the cache included), so the items sent now and the calls the cache answered are
    named beside it; a cell finished before this grid run sent nothing."""
    return f"{summary_line(summary)} | {sent_now(summary) if ran_now else 'finished before this grid run: nothing sent'}"


def write_grid_summary(grid: GridConfig, all_cells: list[Cell], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    aliases = {m.model: m.label for m in grid.models if m.label}
    rows = []
    items = CellItems()
    for c in all_cells:
        res = results.get(c.name)
        summary = res.get("summary") if res else _read_summary(c)
        if res is None and summary is not None and not holds_its_configuration(grid, c, items):
            summary = None  # not reached (a stop) and of another configuration: not this cell's work
        status = res["status"] if res else ("done" if summary else "not_run")
        if summary and work_left(summary) and status == "done":
            status = "incomplete"
        elif summary and status == "done" and judge_gave_no_verdict(summary):
            status = NO_VERDICTS
        rows.append({"cell": c.name, "config": config_name(c.model.model, c.effort, aliases), "model": c.model.model,
                     "label": c.model.label, "effort": c.effort, "lang": c.lang,
                     "run_dir": str(c.run_dir), "status": status, "skipped": res is None and summary is not None,
                     "error": res.get("error") if res else None,
                     # why the cell stopped early and what to change (runtime.errors.stop_reason), if it did
                     "stopped": (res or {}).get("stopped") or (summary or {}).get("stopped"),
                     # answers the model refused or its provider filtered (in n, never correct)
                     "n_refused": summary.get("n_refused", 0) if summary else None,
                     "n_filtered": summary.get("n_filtered", 0) if summary else None,
                     # more than 2% of its answers cut off by the token limit (scored as wrong), else None
                     "truncation_warning": truncation_warning(summary, TRUNCATED_RETRY) if summary else None,
                     "line": cell_line(summary, ran_now=res is not None) if summary else None})
    out = {"name": grid.name, "written_at": now_iso(), "cells": rows,
           "aliases": aliases,
           "n_cells": len(rows), "n_done": sum(r["status"] == "done" for r in rows)}
    grid.directory().mkdir(parents=True, exist_ok=True)
    outfiles.write_json(grid.directory() / GRID_FILE, out)
    return out


def _read_summary(cell: Cell) -> dict[str, Any] | None:
    """The cell's ``summary.json``, or None when it has none or none that can be read (cut short, edited
    by hand: the cell is then run again, which writes it anew)."""
    try:
        summary = json.loads((cell.run_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None
