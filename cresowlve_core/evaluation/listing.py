"""Habits from inspect_ai and lm-evaluation-harness: list the runs, diff two of them.

``cresowlve runs [GLOB]`` prints a header, then one line per evaluation run directory
(configuration name, effort, language, n, items done/planned, accuracy with its Wilson 95%
interval, refused and filtered answers, an embedded/synthetic/over-budget mark, cost, state; a summary whose
counts are not those of the records is flagged, :func:`summary_disagreement`). ``cresowlve diff A B``
prints the items where two runs of the same items disagree, both answers, and McNemar's test over
the items both scored.
"""

from __future__ import annotations

import glob
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from cresowlve_core.exitcodes import stop_parts
from cresowlve_core.failures import InputError, MissingInput
from cresowlve_core.llm.pricing import usd
from cresowlve_core.paths import runs_dir
from cresowlve_core.runtime import RESPONSES
from cresowlve_core.runtime.manifest import newer_layout
from cresowlve_core.stats import format_p, mcnemar, wilson_interval
from cresowlve_core.untrusted import one_line

#: below this judge coverage a run's headline accuracy is strict EM (as in Table 1)
JUDGE_COVERAGE = 0.9


@dataclass(frozen=True)
class RunRow:
    """One evaluation run, as ``cresowlve runs`` shows it."""

    path: Path
    model: str
    effort: str | None
    lang: str
    done: int
    planned: int
    metric: str
    k: int
    n: int
    cost: float | None
    cost_reported: bool
    state: str
    name: str = ""  # the configuration's one name: the grid's label, else the model with its effort
    n_refused: int = 0
    n_filtered: int = 0
    mark: str = ""  # "embedded" and/or "synthetic": not a result; "over budget": spent past a max_cost
    cost_known: float | None = None  # with ``cost`` unknown: the answers whose cost is known, added up
    judged: bool = False  # a judge was asked: its cost (``judge_cost``, None when unknown) is shown beside
    judge_cost: float | None = None
    spent_elsewhere: str = ""  # money spent that neither cost counts (:func:`spent_not_in_cost`), said beside them

    def line(self) -> str:
        if self.n:
            lo, hi = wilson_interval(self.k, self.n)
            acc = f"{self.metric} {100 * self.k / self.n:5.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"
        else:
            acc = f"{self.metric} –"
        if self.cost is not None:
            cost = usd(self.cost) + (" reported" if self.cost_reported else "")
        else:
            cost = f"≥ {usd(self.cost_known)}" if self.cost_known else "unknown"
        if self.judged:  # as the eval line says it: the answers' cost, then the judge's
            cost += f" (judge {'unknown' if self.judge_cost is None else usd(self.judge_cost)})"
        if self.spent_elsewhere:
            cost += f" {self.spent_elsewhere}"
        name, effort, lang = (one_line(x) for x in (self.name or self.model, self.effort or "-", self.lang))
        return (f"{name:<30} {effort:<8} {lang:<4} {self.n:>5} "
                f"{f'{self.done}/{self.planned}':<11} {acc:<30} {self.n_refused:>7} {self.n_filtered:>8} "
                f"{self.mark or '-':<18} {cost:<18} {one_line(self.state)}  {one_line(self.path)}")


#: the column names of :meth:`RunRow.line`, aligned with it
HEADER = (f"{'configuration':<30} {'effort':<8} {'lang':<4} {'n':>5} {'done/plan':<11} "
          f"{'accuracy [95% CI]':<30} {'refused':>7} {'filtered':>8} {'mark':<18} {'cost':<18} state  run directory")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def find_runs(pattern: str | None = None) -> list[Path]:
    """Evaluation run directories (a ``manifest.json`` of kind ``eval``) named by ``pattern``, read
    as ``report -p runs`` reads it (a directory, a glob or a ``grid.json``, relative to the current
    project: :func:`~cresowlve_core.analysis.loading.resolve_run_dirs`; a folder of folders of runs
    is searched below), default: every run under ``data/runs``."""
    if pattern is None:
        candidates = [p.parent for p in runs_dir().rglob("manifest.json")]
    else:
        from cresowlve_core.analysis.loading import resolve_run_dirs
        from cresowlve_core.paths import project_root

        root = project_root()
        entry = Path(pattern).expanduser()
        roots = [Path(p) for p in sorted(glob.glob(str(entry if entry.is_absolute() else root / entry)))]
        candidates = [*resolve_run_dirs(pattern, root),
                      *(m.parent for r in roots if r.is_dir() for m in r.rglob("*/manifest.json"))]
    out = [d for d in dict.fromkeys(candidates) if _json(d / "manifest.json").get("kind", "eval") == "eval"
           and "archive" not in d.relative_to(d.anchor).parts[:-1]]
    return sorted(out)


