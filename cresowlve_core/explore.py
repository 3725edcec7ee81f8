"""The explorer: items and every model's answers to them, filtered and side by side.

:func:`load_explorer` reads the items (an item spec, default ``"demo"``) and any number of
evaluation run directories (as :func:`cresowlve_core.analysis.load_runs` finds them: a glob, a
list, a directory or a ``grid.json``) into one tidy frame, ``Explorer.frame``: one row per item ×
language × configuration, with the item's text and annotations beside the model's answer and
verdicts. An item no run answered has one row with no configuration; an answer whose item is not
in the item set keeps its row (``in_items`` False) with the annotations its run record carries.

**Correct or wrong** follows the analysis's rule (:func:`cresowlve_core.analysis.paired.correctness`):
the LLM judge's verdict where the judge scored the answer, else strict exact match. ``basis``
says which (``judge`` / ``em_strict``); neither gives ``correct`` NaN (*unknown*), and so does an
errored call (no answer: never counted wrong, :func:`cresowlve_core.analysis.loading.no_answer`).

**Error categories** come from the error-analysis labels (``labels.jsonl`` of
``cresowlve errors label``, in ``OUT_DIR/labels/<labeller>/``) when given: joined on configuration,
language and id. A label written for a different output of the model (the run was re-evaluated
since) is *stale* and never shown as the answer's category.

Everything here reads; nothing is written. Long texts (reasoning, raw output, the judge's reply)
are not held in memory: each run's ``responses.jsonl`` is indexed by byte offset on load and the
one record is read back when an item is opened (:func:`item_detail`).

The notebook ``notebooks/explore.ipynb`` (ipywidgets, :func:`browser`) and the marimo app
``notebooks/explore.py`` are thin shells over these functions.
"""

from __future__ import annotations

import glob
import html
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from cresowlve_core import paths
from cresowlve_core.analysis.loading import KNOWN_OUTCOMES, KNOWN_STATUSES, language, load_runs, record_status_unknown
from cresowlve_core.analysis.paired import correctness
from cresowlve_core.banners import banner_html, is_embedded_model
from cresowlve_core.error_analysis.distribution import bucket
from cresowlve_core.error_analysis.label import LABELS, labeller_is_embedded
from cresowlve_core.error_analysis.taxonomy import BY_SLUG
from cresowlve_core.error_analysis.wrong import no_answer, output_hash  # the labeller's rules, one definition
from cresowlve_core.extras import require
from cresowlve_core.failures import InputError
from cresowlve_core.items import LANGS, Item
from cresowlve_core.llm.types import NOT_AN_ANSWER
from cresowlve_core.runtime.outcomes import record_withheld
from cresowlve_core.runtime.rundir import RESPONSES
from cresowlve_core.untrusted import html_text, one_line

log = logging.getLogger(__name__)

Outcome = Literal["any", "correct", "wrong", "unknown"]
OUTCOMES: tuple[str, ...] = ("any", "correct", "wrong", "unknown")
UNLABELLED = "(unlabelled)"  # the labeller replied without a category line
LABEL_WITHHELD = "(labeller refused or filtered)"  # nothing to read
LABEL_ERROR = "(labeller error)"  # the labeller call failed
NOT_LABELLED = "(not labelled)"  # a wrong answer no label record covers
NO_ANSWER_TO_LABEL = "(no answer to label)"  # wrong by the rule, never sent: refused, filtered, cut off or empty
MAX_LIST = 500  # rows shown in a browser's item list

ITEM_COLUMNS = ["id", "lang", "in_items", "question", "answer", "explanation", "other_answers", "difficulty",
                "reasoning_type", "knowledge_domains", "creative_domains", "cultures"]
ANSWER_COLUMNS = ["run_id", "config", "model", "effort", "status", "outcome", "prediction", "em_strict", "em_lenient", "judge",
                  "judge_status", "judge_verdict", "judge_model", "correct", "basis", "cost", "output_tokens",
                  "reasoning_tokens", "synthetic", "error_categories"]
LABEL_COLUMNS = ["labeller", "config", "lang", "id", "state", "label", "category", "rationale", "current", "path"]
_LONG_TEXT = ("raw_output", "thoughts", "judge_raw", "error", "extraction", "other_answers", "latency_s")


