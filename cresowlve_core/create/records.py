"""CREATE's records: what generation and scoring write into a run directory, as pydantic models.

A generation run directory (``cresowlve create generate``) holds the runtime's ``manifest.json``
(kind ``create_generate``), ``responses.jsonl`` (one :class:`GenerationRecord` per model call,
keyed by ``(query_id, sample, round)``) and ``summary.json`` (:class:`GenerateSummary`).

Scoring (``cresowlve create score``) writes its own run directory, by default ``<run>/score/``:
``manifest.json`` (kind ``create_score``), ``judgments.jsonl`` (one :class:`JudgmentRecord` per
judged path, keyed by ``(query_id, path_key)``), ``scores.json`` (one :class:`QueryScore` per
query) and ``summary.json`` (:class:`ScoreSummary`).

Records written before the runtime (no ``status`` on judgments, no ``prompt`` on responses) still
validate: every model tolerates unknown fields and fills what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cresowlve_core.create.paths import ParseStatus
from cresowlve_core.create.paths import Path as PathT
from cresowlve_core.exitcodes import sent_phrase
from cresowlve_core.failures import InputError
from cresowlve_core.llm.pricing import CostMeter, cost_text, usd
from cresowlve_core.llm.types import Outcome, Usage
from cresowlve_core.runtime.mapping import error_counts
from cresowlve_core.runtime.outcomes import served_note
from cresowlve_core.text import plural
from cresowlve_core.untrusted import one_line

if TYPE_CHECKING:
    from cresowlve_core.runtime import RunDir

JUDGMENTS = "judgments.jsonl"
SCORES = "scores.json"
SCORE_DIR = "score"

Status = Literal["ok", "error"]
#: an answer that ended at the token limit, as the summary lines say it
CUT_OFF = "cut off at the token limit"
#: what happens to the triples of a judge answer that was refused or filtered (docs/create.md)
WITHHELD_RULE = "their triples score 0, the paper's rule for a verdict it cannot read"


def top_error(records: Iterable[GenerationRecord | JudgmentRecord]) -> tuple[str, int] | None:
    """The most common error (its first line) among the errored ``records``, and its count."""
    top = error_counts({"status": r.status, "error": r.error} for r in records).most_common(1)
    return top[0] if top else None


class GenerationRecord(BaseModel):
    """One generation call: the raw answer and the paths parsed from it (or the error)."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    sample: int = 0
    round: int = 0
    seed: int | None = None
    status: Status = "ok"
    error: str | None = None
    #: what the call came to (runtime/outcomes.py): a refused or filtered generation is final
    #: (``status: ok``, not asked again), its text kept in ``raw_output``, no path read from it
    outcome: Outcome = "answer"
    refusal: str | None = None
    served_model: str | None = Field(None, description="the model the provider's reply says answered (None: it names none)")
    prompt: str | None = Field(None, description="name@version of the prompt of this call")
    raw_output: str | None = None
    thoughts: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    latency_s: float | None = None
    cached: bool = False
    parse_status: ParseStatus | None = None
    parse_flags: list[str] = Field(default_factory=list)
    n_paths: int = 0
    paths: list[PathT] = Field(default_factory=list)

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.query_id, self.sample, self.round)


def response_key(record: dict[str, Any]) -> Hashable:
    """The unit key of a ``responses.jsonl`` record (also of records written before the runtime)."""
    return (record["query_id"], int(record.get("sample", 0)), int(record.get("round", 0)))