def grid_cells_without_a_run(pattern: str | None, dirs: list[Path]) -> list[str]:
    """``cell (status)`` of each cell of the grid summary ``pattern`` names (a ``grid.json``) that has no
    run directory among ``dirs``: a cell not run yet (stopped before it, or added since), whose absence
    from the listing would otherwise go unsaid (:func:`~cresowlve_core.analysis.loading.grid_cells_missing`)."""
    from cresowlve_core.analysis.loading import grid_cells_missing

    if pattern is None or any(ch in pattern for ch in "*?["):
        return []
    return grid_cells_missing(pattern, dirs)


#: the start of a record as the runner writes it (``ResponseRecord``'s first fields, ``json.dumps``' spacing):
#: its key and status, read without parsing the rest of the line (the model's output, most of its bytes)
_RECORD_HEAD = re.compile(rb'\{"id": ("(?:[^"\\]|\\.)*"), "lang": ("(?:[^"\\]|\\.)*"), "status": ("(?:[^"\\]|\\.)*")')
#: how a run's state starts when its summary.json disagrees with its records (:func:`summary_disagreement`)
SUMMARY_DISAGREES = "summary disagrees with records"


def _token(value: Any) -> bytes:
    """``value`` as the JSON token the runner writes for it (``json.dumps``, ``ensure_ascii=False``)."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _canonical(token: bytes) -> bytes:
    """A JSON string token from a record's head, spelled as :func:`_token` spells its text (only a token
    with an escape can be spelled otherwise)."""
    return _token(json.loads(token)) if b"\\" in token else token


@dataclass(frozen=True)
class RecordCounts:
    """The records of a run directory as ``cresowlve runs`` counts them (:func:`record_counts`)."""

    by_status: Counter[str]  # the latest record of each item (id, lang), by its status
    unreadable: int = 0  # lines that are not a JSON object with an id and a lang
    first_unreadable: int | None = None  # the line number of the first of them

    @property
    def n_items(self) -> int:
        return sum(self.by_status.values())

    def unreadable_note(self) -> str:
        """``"; 2 unreadable line(s) in responses.jsonl (the first: line 3)"``, or "" when there is none."""
        if not self.unreadable:
            return ""
        return f"; {self.unreadable} unreadable line(s) in {RESPONSES} (the first: line {self.first_unreadable})"


def record_counts(path: Path) -> RecordCounts:
    """The latest record of each item (``id``, ``lang``) in ``path``'s ``responses.jsonl`` (none when it does
    not exist), counted by status, streamed: a line the runner wrote is read by its head (:data:`_RECORD_HEAD`),
    any other line (hand-written, another key order) is parsed whole; a line that is not a record with ``id``
    and ``lang`` is counted as unreadable, a torn last line (no line break, not JSON) not at all."""
    if not (path / RESPONSES).exists():
        return RecordCounts(Counter())
    latest: dict[tuple[bytes, bytes], bytes] = {}
    unreadable, first = 0, None
    with (path / RESPONSES).open("rb", buffering=1 << 20) as f:
        for lineno, raw in enumerate(f, 1):
            head = _RECORD_HEAD.match(raw)
            try:
                if head is not None and raw.endswith(b"\n"):
                    key_id, lang, status = head.groups()
                    latest[(_canonical(key_id), _canonical(lang))] = status
                elif raw.strip():
                    rec = json.loads(raw)
                    latest[(_token(rec["id"]), _token(rec["lang"]))] = _token(rec.get("status"))
            except (ValueError, KeyError, TypeError):
                if raw.endswith(b"\n"):  # a torn last line is skipped, as a resume skips it
                    unreadable, first = unreadable + 1, first or lineno
    by_status = Counter({str(json.loads(status)): n for status, n in Counter(latest.values()).items()})
    return RecordCounts(by_status, unreadable, first)


def summary_disagreement(summary: dict[str, Any], counts: RecordCounts) -> str | None:
    """How ``summary`` (a finished pass's ``summary.json``) disagrees with the records it was computed from
    (answered, errored and recorded items; unreadable lines), or None when it agrees."""
    n_items = int(summary.get("n_items") or 0)
    said = {"ok": int(summary.get("n_ok") or 0), "error": int(summary.get("n_error") or 0),
            "with a record": n_items - int(summary.get("n_not_run") or 0)}
    held = {"ok": counts.by_status["ok"], "error": counts.by_status["error"], "with a record": counts.n_items}
    if said == held and not counts.unreadable:
        return None
    words = lambda c: ", ".join(f"{k} {v}" for k, v in c.items())  # noqa: E731
    return (f"{SUMMARY_DISAGREES}: summary.json says {words(said)}; {RESPONSES} holds {words(held)}"
            f"{counts.unreadable_note()}")


#: the fields of summary.json the listing reads as counts, and as amounts of USD
_SUMMARY_COUNTS = ("n_items", "n_ok", "n_error", "n_not_run", "n_refused", "n_filtered", "n_judge_error",
                   "n_judge_not_run", "n_cost_reported", "n_cost_unknown", "n_replaced", "n_verdicts_replaced")
_SUMMARY_AMOUNTS = ("cost", "cost_known", "judge_cost", "replaced_cost")


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_amount(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def summary_problem(summary: dict[str, Any]) -> str | None:
    """The first field of ``summary`` the listing reads that is not what the runner writes there (a count, an
    amount of USD, a metric's ``k``/``n``/``coverage``, a role's spending; a layout newer than this version
    reads), named with its value; else None."""
    def shown(value: Any) -> str:
        return one_line(json.dumps(value, ensure_ascii=False), 40)

    if (newer := newer_layout(summary)) is not None:
        return newer
    for name in _SUMMARY_COUNTS:
        if summary.get(name) is not None and not _is_count(summary[name]):
            return f"{name} is {shown(summary[name])}, not a count"
    for name in _SUMMARY_AMOUNTS:
        if summary.get(name) is not None and not _is_amount(summary[name]):
            return f"{name} is {shown(summary[name])}, not an amount"
    metrics = summary.get("metrics")
    if metrics is not None and not isinstance(metrics, dict):
        return f"metrics is {shown(metrics)}, not an object"
    for metric in ("judge", "em_strict"):
        values = (metrics or {}).get(metric)
        if values is None:
            continue
        if not isinstance(values, dict):
            return f"metrics.{metric} is {shown(values)}, not an object"
        for name, ok in (("k", _is_count), ("n", _is_count), ("coverage", _is_amount)):
            if values.get(name) is not None and not ok(values[name]):
                return f"metrics.{metric}.{name} is {shown(values[name])}, not a {'count' if ok is _is_count else 'number'}"
    for name in ("spent_now", "unusable_spent"):
        spent = summary.get(name)
        if spent is not None and (not isinstance(spent, dict) or any(v is not None and not isinstance(v, dict)
                                                                     for v in spent.values())):
            return f"{name} is {shown(spent)}, not an object of roles"
    return None


def spent_not_in_cost(summary: dict[str, Any]) -> str:
    """``"+ $0.0625 spent on 5 verdicts withdrawn by rescore, not in cost"``: what a run paid for that neither its
    cost nor its judge cost counts (answers replaced by ``--retry-truncated`` and paid verdicts withdrawn by
    ``rescore``, ``replaced_cost``; billed answers with no text, asked again, each role's ``unusable_cost``
    over the run's passes, :func:`~cresowlve_core.evaluation.runner.run_unusable`), ``"+ ≥ $…"`` when part of it is unknown, ``"+ unknown"`` when all is;
    ``""`` when the summary names none (nothing such, or a version that did not record it)."""
    parts: list[str] = []
    known, n_unknown = 0.0, 0
    n_replaced, n_verdicts = summary.get("n_replaced") or 0, summary.get("n_verdicts_replaced") or 0
    if n_replaced or n_verdicts:
        parts += ([f"{n_replaced} answer(s) replaced (--retry-truncated)"] if n_replaced else []) \
            + ([f"{n_verdicts} verdict(s) withdrawn by rescore"] if n_verdicts else [])
        if summary.get("replaced_cost") is None:
            n_unknown += 1
        else:
            known += summary["replaced_cost"]
    from cresowlve_core.evaluation.runner import run_unusable

    for role, meter in (run_unusable(summary) or {}).items():
        n = (meter or {}).get("n_unusable")
        if not _is_count(n) or not n:
            continue
        parts.append(f"{n} {'judge reply' if role == 'judge' else 'answer'}(s) billed with no text")
        cost, unknown = meter.get("unusable_cost"), meter.get("n_unusable_unknown_cost")
        n_unknown += (not _is_amount(cost)) or not _is_count(unknown) or unknown > 0
        known += cost if _is_amount(cost) else 0.0
    if not parts:
        return ""
    amount = "unknown" if n_unknown and not known else f"≥ {usd(known)}" if n_unknown else usd(known)
    return f"+ {amount} spent on {', '.join(parts)}, not in cost"


def layout_1_metrics(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``metrics`` of a summary.json written before it had them (layout 1, manifest.py's
    ``FORMAT_VERSION``): strict EM over the answered items (its ``em_strict`` fraction of ``n_ok``) and the
    judge's accuracy over the judged ones (``judge_accuracy`` of ``n_judged``), each with its coverage of
    the answered items; a metric it gives no fraction for is left out."""
    out: dict[str, dict[str, Any]] = {}
    n_ok = summary.get("n_ok")
    for metric, share, of in (("em_strict", "em_strict", "n_ok"), ("judge", "judge_accuracy", "n_judged")):
        value, n = summary.get(share), summary.get(of)
        if _is_amount(value) and _is_count(n) and _is_count(n_ok) and value <= 1 and n <= n_ok:
            out[metric] = {"k": round(value * n), "n": n, "coverage": n / n_ok if n_ok else 0.0}
    return out


def manifest_problems(manifest: dict[str, Any]) -> dict[str, str]:
    """The fields of ``manifest`` the listing reads that are not what the runner writes there (the number of
    planned items, the judge's section), each with what is wrong with it."""
    def shown(value: Any) -> str:
        return one_line(json.dumps(value, ensure_ascii=False), 40)

    n_items, judge = manifest.get("n_items"), manifest.get("judge")
    problems = {}
    if (newer := newer_layout(manifest)) is not None:
        problems["format_version"] = newer
    if n_items is not None and not _is_count(n_items):
        problems["n_items"] = f"n_items is {shown(n_items)}, not a count"
    if judge is not None and not isinstance(judge, dict):
        problems["judge"] = f"judge is {shown(judge)}, not an object"
    return problems


def run_row(path: Path, aliases: dict[str, str] | None = None) -> RunRow:
    """The listing line of one run directory, from its manifest and summary (never a model call).
    ``aliases``: the grid's labels (model -> label, :func:`~cresowlve_core.analysis.loading.grid_aliases`);
    the name is :func:`~cresowlve_core.analysis.loading.config_name`'s, as the analysis's tables name it."""
    m, s = _json(path / "manifest.json"), _json(path / "summary.json")
    # a resumed run rewrites its manifest unfinished and its summary only when it finishes: until then
    # (or for good, when it was killed) summary.json describes an earlier pass
    earlier_pass = bool(s) and "finished_at" in m and not m["finished_at"]
    if earlier_pass:
        s = {}
    if earlier_pass:
        unusable: str | None = None
    elif not s and (path / "summary.json").exists():
        unusable = "not a JSON object"  # unreadable, cut, or another shape
    else:
        unusable = summary_problem(s)  # a hand-edited field: the summary's numbers are not used
    if unusable is not None:
        s = {}
    bad_manifest = manifest_problems(m)  # hand-edited fields, left out
    if not m:  # missing, unreadable, cut, or another shape: no setting of the run known
        bad_manifest["manifest.json"] = "not a JSON object" if (path / "manifest.json").exists() else "missing"
    m = {k: v for k, v in m.items() if k not in bad_manifest}
    metrics = s.get("metrics") or layout_1_metrics(s)
    judge = metrics.get("judge") or {}
    use_judge = bool(judge.get("n")) and (judge.get("coverage") or 0) >= JUDGE_COVERAGE
    chosen = judge if use_judge else (metrics.get("em_strict") or {})
    planned = int(s.get("n_items") or m.get("n_items") or 0)
    done = int(s.get("n_ok") or 0)
    try:
        counts: RecordCounts | None = record_counts(path)
    except OSError as exc:  # the listing goes on; the row says why its records were not counted
        counts, unreadable_records = None, f"{RESPONSES} unreadable ({exc.strerror or exc})"
    if counts is None:
        state = f"{unreadable_records}: not counted" + ("" if s else "; no usable summary.json")
    elif not s:  # no summary yet: count the answers on disk (no accuracy without the summary's metrics)
        done = counts.by_status["ok"]
        if unusable is not None:
            state = f"summary.json unusable ({unusable}): answers counted on disk, accuracy not computed"
        elif earlier_pass:
            state = (f"running or killed (resumed {m.get('resumed_at') or 'at an unknown time'}, not finished: "
                     "summary.json is of an earlier pass; accuracy not computed)")
        elif m.get("synthetic"):  # write_synthetic_runs writes records and manifest whole, never a summary
            state = "synthetic: written without a summary (accuracy not computed)"
        else:
            state = "running or killed (no summary yet: accuracy not computed)"
        state += counts.unreadable_note()
    elif (disagreement := summary_disagreement(s, counts)) is not None:  # hand-edited, or of other records
        state = disagreement
    elif s.get("stopped"):
        reason, remedy = stop_parts(one_line(s["stopped"]))
        state = f"stopped: {reason if len(reason) <= 60 else reason[:59] + '…'}" + (f"; to go on: {remedy}" if remedy else "")
    elif done < planned:
        state = f"incomplete ({s.get('n_error', 0)} errored, {s.get('n_not_run', 0)} not run)"
    elif s.get("n_judge_error") or s.get("n_judge_not_run"):  # every item answered, not every answer judged
        state = (f"incomplete (judge: {s.get('n_judge_error') or 0} errored, {s.get('n_judge_not_run') or 0} "
                 "not judged)")
    elif s.get("n_judge_repeat_error") or s.get("n_judge_repeat_not_run"):  # a --judge-repeat run owes second verdicts
        state = (f"incomplete (repeat verdicts: {s.get('n_judge_repeat_error') or 0} errored, "
                 f"{s.get('n_judge_repeat_not_run') or 0} not asked)")
    else:
        state = "done"
    if bad_manifest:
        state = f"manifest.json unusable ({'; '.join(bad_manifest.values())}); {state}"
    from cresowlve_core.analysis.loading import config_name

    model = str(m.get("model") or "?")
    from cresowlve_core.banners import is_embedded_model
    from cresowlve_core.runtime.outcomes import served_as

    served = s.get("served_models")  # the models the provider's replies named, as the analysis's tables say them
    note = served_as(model, served if isinstance(served, dict) else None, done if s else None)
    name = config_name(model, m.get("effort"), aliases) + (f" ({note})" if note else "")
    judge = m.get("judge") or {}
    embedded = (m.get("provider") == "embedded" or is_embedded_model(model) or judge.get("provider") == "embedded"
                or is_embedded_model(judge.get("model")))
    over = any((meter or {}).get("over_budget") for meter in (s.get("spent_now") or {}).values())
    mark = ", ".join(w for w, on in (("embedded", embedded), ("synthetic", bool(m.get("synthetic"))),
                                     ("over budget", over)) if on)
    return RunRow(path=path, model=model, effort=m.get("effort"), lang=str(m.get("lang") or "?"),
                  done=done, planned=planned, metric="judge" if use_judge else "EM",
                  k=int(chosen.get("k") or 0), n=int(chosen.get("n") or 0), cost=s.get("cost"),
                  cost_reported=bool(s.get("n_cost_reported")) and s.get("n_cost_reported") == s.get("n_ok"),
                  state=state, name=name,
                  cost_known=s.get("cost_known") if s.get("n_cost_unknown", 0) < done else None,
                  n_refused=int(s.get("n_refused") or 0), n_filtered=int(s.get("n_filtered") or 0), mark=mark,
                  judged=bool(s.get("judged")), judge_cost=s.get("judge_cost"), spent_elsewhere=spent_not_in_cost(s))


@dataclass(frozen=True)
class RunDiff:
    """Two runs compared item by item on one metric."""

    metric: str
    n_both: int
    only_a: int  # right in A, wrong in B
    only_b: int
    disagreements: list[dict[str, Any]]
    p: float
    method: str
    n_missing: int  # items answered in both runs, without a value of the metric in one or both (unscored)
    n_errored: int = 0  # items with no answer (errored, failed, not run) in A or B: left out, never wrong
    n_unknown: int = 0  # ... of them, items whose status or outcome this version does not know
    n_one_run: int = 0  # ... of them, items with a record in one run only (not run in the other, or not in its set)


def _latest(path: Path) -> dict[str, dict[str, Any]]:
    if not (path / "manifest.json").exists():
        raise MissingInput(f"{path}: no manifest.json, not a run directory")
    if (newer := newer_layout(_json(path / "manifest.json"))) is not None:  # its records may mean something else
        raise InputError(f"{path}: a run directory of a newer layout ({newer}); nothing was compared")
    from cresowlve_core.evaluation.runner import read_latest_records

    return {r["id"]: r for r in read_latest_records(path).values()}


def _correct(rec: dict[str, Any], metric: str) -> bool | None:
    """Whether ``rec`` is right by ``metric``; None when it has no score (unscored by the judge). A record
    written before ``scores`` existed is read by the fields it has, as ``03_analysis`` reads it
    (:func:`~cresowlve_core.analysis.loading.legacy_record_score`)."""
    from cresowlve_core.analysis.loading import legacy_record_score

    value = (rec.get("scores") or {}).get(metric)
    if value is None:
        value = legacy_record_score(rec, metric)
    return None if value is None else bool(value)


def shown_answer(row: dict[str, Any], side: str) -> str:
    """Run ``side``'s answer in a row of :attr:`RunDiff.disagreements` as ``diff`` prints it: the extracted
    prediction (quoted, escaped), or what stands in its place, in brackets (a refusal with its text, the
    provider's filter, an output from which no answer was extracted)."""
    outcome, prediction, refusal = row.get(f"{side}_outcome"), row.get(side), row.get(f"{side}_refusal")
    if outcome == "refused":
        return f"[refused{': ' + one_line(refusal, 100) if isinstance(refusal, str) and refusal.strip() else ''}]"
    if outcome == "filtered":
        return "[filtered by the provider: no answer]"
    if prediction is None:
        return "[no answer extracted from the output]"
    return repr(str(prediction)[:120])


def diff_runs(a: Path, b: Path, metric: str | None = None) -> RunDiff:
    """Items where runs ``a`` and ``b`` disagree on ``metric`` (default: the judge when both runs
    were judged, else strict EM), with McNemar's test over the items both scored."""
    ra, rb = _latest(a), _latest(b)
    if metric is None:
        judged = all(any(_correct(r, "judge") is not None for r in recs.values()) for recs in (ra, rb))
        metric = "judge" if judged else "em_strict"
    from cresowlve_core.analysis.loading import record_status_unknown, record_without_answer

    rows, only_a, only_b, n_both, n_missing, n_errored, n_unknown, n_one_run = [], 0, 0, 0, 0, 0, 0, 0
    for item in sorted(set(ra) | set(rb)):
        pair = [rec for rec in (ra.get(item), rb.get(item)) if rec is not None]
        if len(pair) < 2 or any(record_without_answer(rec) for rec in pair):
            n_errored += 1  # not run, or no answer, in A or B: no wrong answer, as in 03_analysis's paired tests
            n_unknown += any(record_status_unknown(rec) for rec in pair)
            n_one_run += len(pair) < 2
            continue
        ca, cb = _correct(ra[item], metric), _correct(rb[item], metric)
        if ca is None or cb is None:
            n_missing += 1
            continue
        n_both += 1
        if ca != cb:
            only_a += ca
            only_b += cb
            rows.append({"id": item, "answer": ra[item].get("answer"), "a": ra[item].get("prediction"),
                         "a_correct": ca, "b": rb[item].get("prediction"), "b_correct": cb,
                         **{f"{side}_{k}": rec.get(k) for side, rec in (("a", ra[item]), ("b", rb[item]))
                            for k in ("outcome", "refusal")}})
    test = mcnemar(only_a, only_b, n_both)
    return RunDiff(metric, n_both, only_a, only_b, rows, test.p, test.method, n_missing, n_errored, n_unknown,
                   n_one_run)


def language_warning(a: Path, b: Path) -> str | None:
    """A warning when two runs answered in different languages (``diff`` pairs their items by id, but
    the test then compares the languages as much as the runs), or None."""
    la, lb = _json(a / "manifest.json").get("lang"), _json(b / "manifest.json").get("lang")
    if la and lb and la != lb:
        return (f"warning: A is {la!r} and B is {lb!r}: items paired across two languages; the disagreements and "
                "McNemar's test compare the languages as well as the runs")
    return None


def items_warning(a: Path, b: Path) -> str | None:
    """A warning when two runs in one language were asked another item set (``items`` of their manifests:
    ``demo``, ``hub:en``, a path; an items file's content where both record its ``items_sha256``, whatever
    its path), or None: the items of one set only are counted without an answer in the other run, which
    never asked them."""
    ma, mb = _json(a / "manifest.json"), _json(b / "manifest.json")
    ia, ib = ma.get("items"), mb.get("items")
    if ma.get("lang") != mb.get("lang"):
        return None
    da, db = ma.get("items_sha256"), mb.get("items_sha256")
    if isinstance(da, str) and isinstance(db, str):  # items files identified by content, at any path
        if da == db:
            return None
        return (f"warning: A and B were asked different contents of an items file ({one_line(ia)!r}, SHA-256 "
                f"{one_line(da, 12)}…; {one_line(ib)!r}, SHA-256 {one_line(db, 12)}…): an item of both may have been "
                "asked or scored from another text in each; an item of one only counts as without an answer in the other")
    if ia and ib and ia != ib:
        return (f"warning: A and B were asked different item sets ({one_line(ia)!r}, {one_line(ib)!r}): only the "
                "items of both are compared; an item of one set only counts as without an answer in the run that "
                "never asked it")
    return None


def settings_warnings(a: Path, b: Path, metric: str) -> list[str]:
    """Warnings when A and B were judged differently (for the judge metric) or asked with another
    version of one prompt (:func:`~cresowlve_core.analysis.loading.setting_mixes`)."""
    from cresowlve_core.analysis.loading import JUDGE_MIX, setting_mixes

    rows = []
    for label, path in (("A", a), ("B", b)):
        m = _json(path / "manifest.json")
        judge = m["judge"] if isinstance(m.get("judge"), dict) else {}
        rows.append({"label": label, "judge_model": judge.get("model"), "judge_protocol": judge.get("protocol"),
                     "prompts": ", ".join(map(str, m.get("prompts") or []))})
    out = []
    for kind, groups in setting_mixes(rows):
        if kind == JUDGE_MIX and metric != "judge":
            continue
        where = "; ".join(f"{one_line(key)} ({', '.join(r['label'] for r in rs)})" for key, rs in sorted(groups.items()))
        out.append(f"warning: A and B were judged differently: {where}; the disagreements and McNemar's test compare "
                   "the judges as well as the runs" if kind == JUDGE_MIX else
                   f"warning: A and B used different versions of one prompt: {where}; their answers or verdicts "
                   "were asked for differently")
    return out


def diff_report(a: Path, b: Path, d: RunDiff, limit: int = 50) -> str:
    """The terminal text of :func:`diff_runs`."""
    lines = [f"A = {one_line(a)}", f"B = {one_line(b)}", f"metric: {d.metric}; items scored in both: {d.n_both}"
             + (f"; {d.n_errored} without an answer in A or B (errored or not run: left out, never wrong"
                + (f"; {d.n_one_run} of them recorded in one run only: not run in the other, or not in its item set"
                   if d.n_one_run else "") + ")" if d.n_errored else "")
             + (f", {d.n_unknown} with a status or outcome this version does not know" if d.n_unknown else "")
             + (f"; {d.n_missing} answered in both but not scored in A or B (left out)" if d.n_missing else "")]
    for r in d.disagreements[:limit]:
        mark = lambda ok: "right" if ok else "wrong"  # noqa: E731
        lines.append(f"{one_line(r['id'])}  reference: {r['answer']!r}")
        lines.append(f"    A ({mark(r['a_correct'])}): {shown_answer(r, 'a')}")
        lines.append(f"    B ({mark(r['b_correct'])}): {shown_answer(r, 'b')}")
    if len(d.disagreements) > limit:
        lines.append(f"... and {len(d.disagreements) - limit} more")
    lines.append(f"{len(d.disagreements)} disagreements: right only in A {d.only_a}, right only in B {d.only_b}; "
                 f"McNemar ({d.method}) p = {format_p(d.p)} over {d.n_both} items")
    return "\n".join(lines)