@dataclass
class Explorer:
    """Items and answers, ready to filter (see the module docstring)."""

    frame: pd.DataFrame  # one row per item x lang x configuration (configuration None: no answer)
    runs: pd.DataFrame  # load_runs' run table (path, config, lang, model, synthetic, ...)
    labels: pd.DataFrame  # one row per label record (LABEL_COLUMNS)
    items_spec: str
    runs_spec: str
    notes: list[str] = field(default_factory=list)
    _offsets: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict, repr=False)
    runs_given: bool = False  # runs named by the caller (not the newest found): matching none is bad input

    @property
    def has_runs(self) -> bool:
        return bool(self.frame["config"].notna().any())

    @property
    def has_labels(self) -> bool:
        return not self.labels.empty

    @property
    def configs(self) -> list[str]:
        return sorted(self.frame["config"].dropna().unique().tolist())

    @property
    def n_items(self) -> int:
        return int(self.frame[["id", "lang"]].drop_duplicates().shape[0])

    @property
    def n_answers(self) -> int:
        return int(self.frame["config"].notna().sum())

    def summary(self) -> str:
        """One paragraph: what was loaded, and the correctness rule with its basis counts."""
        items = self.frame[self.frame["in_items"]][["id", "lang"]].drop_duplicates()
        by_lang = items["lang"].value_counts().sort_index()
        langs = ", ".join(f"{n} {lang}" for lang, n in by_lang.items()) or "none"
        text = f"Items `{self.items_spec}`: {len(items)} ({langs})."
        if not self.has_runs:
            return text + f" No runs found at `{self.runs_spec}`: showing the items alone."
        a = self.frame[self.frame["config"].notna()]
        # refused or filtered (the record's outcome, with or without a judge): never correct, the judge never asked
        withheld = a["outcome"].isin(NOT_AN_ANSWER) | a["judge_status"].eq("not_an_answer")
        basis = a.loc[~withheld, "basis"].value_counts()
        text += (f" Runs `{self.runs_spec}`: {len(self.runs)} run(s), {len(self.configs)} configuration(s), "
                 f"{len(a)} answers. Correct = the judge's verdict where it scored ({int(basis.get('judge', 0))} "
                 f"answers), else strict exact match ({int(basis.get('em_strict', 0))}); "
                 + (f"{int(withheld.sum())} refused or filtered (never correct, not judged); " if withheld.any() else "")
                 + f"{int(a['correct'].isna().sum())} unknown.")
        n_out = int((~a["in_items"]).sum())
        if n_out:
            text += f" {n_out} answer(s) are to items not in `{self.items_spec}` (question not shown)."
        if self.has_labels:
            answered = set(zip(a["config"], a["lang"], a["id"]))
            loaded = [k in answered for k in zip(self.labels["config"], self.labels["lang"], self.labels["id"])]
            n_stale = sum(x and not c for x, c in zip(loaded, self.labels["current"], strict=True))
            n_other = loaded.count(False)
            text += (f" Error labels: {len(self.labels)} record(s) from "
                     f"{', '.join(sorted(self.labels['labeller'].unique()))}"
                     f" ({n_stale} stale" + (f", {n_other} for answers not loaded" if n_other else "") + ").")
        return text

    def banners(self) -> list[tuple[str, str]]:
        """``(kind, detail)`` of every banner the explored answers call for."""
        out: list[tuple[str, str]] = []
        shown = self.embedded_sources()
        if shown:
            out.append(("embedded", " ".join(shown)))
        if not self.runs.empty and bool(self.runs["synthetic"].any()):
            out.append(("synthetic", "Some answers come from synthetic runs."))
        return out

    def embedded_sources(self) -> list[str]:
        """What shown came from the embedded model: answers (model or provider ``embedded``),
        the judge's verdicts, error labels."""
        said: list[str] = []
        if not self.runs.empty:
            provider = self.runs.get("provider", pd.Series([None] * len(self.runs), index=self.runs.index))
            models = sorted({str(m) for m, p in zip(self.runs["model"], provider, strict=True)
                             if is_embedded_model(str(m)) or p == "embedded"})
            if models:
                said.append(f"Answers of {', '.join(models)} are shown.")
            judges = sorted({str(j) for j in self.runs["judge_model"].dropna() if is_embedded_model(str(j))})
            if judges:
                said.append(f"Judge verdicts of {', '.join(judges)} are shown.")
        if not self.labels.empty:
            embedded_dirs = {p for p in self.labels["path"].unique() if labeller_is_embedded(Path(p).parent)}
            labellers = sorted({str(lb) for lb, p in zip(self.labels["labeller"], self.labels["path"], strict=True)
                                if is_embedded_model(str(lb)) or p in embedded_dirs})
            if labellers:
                said.append(f"Error labels of {', '.join(labellers)} are shown.")
        return said

    def banners_html(self) -> str:
        return "".join(banner_html(k, d) for k, d in self.banners())  # type: ignore[arg-type]


# ------------------------------------------------------------------ loading


def _items_frame(specs: Sequence[str], langs: Sequence[str], notes: list[str],
                 loaded: dict[str, list[Item]] | None = None) -> pd.DataFrame:
    """One row per item and language of ``specs``; ``loaded`` (when given) gets each spec's items as read."""
    from cresowlve_core.sources.sample import load_items

    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        for lang in langs:
            try:
                items = load_items(spec, lang)  # type: ignore[arg-type]
            except (OSError, ValueError) as exc:  # NoItemsError and ItemsFileError are ValueErrors
                notes.append(f"items `{spec}` ({lang}): {exc}")
                continue
            if loaded is not None:
                loaded.setdefault(spec, []).extend(items)
            for it in items:
                if (it.id, lang) in seen:
                    continue
                seen.add((it.id, lang))
                v = it.view(lang)  # type: ignore[arg-type]
                rows.append({"id": it.id, "lang": lang, "in_items": True, "question": v.question,
                             "answer": v.answer, "explanation": v.explanation, "other_answers": v.other_answers,
                             "difficulty": float(it.difficulty) if it.difficulty is not None else np.nan,
                             "reasoning_type": it.reasoning_type, "knowledge_domains": list(it.knowledge_domains),
                             "creative_domains": list(it.creative_domains), "cultures": list(it.cultures)})
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def _index_responses(path: Path, default_lang: str | None) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], str]]:
    """Byte offset of the last line per ``(id, lang)`` in ``responses.jsonl``, and the hash of each
    answer's output (prediction + reasoning) as the error labeller keys it. Unreadable lines are
    skipped here (``load_runs`` reports them)."""
    offsets: dict[tuple[str, str], int] = {}
    hashes: dict[tuple[str, str], str] = {}
    f = path / RESPONSES
    if not f.exists():
        return offsets, hashes
    pos = 0
    with f.open("rb") as fh:
        for line in fh:
            start, pos = pos, pos + len(line)
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or "id" not in rec:
                continue
            key = (str(rec["id"]), str(language(rec.get("lang")) or language(default_lang)))  # as load_runs reads it
            offsets[key] = start
            reasoning = rec.get("thoughts") or rec.get("raw_output") or ""
            hashes[key] = output_hash(str(rec.get("prediction") or ""), str(reasoning))
    return offsets, hashes


