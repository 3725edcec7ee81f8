"""Scored path sets — one (configuration, query) with its paths and per-triple judgments.

Everything downstream (utilities, leaderboard, charts) works on :class:`ScoredSet`, whether it
comes from the CREATE authors' recorded judgments (:func:`load_recorded`, no judge calls) or
from a run directory scored by :func:`cresowlve_core.create.score.score`
(:func:`cresowlve_core.create.score.scored_sets_from_run`, and
:func:`~cresowlve_core.create.score.load_user_runs` for the notebook's ``user_runs``).

The recorded files (``data/create/recorded/<model>__<variation>.jsonl``) store ``paths``,
``judged_*`` and ``validity_per_path`` as JSON lists — or, in other exports, as JSON strings or
Python-literal strings; :func:`parse_field` accepts all three.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cresowlve_core import jsonl
from cresowlve_core.create.paths import Path as PathT
from cresowlve_core.create.paths import check_validity
from cresowlve_core.create.queries import load_queries, query_id
from cresowlve_core.failures import InputError, MissingInput
from cresowlve_core.paths import shipped_data


def recorded_dir() -> Path:
    """The authors' recorded judgments, resolved when called (found with a data dir elsewhere too)."""
    return shipped_data("create", "recorded")
ValiditySource = Literal["recorded", "recomputed"]


#: flags of a set whose utility cannot be computed yet: a generation call that failed, a query never
#: generated or with some of its planned calls (samples, rounds) never run, a valid path the judge did
#: not score (an error, or not judged yet). Such a set is left out of means and rankings: a missing
#: answer or judgment is not a utility of 0, nor is a part of a set its whole
UNFINISHED_FLAGS = ("call_failed", "not_generated", "call_not_run", "valid_path_not_judged", "judge_error")


def unfinished(flags: Sequence[str]) -> str | None:
    """The first :data:`UNFINISHED_FLAGS` flag among ``flags``, or None when the utility can be computed."""
    return next((f for f in UNFINISHED_FLAGS if f in flags), None)


