"""The contamination analysis of one set of runs, end to end (resumable, one folder).

For every configuration with paired En–Ru runs: the target set (right in Ru, wrong in En) and the
two control sets; each question in ``lang`` (default Russian, the language suspected of being
memorised) is perturbed (one run per perturber, shared by all configurations), then the BDQ, the
BCQ (``n_repeats`` times) and the completion test are asked of the quiz-taker.

Every step is one ``map_with_resume`` run. A step that stops (a dead perturber or quiz-taker: a
wrong key, model or endpoint; ``max_cost``; Ctrl-C or SIGTERM) stops the pipeline: the later steps
and configurations are skipped, and the stopped configuration gets no verdict (see
:attr:`Contamination.stopped`). ``summary.json`` counts every step that ran.

Layout of ``out_dir``::

    summary.json                            the steps that ran, their counts, why it stopped
    perturb/<perturber>__<lang>[__<protocol>]/  perturbations.jsonl (``__lexical-substitution``
                                            for a base-model perturber: a folder of its own)
    <config>/<quiz-taker>/bdq/              bdq.jsonl
    <config>/<quiz-taker>/bcq/              bcq.jsonl
    <config>/<quiz-taker>/completion/       completions.jsonl
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from cresowlve_core import jsonl, outfiles
from cresowlve_core.contamination import completion as comp
from cresowlve_core.contamination import quiz as qz
from cresowlve_core.contamination.itemstats import cut_off_mask, no_answer_mask
from cresowlve_core.contamination.perturb import (
    CHAT_PROTOCOL,
    PERTURBATIONS,
    QuizItem,
    Rejection,
    aperturb,
    perturb_manifest,
    perturber_served,
    protocol_of,
    reply_rejections,
)
from cresowlve_core.contamination.select import SETS, paired_sets
from cresowlve_core.error_analysis.wrong import find_or_make_runs
from cresowlve_core.inputs import run_input_limit
from cresowlve_core.llm.base_model import first_line
from cresowlve_core.llm.types import CONCURRENCY
from cresowlve_core.runtime import (
    ClientOptions,
    MapResult,
    ResumeError,
    RunDir,
    RunDirError,
    client_endpoint,
    endpoint_or_embedded,
    open_client,
    pipeline_summary,
    planned_endpoint,
    refuse_changed,
    run_coro,
)
from cresowlve_core.runtime import ModelRole as Role
from cresowlve_core.text import slug

REJECTION_COLUMNS = ["set", "id", "rewrite", "kind", "detail"]


@dataclass
class ConfigResult:
    """Everything measured for one configuration."""

    config: str
    counts: dict[str, int]
    not_quizzable: pd.DataFrame  # items without four distinct options, with the reason
    too_short: list[str]
    bdq: pd.DataFrame
    bdq_counts: dict[str, int]
    non_preferred: list[str]
    truly_non_preferred: bool
    bcq: pd.DataFrame
    completions: pd.DataFrame
    n_tested: int = 0  # questions of this configuration that went into the tests (after max_items_per_set)
    stopped: list[str] = field(default_factory=list)  # "BDQ: fatal: ..."; non-empty: no verdict for this configuration
    # every reason a question is not quizzable, one row per reason and rewrite (rewrite 0: the whole reply)
    rejections: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REJECTION_COLUMNS))
    # the tested items (id, set, difficulty) and the metric the sets were formed by, with judge coverage
    items: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["id", "set", "difficulty"]))
    basis: str = "em_strict"
    judge_coverage: dict[str, float] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)  # the counts of every step that ran (MapResult.step_counts)
    #: why the BCQ was not run yet: BDQ questions left to ask (errored) may move its positions; None: it ran or had no placement
    bcq_waiting: str | None = None


@dataclass
class Contamination:
    source: str
    lang: str
    perturber: str
    quiz_taker: str
    embedded: bool
    set_counts: pd.DataFrame
    results: list[ConfigResult]
    n_repeats: int
    out_dir: Path
    notes: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # every step that ran, in order (step_counts)
    stopped: str | None = None  # why the pipeline stopped early ("interrupted", "fatal: ..."), else None
    stopped_at: str | None = None  # the step that stopped ("perturbation", "<config> BDQ", ...)
    #: how the perturbations were made (perturb.protocol_of), with which prompts, and for lexical
    #: substitution every word→synonym call (``swaps``, :func:`synonym_calls`); None: nothing perturbed
    perturbation: dict[str, Any] | None = None
    synthetic: bool = False  # any input run was written by write_synthetic_runs
    #: items of the sets left out because their question could not be read here (their runs' items file
    #: missing or another one): never quizzed
    n_without_question: int = 0

    def summary(self) -> dict[str, Any]:
        """The pipeline's counts over every step that ran, in the form of ``exitcodes.stage_exit``
        (``unparsed``: :meth:`unparsed`)."""
        return {**pipeline_summary(self.steps), "configs": [r.config for r in self.results if not r.stopped],
                "configs_stopped": [r.config for r in self.results if r.stopped],
                "perturbation": {k: v for k, v in (self.perturbation or {}).items() if k != "swaps"} or None,
                "unparsed": self.unparsed()}

    def unparsed(self) -> str | None:
        """The steps whose model answered but none of whose answers could be read, in a sentence (None:
        none): the perturbation when no question got three usable rewrites, a quiz when no reply named
        an option; and every step any of whose replies was cut off at the token limit before its content
        (three rewrites, an option, any continuation): no answer; the completion test when no reply
        continued the text. Refused and filtered calls are not
        answers (counted as such, never as unparsed)."""
        parts = []
        pert = next((s for s in self.steps if s["step"] == "perturbation"), None)
        usable = (self.perturbation or {}).get("n_usable")
        cut = (self.perturbation or {}).get("n_cut_off") or 0
        if pert is not None and usable == 0:
            answered = pert["n_ok"] - pert.get("n_refused", 0) - pert.get("n_filtered", 0) - cut
            if answered:
                parts.append(f"perturbation: {answered} of {pert['n_units']} questions answered, "
                             "none with three usable rewrites (nothing to quiz)")
        if pert is not None and cut:
            parts.append(f"perturbation: {cut} of {pert['n_units']} replies cut off at the token limit before three "
                         "rewrites (those questions not quizzed)")
        for r in self.results:
            for quiz, answers in (("BDQ", r.bdq), ("BCQ", r.bcq)):
                answered = answers[~no_answer_mask(answers)]
                if len(answered) and answered["choice"].isna().all():
                    parts.append(f"{r.config} {quiz}: {len(answered)} replies answered, none naming an option")
                if cut := int(cut_off_mask(answers).sum()):
                    parts.append(f"{r.config} {quiz}: {cut} of {len(answers)} replies cut off at the token limit "
                                 "before naming an option (no answer)")
            continued = r.completions[~no_answer_mask(r.completions)] if not r.completions.empty else r.completions
            if len(continued) and continued["continuation"].isna().all():
                parts.append(f"{r.config} completion: {len(continued)} replies answered, none continuing the text "
                             "(empty, or the beginning repeated)")
            if cut := int(cut_off_mask(r.completions).sum()):
                parts.append(f"{r.config} completion: {cut} of {len(r.completions)} continuations cut off at the "
                             "token limit before any text (no answer)")
        return "; ".join(parts) or None


EMBEDDED = Role()  # no base URL: the embedded model


#: the perturbation and completion budget of a run (``cresowlve contamination run`` and ``report``)
MAX_TOKENS = 256
#: the quiz budget of a run: a letter, with room for "Answer: " and markdown
QUIZ_MAX_TOKENS = 16


def run_contamination(runs: str | Sequence[str] | None = "data/runs/demo/*", *, out_dir: str | Path | None = None,
                      lang: str = "ru", perturber: Role = EMBEDDED, quiz_taker: Role = EMBEDDED,
                      n_repeats: int = 3, max_items_per_set: int | None = None, seed: int = 0,
                      make_demo: bool = True, max_tokens: int = MAX_TOKENS, quiz_max_tokens: int = QUIZ_MAX_TOKENS,
                      concurrency: int = CONCURRENCY, configs: Sequence[str] | None = None,
                      progress: bool = False, max_input_chars: int | None = None,
                      max_cost: float | None = None, cache: bool = True,
                      on_start: Callable[[], None] | None = None) -> Contamination:
    """Run the whole contamination analysis (see the module docstring); resumable in ``out_dir``
    (None: a fresh temporary folder, nothing written into the checkout).

    The items of the runs are read through :func:`~cresowlve_core.sources.sample.load_items`: an
    items file that breaks the input limits (``max_input_chars`` raises the question size limit)
    raises its ``ItemsFileError`` before anything is sent; items that cannot be found are a note.
    A step's run directory of another configuration is refused before any model starts; ``on_start``
    is called after that check, before the first model starts (the command line's embedded banner).
    ``max_cost`` (USD) caps each step's new spending (the perturbation, each configuration's quizzes
    and completion test), as a build's steps are capped: a step that reaches it stops cleanly and the
    later steps are skipped; ``cache=False`` bypasses the response cache."""
    from cresowlve_core.failures import InputError
    from cresowlve_core.items import LANGS
    from cresowlve_core.sources.hub import ItemsFileError, items_files_differ
    from cresowlve_core.sources.sample import load_items
    from cresowlve_core.untrusted import one_line

    if lang not in LANGS:  # no run would match it: every configuration "not tested"
        raise InputError(f"lang: {lang!r} is not a language of the benchmark ({', '.join(LANGS)})")
    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="cresowlve-contamination-"))
    _writable_folder(work)  # its summary is written even when there is nothing to test
    data, source = find_or_make_runs(runs, base_url=None, model=None, work_dir=work, make_demo=make_demo)
    members, counts = paired_sets(data)
    if configs:
        members = members[members["config"].isin(list(configs))]
        counts = counts[counts["config"].isin(list(configs))]
    if max_items_per_set is not None:
        members = (members.sort_values("id").groupby(["config", "set"], sort=False).head(max_items_per_set))
    cache_path = None if out_dir else str(work / "cache.sqlite")
    shared = {"concurrency": concurrency, "seed": seed, "cache_path": cache_path, "max_cost": max_cost, "cache": cache}
    opts = ClientOptions(max_tokens=max_tokens, **shared)
    quiz_opts = ClientOptions(max_tokens=quiz_max_tokens, **shared)
    notes: list[str] = []

    from cresowlve_core.analysis.loading import read_manifest

    questions: dict[str, str] = {}
    specs: set[tuple[str, int | None]] = set()  # (items, the question size limit to read them under)
    read_by: dict[str, list[tuple[str, Any]]] = {}  # items -> (each run, the snapshot files its manifest names)
    for _, run in data.runs.iterrows():
        if run["lang"] == lang and run["config"] in set(members["config"]):
            try:
                manifest = read_manifest(Path(run["path"])) or {}
                specs.add((manifest.get("items") or "demo", run_input_limit(manifest, max_input_chars)))
                read_by.setdefault(manifest.get("items") or "demo", []).append(
                    (str(run["path"]), manifest.get("items_files")))
            except (ValueError, OSError) as exc:
                notes.append(f"`{run['run_id']}`: manifest unreadable ({exc}); assuming the demo items")
                specs.add(("demo", max_input_chars))
    for spec, limit in sorted(specs, key=lambda s: (s[0], s[1] or 0)):
        try:
            loaded = load_items(spec, lang, max_input_chars=limit)  # type: ignore[arg-type]
        except ItemsFileError:  # a bad items file is refused, never quizzed in part
            raise
        except (OSError, ValueError) as exc:
            notes.append(f"items {spec!r} ({lang}) could not be loaded: {exc}")
            continue
        for run_path, files in read_by.get(spec, []):
            if differs := items_files_differ(files, loaded):
                raise InputError(f"{run_path}: its items ({one_line(spec, 200)!r}) are not those the run read: "
                                 f"{one_line(differs, 300)}: the quiz would ask another question than the one "
                                 "the run answered; make the files the manifest's items_files name available, "
                                 "or leave the run out (nothing was quizzed)")
        questions |= {it.id: it.view(lang).question for it in loaded}  # type: ignore[arg-type]
    missing = sorted(set(members["id"]) - set(questions))
    if missing:
        notes.append(f"{len(missing)} item(s) have no {lang} question and are left out: {', '.join(missing[:10])}")
    members = members[members["id"].isin(set(questions))]

    quiz_items = [QuizItem(lang, i, questions[i]) for i in sorted(set(members["id"]))]
    results: list[ConfigResult] = []
    steps: list[dict[str, Any]] = []
    stopped = stopped_at = None
    perturbation: dict[str, Any] = {}
    if quiz_items:  # nothing to test: no endpoint is opened (nor the embedded model started)
        stopped, stopped_at = _run_steps(quiz_items, members, counts, questions, work, perturber, quiz_taker, lang,
                                         n_repeats, seed, opts, quiz_opts, progress, results, steps, perturbation,
                                         on_start, max_items_per_set)
    out = Contamination(source, lang, perturber.name, quiz_taker.name, quiz_taker.base_url is None, counts, results,
                        n_repeats, work, notes + list(data.notes), steps, stopped, stopped_at, perturbation or None,
                        data.synthetic, len(missing))
    work.mkdir(parents=True, exist_ok=True)
    outfiles.write_json(work / "summary.json", out.summary())  # scrubbed and atomic, like every file a run writes
    return out


def _writable_folder(work: Path) -> None:
    """Create ``work``, or refuse it in one line (:class:`RunDirError`) when it cannot be created or written."""
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot create {work}: {exc.strerror or exc}") from exc
    if not os.access(work, os.W_OK):
        raise RunDirError(f"{work} is not writable")


def _run_steps(quiz_items: list[QuizItem], members: pd.DataFrame, counts: pd.DataFrame, questions: dict[str, str],
               work: Path, perturber: Role, quiz_taker: Role, lang: str, n_repeats: int, seed: int,
               opts: ClientOptions, quiz_opts: ClientOptions, progress: bool, results: list[ConfigResult],
               steps: list[dict[str, Any]], perturbation: dict[str, Any],
               on_start: Callable[[], None] | None = None,
               max_items_per_set: int | None = None) -> tuple[str | None, str | None]:
    """Perturb, then every configuration's quizzes; the first step that stops skips the rest.
    Appends to ``results`` and ``steps``, fills ``perturbation`` (protocol, prompts, folder); returns
    why and where it stopped (None, None: it did not)."""
    stopped = stopped_at = None
    refuse_changed_steps(quiz_items, members, work, perturber, quiz_taker, lang, n_repeats, opts, quiz_opts,
                         questions, seed, max_items_per_set)
    if on_start is not None:
        on_start()
    with endpoint_or_embedded(perturber.model, perturber.base_url, perturber.api_key_env) as (p_ep, p_emb):
        protocol = protocol_of(p_ep)
        pdir = perturb_dir(work, perturber, lang, p_ep)
        pert, pres = run_coro(_perturb(quiz_items, pdir, p_ep, opts, progress))
        perturbation.update(_perturbation_info(pdir, protocol))
        if protocol != CHAT_PROTOCOL:
            perturbation["swaps"] = synonym_calls(pert)
        if pres is not None:
            steps.append(pres.step_counts("perturbation") | {"served_models": perturber_served(pres.records.values())})
            stopped, stopped_at = pres.stopped, "perturbation" if pres.stopped else None
        same = quiz_taker == perturber
        with (endpoint_or_embedded(quiz_taker.model, quiz_taker.base_url, quiz_taker.api_key_env) if not same
              and stopped is None else _reuse(p_ep, p_emb)) as (q_ep, q_emb):
            for config, part in members.groupby("config", sort=True):
                if stopped is not None:  # a dead perturber, or a configuration stopped: skip the rest
                    break
                cdir = config_dir(work, str(config), quiz_taker)
                crow = counts[counts["config"] == config].iloc[0].to_dict() if len(counts) else {}
                res = run_coro(_config(str(config), part, questions, pert, crow, cdir, pdir, q_ep, quiz_opts, opts,
                                       lang, n_repeats, seed, progress, max_items_per_set))
                results.append(res)
                steps += res.steps
                stopping = next((s for s in res.steps if s["stopped"]), None)
                if stopping is not None:
                    stopped, stopped_at = stopping["stopped"], stopping["step"]
    return stopped, stopped_at


def perturb_dir(work: Path, perturber: Role, lang: str, endpoint: Any) -> Path:
    """The perturbation's run directory: one per perturber, language and protocol."""
    protocol = protocol_of(endpoint)
    return work / "perturb" / (f"{slug(perturber.name)}__{lang}" + ("" if protocol == CHAT_PROTOCOL else f"__{protocol}"))