class JudgmentRecord(BaseModel):
    """Both judges' per-triple verdicts on one path (or the error that stopped them)."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    path_key: str
    path_index: int = 0
    path: PathT = Field(default_factory=list)
    status: Status = "ok"
    error: str | None = None
    valid: bool = True
    validity_reasons: list[str] = Field(default_factory=list)
    specificity: list[float] = Field(default_factory=list, description="score 0-5 per triple (0: unparseable)")
    specificity_sizes: list[float | None] = Field(default_factory=list, description="the judge's class sizes")
    specificity_flags: list[str] = Field(default_factory=list)
    specificity_raw: str | None = None
    factuality: list[float] = Field(default_factory=list, description="1 holds / 0 hallucinated, per triple")
    factuality_verdicts: list[float | None] = Field(
        default_factory=list, description="the judge's verdicts as read: 1, 0, or None (unscored, counted as 0)")
    factuality_flags: list[str] = Field(default_factory=list)
    factuality_raw: str | None = None
    #: what each judge's call came to; a refused or filtered judgment leaves that judge's triples unscored
    specificity_outcome: Outcome = "answer"
    factuality_outcome: Outcome = "answer"
    #: the model each judge call's reply says answered, specificity's calls first (calls naming none left out)
    judge_served_models: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict)
    cost: float | None = None
    cached: bool = False

    @model_validator(mode="before")
    @classmethod
    def _legacy_status(cls, data: Any) -> Any:
        """Judgments written before the runtime have no ``status``: an ``error`` made them failed."""
        if isinstance(data, dict) and "status" not in data:
            data = {**data, "status": "error" if data.get("error") else "ok"}
        return data


def judgment_key(record: dict[str, Any]) -> Hashable:
    return (record["query_id"], record["path_key"])


R = TypeVar("R", bound=BaseModel)


def latest_records(run: RunDir, filename: str, key: Callable[[dict[str, Any]], Hashable],
                   model: type[R]) -> dict[Hashable, R]:
    """The last record per key of ``filename`` in ``run``, read as ``model``. A record edited into
    another shape (no key, a field of the wrong type) is one error naming the file, its line and
    the fields, not a traceback."""
    path = run.path / filename

    def unreadable(offset: int, why: str) -> InputError:
        with path.open("rb") as f:
            line = f.read(offset).count(b"\n") + 1
        return InputError(f"{path}:{line}: the record cannot be read ({why}); mend or remove it")

    latest: dict[Hashable, tuple[int, dict[str, Any]]] = {}
    for offset, raw in run.scan(filename):
        try:
            latest[key(raw)] = (offset, raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise unreadable(offset, f"no {exc}" if isinstance(exc, KeyError) else one_line(str(exc), 120)) from None
    out: dict[Hashable, R] = {}
    for k, (offset, raw) in latest.items():
        try:
            out[k] = model.model_validate(raw)
        except ValidationError as exc:
            raise unreadable(offset, "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']} (it holds {one_line(repr(e.get('input')), 60)})"
                for e in exc.errors()[:3])) from None
    return out


class QueryScore(BaseModel):
    """One query of a scored run: counts, flags, greedy strengths/marginals, utility per patience."""

    config: str
    query_id: str
    query: str
    n_paths: int
    n_valid: int
    n_factual: int
    n_kept: int
    dropped: dict[str, int] = Field(default_factory=dict)
    strengths: list[float] = Field(default_factory=list)
    marginals: list[float] = Field(default_factory=list)
    utility: dict[str, float | None] = Field(default_factory=dict, description="patience (as text) -> creative utility; "
                                             "null when the query is unfinished (its flags say why)")
    flags: list[str] = Field(default_factory=list)


class CostTotal(BaseModel):
    """What a set of records cost: ``usd`` is ``None`` when no record has a known price."""

    usd: float | None = None
    n_calls: int = 0
    n_unknown: int = 0
    n_cached: int = 0


def _cost(c: CostTotal, n_errored: int = 0) -> str:
    """A cost for a summary line; no call at all (none answered, none errored) cost $0, not "unknown"."""
    if not c.n_calls and not n_errored:
        return usd(0.0)
    text = cost_text(c.usd, c.n_unknown, c.n_calls)
    return f"cost {text}" if c.usd is None else text


def calls_phrase(s: GenerateSummary) -> str:
    """The generation calls done of those planned; when some were refused or filtered (done, final,
    but no answer), how many of the done ones are answers: "6 of 6 calls done (2 answered, 4 refused,
    0 filtered)", else "2 of 2 calls answered"."""
    if not (s.n_refused or s.n_filtered):
        return f"{s.n_ok} of {s.n_calls} calls answered"
    not_asked = f"; {plural(s.n_not_asked, 'later round')} not asked after them" if s.n_not_asked else ""
    return (f"{s.n_ok} of {s.n_calls} calls done ({s.n_ok - s.n_refused - s.n_filtered} answered, {s.n_refused} "
            f"refused, {s.n_filtered} filtered{not_asked})")


def generate_line(s: GenerateSummary) -> str:
    """``cresowlve create generate`` in one line."""
    cut_off = f", {s.n_truncated} {CUT_OFF} (--max-tokens)" if s.n_truncated else ""
    repeated = f" (and {plural(s.n_duplicate_paths, 'duplicate')} dropped, as scoring does)" if s.n_duplicate_paths else ""
    return (f"create generate {one_line(s.model)} ({s.variation}): {calls_phrase(s)} "
            f"for {s.n_queries} queries; {s.n_paths} distinct paths{repeated}, {s.n_unparseable} unparseable answers{cut_off}; "
            f"{sent_phrase(s.n_sent, s.n_missing + s.n_error, 'all already in the run directory')}; {_cost(s.generation_cost, s.n_error)}; {s.run_dir}"
            f"{served_note(s.served_models)}")


