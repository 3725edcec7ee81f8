"""A whole build: the steps in order over one build directory, and the notebook's sections.

``Build(config)`` holds the candidates between steps; each method runs one step, writes what it
produced under the build directory, shows its counts (in a notebook) and returns a JSON-able
summary with counts in and out. ``run_build(config)`` runs them all (the ``cresowlve build``
command). Re-running a build resumes every model step from its records; a build reads its inputs
and never modifies them.

Build directory (default ``data/builds/<name>/``)::

    build.json                 the configuration and, at the end, the funnel
    collect/report.json        sources, duplicates, unusable blocks
    steps/<step>/              one run directory per model step (manifest.json, records.jsonl)
    review/queue.jsonl         the human-validation queue; decisions__<reviewer>.jsonl
    review/agreement_queue.jsonl, annotations__<reviewer>.jsonl
    export/                    see :mod:`cresowlve_core.construction.export`
"""

from __future__ import annotations

import contextlib
import json
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cresowlve_core import outfiles, paths
from cresowlve_core.construction import agreement as A
from cresowlve_core.construction import review as R
from cresowlve_core.construction.collect import collect
from cresowlve_core.construction.domains import DEFAULT_MIN_SIMILARITY, consolidate_domains, load_mapping
from cresowlve_core.construction.export import data_card, export_build, funnel_rows, n_unparseable, n_unusable
from cresowlve_core.construction.llm_steps import (
    ANNOTATION_STEPS,
    LLM_STEPS,
    STEPS,
    StepClient,
    StepContext,
    StepModel,
    annotate_step,
    filter_step,
    is_parsed,
    no_usable_value,
    open_step_clients,
    planned_step_clients,
    refuse_changed_collection,
    refuse_changed_steps,
    translate_step,
)
from cresowlve_core.construction.parsers import check_cultures
from cresowlve_core.construction.records import Candidate, StepOutput
from cresowlve_core.construction.vocab import CONCEPTS, DOMAIN_GROUPS
from cresowlve_core.exitcodes import sent_phrase
from cresowlve_core.failures import InputError, StoppedError, UsageError
from cresowlve_core.llm.types import CONCURRENCY
from cresowlve_core.runtime import INTERRUPTED, ClientOptions, RunDir, run_coro, stop
from cresowlve_core.runtime.outcomes import outcome_note, served_note
from cresowlve_core.text import slug


class BuildConfig(BaseModel):
    """Everything a build depends on (recorded in ``build.json``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = "demo"
    build_dir: str | None = Field(None, description="default: data/builds/<name>")
    sources: list[str] | None = Field(None, description="packs, folders of packs, dataset files or hub:ru; "
                                                        "default: the shipped packs")
    per_level: int | None = Field(None, ge=1, description="stratified sample: items per difficulty 1-5 (None: all)")
    limit: int | None = Field(None, ge=1, description="keep a seeded subset of this many after sampling (demo builds)")
    seed: int = 0
    model: str | None = Field(None, description="model of every step unless `models` names another")
    base_url: str | None = Field(None, description="None: the embedded Gemma 3 270M")
    api_key_env: str | None = None
    models: dict[str, dict[str, str | None]] = Field(default_factory=dict,
                                                     description="step -> {model, base_url, api_key_env}")
    max_tokens: dict[str, int] = Field(default_factory=dict, description="step -> output budget")
    concurrency: int = CONCURRENCY
    max_cost: float | None = None
    cache: bool = True
    cache_path: str | None = None
    mapping_file: str | None = None
    min_similarity: float = DEFAULT_MIN_SIMILARITY
    apply_review: bool = True
    agreement_n: int = 50
    max_input_chars: int | None = Field(None, ge=1, description="the input size limit of a question (None: 64 KB)")
    embedded: bool = Field(False, description="the base URL serves the embedded model (the main job): banner on")
    archive_changed: bool = Field(False, description="a step run of another prompt version or model is moved to "
                                                     "steps/archive/ and run afresh, instead of refused (the main job)")

    @property
    def path(self) -> Path:
        return Path(self.build_dir) if self.build_dir else paths.data_dir() / "builds" / slug(self.name)

    def step_models(self) -> dict[str, StepModel]:
        default = StepModel(self.model, self.base_url, self.api_key_env)
        out = {"default": default}
        for step, spec in self.models.items():
            if step not in LLM_STEPS:
                raise InputError(f"unknown step {step!r} in models; steps: {', '.join(LLM_STEPS)}")
            out[step] = StepModel(spec.get("model"), spec.get("base_url"), spec.get("api_key_env"))
        return out

    def client_options(self) -> ClientOptions:
        return ClientOptions(concurrency=self.concurrency, max_cost=self.max_cost, cache=self.cache,
                             cache_path=self.cache_path, seed=self.seed)


def _summary_table(summary: dict[str, Any]) -> Any:
    """A step's summary as a two-column table (nested counts as ``key: value`` lists), not a JSON dump."""
    import pandas as pd

    def cell(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k}: {cell(x)}" for k, x in v.items()) or "—"
        if isinstance(v, list):
            return ", ".join(cell(x) for x in v) or "—"
        return "—" if v is None else str(v)

    rows = [(k.replace("_", " "), cell(v)) for k, v in summary.items() if k != "step"]
    return pd.DataFrame(rows, columns=["field", "value"]).set_index("field")