def config_dir(work: Path, config: str, quiz_taker: Role) -> Path:
    """The folder of one configuration's quizzes and completion test by ``quiz_taker``."""
    return work / slug(config) / slug(quiz_taker.name)


def refuse_changed_steps(quiz_items: list[QuizItem], members: pd.DataFrame, work: Path, perturber: Role,
                         quiz_taker: Role, lang: str, n_repeats: int, opts: ClientOptions,
                         quiz_opts: ClientOptions, questions: dict[str, str], seed: int,
                         max_items_per_set: int | None = None) -> None:
    """Raise the :class:`~cresowlve_core.runtime.ResumeError` a step's run directory under ``work``
    would raise (another configuration there) before any model starts: the perturbation's, and every
    configuration's quizzes and completion test (whose units a smaller ``max_items_per_set`` than it
    was run with would narrow). A BCQ run keeps the non-preferred positions it
    recorded: they come from the BDQ's answers, so a BDQ that is to ask more questions (more items, or
    a retried error) is refused here when their answers may move the positions (:func:`refuse_moved_placement`)."""
    with planned_endpoint(perturber.model, perturber.base_url, perturber.api_key_env) as (p_ep, _):
        pdir = perturb_dir(work, perturber, lang, p_ep)
        refuse_changed(pdir, perturb_manifest(quiz_items, client_endpoint(p_ep, opts), opts))
        with planned_endpoint(quiz_taker.model, quiz_taker.base_url, quiz_taker.api_key_env) as (q_ep, _):
            quiz_ep = client_endpoint(q_ep, quiz_opts)
            for config, part in members.groupby("config", sort=True):
                cdir = config_dir(work, str(config), quiz_taker)
                refuse_changed(cdir / "bdq", qz.quiz_manifest("bdq", quiz_ep, quiz_opts, 0))
                recorded = _recorded_identity(cdir / "bcq").get("non_preferred")
                bcq = {"non_preferred": recorded, "n_repeats": n_repeats}
                refuse_changed(cdir / "bcq", qz.quiz_manifest("bcq", quiz_ep, quiz_opts, 0, bcq))
                if recorded:
                    refuse_moved_placement(cdir, sorted(set(part["id"])), questions, pdir, lang, recorded)
                cunits, _ = completion_units(part, questions, lang, seed)
                try:
                    refuse_changed(cdir / "completion", comp.completion_manifest(
                        client_endpoint(q_ep, opts), opts, len(cunits), limit=max_items_per_set))
                except ResumeError as exc:  # every configuration has one: say which
                    raise ResumeError(f"{cdir / 'completion'}: {exc}") from None


