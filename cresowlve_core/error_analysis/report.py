"""The error analysis as one object and the sections of ``notebooks/04_error_analysis.ipynb``.

:func:`analyse` finds the runs (or makes a tiny demo run), collects the wrong answers and labels
them (one ``map_with_resume`` call). Each ``*_section`` displays its tables and charts and returns
a small JSON-serialisable dict the notebook records; none raises on empty input.
"""

from __future__ import annotations

import html
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.error_analysis import agreement as agr
from cresowlve_core.error_analysis.annotation import (
    SAMPLE_FILE,
    AnnotationStore,
    annotation_panel,
    annotation_sample,
    read_annotations,
    write_sample,
)
from cresowlve_core.error_analysis.distribution import (
    N_PERM,
    UNIT,
    chi2_all_pairs,
    distribution,
    distribution_chart,
    label_frame,
)
from cresowlve_core.error_analysis.label import LABELS, label_errors, label_stage, labeller_is_embedded
from cresowlve_core.error_analysis.taxonomy import BY_SLUG, CATEGORIES, display_name
from cresowlve_core.error_analysis.wrong import NO_ANSWER_REASONS, collect_wrong, find_or_make_runs
from cresowlve_core.exitcodes import STAGES_RECORD
from cresowlve_core.llm.types import CONCURRENCY
from cresowlve_core.notebook_records import record
from cresowlve_core.reporting import jsonable, say, say_where_from, show
from cresowlve_core.runtime import ClientOptions, RunDir
from cresowlve_core.stats import MAX_UNDEFINED_SHARE
from cresowlve_core.text import slug


def _num(v: float) -> float | None:
    return None if v is None or np.isnan(v) else float(v)


@dataclass
class ErrorAnalysis:
    """Everything the sections show."""

    source: str
    tally: pd.DataFrame
    labels: pd.DataFrame  # one row per wrong answer (see label_frame)
    label_dir: Path
    labeller: str
    embedded: bool
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)
    synthetic: bool = False  # any input run was written by write_synthetic_runs
    left_by_limit: int = 0  # wrong answers to label that ``limit`` left out (not labelled, not in the counts)
    limit: int | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)  # the labelling this report ran (label_stage)
    out_dir: Path | None = None  # the labels' and annotations' folder (``labels/``, ``annotations/``)


def analyse(runs: str | Sequence[str] | None = "data/runs/demo/*", *, out_dir: str | Path | None = None,
            labeller_model: str | None = None, labeller_base_url: str | None = None,
            labeller_api_key_env: str | None = None, make_demo: bool = True, limit: int | None = None,
            max_tokens: int | None = 512, concurrency: int = CONCURRENCY, seed: int = 0, progress: bool = False,
            label: bool = True) -> ErrorAnalysis:
    """Find the runs, collect the wrong answers and label them (resumable).

    ``out_dir`` holds the label run directories (``labels/<labeller>``) and annotations; None
    means a fresh temporary folder (nothing is written into the checkout). With no runs and
    ``make_demo``, a tiny demo evaluation is made there first with the embedded model.
    ``limit`` caps the wrong answers labelled per configuration (in key order).
    ``label=False``: label nothing; report the labels already in ``out_dir`` (the newest labeller's,
    :func:`existing_labels`), with ``embedded`` from that labeller's manifest.
    """
    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="cresowlve-errors-"))
    data, source = find_or_make_runs(runs, base_url=None, model=None, work_dir=work, make_demo=make_demo)
    units, tally = collect_wrong(data)
    n_wrong = len(units)
    if limit is not None:
        by_config: dict[str, int] = {}
        kept = []
        for u in sorted(units, key=lambda u: u.key):
            if by_config.get(u.config, 0) < limit:
                kept.append(u)
                by_config[u.config] = by_config.get(u.config, 0) + 1
        units = kept
    notes = list(data.notes)
    if len(units) < n_wrong:
        notes.append(f"**`limit = {limit}`** wrong answers per configuration: {len(units)} of the {n_wrong} to label "
                     f"are in this report; the other {n_wrong - len(units)} are left out (not labelled, not counted "
                     "below). Set `limit = None` to label them all.")
    left_by_limit = n_wrong - len(units)
    if not label:
        return replace(_existing_analysis(work, source, units, tally, notes), synthetic=data.synthetic,
                       left_by_limit=left_by_limit, limit=limit, out_dir=work)
    labeller = labeller_model or "embedded"
    label_dir = work / "labels" / slug(labeller)
    options = ClientOptions(max_tokens=max_tokens, concurrency=concurrency, seed=seed,
                            cache_path=None if out_dir else str(work / "cache.sqlite"))
    stopped = None
    records: dict[Any, dict[str, Any]] = {}
    stages = []
    if units:
        res = label_errors(units, label_dir, model=labeller_model, base_url=labeller_base_url,
                           api_key_env=labeller_api_key_env, options=options, progress=progress,
                           limit=limit if left_by_limit else None)
        records, stopped = res.records, res.stopped
        stages.append(label_stage(json.loads((label_dir / "summary.json").read_text(encoding="utf-8")), res))
    return ErrorAnalysis(source, tally, label_frame(units, records), label_dir, labeller,
                         embedded=labeller_base_url is None, stopped=stopped, notes=notes,
                         synthetic=data.synthetic, left_by_limit=left_by_limit, limit=limit, stages=stages, out_dir=work)