def _display(obj: Any) -> None:
    try:
        from IPython import get_ipython

        if get_ipython() is None:
            return
        from IPython.display import Markdown, display

        from cresowlve_core.untrusted import markdown

        display(Markdown(markdown(obj)) if isinstance(obj, str) else obj)
    except ImportError:  # pragma: no cover - IPython ships with the project
        return


class BuildStopped(StoppedError, RuntimeError):
    """A step stopped early (a fatal provider error such as a rejected key, ``max_cost``, an
    interrupt); the later steps are refused until the build is re-run (it resumes)."""

    def __init__(self, step: str, reason: str):
        super().__init__(f"build stopped at step {step!r}: {reason}; finished work is saved, re-run to resume")
        self.step, self.reason = step, reason


class BuildEmpty(UsageError, ValueError):
    """The sources hold no usable question: nothing to build (``cresowlve build`` exits 2)."""


def _empty_message(report: dict[str, Any]) -> str:
    """Which sources gave nothing, and why (a pack flag such as ``empty`` or ``no_questions``)."""
    parts = []
    for src in report.get("sources", []):
        files = src.get("files") or []
        flags = sorted({f for r in files for f in (r.get("pack_flags") or [])})
        what = f"{src.get('n', 0)} blocks" + (f", pack flags: {', '.join(flags)}" if flags else "")
        parts.append(f"{src.get('source')} ({what})")
    unusable = report.get("unusable", [])
    reasons = Counter("not in Russian" if "not_russian" in flags else "no Russian view" if "no_ru_view" in flags
                      else "no question or no answer" for flags in (u.get("flags") or [] for u in unusable))
    why = ", ".join(f"{n} {reason}" for reason, n in reasons.most_common())
    return (f"no usable question in {'; '.join(parts) or 'the sources'}"
            + (f"; {len(unusable)} unusable block(s) ({why})" if unusable else "")
            + ": nothing to build, nothing was sent")