def settled_placement(cdir: Path, ids: Sequence[str], questions: dict[str, str], pdir: Path,
                      lang: str) -> tuple[list[str] | None, int, int]:
    """The non-preferred positions the BDQ in ``cdir`` will give once it has asked the questions it
    still has to (of items ``ids``), when no answers to them can move them (:func:`~cresowlve_core.
    contamination.quiz.settled_non_preferred`; None: they may move), its finished answers for these
    items and the questions still to ask, from the records on disk. A question is still to be asked
    when its item has no finished perturbation yet, or usable rewrites and no finished BDQ answer."""
    perturbed = _finished(pdir / PERTURBATIONS, lang)
    answered = _finished(cdir / "bdq" / "bdq.jsonl", lang)
    counted: list[dict[str, Any]] = []
    n_more = 0
    for i in ids:
        if i not in perturbed:
            n_more += 1
        elif not _rejections(perturbed[i], questions[i]):
            if i in answered:
                counted.append(answered[i])
            else:
                n_more += 1
    counts = qz.position_counts([qz.recorded_choice(r) for r in counted], [r.get("outcome") for r in counted])
    return qz.settled_non_preferred(counts, qz.n_answered(counts), n_more), len(counted), n_more


def refuse_moved_placement(cdir: Path, ids: Sequence[str], questions: dict[str, str], pdir: Path, lang: str,
                           recorded: list[str]) -> None:
    """Raise the :class:`~cresowlve_core.runtime.ResumeError` the BCQ run in ``cdir`` would raise once
    the BDQ has asked the questions it still has to (of items ``ids``) unless the positions it
    recorded (``recorded``) are certain to stay the non-preferred ones (:func:`settled_placement`),
    before any call."""
    settled, n_counted, n_more = settled_placement(cdir, ids, questions, pdir, lang)
    if settled == [] or settled == recorded:
        return
    now = (f"the BDQ's {n_counted} answers for these items give {', '.join(settled)}" if settled is not None
           else f"the BDQ has {n_counted} answers for these items and is to ask up to {n_more} more, whose "
                "answers may move them")
    raise ResumeError(f"{cdir / 'bcq'}: the run directory holds another configuration (identity: the BCQ placed "
                      f"the original at {', '.join(recorded)}, the non-preferred positions of its BDQ; {now}); "
                      "use another run directory (resume only continues the same configuration: the same items)")


