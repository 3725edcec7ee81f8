"""The sections of ``notebooks/03_analysis.ipynb``: each computes, displays, and returns a summary.

Every ``*_section`` function takes the loaded :class:`~cresowlve_core.analysis.loading.RunSet`,
displays its tables and charts (IPython), prints a Markdown message for anything that is
missing and why, and returns a small JSON-serialisable dict that the notebook records for
tests. None of them raises on partial data: no runs, no judge, one language, no
annotations or no factual items each produce a message instead.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.analysis import breakdowns, charts, complexity, reliability, table
from cresowlve_core.analysis.loading import METRICS, RunSet, main_subset
from cresowlve_core.banners import banner_html
from cresowlve_core.stats import cohen_kappa, correlation, diff_proportions, wilson_interval
from cresowlve_core.paths import REPORTS_DIR

SKIPPED = {"skipped": "no runs"}


def say(markdown: str) -> None:
    """Show a Markdown message in the notebook (plain text elsewhere)."""
    try:
        from IPython.display import Markdown, display

        display(Markdown(markdown))
    except ImportError:  # pragma: no cover - IPython ships with the notebook stack
        print(markdown)


def show(obj: Any) -> None:
    """Display a table or chart."""
    from IPython.display import display

    display(obj)


def synthetic_banner() -> str:
    """The loud HTML banner shown whenever any input run is synthetic."""
    return banner_html("synthetic")


def _round(df: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    return df.round(digits)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as JSON-safe records (NaN → None)."""
    return [
        {
            k: (None if isinstance(v, float) and np.isnan(v) else (v.item() if hasattr(v, "item") else v))
            for k, v in r.items()
        }
        for r in df.to_dict(orient="records")
    ]


# ------------------------------------------------------------------ checks


def self_checks() -> str:
    """Textbook values recomputed by :mod:`~cresowlve_core.stats` (deterministic text)."""
    rows: list[tuple[str, str, str]] = []

    def pair(v: tuple[float, float]) -> str:
        return f"({v[0]:.4f}, {v[1]:.4f})"

    rows.append(("Wilson 0/10", "(0.0000, 0.2775)", pair(wilson_interval(0, 10))))
    rows.append(("Wilson 5/10", "(0.2366, 0.7634)", pair(wilson_interval(5, 10))))
    rows.append(("Wilson 10/10", "(0.7225, 1.0000)", pair(wilson_interval(10, 10))))
    d = diff_proportions(56, 70, 48, 80)
    rows.append(("Newcombe 56/70 - 48/80", "(0.0524, 0.3339)", pair((d.low, d.high))))
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    rows.append(("Cohen kappa, Wikipedia 50 items", "0.4000", f"{cohen_kappa(a, b):.4f}"))
    x = np.arange(1.0, 11.0)
    rows.append(("Spearman of a monotone sequence", "1.0000", f"{correlation(x, x**3).spearman_rho:.4f}"))
    ans_x = [10, 8, 13, 9, 11, 14, 6, 4, 12, 7, 5]
    ans_y = [8.04, 6.95, 7.58, 8.81, 8.33, 9.96, 7.24, 4.26, 10.84, 4.82, 5.68]
    rows.append(("Pearson, Anscombe set I", "0.8164", f"{correlation(ans_x, ans_y).pearson_r:.4f}"))
    lines = ["Statistical self-checks (textbook values)"]
    lines += [
        f"{name:<34} expected {exp:<18} got {got:<18} {'ok' if exp == got else 'MISMATCH'}" for name, exp, got in rows
    ]
    lines.append(f"all ok: {all(exp == got for _, exp, got in rows)}")
    return "\n".join(lines)


# ------------------------------------------------------------------ runs


def runs_section(rs: RunSet) -> dict[str, Any]:
    """What was loaded: banner for synthetic data, the run list, notes, or 'no runs found'."""
    if rs.runs.empty:
        say(
            f"**No runs found** for `runs = {rs.searched}` (relative paths resolve against the repository root). "
            "Nothing to analyse yet: run an evaluation first (`cresowlve eval ...` or `bash setup.sh`), or pass "
            "`-p runs '<glob or list of run directories>'`. The sections below are skipped."
        )
        return {"n_runs": 0, "synthetic": False, "langs": []}
    if rs.synthetic:
        from IPython.display import HTML, display

        display(HTML(synthetic_banner()))
    cols = [
        "config",
        "lang",
        "thinking",
        "judge_model",
        "n_records",
        "n_error",
        "n_judged",
        "n_superseded",
        "synthetic",
        "run_id",
    ]
    show(rs.runs[cols])
    for note in rs.notes:
        say(f"- {note}")
    langs = rs.langs
    if len(langs) == 1:
        say(f"**Only one language ({langs[0]})** in these runs: sections show that language only.")
    if not rs.has_judge():
        say("**No LLM-judge scores** in these runs: judge columns stay empty and breakdowns use lenient exact match.")
    return {"n_runs": int(len(rs.runs)), "n_records": int(len(rs.responses)), "synthetic": rs.synthetic, "langs": langs}