class Build:
    """One build in progress (see the module docstring). Use as a context manager, or call
    :meth:`open` / :meth:`close` (a notebook keeps it open across cells). After a step stops
    early (:attr:`stopped`), :meth:`run_all` raises :class:`BuildStopped`; a later step called on
    its own (a notebook's cell) is skipped and says so, and :meth:`export` records where the build
    stopped instead of exporting it (the report then exits as ``cresowlve build`` would)."""

    def __init__(self, config: BuildConfig, *, progress: bool = True, clients: dict | None = None):
        self.config = config
        self.path = config.path
        self.path.mkdir(parents=True, exist_ok=True)
        self.progress = progress
        self.cands: list[Candidate] = []
        self.steps: dict[str, dict[str, Any]] = {}
        self.funnel: dict[str, int] = {}
        self._clients = clients
        self._stack = contextlib.ExitStack()
        self._finalizer = weakref.finalize(self, self._stack.close)
        self.ctx: StepContext | None = None
        self._opened = False
        self.stopped: BuildStopped | None = None
        self.agreement_result: dict[str, Any] | None = None

    # ---- lifecycle

    def open(self) -> Build:
        """Ready the build. A step run directory of another configuration is refused here, before
        anything runs. The step models (and the embedded server, when a step runs on it) start
        with the first step that calls one, so that collecting, which may refuse the sources,
        never starts a model."""
        self._opened = True
        if self._clients is not None:
            self._open_clients()
        else:
            with planned_step_clients(self.config.step_models(), self.config.client_options()) as planned:
                refuse_changed_steps(self._context(planned))
        return self

    def _context(self, clients: dict[str, StepClient]) -> StepContext:
        return StepContext(self.path, clients, self.config.client_options(), dict(self.config.max_tokens),
                           items_tag=f"build:{self.config.name}", limit=self.config.limit, progress=self.progress,
                           archive_changed=self.config.archive_changed)

    def _open_clients(self) -> StepContext:
        clients = self._clients
        if clients is None:
            clients = self._stack.enter_context(open_step_clients(self.config.step_models(), self.config.client_options()))
        self.ctx = self._context(clients)
        self._write_json("build.json", {"config": self.config.model_dump(), "models": self.models()})
        return self.ctx

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Build:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def embedded(self) -> bool:
        """A step runs (or will run) on the embedded model: before the step models start, every
        step whose model has no base URL will."""
        if self.ctx is not None:
            return self.config.embedded or self.ctx.embedded
        models = self.config.step_models()
        return self.config.embedded or any(models.get(s, models["default"]).base_url is None for s in LLM_STEPS)

    def models(self) -> dict[str, dict[str, Any]]:
        """Step -> model, base URL, key variable name, embedded?, prompt version."""
        if self.ctx is None:
            return {}
        return {s: {"model": c.model, "base_url": c.base_url, "api_key_env": c.api_key_env, "embedded": c.embedded,
                    "prompt": STEPS[s].prompt_tags(c.endpoint)[0]} for s, c in self.ctx.clients.items()}

    def _write_json(self, rel: str, data: Any) -> None:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        outfiles.write_json(p, data)

    def _guard(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def _record(self, out: StepOutput) -> dict[str, Any]:
        if out.stopped:
            self.stopped = BuildStopped(out.name, out.stopped)
        self.cands = out.kept
        summary = out.summary()
        self.steps[out.name] = summary
        self._write_json("steps_summary.json", self.steps)
        _display(f"**{out.name}**: {summary['n_in']} in → {summary['n_out']} out"
                 + (f" ({summary['n_removed']} removed)" if summary["n_removed"] else "")
                 + (f" — stopped: {out.stopped}" if out.stopped else ""))
        _display(_summary_table(summary))
        return summary

    def _skipped(self, step: str) -> dict[str, Any] | None:
        """After a stop, the summary of ``step`` called on its own: skipped (None: not stopped)."""
        if self.stopped is None:
            return None
        _display(f"**{step}**: skipped — the build stopped at step {self.stopped.step!r}")
        return {"skipped": True, "stopped_at": self.stopped.step}

    def _need_ctx(self) -> StepContext:
        self._guard()
        if self.ctx is None:
            if not self._opened:
                raise RuntimeError("open the build first (Build(config).open() or `with Build(config) as b:`)")
            return self._open_clients()
        return self.ctx

    # ---- steps

    def collect(self) -> dict[str, Any]:
        """Step 1: read, deduplicate, sample. The domain mapping file is read here too: a broken one
        is refused before any model call, not after the annotations."""
        c = self.config
        load_mapping(c.mapping_file)
        out, report = collect(c.sources, per_level=c.per_level, seed=c.seed, limit=c.limit,
                              max_input_chars=c.max_input_chars)
        refuse_changed_collection(self.path, c.limit, [k.id for k in out.kept], c.archive_changed)
        self._write_json("collect/report.json", report)
        self.funnel["collected"] = len(out.kept)
        summary = self._record(out)
        if not out.kept:
            raise BuildEmpty(_empty_message(report))
        return summary

    def filter(self, step: str) -> dict[str, Any]:
        """Step 2 (``needs_material``) or the Russian-specific filter."""
        if (skipped := self._skipped(step)) is not None:
            return skipped
        out = run_coro(filter_step(step, self.cands, self._need_ctx()))
        self.funnel[step] = len(out.removed)
        return self._record(out)

    def translate(self) -> dict[str, Any]:
        if (skipped := self._skipped("translate")) is not None:
            return skipped
        return self._record(run_coro(translate_step(self.cands, self._need_ctx())))

    def review(self) -> dict[str, Any]:
        """Write the review queue; apply the decisions saved so far (if ``apply_review``)."""
        if (skipped := self._skipped("human_validation")) is not None:
            return skipped
        R.write_queue(self.path, self.cands)
        decisions, report = R.load_decisions(self.path)
        n_not_applied = 0 if self.config.apply_review else len(decisions)  # --no-review: saved, left unapplied
        if not self.config.apply_review:
            decisions = {}
        out = R.apply_decisions(self.cands, decisions)
        # decisions for items this build no longer has (a rebuilt build: other sources, sample or filter verdicts)
        n_other = len(set(decisions) - {c.id for c in self.cands})
        out.counts.update({"reviewers": report["reviewers"], "n_conflicts": report["n_conflicts"],
                           "n_undated_conflicts": report["n_undated_conflicts"],
                           "n_decisions_not_in_build": n_other, "n_decisions_not_applied": n_not_applied})
        self.funnel["human_validation"] = len(out.removed)
        self.funnel["final"] = len(out.kept)
        # kept, in "final", with no decision yet or one made on an English view it no longer has
        self.funnel["unreviewed"] = out.counts["by_code"].get("unreviewed", 0) + out.counts["by_code"].get("stale", 0)
        return self._record(out)

    def annotate(self, step: str) -> dict[str, Any]:
        if step not in ANNOTATION_STEPS:
            raise InputError(f"unknown annotation {step!r}; one of {ANNOTATION_STEPS}")
        if (skipped := self._skipped(step)) is not None:
            return skipped
        return self._record(run_coro(annotate_step(step, self.cands, self._need_ctx())))

    def consolidate_domains(self) -> dict[str, Any]:
        if (skipped := self._skipped("consolidate_domains")) is not None:
            return skipped
        out, routes = consolidate_domains(self.cands, self.config.mapping_file,
                                          min_similarity=self.config.min_similarity)
        self._write_json("steps/domain_routes.json", routes)
        return self._record(out)

    def agreement(self) -> dict[str, Any]:
        """Write the seeded agreement sample's queue; score the human annotations saved so far
        against the model's labels (App. B)."""
        if (skipped := self._skipped("agreement")) is not None:
            return skipped
        ids = R.agreement_sample([c.id for c in self.cands], self.config.agreement_n, seed=self.config.seed)
        chosen = [c for c in self.cands if c.id in set(ids)]
        R.write_queue(self.path, chosen, R.AGREEMENT_QUEUE)
        result = agreement_report(chosen, R.load_annotations(self.path), seed=self.config.seed)
        result["n_sample"] = len(chosen)
        self._write_json("agreement.json", result)
        self.agreement_result = result
        from cresowlve_core.construction.export import agreement_coverage

        _display(f"**agreement**: sample of {len(chosen)} written; {result['n_items']} item(s) annotated by every "
                 f"reviewer ({', '.join(result['reviewers']) or 'none yet'}). {agreement_coverage(result)}")
        if result["n_items"]:
            from cresowlve_core.construction.export import agreement_table

            _display(agreement_table(result))
        return result

    def export(self) -> dict[str, Any]:
        """Write the exports and the data card; ``calls_note``: :meth:`calls_note` (the card opens with it).
        A stopped build exports nothing: it writes ``build.json`` with where it stopped, as :meth:`run_all`
        does, and records its calls for the report's exit code."""
        if self.stopped is not None:
            return self._stopped_export(self.stopped)
        res = export_build(self.cands, self.path / "export")
        from cresowlve_core.construction.export import label_coverage, subsets

        coverage = label_coverage([c.to_item() for c in subsets(self.cands)["creative"]])
        self.funnel["creative"] = res["counts"]["creative"]
        self.funnel["factual"] = res["counts"]["factual"]
        self.funnel["untranslated"] = res["counts"]["untranslated"]
        self.funnel["no_reasoning_type"] = res["counts"]["no_reasoning_type"]
        from cresowlve_core.sources.hub import read_published_file

        creative = read_published_file(res["paths"]["creative/en/jsonl"], "en")
        ru = {i.id: i.ru for i in read_published_file(res["paths"]["creative/ru/jsonl"], "ru")}
        creative = [i.model_copy(update={"ru": ru.get(i.id)}) for i in creative]
        notes = []
        if self.embedded:
            from cresowlve_core.banners import banner_text

            notes.append(banner_text("embedded"))
        n_sampled = (self.steps.get("collect") or {}).get("n_sampled")
        if self.config.limit is not None and n_sampled is not None and self.config.limit >= n_sampled:
            notes.append(f"Limit {self.config.limit} at or above the {n_sampled} items sampled: it left none out.")
        elif self.config.limit is not None:
            notes.append(f"Small build: limited to {self.config.limit} items after sampling (seed {self.config.seed}: the "
                         "items of lowest seeded rank, which a larger limit with this seed keeps).")
        if collect_note := self.collect_note():
            collected = self.steps.get("collect") or {}
            sampled = (f" (a stratified sample of {self.config.per_level} per difficulty level, seed {self.config.seed})"
                       if self.config.per_level is not None and collected.get("n_sampled", 0) < collected.get("n_unique", 0)
                       else "")
            listed = ("; the unusable and duplicate ones are listed in `collect/report.json`"
                      if collected.get("n_unusable") or collected.get("n_duplicates") else "")
            notes.append(f"Collected {self.funnel.get('collected')} of {collect_note}{sampled}{listed}.")
        if calls_note := self.calls_note():
            notes.append(f"Incomplete build: {calls_note}; see the model steps below.")
        if withheld := self.withheld_note():
            notes.append(f"No verdict: {withheld} (final answers, not asked again; those items pass the "
                         "filters unlabelled, flagged for review); see the model steps below.")
        from cresowlve_core.exitcodes import STAGES_RECORD, stage_record
        from cresowlve_core.notebook_records import record

        record(STAGES_RECORD, [stage_record(self.calls(), "calls")])  # `cresowlve report 01_construction` exits as `build`
        review = self.steps.get("human_validation", {})
        human = review.get("by_code", {})
        model_steps = {name: s for name, s in self.steps.items() if name in LLM_STEPS}
        card = data_card({"name": self.config.name, "models": self.models(), "review_codes": human,
                          "review_conflicts": review.get("n_conflicts", 0),
                          "review_undated_conflicts": review.get("n_undated_conflicts", 0),
                          "review_not_in_build": review.get("n_decisions_not_in_build", 0),
                          "review_not_applied": review.get("n_decisions_not_applied", 0),
                          "agreement": self.agreement_result, "model_steps": model_steps,
                          "label_coverage": coverage},
                         self.funnel, creative, notes)
        outfiles.write_text(self.path / "export" / "DATA_CARD.md", card)
        self._write_json("build.json", {"config": self.config.model_dump(), "models": self.models(),
                                        "funnel": self.funnel, "steps": self.steps})
        res["data_card"] = str(self.path / "export" / "DATA_CARD.md")
        res["funnel"] = funnel_rows(self.funnel)
        res["calls_note"] = "; ".join(note for note in (calls_note, withheld) if note) or None  # the report's headline
        _display(card)
        return res

    def _stopped_export(self, exc: BuildStopped) -> dict[str, Any]:
        from cresowlve_core.exitcodes import STAGES_RECORD, stage_record
        from cresowlve_core.notebook_records import record

        self._write_stopped(exc)
        record(STAGES_RECORD, [stage_record(self.calls(), "calls")])  # exits 3 (or 130/143), naming the stop
        _display(f"**export**: skipped — {exc}")
        return {"counts": {}, "funnel": funnel_rows(self.funnel), "stopped": str(exc),
                "calls_note": "; ".join(note for note in (str(exc), self.calls_note()) if note)}

    def _write_stopped(self, exc: BuildStopped) -> None:
        """``build.json`` of a build that stopped: the steps so far and where it stopped."""
        self._write_json("build.json", {"config": self.config.model_dump(), "models": self.models(),
                                        "funnel": self.funnel, "steps": self.steps,
                                        "stopped": exc.reason, "stopped_at": exc.step})

    def label_charts(self, top: int = 20) -> Any:
        """The paper's Fig. 2 for the creative subset of the items so far: bar charts of concept,
        domain-group and culture counts (an altair chart; the data card has the same counts as tables)."""
        from cresowlve_core.construction.charts import label_charts
        from cresowlve_core.construction.export import subsets

        return label_charts([c.to_item() for c in subsets(self.cands)["creative"]], top)

    def calls(self) -> dict[str, Any]:
        """The model calls of the steps run so far, in the form of ``exitcodes.stage_exit``: units,
        errored (``llm_error``), not run, the most common error, the calls sent by this run and the
        steps whose output parsed for no item (``unparsed``, ``n_unparsed_steps``; from each step's
        summary.json). The most common error is counted over every step, one message summed."""
        model_steps = [s for name, s in self.steps.items() if name in LLM_STEPS]
        errors: Counter[str] = Counter()
        n_sent = 0
        unparsed = []  # steps whose model output parsed for no item (each "step n_done/n_units")
        rerun = []  # steps that ran items again whose text changed since their record ("step k")
        served: dict[str, dict[str, int]] = {}  # the models the provider said answered, per step (step summary.json's served_models)
        for name in self.steps:
            path = self.path / "steps" / name / "summary.json"
            if name in LLM_STEPS and path.exists():
                step = json.loads(path.read_text(encoding="utf-8"))
                errors.update(step.get("errors") or {})
                n_sent += step.get("n_sent") or 0
                served[name] = step.get("served_models") or {}
                answered = (step.get("n_done") or 0) - step.get("n_refused", 0) - step.get("n_filtered", 0)
                if step.get("n_input_changed"):
                    rerun.append(f"{name} {step['n_input_changed']}")
                if answered > 0 and step.get("n_parsed") == 0:  # refusals are counted, never "unparseable"
                    note = outcome_note(step)
                    # answers cut at the token limit: the step's budget, not the reply's format, may be why
                    if cut := self.steps[name].get("truncated", 0):
                        note = f"{note[:-1]}, {cut} cut at the token limit)" if note else f" ({cut} cut at the token limit)"
                    unparsed.append(f"{name} 0 of {answered} answers parsed{note}")
        stopped = None
        if self.stopped is not None:
            reason = self.stopped.reason
            stopped = INTERRUPTED if reason == INTERRUPTED else f"{self.stopped.step}: {reason}"
        n_error = sum(s.get("llm_error", 0) for s in model_steps)
        n_not_run = sum(s.get("not_run", 0) for s in model_steps)
        n = sum(s["n_in"] for s in model_steps)
        top = errors.most_common(1)
        return {"n_items": n, "n_ok": n - n_error - n_not_run, "n_error": n_error, "n_not_run": n_not_run,
                "top_error": list(top[0]) if top else None, "stopped": stopped, "n_sent": n_sent,
                "unparsed": (f"no model output parsed in {len(unparsed)} of {len(model_steps)} model steps "
                             f"({', '.join(unparsed)})") if unparsed else None,
                "n_unparsed_steps": len(unparsed), "n_model_steps": len(model_steps), "input_changed": rerun,
                "served_models": served}

    def calls_note(self) -> str | None:
        """The model calls that gave no verdict, for the report's headline and the data card: the
        calls that errored or were not run, the steps whose output parsed for no item; None when
        every call answered and every step parsed."""
        calls = self.calls()
        parts = []
        if calls["n_error"] or calls["n_not_run"]:
            parts.append(f"{calls['n_error']} of {calls['n_items']} model calls errored"
                         + (f", {calls['n_not_run']} not run" if calls["n_not_run"] else ""))
        if calls["n_unparsed_steps"]:
            parts.append(f"no model output parsed in {calls['n_unparsed_steps']} of {calls['n_model_steps']} model steps")
        if not parts:
            return None
        return "; ".join(parts) + " (items without a verdict pass the filters unlabelled, flagged for review)"

    def withheld_note(self) -> str | None:
        """The model calls the model refused or the provider filtered (``6 of 48 model calls refused, 4
        filtered``), final answers that the funnel's filters and labels got no verdict from; None when there is none."""
        model_steps = [s for name, s in self.steps.items() if name in LLM_STEPS]
        counts = [(word, sum(s.get(word, 0) for s in model_steps)) for word in ("refused", "filtered")]
        said = [(word, k) for word, k in counts if k]
        if not said:
            return None
        n = sum(s["n_in"] for s in model_steps)
        (first, k), rest = said[0], said[1:]
        return f"{k} of {n} model calls {first}" + "".join(f", {k} {word}" for word, k in rest)

    def collect_note(self) -> str | None:
        """The blocks read that did not become candidates (unusable: no question, no answer, not in
        Russian; repeats of an id; left out by ``per_level`` or ``limit``), or None when every block
        read was collected."""
        c = self.steps.get("collect") or {}
        unusable, duplicates = c.get("n_unusable", 0), c.get("n_duplicates", 0)
        not_sampled = c.get("n_unique", 0) - c.get("n_out", 0)  # left out by --per-level or --limit
        if not unusable and not duplicates and not not_sampled:
            return None
        parts = [f"{n} {what}" for n, what in ((unusable, "unusable"), (duplicates, "duplicate"),
                                               (not_sampled, "not sampled")) if n]
        return f"{c.get('n_read')} read: {', '.join(parts)}"

    def summary_line(self) -> str:
        """The build in one line: the funnel, the unparseable outputs per step, the answers refused,
        filtered or with no usable label per step, the calls sent."""
        f, calls = self.funnel, self.calls()
        collected = f" ({note})" if (note := self.collect_note()) else ""
        funnel = " → ".join(f"{label} {f[key]}" + (collected if key == "collected" else "") for key, label in (
            ("collected", "collected"), ("needs_material", "−needs material"), ("russian_specific", "−Russian-specific"),
            ("human_validation", "−review"), ("final", "final")) if key in f)
        split = f" (creative {f['creative']}, factual {f['factual']})" if "creative" in f else ""
        if f.get("unreviewed"):
            split += f" ({f['unreviewed']} not human-validated)"
        if n_not_applied := (self.steps.get("human_validation") or {}).get("n_decisions_not_applied"):
            split += f" ({n_not_applied} saved review decision(s) not applied: --no-review)"
        bad = [f"{name} {n_unparseable(s)}/{s['n_in']}" for name, s in self.steps.items() if n_unparseable(s)]
        withheld = ""
        for word in ("refused", "filtered", "truncated"):  # truncated: cut at the token limit, read as it is
            if per_step := [f"{name} {s[word]}/{s['n_in']}" for name, s in self.steps.items() if s.get(word)]:
                withheld += f"; {word}: {', '.join(per_step)}"
        if unusable := [f"{name} {n_unusable(s)}/{s['n_in']}" for name, s in self.steps.items() if n_unusable(s)]:
            withheld += f"; no usable label: {', '.join(unusable)}"
        if calls["input_changed"]:  # a source corrected under the same id, a translation a reviewer fixed
            withheld += f"; run again for a changed text: {', '.join(calls['input_changed'])}"
        sent = sent_phrase(calls["n_sent"], calls["n_error"] + calls["n_not_run"],
                           "every call was already in the build directory")
        mixed = "".join(served_note(s, f"{name} answers") for name, s in calls["served_models"].items())
        return (f"build {self.config.name}: {funnel}{split}; unparseable: {', '.join(bad) or 'none'}{withheld}; "
                f"{calls['n_items']} model calls, {sent}; {self.path / 'build.json'}{mixed}")

    def run_all(self) -> dict[str, Any]:
        """Every step in order; returns the export summary with the funnel. Raises
        :class:`BuildStopped` when a step stops early (a fatal error, ``max_cost``, Ctrl-C or
        SIGTERM: :mod:`~cresowlve_core.runtime.stop`), after saving what finished and writing
        ``build.json`` with the steps so far and where it stopped; the later steps are skipped."""
        steps: list[tuple[str, Any]] = [
            ("collect", self.collect), ("needs_material", lambda: self.filter("needs_material")),
            ("russian_specific", lambda: self.filter("russian_specific")), ("translate", self.translate),
            ("review", self.review)]
        for step in ANNOTATION_STEPS:
            steps.append((step, lambda step=step: self.annotate(step)))
            if step == "domains":
                steps.append(("consolidate_domains", self.consolidate_domains))
        steps.append(("agreement", self.agreement))
        try:
            for name, run_step in steps:
                if stop.requested() is not None and self.stopped is None:  # between steps: skip the rest
                    self.stopped = BuildStopped(name, INTERRUPTED)
                self._guard()
                run_step()
            return self.export()
        except BuildStopped as exc:
            self._write_stopped(exc)
            raise


def human_labels(field: str, annotation: R.Annotation) -> list[str]:
    """A reviewer's labels of ``field`` as the model's are compared: cultures normalised by the rule the
    model's pass (:func:`~cresowlve_core.construction.parsers.check_cultures`: ``Russian culture`` is
    ``russian``, ``none`` no culture), so that a spelling is no disagreement."""
    labels = getattr(annotation, field) or []
    return check_cultures(labels)[0] if field == "cultures" else labels


def domains_unmapped(c: Candidate) -> list[str]:
    """The item's free-text domains that no group was found for (:func:`consolidate_domains`)."""
    return list((c.verdicts.get("consolidate_domains") or {}).get("unmapped") or [])


def run_build(config: BuildConfig, *, progress: bool = True) -> dict[str, Any]:
    """Run a whole build (``cresowlve build``), one at a time in its directory; returns the export summary."""
    with RunDir(config.path).lock(), Build(config, progress=progress) as b:
        return b.run_all()


def agreement_report(cands: list[Candidate], annotations: dict[str, dict[str, R.Annotation]], *,
                     n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Human vs model agreement on the items every reviewer annotated: raw agreement and Fleiss'
    kappa for reasoning type; AC1 per label and support-weighted for concepts, domains, cultures.
    Fleiss' kappa and AC1 carry seeded item-bootstrap 95% intervals (``*_ci``: value, low, high,
    n, n_undefined of n_boot, note; see :mod:`cresowlve_core.construction.agreement`)."""
    sample = {c.id for c in cands}
    # labels made on another English view than the item's now (its translation was run again or fixed) are
    # not scored against the model's labels of this one: left out as not labelled, and counted
    views = {c.id: R.view_digest(c.en) for c in cands}
    stale = {r: {i for i, a in annotations[r].items() if i in views and R.is_stale_annotation(a, views[i])}
             for r in annotations}
    annotations = {r: {i: a for i, a in annotations[r].items() if i not in stale[r]} for r in annotations}
    annotated_by = {r: sum(c.id in annotations[r] for c in cands) for r in sorted(annotations)}
    # labels saved for items not in this sample (an earlier sample of a rebuilt build) are counted, not scored;
    # a reviewer with none in this sample is not one of "every reviewer"
    outside = {r: len(set(annotations[r]) - sample) for r in sorted(annotations)}
    reviewers = [r for r, k in annotated_by.items() if k]
    done = [c for c in cands if reviewers and all(c.id in annotations[r] for r in reviewers)]
    out: dict[str, Any] = {"reviewers": reviewers, "n_items": len(done), "annotated_by": annotated_by,
                           "outside_sample": {r: k for r, k in outside.items() if k},
                           "stale": {r: len(ids) for r, ids in sorted(stale.items()) if ids}}
    if not done:
        return out
    typed = [c for c in done if c.reasoning_type and all(annotations[r][c.id].reasoning_type for r in reviewers)]
    ratings = [[c.reasoning_type, *(annotations[r][c.id].reasoning_type for r in reviewers)] for c in typed]
    out["reasoning_type"] = ({"n": len(typed), "raw_agreement": A.raw_agreement(ratings),
                              "fleiss_kappa": A.fleiss_kappa(ratings),
                              "fleiss_kappa_ci": A.interval_json(A.fleiss_kappa_ci(ratings, n_boot=n_boot, seed=seed))}
                             if typed else {"n": 0})
    # left out, and counted: no reasoning type from the model (refused, filtered, unparseable, errored) or from a reviewer
    out["reasoning_type"]["n_no_model_label"] = sum(not c.reasoning_type for c in done)
    out["reasoning_type"]["n_no_human_label"] = len(done) - len(typed) - out["reasoning_type"]["n_no_model_label"]
    for field, vocab in (("concepts", CONCEPTS), ("domains", DOMAIN_GROUPS), ("cultures", None)):
        # an item the model gave no label set for (refused, filtered, unparseable, errored) is left out: an empty
        # set would claim the model saw no label apply
        # (or whose every label was outside the vocabulary: no_usable_value, flagged oov_only)
        labelled = [c for c in done if is_parsed(field, c.verdicts.get(field))
                    and no_usable_value(field, c.verdicts[field]) is None]
        # and, for domains, one with a free-text domain no group was found for: its set of groups is not known
        unmapped = [c for c in labelled if field == "domains" and domains_unmapped(c)]
        labelled = [c for c in labelled if c not in unmapped]
        # and one a reviewer's saved line has no such field for (None, unlike [] for "none applies")
        rated = [c for c in labelled if all(getattr(annotations[r][c.id], field) is not None for r in reviewers)]
        sets = [[getattr(c, field), *(human_labels(field, annotations[r][c.id]) for r in reviewers)] for c in rated]
        out[field] = {**A.multilabel_agreement(sets, vocab, n_boot=n_boot, seed=seed),
                      "n_no_model_label": len(done) - len(labelled) - len(unmapped),
                      "n_no_human_label": len(labelled) - len(rated),
                      **({"n_unmapped": len(unmapped)} if field == "domains" else {})}
        if field == "cultures":
            # free text, scored as typed: a culture not in the known list (a misspelling) is its own label,
            # a disagreement with the model's spelling; named per reviewer, as the model's step counts its own
            unrecognised = {r: sorted({x for c in rated for x in check_cultures(annotations[r][c.id].cultures or [])[2]})
                            for r in reviewers}
            out[field]["unrecognised"] = {r: names for r, names in unrecognised.items() if names}
    return out