def resolve_label_files(labels: str | Path | Sequence[str | Path] | None, root: Path | None = None) -> list[Path]:
    """``labels.jsonl`` files named by ``labels``: a file, a directory holding one, an error-analysis
    ``OUT_DIR`` (``labels/*/labels.jsonl``), a folder of them (the main job's ``data/runs/errors``:
    ``*/labels/*/labels.jsonl``), a glob, or a list of these (relative to the project root)."""
    if labels is None:
        return []
    root = root or paths.project_root()
    entries = [labels] if isinstance(labels, (str, Path)) else list(labels)
    found: list[Path] = []
    for entry in entries:
        p = Path(entry).expanduser()
        p = p if p.is_absolute() else root / p
        cands = [Path(m) for m in sorted(glob.glob(str(p)))] if any(c in str(entry) for c in "*?[") else [p]
        for c in cands:
            if c.is_file():
                found.append(c)
            elif (c / LABELS).is_file():
                found.append(c / LABELS)
            elif c.is_dir():
                found.extend(sorted(c.glob(f"labels/*/{LABELS}")) or sorted(c.glob(f"*/{LABELS}"))
                             or sorted(c.glob(f"*/labels/*/{LABELS}")))  # a folder of OUT_DIRs: data/runs/errors
    return list(dict.fromkeys(x.resolve() for x in found))


def read_labels(files: Sequence[Path], notes: list[str]) -> pd.DataFrame:
    """Every label record of ``files`` (the last one per key), one row each (:data:`LABEL_COLUMNS`
    plus ``hash``, the answer output the label was written for)."""
    rows: list[dict[str, Any]] = []
    for f in files:
        latest: dict[str, dict[str, Any]] = {}
        bad = 0
        for line in f.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                rec = json.loads(line.decode("utf-8"))  # a line that is not UTF-8 is unreadable, as bad JSON is
            except ValueError:
                bad += 1
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                latest[rec["key"]] = rec
            else:
                bad += 1
        if bad:
            notes.append(f"labels `{f}`: skipped {bad} unreadable line(s).")
        for key, rec in latest.items():
            parts = key.rsplit("|", 3)
            if len(parts) != 4:
                notes.append(f"labels `{f}`: key {key!r} is not config|lang|id|hash; skipped.")
                continue
            config, lang, id_, h = parts
            ok = rec.get("status") == "ok"
            label = rec.get("label") if ok else None
            if label:
                state, category = "labelled", bucket(label)
            elif not ok:
                state, category = "error", LABEL_ERROR
            elif record_withheld(rec):
                state, category = "withheld", LABEL_WITHHELD
            else:
                state, category = "unlabelled", UNLABELLED
            rows.append({"labeller": str(rec.get("labeller") or f.parent.name), "config": str(rec.get("config") or config),
                         "lang": str(rec.get("lang") or lang), "id": str(rec.get("id") or id_), "state": state,
                         "label": label, "category": category, "rationale": rec.get("rationale"),
                         "current": False, "path": str(f), "hash": h})
    return pd.DataFrame(rows, columns=[*LABEL_COLUMNS, "hash"])


def load_explorer(runs: str | Path | Sequence[str | Path] | None = None, items: str | Sequence[str] | None = "demo",
                  *, labels: str | Path | Sequence[str | Path] | None = None,
                  langs: Sequence[str] = LANGS, root: Path | None = None) -> Explorer:
    """Items and run results in one tidy frame (see the module docstring).

    ``runs``: what :func:`~cresowlve_core.analysis.load_runs` accepts; None means
    the folder of the newest evaluation run under ``<data dir>/runs``
    (:func:`cresowlve_core.discover.newest_runs`: the main job's ``demo/*``, a grid's cells, ...).
    ``items``: an item spec (``demo``, ``hub:en``, a file) or several; None means the specs named
    in the runs' manifests (``demo`` if none). ``labels``: error-analysis labels
    (:func:`resolve_label_files`); None means the newest that exist
    (:func:`cresowlve_core.discover.newest_error_labels`), ``""`` or ``()`` none. When a default
    finds nothing, a note says where it looked. Relative paths resolve against the project root.
    Reads only.
    """
    from cresowlve_core import discover

    root = root or paths.project_root()
    looked: list[str] = []
    runs_arg = runs
    if runs_arg is None:
        found = discover.newest_runs()
        runs_arg = str(found.path) if found else str(paths.runs_dir() / "demo" / "*")
        if not found:
            looked.append(found.nothing() + ".")
    data = load_runs(runs_arg, root=root)
    if labels is None:
        labels = _default_labels(data.responses, looked)
    elif not labels:  # "" or (): explicitly none
        labels = None
    notes = [*looked, *data.notes]
    runs_spec = ", ".join(map(str, runs_arg)) if isinstance(runs_arg, (list, tuple)) else str(runs_arg)

    if items is None:
        specs = _manifest_specs(data.runs) or ["demo"]
    else:
        specs = [items] if isinstance(items, str) else list(items)
    loaded: dict[str, list[Item]] = {}
    item_df = _items_frame(specs, langs, notes, loaded)
    notes.extend(_other_snapshot_notes(data.runs, loaded))

    offsets: dict[str, dict[tuple[str, str], int]] = {}
    answers = data.responses.copy()
    if not answers.empty:
        answers = answers.join(correctness(answers))
        hashes: dict[tuple[str, str, str], str] = {}
        for r in data.runs.itertuples():
            off, hs = _index_responses(Path(r.path), r.lang)
            offsets[str(r.run_id)] = off
            hashes.update({(str(r.run_id), i, lang): h for (i, lang), h in hs.items()})
        answers["output_hash"] = [hashes.get((str(a), str(b), str(c))) for a, b, c in
                                  zip(answers["run_id"], answers["id"], answers["lang"])]
    label_df = read_labels(resolve_label_files(labels, root), notes)
    if labels is not None and label_df.empty:
        notes.append(f"no error labels found at `{labels}`.")
    frame = _join(item_df, answers, label_df)
    return Explorer(frame=frame, runs=data.runs, labels=label_df.drop(columns=["hash"]),
                    items_spec=", ".join(specs), runs_spec=runs_spec, notes=notes, _offsets=offsets,
                    runs_given=runs is not None)