def existing_labels(work: Path) -> list[Path]:
    """The label run directories under ``work/labels`` that hold labels, newest first."""
    found = [p.parent for p in (work / "labels").glob(f"*/{LABELS}")]
    return sorted(found, key=lambda d: (d / LABELS).stat().st_mtime, reverse=True)


def _existing_analysis(work: Path, source: str, units: list[Any], tally: pd.DataFrame,
                       notes: list[str]) -> ErrorAnalysis:
    """The analysis of the labels already made (no model call)."""
    dirs = existing_labels(work)
    if not dirs:
        notes.append(f"No labels in {work / 'labels'}: nothing was labelled (name a labeller to label).")
        return ErrorAnalysis(source, tally, label_frame(units, {}), work / "labels", "none", embedded=False,
                             notes=notes)
    chosen = dirs[0]
    if len(dirs) > 1:
        notes.append(f"Labels of {chosen.name} shown (the newest); also there: {', '.join(d.name for d in dirs[1:])}.")
    run = RunDir(chosen)
    manifest = run.read_manifest()
    records = run.latest(LABELS, lambda r: r["key"])
    embedded = labeller_is_embedded(chosen)
    labeller = (manifest.model if manifest is not None else None) or chosen.name
    return ErrorAnalysis(source, tally, label_frame(units, records), chosen, labeller, embedded=embedded, notes=notes)


# ------------------------------------------------------------------ sections


def categories_section() -> dict[str, Any]:
    """The seven categories and their definitions."""
    df = pd.DataFrame([{"category": c.name, "definition": c.definition} for c in CATEGORIES])
    show(df)
    return {"n_categories": len(df)}


