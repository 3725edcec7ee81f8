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

Intervals, honest at the edges: per run, the asymptotic interval of Fleiss, Cohen & Everitt
(the one statsmodels' ``cohens_kappa`` reports). Where it is degenerate it is NaN with a note
(``kappa_note``): one rater used a single category (κ = 0 by construction; statsmodels' test is
NaN), or a zero-width interval (perfect agreement). The pooled ``all runs`` row pools responses
that share items (every configuration answers every item), so its interval is a seeded
bootstrap **clustered by item** (``n_items`` clusters; :func:`cresowlve_core.stats.clustered_binary_kappa`),
wider than one that treats every response as independent.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import main_subset
from cresowlve_core.stats import binary_agreement, clustered_binary_kappa, one_rater_constant, stable_seed

AGREEMENT_COLUMNS = [
    "config",
    "lang",
    "n",
    "n_items",
    "n_error",
    "both_correct",
    "judge_only",
    "em_only",
    "both_wrong",
    "agreement",
    "kappa",
    "kappa_low",
    "kappa_high",
    "kappa_note",
]
ONE_RATER = "one rater used a single category: κ = 0 by construction, no interval"
ZERO_WIDTH = "zero-width interval (perfect agreement): not an interval"


def _interval(agr: object, table: np.ndarray) -> tuple[float, float, str]:
    """The asymptotic interval of one run, or NaN with the reason it is degenerate."""
    nan = float("nan")
    low, high = agr.kappa_low, agr.kappa_high  # type: ignore[attr-defined]
    if one_rater_constant(table):
        return nan, nan, ONE_RATER
    if pd.isna(agr.kappa):  # type: ignore[attr-defined]
        return nan, nan, "undefined: chance agreement is 1 (both used one identical category)"
    if not pd.isna(low) and high - low <= 1e-12:
        return nan, nan, ZERO_WIDTH
    return low, high, ""


def _agreement_rows(df: pd.DataFrame, a: str, b: str, labels: tuple[str, str], *, n_boot: int = 1000,
                    seed: int = 0) -> pd.DataFrame:
    rows = []
    groups = list(df.groupby(["config", "lang"], sort=True)) + [(("all runs", "all"), df)]
    for (config, lang), grp in groups:
        agr = binary_agreement(grp[a].to_numpy(float), grp[b].to_numpy(float))
        if agr.n == 0:
            continue
        table = np.array([[agr.both_yes, agr.a_yes_b_no], [agr.a_no_b_yes, agr.both_no]], dtype=float)
        ids = grp["id"].astype(str).to_numpy() if "id" in grp else np.arange(len(grp)).astype(str)
        if config == "all runs":
            iv = clustered_binary_kappa(grp[a].to_numpy(float), grp[b].to_numpy(float), ids, n_boot=n_boot,
                                        rng=stable_seed(seed, "kappa-pooled", a, b))
            low, high = iv.low, iv.high
            note = "; ".join(x for x in (f"bootstrap clustered by item ({iv.n} items, {n_boot} resamples)", iv.note) if x)
        else:
            low, high, note = _interval(agr, table)
        rows.append(
            {
                "config": config,
                "lang": lang,
                "n": agr.n,
                "n_items": int(pd.Series(ids).nunique()),
                "n_error": int(grp["status"].eq("error").sum()) if "status" in grp else 0,
                "both_correct": agr.both_yes,
                labels[0]: agr.a_yes_b_no,
                labels[1]: agr.a_no_b_yes,
                "both_wrong": agr.both_no,
                "agreement": agr.observed,
                "kappa": agr.kappa,
                "kappa_low": low,
                "kappa_high": high,
                "kappa_note": note,
            }
        )
    return pd.DataFrame(rows)


def judge_vs_em(responses: pd.DataFrame, em: str = "em_strict", creative_only: bool = True, *, n_boot: int = 1000,
                seed: int = 0) -> pd.DataFrame:
    """Judge vs exact match (strict by default) per config × lang, plus an ``all runs`` row.

    The population is Table 1's judge cell: the creative subset (``creative_only``) and every
    response with a judge value, errored ones included (wrong in both). ``judge_only`` = judge
    says correct, EM says wrong (typical: paraphrased answers); ``em_only`` = EM matched but
    the judge rejected. Empty when nothing was judged.
    """
    df = main_subset(responses)[0] if creative_only and "reasoning_type" in responses else responses
    ok = df[df["judge"].notna() & df[em].notna()]
    out = _agreement_rows(ok, "judge", em, ("judge_only", "em_only"), n_boot=n_boot, seed=seed)
    return out.reindex(columns=AGREEMENT_COLUMNS) if not out.empty else pd.DataFrame(columns=AGREEMENT_COLUMNS)


def judge_repeatability(responses: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Judge verdict vs its repeat (``extra.judge_repeat``) per config × lang, plus ``all runs``."""
    ok = responses[responses["judge"].notna() & responses["judge_repeat"].notna() & (responses["status"] != "error")]
    cols = [
        "config",
        "lang",
        "n",
        "n_items",
        "n_error",
        "both_correct",
        "first_only",
        "repeat_only",
        "both_wrong",
        "agreement",
        "kappa",
        "kappa_low",
        "kappa_high",
        "kappa_note",
    ]
    out = _agreement_rows(ok, "judge", "judge_repeat", ("first_only", "repeat_only"), n_boot=n_boot, seed=seed)
    return out.reindex(columns=cols) if not out.empty else pd.DataFrame(columns=cols)


def format_kappa(kappa: float, low: float, high: float, note: str = "") -> str:
    """``"0.40 [0.15, 0.65]"``; ``"undefined"`` when κ is NaN (chance agreement 1); ``"0.00 [–]"``
    when the interval is missing (``note`` says why, after the number)."""
    if pd.isna(kappa):
        return "undefined"
    text = f"{kappa:.2f} [–]" if pd.isna(low) or pd.isna(high) else f"{kappa:.2f} [{low:.2f}, {high:.2f}]"
    return f"{text} ({note})" if note else text


def agreement_display(df: pd.DataFrame) -> pd.DataFrame:
    """An agreement table with κ as text (``undefined`` rather than NaN, the note beside a
    missing interval) and agreement rounded."""
    if df.empty:
        return df
    notes = df["kappa_note"] if "kappa_note" in df else pd.Series([""] * len(df), index=df.index)
    out = df.drop(columns=[c for c in ("kappa", "kappa_low", "kappa_high", "kappa_note") if c in df]).copy()
    out["agreement"] = out["agreement"].round(3)
    out["kappa [95% CI]"] = [format_kappa(k, lo, hi, nt or "") for k, lo, hi, nt in
                             zip(df["kappa"], df["kappa_low"], df["kappa_high"], notes, strict=True)]
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