def judge_outcome_notes(s: ScoreSummary) -> list[str]:
    """The judge answers that were not read in full, as phrases for the summary lines: refused or
    filtered ones (and what their triples get), and ones cut off at the token limit."""
    notes = []
    withheld = s.n_judge_refused + s.n_judge_filtered
    if withheld:
        kinds = ", ".join(f"{n} {word}" for n, word in ((s.n_judge_refused, "refused"), (s.n_judge_filtered, "filtered"))
                          if n)
        notes.append(f"{plural(withheld, 'judge answer')} refused or filtered ({kinds}): {WITHHELD_RULE}")
    if s.n_judge_truncated:
        notes.append(f"{plural(s.n_judge_truncated, 'judge answer')} {CUT_OFF}: read as far as they go")
    if s.n_judge_length_mismatch:
        notes.append(f"{plural(s.n_judge_length_mismatch, 'judge answer')} listing another number of triples than "
                     "its path has: verdicts taken in order, those missing unscored (flag length_mismatch)")
    return notes


def score_line(s: ScoreSummary) -> str:
    """``cresowlve create score`` in one line."""
    util = ", ".join(f"utility@{p} {'n/a' if u is None else f'{u:.3f}'}" for p, u in s.mean_utility.items())
    if s.n_unfinished_queries:
        util += f" over {s.n_queries - s.n_unfinished_queries} of {s.n_queries} queries ({s.n_unfinished_queries} unfinished, left out)"
    if s.n_withheld_queries:
        util += (f" ({plural(s.n_withheld_queries, 'query', 'queries')} with no path, the generation refused or "
                 "filtered: each a utility of 0)")
    if s.n_unparsed_queries:
        util += (f" ({plural(s.n_unparsed_queries, 'query', 'queries')} with no path, no answer of the generation "
                 "parsed: each a utility of 0)")
    notes = "".join(f"; {n}" for n in judge_outcome_notes(s))
    return (f"create score by {one_line(s.judge_model)}: {s.n_judged} of {s.n_to_judge} paths judged ({s.n_valid} valid, "
            f"{s.n_factual} factual of {s.n_paths}); triples scored: specificity {s.n_specificity_scored}, "
            f"factuality {s.n_factuality_scored} of {s.n_triples}{notes}; {util}; "
            f"{sent_phrase(s.n_sent, s.n_not_judged + s.n_judge_errors, 'all already judged' if s.n_to_judge else 'no path to judge')}; "
            f"{_cost(s.judge_cost, s.n_judge_errors)}; {s.score_dir}{served_note(s.judge_served_models, 'judge answers')}")


def unparsed_line(s: GenerateSummary | ScoreSummary) -> str | None:
    """Why a CREATE run is incomplete although every call answered (exit 1), or None."""
    if isinstance(s, GenerateSummary):
        answered = s.n_ok - s.n_refused - s.n_filtered
        cut_off = f" ({s.n_truncated} {CUT_OFF}: --max-tokens)" if s.n_truncated else ""
        return f"no answer parsed: {s.n_unparseable} of {answered} answers unparseable{cut_off}" if answered and \
            s.n_unparseable == answered else None
    answered = s.n_queries - s.n_unfinished_queries - s.n_withheld_queries
    if s.n_unparsed_queries and s.n_unparsed_queries == answered:  # every 0 is an answer nobody could read
        return (f"no path to judge: {s.n_unparsed_queries} of {s.n_queries} queries have no parsed answer "
                f"(`cresowlve create generate` reported them unparseable)")
    withheld = s.n_judge_refused + s.n_judge_filtered
    why = f" ({plural(withheld, 'judge answer')} refused or filtered)" if withheld else ""
    if s.n_triples and not (s.n_specificity_scored or s.n_factuality_scored):
        return f"no judgment parsed: 0 of {s.n_triples} triples scored by either judge{why}"
    # one judge with nothing read: its 0 for every triple decides every path's utility
    silent = [(judge, counted) for judge, n, counted in (
        ("specificity", s.n_specificity_scored, "every path's strength is 0"),
        ("factuality", s.n_factuality_scored, "every triple counts as not factual")) if s.n_triples and not n]
    if silent:
        judge, counted = silent[0]
        return f"no {judge} judgment parsed: 0 of {s.n_triples} triples scored by the {judge} judge{why}, so {counted}"
    return None


