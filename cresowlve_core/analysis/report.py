"""The sections of ``notebooks/03_analysis.ipynb``: each computes, displays, and returns a summary.

The per-run sections :func:`table1_section`, :func:`difficulty_section` and
:func:`example_errors_section` work on a RunSet of a single run directory too, so notebook 02
(one run) renders through the same functions, with the same counting rules, as notebook 03.

Every ``*_section`` function takes the loaded :class:`~cresowlve_core.analysis.loading.RunSet`,
displays its tables and charts (IPython), prints a Markdown message for anything that is
missing and why, and returns a small JSON-serialisable dict that the notebook records for
tests. None of them raises on partial data: no runs, no judge, one language, no
annotations or no factual items each produce a message instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.analysis import breakdowns, charts, complexity, coverage, paired, reliability, table
from cresowlve_core.analysis.loading import METRIC_LABELS, RunSet, no_answer
from cresowlve_core.analysis.loading import main_subset as main_subset  # re-exported for notebooks and tests
from cresowlve_core.banners import banner_html
from cresowlve_core.paths import reports_dir
from cresowlve_core.reporting import jsonable, say, show
from cresowlve_core.sources.chgk import DIFFICULTY_LEVELS
from cresowlve_core.stats import NOT_TESTED, cohen_kappa, correlation, diff_proportions, wilson_interval
from cresowlve_core.text import NO_REASONING, normalise_effort, plural
from cresowlve_core.untrusted import one_line

SKIPPED = {"skipped": "no runs"}



def synthetic_banner() -> str:
    """The loud HTML banner shown whenever any input run is synthetic."""
    return banner_html("synthetic")


def _population(df: pd.DataFrame, name: str) -> dict[str, Any]:
    """Say which responses a section counts, and return that as a record."""
    say(coverage.population_line(df, name))
    return {"population": name, "n_responses": int(len(df)), "n_items": int(df["id"].nunique()) if len(df) else 0}


def _coverage_note(df: pd.DataFrame, metrics: list[str] | tuple[str, ...] | str) -> float | None:
    """When a section uses judge values: its judge coverage (errored items count against it)."""
    uses_judge = metrics == "judge" if isinstance(metrics, str) else "judge" in metrics
    line = coverage.coverage_line(df) if uses_judge else None
    if line is None:
        return None
    say(line)
    cov = coverage.judge_coverage_by_run(df)
    return round(float(cov["n_verdict"].sum() / cov["n_items"].sum()), 4)


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


# ------------------------------------------------------------------ seeds


def seeds_section(rs: RunSet | None = None, **analysis_seeds: int) -> dict[str, Any]:
    """The seeds behind this report: the analysis' own (bootstrap, permutations) and each run's."""
    runs: dict[str, Any] = {}
    if rs is not None and not rs.runs.empty:
        for r in rs.runs.to_dict(orient="records"):
            runs[str(r["run_id"])] = {
                "seed": None if pd.isna(r.get("seed")) else int(r["seed"]),
                "judge_seed": None if pd.isna(r.get("judge_seed")) else int(r["judge_seed"]),
            }
    out = {"analysis": {k: int(v) for k, v in analysis_seeds.items()}, "runs": runs}
    say(
        "Seeds: "
        + ", ".join(f"`{k} = {v}`" for k, v in out["analysis"].items())
        + (f"; run seeds: {', '.join(sorted({'not sent' if v['seed'] is None else str(v['seed']) for v in runs.values()}))}"
           if runs else "")
        + "."
    )
    return out


# ------------------------------------------------------------------ runs


def unlabelled_reasoning_note(run: Any) -> str:
    """The runs section's note on a run that asked for no reasoning (labelled non-thinking, or at effort
    ``none``) whose answers show some (reasoning tokens or thoughts), over the run's answers."""
    checked = getattr(run, "n_reasoning_checked", None)
    of = f" of {int(checked)}" if checked is not None and not pd.isna(checked) else ""
    shown = f"{int(run.n_unlabelled_reasoning)}{of} answers (refused and filtered ones included) show reasoning"
    if normalise_effort(run.effort) == NO_REASONING:
        return (f"- **Reasoning at effort none** for `{run.config}` ({run.lang}): effort none asks for no reasoning, "
                f"but {shown}: the provider ignored `none`, or the model reasoned anyway.")
    return (f"- **Thinking not declared** for `{run.config}` ({run.lang}): labelled non-thinking, but {shown} (a "
            "reasoning model asked with no effort reasons at its provider's default): it sits among the non-thinking "
            "models only by its label.")


def served_named(df: pd.DataFrame, rs: RunSet) -> pd.DataFrame:
    """``df`` with each configuration named with the models the provider's replies named for it when
    they named others (:meth:`RunSet.served_notes`): what a chart's legend or axis shows."""
    served = {c: f"{c} ({note})" for c, note in rs.served_notes().items() if note}
    if not served or "config" not in df:
        return df
    return df.assign(config=df["config"].map(lambda c: served.get(c, c)))