def _finished(path: Path, lang: str) -> dict[str, dict[str, Any]]:
    """Per item id, the last record in ``lang`` of a step's records file if it is finished (``status:
    ok``: never asked again); nothing for a missing or unreadable file (the step itself says why)."""
    last: dict[str, dict[str, Any]] = {}
    try:
        for _, r in jsonl.scan_jsonl(path, torn_tail_ok=True) if path.is_file() else ():
            key = r.get("key")
            if isinstance(key, list) and len(key) >= 2 and key[0] == lang and isinstance(key[1], str):
                last[key[1]] = r
    except (OSError, ValueError):
        return {}
    return {i: r for i, r in last.items() if r.get("status") == "ok"}


def _recorded_identity(run_dir: Path) -> dict[str, Any]:
    """The ``identity`` of the manifest in ``run_dir`` (empty when there is none to read)."""
    try:
        identity = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("identity")
    except (OSError, ValueError, AttributeError):
        return {}
    return identity if isinstance(identity, dict) else {}


class _reuse:
    def __init__(self, ep: Any, emb: bool):
        self.value = (ep, emb)

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: Any) -> None:
        return None


async def _perturb(items: list[QuizItem], run_dir: Path, endpoint: Any, opts: ClientOptions,
                   progress: bool) -> tuple[dict[str, dict[str, Any]], MapResult | None]:
    if not items:
        return {}, None
    client = open_client(endpoint, opts)
    try:
        res = await aperturb(items, RunDir(run_dir), client, opts, progress=progress)
    finally:
        await client.aclose()
    return {cast(tuple, k)[1]: r for k, r in res.records.items()}, res  # keys are (set, id)