def records_cost(records: Iterable[GenerationRecord | JudgmentRecord]) -> CostTotal:
    """The cost of the given records as if run from scratch (cache hits at their original price),
    added up by the client's own :class:`~cresowlve_core.llm.pricing.CostMeter`."""
    meter = CostMeter()
    for r in records:
        meter.record(r.cost, cached=r.cached)
    known = meter.n_calls - meter.n_unknown_cost
    return CostTotal(usd=meter.run_cost if known else None, n_calls=meter.n_calls,
                     n_unknown=meter.n_unknown_cost, n_cached=meter.n_cached)


class GenerateSummary(BaseModel):
    """``summary.json`` of a generation run, and what ``cresowlve create generate`` prints."""

    run_dir: str
    model: str
    variation: str
    n_queries: int
    n_calls: int = Field(description="calls planned: queries x samples x rounds")
    n_ok: int
    n_refused: int = Field(0, description="calls the model refused (in n_ok: final, no paths)")
    n_filtered: int = Field(0, description="calls its provider's filter stopped (in n_ok: final, no paths)")
    n_error: int
    n_missing: int = Field(description="planned calls with no record (not reached, or after a stop)")
    n_not_asked: int = Field(0, description="iterate: later rounds never asked, their conversation ended at a "
                             "refused or filtered round (not in n_missing: running again does not ask them)")
    n_paths: int = Field(description="distinct paths per query (lower-cased, trimmed): the paths scoring judges")
    n_duplicate_paths: int = Field(0, description="paths listed again for the same query (in one answer, or across its "
                                   "samples and rounds): not in n_paths, dropped before scoring")
    n_unparseable: int
    n_truncated: int = Field(0, description="answers cut off at the token limit (in n_ok; their paths read as far as "
                             "they go, the query flagged `truncated`)")
    n_sent: int = Field(0, description="calls sent by this run (0 with none missing: every call was already in the run directory)")
    served_models: dict[str, int] = Field(default_factory=dict, description="the models the provider said answered, "
                                          "with how many calls each (calls naming none left out)")
    generation_cost: CostTotal
    stopped: str | None = None
    top_error: tuple[str, int] | None = Field(None, description="the most common error of the errored calls, and its count")
    repairs: list[str] = Field(default_factory=list)


class ScoreSummary(BaseModel):
    """``summary.json`` of a scoring run, and what ``cresowlve create score`` prints."""

    run_dir: str
    score_dir: str
    judge_model: str
    n_queries: int
    n_paths: int
    n_valid: int
    n_factual: int
    n_to_judge: int
    n_judged: int
    n_judge_errors: int
    n_judge_withheld: int = Field(0, description="judged paths where a judge refused or was filtered (its triples unscored)")
    #: judge answers (two per judged path) by outcome: never read (refused, filtered), or cut off at the token limit
    n_judge_refused: int = Field(0, description="judge answers the judge refused (their triples score 0)")
    n_judge_filtered: int = Field(0, description="judge answers its provider's filter stopped (their triples score 0)")
    n_judge_truncated: int = Field(0, description="judge answers cut off at the token limit (read as far as they go)")
    n_judge_length_mismatch: int = Field(0, description="judge answers that listed another number of verdicts than "
                                         "their path has triples: taken in order, the missing ones unscored, extra ones left out")
    n_not_judged: int
    n_sent: int = Field(0, description="paths sent to the judges by this run (0 with none left: all were already judged)")
    judge_served_models: dict[str, int] = Field(default_factory=dict, description="the models the provider said gave "
                                                "the judge answers, with how many answers each (answers naming none left out)")
    #: triples of the judged paths, and how many of them each judge actually scored (coverage)
    n_triples: int = 0
    n_specificity_scored: int = 0
    n_factuality_scored: int = 0
    mean_utility: dict[str, float | None]
    n_unfinished_queries: int = Field(0, description="queries left out of mean_utility: a generation call failed, "
                                      "the query was not generated or some of its samples/rounds not run, or a valid path is not judged")
    n_withheld_queries: int = Field(0, description="queries in mean_utility with no path because their generation was "
                                    "refused or filtered: each a utility of 0")
    n_unparsed_queries: int = Field(0, description="queries in mean_utility with no path because no answer of their "
                                    "generation could be parsed: each a utility of 0")
    factuality_threshold: float
    discount: str
    judge_cost: CostTotal
    generation_cost: CostTotal
    stopped: str | None = None
    top_error: tuple[str, int] | None = Field(None, description="the most common error of the errored paths, and its count")
    repairs: list[str] = Field(default_factory=list)