# ------------------------------------------------------------------ Table 1


def table_section(
    rs: RunSet, paper_path: str | Path | None = None, export_dir: str | Path | None = None, stem: str = "03_analysis"
) -> dict[str, Any]:
    """Table 1 with Wilson CIs and the published numbers; writes CSV and LaTeX to ``export_dir``."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    if rs.synthetic:
        from IPython.display import HTML, display

        display(HTML(synthetic_banner()))
    long, notes = table.results_table(rs, Path(paper_path) if paper_path else None)
    for n in notes:
        say(n)
    _, n_factual = main_subset(rs.responses)
    if n_factual:
        say(f"Table 1 is over the creative subset, as in the paper: {n_factual} factual responses left out.")
    show(table.table1_display(long))
    say("Lenient exact match (not in the paper's table):")
    show(table.table1_display(long, metrics=("em_lenient",)))
    missing = sorted({"en", "ru"} - set(rs.langs))
    if missing:
        say(f"**No {', '.join(m.capitalize() for m in missing)} runs**: those columns are empty.")
    if not rs.has_judge():
        say("**No LLM-judge scores**: the LLM Judge columns are empty.")
    matched = long.loc[long["paper"].notna(), "config"].nunique()
    unmatched = sorted(set(long["config"]) - set(long.loc[long["paper_order"].notna(), "config"]))
    if unmatched:
        say(f"No published row for: {', '.join(unmatched)} (paper cells left blank).")
    out_dir = Path(export_dir) if export_dir else REPORTS_DIR
    csv_path = table.write_table1_csv(long, out_dir / f"{stem}_table1.csv", synthetic=rs.synthetic)
    tex_path = table.write_table1_latex(long, out_dir / f"{stem}_table1.tex", synthetic=rs.synthetic)
    say(f"Exported `{csv_path}` and `{tex_path}`.")
    wide = table.table1_wide(long)
    main_cols = [c for c in ("en_exact_match", "en_llm_judge", "ru_exact_match", "ru_llm_judge") if c in wide.columns]
    return {
        "n_rows": int(len(wide)),
        "matched_paper": int(matched),
        "csv": str(csv_path),
        "tex": str(tex_path),
        "rows": _records(wide[["config", *main_cols]]),
    }


# ------------------------------------------------------------------ difficulty


def difficulty_section(rs: RunSet, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Accuracy by difficulty with bootstrap CIs, both metrics, both languages."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, _ = main_subset(rs.responses)
    if df["difficulty"].isna().all():
        say("**No difficulty labels** in these runs: this breakdown needs `difficulty` (1–5) on the records.")
        return {"skipped": "no difficulty"}
    metrics = [m for m in ("em_strict", "judge") if df[m].notna().any()]
    if "judge" not in metrics:
        say("**No LLM-judge scores**: showing exact match only.")
    res = breakdowns.by_difficulty(df, metrics, n_boot=n_boot, seed=seed)
    show(charts.difficulty_chart(res))
    return {"n_cells": int(len(res)), "metrics": metrics, "n_boot": n_boot}


# ------------------------------------------------------------------ groups


def groups_section(rs: RunSet, min_group_size: int = 30) -> dict[str, Any]:
    """Model × group heatmaps for knowledge domains, creative concepts and cultures."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, _ = main_subset(rs.responses)
    out: dict[str, Any] = {}
    for column, title in breakdowns.GROUP_COLUMNS.items():
        say(f"### By {title.lower()}")
        res = breakdowns.by_group(df, column, min_group_size=min_group_size)
        for n in res.notes:
            say(n)
        if res.table.empty:
            out[column] = {"n_groups": 0, "metric": res.metric}
            continue
        say(f"Metric: **{res.metric_label}**; groups with at least {min_group_size} items.")
        show(charts.group_heatmap(res.table, title, res.metric_label))
        out[column] = {"n_groups": int(res.table["group"].nunique()), "metric": res.metric}
    return out


# ------------------------------------------------------------------ creative vs factual