def runs_section(rs: RunSet) -> dict[str, Any]:
    """What was loaded: banner for synthetic data, the run list with items planned vs finished, notes."""
    if rs.runs.empty:
        from cresowlve_core.notebook_records import record

        record("empty", f"no runs found for runs = {rs.searched} (0 run directories matched, relative paths resolve "
                        f"against the current project)")
        say(
            f"**No runs found** for `runs = {rs.searched}` (relative paths resolve against the current project). "
            "Nothing to analyse yet: run an evaluation first (`cresowlve eval ...` or `bash setup.sh`), or pass "
            "`-p runs '<glob or list of run directories>'`. The sections below are skipped."
        )
        return {"n_runs": 0, "synthetic": False, "langs": []}
    from cresowlve_core.banners import is_embedded_model, show_banner
    from cresowlve_core.notebook_records import record

    served = rs.served_notes()
    configs = sorted(rs.runs["config"].dropna().astype(str).unique().tolist())
    judges = [f"{j} (judge; {note})" for j, note in rs.runs.reindex(columns=["judge_model", "judge_served_as"])
              .dropna().drop_duplicates().itertuples(index=False) if note]  # a judge served under another name
    record("models", [f"{c} ({served[c]})" if served.get(c) else c for c in configs] + sorted(judges))  # for the index page
    if rs.synthetic:
        show_banner("synthetic")
    embedded = sorted({str(m) for m in rs.runs["model"].dropna() if is_embedded_model(m)}) if "model" in rs.runs else []
    if embedded:
        show_banner("embedded", f"Runs of {', '.join(embedded)} are included.")
    cols = [
        "config",
        "lang",
        "thinking",
        "n_planned",
        "n_records",
        "complete",
        "n_error",
        "n_refused",
        "n_filtered",
        "n_truncated",
        "n_judged",
        "provider",
        "judge_model",
        "judge_protocol",
        "temperature",
        "seed",
        "n_superseded",
        "synthetic",
        "run_id",
    ]
    runs = rs.runs.reindex(columns=cols)
    # each label as requested, with the models the provider's replies named when they named others
    for label, note in (("config", "served_as"), ("judge_model", "judge_served_as")):
        if note in rs.runs:
            runs[label] = [f"{c} ({s})" if s else c for c, s in zip(runs[label], rs.runs[note], strict=True)]
    show(runs.rename(columns={"n_planned": "items planned", "n_records": "items finished", "complete": "finished"}))
    for note in rs.notes:
        say(f"- {note}")
    if "n_unlabelled_reasoning" in rs.runs:
        for r in rs.runs[rs.runs["n_unlabelled_reasoning"].fillna(0) > 0].itertuples():
            say(unlabelled_reasoning_note(r))
    if "n_no_reasoning" in rs.runs:
        for r in rs.runs[rs.runs["n_no_reasoning"].fillna(0) > 0].itertuples():
            checked = getattr(r, "n_reasoning_checked", None)
            of = f" of {int(checked)}" if checked is not None and not pd.isna(checked) else ""
            say(f"- **Thinking not verified** for `{r.config}` ({r.lang}): {int(r.n_no_reasoning)}{of} answers (refused "
                "and filtered ones left out) show no "
                "reasoning (no reasoning tokens, no thoughts). The provider may have ignored the effort; the run is "
                "labelled thinking only because of what was sent.")
    unfinished = rs.incomplete
    if not unfinished.empty:
        say(
            f"**{len(unfinished)} run(s) did not finish**; their Table 1 cells are marked {table.UNFINISHED_MARK}."
        )
    say(
        "Errored or failed items (the model returned no answer) are **left out** of every accuracy, paired test and "
        "agreement below, never counted wrong, in this report and in each run's own report alike; they are "
        "counted (`n_error`), count against coverage, and widen Table 1's bounds (wrong at the lower, right at the "
        "upper). Refused and filtered answers (`n_refused`, `n_filtered`) are the model's own behaviour: counted "
        "**not correct** and kept in n everywhere but in the judge's agreement with exact match, which covers only "
        "the answers both graders graded and counts them as left out."
    )
    langs = rs.langs
    if len(langs) == 1:
        say(f"**Only one language ({langs[0]})** in these runs: sections show that language only.")
    if not rs.has_judge():
        say("**No LLM-judge scores** in these runs: judge columns stay empty and breakdowns use lenient exact match.")
    return {
        "n_runs": int(len(rs.runs)),
        "n_records": int(len(rs.responses)),
        "synthetic": rs.synthetic,
        "langs": langs,
        "unfinished": sorted(unfinished["run_id"].astype(str).tolist()),
    }


# ------------------------------------------------------------------ Table 1


def truncation_note(rs: RunSet) -> str:
    """How many answers were cut off by the token limit (scored wrong, as the paper would), per run."""
    counts = rs.runs.get("n_truncated")
    cut = rs.runs[counts.fillna(0) > 0] if counts is not None else rs.runs.iloc[0:0]
    if cut.empty:
        known = counts is not None and counts.notna().any()
        return ("Truncated answers (cut off by the token limit): none." if known
                else "Truncated answers: not recorded by these runs (written before truncation was flagged).")
    parts = ", ".join(f"`{r.config}` ({r.lang}) {int(r.n_truncated)}" for r in cut.itertuples())
    return (f"**Truncated answers** (cut off by the token limit, scored wrong as in the paper): {parts}. "
            "Re-ask only those with `cresowlve eval ... --retry-truncated --max-tokens N`.")


def report_stem(default: str) -> str:
    """The file stem of the report being rendered (``cresowlve report``/the grid set it for the
    kernel), so two renders of one notebook under two names never overwrite each other's exports."""
    import os

    return os.environ.get("CRESOWLVE_REPORT_STEM") or default