def _default_labels(answers: pd.DataFrame, looked: list[str]) -> str | None:
    """The newest error-analysis folder with a label for one of ``answers`` (else the newest
    folder); None, with a note saying where it looked, when there is none."""
    from cresowlve_core import discover

    dirs = discover.error_label_dirs()
    if not dirs:
        looked.append(discover.newest_error_labels().nothing() + ".")
        return None
    answered = set(zip(answers["config"], answers["lang"], answers["id"])) if not answers.empty else set()
    for d in dirs:
        labs = read_labels(resolve_label_files(d), [])
        if answered & set(zip(labs["config"], labs["lang"], labs["id"])):
            return str(d)
    return str(dirs[0])


def _other_snapshot_notes(runs: pd.DataFrame, loaded: dict[str, list[Item]]) -> list[str]:
    """A note for each run whose manifest names hub snapshot files (``items_files``) other than those its
    items were read from here: the questions, references and annotations shown beside its answers are
    another revision's."""
    from cresowlve_core.analysis.loading import read_manifest
    from cresowlve_core.sources.hub import items_files_differ

    notes = []
    for r in runs.itertuples():
        try:
            manifest = read_manifest(Path(r.path)) or {}
        except (ValueError, OSError):
            continue  # an unreadable manifest names no items; load_runs notes it
        spec = manifest.get("items")
        if isinstance(spec, str) and spec in loaded and (
                differs := items_files_differ(manifest.get("items_files"), loaded[spec])):
            notes.append(f"run `{r.run_id}`: its items `{spec}` are not those the run read ({differs}); the items "
                         f"shown beside its {r.n_records} answer(s) are another revision's.")
    return notes


def _manifest_specs(runs: pd.DataFrame) -> list[str]:
    from cresowlve_core.analysis.loading import read_manifest

    specs: list[str] = []
    for p in runs.get("path", pd.Series(dtype=object)):
        try:
            spec = (read_manifest(Path(p)) or {}).get("items")
        except (ValueError, OSError):
            spec = None
        if isinstance(spec, str) and spec not in specs:
            specs.append(spec)
    return specs


