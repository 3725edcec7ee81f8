"""How far to trust the LLM judge, and what the runs cost.

* :func:`judge_vs_em` — agreement between the judge verdict and **strict** exact match per run
  (confusion counts, raw agreement, Cohen's κ with its 95 % interval) and pooled, over the
  **same population as Table 1**: the creative subset, every item the judge column has a value
  for (errored items included as wrong in both, as in Table 1; ``n_error`` says how many), so
  judge % − EM % in Table 1 = (judge_only − em_only) / n here;
* :func:`judge_repeatability` — agreement + κ between the judge verdict and a second,
  independent verdict of the **same response**.

  Mechanism (the one place repeats are read from): the judging stage re-judges a sample of
  already-judged records and stores the second verdict in the record as
  ``extra.judge_repeat = "CORRECT" | "INCORRECT"`` (a list is accepted; its first element
  is used). Two run directories of the same model/effort/language are *not* treated as a
  repeat: their responses differ, so they would mix model and judge variance; the loader
  keeps the later one;
* :func:`judge_coverage` — per run, how many records the judge scored, left unscored
  (unparseable verdict), errored on or never ran on;
* :func:`cost_table` — input, output and reasoning tokens and cost per run, judge cost
  separately; unknown prices stay unknown (see :func:`format_cost`).

κ is NaN, shown as "undefined", when chance agreement is 1 (both raters used one identical
category), never 1.0. The repeatability table leaves errored records out (nothing was judged).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import main_subset
from cresowlve_core.stats import binary_agreement

AGREEMENT_COLUMNS = [
    "config",
    "lang",
    "n",
    "n_error",
    "both_correct",
    "judge_only",
    "em_only",
    "both_wrong",
    "agreement",
    "kappa",
    "kappa_low",
    "kappa_high",
]


def _agreement_rows(df: pd.DataFrame, a: str, b: str, labels: tuple[str, str]) -> pd.DataFrame:
    rows = []
    groups = list(df.groupby(["config", "lang"], sort=True)) + [(("all runs", "all"), df)]
    for (config, lang), grp in groups:
        agr = binary_agreement(grp[a].to_numpy(float), grp[b].to_numpy(float))
        if agr.n == 0:
            continue
        rows.append(
            {
                "config": config,
                "lang": lang,
                "n": agr.n,
                "n_error": int(grp["status"].eq("error").sum()) if "status" in grp else 0,
                "both_correct": agr.both_yes,
                labels[0]: agr.a_yes_b_no,
                labels[1]: agr.a_no_b_yes,
                "both_wrong": agr.both_no,
                "agreement": agr.observed,
                "kappa": agr.kappa,
                "kappa_low": agr.kappa_low,
                "kappa_high": agr.kappa_high,
            }
        )
    return pd.DataFrame(rows)


def judge_vs_em(responses: pd.DataFrame, em: str = "em_strict", creative_only: bool = True) -> pd.DataFrame:
    """Judge vs exact match (strict by default) per config × lang, plus an ``all runs`` row.

    The population is Table 1's judge cell: the creative subset (``creative_only``) and every
    response with a judge value, errored ones included (wrong in both). ``judge_only`` = judge
    says correct, EM says wrong (typical: paraphrased answers); ``em_only`` = EM matched but
    the judge rejected. Empty when nothing was judged.
    """
    df = main_subset(responses)[0] if creative_only and "reasoning_type" in responses else responses
    ok = df[df["judge"].notna() & df[em].notna()]
    out = _agreement_rows(ok, "judge", em, ("judge_only", "em_only"))
    return out.reindex(columns=AGREEMENT_COLUMNS) if not out.empty else pd.DataFrame(columns=AGREEMENT_COLUMNS)


def judge_repeatability(responses: pd.DataFrame) -> pd.DataFrame:
    """Judge verdict vs its repeat (``extra.judge_repeat``) per config × lang, plus ``all runs``."""
    ok = responses[responses["judge"].notna() & responses["judge_repeat"].notna() & (responses["status"] != "error")]
    cols = [
        "config",
        "lang",
        "n",
        "n_error",
        "both_correct",
        "first_only",
        "repeat_only",
        "both_wrong",
        "agreement",
        "kappa",
        "kappa_low",
        "kappa_high",
    ]
    out = _agreement_rows(ok, "judge", "judge_repeat", ("first_only", "repeat_only"))
    return out.reindex(columns=cols) if not out.empty else pd.DataFrame(columns=cols)


def format_kappa(kappa: float, low: float, high: float) -> str:
    """``"0.40 [0.15, 0.65]"``, or ``"undefined"`` when κ is NaN (chance agreement 1)."""
    if pd.isna(kappa):
        return "undefined"
    return f"{kappa:.2f} [{low:.2f}, {high:.2f}]"


def agreement_display(df: pd.DataFrame) -> pd.DataFrame:
    """An agreement table with κ as text (``undefined`` rather than NaN) and agreement rounded."""
    if df.empty:
        return df
    out = df.drop(columns=["kappa", "kappa_low", "kappa_high"]).copy()
    out["agreement"] = out["agreement"].round(3)
    out["kappa [95% CI]"] = [format_kappa(k, lo, hi) for k, lo, hi in zip(df["kappa"], df["kappa_low"], df["kappa_high"], strict=True)]
    return out


def judge_coverage(responses: pd.DataFrame) -> pd.DataFrame:
    """Per config × lang: records by ``judge_status`` and model errors."""
    counts = pd.crosstab([responses["config"], responses["lang"]], responses["judge_status"].fillna("not_run"))
    for c in ("scored", "unscored", "error", "not_run"):
        if c not in counts.columns:
            counts[c] = 0
    counts = counts[["scored", "unscored", "error", "not_run"]]
    counts.columns = ["scored", "unscored", "judge_error", "not_run"]
    counts["model_error"] = responses.groupby(["config", "lang"])["status"].apply(lambda s: int(s.eq("error").sum()))
    return counts.reset_index()


def _sum_known(s: pd.Series) -> tuple[float, int]:
    return float(s.sum(min_count=1)) if s.notna().any() else np.nan, int(s.isna().sum())


def cost_table(responses: pd.DataFrame) -> pd.DataFrame:
    """Tokens and cost per config × lang (sums over known values, with counts of unknowns).

    Columns: config, lang, n, n_cached, input/output/reasoning tokens, cost, cost_unknown,
    judge_input_tokens, judge_output_tokens, judge_cost, judge_cost_unknown. A sum is NaN when
    every value is unknown; ``*_unknown`` counts records without a value.
    """
    rows = []
    for (config, lang), grp in responses.groupby(["config", "lang"], sort=True):
        row: dict[str, object] = {"config": config, "lang": lang, "n": len(grp), "n_cached": int(grp["cached"].sum())}
        for col in ("input_tokens", "output_tokens", "reasoning_tokens", "judge_input_tokens", "judge_output_tokens"):
            row[col] = _sum_known(grp[col])[0]
        for col in ("cost", "judge_cost"):
            row[col], row[f"{col}_unknown"] = _sum_known(grp[col])
        judged = grp["judge_status"].isin(["scored", "unscored", "error"])
        if not judged.any():  # no judge: its cost is not "unknown", there is none
            row["judge_cost_unknown"] = 0
        else:
            row["judge_cost_unknown"] = int(grp.loc[judged, "judge_cost"].isna().sum())
        rows.append(row)
    return pd.DataFrame(rows)


def format_cost(total: float, unknown: int, n: int) -> str:
    """``"$1.23"``, ``"unknown"`` (no price at all) or ``"≥ $1.23 (5 of 100 unknown)"``."""
    if unknown >= n or pd.isna(total):
        return "unknown" if unknown else "–"
    if unknown:
        return f"≥ ${total:,.2f} ({unknown} of {n} unknown)"
    return f"${total:,.2f}"


def cost_display(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`cost_table` with readable strings: tokens as integers, unknown costs as ``unknown``."""
    if costs.empty:
        return costs
    out = costs[["config", "lang", "n", "n_cached"]].copy()
    for col in ("input_tokens", "output_tokens", "reasoning_tokens", "judge_input_tokens", "judge_output_tokens"):
        out[col] = costs[col].map(lambda v: "unknown" if pd.isna(v) else f"{int(v):,}")
    out["cost"] = [
        format_cost(t, u, n) for t, u, n in zip(costs["cost"], costs["cost_unknown"], costs["n"], strict=True)
    ]
    out["judge_cost"] = [
        "no judge" if u == 0 and pd.isna(t) else format_cost(t, u, n)
        for t, u, n in zip(costs["judge_cost"], costs["judge_cost_unknown"], costs["n"], strict=True)
    ]
    return out