def completion_units(members: pd.DataFrame, questions: dict[str, str], lang: str,
                     seed: int) -> tuple[list[comp.CompletionUnit], list[str]]:
    """One configuration's completion units (both modes of every member, by set and id) and the
    members too short to cut."""
    units: list[comp.CompletionUnit] = []
    too_short: list[str] = []
    for r in members.sort_values(["set", "id"]).itertuples():
        cut = comp.cut_question(questions[r.id], seed, r.id)
        if cut is None:
            too_short.append(r.id)
            continue
        units.extend(comp.CompletionUnit(r.set, lang, r.id, m, cut) for m in comp.MODES)
    return units, too_short


async def _config(config: str, members: pd.DataFrame, questions: dict[str, str], pert: dict[str, dict[str, Any]],
                  counts: dict[str, Any], cdir: Path, pdir: Path, endpoint: Any, quiz_opts: ClientOptions,
                  opts: ClientOptions, lang: str, n_repeats: int, seed: int, progress: bool,
                  max_items_per_set: int | None = None) -> ConfigResult:
    client = open_client(endpoint, quiz_opts)
    comp_client = open_client(endpoint, opts)
    stopped: list[str] = []
    steps: list[dict[str, Any]] = []
    bcq_df = pd.DataFrame(columns=["set", "id", "repeat", "choice", "correct", "outcome", "raw"])
    comp_df = pd.DataFrame(columns=["set", "id", "mode", "cut", "suffix", "continuation", "rouge_l", "prefix_match",
                                    "outcome"])
    too_short: list[str] = []
    try:
        usable, bad = [], []
        rejected: list[dict[str, Any]] = []
        for r in members.sort_values(["set", "id"]).itertuples():
            rej = _rejections(pert.get(r.id), questions[r.id])
            if not rej:
                usable.append((r.set, r.id, pert[r.id]["perturbations"]))
                continue
            bad.append({"set": r.set, "id": r.id, "reason": "; ".join(map(str, rej))})
            rejected.extend({"set": r.set, "id": r.id, "rewrite": x.rewrite or 0, "kind": x.kind, "detail": x.detail}
                            for x in rej)
        bdq_units = [qz.QuizUnit("bdq", s, lang, i, 0, *qz.bdq_options(p, qz.bdq_rng(seed, lang, i)))
                     for s, i, p in usable]
        bdq_res = await qz.aquiz("bdq", bdq_units, RunDir(cdir / "bdq"), client, quiz_opts, progress=progress)
        steps.append(bdq_res.step_counts(f"{config} BDQ"))
        if bdq_res.stopped:
            stopped.append(f"BDQ: {bdq_res.stopped}")
        bdq_df = pd.DataFrame([r for r in bdq_res.records.values() if r.get("status") == "ok"],
                              columns=["set", "id", "choice", "outcome", "raw"])
        bdq_counts = qz.position_counts(bdq_df["choice"].tolist(), bdq_df["outcome"].tolist())
        non_pref, truly = (qz.non_preferred_positions(bdq_counts, qz.n_answered(bdq_counts)) if len(bdq_df)
                           else ([], False))
        if non_pref and not stopped:
            bcq_units: list[qz.QuizUnit] = []
            for s, i, p in usable:
                layouts = qz.bcq_repeats(questions[i], p, non_pref, n_repeats, seed, lang, i)
                bcq_units.extend(qz.QuizUnit("bcq", s, lang, i, rep, *layout) for rep, layout in enumerate(layouts))
        # BDQ questions left to ask (an errored BDQ call or perturbation) whose answers may move the
        # non-preferred positions: the BCQ waits for them (not run), as its placement is fixed once asked
        bcq_waiting: str | None = None
        if non_pref and not stopped:
            settled, n_counted, n_more = settled_placement(cdir, sorted(set(members["id"])), questions, pdir, lang)
            if n_more and settled != non_pref:
                bcq_waiting = (f"not run: the BDQ has {n_counted} answers and {n_more} questions left to ask (errored), "
                               "whose answers may move the non-preferred positions; run again to ask them")
        if bcq_waiting:
            steps.append({"step": f"{config} BCQ", "n_units": len(bcq_units), "n_ok": 0, "n_refused": 0,
                          "n_filtered": 0, "n_error": 0, "n_not_run": len(bcq_units), "stopped": None,
                          "top_error": None})
        elif non_pref and not stopped:
            bcq_res = await qz.aquiz("bcq", bcq_units, RunDir(cdir / "bcq"), client, quiz_opts,
                                     identity={"non_preferred": non_pref, "n_repeats": n_repeats}, progress=progress)
            steps.append(bcq_res.step_counts(f"{config} BCQ"))
            if bcq_res.stopped:
                stopped.append(f"BCQ: {bcq_res.stopped}")
            bcq_df = pd.DataFrame([r for r in bcq_res.records.values() if r.get("status") == "ok"],
                                  columns=["set", "id", "repeat", "choice", "correct", "outcome", "raw"])
        cunits, too_short = completion_units(members, questions, lang, seed)
        if not stopped:  # a stopped quiz stops the configuration: its completion test is not run
            comp_res = await comp.acomplete(cunits, RunDir(cdir / "completion"), comp_client, opts, progress=progress,
                                            limit=max_items_per_set)
            steps.append(comp_res.step_counts(f"{config} completion"))
            if comp_res.stopped:
                stopped.append(f"completion: {comp_res.stopped}")
            comp_df = pd.DataFrame([r for r in comp_res.records.values() if r.get("status") == "ok"],
                                   columns=comp_df.columns)
    finally:
        await client.aclose()
        await comp_client.aclose()
    set_counts = {s: int(counts.get(s, 0)) for s in SETS}
    return ConfigResult(config, set_counts, pd.DataFrame(bad, columns=["set", "id", "reason"]), too_short, bdq_df,
                        bdq_counts, non_pref, truly, bcq_df, comp_df, int(len(members)), stopped,
                        pd.DataFrame(rejected, columns=REJECTION_COLUMNS), members[["id", "set", "difficulty"]],
                        str(counts.get("basis", "em_strict")),
                        {lg: float(counts.get(f"judge_coverage_{lg}", 0.0)) for lg in ("en", "ru")}, steps, bcq_waiting)