def creative_factual_section(rs: RunSet, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Difficulty-balanced, size-matched creative − factual gap per model and language."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df = rs.responses
    kinds = set(df["reasoning_type"].dropna().str.lower())
    if not {"creative", "factual"} <= kinds:
        have = ", ".join(sorted(kinds)) or "none"
        say(
            "**No factual items** to compare with: this analysis needs records with `reasoning_type` "
            f"`creative` and `factual` (found: {have}). Evaluate the factual subset too to see it."
        )
        return {"skipped": "no factual items"}
    metrics = [m for m in ("judge", "em_strict") if df[m].notna().any()]
    res = breakdowns.creative_vs_factual(df, metrics, n_boot=n_boot, seed=seed)
    say(
        f"Gap = creative − factual accuracy (percentage points), {n_boot} seeded bootstrap iterations; both "
        "groups resampled to the smaller group's size and difficulty distribution (see "
        "`creative_vs_factual` docstring). Negative = creative items are harder."
    )
    show(charts.difficulty_share_chart(breakdowns.difficulty_distribution(df)))
    if res.empty:
        say("No configuration has both creative and factual items at a common difficulty level.")
        return {"n_rows": 0}
    small = res.loc[res["n_matched"] < 30, "config"].unique().tolist()
    if small:
        say(
            f"Few items behind the matched comparison (n < 30) for: {', '.join(small)}; read those intervals with care."
        )
    show(charts.gap_chart(res))
    show(_round(res.drop(columns=["metric"]), 2))
    return {
        "n_rows": int(len(res)),
        "gaps": _records(res[["config", "lang", "metric", "gap", "low", "high", "n_matched"]].round(3)),
    }


# ------------------------------------------------------------------ complexity


def complexity_section(rs: RunSet, semantic_distance: bool = True) -> dict[str, Any]:
    """Complexity features vs difficulty and vs per-item correctness."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, _ = main_subset(rs.responses)
    feats, notes = complexity.item_features(df, semantic_distance=semantic_distance)
    for n in notes:
        say(n)
    available = [f for f in complexity.FEATURES if feats[f].notna().any()]
    if not available:
        say("No complexity feature is available for these runs.")
        return {"features": []}
    if feats["difficulty"].notna().any():
        corr_d = complexity.difficulty_correlations(feats)
        say("**Correlation with the difficulty label** (over items):")
        show(_round(corr_d.drop(columns=["feature"]), 4))
        show(charts.complexity_boxplot(complexity.features_long(feats)))
        show(charts.correlation_bars(corr_d, by_model=False))
    else:
        say("**No difficulty labels**: correlations with difficulty skipped.")
        corr_d = pd.DataFrame()
    metric = "judge" if df["judge"].notna().any() else "em_lenient"
    corr_p = complexity.performance_correlations(df, feats, metric)
    say(f"**Correlation with per-item correctness** ({METRICS[metric]}), per model and language:")
    if not corr_p.empty:
        show(charts.correlation_bars(corr_p, by_model=True))
        show(_round(corr_p.drop(columns=["feature"]), 4))
    return {
        "features": available,
        "difficulty": _records(corr_d[["feature", "n", "pearson_r", "spearman_rho"]].round(4))
        if not corr_d.empty
        else [],
        "n_performance_rows": int(len(corr_p)),
        "metric": metric,
    }


# ------------------------------------------------------------------ judge reliability


def reliability_section(rs: RunSet) -> dict[str, Any]:
    """Judge vs lenient EM agreement, judge repeatability, unscored counts."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df = rs.responses
    coverage = reliability.judge_coverage(df)
    show(coverage)
    n_unscored = int(coverage["unscored"].sum())
    if not rs.has_judge():
        say("**No LLM-judge scores** in these runs: agreement and repeatability need a judged run.")
        return {"n_unscored": n_unscored, "kappa_em": None, "kappa_repeat": None}
    say("**Judge vs lenient exact match** (responses the judge scored; `judge_only` = judge accepts, EM does not):")
    agree = reliability.judge_vs_em(df)
    show(_round(agree, 3))
    pooled = agree[agree["config"] == "all runs"]
    kappa_em = float(pooled["kappa"].iloc[0]) if not pooled.empty else None
    say("**Judge repeatability** (a second verdict of the same response, `extra.judge_repeat`):")
    rep = reliability.judge_repeatability(df)
    kappa_rep = None
    if rep.empty:
        say("No record carries `extra.judge_repeat`: re-judge a sample of responses to measure repeatability.")
    else:
        show(_round(rep, 3))
        kappa_rep = float(rep.loc[rep["config"] == "all runs", "kappa"].iloc[0])
    say(f"Unscored judge calls (no parseable verdict, left out of judge accuracy): **{n_unscored}**.")
    return {
        "n_unscored": n_unscored,
        "kappa_em": None if kappa_em is None or np.isnan(kappa_em) else round(kappa_em, 4),
        "kappa_repeat": None if kappa_rep is None or np.isnan(kappa_rep) else round(kappa_rep, 4),
        "n_repeat_pairs": int(rep.loc[rep["config"] == "all runs", "n"].iloc[0]) if not rep.empty else 0,
    }


# ------------------------------------------------------------------ cost


def cost_section(rs: RunSet) -> dict[str, Any]:
    """Tokens and cost per run; unknown prices shown as ``unknown``, never 0."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    costs = reliability.cost_table(rs.responses)
    show(reliability.cost_display(costs))
    unknown = costs.loc[costs["cost_unknown"] > 0, "config"].unique().tolist()
    if unknown:
        say(f"Cost **unknown** (no price) for some records of: {html.escape(', '.join(unknown))}.")
    known = costs["cost"].sum(min_count=1)
    return {
        "n_runs": int(len(costs)),
        "runs_with_unknown_cost": int((costs["cost_unknown"] > 0).sum()),
        "total_known_cost": None if pd.isna(known) else round(float(known), 4),
    }
