"""The CREATE leaderboard: tables and altair charts over scored path sets.

:func:`analyse` is the one call a notebook makes: it embeds every path once (cached), computes
each set's distance matrix and greedy ordering, and returns a :class:`CreateReport` whose methods
give the leaderboard (utility at two patience values with seeded bootstrap CIs over queries and
the paper's standard deviation over queries, paths, valid/factual rates, quality and diversity),
paired comparisons of adjacent configurations over the queries both answered (mean difference,
paired bootstrap CI of the mean difference and the paired sign-flip permutation p of the same mean, Holm across the adjacent pairs), the utility-vs-patience curves, the
quality-vs-factuality trade-off, distinctiveness against the population of all configurations,
and example paths. Utilities use :mod:`cresowlve_core.create.utility` (reference discount and
strength rule unless told otherwise).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from cresowlve_core.create.distance import (
    Embedder,
    cosine_distance,
    default_embedder,
    embedded,
    path_text,
    transform_distance,
)
from cresowlve_core.create.judges import StrengthScope, factuality_rate, path_strength
from cresowlve_core.create.scored import ScoredSet, unfinished
from cresowlve_core.create.utility import (
    PATIENCE_GRID,
    Discount,
    UtilityBreakdown,
    utility_breakdown,
)
from cresowlve_core.llm.types import CONCURRENCY
from cresowlve_core.reporting import MISSING, jsonable, say, show
from cresowlve_core.stats import bootstrap_mean_ci, format_p, holm, paired_difference, stable_seed, zero_width
from cresowlve_core.text import plural

FACTUALITY_THRESHOLDS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _key(s: ScoredSet) -> tuple[str, str]:
    return (s.config, s.query_id)


@dataclass
class CreateReport:
    """Scored sets with their embeddings and distance matrices, ready for tables and charts."""

    sets: list[ScoredSet]
    vectors: dict[tuple[str, str], np.ndarray]
    distances: dict[tuple[str, str], np.ndarray]
    discount: Discount = "reference"
    strength_scope: StrengthScope = "reference"
    _cache: dict[tuple[tuple[str, str], float], UtilityBreakdown] = field(default_factory=dict)

    # ---- per set

    def breakdown(self, s: ScoredSet, factuality_threshold: float = 1.0) -> UtilityBreakdown:
        k = (_key(s), factuality_threshold)
        if k not in self._cache:
            self._cache[k] = utility_breakdown(
                s.paths,
                s.specificity,
                s.factuality,
                s.validity,
                factuality_threshold,
                distances=self.distances[_key(s)],
                strength_scope=self.strength_scope,
            )
        return self._cache[k]

    def configs(self) -> list[str]:
        return sorted({s.config for s in self.sets})

    # ---- tables

    def per_query(self, patience: Sequence[float] = (0.7, 0.9), factuality_threshold: float = 1.0) -> pd.DataFrame:
        """One row per (config, query): counts and the utility at each patience."""
        rows = []
        for s in self.sets:
            b = self.breakdown(s, factuality_threshold)
            valid_idx = [i for i, v in enumerate(s.validity) if v]
            kept = b.kept.indices
            d = self.distances[_key(s)]
            pair = d[np.ix_(kept, kept)][np.triu_indices(len(kept), 1)] if len(kept) > 1 else np.array([])
            row = {
                "config": s.config,
                "origin": s.origin,
                "model": s.model,
                "variation": s.variation,
                "query_id": s.query_id,
                "n_paths": len(s.paths),
                "n_valid": len(valid_idx),
                "n_factual": len(kept) + b.kept.dropped.get("no_strength", 0),
                "n_kept": len(kept),
                "max_strength": max(b.kept.strengths) if kept else np.nan,
                "avg_pairwise_d": float(pair.mean()) if pair.size else np.nan,
                "triple_factuality": float(
                    np.mean([factuality_rate(s.factuality[i]) for i in valid_idx]) if valid_idx else np.nan
                ),
            }
            for p in patience:
                row[f"utility@{p}"] = b.utility(p, self.discount)
            rows.append(row)
        return pd.DataFrame(rows)

    def leaderboard(
        self,
        patience: Sequence[float] = (0.7, 0.9),
        n_boot: int = 1000,
        seed: int = 0,
        factuality_threshold: float = 1.0,
    ) -> pd.DataFrame:
        """Per configuration: mean utility at each patience with a 95% bootstrap CI over queries
        (none over a single query, nor over queries that all have the same utility) and the standard deviation over queries (``sd@p``, the paper's Table 1 parentheses), mean
        paths per query, valid rate (of all paths), factual rate (of valid paths), |U| (valid
        and factual paths per query), mean max strength, mean pairwise distance. Sorted by the
        utility at the last patience."""
        pq = self.per_query(patience, factuality_threshold)
        rows = []
        for config, g in pq.groupby("config", sort=True):
            row: dict[str, object] = {"config": config, "origin": g["origin"].iloc[0], "n_queries": len(g)}
            for p in patience:
                est = bootstrap_mean_ci(g[f"utility@{p}"].to_numpy(), n_boot=n_boot, seed=seed)
                row[f"utility@{p}"] = est.value
                # one query gives no interval over queries (every resample is that query), as no sd;
                # nor do queries of one utility each: every resample gives it, a zero width no sample has
                spread = len(g) > 1 and not zero_width(est.low, est.high)
                row[f"ci_low@{p}"] = est.low if spread else np.nan
                row[f"ci_high@{p}"] = est.high if spread else np.nan
                row[f"sd@{p}"] = float(g[f"utility@{p}"].std(ddof=1)) if len(g) > 1 else np.nan
            n_paths, n_valid = g["n_paths"].sum(), g["n_valid"].sum()
            row.update(
                {
                    "mean_paths": g["n_paths"].mean(),
                    "valid_rate": n_valid / n_paths if n_paths else np.nan,
                    "factual_rate": g["n_factual"].sum() / n_valid if n_valid else np.nan,
                    "mean_kept": g["n_kept"].mean(),
                    "max_strength": g["max_strength"].mean(),
                    "avg_pairwise_d": g["avg_pairwise_d"].mean(),
                }
            )
            rows.append(row)
        return pd.DataFrame(rows).sort_values(f"utility@{patience[-1]}", ascending=False).reset_index(drop=True)

    def comparisons(
        self,
        patience: Sequence[float] = (0.7, 0.9),
        n_boot: int = 1000,
        seed: int = 0,
        factuality_threshold: float = 1.0,
    ) -> pd.DataFrame:
        """Adjacent configurations of the leaderboard (ranked by the utility at the last
        patience), compared **paired by query**: over the queries both answered, the mean
        utility of each, their difference ``a − b`` with a seeded 95% bootstrap interval over
        those queries, the two-sided paired sign-flip permutation p of that same mean difference
        (one estimand for the interval and the test; exact up to 16 queries, else ``n_boot``
        seeded sign patterns), and ``p_holm`` (Holm across the
        adjacent pairs at that patience). Queries differ far more in how much utility they allow
        than models do, so pairing by query is what makes a ranking step testable; an unpaired
        comparison of the two leaderboard intervals is much weaker. ``n_a_only``/``n_b_only``:
        queries only one of the two answered (left out)."""
        pq = self.per_query(patience, factuality_threshold)
        board = self.leaderboard(patience, n_boot=n_boot, seed=seed, factuality_threshold=factuality_threshold)
        order = board["config"].tolist()
        rows = []
        for p in patience:
            col = f"utility@{p}"
            wide = pq.pivot_table(index="query_id", columns="config", values=col, aggfunc="mean")
            part = []
            for rank, (a, b) in enumerate(zip(order, order[1:]), start=1):
                x, y = wide[a], wide[b]
                d = paired_difference(x.to_numpy(), y.to_numpy(), n_boot=n_boot, rng=stable_seed(seed, "create-paired", a, b, p))
                part.append({"patience": p, "rank": rank, "a": a, "b": b, "n_queries": d.n,
                             "n_a_only": int((x.notna() & y.isna()).sum()), "n_b_only": int((y.notna() & x.isna()).sum()),
                             "mean_a": d.mean_x, "mean_b": d.mean_y, "diff": d.diff, "ci_low": d.low, "ci_high": d.high,
                             "p_sign_flip": d.p_sign_flip, "note": d.note})
            adjusted: np.ndarray = holm(np.array([r["p_sign_flip"] for r in part], dtype=float))
            for r, q in zip(part, adjusted):
                r["p_holm"] = float(q)
            rows.extend(part)
        cols = ["patience", "rank", "a", "b", "n_queries", "n_a_only", "n_b_only", "mean_a", "mean_b", "diff", "ci_low",
                "ci_high", "p_sign_flip", "p_holm", "note"]
        return pd.DataFrame(rows, columns=cols)

    def patience_curves(self, grid: Sequence[float] = PATIENCE_GRID, factuality_threshold: float = 1.0) -> pd.DataFrame:
        """Mean utility over queries at each patience, per configuration (long format)."""
        rows: list[dict[str, object]] = []
        for s in self.sets:
            b = self.breakdown(s, factuality_threshold)
            rows.extend({"config": s.config, "patience": float(p), "utility": u} for p, u in zip(grid, b.curve(grid, self.discount)))
        df = pd.DataFrame(rows)
        return df.groupby(["config", "patience"], as_index=False)["utility"].mean()

    def factuality_tradeoff(
        self, thresholds: Sequence[float] = FACTUALITY_THRESHOLDS, patience: float = 0.9
    ) -> pd.DataFrame:
        """Mean utility at ``patience`` as the factuality threshold varies (0 = keep all valid paths)."""
        rows = []
        for t in thresholds:
            for s in self.sets:
                rows.append({"config": s.config, "threshold": float(t), "utility": self.breakdown(s, t).utility(patience, self.discount)})
        return pd.DataFrame(rows).groupby(["config", "threshold"], as_index=False)["utility"].mean()

    def distinctiveness(self, quality_floor: float = 3.0, factuality_threshold: float = 1.0) -> pd.DataFrame:
        """ν against the population: for each set, its valid, factual paths with strength
        ``> quality_floor`` (the paper's filter) against every valid path of the *other*
        configurations for the same query. Per configuration: mean ν(u) over those paths, mean
        ν(U) over queries that have any, and how many paths/queries that covers. A query where no
        other configuration has a valid path has no population to be distinct from: it gets no ν
        (not the largest, 1) and is counted in ``n_queries_no_population``."""
        by_query: dict[str, list[ScoredSet]] = defaultdict(list)
        for s in self.sets:
            by_query[s.query_id].append(s)
        per_path: dict[str, list[float]] = defaultdict(list)
        per_set: dict[str, list[float]] = defaultdict(list)
        alone: dict[str, int] = defaultdict(int)
        for _qid, group in by_query.items():
            for s in group:
                b = self.breakdown(s, factuality_threshold)
                own = [i for i, st in zip(b.kept.indices, b.kept.strengths) if st > quality_floor]
                if not own:
                    continue
                others = [
                    self.vectors[_key(o)][[i for i, v in enumerate(o.validity) if v]] for o in group if o.config != s.config
                ]
                if not any(len(o) for o in others):  # e.g. a query of your run the recorded ones do not answer
                    alone[s.config] += 1
                    continue
                pop = np.concatenate([o for o in others if len(o)], axis=0)
                d = np.asarray(transform_distance(cosine_distance(self.vectors[_key(s)][own], pop)))
                nu = [float(x) for x in d.min(axis=1)]
                per_path[s.config].extend(nu)
                per_set[s.config].append(max(nu))
        rows = [
            {
                "config": c,
                "avg_nu_path": float(np.mean(per_path[c])) if per_path[c] else np.nan,
                "avg_nu_set": float(np.mean(per_set[c])) if per_set[c] else np.nan,
                "n_paths": len(per_path[c]),
                "n_queries": len(per_set[c]),
                "n_queries_no_population": alone[c],
            }
            for c in self.configs()
        ]
        return pd.DataFrame(rows).sort_values("avg_nu_set", ascending=False).reset_index(drop=True)

    def example_query_id(self) -> str:
        """The query answered by the most configurations (first in file order on ties)."""
        counts: dict[str, int] = defaultdict(int)
        for s in self.sets:
            counts[s.query_id] += 1
        return max(counts, key=lambda q: counts[q]) if counts else ""

    def query_text(self, query_id: str) -> str:
        return next((s.query for s in self.sets if s.query_id == query_id), "")

    def example_paths(self, query_id: str | None = None, per_config: int = 2,
                      factuality_threshold: float = 1.0) -> pd.DataFrame:
        """The first ``per_config`` greedy picks of each configuration for one query (default:
        :meth:`example_query_id`) at ``factuality_threshold``, with strength and marginal score."""
        query_id = query_id or self.example_query_id()
        rows = []
        for s in self.sets:
            if s.query_id != query_id:
                continue
            b = self.breakdown(s, factuality_threshold)
            for pos, (j, m) in enumerate(zip(b.greedy.order[:per_config], b.greedy.marginals)):
                i = b.kept.indices[j]
                rows.append(
                    {
                        "config": s.config,
                        "rank": pos + 1,
                        "path": " → ".join(f"({', '.join(t)})" for t in s.paths[i]),
                        "strength": path_strength(s.specificity[i], self.strength_scope),
                        "marginal": round(m, 3),
                    }
                )
            if not b.greedy.order:
                rows.append({"config": s.config, "rank": 0, "path": "(no valid, factual path)", "strength": None, "marginal": 0.0})
        return pd.DataFrame(rows)

    def flags(self) -> pd.DataFrame:
        """Per configuration: how often each flag (parse, judge, validity reason) occurred."""
        rows = []
        for s in self.sets:
            for f in s.flags:
                rows.append({"config": s.config, "flag": f})
            for reasons in s.validity_reasons:
                rows.extend({"config": s.config, "flag": f"invalid:{r}"} for r in reasons)
        if not rows:
            return pd.DataFrame(columns=["config", "flag", "count"])
        return pd.DataFrame(rows).value_counts().rename("count").reset_index()


def analyse(
    sets: Sequence[ScoredSet],
    *,
    embedder: Embedder | None = None,
    discount: Discount = "reference",
    strength_scope: StrengthScope = "reference",
) -> CreateReport:
    """Embed every path of every set once (through the embedding cache) and build the report."""
    emb = embedder or default_embedder
    texts = [path_text(p) for s in sets for p in s.paths]
    all_vecs = embedded(emb, texts) if texts else np.zeros((0, 384), dtype=np.float32)
    vectors, distances = {}, {}
    start = 0
    for s in sets:
        v = np.asarray(all_vecs[start : start + len(s.paths)])
        start += len(s.paths)
        vectors[_key(s)] = v
        if len(s.paths):
            d = np.asarray(transform_distance(cosine_distance(v, v)), dtype=np.float64)
            np.fill_diagonal(d, 1.0)
        else:
            d = np.zeros((0, 0))
        distances[_key(s)] = d
    return CreateReport(list(sets), vectors, distances, discount, strength_scope)


def validity_agreement(sets: Sequence[ScoredSet]) -> pd.DataFrame:
    """Per recorded configuration: the authors' validity flags vs our full structural check on the
    same paths (sets of other origins carry our own check, so they are left out)."""
    rows = []
    for s in sets:
        if s.origin != "recorded":
            continue
        for v, reasons in zip(s.validity, s.validity_reasons):
            rows.append({"config": s.config, "recorded_valid": bool(v), "our_valid": not reasons})
    df = pd.DataFrame(rows)
    return (
        df.assign(agree=df.recorded_valid == df.our_valid)
        .groupby("config")
        .agg(paths=("agree", "size"), agree=("agree", "mean"), recorded_valid=("recorded_valid", "mean"), our_valid=("our_valid", "mean"))
        .reset_index()
    )


# --------------------------------------------------------------------------- your runs and the local model


@dataclass
class LoadedSets:
    """The sets a leaderboard ranks: the recorded ones and the user's scored runs."""

    sets: list[ScoredSet]
    yours: list[ScoredSet]
    message: str
    user_table: pd.DataFrame | None = None
    embedded: bool = False  # one of the user's runs was generated by the embedded model

    @property
    def user_configs(self) -> list[str]:
        return sorted({s.config for s in self.yours})


def first_queries(sets: Sequence[ScoredSet], n_queries: int | None) -> list[ScoredSet]:
    """The sets of the first ``n_queries`` queries in the order of the shipped queries file (the
    local model's section answers the first ones too), queries it does not list last by id
    (``None``: every set)."""
    if n_queries is None:
        return list(sets)
    if isinstance(n_queries, bool) or not isinstance(n_queries, int) or n_queries < 1:
        raise ValueError(f"n_queries must be a whole number >= 1, or None for every query; got {n_queries!r}")
    from cresowlve_core.create.queries import load_queries

    order = {q.id: i for i, q in enumerate(load_queries(None))}
    ids = sorted({s.query_id for s in sets}, key=lambda q: (order.get(q, len(order)), q))
    keep = set(ids[:n_queries])
    return [s for s in sets if s.query_id in keep]


def load_sets(recorded_dir: str | Path | None = None, user_runs: Sequence[str] | str | None = None,
              n_queries: int | None = None, *, factuality_threshold: float = 1.0,
              discount: Discount = "reference") -> LoadedSets:
    """The authors' recorded sets (``recorded_dir``, default ``data/create/recorded``; with
    ``n_queries``, those of that many queries: :func:`first_queries`) plus the run directories
    matching ``user_runs`` (globs of scored ``cresowlve create score`` runs, kept whole), marked as
    the user's. The message names each of the user's runs scored with another factuality threshold
    or discount than the report's (``factuality_threshold``, ``discount``): the report recomputes
    its utilities from the judgments at its own, so they differ from what ``create score`` printed."""
    from cresowlve_core.create.score import load_user_runs
    from cresowlve_core.create.scored import load_recorded

    every_yours = load_user_runs(user_runs)
    yours = [s for s in every_yours if unfinished(s.flags) is None]
    left_out = len(every_yours) - len(yours)
    every = load_recorded(recorded_dir or None)
    recorded = first_queries(every, n_queries)
    sets = recorded + yours
    n_configs = len({s.config for s in sets})
    n_yours = len({s.config for s in yours})
    n_all = len({s.query_id for s in every})
    subset = (f"recorded answers to {len({s.query_id for s in recorded})} of the {n_all} queries "
              f"(n_queries = {n_queries}; None ranks all of them); " if len(recorded) < len(every) else "")
    message = (subset + f"{len(sets)} (configuration, query) sets, {sum(len(s.paths) for s in sets)} paths, "
               f"{plural(n_configs, 'configuration')}" + (f", of which {n_yours} are your runs." if yours else "."))
    report_settings = {"factuality_threshold": float(factuality_threshold), "discount": discount}
    rescored = sorted({f"`{config_display_name(s.config)}` ({_settings_text(s.scored_with)})" for s in every_yours
                       if any(k in s.scored_with and s.scored_with[k] != v for k, v in report_settings.items())})
    if rescored:
        message += (f" **Recomputed at this report's settings ({_settings_text(report_settings)}):** "
                    f"{', '.join(rescored)} {'was' if len(rescored) == 1 else 'were'} scored with other settings, "
                    "so the utilities here differ from those `cresowlve create score` printed.")
    if left_out:
        message += (f" **Left out: {plural(left_out, '(configuration, query) set')} of your runs** whose generation "
                    "or judging is unfinished (a call failed, a query or some of its samples/rounds was not generated, a valid path was not "
                    "judged; `incomplete` in the table below): a missing answer or judgment is not a utility of 0. "
                    "Run `cresowlve create generate` and `cresowlve create score` again to finish them.")
    return LoadedSets(sets, yours, message, user_runs_table(every_yours) if every_yours else None,
                      any(is_embedded_model(s.model) for s in every_yours))


def _settings_text(settings: dict[str, Any]) -> str:
    """``factuality_threshold 0.5, discount paper`` (the utility settings a run was scored with)."""
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in settings.items()) or "not recorded"


def user_runs_table(sets: Sequence[ScoredSet]) -> pd.DataFrame:
    """One row per configuration of the user's scored runs: model, variation, judge, queries, paths, and
    the queries with a generation call refused or filtered (with no path, a utility of 0), and those
    with no path because no answer of their generation parsed (``unparsed``: a utility of 0 too); the
    judges' coverage: triples of the judged paths, and how many each judge scored (an unscored
    triple counts as 0, as `cresowlve create score` says)."""
    rows: dict[str, dict[str, object]] = {}
    for s in sets:
        if s.origin != "yours":
            continue
        row = rows.setdefault(s.config, {"config": s.config, "model": s.model, "variation": s.variation,
                                         "judge": s.judge, "scored_with": _settings_text(s.scored_with), "n_queries": 0, "n_paths": 0, "n_valid": 0,
                                         "n_not_judged": 0, "incomplete": 0, "refused": 0, "filtered": 0,
                                         "unparsed": 0, "n_triples": 0, "n_specificity_scored": 0,
                                         "n_factuality_scored": 0})
        row["n_queries"] = int(row["n_queries"]) + 1  # type: ignore[call-overload]
        row["n_paths"] = int(row["n_paths"]) + len(s.paths)  # type: ignore[call-overload]
        row["n_valid"] = int(row["n_valid"]) + int(sum(s.validity))  # type: ignore[call-overload]
        row["n_not_judged"] = int(row["n_not_judged"]) + s.flags.count("valid_path_not_judged") + s.flags.count("judge_error")  # type: ignore[call-overload]
        row["incomplete"] = int(row["incomplete"]) + (unfinished(s.flags) is not None)  # type: ignore[call-overload]
        for outcome in ("refused", "filtered"):  # queries with a generation call refused / filtered (utility 0 if no path)
            row[outcome] = int(row[outcome]) + (outcome in s.flags)  # type: ignore[call-overload]
        unparsed = not s.paths and "parse_unparseable" in s.flags and not {"refused", "filtered"} & set(s.flags)
        row["unparsed"] = int(row["unparsed"]) + unparsed  # type: ignore[call-overload]
        for col, n in zip(("n_triples", "n_specificity_scored", "n_factuality_scored"), s.judge_coverage or (0, 0, 0),
                          strict=True):
            row[col] = int(row[col]) + n  # type: ignore[call-overload]
    return pd.DataFrame(list(rows.values()))


def is_embedded_model(model: str | None) -> bool:
    """Whether ``model`` is the embedded Gemma 3 270M (reports built on it carry the banner)."""
    from cresowlve_core.llm.local import LOCAL_MODEL

    return bool(model) and model == LOCAL_MODEL


@dataclass
class LocalSection:
    """What the notebook shows for the offline local model: a message, a table, a record."""

    message: str
    record: dict[str, object]
    table: pd.DataFrame | None = None
    embedded: bool = False  # built on the embedded 270M base model: show the banner
    stages: list[dict[str, Any]] = field(default_factory=list)  # generation and judging, as `create` would exit


def local_section(
    base_url: str | None,
    model: str = "gemma3-270m",
    *,
    n_queries: int = 3,
    run_dir: str | None = None,
    max_tokens: int = 512,
    api_key_env: str | None = None,
    reference: CreateReport | None = None,
    patience: float = 0.9,
    factuality_threshold: float = 1.0,
    discount: Discount | None = None,
    concurrency: int = CONCURRENCY,
) -> LocalSection:
    """Generate and self-judge ``n_queries`` queries with a local endpoint, or explain the skip.

    Generation (original variation) and judging run through :mod:`~cresowlve_core.create.generate`
    and :mod:`~cresowlve_core.create.score` like any hosted model, the same endpoint judging its
    own paths; a base model (the embedded one) gets their few-shot completion prompts. The table puts the local model's per-query results next to the reference
    configurations' utilities on the same queries, both at ``patience`` and ``factuality_threshold``
    and under one ``discount`` (None: the reference's, else the released code's).
    """
    if not base_url:
        return LocalSection(
            "**Skipped**: no `local_base_url` was given. Set it to an OpenAI-compatible endpoint "
            "(e.g. the embedded Gemma 3 270M server of `cresowlve serve-local`) to generate and "
            "score a few queries end to end with it.",
            {"status": "skipped", "reason": "local_base_url is None"},
        )
    import tempfile

    from cresowlve_core.create.generate import GENERATE, GENERATE_OPTIONS, generate, read_generation_manifest
    from cresowlve_core.create.records import CUT_OFF, calls_phrase, judge_outcome_notes, unparsed_line
    from cresowlve_core.create.score import JUDGE_OPTIONS, JUDGES, score, scored_sets_from_run
    from cresowlve_core.exitcodes import stage_record
    from cresowlve_core.llm.types import Endpoint

    if discount is None:
        discount = reference.discount if reference is not None else "reference"
    elif reference is not None and reference.discount != discount:
        raise ValueError(f"discount {discount!r} differs from the reference's {reference.discount!r}: "
                         "their utilities would not compare")
    run_dir = run_dir or tempfile.mkdtemp(prefix="create_local_")
    endpoint = Endpoint(base_url, model, api_key_env)
    fewshot = GENERATE.is_fewshot(endpoint)  # a base model: the few-shot variant of each step
    gen = generate(None, endpoint, run_dir, limit=n_queries, progress=False,
                   options=GENERATE_OPTIONS.model_copy(update={"max_tokens": max_tokens, "concurrency": concurrency}))
    sc = score(run_dir, endpoint, progress=False,
               options=JUDGE_OPTIONS.model_copy(update={"max_tokens": max_tokens, "concurrency": concurrency}))
    sets = scored_sets_from_run(run_dir, f"{model}__original", origin="local")
    local = analyse(sets, discount=discount)
    pq = local.per_query((patience,), factuality_threshold)
    flags = {s.query_id: ", ".join(sorted(set(s.flags))) for s in sets}
    # a query whose generation call failed or whose valid path is not judged has no utility yet, not 0
    unfinished_ids = {s.query_id for s in sets if unfinished(s.flags) is not None}
    pq.loc[pq.query_id.isin(unfinished_ids), f"utility@{patience}"] = np.nan
    table = pq[["config", "query_id", "n_paths", "n_valid", "n_factual", f"utility@{patience}"]].copy()
    table["flags"] = table["query_id"].map(flags)
    if reference is not None:
        ref = reference.per_query((patience,), factuality_threshold)
        ref = ref[ref.query_id.isin(set(table.query_id))]
        wide = ref.pivot_table(index="query_id", columns="config", values=f"utility@{patience}")
        table = table.merge(wide.add_prefix("ref:").reset_index(), on="query_id", how="left")
    stopped = gen.stopped or sc.stopped
    gen_prompts = read_generation_manifest(run_dir).prompts
    rec: dict[str, object] = {
        "status": "stopped" if stopped else "ran",
        "stopped": stopped,
        "model": model,
        "run_dir": str(run_dir),
        "n_queries": len(sets),
        "n_calls_ok": gen.n_ok,
        "n_paths": int(pq["n_paths"].sum()),
        "n_unparseable": gen.n_unparseable,
        "n_truncated": gen.n_truncated,
        "n_valid": int(pq["n_valid"].sum()),
        "n_factual": int(pq["n_factual"].sum()),
        f"mean_utility@{patience}": float(pq[f"utility@{patience}"].mean()) if len(pq) > len(unfinished_ids) else None,
        "n_unfinished_queries": len(unfinished_ids),
        "n_judge_errors": sc.n_judge_errors,
        "n_queries_with_paths": int((pq["n_paths"] > 0).sum()),
        "n_triples_judged": sc.n_triples,
        "n_specificity_scored": sc.n_specificity_scored,
        "n_factuality_scored": sc.n_factuality_scored,
        "n_judge_refused": sc.n_judge_refused,
        "n_judge_filtered": sc.n_judge_filtered,
        "n_judge_truncated": sc.n_judge_truncated,
        "prompts": {"generate": gen_prompts, "judges": JUDGES.prompt_tags(endpoint)},
        "factuality_threshold": factuality_threshold,
        "discount": discount,
    }
    unscored = 2 * sc.n_triples - sc.n_specificity_scored - sc.n_factuality_scored
    coverage = (f"the judges scored {sc.n_specificity_scored} (specificity) and {sc.n_factuality_scored} "
                f"(factuality) of the {sc.n_triples} triples of the judged paths"
                + (f" ({unscored} judgments unscored, counted as 0 / not factual)" if unscored else "")
                + "".join(f" ({n})" for n in judge_outcome_notes(sc)))
    cut_off = f", {gen.n_truncated} {CUT_OFF}" if gen.n_truncated else ""
    mean = rec[f"mean_utility@{patience}"]
    utility = f"mean utility at p = {patience}: {MISSING if mean is None else f'{mean:.2f}'}"
    if unfinished_ids:
        utility += (f" over {len(sets) - len(unfinished_ids)} of {len(sets)} queries ({len(unfinished_ids)} unfinished: "
                    "a generation call failed or a valid path is not judged; left out, not counted as 0)")
    message = (
        f"Ran `{model}` at `{base_url}` on {len(sets)} queries: {calls_phrase(gen)}, "
        f"{rec['n_paths']} paths parsed on {rec['n_queries_with_paths']} queries ({gen.n_unparseable} answers "
        f"unparseable{cut_off}), {rec['n_valid']} structurally valid, {rec['n_factual']} judged factual by the same "
        f"model; {coverage}; {utility}. "
        + (f"`{model}` is a base model: it got few-shot completion prompts over `/v1/completions` "
           f"({', '.join(gen_prompts + JUDGES.prompt_tags(endpoint))}), not the paper's chat prompts. "
           if fewshot else "")
        + f"Run directory: `{run_dir}`."
        + (f" **Stopped early:** {stopped}." if stopped else "")
    )
    stages = [stage_record(gen, "calls", unparsed=unparsed_line(gen)),
              stage_record(sc, "paths to judge", unparsed=unparsed_line(sc))]
    return LocalSection(message, rec, table, embedded=is_embedded_model(model), stages=stages)


# --------------------------------------------------------------------------- display


#: reasoning efforts a recorded file name can end with (``gpt-5.4-medium__original``)
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_CONFIG_KEY = re.compile(r"^(?P<stem>.+?)__(?P<variation>[^ ]+)(?P<yours> \(yours: .*\))?$")


def config_display_name(config: str) -> str:
    """The one configuration name the other reports use (:func:`~cresowlve_core.analysis.loading.config_name`:
    the model with its effort) for a CREATE set's ``model__variation`` key, the variation added when it
    is not the original, the ``(yours: ...)`` mark kept: ``gpt-5.4-medium__original`` -> ``gpt-5.4 (medium)``,
    ``gpt-4.1__iterate`` -> ``gpt-4.1, iterate``."""
    from cresowlve_core.analysis.loading import config_name

    m = _CONFIG_KEY.match(config)
    if m is None:
        return config
    model, _, effort = m["stem"].rpartition("-")
    name = config_name(model, effort) if model and effort in _EFFORTS else config_name(m["stem"], None)
    if m["variation"] != "original":
        name += f", {m['variation']}"
    return name + (m["yours"] or "")


def display_named(sets: Sequence[ScoredSet]) -> list[ScoredSet]:
    """``sets`` with each configuration under :func:`config_display_name` (model and variation kept);
    keys whose names would collide keep their keys."""
    from dataclasses import replace

    names = {c: config_display_name(c) for c in {s.config for s in sets}}
    taken = defaultdict(list)
    for key, name in names.items():
        taken[name].append(key)
    names = {k: (n if len(taken[n]) == 1 else k) for k, n in names.items()}
    return [replace(s, config=names[s.config], model_name=s.model, variation_name=s.variation) for s in sets]


def sets_section(recorded_dir: str | Path | None = None, user_runs: Sequence[str] | str | None = None, *,
                 discount: Discount = "reference", n_queries: int | None = None,
                 factuality_threshold: float = 1.0) -> CreateReport:
    """Load the recorded sets (of ``n_queries`` queries: :func:`load_sets`) and the user's scored
    runs under their configuration names, show the embedded-model banner when one of the user's runs
    is the embedded model's, record the counts, and embed every path (:func:`analyse`)."""
    from cresowlve_core.banners import show_banner
    from cresowlve_core.notebook_records import record

    loaded = load_sets(recorded_dir, user_runs, n_queries, factuality_threshold=factuality_threshold, discount=discount)
    if loaded.embedded:
        show_banner("embedded", "At least one of your runs was generated by the embedded model.")
    sets = display_named(loaded.sets)
    record("n_queries", len({s.query_id for s in sets if s.origin == "recorded"}))
    record("n_sets", len(sets))
    record("n_paths", sum(len(s.paths) for s in sets))
    record("user_configs", sorted({s.config for s in sets if s.origin == "yours"}))
    say(loaded.message)
    if loaded.user_table is not None:
        show(loaded.user_table.assign(config=loaded.user_table["config"].map(config_display_name)))
    return analyse(sets, discount=discount)


def leaderboard_display(board: pd.DataFrame, patience: Sequence[float]) -> pd.DataFrame:
    """:meth:`CreateReport.leaderboard` for reading: at each patience the utility, its interval as
    ``[low, high]`` and the standard deviation over queries."""
    out = board[["config", "origin", "n_queries"]].copy()
    for p in patience:
        out[f"utility (p = {p})"] = board[f"utility@{p}"]
        out[f"95% CI (p = {p})"] = [MISSING if pd.isna(lo) else f"[{lo:.2f}, {hi:.2f}]"
                                    for lo, hi in zip(board[f"ci_low@{p}"], board[f"ci_high@{p}"])]
        out[f"sd (p = {p})"] = board[f"sd@{p}"]
    rest = ["mean_paths", "valid_rate", "factual_rate", "mean_kept", "max_strength", "avg_pairwise_d"]
    return pd.concat([out, board[rest]], axis=1)


def leaderboard_section(rep: CreateReport, patience: Sequence[float], *, n_boot: int = 1000, seed: int = 0,
                        factuality_threshold: float = 1.0) -> pd.DataFrame:
    """The leaderboard table and chart; records the mean utility per configuration at each patience
    (``utility@P``) and returns the board."""
    from cresowlve_core.notebook_records import record

    board = rep.leaderboard(patience, n_boot=n_boot, seed=seed, factuality_threshold=factuality_threshold)
    for p in patience:
        record(f"utility@{p}", {r.config: round(float(r[f"utility@{p}"]), 4) for _, r in board.iterrows()})
    show(leaderboard_display(board, patience), 2)
    show(leaderboard_chart(board, patience[-1]))
    return board


def paired_section(rep: CreateReport, patience: Sequence[float], *, n_boot: int = 1000, seed: int = 0,
                   factuality_threshold: float = 1.0) -> list[dict[str, object]]:
    """Adjacent configurations compared on the queries both answered (:meth:`CreateReport.comparisons`)."""
    paired = rep.comparisons(patience, n_boot=n_boot, seed=seed, factuality_threshold=factuality_threshold)
    show(comparisons_display(paired), 2)
    return jsonable(paired)  # type: ignore[no-any-return]


def patience_section(rep: CreateReport, factuality_threshold: float = 1.0) -> dict[str, float]:
    """Utility vs patience per configuration; returns the utility at p = 1."""
    curves = rep.patience_curves(factuality_threshold=factuality_threshold)
    show(patience_chart(curves))
    at_one = curves[curves.patience == 1.0]
    return {str(c): round(float(u), 4) for c, u in zip(at_one["config"], at_one["utility"])}


def tradeoff_section(rep: CreateReport, patience: float, factuality_threshold: float = 1.0) -> dict[str, object]:
    """Utility at ``patience`` per factuality threshold (those of :data:`FACTUALITY_THRESHOLDS` and
    the report's own ``factuality_threshold``): the values used, said in a sentence, a table
    (configurations × thresholds) and a chart; returns the values used and the table."""
    thresholds = sorted({*FACTUALITY_THRESHOLDS, float(factuality_threshold)})
    trade = rep.factuality_tradeoff(thresholds, patience=patience)
    say(f"Mean creative utility at patience p = {patience:g}; the other sections count a path as factual at "
        f"t = {factuality_threshold:g}.")
    wide = trade.pivot(index="config", columns="threshold", values="utility")
    wide.columns = [f"t = {t:g}" for t in wide.columns]
    show(wide, 2)
    show(tradeoff_chart(trade, patience))
    return {"patience": float(patience), "factuality_threshold": float(factuality_threshold),
            "utility": {str(c): {f"{t:g}": round(float(u), 4) for t, u in row.items()}
                        for c, row in trade.pivot(index="config", columns="threshold", values="utility").iterrows()}}


def distinctiveness_section(rep: CreateReport, factuality_threshold: float = 1.0) -> dict[str, float | None]:
    """ν per configuration against the others, of the paths factual at ``factuality_threshold``;
    returns the mean set distinctiveness ν(U)."""
    dist = rep.distinctiveness(factuality_threshold=factuality_threshold)
    show(dist)
    show(distinctiveness_chart(dist))
    return {str(r.config): None if pd.isna(r.avg_nu_set) else round(float(r.avg_nu_set), 4) for r in dist.itertuples()}


def examples_section(rep: CreateReport, per_config: int = 2, factuality_threshold: float = 1.0) -> str:
    """The first greedy picks of each configuration (at ``factuality_threshold``) for the query
    answered by most; returns its id."""
    qid = rep.example_query_id()
    say(f"**Query:** {rep.query_text(qid)}")
    show(rep.example_paths(qid, per_config=per_config, factuality_threshold=factuality_threshold))
    return qid


def validity_section(rep: CreateReport) -> float:
    """The recorded validity flags against the full structural check, and every flag counted;
    returns the share of paths where both agree."""
    agreement = validity_agreement(rep.sets)
    show(agreement)
    show(rep.flags().pivot_table(index="flag", columns="config", values="count", fill_value=0))
    return round(float((agreement.agree * agreement.paths).sum() / agreement.paths.sum()), 4)


def local_model_section(base_url: str | None, model: str = "gemma3-270m", **kwargs: Any) -> dict[str, object]:
    """:func:`local_section` shown: the banner for the embedded model, its message and table (``–``:
    that configuration has no recorded answer to the query); returns its record."""
    from cresowlve_core.banners import show_banner
    from cresowlve_core.exitcodes import STAGES_RECORD
    from cresowlve_core.notebook_records import record

    local = local_section(base_url, model, **kwargs)
    record(STAGES_RECORD, local.stages)  # `cresowlve report 07_create` exits as `create generate` and `score` would
    if local.embedded:
        show_banner("embedded")
    say(local.message)
    if local.table is not None:
        show(local.table.assign(config=local.table["config"].map(config_display_name)))
    return local.record


def headline(board: pd.DataFrame, patience: Sequence[float]) -> str:
    """The CREATE report's one line: the configuration with the highest mean creative utility at the
    largest patience, its bootstrap interval and the queries it answered (fewer than others' is said),
    of how many configurations. "Highest", not "best": the paired tests below say whether it differs."""
    if board.empty:
        return "no scored configuration"
    p = max(patience)
    key = f"utility@{p}"
    top = board.loc[board[key].idxmax()]
    ci = (f" [{float(top[f'ci_low@{p}']):.2f}, {float(top[f'ci_high@{p}']):.2f}]"
          if f"ci_low@{p}" in board and pd.notna(top[f"ci_low@{p}"]) else "")
    queries = ""
    if "n_queries" in board:
        n, most = int(top["n_queries"]), int(board["n_queries"].max())
        queries = f" over {plural(n, 'query', 'queries')}" + (f" (others up to {most})" if n < most else "")
    return (f"highest mean creative {key}: {top['config']} {float(top[key]):.3f}{ci}{queries}; "
            f"{plural(len(board), 'configuration')}")


def comparisons_display(cmp: pd.DataFrame) -> pd.DataFrame:
    """:meth:`CreateReport.comparisons` for reading: the interval as ``[low, high]``, p-values
    as text (``< 0.0001`` below 1e-4, ``–`` when there is no test)."""
    out = cmp.drop(columns=["ci_low", "ci_high", "p_sign_flip", "p_holm"]).copy()
    out.insert(out.columns.get_loc("diff") + 1, "95% CI (paired bootstrap)",
               ["–" if pd.isna(lo) else f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(cmp["ci_low"], cmp["ci_high"])])
    out.insert(out.columns.get_loc("note"), "p (sign-flip, mean)", cmp["p_sign_flip"].map(format_p))
    out.insert(out.columns.get_loc("note"), "p (Holm)", cmp["p_holm"].map(format_p))
    return out


# --------------------------------------------------------------------------- charts


def leaderboard_chart(board: pd.DataFrame, patience: float = 0.9) -> alt.Chart:
    """Mean utility with its bootstrap CI, one bar per configuration."""
    u, lo, hi = f"utility@{patience}", f"ci_low@{patience}", f"ci_high@{patience}"
    data = board[["config", u, lo, hi]].rename(columns={u: "utility", lo: "low", hi: "high"})
    order = list(data.sort_values("utility", ascending=False)["config"])
    y = alt.Y("config:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    origin = board["origin"] if "origin" in board else pd.Series(["recorded"] * len(board), index=board.index)
    data = data.assign(origin=origin.map(lambda o: "your run" if o == "yours" else "recorded").to_numpy())
    shown = [o for o in ("recorded", "your run") if (data["origin"] == o).any()]  # no legend entry without a bar
    bars = alt.Chart(data).mark_bar().encode(
        x=alt.X("utility:Q", title=f"Creative utility (patience {patience})"), y=y, tooltip=list(data.columns),
        color=alt.Color("origin:N", title=None, scale=alt.Scale(
            domain=shown, range=[{"recorded": "#4c78a8", "your run": "#f58518"}[o] for o in shown])),
    )
    err = alt.Chart(data).mark_rule(color="black").encode(x="low:Q", x2="high:Q", y=y)
    return (bars + err).properties(width=420, height=24 * len(data), title=f"Creative utility at p = {patience}, 95% bootstrap CI over queries")


def _by_last_value(frame: pd.DataFrame, x: str) -> list[str]:
    """Configurations in order of their utility at the largest ``x`` (highest first): the legend then
    reads in the order the lines end, not in the order of their names."""
    last = frame.sort_values(x).groupby("config")["utility"].last()
    return last.sort_values(ascending=False).index.tolist()


def _config_color(title: str, order: list[str]) -> alt.Color:
    """One colour per configuration in every chart of the report (the scale's domain is the names in
    alphabetical order), the legend listing them in ``order``."""
    return alt.Color("config:N", title=title, scale=alt.Scale(domain=sorted(order), scheme="tableau10"),
                     legend=alt.Legend(values=order, labelLimit=320, titleLimit=320))


def patience_chart(curves: pd.DataFrame) -> alt.Chart:
    order = _by_last_value(curves, "patience")
    return (
        alt.Chart(curves)
        .mark_line(point=True)
        .encode(
            x=alt.X("patience:Q", title="Patience p"),
            y=alt.Y("utility:Q", title="Mean creative utility"),
            color=_config_color("Configuration (highest at p = 1 first)", order),
            tooltip=["config", "patience", alt.Tooltip("utility:Q", format=".2f")],
        )
        .properties(width=480, height=300, title="Creative utility vs patience")
    )


def tradeoff_chart(tradeoff: pd.DataFrame, patience: float = 0.9) -> alt.Chart:
    order = _by_last_value(tradeoff, "threshold")
    return (
        alt.Chart(tradeoff)
        .mark_line(point=True)
        .encode(
            x=alt.X("threshold:Q", title="Factuality threshold (fraction of triples that must hold)"),
            y=alt.Y("utility:Q", title=f"Mean creative utility (p = {patience})"),
            color=_config_color("Configuration (highest at threshold 1 first)", order),
            tooltip=["config", "threshold", alt.Tooltip("utility:Q", format=".2f")],
        )
        .properties(width=480, height=300, title="Quality vs factuality")
    )


def distinctiveness_chart(table: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X("avg_nu_set:Q", title="Mean set distinctiveness ν(U)"),
            y=alt.Y("config:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320)),
            tooltip=list(table.columns),
        )
        .properties(width=420, height=24 * max(1, len(table)), title="Distinctiveness against the other configurations")
    )