def runs_section(ea: ErrorAnalysis) -> dict[str, Any]:
    """Where the answers came from and how many are wrong, by which rule (and the synthetic-data
    banner when any run is synthetic)."""
    record(STAGES_RECORD, ea.stages)  # `cresowlve report 04_error_analysis` exits as `errors label` would
    say_where_from(ea.source, ea.notes, ea.synthetic)
    if ea.tally.empty:
        say("**Nothing to analyse**: no evaluation runs.")
        return {"n_runs": 0, "n_wrong": 0}
    show(ea.tally)
    say("`basis`: the one metric that decides right and wrong for all of a configuration's answers, in both "
        "languages: the LLM judge when its coverage (`judge_coverage`, verdicts on real answers / all items) reaches "
        "90% in every language the configuration ran, else strict exact match (as the contamination sets). "
        "`n_wrong`: wrong by that basis; of these, `n_no_answer` have **no answer** to label "
        "(`n_no_answer_error`: the call errored, no model output; `n_no_answer_withheld`: the model refused or the "
        "provider's filter stopped it; `n_no_answer_truncated`: cut off at the token limit, its reasoning never "
        "finished; `n_no_answer_empty`: an empty prediction): counted "
        "here, never labelled, never in the distribution or the χ². Of the answers that exist, `n_wrong_judge` / "
        "`n_wrong_em`: wrong by the judge / by strict exact match (one of them is 0 for each configuration); `n_no_item`: the item "
        "could not be loaded (not labelled); `n_to_label`: sent to the labeller. `n_unknown`: neither judge nor EM "
        "(not counted).")
    return {"n_runs": int(len(ea.tally)), "n_wrong": int(ea.tally["n_wrong"].sum()),
            "n_no_answer": int(ea.tally["n_no_answer"].sum()),
            **{f"n_no_answer_{k}": int(ea.tally[f"n_no_answer_{k}"].sum()) for k in NO_ANSWER_REASONS},
            "n_to_label": int(ea.tally["n_to_label"].sum()),
            "n_wrong_judge": int(ea.tally["n_wrong_judge"].sum()), "n_wrong_em": int(ea.tally["n_wrong_em"].sum()),
            "n_no_item": int(ea.tally["n_no_item"].sum())}


def labels_section(ea: ErrorAnalysis) -> dict[str, Any]:
    """How many wrong answers got a category, an ``other:`` label, none, or an error."""
    lf = ea.labels
    counts = lf["state"].value_counts().to_dict() if not lf.empty else {}
    n_other = int(lf["label"].fillna("").str.startswith("other: ").sum()) if not lf.empty else 0
    say(f"Labeller: `{ea.labeller}`; labels in `{ea.label_dir}` (resumable)."
        + (f" **Stopped early:** {ea.stopped}" if ea.stopped else ""))
    out = {"n": int(len(lf)), "labelled": int(counts.get("labelled", 0)), "unlabelled": int(counts.get("unlabelled", 0)),
           "withheld": int(counts.get("withheld", 0)), "error": int(counts.get("error", 0)),
           "not_run": int(counts.get("not_run", 0)), "other": n_other, "left_by_limit": ea.left_by_limit,
           "stopped": ea.stopped}
    show(pd.DataFrame([out]).drop(columns=["stopped"]))
    say("*unlabelled*: the labeller's reply had no category line, or was cut off at the token limit inside it "
        "(never guessed); *withheld*: the labeller "
        "refused or its provider's filter stopped it (nothing read; not asked again); *other*: a category outside "
        "the seven, kept with its text; *left_by_limit*: wrong answers the `limit` per configuration left out of "
        "this report.")
    if n_other:
        show(lf[lf["label"].fillna("").str.startswith("other: ")][["config", "id", "label"]])
    return out


def headline(labels: dict[str, Any]) -> str:
    """The error-analysis report's one line, from :func:`labels_section`'s record: every wrong answer is
    in one of its counts (a labeller error, or an answer with no label record, is named, never dropped)."""
    not_run = labels.get("not_run", 0)
    sent = (f"{labels['n']} wrong answers sent to the labeller" if not not_run
            else f"{labels['n']} wrong answers, {labels['n'] - not_run} sent to the labeller")
    return (f"{sent}: {labels['labelled']} labelled, "
            f"{labels.get('other', 0)} other, {labels.get('unlabelled', 0)} unlabelled"
            + (f", {labels['withheld']} refused or filtered by the labeller" if labels.get("withheld") else "")
            + (f", {labels['error']} labeller errors" if labels.get("error") else "")
            + (f"; {not_run} not labelled (no label record)" if not_run else "")
            + (f"; {labels['left_by_limit']} more left out by the limit per configuration" if labels.get("left_by_limit")
               else ""))


