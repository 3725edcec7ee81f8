"""The wrong answers of evaluation runs, with everything the labeller and the annotators see.

"Wrong" has **one basis per configuration**, the same for both languages, as the contamination
sets have (:func:`cresowlve_core.contamination.select.set_basis`): the LLM judge when its coverage
reaches 90% in every language the configuration ran, else strict exact match for all its answers.
Mixing the two answer by answer would let the grading decide which answers are labelled. The basis
is recorded per run in the tally (``basis``, ``judge_coverage``) and per answer; a response with
no value on its configuration's basis is *unknown* and counted, not labelled.

Only finished answers are labelled. An errored call (``status == "error"``: no model output; a
record whose status or outcome this version does not know is read as errored, as the loader reads it), a
refused or filtered one (``outcome``), one cut off at the token limit (``outcome: truncated``: the
reasoning never finished, within a budget the run chose) or an empty prediction is wrong by the
rule but is **no answer** to label: counted per run as ``n_no_answer`` (``n_no_answer_error`` +
``n_no_answer_withheld`` + ``n_no_answer_truncated`` + ``n_no_answer_empty``) and never sent to the
labeller, so it never reaches the distribution or the χ² (API failures cluster by model).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.analysis.coverage import judge_coverage_by_run
from cresowlve_core.analysis.loading import RunSet, load_runs, read_manifest, why_unreadable
from cresowlve_core.analysis.loading import language as record_language
from cresowlve_core.analysis.loading import no_answer as loading_no_answer
from cresowlve_core.analysis.table import COVERAGE_THRESHOLD
from cresowlve_core.contamination.select import EM, JUDGE
from cresowlve_core.failures import InputError
from cresowlve_core.inputs import run_input_limit
from cresowlve_core.runtime.outcomes import NOT_AN_ANSWER
from cresowlve_core.runtime.rundir import RESPONSES, read_jsonl
from cresowlve_core.untrusted import one_line

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WrongAnswer:
    """One wrong answer of one configuration, with the item and the model's output."""

    key: str  # config|lang|id|hash of the output: a changed answer is labelled again
    run_id: str
    config: str
    model: str
    lang: str
    id: str
    basis: str
    question: str
    answer: str
    explanation: str | None
    other_answers: str | None
    prediction: str
    reasoning: str  # thoughts, else the raw output

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_records(run_path: str | Path, run_lang: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """The last response record per ``(id, lang)`` of one run directory (read only; the runtime's
    reader: a torn last line is skipped, any other bad line is an error naming the file and line).
    ``lang`` as the loader reads it: the record's, else the run's ``run_lang``, stripped and lower-cased."""
    records = read_jsonl(Path(run_path) / RESPONSES)
    return {(str(r["id"]), str(record_language(r.get("lang") or run_lang))): r for r in records if "id" in r}


def output_hash(*parts: str | None) -> str:
    """The short hash of a wrong answer's output (prediction, reasoning) in its labelling key."""
    return hashlib.sha256("\x1f".join(p or "" for p in parts).encode("utf-8")).hexdigest()[:10]


#: why a wrong response has no answer to label (:func:`no_answer`), in words
NO_ANSWER_REASONS = {"error": "errored", "withheld": "refused or filtered", "truncated": "cut off at the token limit",
                     "empty": "empty"}
TALLY_COLUMNS = ["run_id", "config", "lang", "basis", "judge_coverage", "n", "n_wrong", "n_right", "n_unknown", "n_no_answer",
                 *(f"n_no_answer_{k}" for k in NO_ANSWER_REASONS), "n_wrong_judge", "n_wrong_em", "n_no_item", "n_to_label"]


def no_answer(status: object, prediction: object, outcome: object = None) -> str | None:
    """Why a response has no answer to label (a key of :data:`NO_ANSWER_REASONS`): ``"error"`` (the
    call failed), ``"withheld"`` (the model refused or the provider's filter stopped it),
    ``"truncated"`` (cut off at the token limit), ``"empty"`` (an empty or blank prediction), else None."""
    if status == "error":
        return "error"
    if outcome in NOT_AN_ANSWER:
        return "withheld"
    if outcome == "truncated":
        return "truncated"
    if prediction is None or (isinstance(prediction, float) and prediction != prediction) or not str(prediction).strip():
        return "empty"
    return None


def config_correctness(responses: pd.DataFrame, threshold: float = COVERAGE_THRESHOLD) -> pd.DataFrame:
    """``correct``, ``basis`` and the run's ``judge_coverage`` per response, with one basis per
    configuration: the judge when its coverage reaches ``threshold`` in every language the
    configuration ran (the rule of :func:`~cresowlve_core.contamination.select.set_basis`), else
    strict exact match."""
    out = pd.DataFrame({"correct": np.nan, "basis": None, "judge_coverage": np.nan}, index=responses.index)
    out["basis"] = out["basis"].astype(object)
    if responses.empty:
        return out
    cov = judge_coverage_by_run(responses).set_index(["config", "lang"])["coverage"]
    for config, part in responses.groupby("config", sort=False):
        # a language never judged has coverage 0
        part_cov = pd.Series({lang: float(cov.get((config, lang), 0.0)) for lang in part["lang"].unique()})
        basis = JUDGE if bool((part_cov >= threshold).all()) else EM
        vals = part[basis].to_numpy(dtype=float)
        out.loc[part.index, "correct"] = vals
        out.loc[part.index, "basis"] = [None if np.isnan(v) else basis for v in vals]
        out.loc[part.index, "judge_coverage"] = part["lang"].map(part_cov).to_numpy(dtype=float)
    return out


def collect_wrong(data: RunSet, *, max_input_chars: int | None = None) -> tuple[list[WrongAnswer], pd.DataFrame]:
    """Every wrong answer in ``data`` plus a per-run tally of what was counted and why.

    The tally (one row per run) has ``n``, ``n_wrong``, ``n_right``, ``n_unknown`` (neither judge
    nor strict EM), ``n_wrong_judge`` / ``n_wrong_em`` (the basis, over answers that exist),
    ``n_no_answer`` = ``n_no_answer_error`` (the call errored) + ``n_no_answer_withheld`` (refused or
    filtered) + ``n_no_answer_truncated`` (cut off at the token limit) + ``n_no_answer_empty`` (an empty
    prediction): wrong but no answer, not labelled; ``n_no_item`` (a wrong answer whose item
    could not be loaded: reported here, never labelled blind) and ``n_to_label``. An items file that
    breaks the input limits (:mod:`cresowlve_core.inputs`; ``max_input_chars`` raises the question
    size limit) raises its ``ItemsFileError``: refused before anything is labelled.
    """
    from cresowlve_core.sources.hub import ItemsFileError, items_files_differ
    from cresowlve_core.sources.sample import load_items

    if data.empty:
        return [], pd.DataFrame(columns=TALLY_COLUMNS)
    df = data.responses.join(config_correctness(data.responses))
    items_cache: dict[tuple[str, str, int | None], dict[str, Any]] = {}
    wrong: list[WrongAnswer] = []
    tally = []
    for _, run in data.runs.iterrows():
        part = df[df["run_id"] == run["run_id"]]
        try:
            manifest = read_manifest(Path(run["path"])) or {}
        except ValueError as exc:  # not JSON, a newer layout, a field of another shape: the run's items are unknown
            raise InputError(f"{Path(run['path']) / 'manifest.json'}: cannot be read ({why_unreadable(exc)}): the "
                             "items of the run's answers are unknown, so they cannot be labelled; mend it, or leave "
                             "the run out (nothing was labelled)") from None
        spec = manifest.get("items") or "demo"
        limit = run_input_limit(manifest, max_input_chars)
        records = read_records(run["path"], run["lang"])
        items_checked: set[str] = set()  # the languages whose items are the run's (its manifest's items_files)
        # an errored call has no value on load (analysis.loading.no_answer); this tally keeps it beside the
        # wrong answers as "no answer": never labelled
        errored = pd.Series(loading_no_answer(part), index=part.index)
        wrong_or_none = (part["correct"] == 0) | errored
        basis = part["basis"].dropna()
        row = {"run_id": run["run_id"], "config": run["config"], "lang": run["lang"],
               "basis": basis.iloc[0] if len(basis) else None,
               "judge_coverage": float(part["judge_coverage"].iloc[0]) if len(part) else float("nan"), "n": len(part),
               "n_wrong": int(wrong_or_none.sum()), "n_right": int((part["correct"] == 1).sum()),
               "n_unknown": int((part["correct"].isna() & ~errored).sum()), "n_no_answer": 0,
               **{f"n_no_answer_{k}": 0 for k in NO_ANSWER_REASONS}, "n_wrong_judge": 0, "n_wrong_em": 0, "n_no_item": 0,
               "n_to_label": 0}
        for r in part[wrong_or_none].itertuples():
            lang = str(r.lang)
            rec = records.get((str(r.id), lang), {})
            # the loader's rule decides what is no answer: a status or outcome this version does not know, or a
            # failed call, is "errored" whatever the record's prediction says
            why = "error" if errored[r.Index] else no_answer(
                getattr(r, "status", None) or rec.get("status"), rec.get("prediction"), rec.get("outcome"))
            if why is not None:
                row["n_no_answer"] += 1
                row[f"n_no_answer_{why}"] += 1
                continue
            if (spec, lang, limit) not in items_cache:
                try:
                    loaded = load_items(spec, lang, max_input_chars=limit)  # type: ignore[arg-type]
                    items_cache[(spec, lang, limit)] = {it.id: it for it in loaded}
                except ItemsFileError:  # a bad items file is refused, never labelled in part
                    raise
                except (OSError, ValueError) as exc:
                    log.warning("items %r (%s) could not be loaded: %s", spec, lang, exc)
                    items_cache[(spec, lang, limit)] = {}
            if lang not in items_checked and (differs := items_files_differ(manifest.get("items_files"),
                                                                            items_cache[(spec, lang, limit)].values())):
                raise InputError(f"{run['path']}: its items ({one_line(spec, 200)!r}) are not those the run read: "
                                 f"{one_line(differs, 300)}: its wrong answers would be labelled against another "
                                 "question and reference; make the files the manifest's items_files name available, "
                                 "or leave the run out (nothing was labelled)")
            items_checked.add(lang)
            item = items_cache[(spec, lang, limit)].get(str(r.id))
            row["n_wrong_judge" if r.basis == "judge" else "n_wrong_em"] += 1
            if item is None:
                row["n_no_item"] += 1
                continue
            view = item.view(lang)  # type: ignore[arg-type]
            prediction = str(rec.get("prediction") or "")
            reasoning = str(rec.get("thoughts") or rec.get("raw_output") or "")
            wrong.append(WrongAnswer(
                key=f"{run['config']}|{lang}|{r.id}|{output_hash(prediction, reasoning)}",
                run_id=str(run["run_id"]), config=str(run["config"]), model=str(run["model"]), lang=lang,
                id=str(r.id), basis=str(r.basis), question=view.question, answer=view.answer,
                explanation=view.explanation, other_answers=view.other_answers,
                prediction=prediction, reasoning=reasoning))
            row["n_to_label"] += 1
        tally.append(row)
    return wrong, pd.DataFrame(tally, columns=TALLY_COLUMNS)


#: the main job's demo runs, the default ``runs`` of 04 and 05: the only runs a demo evaluation stands in for
DEMO_RUNS = "data/runs/demo/*"


def find_or_make_runs(runs: str | Sequence[str] | None, *, base_url: str | None, model: str | None,
                      work_dir: Path, make_demo: bool = True, max_tokens: int = 64) -> tuple[RunSet, str]:
    """The runs named by ``runs``; if there are none, ``runs`` are the demo runs (:data:`DEMO_RUNS`) and
    ``make_demo``, a tiny evaluation of the bilingual demo items (En and Ru) into ``work_dir/eval`` with
    the given model (embedded when ``base_url`` is None). Other runs that match nothing are an empty
    report (the ``empty`` record), never the demo's answers. Returns the runs and a sentence saying
    where they came from."""
    data = load_runs(runs)
    make_demo = make_demo and runs in (None, DEMO_RUNS)
    if data.empty and not make_demo:
        from cresowlve_core.notebook_records import record

        record("empty", f"no runs found at {runs} (0 run directories matched): nothing to analyse")
    if not data.empty or not make_demo:
        return data, (f"{len(data.runs)} run(s) from `{runs}`" if not data.empty
                      else f"no runs found at `{runs}`: nothing to analyse")
    from cresowlve_core.evaluation.runner import EvalConfig, evaluate_async
    from cresowlve_core.runtime import endpoint_or_embedded, run_coro
    from cresowlve_core.sources.sample import load_items

    with endpoint_or_embedded(model, base_url) as (endpoint, _):
        for lang in ("en", "ru"):
            ru_ids = {it.id for it in load_items("demo", "ru")}
            items = [it for it in load_items("demo", lang) if it.id in ru_ids]  # type: ignore[arg-type]
            cfg = EvalConfig.model_validate(dict(model=endpoint.model, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env,
                             run_dir=str(work_dir / "eval" / lang), items="demo", lang=lang,
                             max_tokens=max_tokens, cache_path=str(work_dir / "cache.sqlite")))
            run_coro(evaluate_async(cfg, items, progress=False))
    data = load_runs(str(work_dir / "eval" / "*"))
    return data, (f"no runs found at `{runs}`: ran a tiny demo evaluation ({len(data.responses)} answers) "
                  f"into `{work_dir / 'eval'}`")
