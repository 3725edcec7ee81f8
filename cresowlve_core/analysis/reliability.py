"""How far to trust the LLM judge, and what the runs cost.

* :func:`judge_vs_em` — agreement between the judge verdict and **strict** exact match per run
  (confusion counts, raw agreement, Cohen's κ with its 95 % interval) and summarised over runs,
  over the **answers both graders graded**: the creative subset (Table 1's population), every
  answer the judge gave a verdict on. Left out and counted: errored responses (``n_error``: neither
  rater saw an answer), refused and filtered answers (``n_refused``, ``n_filtered``: the model gave
  nothing to grade; loading sets them not correct for both, and counting them "both wrong" would
  inflate agreement and κ) and answers without a judge verdict (``n_unjudged``: unscored, judge
  error, never judged); ``left_out`` names them. Refusals stay wrong in Table 1, whose judge % − EM %
  = (judge_only − em_only) / (n + n_refused + n_filtered) where the judge graded every answer;
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
NaN), or a zero-width interval (perfect agreement).

Reliability is per run. The ``all runs`` row is a **summary of the per-run values**: its κ is
the mean of the per-run κ (a pooled table would mix runs of different accuracy and inflate κ),
with the range in ``kappa_note``, and its interval is a seeded two-level bootstrap that resamples
runs and items (:func:`cresowlve_core.stats.mean_run_kappa`), since it speaks of models in
general; its counts (``n``, the confusion cells) are the sums over runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import main_subset, no_answer, not_an_answer
from cresowlve_core.llm.pricing import usd
from cresowlve_core.stats import binary_agreement, mean_run_kappa, one_rater_constant, stable_seed

AGREEMENT_COLUMNS = [
    "config",
    "lang",
    "n",
    "n_items",
    "n_error",
    "n_refused",
    "n_filtered",
    "n_unjudged",
    "left_out",
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


def _summary_note(per_run: pd.Series, iv: object, n_items: int, n_boot: int) -> str:
    """How the ``all runs`` κ was formed: the mean of the per-run values, their range, the interval."""
    defined = per_run.dropna()
    text = (f"mean of {len(defined)} per-run κ" + (f" (range {defined.min():.2f}–{defined.max():.2f})" if len(defined) else "")
            + (f", {len(per_run) - len(defined)} run(s) undefined, left out" if len(defined) < len(per_run) else "")
            + f"; two-level bootstrap over runs and items ({iv.n} runs, {n_items} items, {n_boot} resamples)")  # type: ignore[attr-defined]
    return "; ".join(x for x in (text, iv.note) if x)  # type: ignore[attr-defined]


def _columns(responses: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """The few columns of ``responses`` an agreement needs (those it has): filtering them is a small
    fraction of filtering every column of 742,000 responses."""
    return responses[[c for c in dict.fromkeys(names) if c in responses.columns]]


def _agreement_rows(df: pd.DataFrame, a: str, b: str, labels: tuple[str, str], *, n_boot: int = 1000,
                    seed: int = 0, n_error: pd.Series | None = None,
                    n_unpaired: pd.Series | None = None) -> pd.DataFrame:
    """``n_error``: model errors per (config, lang), left out; ``n_unpaired``: answers with one verdict of
    the two, left out (a column only when given)."""
    rows = []
    if "id" not in df:  # a frame without item ids: every row is its own item
        df = df.assign(id=np.arange(len(df)).astype(str))
    for (config, lang), grp in df.groupby(["config", "lang"], sort=True):
        agr = binary_agreement(grp[a].to_numpy(float), grp[b].to_numpy(float))
        if agr.n == 0:
            continue
        table = np.array([[agr.both_yes, agr.a_yes_b_no], [agr.a_no_b_yes, agr.both_no]], dtype=float)
        low, high, note = _interval(agr, table)
        rows.append({"config": config, "lang": lang, "n": agr.n, "n_items": int(grp["id"].astype(str).nunique()),
                     "n_error": int(n_error.get((config, lang), 0)) if n_error is not None else 0,
                     **({"n_unpaired": int(n_unpaired.get((config, lang), 0))} if n_unpaired is not None else {}),
                     "both_correct": agr.both_yes, labels[0]: agr.a_yes_b_no, labels[1]: agr.a_no_b_yes,
                     "both_wrong": agr.both_no, "agreement": agr.observed, "kappa": agr.kappa,
                     "kappa_low": low, "kappa_high": high, "kappa_note": note})
    if not rows:
        return pd.DataFrame(rows)
    per_run = pd.DataFrame(rows)
    runs = (df["config"].astype(str) + " / " + df["lang"].astype(str)).to_numpy()
    iv = mean_run_kappa(df[a].to_numpy(float), df[b].to_numpy(float), runs, df["id"].astype(str).to_numpy(),
                        n_boot=n_boot, rng=stable_seed(seed, "kappa-runs", a, b))
    counts = per_run[["n", "n_error", *(["n_unpaired"] if n_unpaired is not None else []), "both_correct", labels[0],
                      labels[1], "both_wrong"]].sum()
    rows.append({"config": "all runs", "lang": "all", **{k: int(v) for k, v in counts.items()},
                 "n_items": int(df["id"].astype(str).nunique()), "agreement": counts[["both_correct", "both_wrong"]].sum()
                 / counts["n"], "kappa": iv.value, "kappa_low": iv.low, "kappa_high": iv.high,
                 "kappa_note": _summary_note(per_run["kappa"], iv, int(df["id"].nunique()), n_boot)})
    return pd.DataFrame(rows)


def judge_vs_em(responses: pd.DataFrame, em: str = "em_strict", creative_only: bool = True, *, n_boot: int = 1000,
                seed: int = 0) -> pd.DataFrame:
    """Judge vs exact match (strict by default) per config × lang, plus the ``all runs`` summary.

    The population is the answers both graders graded: the creative subset (``creative_only``),
    every answer with a judge verdict and an EM value. Left out and counted per row: errored
    responses (``n_error``), refused and filtered answers (``n_refused``, ``n_filtered``: not
    correct in Table 1, but nothing either grader graded) and answers without a judge verdict or
    that the judge was not asked about (``n_unjudged``); ``left_out`` says it in words.
    ``judge_only`` = judge says correct, EM says wrong (typical: paraphrased answers); ``em_only``
    = EM matched but the judge rejected. Empty when nothing was judged.
    """
    df = _columns(responses, ["config", "lang", "id", "judge", em, "status", "outcome", "reasoning_type",
                              "judge_status"])
    df = main_subset(df)[0] if creative_only and "reasoning_type" in df else df
    missing = pd.Series(no_answer(df), index=df.index)
    withheld = pd.Series(not_an_answer(df), index=df.index)  # refused or filtered by the model or provider
    outcome = df["outcome"] if "outcome" in df else pd.Series(None, index=df.index, dtype=object)
    not_asked = df["judge_status"].eq("not_an_answer") if "judge_status" in df else False
    graded = ~missing & ~withheld & ~not_asked & df["judge"].notna() & df[em].notna()
    keys = [df["config"], df["lang"]]
    left_out = {"n_error": missing.groupby(keys).sum(),
                "n_refused": (withheld & outcome.eq("refused")).groupby(keys).sum(),
                "n_filtered": (withheld & outcome.eq("filtered")).groupby(keys).sum(),
                "n_unjudged": (~missing & ~withheld & ~graded).groupby(keys).sum()}
    out = _agreement_rows(df[graded], "judge", em, ("judge_only", "em_only"), n_boot=n_boot, seed=seed,
                          n_error=left_out["n_error"])
    if out.empty and not df["judge"].notna().any():
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    if out.empty:  # judge values, but none on an answer EM graded too (every answer refused, say): rows of n = 0
        out = pd.DataFrame(columns=["config", "lang"])
    return _count_left_out(out, left_out, ("judge_only", "em_only"), keep_ungraded_runs=True)[AGREEMENT_COLUMNS]


def _count_left_out(out: pd.DataFrame, left_out: dict[str, pd.Series], labels: tuple[str, str], *,
                    keep_ungraded_runs: bool) -> pd.DataFrame:
    """``out`` of :func:`_agreement_rows` with the counts of ``left_out`` (per config × lang) in each row, their
    sums in ``all runs``, and ``left_out`` in words. ``keep_ungraded_runs``: a run none of whose answers both
    graders graded keeps its row (n = 0) and its counts."""
    per_run, summary = out[out["config"] != "all runs"], out[out["config"] == "all runs"].copy()
    shown = set(zip(per_run["config"], per_run["lang"], strict=True))
    ungraded = pd.DataFrame([
        {"config": c, "lang": lang, "n": 0, "n_items": 0, "both_correct": 0, labels[0]: 0, labels[1]: 0,
         "both_wrong": 0, "agreement": float("nan"), "kappa": float("nan"), "kappa_low": float("nan"),
         "kappa_high": float("nan"), "kappa_note": "no answer both graders graded"}
        for c, lang in left_out["n_error"].index if (c, lang) not in shown and keep_ungraded_runs])
    per_run = pd.concat([per_run, ungraded], ignore_index=True) if not ungraded.empty else per_run.copy()
    per_run = per_run.sort_values(["config", "lang"], kind="stable").reset_index(drop=True)
    for col, counts in left_out.items():
        per_run[col] = [int(counts.get(key, 0)) for key in zip(per_run["config"], per_run["lang"], strict=True)]
        summary[col] = int(per_run[col].sum())
    out = pd.concat([per_run, summary], ignore_index=True) if not summary.empty else per_run
    out["left_out"] = [_left_out_text(row) for _, row in out.iterrows()]
    return out


def _left_out_text(row: pd.Series) -> str:
    """``"3 refused, 1 unjudged answer(s) and 2 errored response(s) left out"``; ``""`` when none was."""
    parts = [f"{int(row[col])} {name}" for col, name in (("n_refused", "refused"), ("n_filtered", "filtered"),
                                                         ("n_unjudged", "unjudged"), ("n_unpaired", "unpaired"))
             if row.get(col)]
    answers = f"{', '.join(parts)} answer(s)" if parts else ""
    errored = f"{int(row['n_error'])} errored response(s)" if row["n_error"] else ""
    return " and ".join(x for x in (answers, errored) if x) + " left out" if answers or errored else ""


def judge_repeatability(responses: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Judge verdict vs its repeat (``extra.judge_repeat``) per config × lang, plus ``all runs``, over the
    answers with both verdicts (``n``). Left out, counted and named in ``left_out``: errored responses
    (``n_error``), refused and filtered answers, which the judge is not asked about (``n_refused``,
    ``n_filtered``), answers with neither verdict (``n_unjudged``: the first judge call errored or gave
    none, and no repeat was made) and answers the judge gave one verdict of the two (``n_unpaired``: the
    repeat call errored or gave no verdict, or the first did; a missing verdict is never a disagreement).
    Only runs with a repeat verdict have a row."""
    df = _columns(responses, ["config", "lang", "id", "judge", "judge_repeat", "status", "outcome", "judge_status"])
    missing = pd.Series(no_answer(df), index=df.index)
    withheld = pd.Series(not_an_answer(df), index=df.index)
    outcome = df["outcome"] if "outcome" in df else pd.Series(None, index=df.index, dtype=object)
    keys = [df["config"], df["lang"]]
    asked = ~missing & ~withheld & (df["judge_status"] != "not_an_answer" if "judge_status" in df else True)
    one_verdict = asked & (df["judge"].notna() != df["judge_repeat"].notna())
    ok = df[asked & df["judge"].notna() & df["judge_repeat"].notna()]
    cols = [
        "config",
        "lang",
        "n",
        "n_items",
        "n_error",
        "n_refused",
        "n_filtered",
        "n_unjudged",
        "n_unpaired",
        "left_out",
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
    left_out = {"n_error": missing.groupby(keys).sum(),
                "n_refused": (withheld & outcome.eq("refused")).groupby(keys).sum(),
                "n_filtered": (withheld & outcome.eq("filtered")).groupby(keys).sum(),
                "n_unjudged": (asked & df["judge"].isna() & df["judge_repeat"].isna()).groupby(keys).sum(),
                "n_unpaired": one_verdict.groupby(keys).sum()}
    out = _agreement_rows(ok, "judge", "judge_repeat", ("first_only", "repeat_only"), n_boot=n_boot, seed=seed,
                          n_error=left_out["n_error"], n_unpaired=left_out["n_unpaired"])
    if out.empty:
        return pd.DataFrame(columns=cols)
    return _count_left_out(out, left_out, ("first_only", "repeat_only"), keep_ungraded_runs=False)[cols]


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
    """Per config × lang: records by ``judge_status`` (``not_an_answer``: a refused or filtered
    answer the judge was not asked about, counted INCORRECT) and model errors. A status this version
    does not write (a hand edit, a newer cresowlve) is counted in ``unknown_status``, a column only
    when there is one, so every record is in one column."""
    counts = pd.crosstab([responses["config"], responses["lang"]], responses["judge_status"].fillna("not_run"))
    statuses = ("scored", "not_an_answer", "unscored", "error", "not_run")
    for c in statuses:
        if c not in counts.columns:
            counts[c] = 0
    unknown = counts.drop(columns=list(statuses)).sum(axis=1)
    counts = counts[list(statuses)]
    counts.columns = ["scored", "not_an_answer", "unscored", "judge_error", "not_run"]
    if unknown.any():
        counts["unknown_status"] = unknown
    counts["model_error"] = responses.groupby(["config", "lang"])["status"].apply(lambda s: int(s.eq("error").sum()))
    return counts.reset_index()


_TOKENS = ("input_tokens", "output_tokens", "reasoning_tokens", "judge_input_tokens", "judge_output_tokens")


#: the runs table's columns (:func:`~cresowlve_core.analysis.loading.replaced_spending`,
#: :func:`~cresowlve_core.analysis.loading.unusable_spending`) of money spent that neither cost counts
SPENT_ELSEWHERE = ("n_replaced", "n_verdicts_replaced", "replaced_cost", "n_replaced_cost_unknown", "n_unusable",
                   "unusable_cost", "n_unusable_unknown_cost")


def cost_table(responses: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Tokens and cost per config × lang (sums over known values, with counts of unknowns).

    Columns: config, lang, n, n_cached, n_no_answer, n_judge_error, input/output/reasoning tokens, cost,
    cost_unknown, judge_input_tokens, judge_output_tokens, judge_cost, judge_cost_unknown, and for
    each token column ``<column>_unknown``. A sum is NaN when every value is unknown; ``*_unknown``
    counts answers (judge verdicts, for the judge's columns) without that value. A call that errored
    or was not run (``n_no_answer``) has no cost recorded, which is not an unknown price.

    With ``runs`` (the run set's runs table), also the money spent that neither cost counts
    (:data:`SPENT_ELSEWHERE`): answers replaced by ``--retry-truncated`` and paid verdicts withdrawn by
    ``rescore`` (``replaced_cost``, the known part, ``n_replaced_cost_unknown`` records of unknown cost), and
    billed answers with no text, asked again, over each run's passes (``unusable_cost``,
    ``n_unusable_unknown_cost``).
    """
    narrow = _columns(responses, ["config", "lang", "cached", "status", *_TOKENS, "cost", "judge_cost", "judge_status"])
    if narrow.empty:
        return pd.DataFrame()
    answered = narrow["status"].eq("ok")
    judged = narrow["judge_status"].isin(["scored", "unscored"])  # the judge answered (a judge error has no cost)
    by_run = narrow.assign(
        _no_answer=~answered,
        _judge_error=narrow["judge_status"].eq("error"),  # the judge was asked, and no reply came: no cost recorded
        _cost_unknown=answered & narrow["cost"].isna(),
        _judge_cost_unknown=judged & narrow["judge_cost"].isna(),  # no judge: its cost is not "unknown", there is none
        **{f"_{col}_unknown": (judged if col.startswith("judge_") else answered) & narrow[col].isna()
           for col in _TOKENS},
    ).groupby(["config", "lang"], sort=True)
    out = pd.DataFrame({"n": by_run.size(), "n_cached": by_run["cached"].sum().astype(int),
                        "n_no_answer": by_run["_no_answer"].sum().astype(int),
                        "n_judge_error": by_run["_judge_error"].sum().astype(int)})
    for col in _TOKENS:
        out[col] = by_run[col].sum(min_count=1).astype(float)
        out[f"{col}_unknown"] = by_run[f"_{col}_unknown"].sum().astype(int)
    for col in ("cost", "judge_cost"):
        out[col] = by_run[col].sum(min_count=1).astype(float)
        out[f"{col}_unknown"] = by_run[f"_{col}_unknown"].sum().astype(int)
    if runs is not None and not runs.empty and set(SPENT_ELSEWHERE) <= set(runs.columns):
        spent = runs.groupby(["config", "lang"], sort=True)[list(SPENT_ELSEWHERE)].sum()
        out = out.join(spent).fillna({c: 0 for c in SPENT_ELSEWHERE})
    return out.reset_index()


def format_cost(total: float, unknown: int, n: int) -> str:
    """``"$1.23"``, ``"unknown"`` (no price at all) or ``"≥ $1.23 (5 of 100 unknown)"``; below a cent with the
    digits it needs (``"$0.0006"``, never ``"$0.00"``, which reads as free)."""
    if unknown >= n or pd.isna(total):
        return "unknown" if unknown else "–"
    text = f"${total:,.2f}" if total == 0 or abs(total) >= 0.01 else usd(total)
    return f"≥ {text} ({unknown} of {n} unknown)" if unknown else text


def format_spent_elsewhere(row: pd.Series) -> str:
    """``"$0.0625 (5 verdict(s) withdrawn by rescore)"``: money a run spent that neither cost counts
    (:data:`SPENT_ELSEWHERE`), what it was spent on beside it; ``≥`` before the known part when some of it has no
    price, ``unknown`` when none has; ``"–"`` when there is none (or the run's version recorded none)."""
    counts = {what: int(row.get(col) or 0) for col, what in (
        ("n_replaced", "answer(s) replaced by --retry-truncated"), ("n_verdicts_replaced", "verdict(s) withdrawn by "
                                                                   "rescore"), ("n_unusable", "billed with no text"))}
    if not any(counts.values()):
        return "–"
    known = float(row.get("replaced_cost") or 0) + float(row.get("unusable_cost") or 0)
    unknown = int(row.get("n_replaced_cost_unknown") or 0) + int(row.get("n_unusable_unknown_cost") or 0)
    amount = "unknown" if unknown and not known else f"≥ {usd(known)}" if unknown else usd(known)
    return f"{amount} ({', '.join(f'{n} {what}' for what, n in counts.items() if n)})"


def format_tokens(total: float, unknown: int) -> str:
    """``"1,234"``, ``"unknown"`` (no count at all) or ``"≥ 1,234 (5 unknown)"``: a sum over only some
    answers is a lower bound."""
    if pd.isna(total):
        return "unknown"
    return f"≥ {int(total):,} ({unknown} unknown)" if unknown else f"{int(total):,}"


def judge_cost_text(total: float, unknown: int, n: int, n_error: int) -> str:
    """The judge's cost of a run as :func:`format_cost` gives it; with no reply to cost, ``"no judge"`` for a run
    whose judge was never asked, else its calls that errored (no reply, no cost recorded), never "no judge"."""
    if unknown == 0 and pd.isna(total):
        return f"– ({n_error} judge call(s) errored: no cost recorded)" if n_error else "no judge"
    return format_cost(total, unknown, n)


def cost_display(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`cost_table` with readable strings: tokens as integers, unknown costs as ``unknown``."""
    if costs.empty:
        return costs
    out = costs[["config", "lang", "n", "n_cached", "n_no_answer"]].copy()
    for col in _TOKENS:
        unknown = costs[f"{col}_unknown"] if f"{col}_unknown" in costs else pd.Series(0, index=costs.index)
        out[col] = [format_tokens(v, u) for v, u in zip(costs[col], unknown, strict=True)]
    answered = costs["n"] - costs["n_no_answer"]
    out["cost"] = [format_cost(t, u, n) for t, u, n in zip(costs["cost"], costs["cost_unknown"], answered, strict=True)]
    errors = costs["n_judge_error"] if "n_judge_error" in costs else pd.Series(0, index=costs.index)
    out["judge_cost"] = [judge_cost_text(t, u, n, e) for t, u, n, e in
                         zip(costs["judge_cost"], costs["judge_cost_unknown"], costs["n"], errors, strict=True)]
    if set(SPENT_ELSEWHERE) <= set(costs.columns):
        out["spent, not in cost"] = [format_spent_elsewhere(row) for _, row in costs.iterrows()]
    return out