def table1_section(
    rs: RunSet,
    paper_path: str | Path | None = None,
    export_dir: str | Path | None = None,
    stem: str | None = None,
    coverage_threshold: float = table.COVERAGE_THRESHOLD,
    export: bool = True,
    aliases: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Table 1 with n, judge coverage and bounds, Wilson CIs, the published numbers and Δ with its CI.

    Cells of a metric that scored fewer than ``coverage_threshold`` of the items are greyed out
    and footnoted (†); unfinished runs are marked (‡). With ``export`` the CSV and LaTeX go to
    ``export_dir`` (default ``reports/``). A ``paper_path`` given must be a file (the shipped table, when
    none is given, may be missing: the table then says the published numbers are not overlaid).
    """
    if paper_path is not None and not Path(paper_path).is_file():
        from cresowlve_core.failures import MissingInput

        raise MissingInput(f"paper_table: {one_line(str(paper_path))!r} is not a file (the published Table 1 CSV)")
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    if rs.synthetic:
        from IPython.display import HTML, display

        display(HTML(synthetic_banner()))
    long, notes = table.results_table(
        rs, Path(paper_path) if paper_path is not None else None, coverage_threshold=coverage_threshold, aliases=aliases
    )
    for n in notes:
        say(n)
    _, n_factual = rs.creative()
    if n_factual:
        say(f"Table 1 is over the creative subset, as in the paper: {n_factual} factual responses left out.")
    say(
        "Population: **creative items** (the paper's Table 1 population). "
        "`n scored/all`: answered items the metric scored / all items of the run = coverage (errored items, "
        "which have no answer, count against it and are listed as `err`; they are left out of the accuracy). "
        "Refused and filtered answers (`refused`, `filtered`) are counted not correct and stay in n. "
        "`bounds`: the accuracy if every item without a value (unscored or errored) were wrong / right. "
        "`paper-comparable %`: every unscored or errored "
        "item counted wrong, as the paper's released code counts it. Δ = paper-comparable − paper, with "
        "Newcombe's 95% interval for two independent proportions: it treats our run and the paper's "
        f"(n = {table.PAPER_N:,}) as independent samples, although both answer the same items (the paper's per-item "
        "outcomes are not published, so no paired interval is possible)."
    )
    show(table.style_table1(table.table1_display(long)))
    for f in table.table1_footnotes(long, coverage_threshold):
        say(f)
    withheld = table.refusal_counts(long)
    say("**Refused / filtered answers** (the model's own behaviour: not correct, kept in n): "
        + ("; ".join(withheld) if withheld else "none") + ".")
    say(truncation_note(rs))
    others = [m for m in METRIC_LABELS if m not in table.PAPER_METRICS]
    if others:
        say(f"{', '.join(METRIC_LABELS[m] for m in others)} (not in the paper's table):")
        show(table.style_table1(table.table1_display(long, metrics=others)))
    missing = sorted({"en", "ru"} - set(rs.langs))
    if missing:
        say(f"**No {', '.join(m.capitalize() for m in missing)} runs**: those columns are empty.")
    if not rs.has_judge():
        say("**No LLM-judge scores**: the LLM Judge columns are empty.")
    creative = rs.creative()[0]
    for note in paired.mismatch_notes(paired.cross_lingual(creative)):
        say(f"**En and Ru cover different items.** {note} See the paired section for the comparison on shared items.")
    for note in paired.item_set_notes(creative):
        say(f"**Different item sets across configurations.** {note}")
    matched = long.loc[long["paper"].notna(), "config"].nunique()
    unmatched = sorted(set(long["config"]) - set(long.loc[long["paper_order"].notna(), "config"]))
    if unmatched:
        say(f"No published row for: {', '.join(unmatched)} (paper cells left blank).")
    out: dict[str, Any] = {}
    if export:
        out_dir = Path(export_dir) if export_dir else reports_dir()
        stem = stem or report_stem("03_analysis")  # each rendered report keeps its own exports
        csv_path = table.write_table1_csv(long, out_dir / f"{stem}_table1.csv", synthetic=rs.synthetic)
        tex_path = table.write_table1_latex(long, out_dir / f"{stem}_table1.tex", synthetic=rs.synthetic)
        say(f"Exported `{csv_path}` and `{tex_path}`.")
        out = {"csv": str(csv_path), "tex": str(tex_path)}
    wide = table.table1_wide(long)
    main_cols = [
        f"{lang}_{table.TABLE_METRICS[m]}{suffix}"
        for lang in ("en", "ru")
        for m in table.PAPER_METRICS
        for suffix in ("", "_n", "_n_all", "_coverage", "_n_refused", "_n_filtered")
    ]
    main_cols = [c for c in main_cols if c in wide.columns]
    low = long[long["low_coverage"]]
    return {
        "n_rows": int(len(wide)),
        "matched_paper": int(matched),
        **out,
        "coverage_threshold": coverage_threshold,
        "low_coverage": [f"{r.config}/{r.lang}/{r.metric}" for r in low.itertuples(index=False)],
        "unfinished": sorted({f"{r.config}/{r.lang}" for r in long[~long["complete"]].itertuples(index=False)}),
        # Table 1's items with no answer (errored, failed): its population, not the factual items it leaves out
        "n_error": int(long.drop_duplicates("run_id")["n_error"].sum()) if not long.empty else 0,
        "rows": jsonable(wide[["config", *main_cols]]),
    }


def table1_headline(table1: dict[str, Any]) -> str:
    """The analysis report's one line, from :func:`table1_section`'s record."""
    if "n_rows" not in table1:
        return "Table 1: no runs"
    unfinished, errored = table1.get("unfinished") or [], int(table1.get("n_error") or 0)
    gaps = [text for text, n in ((f"{plural(len(unfinished), 'run')} did not finish (‡)", unfinished),
                                 (f"{plural(errored, 'item')} without an answer (errored)", errored)) if n]
    return (f"Table 1: {plural(int(table1['n_rows']), 'configuration')}, {table1.get('matched_paper', 0)} "
            "matched to a published row" + (f"; {', '.join(gaps)}" if gaps else ""))


# ------------------------------------------------------------------ difficulty


def difficulty_section(rs: RunSet, min_cell_n: int = breakdowns.MIN_CELL_N) -> dict[str, Any]:
    """Accuracy by difficulty with Wilson CIs, small-cell warnings and a trend test."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, _ = rs.creative()
    pop = _population(df, "creative items (Table 1's population)")
    # a rating off the 1–5 scale (a hand edit, another dataset's scale) is no level of this chart or its trend
    off_scale = df["difficulty"].notna() & ~df["difficulty"].isin(list(DIFFICULTY_LEVELS))
    off = df[off_scale]
    df = df[~off_scale]
    off_note = (f" **Left out: {off['id'].nunique()} item(s) rated off the 1–5 scale** (difficulty "
                + ", ".join(f"{v:g}" for v in sorted(off["difficulty"].unique())) + "; "
                + ", ".join(f"`{one_line(i)}`" for i in sorted(off["id"].unique())[:5])
                + (", ..." if off["id"].nunique() > 5 else "") + ")." if len(off) else "")
    if df["difficulty"].isna().all():
        say("**No difficulty labels** in these runs: this breakdown needs `difficulty` (1–5) on the records." + off_note)
        return {"skipped": "no difficulty"}
    metrics = [m for m in table.PAPER_METRICS if df[m].notna().any()]
    if "judge" not in metrics:
        say("**No LLM-judge scores**: showing exact match only.")
    else:  # the runs without a judge value have exact-match cells only: name them
        for note in breakdowns.choose_metric(df)[1]:
            say(note)
    cov = _coverage_note(df, metrics)
    res = breakdowns.by_difficulty(df, metrics, min_cell_n=min_cell_n)
    unrated = df.loc[df["difficulty"].isna(), "id"]
    say(f"Each cell: accuracy with its 95% Wilson interval over n = {int(res['n'].min()) if len(res) else 0}–"
        f"{int(res['n'].max()) if len(res) else 0} items (table below the chart)."
        + (f" **Left out: {unrated.nunique()} item(s) without a difficulty rating** ({len(unrated)} response(s): "
           + ", ".join(f"`{one_line(i)}`" for i in sorted(unrated.unique())[:5])
           + (", ..." if unrated.nunique() > 5 else "") + "); they count in Table 1, not in this breakdown."
           if len(unrated) else "") + off_note)
    for note in breakdowns.difficulty_cells_without_value(df, res, metrics):
        say(note)
    show(charts.difficulty_chart(served_named(res, rs)))
    small = res[res["small"]]
    if not small.empty:
        say(
            f"**Small cells:** {len(small)} of {len(res)} cells have fewer than {min_cell_n} items "
            f"(smallest n = {int(small['n'].min())}); their intervals are wide, read them with care."
        )
    trend = breakdowns.difficulty_trend(res)
    falls = int(trend["falls"].sum())
    # Holm's family is the rows with a p (every answer alike, or one level, is no test and not in it)
    tested = int(trend["p"].notna().sum()) if "p" in trend else len(trend)
    untested = len(trend) - tested
    say(
        f"**Trend test** (Cochran–Armitage over difficulty 1–5, Holm-corrected over {tested} tests): accuracy "
        f"falls significantly with difficulty in **{falls}** of {len(trend)} configuration × language × metric rows"
        + (f" ({untested} not tested: every answer alike, or one difficulty level)." if untested else ".")
    )
    show(trend)
    show(res.drop(columns=["metric"]), 2)
    return {
        **pop,
        "judge_coverage": cov,
        "n_cells": int(len(res)),
        "metrics": metrics,
        "interval": "wilson",
        "n_small_cells": int(len(small)),
        "n_unrated_items": int(unrated.nunique()),
        "n_off_scale_items": int(off["id"].nunique()),
        "trend_rows": int(len(trend)),
        "trend_falls": falls,
    }


# ------------------------------------------------------------------ groups


def groups_section(rs: RunSet, min_group_size: int = 30, n_perm: int = 1000, seed: int = 0,
                   homogeneity_test: str = "auto") -> dict[str, Any]:
    """Model × group heatmaps with CIs in the cells, BH-controlled marks and a homogeneity test per model
    (``homogeneity_test``: see :func:`~cresowlve_core.analysis.breakdowns.by_group`)."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, _ = rs.creative()
    out: dict[str, Any] = _population(df, "creative items (Table 1's population)")
    out["judge_coverage"] = _coverage_note(df, breakdowns.choose_metric(df)[0])
    for column, title in breakdowns.GROUP_COLUMNS.items():
        say(f"### By {title.lower()}")
        res = breakdowns.by_group(df, column, min_group_size=min_group_size, n_perm=n_perm, seed=seed,
                                  homogeneity_test=homogeneity_test)
        for n in res.notes:
            say(n)
        if res.table.empty:
            out[column] = {"n_groups": 0, "metric": res.metric}
            continue
        n_configs = int(res.table["config"].nunique())
        figure = (
            "Each cell shows the accuracy and, below it, its 95% Wilson interval; n per cell is in the table "
            "below the chart."
            if n_configs <= charts.MAX_HEATMAP_CONFIGS
            else f"With {n_configs} configurations (more than {charts.MAX_HEATMAP_CONFIGS}, too many columns for one "
            "page) each group is one row: the range of its accuracy over the configurations (line), the middle half "
            "(bar), the median (black tick), and a red dot per marked cell; every cell, with its interval and n, is "
            "in the table below the chart."
        )
        say(
            f"Metric: **{res.metric_label}**; groups with at least {min_group_size} items (an item counts once per "
            f"label it carries). {figure}"
        )
        show(charts.group_heatmap(served_named(res.table, rs), title, res.metric_label))
        say(res.chance_text())
        show(res.table, 2)
        h = res.homogeneity
        n_het = int((h["q"] < 0.05).sum())
        untested = int((h["test"] == NOT_TESTED).sum())
        say(
            f"**Homogeneity per model** (χ² over the shown groups, BH over the tested models): the groups differ "
            f"beyond chance for **{n_het}** of {len(h) - untested} tested model × language rows"
            + (f" ({untested} not tested: fewer than two groups with a value, or every answer alike)" if untested
               else "") + f". {_homogeneity_tests(h[h['test'] != NOT_TESTED], n_perm)}"
        )
        show(h)
        out[column] = {
            "n_groups": int(res.table["group"].nunique()),
            "metric": res.metric,
            "n_cells": res.n_cells,
            "expected_by_chance": round(res.expected_by_chance, 2),
            "n_uncorrected": res.n_uncorrected,
            "n_flagged": res.n_flagged,
            "n_heterogeneous": n_het,
            "homogeneity_tests": {str(k): int(v) for k, v in h["test"].value_counts().sort_index().items()},
        }
    return out


def _homogeneity_tests(h: pd.DataFrame, n_perm: int) -> str:
    """Which test gave the homogeneity p-values of these rows (column ``test``), in words."""
    if h.empty:
        return ""
    n_asym = int((h["test"] == "asymptotic").sum())
    n_rest = len(h) - n_asym
    lead = "Groups overlap, so the plain χ² distribution does not apply; p is the permutation test's, "
    perm = f"from {n_perm} seeded permutations of the items"
    if not n_asym:
        return f"{lead}{perm}."
    asym = ("from the statistic's large-sample permutation distribution (a weighted sum of χ²₁ variables, Imhof's "
            "integral; within the permutations' Monte Carlo error of them) for ")
    where = "where every group and the items outside it expect at least 5 right and 5 wrong answers"
    if not n_rest:
        return f"{lead}{asym}every row ({where}; column `test`)."
    return f"{lead}{asym}the {n_asym} rows {where}, {perm} for the other {n_rest} (column `test`)."


# ------------------------------------------------------------------ creative vs factual


def creative_factual_section(rs: RunSet) -> dict[str, Any]:
    """Difficulty-standardised creative − factual gap per model and language."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df = rs.responses
    kinds = set(df["reasoning_type"].dropna().astype(str).str.strip().str.lower())
    if not {"creative", "factual"} <= kinds:
        have = ", ".join(sorted(kinds)) or "none"
        say(
            "**No factual items** to compare with: this analysis needs records with `reasoning_type` "
            f"`creative` and `factual` (found: {have}). Evaluate the factual subset too to see it."
        )
        return {"skipped": "no factual items"}
    metrics = [m for m in ("judge", "em_strict") if df[m].notna().any()]
    res = breakdowns.creative_vs_factual(df, metrics)
    say(
        "Population: **creative and factual items** (unlike Table 1, which is creative only). "
        "Gap = creative − factual accuracy (percentage points) within each difficulty level, weighted by the "
        "smaller group's difficulty distribution. The estimate uses every item, and so does its interval: the "
        "stratified Newcombe/Wilson-score interval of the same weighted difference (each difficulty level keeps "
        "its Wilson width, so a level at 0/50 still counts as uncertain; see `creative_vs_factual`). "
        "Negative = creative items are harder."
    )
    cov = _coverage_note(df, metrics)
    if "judge" in metrics:  # the runs without a judge value have exact-match rows only: name them
        for note in breakdowns.choose_metric(df)[1]:
            say(note)
    show(charts.difficulty_share_chart(breakdowns.difficulty_distribution(df)))
    if res.empty:
        say("No configuration has both creative and factual items at a common difficulty level.")
        return {"n_rows": 0}
    runs = df[["config", "lang"]].dropna().drop_duplicates()
    shown = set(zip(res["config"], res["lang"], strict=True))
    left = [f"{c} / {lang}" for c, lang in sorted(zip(runs["config"], runs["lang"], strict=True)) if (c, lang) not in shown]
    if left:
        say(f"**Not in this comparison** (no factual item, or none at a difficulty level of its creative items, with a "
            f"value): {', '.join(left)}.")
    small = res.loc[res["n_matched"] < 30, "config"].unique().tolist()
    if small:
        say(f"Fewer than 30 items in the smaller group for: {', '.join(small)}; read those intervals with care.")
    show(charts.gap_chart(served_named(res, rs)))
    # n_factual counts factual *items* here (the shared column labels read it as CREATE's factual paths)
    show(res.drop(columns=["metric"]).rename(columns={"n_creative": "creative items", "n_factual": "factual items"}), 2)
    return {
        "population": "creative and factual items",
        "n_responses": int(len(df)),
        "n_items": int(df["id"].nunique()),
        "judge_coverage": cov,
        "n_rows": int(len(res)),
        "procedure": "stratified Newcombe/Wilson-score (MOVER-Wilson) interval of the standardised difference",
        "gaps": jsonable(res[["config", "lang", "metric", "gap", "low", "high", "n_matched"]].round(3)),
    }


# ------------------------------------------------------------------ complexity


def complexity_section(rs: RunSet, semantic_distance: bool = True) -> dict[str, Any]:
    """Complexity features vs difficulty and vs per-item correctness, every ρ with its CI."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, _ = rs.creative()
    pop = _population(df, "creative items (Table 1's population)")
    feats, notes = complexity.item_features(df, semantic_distance=semantic_distance)
    for n in notes:
        say(n)
    available = [f for f in complexity.FEATURES if feats[f].notna().any()]
    if not available:
        say("No complexity feature is available for these runs.")
        return {"features": []}
    if "max_domain_distance" in available:
        single = int((feats["n_domains"] == 1).sum())
        say(
            f"Max semantic distance is 0 for the {single} single-domain items (no pair of domains; kept, not "
            f"dropped); n = {int(feats['max_domain_distance'].notna().sum())} items have the feature."
        )
    if feats["difficulty"].notna().any():
        corr_d = complexity.difficulty_correlations(feats)
        say("**Correlation with the difficulty label** (over items; 95% Fisher-z CIs, Holm over the features):")
        show(corr_d.drop(columns=["feature"]))
        for _, r in corr_d.iterrows():
            say(f"- {r['feature_label']}: {complexity.correlation_verdict(r)}")
        show(charts.complexity_boxplot(complexity.features_long(feats)))
        show(charts.correlation_bars(corr_d, by_model=False))
    else:
        say("**No difficulty labels**: correlations with difficulty skipped.")
        corr_d = pd.DataFrame()
    metric = "judge" if df["judge"].notna().any() else "em_lenient"
    cov = _coverage_note(df, metric)
    if metric == "judge":  # the runs without a judge value have no row here: name them
        for note in breakdowns.choose_metric(df)[1]:
            say(note)
    corr_p = complexity.performance_correlations(df, feats, metric)
    # Holm's family: the rows with a p (a constant feature or outcome in a run is no test and not in it)
    tested = int(corr_p["spearman_p"].notna().sum()) if not corr_p.empty else 0
    untested = len(corr_p) - tested
    say(
        f"**Correlation with per-item correctness** ({METRIC_LABELS[metric]}), per model and language; 95% CIs, "
        f"Holm over all {tested} tests" + (f" ({untested} row(s) not tested: a constant feature or outcome)"
                                           if untested else "") + " (outlined = significant):"
    )
    if not corr_p.empty:
        show(charts.correlation_bars(served_named(corr_p, rs), by_model=True))
        show(corr_p.drop(columns=["feature"]))
    return {
        **pop,
        "judge_coverage": cov,
        "features": available,
        "difficulty": jsonable(
            corr_d[["feature", "n", "spearman_rho", "spearman_low", "spearman_high", "spearman_p_holm"]].round(4)
        )
        if not corr_d.empty
        else [],
        "n_performance_rows": int(len(corr_p)),
        "n_performance_significant": int(corr_p["significant"].sum()) if not corr_p.empty else 0,
        "metric": metric,
    }


# ------------------------------------------------------------------ paired


#: the paired table's items run by one side only, by what they are here (the shared header of ``n_a_only``
#: is CREATE's "queries (a only)")
NOT_RUN_HEADERS = {"n_a_only": "not run in b", "n_b_only": "not run in a"}


def paired_section(
    rs: RunSet, compare: list[tuple[str, str]] | list[list[str]] | None = None, metric: str | None = None,
    aliases: dict[str, str] | None = None,
) -> dict[str, Any]:
    """McNemar between configurations and En vs Ru per configuration, on shared item ids.

    ``compare`` names configurations by display name, model name or grid label (the grid's
    ``aliases``, recorded in ``grid.json`` and read with the runs, plus ``aliases``)."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df, n_factual = rs.creative()
    pop = _population(df, "creative items (Table 1's population)")
    if n_factual:
        say(f"As in Table 1, the {n_factual:,} factual responses are left out of every paired test.")
    metric = metric or paired.default_metric(df)
    cov = _coverage_note(df, metric)
    say(f"Metric: **{METRIC_LABELS[metric]}**. Only items both sides scored are paired (`n` of `n_shared`): an item "
        "errored on either side is not a pair (never counted wrong), and each row says how many pairs were dropped "
        "and why (`n_error_*`: errored on side a / b / both; `n_unscored`; `dropped`). A row without a single pair is "
        "`not tested` (no p, no interval) and stays out of the Holm family; p-values Holm-corrected over the tested "
        "rows of each table.")
    try:
        configs = paired.compare_configs(df, [tuple(p) for p in (compare or [])], metric,  # type: ignore[misc]
                                         aliases={**rs.aliases, **(aliases or {})})
    except ValueError as exc:
        say(f"**Comparison not possible:** {exc}")
        configs = paired.compare_configs(df, None, metric)
    not_compared = configs.attrs.get(paired.NO_SHARED_LANGUAGE, [])
    if not_compared:
        say("**Not compared** (the two have no language in common, so no item was answered by both): "
            + "; ".join(f"{a} ({', '.join(la) or 'no language'}) vs {b} ({', '.join(lb) or 'no language'})"
                        for a, b, la, lb in not_compared) + ".")
    if configs.empty and not not_compared:
        say("No two configurations to compare (only one effort level per model, and no `compare` pairs given).")
    elif not configs.empty:
        say("**Between configurations** (`diff` = a − b in pp, Bonett–Price 95% CI; exact McNemar below 25 discordant items):")
        show(configs.rename(columns=NOT_RUN_HEADERS))
    cross = paired.cross_lingual(df, metric)
    if cross.empty:
        say("**En vs Ru:** no configuration has runs in both languages.")
    else:
        for note in paired.mismatch_notes(cross):
            say(f"**Different item sets:** {note}")
        say("**En vs Ru per configuration** (`diff` = Ru − En on shared items):")
        show(cross)
        say(
            "Items right in Ru and wrong in En (and the controls) per configuration: "
            "`cresowlve_core.analysis.paired.en_ru_items(runs, model, effort)`."
        )
    return {
        **pop,
        "judge_coverage": cov,
        "metric": metric,
        "n_config_pairs": int(len(configs)),
        "n_not_compared": len(not_compared),
        "n_config_significant": int((configs["p_holm"] < 0.05).sum()) if not configs.empty else 0,
        "cross_lingual": jsonable(cross[["config", "n", "n_shared", "n_error_en", "n_error_ru", "n_error_both",
                                         "n_unscored", "dropped", "mismatch", "diff", "low", "high", "p", "p_holm",
                                         "method"]].round({"diff": 6, "low": 6, "high": 6}))
        if not cross.empty
        else [],
    }


# ------------------------------------------------------------------ example errors


def example_errors_section(
    rs: RunSet, n: int = 5, coverage_threshold: float = table.COVERAGE_THRESHOLD, seed: int = 0
) -> dict[str, Any]:
    """A few wrong answers per run, by the judge when it covered the run, else by exact match.

    When the judge scored fewer than ``coverage_threshold`` of a run's answered items (or none),
    the examples fall back to lenient exact match and the text says why. Errored items are
    counted, not shown. Never an empty table without a reason.
    """
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    out: dict[str, Any] = {}
    # ``outcome``: a refused or filtered answer (not correct) is shown as what it is, not as an empty prediction
    cols = [c for c in ("id", "difficulty", "outcome", "answer", "prediction", "extraction", "em_strict", "em_lenient",
                        "judge_status", "judge_verdict") if c in rs.responses]
    # runs whose manifest names a judge, or with a judge verdict (older runs): the others were never judged
    judged_runs = set(rs.runs.loc[rs.runs["judge_model"].notna(), "run_id"]) if "judge_model" in rs.runs else set()
    judged_runs |= set(rs.responses.loc[rs.responses["judge_status"].ne("not_run") & rs.responses["judge_status"].notna(),
                                        "run_id"]) if "judge_status" in rs.responses else set()
    for (config, lang), g in rs.responses.groupby(["config", "lang"], sort=False):
        answered = g[~no_answer(g)]
        n_err = int(len(g) - len(answered))
        scored = int(answered["judge"].notna().sum())
        share = scored / len(answered) if len(answered) else 0.0
        if scored and share >= coverage_threshold:
            metric, why = "judge", f"judged wrong by the LLM judge (it scored {scored} of {len(answered)} answers)"
        elif not judged_runs.intersection(g["run_id"]):  # no judge was asked: none "scored only 0" answers
            metric, why = "em_lenient", ("wrong by lenient exact match (this run has no LLM judge)" if len(answered)
                                         else "no answered items")
        else:
            metric = "em_lenient"
            why = (
                f"wrong by lenient exact match, because the LLM judge scored only {scored} of {len(answered)} answers "
                f"({100 * share:.0f}% < {100 * coverage_threshold:.0f}%)"
                if len(answered)
                else "no answered items"
            )
        wrong = answered[answered[metric] == 0.0]
        n_valued = int(answered[metric].notna().sum())  # an item the measure has no value for is not right either
        head = f"**{config} / {lang}** — {why}"
        if n_err:
            head += f"; {n_err} errored item(s) (no answer, left out) not shown"
        if not len(answered):
            say(head + ": nothing to show.")
        elif wrong.empty and not n_valued:
            say(head + f". **{METRIC_LABELS[metric]} has no value for any of the {len(answered)} answered items**, so "
                "there is nothing to show.")
        elif wrong.empty:
            say(head + f". **No item is wrong by this measure** ({n_valued} of {len(answered)} answered items have a "
                "value), so there is nothing to show.")
        else:
            withheld = wrong["outcome"].value_counts() if "outcome" in wrong else pd.Series(dtype=int)
            given = [f"{int(withheld[o])} {o}" for o in ("refused", "filtered") if withheld.get(o)]
            if given:
                head += (f"; of the {len(wrong)} not correct, {' and '.join(given)} (no answer given, counted not "
                         "correct: `outcome`)")
            say(head + f": {min(n, len(wrong))} of {len(wrong)} shown.")
            # drawn from the answers in id order, not in file order (the order the calls finished in), so
            # two runs with the same answers and seed show the same examples
            sample = wrong.sort_values("id").sample(n=min(n, len(wrong)), random_state=seed).sort_values("id")
            show(sample[cols].reset_index(drop=True))
        out[f"{config}/{lang}"] = {"metric": metric, "n_wrong": int(len(wrong)), "n_error": n_err, "judge_coverage": round(share, 4)}
    return out


# ------------------------------------------------------------------ judge reliability


def reliability_section(rs: RunSet, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Judge vs strict EM agreement per run (Table 1's answered items), judge repeatability, coverage;
    the summary over runs is the mean of the per-run κ, its interval ``n_boot`` seeded two-level
    bootstrap resamples of runs and items."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    df = rs.responses
    say("Judge calls by status, all responses (creative and factual):")
    by_status = reliability.judge_coverage(df)
    show(by_status)
    pop = _population(rs.creative()[0], "creative items (Table 1's population), for the agreement below")
    cov = _coverage_note(rs.creative()[0], "judge")
    n_unscored = int(by_status["unscored"].sum())
    if not rs.has_judge():
        say("**No LLM-judge scores** in these runs: agreement and repeatability need a judged run.")
        return {"n_unscored": n_unscored, "kappa_em": None, "kappa_repeat": None}
    say(
        "**Judge vs strict exact match** per run, on the answers both graders graded (creative subset, every answer "
        "with a judge verdict). Left out and counted (`left_out`): errored responses (`n_error`), since neither rater "
        "saw an answer; refused and filtered answers (`n_refused`, `n_filtered`), which the judge is not asked about "
        "and which Table 1 counts not correct in both columns, so counting them as agreement would inflate it; answers "
        "without a judge verdict (`n_unjudged`). Table 1's judge % − EM % is therefore (judge_only − em_only) / "
        "(n + n_refused + n_filtered) where the judge graded every answer. `judge_only` = judge accepts, EM does not. "
        "κ with its 95% CI "
        "(asymptotic per run); `undefined` when chance agreement is 1. The `all runs` row is a **summary of the "
        "per-run values**: the mean of the per-run κ (range in the note), with a two-level bootstrap interval "
        "that resamples runs and items, so it speaks of models and items in general; its counts are sums over runs:"
    )
    agree = reliability.judge_vs_em(df, n_boot=n_boot, seed=seed)
    show(reliability.agreement_display(agree))
    if not agree.empty and not agree["n"].any():
        say("**No answer was graded by both** the judge and exact match (see `left_out`): no agreement to report.")
    pooled = agree[agree["config"] == "all runs"]
    kappa_em = float(pooled["kappa"].iloc[0]) if not pooled.empty else None
    say("**Judge repeatability** (a second verdict of the same response, `extra.judge_repeat`), over all responses "
        "(creative and factual: the judge's consistency, not Table 1's population) with both verdicts (`n`); an answer with one of the two (`n_unpaired`: a judge call errored or gave no "
        "verdict) is left out, never counted a disagreement, as are answers with neither (`n_unjudged`), refused "
        "and filtered answers the judge is not asked about and errored responses, each counted (`left_out`):")
    rep = reliability.judge_repeatability(df, n_boot=n_boot, seed=seed)
    kappa_rep = None
    if rep.empty:
        say("No record carries `extra.judge_repeat`: re-judge a sample of responses to measure repeatability.")
    else:
        show(reliability.agreement_display(rep))
        kappa_rep = float(rep.loc[rep["config"] == "all runs", "kappa"].iloc[0])
    say(f"Unscored judge calls (no parseable verdict, left out of judge accuracy): **{n_unscored}**.")

    def _k(v: float | None) -> float | None:
        return None if v is None or np.isnan(v) else round(v, 4)

    return {
        **pop,
        "judge_coverage": cov,
        "n_unscored": n_unscored,
        "kappa_em": _k(kappa_em),
        "kappa_em_ci": [_k(float(pooled["kappa_low"].iloc[0])), _k(float(pooled["kappa_high"].iloc[0]))]
        if not pooled.empty
        else None,
        "n_em_pairs": int(pooled["n"].iloc[0]) if not pooled.empty else 0,
        "em_pairs_left_out": {col: int(pooled[col].iloc[0]) if not pooled.empty else 0
                              for col in ("n_error", "n_refused", "n_filtered", "n_unjudged")},
        "kappa_repeat": _k(kappa_rep),
        "n_repeat_pairs": int(rep.loc[rep["config"] == "all runs", "n"].iloc[0]) if not rep.empty else 0,
        "n_repeat_unpaired": int(rep.loc[rep["config"] == "all runs", "n_unpaired"].iloc[0]) if not rep.empty else 0,
    }


# ------------------------------------------------------------------ cost
def cost_section(rs: RunSet) -> dict[str, Any]:
    """Tokens and cost per run; unknown prices shown as ``unknown``, never 0."""
    if rs.empty:
        say("Skipped: no runs.")
        return SKIPPED
    costs = reliability.cost_table(rs.responses, rs.runs)
    show(reliability.cost_display(costs))
    unknown = costs.loc[costs["cost_unknown"] > 0, "config"].unique().tolist()
    if unknown:
        say(f"Cost **unknown** (no price) for some records of: {', '.join(unknown)}.")
    if costs["n_no_answer"].any():
        say("`n_no_answer`: calls that errored or were not run; they have no cost recorded, which is not an "
            "unknown price, and are left out of the cost's count of answers.")
    if "n_unusable" in costs and (costs[["n_replaced", "n_verdicts_replaced", "n_unusable"]].sum(axis=1) > 0).any():
        say("`spent, not in cost`: paid for, but counted in neither `cost` nor `judge_cost`: answers replaced by "
            "answers asked again (`--retry-truncated`), judge verdicts withdrawn by `cresowlve rescore`, and billed "
            "answers with no text that were asked again (as its summary.json records them: a run of a version before "
            "`unusable_spent` names its last pass's only).")
    known = costs["cost"].sum(min_count=1)
    return {
        "n_runs": int(len(costs)),
        "runs_with_unknown_cost": int((costs["cost_unknown"] > 0).sum()),
        "total_known_cost": None if pd.isna(known) else round(float(known), 4),
    }