def distribution_section(ea: ErrorAnalysis, by: str = "group") -> dict[str, Any]:
    """Category shares per configuration and language (``by="group"``; ``"config"`` pools the
    languages) with Wilson 95% intervals; χ² between every two groups."""
    dist = distribution(ea.labels, by=by)
    if dist.empty or dist["n"].max() == 0:
        say("No labelled errors: no distribution to show.")
        return {"distribution": [], "chi2": []}
    show(distribution_chart(dist, by=by))
    shares = dist.assign(name=dist["category"].map(display_name))
    say("Population: the labelled wrong answers that exist (no-answer items, unlabelled, refused or filtered "
        f"labeller replies and labeller errors are counted apart). **Unit: the {UNIT}**; `n`: labelled answers of the group; `n_items`: items. "
        "`low`/`high`: 95%, Wilson on the answers where each item has one answer (a configuration in one language); "
        "pooled over languages, Wilson on the item-clustered effective size `n_eff` (an item's En and Ru answers are "
        "not independent).")
    show(shares[[by, "name", "k", "n", "n_items", "p", "low", "high", "n_eff"]].rename(columns={"p": "share"}))
    chi = chi2_all_pairs(ea.labels, by=by)
    if chi.empty:
        say("No two configurations in one language: no χ² comparison.")
    else:
        tested = int(chi["p"].notna().sum())
        say(f"Test between the category distributions of two configurations: Pearson's χ² statistic (categories "
            f"empty in both dropped), p from {N_PERM} seeded permutations of the configuration labels **within each "
            "item** (two configurations answer the same items: the test is clustered by item; `n_shared_items` "
            f"items carry the comparison); `p_holm`: Holm-adjusted across the {tested} pair(s) tested. A model's En vs Ru is shown "
            "**descriptively only** (the same items answered twice: not independent samples).")
        show(chi)
    return {"distribution": jsonable(dist), "chi2": jsonable(chi)}


def _rationale_html(rationale: Any) -> str:
    """The labeller's rationale as HTML text, or that it gave none (an empty or missing field)."""
    return html.escape(rationale) if isinstance(rationale, str) and rationale.strip() else "<i>none given</i>"


def examples_section(ea: ErrorAnalysis, n_per_category: int = 2) -> dict[str, Any]:
    """Readable examples per category: question, answer, the model's answer, the rationale."""
    lf = ea.labels[ea.labels["state"] == "labelled"] if not ea.labels.empty else ea.labels
    if lf.empty:
        say("No labelled errors: no examples.")
        return {"shown": 0}
    from IPython.display import HTML

    e = html.escape
    parts, shown = [], 0
    for cat, part in lf.sort_values("key").groupby("bucket", sort=True):
        name = BY_SLUG[cat].name if cat in BY_SLUG else "Other"
        parts.append(f"<h4>{e(name)} ({len(part)})</h4>")
        for r in part.head(n_per_category).itertuples():
            shown += 1
            parts.append(
                "<div style='border-left:3px solid #888;padding-left:8px;margin:6px 0;max-width:60em'>"
                f"<p><b>{e(r.config)}</b> · {e(r.lang)} · <code>{e(r.id)}</code> · label <code>{e(str(r.label))}</code></p>"
                f"<p><b>Question.</b> {e(r.question)}</p><p><b>Answer.</b> {e(r.answer)}</p>"
                f"<p><b>Model answer.</b> {e(r.prediction or '(empty)')}</p>"
                f"<p><b>Labeller's rationale.</b> {_rationale_html(r.rationale)}</p></div>")
    show(HTML("".join(parts)))
    return {"shown": shown}