SWAP_COLUMNS = ["id", "word", "synonym", "raw", "passed_over"]


def synonym_calls(pert: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Every word→synonym call of a lexical-substitution run, one row per call (``synonym`` empty
    when the continuation had none usable; ``passed_over``: the items rejected, with the reason)."""
    rows = [{"id": i, "word": c["word"], "synonym": c.get("synonym") or "", "raw": first_line(c.get("raw")),
             "passed_over": "; ".join(f"{x['option']!r}: {x['kind']}" for x in c.get("passed_over") or [])}
            for i, rec in sorted(pert.items()) for c in rec.get("synonyms") or []]
    return pd.DataFrame(rows, columns=SWAP_COLUMNS)


def _perturbation_info(run_dir: Path, protocol: str) -> dict[str, Any]:
    """The perturbation step's protocol, prompts and counts, from its summary (for reports)."""
    info: dict[str, Any] = {"protocol": protocol, "folder": str(run_dir)}
    try:
        done = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        info |= {k: done[k] for k in ("prompts", "n_units", "n_usable", "n_cut_off", "n_model_calls") if k in done}
    except (OSError, ValueError):
        pass
    return info


def _rejections(rec: dict[str, Any] | None, question: str) -> list[Rejection]:
    """Why an item's perturbation record gives no four distinct options (empty: it does). Parsed
    rewrites are re-validated here, so records cached under older rules meet the current ones; a
    record without rewrites keeps its own reason (``too_few_synonyms``, ``unparsed``)."""
    if rec is None:
        return [Rejection(None, "not_perturbed", "not perturbed (run stopped)")]
    if rec.get("status") != "ok":
        return [Rejection(None, "call_failed", f"perturbation call failed: {rec.get('error')}")]
    if rec.get("perturbations") is None and rec.get("rejections"):
        return [Rejection(**x) for x in rec["rejections"]]
    return reply_rejections(question, rec.get("perturbations"), rec.get("outcome") == "truncated")