@dataclass
class ScoredSet:
    """One configuration's answer to one query, with per-path, per-triple judgments."""

    config: str  # e.g. "gpt-5-medium__original"
    query_id: str
    query: str
    entity_a: str
    entity_b: str
    rel_b: str
    paths: list[PathT]
    specificity: list[list[float]]
    factuality: list[list[float]]
    validity: list[int]
    validity_reasons: list[tuple[str, ...]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    raw_response: str | None = None
    #: where the set comes from: "recorded" (the CREATE authors' answers and judgments), "yours"
    #: (a run directory scored with ``cresowlve create score``), "local" or "run" (a run made here)
    origin: str = "recorded"
    judge: str | None = None  # the judge model of a scored run (None: recorded judgments)
    model_name: str | None = None  # explicit model / variation when ``config`` is a free label
    variation_name: str | None = None
    #: the utility settings ``cresowlve create score`` used for a scored run (``factuality_threshold``,
    #: ``discount``; empty: recorded, or not written down); a report recomputes at its own
    scored_with: dict[str, Any] = field(default_factory=dict)
    #: a scored run's judge coverage over its judged paths: (triples, scored by the specificity judge,
    #: scored by the factuality judge); an unscored triple counts as 0 (None: recorded judgments)
    judge_coverage: tuple[int, int, int] | None = None

    @property
    def model(self) -> str:
        return self.model_name or self.config.split("__")[0]

    @property
    def variation(self) -> str:
        if self.variation_name:
            return self.variation_name
        return self.config.split("__")[1] if "__" in self.config else "original"


def parse_field(value: Any) -> Any:
    """A list field that may arrive as a list, a JSON string or a Python-literal string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return ast.literal_eval(value)
    return value


def _as_paths(value: Any) -> list[PathT]:
    return [[[str(x) for x in t] for t in p] for p in parse_field(value) or []]


def _as_scores(value: Any) -> list[list[float]]:
    return [[float(x) for x in row] for row in parse_field(value) or []]


def recorded_set(config: str, row: dict[str, Any], validity: ValiditySource = "recorded") -> ScoredSet:
    """One recorded row → :class:`ScoredSet` (validity from the file, or recomputed by our checks)."""
    paths = _as_paths(row["paths"])
    checks = [check_validity(p, row["entity_a"], row["entity_b"]) for p in paths]
    if validity == "recorded":
        valid = [int(float(v) > 0) for v in parse_field(row["validity_per_path"])]
    else:
        valid = [int(c.valid) for c in checks]
    s = ScoredSet(
        config=config,
        query_id=row.get("query_id") or query_id(row.get("description", ""), row["entity_a"], row["entity_b"]),
        query=row["query"],
        entity_a=row["entity_a"],
        entity_b=row["entity_b"],
        rel_b=row["rel_b"],
        paths=paths,
        specificity=_as_scores(row["judged_specificity_per_triple"]),
        factuality=_as_scores(row["judged_factuality_per_triple"]),
        validity=valid,
        validity_reasons=[c.reasons for c in checks],
        raw_response=row.get("raw_response"),
    )
    n = len(paths)
    if not (len(s.specificity) == len(s.factuality) == len(s.validity) == n):
        raise InputError(f"{config}: judgments do not line up with the {n} paths of {s.query_id}")
    if (problem := judgment_problem(s)) is not None:
        raise InputError(f"{config}: {problem} ({s.query_id})")
    return s


def judgment_problem(s: ScoredSet) -> str | None:
    """What is wrong with a set's per-triple judgments, or None: one per triple, specificity a score
    0-5 and factuality 0-1 (NaN would make the utility NaN; 7 would pass any factuality threshold)."""
    for i, (path, spec, fact) in enumerate(zip(s.paths, s.specificity, s.factuality, strict=True), start=1):
        if len(spec) != len(path) or len(fact) != len(path):
            return (f"path {i} has {len(path)} triples but {len(spec)} specificity and {len(fact)} factuality "
                    "judgments")
        for name, scores, top in (("specificity", spec, 5), ("factuality", fact, 1)):
            bad = [x for x in scores if not 0 <= x <= top]  # NaN too
            if bad:
                return f"path {i}: {name} {bad[0]!r} is not a score 0-{top}"
    return None


def load_recorded(
    directory: Path | str | None = None, validity: ValiditySource = "recorded"
) -> list[ScoredSet]:
    """All recorded (configuration, query) sets; the configuration is the file name's stem.

    Queries are identified by their text-derived id, matched to the shipped query set when the
    query text is the same (so ids agree with ``data/create/queries.jsonl``).
    """
    folder = Path(directory if directory is not None else recorded_dir())
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        what = "is not a folder" if not folder.is_dir() else "holds no *.jsonl file of recorded sets"
        raise MissingInput(f"recorded_dir: {str(folder)!r} {what}")
    by_text = {q.query: q.id for q in load_queries()}
    out: list[ScoredSet] = []
    for f in files:
        lines: dict[str, list[int]] = defaultdict(list)
        for lineno, row in jsonl.read_jsonl_numbered(f, error=InputError, what="recorded set"):
            try:
                row.setdefault("query_id", by_text.get(row["query"]))
                s = recorded_set(f.stem, row, validity)
            except KeyError as exc:
                raise InputError(f"{f}:{lineno}: not a recorded CREATE set (no field {exc.args[0]!r})") from None
            except InputError as exc:  # judgments that do not line up with the paths, or off their scale
                raise InputError(f"{f}:{lineno}: {exc}") from None
            except (ValueError, SyntaxError, TypeError) as exc:  # a list field that does not parse or line up
                raise InputError(f"{f}:{lineno}: not a recorded CREATE set ({type(exc).__name__}: {exc})") from None
            lines[s.query_id].append(lineno)
            out.append(s)
        dupes = {q: n for q, n in lines.items() if len(n) > 1}
        if dupes:  # two sets of one (configuration, query) would count the query twice
            shown = "; ".join(f"{q!r} (lines {', '.join(map(str, n))})" for q, n in list(dupes.items())[:5])
            raise InputError(f"{f}: {len(dupes)} query(ies) answered on more than one line: {shown}; one set per query")
    return out
