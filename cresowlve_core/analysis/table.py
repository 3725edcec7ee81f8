"""Table 1 of the paper: accuracy per model × thinking effort, En/Ru × exact match / LLM judge.

* :func:`results_long` — one row per configuration × language × metric with the count,
  accuracy in %, its 95 % Wilson interval, the published value and the difference;
* :func:`table1_display` — the paper's layout for a notebook (strings);
* :func:`table1_wide` / :func:`write_table1_csv` — numeric wide form whose main columns carry
  the same names as ``paper_table1.csv`` (``en_exact_match``, ``en_llm_judge``, ...);
* :func:`table1_latex` / :func:`write_table1_latex` — a booktabs table in the paper's layout.

The exact-match column is **strict** exact match, as in the paper; lenient exact match is
reported alongside (``*_em_lenient`` columns, and the ``em_lenient`` rows of the long form).

Published numbers come from ``DATA_DIR/cresowlve/paper_table1.csv``. A run matches a paper
row when the model names agree case-insensitively (ignoring a ``provider/`` prefix) and the
efforts agree (no effort = ``-``); a run without an effort setting also matches a model that
has a single paper row. Unmatched runs get blank paper cells.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import RunSet, main_subset, normalise_effort
from cresowlve_core.stats import wilson_interval
from cresowlve_core.paths import DATA_DIR

PAPER_TABLE = DATA_DIR / "cresowlve" / "paper_table1.csv"
TABLE_METRICS = {"em_strict": "exact_match", "judge": "llm_judge", "em_lenient": "em_lenient"}
HEADERS = {"em_strict": "Exact Match", "judge": "LLM Judge", "em_lenient": "EM (lenient)"}
GROUPS = {False: "Non-thinking models", True: "Thinking models"}


def load_paper_table(path: Path | None = None) -> tuple[pd.DataFrame | None, str | None]:
    """The published Table 1, or ``(None, message)`` when the file is missing."""
    p = Path(path) if path is not None else PAPER_TABLE
    if not p.exists():
        return None, f"Published numbers not overlaid: `{p}` not found (expected the paper's Table 1 CSV)."
    df = pd.read_csv(p, dtype={"thinking": str})
    df["effort"] = df["thinking"].map(normalise_effort)
    df["key"] = df["model"].map(model_key)
    df["paper_order"] = np.arange(len(df))
    return df, None


def model_key(name: str) -> str:
    """Case-insensitive model key without a ``provider/`` prefix."""
    return str(name).rsplit("/", 1)[-1].strip().casefold()


def match_paper(configs: pd.DataFrame, paper: pd.DataFrame | None) -> pd.Series:
    """For each row of ``configs`` (columns model, effort) the matching paper row index or NaN."""
    if paper is None:
        return pd.Series(np.nan, index=configs.index)
    exact = {(k, e): i for i, k, e in zip(paper.index, paper["key"], paper["effort"], strict=True)}
    single = paper.groupby("key").filter(lambda g: len(g) == 1)
    only = dict(zip(single["key"], single.index, strict=True))
    out = []
    for model, effort in zip(configs["model"], configs["effort"], strict=True):
        key, eff = model_key(model), normalise_effort(effort)
        idx = exact.get((key, eff))
        if idx is None and eff == "":
            idx = only.get(key)
        out.append(np.nan if idx is None else idx)
    return pd.Series(out, index=configs.index, dtype="float64")


def results_long(rs: RunSet, paper: pd.DataFrame | None = None, creative_only: bool = True) -> pd.DataFrame:
    """Accuracy per configuration × language × metric, with Wilson 95 % CI and paper overlay.

    ``creative_only`` drops items annotated ``factual`` (the paper's Table 1 is the creative
    subset). Columns: group, model, effort, config, thinking, lang, metric, k, n, pct, low,
    high (all in %), paper, delta (pct − paper), paper_order.
    """
    df = main_subset(rs.responses)[0] if creative_only else rs.responses
    if df.empty:
        return pd.DataFrame(
            columns=[
                "group",
                "model",
                "effort",
                "config",
                "thinking",
                "lang",
                "metric",
                "k",
                "n",
                "pct",
                "low",
                "high",
                "paper",
                "delta",
                "paper_order",
            ]
        )
    keys = ["config", "model", "effort", "thinking", "lang"]
    agg = df.groupby(keys, sort=False)[list(TABLE_METRICS)].agg(["sum", "count"])
    rows = []
    for metric in TABLE_METRICS:
        part = agg[metric].reset_index().rename(columns={"sum": "k", "count": "n"})
        part["metric"] = metric
        rows.append(part)
    long = pd.concat(rows, ignore_index=True)
    long["k"] = long["k"].astype(int)
    long["n"] = long["n"].astype(int)
    low, high = wilson_interval(long["k"].to_numpy(), long["n"].to_numpy())
    with np.errstate(invalid="ignore", divide="ignore"):
        long["pct"] = 100.0 * long["k"] / long["n"].where(long["n"] > 0)
    long["low"], long["high"] = 100.0 * low, 100.0 * high
    long["group"] = long["thinking"].map(GROUPS)
    idx = match_paper(long, paper)
    long["paper"] = np.nan
    long["paper_order"] = np.nan
    if paper is not None:
        hit = idx.notna()
        cols = long.loc[hit, "lang"] + "_" + long.loc[hit, "metric"].map(TABLE_METRICS)
        values = []
        for i, c in zip(idx[hit].astype(int), cols, strict=True):
            values.append(paper.at[i, c] if c in paper.columns else np.nan)
        long.loc[hit, "paper"] = pd.to_numeric(pd.Series(values, index=long.index[hit]), errors="coerce")
        long.loc[hit, "paper_order"] = paper.loc[idx[hit].astype(int), "paper_order"].to_numpy()
    long["delta"] = long["pct"] - long["paper"]
    return _order_rows(long)


def _order_rows(long: pd.DataFrame) -> pd.DataFrame:
    order = long.assign(_o=long["paper_order"].fillna(1e9)).sort_values(
        ["thinking", "_o", "config", "lang", "metric"], kind="stable"
    )
    return order.drop(columns="_o").reset_index(drop=True)


def table1_wide(long: pd.DataFrame) -> pd.DataFrame:
    """Numeric wide form: one row per configuration; ``{lang}_{metric}`` plus _low/_high/_n/_paper/_delta."""
    if long.empty:
        return pd.DataFrame(columns=["group", "model", "effort"])
    long = long.assign(col=long["lang"] + "_" + long["metric"].map(TABLE_METRICS))
    index = ["group", "model", "effort", "config"]
    frames = []
    for suffix, src in [
        ("", "pct"),
        ("_low", "low"),
        ("_high", "high"),
        ("_n", "n"),
        ("_paper", "paper"),
        ("_delta", "delta"),
    ]:
        w = long.set_index([*index, "col"])[src].unstack("col")
        w.columns = [f"{c}{suffix}" for c in w.columns]
        frames.append(w)
    wide = pd.concat(frames, axis=1)
    first = [f"{lang}_{m}" for lang in ("en", "ru") for m in TABLE_METRICS.values()]
    ordered = [
        f"{c}{s}" for c in first for s in ("", "_low", "_high", "_n", "_paper", "_delta") if f"{c}{s}" in wide.columns
    ]
    wide = wide[ordered].reset_index()
    order = long.drop_duplicates("config")["config"].tolist()
    wide = wide.set_index("config").loc[order].reset_index()
    wide = wide[["group", "model", "effort", "config", *ordered]]
    wide["effort"] = wide["effort"].replace("", "-")
    return wide.round(2)


def _fmt_cell(pct: float, low: float, high: float) -> str:
    if pd.isna(pct):
        return ""
    return f"{pct:.1f} [{low:.1f}, {high:.1f}]"


def table1_display(long: pd.DataFrame, metrics: tuple[str, ...] = ("em_strict", "judge")) -> pd.DataFrame:
    """The paper's layout as strings: rows grouped by thinking, columns lang × metric × (ours, paper, Δ)."""
    if long.empty:
        return pd.DataFrame()
    sub = long[long["metric"].isin(metrics)].copy()
    sub["ours"] = [_fmt_cell(p, lo, hi) for p, lo, hi in zip(sub["pct"], sub["low"], sub["high"], strict=True)]
    sub["paper_s"] = sub["paper"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    sub["delta_s"] = sub["delta"].map(lambda v: "" if pd.isna(v) else f"{v:+.1f}")
    sub["effort"] = sub["effort"].replace("", "-")
    langs = [lang for lang in ("en", "ru") if lang in set(sub["lang"])]
    pieces = []
    for lang in langs:
        for m in metrics:
            part = sub[(sub["lang"] == lang) & (sub["metric"] == m)].set_index(["group", "model", "effort"])
            head = (f"CresOWLve-{lang.capitalize()}", HEADERS[m])
            pieces.append(
                part[["ours", "paper_s", "delta_s"]].set_axis(
                    pd.MultiIndex.from_tuples([(*head, "ours % [95% CI]"), (*head, "paper"), (*head, "Δ")]),
                    axis=1,
                )
            )
    table = pd.concat(pieces, axis=1)
    order = sub.drop_duplicates("config").set_index(["group", "model", "effort"]).index
    table = table.reindex(order).fillna("")
    table.index.names = ["", "Model", "Thinking Effort"]
    return table


def write_table1_csv(long: pd.DataFrame, path: Path, synthetic: bool = False) -> Path:
    """Write :func:`table1_wide` to ``path`` (a ``synthetic`` column flags synthetic inputs)."""
    wide = table1_wide(long)
    wide.insert(0, "synthetic", synthetic)
    path.parent.mkdir(parents=True, exist_ok=True)
    wide.to_csv(path, index=False)
    return path


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
    """Escape LaTeX special characters in plain text."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def table1_latex(long: pd.DataFrame, with_paper: bool = True, synthetic: bool = False) -> str:
    """Table 1 as a booktabs ``tabular``: accuracy % with its 95 % CI (and the paper value)."""
    langs = [lang for lang in ("en", "ru") if lang in set(long["lang"])] if not long.empty else []
    metrics = ("em_strict", "judge")
    cells = {(r.config, r.lang, r.metric): r for r in long.itertuples(index=False) if r.metric in metrics}
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
    lines.append("Model & Thinking Effort & " + " & ".join("Exact Match & LLM Judge" for _ in langs) + r" \\")
    lines.append(r"\midrule")
    configs = long.drop_duplicates("config") if not long.empty else long
    for thinking in (False, True):
        rows = configs[configs["thinking"] == thinking]
        if rows.empty:
            continue
        lines.append(rf"\multicolumn{{{ncol}}}{{l}}{{\textit{{{GROUPS[thinking]}}}}} \\")
        for r in rows.itertuples(index=False):
            out = [latex_escape(r.model), latex_escape(r.effort or "-")]
            for lang in langs:
                for m in metrics:
                    c = cells.get((r.config, lang, m))
                    if c is None or pd.isna(c.pct):
                        out.append("--")
                        continue
                    s = rf"{c.pct:.2f} {{\scriptsize [{c.low:.1f}, {c.high:.1f}]}}"
                    if with_paper and not pd.isna(c.paper):
                        s += rf" {{\scriptsize ({c.paper:.2f})}}"
                    out.append(s)
            lines.append(" & ".join(out) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_table1_latex(long: pd.DataFrame, path: Path, synthetic: bool = False) -> Path:
    """Write :func:`table1_latex` to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table1_latex(long, synthetic=synthetic), encoding="utf-8")
    return path


def results_table(rs: RunSet, paper_path: Path | None = None) -> tuple[pd.DataFrame, list[str]]:
    """:func:`results_long` with the paper table loaded from ``paper_path``, plus notes."""
    paper, msg = load_paper_table(paper_path)
    notes = [msg] if msg else []
    return results_long(rs, paper), notes