def annotation_section(ea: ErrorAnalysis, annotations_dir: str | Path | None = None, *, n_per_config: int = 50,
                       seed: int = 0, annotator: str | None = None, n_boot: int = 1000) -> dict[str, Any]:
    """The seeded annotation sample, the panel (when ``annotator`` is given) and agreement."""
    work = ea.out_dir or ea.label_dir.parent.parent  # label_dir is OUT_DIR/labels/<labeller>
    folder = Path(annotations_dir) if annotations_dir else work / "annotations"
    sample = annotation_sample(ea.labels, n_per_config, seed)
    out: dict[str, Any] = {"n_sample": int(len(sample)), "sample_path": None}
    if sample.empty:
        say("No wrong answers to annotate.")
        return out
    path = write_sample(sample, folder / SAMPLE_FILE)
    out["sample_path"] = str(path)
    say(f"Annotation sample: {len(sample)} wrong answers (at most {n_per_config} per configuration, seed {seed}) "
        f"in `{path}`. Label them with `annotation_panel` here (set `annotator`) or in marimo: "
        f"`marimo run notebooks/annotate_errors.py -- --sample {path}` (without `--sample` it opens the newest "
        f"sample). Labels go to `{folder}/<annotator>.jsonl`.")
    if annotator:
        show(annotation_panel(sample, AnnotationStore(folder, annotator)))
    saved = read_annotations(folder)
    in_sample = saved["key"].isin(set(sample["key"]))
    ann, outside = saved[in_sample], saved[~in_sample]
    out["n_annotations"] = int(len(ann))
    out["annotators"] = sorted(ann["annotator"].unique().tolist())
    out["labelled_by"] = {str(a): int(k) for a, k in ann.groupby("annotator").size().items()}
    out["n_outside_sample"] = int(len(outside))
    if len(outside):  # the sample is drawn afresh from the runs: labels of an earlier sample are not scored
        by = ", ".join(f"{a} {k}" for a, k in outside.groupby("annotator").size().items())
        say(f"{len(outside)} saved label(s) are for wrong answers not in this sample (the runs or the sample size "
            f"changed since they were saved), left out of the agreement: {by}.")
    if ann.empty:
        say("No annotations of this sample yet: agreement is computed once annotators have saved labels.")
        return out
    say("Labelled per annotator: " + ", ".join(f"{a} {k} of {len(sample)}" for a, k in out["labelled_by"].items()) + ".")
    among = agr.annotator_agreement(ann, n_boot=n_boot, seed=seed)
    if len(among["annotators"]) >= 2:
        say(f"**Between annotators** (population: the annotation sample; Cohen's κ per pair over the items both "
            f"labelled, Fleiss' κ over the items every annotator labelled; seeded item-bootstrap 95% CIs, {n_boot} "
            "resamples; resamples where κ is undefined are counted, and no interval is shown when κ is undefined, "
            f"the interval has zero width or more than {MAX_UNDEFINED_SHARE:.0%} of the resamples are undefined):")
        show(among["pairs"])
        f = among["fleiss"]
        say(f"Fleiss' κ = {agr.format_interval(f)}.")
        out["fleiss"] = [_num(f.value), _num(f.low), _num(f.high), f.n]
        out["fleiss_note"] = f.note
        out["fleiss_undefined"] = [f.n_undefined, f.n_boot]
        out["pairs"] = jsonable(among["pairs"])
    labels = {str(r.key): r.bucket for r in ea.labels.itertuples() if r.state == "labelled"}
    vs = agr.labeller_agreement(ann, labels, n_boot=n_boot, seed=seed)
    k = vs["kappa"]
    say(f"**Labeller vs the annotators' majority**: Cohen's κ = {agr.format_interval(k)}; same category on "
        f"{vs['n_agree']} of {vs['n']} ({vs['n_no_majority']} without a majority, {vs['n_unlabelled']} unlabelled by the labeller, both left out).")
    if vs["n"]:
        show(vs["confusion"])
        show(vs["precision_recall"])
    out["labeller_kappa"] = [_num(k.value), _num(k.low), _num(k.high), k.n]
    out["labeller_kappa_note"] = k.note
    out["labeller_kappa_undefined"] = [k.n_undefined, k.n_boot]
    out["precision_recall"] = jsonable(vs["precision_recall"])
    return out