def _join(item_df: pd.DataFrame, answers: pd.DataFrame, label_df: pd.DataFrame) -> pd.DataFrame:
    if answers.empty:
        out = item_df.copy()
        for c in ANSWER_COLUMNS:
            out[c] = None
        out["error_categories"] = [[] for _ in range(len(out))]
        return out.reset_index(drop=True)
    ans = answers.copy()
    # the error categories of each answer (current labels only; a wrong answer without one is "not labelled",
    # unless the labeller never gets it: a refused, filtered, cut-off or empty answer has nothing to label)
    cats: dict[tuple[str, str, str], list[str]] = {}
    if not label_df.empty:
        by_answer = {(c, lg, i): h for c, lg, i, h in zip(ans["config"], ans["lang"], ans["id"], ans["output_hash"])}
        current = [by_answer.get((c, lg, i)) == h for c, lg, i, h in
                   zip(label_df["config"], label_df["lang"], label_df["id"], label_df["hash"])]
        label_df["current"] = current
        for lab in label_df[label_df["current"]].itertuples():
            cats.setdefault((lab.config, lab.lang, lab.id), []).append(lab.category)
    ans["error_categories"] = [
        sorted(set(cats.get((c, lg, i), [])))
        or ([NO_ANSWER_TO_LABEL if no_answer(st, pred, out) else NOT_LABELLED] if corr == 0 and not label_df.empty else [])
        for c, lg, i, corr, st, pred, out in zip(ans["config"], ans["lang"], ans["id"], ans["correct"], ans["status"],
                                                 ans["prediction"], ans["outcome"], strict=True)]
    for c in ANSWER_COLUMNS:
        if c not in ans.columns:
            ans[c] = None
    # annotations carried by the run records, for answers whose item is not in the item set
    carried = ans[["id", "lang", "answer", "difficulty", "reasoning_type", "knowledge_domains", "creative_domains",
                   "cultures"]].drop_duplicates(subset=["id", "lang"])
    ans = ans[["id", "lang", *ANSWER_COLUMNS]]
    known = set(zip(item_df["id"], item_df["lang"]))
    missing = carried[[(i, lg) not in known for i, lg in zip(carried["id"], carried["lang"])]].copy()
    if not missing.empty:
        missing["in_items"] = False
        for c in ("question", "explanation", "other_answers"):
            missing[c] = None
        for c in ("knowledge_domains", "creative_domains", "cultures"):
            missing[c] = [list(v) if isinstance(v, (list, tuple, np.ndarray)) else [] for v in missing[c]]
        item_df = pd.concat([item_df, missing[ITEM_COLUMNS]], ignore_index=True)
    out = item_df.merge(ans, on=["id", "lang"], how="left")
    out["in_items"] = out["in_items"].astype(bool)
    out["error_categories"] = [v if isinstance(v, list) else [] for v in out["error_categories"]]
    return out.sort_values(["id", "lang", "config"], na_position="first", kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------ filtering


@dataclass(frozen=True)
class Filters:
    """What to keep. ``None`` (or ``"any"``) means no restriction on that field.

    Item fields: ``langs``, ``difficulty`` (inclusive range; items without a difficulty drop out
    when it is set), ``knowledge_domain``, ``creative_concept``, ``culture`` (the item's list
    contains the value), ``text`` (case-insensitive, in question, answer or prediction). Answer
    fields: ``configs`` (configuration labels, model × effort), ``outcome`` (by the judge where it
    scored, else strict EM) and ``error_category`` (a label slug, ``other``, or one of
    ``(unlabelled)``, ``(labeller error)``, ``(not labelled)``, ``(no answer to label)``). Once any answer field is set,
    items without a matching answer drop out.
    """

    langs: tuple[str, ...] | None = None
    difficulty: tuple[float, float] | None = None
    knowledge_domain: str | None = None
    creative_concept: str | None = None
    culture: str | None = None
    configs: tuple[str, ...] | None = None
    outcome: Outcome = "any"
    error_category: str | None = None
    text: str = ""


def _contains(col: pd.Series, value: str) -> np.ndarray:
    return np.array([value in v if isinstance(v, list) else False for v in col], dtype=bool)


def filter_frame(frame: pd.DataFrame, f: Filters) -> pd.DataFrame:
    """The rows of ``frame`` (:attr:`Explorer.frame`) that pass ``f``."""
    if f.outcome not in OUTCOMES:
        raise InputError(f"outcome must be one of {', '.join(OUTCOMES)}, not {f.outcome!r}")
    keep = np.ones(len(frame), dtype=bool)
    if f.langs:
        keep &= frame["lang"].isin(f.langs).to_numpy()
    if f.difficulty is not None:
        d = frame["difficulty"].astype(float)
        keep &= ((d >= f.difficulty[0]) & (d <= f.difficulty[1])).to_numpy()
    for col, value in (("knowledge_domains", f.knowledge_domain), ("creative_domains", f.creative_concept),
                       ("cultures", f.culture)):
        if value:
            keep &= _contains(frame[col], value)
    if f.text.strip():
        needle = f.text.strip().casefold()
        hay = (frame["question"].fillna("") + "\n" + frame["answer"].fillna("") + "\n"
               + frame["prediction"].fillna("")).str.casefold()
        keep &= hay.str.contains(needle, regex=False).to_numpy()
    if f.configs:
        keep &= frame["config"].isin(f.configs).to_numpy()
    if f.outcome != "any":
        c = frame["correct"].astype(float)
        has = frame["config"].notna()
        keep &= {"correct": c.eq(1.0), "wrong": c.eq(0.0), "unknown": has & c.isna()}[f.outcome].to_numpy()
    if f.error_category:
        keep &= _contains(frame["error_categories"], f.error_category)
    return frame[keep]


def item_list(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per item × language of ``rows`` (a filtered frame) with its answers tallied; items
    some model answered first, then by id and language."""
    cols = ["id", "lang", "difficulty", "question", "answer", "n_answers", "n_correct", "n_wrong", "n_unknown"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    g = rows.assign(_a=rows["config"].notna(), _c=rows["correct"].astype(float).eq(1.0),
                    _w=rows["correct"].astype(float).eq(0.0))
    g["_u"] = g["_a"] & ~g["_c"] & ~g["_w"]
    out = g.groupby(["id", "lang"], sort=True).agg(
        difficulty=("difficulty", "first"), question=("question", "first"), answer=("answer", "first"),
        n_answers=("_a", "sum"), n_correct=("_c", "sum"), n_wrong=("_w", "sum"), n_unknown=("_u", "sum"),
    ).reset_index()
    out["question"] = [_snippet(q) if isinstance(q, str) else "(item not in the item set)" for q in out["question"]]
    for c in ("n_answers", "n_correct", "n_wrong", "n_unknown"):
        out[c] = out[c].astype(int)
    out["difficulty"] = out["difficulty"].astype(float).round().astype("Int64")
    out = out.sort_values("n_answers", key=lambda s: s.eq(0), kind="stable").reset_index(drop=True)
    return out[cols]


def _snippet(text: str, n: int = 110) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


def list_label(row: Any) -> str:
    """One line for an item list: ``id · lang · ✓k ✗m · question…``."""
    tally = f"✓{row.n_correct} ✗{row.n_wrong}" + (f" ?{row.n_unknown}" if row.n_unknown else "") if row.n_answers else "no answers"
    return f"{row.id} · {row.lang} · {tally} · {row.question}"


def options(ex: Explorer) -> dict[str, Any]:
    """The choices of every filter, with item counts (``[(label, value), ...]``), and the difficulty range."""
    items = ex.frame.drop_duplicates(subset=["id", "lang"])

    def counted(col: str) -> list[tuple[str, str]]:
        counts = pd.Series([v for vs in items[col] if isinstance(vs, list) for v in vs], dtype=object).value_counts()
        return [(f"{k} ({n})", str(k)) for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]

    d = items["difficulty"].dropna()
    answers = ex.frame[ex.frame["config"].notna()]
    cats = pd.Series([v for vs in answers["error_categories"] for v in vs], dtype=object).value_counts()
    return {
        "langs": sorted(items["lang"].unique().tolist()),
        "difficulty": (float(d.min()), float(d.max())) if len(d) else None,
        "knowledge_domain": counted("knowledge_domains"),
        "creative_concept": counted("creative_domains"),
        "culture": counted("cultures"),
        "configs": ex.configs,
        "outcome": list(OUTCOMES),
        "error_category": [(f"{_category_name(k)} ({n})", str(k)) for k, n in cats.items()],
    }


def _category_name(slug: str) -> str:
    return BY_SLUG[slug].name if slug in BY_SLUG else slug


# ------------------------------------------------------------------ one item


def read_record(ex: Explorer, run_id: str, id: str, lang: str) -> dict[str, Any] | None:
    """The full response record of one answer, read back from its run's ``responses.jsonl``; None when
    the line at its offset is not that answer's record any more (the file was rewritten since loading,
    e.g. by ``cresowlve rescore``, or removed)."""
    off = ex._offsets.get(str(run_id), {}).get((str(id), str(lang)))
    if off is None:
        return None
    path = Path(ex.runs.set_index("run_id").at[run_id, "path"]) / RESPONSES
    try:
        with path.open("rb") as fh:
            fh.seek(off)
            rec = json.loads(fh.readline())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or str(rec.get("id")) != str(id) or (language(rec.get("lang")) or lang) != lang:
        return None
    return rec


def item_detail(ex: Explorer, id: str, lang: str, configs: Sequence[str] | None = None) -> dict[str, Any]:
    """Everything about one item in one language: its text and annotations, and per configuration
    (all, or ``configs``) the prediction, reasoning, raw output, every verdict and the error labels."""
    rows = ex.frame[(ex.frame["id"] == id) & (ex.frame["lang"] == lang)]
    if rows.empty:
        raise KeyError(f"no item {id!r} in {lang!r} among the explored items")
    first = rows.iloc[0]
    detail: dict[str, Any] = {c: _plain(first[c]) for c in ITEM_COLUMNS}
    answers = []
    for r in rows[rows["config"].notna()].itertuples():
        if configs and r.config not in configs:
            continue
        read = read_record(ex, str(r.run_id), id, lang)
        rec = read or {}
        labs = ex.labels[(ex.labels["config"] == r.config) & (ex.labels["lang"] == lang) & (ex.labels["id"] == id)]
        answers.append({
            "config": r.config, "model": r.model, "effort": _plain(r.effort) or None, "run_id": r.run_id,
            "record_unread": read is None,
            "status": _plain(r.status), "error": rec.get("error"),
            "outcome": rec.get("outcome") or _plain(r.outcome) or "answer",
            "unknown_status": _unknown_status(rec),
            "refusal": rec.get("refusal"), "prediction": rec.get("prediction", _plain(r.prediction)),
            "extraction": rec.get("extraction"), "thoughts": rec.get("thoughts"), "raw_output": rec.get("raw_output"),
            "correct": _bool(r.correct), "basis": _plain(r.basis),
            "em_strict": _bool(r.em_strict), "em_lenient": _bool(r.em_lenient), "judge_status": _plain(r.judge_status),
            "judge_verdict": _plain(r.judge_verdict), "judge_model": _plain(r.judge_model),
            "judge_raw": rec.get("judge_raw"), "cost": _plain(r.cost), "output_tokens": _int(r.output_tokens),
            "reasoning_tokens": _int(r.reasoning_tokens),
            "labels": [{"labeller": lb.labeller, "category": lb.category, "label": _plain(lb.label),
                        "rationale": _plain(lb.rationale), "current": bool(lb.current)} for lb in labs.itertuples()],
        })
    detail["answers"] = answers
    return detail


def _unknown_status(rec: dict[str, Any]) -> str | None:
    """``"status 'x'"`` / ``"outcome 'y'"`` when the record's status or outcome is one this version does
    not know (:func:`~cresowlve_core.analysis.loading.record_status_unknown`), else None."""
    if not record_status_unknown(rec):
        return None
    return " and ".join(f"{k} {one_line(rec[k], 80)!r}" for k, known in (("status", KNOWN_STATUSES),
                                                                       ("outcome", KNOWN_OUTCOMES))
                        if rec.get(k) is not None and rec[k] not in known)


def _bool(v: Any) -> bool | None:
    v = _plain(v)
    return None if v is None else bool(v)


def _int(v: Any) -> int | None:
    v = _plain(v)
    return None if v is None else int(v)


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.floating, float)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    return v


# ------------------------------------------------------------------ HTML


_CSS = """<style>
.cx{font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:14px;line-height:1.45;color:#111}
.cx .item{border:1px solid #ccd;border-radius:6px;padding:10px 14px;background:#f7f8fc;margin-bottom:10px}
.cx .k{color:#556;font-size:12px;text-transform:uppercase;letter-spacing:.04em;margin-top:6px}
.cx .tags span{display:inline-block;background:#e4e8f4;border-radius:10px;padding:1px 8px;margin:2px 3px 0 0;font-size:12px}
.cx .grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:10px}
.cx .ans{border:1px solid #ccd;border-radius:6px;padding:8px 12px;background:#fff}
.cx .ans.ok{border-left:6px solid #2e7d32}.cx .ans.bad{border-left:6px solid #c62828}.cx .ans.unk{border-left:6px solid #999}
.cx .badge{display:inline-block;border-radius:4px;padding:0 6px;margin:2px 4px 2px 0;font-size:12px;color:#fff}
.cx .g{background:#2e7d32}.cx .r{background:#c62828}.cx .n{background:#777}.cx .l{background:#6a1b9a}
.cx pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;padding:6px;border-radius:4px;max-height:360px;overflow:auto;font-size:12px;margin:4px 0}
.cx details summary{cursor:pointer;color:#334;font-size:13px}
.cx .pred{font-weight:600;font-size:15px}
</style>"""


_esc = html_text  # every value shown here comes from a run directory or an item file


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{_esc(text)}</span>'


def _tf(name: str, v: bool | None) -> str:
    return _badge(f"{name}: {'yes' if v else 'no'}" if v is not None else f"{name}: –", "g" if v else "r" if v is False else "n")


def _fold(title: str, text: str | None, open_: bool = False) -> str:
    if not text:
        return ""
    return f'<details{" open" if open_ else ""}><summary>{_esc(title)} ({len(text):,} chars)</summary><pre>{_esc(text)}</pre></details>'


#: what an answer card says of a finished call that is not a whole answer (the record's ``outcome``)
OUTCOME_NOTES = {
    "refused": "refused by the model: nothing was extracted; in n, never correct",
    "filtered": "stopped by the provider's content filter: nothing was extracted; in n, never correct",
    "truncated": "cut off at the token limit: scored as the text it is",
}


def answer_html(a: dict[str, Any]) -> str:
    """One configuration's answer card: verdicts, prediction, labels, reasoning and raw texts."""
    cls = {True: "ok", False: "bad"}.get(a["correct"], "unk")
    withheld = a.get("outcome") in NOT_AN_ANSWER  # refused or filtered: never correct, the judge is not asked
    basis = ("by the rule for a " + str(a["outcome"]) + " answer" if withheld else
             {"judge": "by the judge", "em_strict": "by strict EM"}.get(a["basis"] or "", "no verdict"))
    verdict = {True: _badge(f"correct ({basis})", "g"), False: _badge(f"wrong ({basis})", "r")}.get(
        a["correct"], _badge("unknown (no judge verdict, no strict EM)", "n"))
    judge = a["judge_verdict"] or a["judge_status"] or "not_run"
    judge_badge = (_badge("judge: not asked (no answer to judge)", "n") if withheld else
                   _badge(f"judge: {judge}" + (f" ({a['judge_model']})" if a["judge_model"] else ""),
                          "g" if a["judge_verdict"] == "CORRECT" else "r" if a["judge_verdict"] == "INCORRECT" else "n"))
    parts = [f"<div class='ans {cls}'><b>{_esc(a['config'])}</b><br>{verdict}",
             _tf("strict EM", a["em_strict"]), _tf("lenient EM", a["em_lenient"]), judge_badge]
    if a["status"] == "error":
        parts.append(f"<div class='k'>call failed</div><pre>{_esc(a['error'])}</pre>")
    elif a.get("unknown_status"):  # the analysis reads no metric of it (load_runs' note names the run)
        parts.append(f"<div class='k'>{_esc(a['unknown_status'])} this version does not know: no value for any "
                     "metric, never counted right or wrong</div>")
    elif (note := OUTCOME_NOTES.get(a.get("outcome") or "answer")) is not None:
        parts.append(f"<div class='k'>{_esc(note)}</div>")
        if a.get("refusal"):
            parts.append(f"<pre>{_esc(a['refusal'])}</pre>")
    parts.append(f"<div class='k'>prediction</div><div class='pred'>{_esc(a['prediction']) or '<i>(none)</i>'}</div>")
    for lab in a["labels"]:
        stale = "" if lab["current"] else " — stale: written for an earlier output"
        parts.append(f"<div class='k'>error label ({_esc(lab['labeller'])}){stale}</div>"
                     f"{_badge(_category_name(lab['category']), 'l' if lab['current'] else 'n')} {_esc(lab['rationale'])}")
    tokens = [f"{a['output_tokens']:,} output tokens" if a["output_tokens"] is not None else "",
              f"{a['reasoning_tokens']:,} reasoning" if a["reasoning_tokens"] else "",
              f"${a['cost']:.4f}" if a["cost"] is not None else ""]
    if any(tokens):
        parts.append(f"<div class='k'>{_esc(' · '.join(t for t in tokens if t))}</div>")
    parts += [_fold("reasoning / thoughts", a["thoughts"], open_=True), _fold("raw output", a["raw_output"]),
              _fold("judge's reply", a["judge_raw"])]
    if a.get("record_unread"):
        parts.append("<div class='k'>the full record (reasoning, raw output, refusal, call error) could not be read "
                     "back: the run's responses.jsonl changed since the explorer loaded it; load the runs again</div>")
    elif not a["thoughts"] and not a["raw_output"] and not a.get("refusal"):
        parts.append("<div class='k'>no reasoning or raw output recorded</div>")
    return "".join(parts) + "</div>"


def detail_html(detail: dict[str, Any]) -> str:
    """The item (question, answer, explanation, accepted answers, annotations) above every
    configuration's answer card, side by side."""
    d = detail
    tags = "".join(f"<span>{_esc(k)}: {_esc(v)}</span>" for k, vals in
                   (("domain", d["knowledge_domains"]), ("concept", d["creative_domains"]), ("culture", d["cultures"]))
                   for v in (vals or []))
    diff = "–" if d["difficulty"] is None else int(d["difficulty"])
    head = (f"<div class='item'><b>{_esc(d['id'])}</b> · {_esc(d['lang'])} · difficulty {diff}"
            f"{' · ' + _esc(d['reasoning_type']) if d['reasoning_type'] else ''}<div class='tags'>{tags}</div>")
    if d["in_items"]:
        head += (f"<div class='k'>question</div><div>{_esc(d['question'])}</div>"
                 f"<div class='k'>answer</div><div class='pred'>{_esc(d['answer'])}</div>"
                 f"<div class='k'>accepted answers</div><div>{_esc(d['other_answers']) or '<i>(none)</i>'}</div>"
                 f"<div class='k'>explanation</div><div>{_esc(d['explanation']) or '<i>(none)</i>'}</div>")
    else:
        head += ("<div class='k'>not in the item set: the question is unknown here</div>"
                 f"<div class='k'>answer (from the run record)</div><div class='pred'>{_esc(d['answer'])}</div>")
    head += "</div>"
    cards = "".join(answer_html(a) for a in d["answers"]) or "<i>No model answered this item in the loaded runs.</i>"
    return f"{_CSS}<div class='cx'>{head}<div class='grid'>{cards}</div></div>"


# ------------------------------------------------------------------ the ipywidgets browser


_ANY = "\x00any"  # the value of a dropdown's "any" entry (no restriction)


def browser(ex: Explorer) -> Any:
    """An ipywidgets browser: filters on top, the matching items in a list, the chosen item's
    detail below (JupyterLab, VS Code; the notebook ``notebooks/explore.ipynb``)."""
    W = require("ipywidgets", "ui", "the browser")

    opt = options(ex)
    # ipywidgets shows a Dropdown whose value is None as blank: "any" gets a string value of its own
    any_ = [("any", _ANY)]
    lang = W.Dropdown(options=any_ + [(x, x) for x in opt["langs"]], value=_ANY, description="language")
    lo, hi = opt["difficulty"] or (0.0, 0.0)
    diff = W.IntRangeSlider(value=(int(lo), int(hi)), min=int(lo), max=int(hi), description="difficulty",
                            disabled=opt["difficulty"] is None or lo == hi)
    kd = W.Dropdown(options=any_ + opt["knowledge_domain"], value=_ANY, description="domain")
    cc = W.Dropdown(options=any_ + opt["creative_concept"], value=_ANY, description="concept")
    cu = W.Dropdown(options=any_ + opt["culture"], value=_ANY, description="culture")
    model = W.SelectMultiple(options=opt["configs"], description="models", rows=min(6, max(2, len(opt["configs"]))),
                             disabled=not opt["configs"])
    outcome = W.ToggleButtons(options=list(OUTCOMES), description="outcome", disabled=not ex.has_runs,
                              tooltips=["every answer", "judge verdict where scored, else strict EM",
                                        "judge verdict where scored, else strict EM", "neither judge nor strict EM"])
    if ex.has_labels:
        err = W.Dropdown(options=any_ + opt["error_category"], value=_ANY, description="error")
    else:  # say why it cannot be used, and how to change that
        err = W.Dropdown(options=[("no error labels loaded", _ANY)], value=_ANY, description="error", disabled=True,
                         tooltip="set labels (the errors --out-dir or a labels.jsonl) to filter by error category")
    text = W.Text(description="search", placeholder="question, answer or prediction")
    count = W.HTML()
    listing = W.Select(options=[], rows=12, layout=W.Layout(width="100%"))
    view = W.HTML()
    state: dict[str, Any] = {"filters": Filters()}

    def current() -> Filters:
        full = opt["difficulty"] is None or tuple(diff.value) == (int(lo), int(hi))
        span = None if full else (float(diff.value[0]), float(diff.value[1]))
        chosen = lambda w: None if w.value == _ANY else w.value  # noqa: E731
        return Filters(langs=(lang.value,) if chosen(lang) else None, difficulty=span,
                       knowledge_domain=chosen(kd), creative_concept=chosen(cc), culture=chosen(cu),
                       configs=tuple(model.value) or None, outcome=outcome.value, error_category=chosen(err),
                       text=text.value)

    def show(_: Any = None) -> None:
        key = listing.value
        if key is None:
            view.value = "<i>Choose an item.</i>"
            return
        f = state["filters"]
        view.value = detail_html(item_detail(ex, key[0], key[1], configs=f.configs))

    def refresh(_: Any = None) -> None:
        f = current()
        state["filters"] = f
        lst = item_list(filter_frame(ex.frame, f))
        shown = lst.head(MAX_LIST)
        more = f" (showing the first {MAX_LIST}; narrow the filters)" if len(lst) > MAX_LIST else ""
        n_ans = int(lst["n_answers"].sum()) if len(lst) else 0
        count.value = f"<b>{len(lst)}</b> item(s), {n_ans} answer(s) match{more}"
        listing.options = [(list_label(r), (r.id, r.lang)) for r in shown.itertuples()]
        listing.value = listing.options[0][1] if listing.options else None
        show()

    for w in (lang, diff, kd, cc, cu, model, outcome, err, text):
        w.observe(refresh, names="value")
    listing.observe(show, names="value")
    refresh()
    filters = W.VBox([W.HBox([lang, diff]), W.HBox([kd, cc, cu]), W.HBox([model, W.VBox([outcome, err, text])])])
    return W.VBox([W.HTML(ex.banners_html()), W.HTML(f"<p>{html.escape(ex.summary())}</p>"), filters, count,
                   listing, view])


def show_browser(ex: Explorer) -> Any:
    """Display :func:`browser` with a readable plain-text fallback (what a viewer without a kernel,
    such as the HTML report, shows instead of the widget). Returns the widget."""
    from IPython.display import display

    w = browser(ex)
    bundle = w._repr_mimebundle_() if hasattr(w, "_repr_mimebundle_") else {}
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    bundle = dict(bundle)
    bundle["text/plain"] = ("[interactive explorer: open this notebook in JupyterLab or VS Code with a live kernel, "
                            "or run `marimo run notebooks/explore.py`]")
    display(bundle, raw=True)
    return w


def with_filters(f: Filters, **changes: Any) -> Filters:
    """``f`` with some fields changed (a convenience for notebooks and tests)."""
    return replace(f, **changes)


# ------------------------------------------------------------------ notebook sections


def overview_section(ex: Explorer) -> dict[str, Any]:
    """Display the banners, what was loaded (with the correctness rule) and any notes; return the
    counts for ``record``."""
    from cresowlve_core.banners import show_banner
    from cresowlve_core.reporting import say, show

    if ex.runs_given and ex.runs.empty:  # as 03_analysis: an empty report never replaces one with answers
        from cresowlve_core.notebook_records import record

        record("empty", f"no runs found for runs = {ex.runs_spec} (0 run directories matched, relative paths "
                        "resolve against the current project)")
    for kind, detail in ex.banners():
        show_banner(kind, detail)  # type: ignore[arg-type]
    say(ex.summary())
    if ex.notes:
        say("Notes:\n\n" + "\n".join(f"* {n}" for n in ex.notes))
    if not ex.runs.empty:
        show(ex.runs[["config", "lang", "n_records", "n_error", "n_judged", "complete", "path"]])
    return {"n_items": ex.n_items, "n_answers": ex.n_answers, "configs": ex.configs, "has_runs": ex.has_runs,
            "n_labels": int(len(ex.labels)), "items": ex.items_spec, "runs": ex.runs_spec,
            "banners": [k for k, _ in ex.banners()]}


def static_section(ex: Explorer, filters: Filters | None = None, n: int = 1) -> dict[str, Any]:
    """Display the item list (as a table) and the first ``n`` items' detail as plain HTML: what a
    viewer without a live kernel (the HTML report, a notebook preview) can read. Returns the ids shown."""
    from IPython.display import HTML, display

    from cresowlve_core.reporting import show

    lst = item_list(filter_frame(ex.frame, filters or Filters()))
    show(lst.head(MAX_LIST))  # the report kit's table: a missing difficulty is "–", not <NA>
    first = lst.head(n)
    shown = [(str(r.id), str(r.lang)) for r in first.itertuples()]
    for id_, lang in shown:
        display(HTML(detail_html(item_detail(ex, id_, lang))))
    return {"n_listed": int(len(lst)), "shown": [f"{i}/{lg}" for i, lg in shown]}
