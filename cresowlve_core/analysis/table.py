"""Table 1 of the paper: accuracy per model × thinking effort, En/Ru × every metric of the registry.

* :func:`results_long` — one row per configuration × language × metric (the metrics of
  :data:`cresowlve_core.evaluation.metrics.METRICS`) with the count ``k``, the number of items
  with a value ``n``, all items ``n_all``, the coverage ``n / n_all``, accuracy in % with its
  95 % Wilson interval, the **bounds** (accuracy if every item without a value were wrong /
  right), the number of errored items, whether the run finished, and the paper overlay;
* :func:`table1_display` — the paper's layout for a notebook (strings, with ``n``, coverage,
  bounds and Δ with its interval); :func:`table1_footnotes` explains the marks;
* :func:`table1_wide` / :func:`write_table1_csv` — numeric wide form whose main columns carry
  the same names as ``paper_table1.csv`` (``en_exact_match``, ``en_llm_judge``, ...);
* :func:`table1_latex` / :func:`write_table1_latex` — a booktabs table in the paper's layout.

Marks: ``†`` — the metric scored fewer than ``coverage_threshold`` (default 90 %) of the items
(the judge left many unscored): the cell is greyed out and its bounds matter more than its
point value; ``‡`` — the run did not finish (fewer records than planned, or stopped early).

Errored or failed items (the model gave no answer) have no value: they are left out of ``n``
and ``pct``, count **wrong at the lower bound and right at the upper** (``bound_low`` /
``bound_high``) and wrong in the paper-comparable accuracy, and ``n_error`` shows how many there
are. Refused and filtered answers are the model's own behaviour: not correct, kept in ``n``,
counted per run in ``n_refused`` / ``n_filtered`` (see :mod:`cresowlve_core.analysis.loading`).

Published numbers come from the shipped ``data/cresowlve/paper_table1.csv``. A run matches a paper row
when the model names agree after :func:`model_key` (case-insensitive, ``provider/`` prefix
dropped, the :data:`MODEL_ALIASES` table applied) **and** the efforts agree exactly (no effort
matches only a paper row without one). Paper rows that share a key, and runs that map to the
same paper row, are flagged in the notes. The paper's denominator is ``paper_n`` (2,061 items
per cell).

**Paper-comparable accuracy and Δ.** The paper's released code counts every response without a
"yes" as wrong, so its accuracy is over all items. ``pct_comparable`` = ``k / n_all`` (every item
without a value counted wrong; with ``--judge-protocol paper`` only a refused, filtered or cut-off judge
reply is unscored, and without one it equals ``pct``) with its Wilson interval, shown beside ours. Δ = ``pct_comparable`` − paper, with
Newcombe's interval for two **independent** proportions (the paper value taken as
``round(pct · paper_n / 100)`` of ``paper_n``): it treats our run and the paper's as independent
samples, although both answer the same items; without the paper's per-item outcomes no paired
interval can be formed, and where the two runs agree item by item this one is wider than a
paired interval would be.

**Coverage** = items with a value from an actual answer / all items: errored items (no answer)
count against it. A cell of a metric the table uses (some run has a value for it) with **no**
value at all has coverage 0 and is marked low coverage too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import MODEL_BASED, RunSet, no_answer, normalise_effort
from cresowlve_core.evaluation.metrics import METRICS as METRIC_REGISTRY
from cresowlve_core.paths import shipped_data
from cresowlve_core.stats import diff_proportions, wilson_interval

PAPER_N = 2061  # items behind every cell of the paper's Table 1
COVERAGE_THRESHOLD = 0.9
#: metric name -> column suffix of paper_table1.csv / our CSV (the paper's name when it has one)
TABLE_METRICS: dict[str, str] = {m.name: (m.paper_column or m.name) for m in METRIC_REGISTRY}
PAPER_METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_REGISTRY if m.paper_column)
_PAPER_HEADERS = {"exact_match": "Exact Match", "llm_judge": "LLM Judge"}
HEADERS: dict[str, str] = {
    m.name: _PAPER_HEADERS.get(m.paper_column or "", m.label) for m in METRIC_REGISTRY
}
GROUPS = {False: "Non-thinking models", True: "Thinking models"}
LOW_COVERAGE_MARK = "†"
UNFINISHED_MARK = "‡"
GREY = "color: #9e9e9e; font-style: italic"
#: the columns of :func:`results_long` that tell one configuration from another (a model named ``m (low)``
#: and the model ``m`` at effort ``low`` share the name ``m (low)``)
CONFIG_KEY = ["config", "model", "effort"]

#: API / hub model names -> the paper's names (keys and values are compared through model_key)
MODEL_ALIASES: dict[str, str] = {
    "gpt-4.1-2025-04-14": "GPT-4.1",
    "gpt-4.1-mini-2025-04-14": "GPT-4.1-mini",
    "olmo-2-0325-32b-instruct": "OLMo-2-32B-Instruct",
    "command-a-03-2025": "C4AI-command-a",
    "c4ai-command-a-03-2025": "C4AI-command-a",
    "llama-3.3-70b-instruct-turbo": "Llama-3.3-70B-Instruct",
    "qwen3-235b-a22b-instruct-2507": "Qwen3-235B-A22B-Instruct",
    "qwen3-235b-a22b-thinking-2507": "Qwen3-235B-A22B-Thinking",
    "deepseek-v3.2-exp": "DeepSeek-V3.2",
    "gemini-3-flash-preview": "Gemini-3-Flash",
    "gemini-3.1-pro-preview": "Gemini-3.1-Pro",
}

LONG_COLUMNS = [
    "group",
    "name",
    "model",
    "effort",
    "config",
    "thinking",
    "lang",
    "run_id",
    "metric",
    "k",
    "n",
    "n_all",
    "n_error",
    "n_refused",
    "n_filtered",
    "n_scored",
    "coverage",
    "pct",
    "low",
    "high",
    "pct_comparable",
    "comparable_low",
    "comparable_high",
    "bound_low",
    "bound_high",
    "low_coverage",
    "complete",
    "n_planned",
    "n_records",
    "paper",
    "paper_low",
    "paper_high",
    "delta",
    "delta_low",
    "delta_high",
    "paper_order",
    "paper_shared",
]


def load_paper_table(path: Path | None = None) -> tuple[pd.DataFrame | None, str | None]:
    """The published Table 1, or ``(None, message)`` when the file is missing."""
    p = Path(path) if path is not None else shipped_data("cresowlve", "paper_table1.csv")
    if not p.exists():
        return None, f"Published numbers not overlaid: `{p}` not found (expected the paper's Table 1 CSV)."
    df = pd.read_csv(p, dtype={"thinking": str})
    df["effort"] = df["thinking"].map(normalise_effort)
    df["key"] = df["model"].map(model_key)
    df["paper_order"] = np.arange(len(df))
    return df, None


def _plain_key(name: str) -> str:
    key = str(name).rsplit("/", 1)[-1].strip().casefold()
    return re.sub(r"[\s_]+", "-", key)


_ALIAS_KEYS = {_plain_key(k): _plain_key(v) for k, v in MODEL_ALIASES.items()}


def model_key(name: str, aliases: Mapping[str, str] | None = None) -> str:
    """The key a model name is matched on: ``provider/`` dropped, case-folded, spaces and
    underscores as ``-``, then :data:`MODEL_ALIASES` (and ``aliases``) applied.

    ``model_key("openai/gpt-4.1") == model_key("GPT-4.1") == "gpt-4.1"``.
    """
    key = _plain_key(name)
    extra = {_plain_key(k): _plain_key(v) for k, v in (aliases or {}).items()}
    return extra.get(key) or _ALIAS_KEYS.get(key, key)


def paper_duplicates(paper: pd.DataFrame | None) -> list[str]:
    """Notes for paper rows that share a model key and effort (the overlay takes the first)."""
    if paper is None:
        return []
    dup = paper[paper.duplicated(["key", "effort"], keep=False)]
    return [
        f"Paper table: {len(g)} rows for {g['model'].iloc[0]} / {e or '-'} (rows {', '.join(map(str, g.index + 1))}); "
        "the first one is overlaid."
        for (_, e), g in dup.groupby(["key", "effort"], sort=False)
    ]


def match_paper(
    configs: pd.DataFrame, paper: pd.DataFrame | None, aliases: Mapping[str, str] | None = None
) -> pd.Series:
    """For each row of ``configs`` (columns model, effort) the matching paper row index or NaN.

    Model names match through :func:`model_key`; efforts must be equal (``""`` = no effort
    matches only a paper row without one). Duplicated paper rows: the first wins.
    """
    if paper is None:
        return pd.Series(np.nan, index=configs.index)
    keys = paper["model"].map(lambda m: model_key(m, aliases)) if aliases else paper["key"]
    exact: dict[tuple[str, str], int] = {}
    for i, k, e in zip(paper.index, keys, paper["effort"], strict=True):
        exact.setdefault((k, e), i)
    out = [
        exact.get((model_key(m, aliases), normalise_effort(e)), np.nan)
        for m, e in zip(configs["model"], configs["effort"], strict=True)
    ]
    return pd.Series(out, index=configs.index, dtype="float64")


def results_long(
    rs: RunSet,
    paper: pd.DataFrame | None = None,
    creative_only: bool = True,
    coverage_threshold: float = COVERAGE_THRESHOLD,
    paper_n: int = PAPER_N,
    aliases: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Accuracy per configuration × language × metric, with n, coverage, bounds, CIs and paper overlay.

    ``creative_only`` drops items annotated ``factual`` (the paper's Table 1 is the creative
    subset). Columns: :data:`LONG_COLUMNS` (percentages in %; ``coverage`` a fraction).
    """
    df = rs.creative()[0] if creative_only else rs.responses
    if df.empty:
        return pd.DataFrame(columns=LONG_COLUMNS)
    metrics = list(TABLE_METRICS)
    keys = ["config", "model", "effort", "thinking", "lang", "run_id"]
    err = pd.Series(no_answer(df), index=df.index)
    outcome = df["outcome"] if "outcome" in df else pd.Series(None, index=df.index, dtype=object)
    answered = df[metrics].mask(err, axis=0)  # a value from an actual answer
    work = df[[*keys, "status", *metrics]].assign(
        _err=err, _ref=outcome.eq("refused") & ~err, _fil=outcome.eq("filtered") & ~err,
        **{f"_ans_{m}": answered[m] for m in metrics},
        # a refused or filtered answer without a value (a run the judge never scored) is still not correct
        **{f"_withheld_{m}": (outcome.isin(["refused", "filtered"]) & ~err & df[m].isna()) for m in metrics})
    grouped = work.groupby(keys, sort=False)
    base = grouped.agg(n_all=("status", "size"), n_error=("_err", "sum"), n_refused=("_ref", "sum"),
                       n_filtered=("_fil", "sum"))
    sums, counts = grouped[metrics].sum(), grouped[metrics].count()
    answered_counts = grouped[[f"_ans_{m}" for m in metrics]].count()
    withheld = grouped[[f"_withheld_{m}" for m in metrics]].sum()
    rows = []
    for metric in metrics:
        part = base.copy()
        part["k"], part["n"] = sums[metric], counts[metric]
        part["n_scored"] = answered_counts[f"_ans_{metric}"]
        part["_withheld"] = withheld[f"_withheld_{metric}"]
        part["metric"] = metric
        rows.append(part.reset_index())
    long = pd.concat(rows, ignore_index=True)
    for c in ("k", "n", "n_all", "n_error", "n_refused", "n_filtered", "n_scored"):
        long[c] = long[c].astype(int)
    low, high = wilson_interval(long["k"].to_numpy(), long["n"].to_numpy())
    c_low, c_high = wilson_interval(long["k"].to_numpy(), long["n_all"].to_numpy())
    n_all = long["n_all"].where(long["n_all"] > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        long["pct"] = 100.0 * long["k"] / long["n"].where(long["n"] > 0)
        long["coverage"] = long["n_scored"] / n_all
        long["bound_low"] = 100.0 * long["k"] / n_all
        long["bound_high"] = 100.0 * (long["k"] + long["n_all"] - long["n"] - long["_withheld"]) / n_all
    long["low"], long["high"] = 100.0 * low, 100.0 * high
    # the paper's counting: every item without a value is wrong (only defined where the metric scored anything)
    has = long["n"] > 0
    long["pct_comparable"] = long["bound_low"].where(has)
    long["comparable_low"] = pd.Series(100.0 * c_low, index=long.index).where(has)
    long["comparable_high"] = pd.Series(100.0 * c_high, index=long.index).where(has)
    # a cell without a single value is the lowest coverage there is (in a metric some run has)
    used = long.groupby("metric")["n"].transform("sum") > 0
    long["low_coverage"] = used & (long["n_all"] > 0) & (long["coverage"].fillna(0.0) < coverage_threshold)
    long["group"] = long["thinking"].map(GROUPS)
    runs = rs.runs.set_index("run_id")
    long["complete"] = long["run_id"].map(runs["complete"]).fillna(True).astype(bool)
    long["n_planned"] = long["run_id"].map(runs["n_planned"])
    long["n_records"] = long["run_id"].map(runs["n_records"])
    names = runs["name"] if "name" in runs else runs["model"]
    long["name"] = long["run_id"].map(names).fillna(long["model"]).astype(str)  # the grid's label, else the model
    _overlay_paper(long, paper, paper_n, aliases)
    served = rs.served_notes()  # after the overlay: the paper is matched on the name as requested
    long["name"] = [f"{n} ({served[c]})" if served.get(c) else n for n, c in zip(long["name"], long["config"], strict=True)]
    return _order_rows(long)[LONG_COLUMNS]


def _overlay_paper(long: pd.DataFrame, paper: pd.DataFrame | None, paper_n: int, aliases: Mapping[str, str] | None) -> None:
    idx = match_paper(long, paper, aliases)
    for c in ("paper", "paper_low", "paper_high", "delta", "delta_low", "delta_high", "paper_order"):
        long[c] = np.nan
    long["paper_shared"] = False
    if paper is None or not idx.notna().any():
        return
    hit = idx.notna()
    cols = long.loc[hit, "lang"] + "_" + long.loc[hit, "metric"].map(TABLE_METRICS)
    values = [paper.at[i, c] if c in paper.columns else np.nan for i, c in zip(idx[hit].astype(int), cols, strict=True)]
    long.loc[hit, "paper"] = pd.to_numeric(pd.Series(values, index=long.index[hit]), errors="coerce")
    long.loc[hit, "paper_order"] = paper.loc[idx[hit].astype(int), "paper_order"].to_numpy()
    shared = long.loc[hit].assign(_i=idx[hit]).groupby(["_i", "lang", "metric"])["config"].transform("nunique") > 1
    long.loc[shared.index, "paper_shared"] = shared.to_numpy()
    for i in long.index[long["paper"].notna() & (long["n"] > 0)]:
        k_p = int(round(long.at[i, "paper"] * paper_n / 100.0))
        p_lo, p_hi = wilson_interval(k_p, paper_n)
        # paper-comparable: our k over all our items, as the paper counted; two independent samples
        d = diff_proportions(int(long.at[i, "k"]), int(long.at[i, "n_all"]), k_p, paper_n)
        long.at[i, "paper_low"], long.at[i, "paper_high"] = 100.0 * p_lo, 100.0 * p_hi
        long.at[i, "delta"] = long.at[i, "pct_comparable"] - long.at[i, "paper"]
        long.at[i, "delta_low"], long.at[i, "delta_high"] = 100.0 * d.low, 100.0 * d.high


def paper_notes(long: pd.DataFrame, paper: pd.DataFrame | None) -> list[str]:
    """Duplicated paper rows and runs that map to the same paper row."""
    notes = paper_duplicates(paper)
    if not long.empty and long["paper_shared"].any():
        for (_order, lang), g in long[long["paper_shared"]].groupby(["paper_order", "lang"]):
            configs = ", ".join(sorted(g["config"].unique()))
            notes.append(f"Several runs map to the same paper row ({lang}): {configs}; each shows that row's numbers.")
    return notes


def _order_rows(long: pd.DataFrame) -> pd.DataFrame:
    order = long.assign(_o=long["paper_order"].fillna(1e9)).sort_values(
        ["thinking", "_o", "config", "lang", "metric"], kind="stable"
    )
    return order.drop(columns="_o").reset_index(drop=True)


_WIDE_SUFFIXES = [
    ("", "pct"),
    ("_low", "low"),
    ("_high", "high"),
    ("_n", "n"),
    ("_n_all", "n_all"),
    ("_n_scored", "n_scored"),
    ("_coverage", "coverage"),
    ("_comparable", "pct_comparable"),
    ("_bound_low", "bound_low"),
    ("_bound_high", "bound_high"),
    ("_n_error", "n_error"),
    ("_n_refused", "n_refused"),
    ("_n_filtered", "n_filtered"),
    ("_paper", "paper"),
    ("_delta", "delta"),
    ("_delta_low", "delta_low"),
    ("_delta_high", "delta_high"),
]


def table1_wide(long: pd.DataFrame) -> pd.DataFrame:
    """Numeric wide form: one row per configuration; ``{lang}_{metric}`` plus n, coverage, bounds, paper, Δ."""
    if long.empty:
        return pd.DataFrame(columns=["group", "name", "model", "effort"])
    long = long.assign(col=long["lang"] + "_" + long["metric"].map(TABLE_METRICS))
    index = ["group", "name", "model", "effort", "config"]
    frames = []
    indexed = long.set_index([*index, "col"])  # once: each suffix only picks its column
    for suffix, src in _WIDE_SUFFIXES:
        w = indexed[src].unstack("col")
        w.columns = [f"{c}{suffix}" for c in w.columns]
        frames.append(w)
    complete = long.groupby(index)["complete"].all().rename("complete")
    wide = pd.concat([*frames, complete], axis=1)
    first = [f"{lang}_{m}" for lang in ("en", "ru") for m in TABLE_METRICS.values()]
    ordered = [f"{c}{s}" for c in first for s, _ in _WIDE_SUFFIXES if f"{c}{s}" in wide.columns]
    wide = wide[[*ordered, "complete"]].copy().reset_index()  # one block per dtype: no fragmented inserts
    order = long.drop_duplicates("config")["config"].tolist()
    wide = wide.set_index("config").loc[order].reset_index()
    wide = wide[["group", "name", "model", "effort", "config", "complete", *ordered]].copy()
    wide["effort"] = wide["effort"].replace("", "-")
    return wide.round(4)


def _fmt_cell(r: pd.Series) -> str:
    if pd.isna(r["pct"]):
        return (f"{LOW_COVERAGE_MARK} no scores" if r["low_coverage"] else "no scores") if r["n_all"] else ""
    text = f"{r['pct']:.1f} [{r['low']:.1f}, {r['high']:.1f}]"
    marks = (LOW_COVERAGE_MARK if r["low_coverage"] else "") + ("" if r["complete"] else UNFINISHED_MARK)
    return f"{marks} ({text})" if r["low_coverage"] else f"{marks} {text}".strip()


def n_field(r: pd.Series) -> str:
    """``"1690/1742 (97%), 10 err, 31 refused, 4 filtered"``: scored / all = coverage, then the
    errored items (no answer, left out) and the refused / filtered answers (in n, not correct)."""
    if not r["n_all"]:
        return "0"
    text = f"{r['n_scored']}/{r['n_all']} ({100 * (0 if pd.isna(r['coverage']) else r['coverage']):.0f}%)"
    counts = [(r["n_error"], "err"), (r.get("n_refused", 0), "refused"), (r.get("n_filtered", 0), "filtered")]
    return text + "".join(f", {int(k)} {label}" for k, label in counts if k)


def _fmt_delta(r: pd.Series) -> str:
    if pd.isna(r["delta"]):
        return ""
    return f"{r['delta']:+.1f} [{r['delta_low']:+.1f}, {r['delta_high']:+.1f}]"


def table1_display(long: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """The paper's layout as strings: rows grouped by thinking, columns lang × metric × fields.

    Fields: ``% [95% CI]`` (marked † below the coverage threshold, ‡ for an unfinished run),
    ``n`` (answered items with a value / all items = coverage, errored items, refused and filtered
    answers: :func:`n_field`), ``bounds`` (if
    every item without a value were wrong / right) and ``paper-comparable %`` (unscored counted
    wrong, as the paper did; model-based metrics only), ``paper`` and ``Δ [95% CI]`` (paper-comparable
    − paper).
    ``metrics`` defaults to the metrics that have a paper column.
    """
    if long.empty:
        return pd.DataFrame()
    metrics = tuple(metrics or PAPER_METRICS)
    sub = long[long["metric"].isin(metrics)].copy()
    sub["ours"] = [_fmt_cell(r) for _, r in sub.iterrows()]
    sub["n_s"] = [n_field(r) for _, r in sub.iterrows()]
    sub["comparable_s"] = [
        "" if pd.isna(v) else f"{v:.1f} [{lo:.1f}, {hi:.1f}]"
        for v, lo, hi in zip(sub["pct_comparable"], sub["comparable_low"], sub["comparable_high"], strict=True)
    ]
    sub["bounds_s"] = [
        "" if pd.isna(lo) else f"[{lo:.1f}, {hi:.1f}]" for lo, hi in zip(sub["bound_low"], sub["bound_high"], strict=True)
    ]
    sub["paper_s"] = sub["paper"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    sub["delta_s"] = [_fmt_delta(r) for _, r in sub.iterrows()]
    sub["effort"] = sub["effort"].replace("", "-")
    langs = [lang for lang in ("en", "ru") if lang in set(sub["lang"])]
    if not langs:  # runs of other languages only (the loader's notes name them): no column to show them in
        return pd.DataFrame()
    pieces = []
    for lang in langs:
        for m in metrics:
            part = sub[(sub["lang"] == lang) & (sub["metric"] == m)].set_index(["group", "name", "effort"])
            head = (f"CresOWLve-{lang.capitalize()}", HEADERS.get(m, m))
            fields = [("ours", "% [95% CI]"), ("n_s", "n scored/all")]
            if m in MODEL_BASED:
                fields += [("bounds_s", "bounds"), ("comparable_s", "paper-comparable %")]
            fields += [("paper_s", "paper"), ("delta_s", "Δ [95% CI]")]
            pieces.append(
                part[[f for f, _ in fields]].set_axis(
                    pd.MultiIndex.from_tuples([(*head, label) for _, label in fields]), axis=1
                )
            )
    table = pd.concat(pieces, axis=1)
    order = sub.drop_duplicates(CONFIG_KEY).set_index(["group", "name", "effort"]).index
    table = table.reindex(order).fillna("")
    table.index.names = ["", "Model", "Thinking Effort"]
    return table


def table1_footnotes(long: pd.DataFrame, coverage_threshold: float = COVERAGE_THRESHOLD) -> list[str]:
    """One line per mark used in :func:`table1_display` (coverage below threshold, unfinished run)."""
    notes: list[str] = []
    if long.empty:
        return notes
    low = long[long["low_coverage"]]
    for r in low.itertuples(index=False):
        notes.append(
            f"{LOW_COVERAGE_MARK} {r.config} / {r.lang} / {HEADERS.get(r.metric, r.metric)}: scored {r.n_scored} of "
            f"{r.n_all} items ({100 * r.coverage:.0f}% < {100 * coverage_threshold:.0f}%"
            + (f"; {r.n_error} errored items count against it" if r.n_error else "")
            + "); greyed out. If every unscored item "
            f"were wrong the accuracy would be {r.bound_low:.1f}%, if every one were right {r.bound_high:.1f}%."
        )
    unfinished = long[~long["complete"]].drop_duplicates([*CONFIG_KEY, "lang"])
    for r in unfinished.itertuples(index=False):
        planned = "?" if pd.isna(r.n_planned) else int(r.n_planned)
        notes.append(
            f"{UNFINISHED_MARK} {r.config} / {r.lang}: the run did not finish ({int(r.n_records)} of {planned} "
            "planned items); its numbers cover only the items done so far."
        )
    return notes


def style_table1(display: pd.DataFrame):  # -> pandas Styler
    """Grey out the cells marked † (coverage below the threshold) in :func:`table1_display`."""
    def grey(v: object) -> str:
        return GREY if isinstance(v, str) and v.startswith(LOW_COVERAGE_MARK) else ""

    from cresowlve_core.untrusted import styler

    return styler(display).map(grey)


def _export_banners(long: pd.DataFrame, synthetic: bool) -> list[str]:
    from cresowlve_core.banners import export_banners

    models = long["model"].dropna().astype(str).unique().tolist() if "model" in long.columns else []
    return list(export_banners(synthetic=synthetic, models=models))


def write_table1_csv(long: pd.DataFrame, path: Path, synthetic: bool = False) -> Path:
    """Write :func:`table1_wide` to ``path`` (a ``synthetic`` column flags synthetic inputs).

    When the inputs are synthetic or come from the embedded 270M model, a ``warning`` column
    carries the banner text (:func:`cresowlve_core.banners.banner_text`) on every row.
    """
    from cresowlve_core.banners import banner_text

    wide = table1_wide(long)
    wide.insert(0, "synthetic", synthetic)
    kinds = _export_banners(long, synthetic)
    if kinds:
        wide.insert(0, "warning", " ".join(banner_text(k) for k in kinds))  # type: ignore[arg-type]
    from cresowlve_core.outfiles import write_csv

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_csv(path, wide)


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text; line breaks and other control characters
    become spaces (a blank line inside a tabular would end it)."""
    return "".join(_LATEX_ESCAPES.get(ch, " " if ch < " " or ch == "\x7f" else ch) for ch in str(text))


def table1_latex(long: pd.DataFrame, with_paper: bool = True, synthetic: bool = False) -> str:
    """Table 1 as a booktabs ``tabular``: accuracy % with its 95 % CI (and the paper value)."""
    langs = [lang for lang in ("en", "ru") if lang in set(long["lang"])] if not long.empty else []
    metrics = PAPER_METRICS
    # a row is one configuration: its name, and the model and effort behind it (two can share a name)
    cells = {(r.config, r.model, r.effort, r.lang, r.metric): r for r in long.itertuples(index=False) if r.metric in metrics}
    lines = []
    if synthetic:
        lines.append("% SYNTHETIC DATA - NOT RESULTS")
    ncol = 2 + 2 * len(langs)
    lines += [r"\begin{tabular}{ll" + "c" * (2 * len(langs)) + "}", r"\toprule"]
    lines.append(
        " & & " + " & ".join(rf"\multicolumn{{2}}{{c}}{{CresOWLve-{lang.capitalize()}}}" for lang in langs) + r" \\"
    )
    rules = " ".join(rf"\cmidrule(lr){{{3 + 2 * i}-{4 + 2 * i}}}" for i in range(len(langs)))
    if rules:
        lines.append(rules)
    lines.append(
        "Model & Thinking Effort & " + " & ".join(" & ".join(HEADERS[m] for m in metrics) for _ in langs) + r" \\"
    )
    lines.append(r"\midrule")
    configs = long.drop_duplicates(CONFIG_KEY) if not long.empty else long
    for thinking in (False, True):
        rows = configs[configs["thinking"] == thinking]
        if rows.empty:
            continue
        lines.append(rf"\multicolumn{{{ncol}}}{{l}}{{\textit{{{GROUPS[thinking]}}}}} \\")
        for r in rows.itertuples(index=False):
            out = [latex_escape(r.name), latex_escape(r.effort or "-")]
            for lang in langs:
                for m in metrics:
                    c = cells.get((r.config, r.model, r.effort, lang, m))
                    if c is None or pd.isna(c.pct):
                        out.append("--")
                        continue
                    s = rf"{c.pct:.2f} {{\scriptsize [{c.low:.1f}, {c.high:.1f}]}}"
                    if with_paper and not pd.isna(c.paper):
                        s += rf" {{\scriptsize ({c.paper:.2f})}}"
                    if c.low_coverage:  # below the coverage threshold: greyed, dagger
                        s = rf"\textcolor{{gray}}{{{s}}}$^\dagger$"
                    if not c.complete:
                        s += r"$^\ddagger$"
                    out.append(s)
            lines.append(" & ".join(out) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    left_out = left_out_counts(long, metrics)
    if left_out:
        lines.append(r"\par\smallskip{\footnotesize Accuracy over the items with a value, n of all items (the "
                     "others, errored or unscored, are left out; the paper counted them wrong): "
                     + "; ".join(latex_escape(w) for w in left_out) + ".}")
    unfinished = unfinished_counts(long)
    if unfinished:
        lines.append(r"\par\smallskip{\footnotesize $^\ddagger$ The run did not finish; its numbers cover only the "
                     "items done: " + "; ".join(latex_escape(u) for u in unfinished) + ".}")
    withheld = refusal_counts(long)
    if withheld:
        lines.append(r"\par\smallskip{\footnotesize Refused / filtered answers (not correct, kept in n): "
                     + "; ".join(latex_escape(w) for w in withheld) + ".}")
    return "\n".join(lines) + "\n"


def left_out_counts(long: pd.DataFrame, metrics: Sequence[str] = PAPER_METRICS) -> list[str]:
    """``"GPT-4.1 / en: Exact Match n = 20 of 22, LLM Judge n = 18 of 22 (2 errored)"`` per configuration ×
    language where one of ``metrics`` has a value for some but not all items (errored or unscored); a metric
    with no value at all shows none ("--")."""
    if long.empty:
        return []
    sub = long[long["metric"].isin(metrics) & (long["n"] > 0) & (long["n"] < long["n_all"])]  # a number shown
    out = []
    for _, g in sub.groupby([*CONFIG_KEY, "lang"], sort=False):
        first = g.iloc[0]
        cells = ", ".join(f"{HEADERS.get(r.metric, r.metric)} n = {int(r.n)} of {int(r.n_all)}" for r in g.itertuples())
        errored = f" ({int(first['n_error'])} errored)" if first["n_error"] else ""
        out.append(f"{first['config']} / {first['lang']}: {cells}{errored}")
    return out


def unfinished_counts(long: pd.DataFrame) -> list[str]:
    """``"GPT-4.1 / en: 10 of 2061 planned items"`` per configuration × language whose run did not finish (‡)."""
    if long.empty:
        return []
    runs = long[~long["complete"]].drop_duplicates([*CONFIG_KEY, "lang"])
    return [f"{r.config} / {r.lang}: {int(r.n_records)} of {'?' if pd.isna(r.n_planned) else int(r.n_planned)} "
            "planned items" for r in runs.itertuples(index=False)]


def refusal_counts(long: pd.DataFrame) -> list[str]:
    """``"GPT-4.1 / ru: 58 refused, 23 filtered"`` per configuration × language that has any."""
    if long.empty or "n_refused" not in long:
        return []
    runs = long.drop_duplicates([*CONFIG_KEY, "lang"])
    return [f"{r.config} / {r.lang}: {int(r.n_refused)} refused, {int(r.n_filtered)} filtered"
            for r in runs.itertuples(index=False) if r.n_refused or r.n_filtered]


def write_table1_latex(long: pd.DataFrame, path: Path, synthetic: bool = False) -> Path:
    """Write :func:`table1_latex` to ``path``; synthetic or embedded-model inputs get the banner
    text as comment lines on top and a bold warning line under the table."""
    from cresowlve_core.banners import banner_text, banner_title

    kinds = _export_banners(long, synthetic)
    head = "".join(f"% {banner_text(k)}\n" for k in kinds)  # type: ignore[arg-type]
    tail = "".join(
        "\\par\\smallskip\\textbf{" + latex_escape(banner_title(k)).replace("—", "---") + "}\n"  # type: ignore[arg-type]
        for k in kinds
    )
    body = table1_latex(long, synthetic=synthetic)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + body + ("" if body.endswith("\n") else "\n") + tail, encoding="utf-8")
    return path


def results_table(
    rs: RunSet,
    paper_path: Path | None = None,
    coverage_threshold: float = COVERAGE_THRESHOLD,
    aliases: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """:func:`results_long` with the paper table loaded from ``paper_path``, plus notes."""
    paper, msg = load_paper_table(paper_path)
    notes = [msg] if msg else []
    long = results_long(rs, paper, coverage_threshold=coverage_threshold, aliases=aliases)
    return long, notes + paper_notes(long, paper)
