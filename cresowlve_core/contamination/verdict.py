"""One verdict table per configuration: each test, the sets it compares, n, statistic, CI, p, reading.

The item is the unit of every test (:mod:`~cresowlve_core.contamination.itemstats`). Two signals:

* **quiz**: the target items' BCQ majorities beat the quiz's 25 % chance rate (exact binomial over
  items) *and* the target's per-item BCQ accuracy beats the ``wrong_both`` control's, matched on
  difficulty;
* **completion**: a difference in differences, (guided − general ROUGE-L on the target) minus
  (the same on a control), matched on difficulty, against **both** controls: ``wrong_both``
  (items the model does not know) and ``right_both`` (items it knows). The source name helping
  the target more than the unknown items could mean "knows the item"; helping it more than the
  known items too is what "saw the item" predicts. Both must signal.

A signal with fewer than :data:`~cresowlve_core.contamination.itemstats.MIN_ITEMS` items in a set it
uses says "too few items (n = k): not tested" and shows no interval. A difference signals when its one-sided permutation
p < 0.05 and its bootstrap interval lies above 0; an interval of zero width decides nothing (the
p-value alone then decides). The configuration is *likely contaminated* only when both signals
agree; one alone is *inconclusive*; none tested is *not tested*. Every row carries the
configuration's ``basis`` (the metric its sets were formed by). The overall row's ``p`` is the
intersection–union p of its deciding tests (the largest: every one must reject);
:func:`holm_across_models` adjusts it across the configurations (``p_holm``), and a verdict
signals only when its adjusted p does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from cresowlve_core.contamination.completion import guided_vs_general
from cresowlve_core.contamination.itemstats import (
    CHANCE,
    MIN_ITEMS,
    Matched,
    bcq_items,
    cut_off_mask,
    majority_test,
    matched_diff,
    no_answer_mask,
    too_few,
    withheld_mask,
)
from cresowlve_core.contamination.quiz import n_answered, uniform_gof
from cresowlve_core.contamination.select import RIGHT_BOTH, TARGET, WRONG_BOTH
from cresowlve_core.stats import holm, wilson_interval, zero_width

ALPHA = 0.05
COLUMNS = ["config", "basis", "test", "sets", "n", "n_control", "statistic", "low", "high", "p", "signal", "reading"]
NAN = float("nan")


def _row(config: str, test: str, sets: str, n: int, n_control: float, stat: float, low: float, high: float,
         p: float, signal: bool | None, reading: str) -> dict[str, Any]:
    return {"config": config, "basis": None, "test": test, "sets": sets, "n": int(n), "n_control": n_control, "statistic": stat,
            "low": low, "high": high, "p": p, "signal": signal, "reading": reading}


def _levels(res: Any) -> dict[str, float]:
    items = getattr(res, "items", None)
    if items is None or items.empty:
        return {}
    return dict(zip(items["id"].astype(str), items["difficulty"].astype(float), strict=True))


def _matched_row(c: str, test: str, target: pd.Series, control: pd.Series, control_name: str, levels: dict[str, float],
                 *, decides: bool, n_boot: int, seed: int, key: str, min_items: int, what: str) -> tuple[dict[str, Any], bool | None]:
    """A difficulty-matched target − control row on per-item values (Series indexed by item id)."""
    m: Matched = matched_diff(target.to_numpy(float), [levels.get(i, NAN) for i in target.index],
                              control.to_numpy(float), [levels.get(i, NAN) for i in control.index],
                              n_boot=n_boot, seed=seed, key=key)
    sets = m.sets_text(TARGET, control_name)
    few = too_few(m.n_target, m.n_control, min_items=min_items)
    if few:  # not tested: no interval shown
        return _row(c, test, sets, m.n_target, m.n_control, m.diff, NAN, NAN, NAN, None, few), None
    flat = zero_width(m.low, m.high)
    sig = bool(m.p < ALPHA and (flat or m.low > 0))
    reading = (f"{what}" if sig else "no difference shown") + (
        "; interval of zero width (all items alike): the permutation p alone decides" if flat else "")
    if not decides:
        reading = "context, not part of the verdict: " + reading
    return _row(c, test, sets, m.n_target, m.n_control, m.diff, m.low, m.high, m.p, sig if decides else None,
                reading), (sig if decides else None)


def _both(a: bool | None, b: bool | None) -> bool | None:
    """Both must signal: False if either is False, None (not tested) if either is None."""
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _gains(comp: pd.DataFrame, set_name: str) -> pd.Series:
    """Per item: guided − general ROUGE-L (items answered in both modes: a withheld or cut-off
    continuation is no answer)."""
    part = comp[comp["set"] == set_name] if not comp.empty else comp
    part = part[~no_answer_mask(part)]
    if part.empty:
        return pd.Series(dtype=float)
    wide = part.pivot_table(index="id", columns="mode", values="rouge_l", aggfunc="last")
    if not {"guided", "general"} <= set(wide.columns):
        return pd.Series(dtype=float)
    wide = wide.dropna()
    return wide["guided"] - wide["general"]


def verdict_table(res: Any, *, n_boot: int = 1000, seed: int = 0, min_items: int = MIN_ITEMS) -> pd.DataFrame:
    """The rows of one :class:`~cresowlve_core.contamination.pipeline.ConfigResult`, plus an
    ``overall`` row (columns :data:`COLUMNS`)."""
    c = res.config
    levels = _levels(res)
    rows = []
    gof = uniform_gof(res.bdq_counts)
    n_valid = int(gof["n_valid"])
    bcq_waiting = getattr(res, "bcq_waiting", None)
    placed = "is to place" if bcq_waiting else "placed"
    bdq_reading = ("no valid BDQ answers: the BCQ could not be placed" if not res.non_preferred else
                   f"no valid BDQ answer: position bias not measured; the BCQ {placed} the original at any of "
                   f"{', '.join(res.non_preferred)} (no answer chose any of them)" if not n_valid else
                   f"non-preferred positions: {', '.join(res.non_preferred)}"
                   + ("" if res.truly_non_preferred else " (none below N/4: the least chosen used)"))
    if n_invalid_bdq := int(res.bdq_counts.get("invalid", 0)):  # in N, not in the χ²: named, never hidden in n
        bdq_reading += (f"; {n_invalid_bdq} of N = {n_answered(res.bdq_counts)} answers named no option "
                        "(in N, not in the χ²)")
    few = too_few(n_valid, min_items=min_items) if n_valid else None
    rows.append(_row(c, "BDQ position bias (χ² vs uniform)", "all quizzed items (no original shown)", n_valid, NAN,
                     NAN if few else gof["chi2"], NAN, NAN, NAN if few else gof["p"], None,
                     bdq_reading + ("; χ² " + few if few else "") + "; calibrates the BCQ, not a contamination test"))

    # every BCQ reply that is an answer named no option: its accuracies (all 0, invalid answers counting
    # as wrong) measure nothing, so the quiz tests nothing
    answers = res.bcq[~no_answer_mask(res.bcq)] if "choice" in res.bcq else res.bcq.iloc[0:0]
    quiz_unread = (f"not tested: none of the {len(answers)} BCQ replies named an option"
                   if len(answers) and answers["choice"].isna().all() else None)
    per_item = bcq_items(res.bcq.iloc[0:0] if quiz_unread else res.bcq)
    tgt_items = per_item[per_item["set"] == TARGET]
    maj = majority_test(tgt_items)
    few = too_few(maj["n"], min_items=min_items)
    maj_sig: bool | None = None if (few or not maj["n"]) else bool(maj["p"] < ALPHA)
    n_rep = int(tgt_items["repeats"].max()) if maj["n"] else 0
    desc = (f"{maj['k']} of {maj['n']} items right in a majority of their {n_rep} repeat(s) "
            f"(mean per-item accuracy {maj['mean_accuracy']:.2f}); H0: {100 * CHANCE:.0f}% (the quiz's chance rate)")
    rows.append(_row(c, "BCQ target: items right in a majority of repeats (exact binomial vs 25%)",
                     f"{TARGET} (n = {maj['n']})", maj["n"], NAN, maj["share"], NAN if few else maj["low"],
                     NAN if few else maj["high"],
                     NAN if few else maj["p"], maj_sig,
                     (f"BCQ {bcq_waiting}" if bcq_waiting else quiz_unread or few or "") if not maj["n"] else
                     (few + "; " + desc if few else
                      ("picks the original above chance: " if maj_sig else "not above chance: ") + desc)))
    acc = per_item.set_index("id")["accuracy"] if not per_item.empty else pd.Series(dtype=float)
    sets_of = per_item.set_index("id")["set"] if not per_item.empty else pd.Series(dtype=object)
    bcq_diff_sig: bool | None = None
    for ctrl in (WRONG_BOTH, RIGHT_BOTH):
        row, sig = _matched_row(c, f"BCQ per-item accuracy, target − {ctrl}", acc[sets_of == TARGET],
                                acc[sets_of == ctrl], ctrl, levels, decides=ctrl == WRONG_BOTH, n_boot=n_boot,
                                seed=seed, key=f"bcq-{ctrl}", min_items=min_items,
                                what="target recognised more often than the control")
        rows.append(row | ({"reading": quiz_unread} if quiz_unread else {}))
        if ctrl == WRONG_BOTH:
            bcq_diff_sig = sig
    quiz_signal = _both(maj_sig, bcq_diff_sig)

    comp = res.completions
    for s in (TARGET, WRONG_BOTH):
        g = guided_vs_general(comp, s, n_boot=n_boot, seed=seed) if not comp.empty else {"n": 0}
        n = int(g.get("n", 0))
        gains = _gains(comp, s)
        p = NAN
        if n:
            p = float(sps.wilcoxon(gains.to_numpy(), alternative="greater").pvalue) if np.any(gains != 0) else 1.0
        few = too_few(n, min_items=min_items)
        rows.append(_row(c, f"Completion guided − general ROUGE-L, {s} (paired)", f"{s} (n = {n})", n, NAN,
                         g.get("diff", NAN), NAN if few else g.get("low", NAN), NAN if few else g.get("high", NAN),
                         NAN if few else p, None,
                         "context, not part of the verdict" + (f": {few}" if few else
                                                               "; p: one-sided Wilcoxon signed-rank test")))
    did_rows, did_signals = [], []
    for ctrl in (WRONG_BOTH, RIGHT_BOTH):
        row, sig = _matched_row(
            c, f"Completion guided − general ROUGE-L: target − {ctrl} (difference in differences)",
            _gains(comp, TARGET), _gains(comp, ctrl), ctrl, levels, decides=True, n_boot=n_boot, seed=seed,
            key="completion-did" if ctrl == WRONG_BOTH else f"completion-did-{ctrl}", min_items=min_items,
            what="the source name helps the target more than the control: memorisation signal")
        did_rows.append(row)
        did_signals.append(sig)
    rows.extend(did_rows)
    comp_signal = _both(*did_signals)
    did_row = did_rows[0]
    guided = (comp[(comp["mode"] == "guided") & (comp["set"] == TARGET) & ~no_answer_mask(comp)] if not comp.empty
              else comp)
    if len(guided):
        kk, nn = int(guided["prefix_match"].sum()), len(guided)
        lo, hi = wilson_interval(kk, nn)
        rows.append(_row(c, "Exact first-words match, guided, target", f"{TARGET} (n = {nn})", nn, NAN, kk / nn,
                         lo, hi, NAN, None, f"context: {kk} of {nn} continuations start with the true words"))

    compared = did_row["sets"] if did_row["n"] else rows[2]["sets"]
    n_target = max(maj["n"], len(_gains(comp, TARGET)))  # target items that reached a test
    n_control = max(int((sets_of == WRONG_BOTH).sum()), len(_gains(comp, WRONG_BOTH)))
    overall, signal = _overall(quiz_signal, comp_signal, n_target, min(n_target, n_control), min_items,
                               quiz_why="no BCQ reply named an option" if quiz_unread else "too few items")
    withheld = {what: int(withheld_mask(frame).sum()) for what, frame in
                (("BCQ answer(s)", res.bcq), ("continuation(s)", comp))}
    cut_off = {what: int(cut_off_mask(frame).sum()) for what, frame in
               (("BCQ answer(s)", res.bcq), ("continuation(s)", comp))}
    if any(withheld.values()) or any(cut_off.values()):  # no answers, so in no test: said, never dropped silently
        overall += "; left out as no answer: " + "; ".join(
            ([", ".join(f"{n} {what}" for what, n in withheld.items()) + " refused or filtered"]
             if any(withheld.values()) else [])
            + ([", ".join(f"{n} {what}" for what, n in cut_off.items() if n)
                + " cut off at the token limit before any content"] if any(cut_off.values()) else []))
    if not quiz_unread and (n_invalid := int(answers["choice"].isna().sum()) if len(answers) else 0):
        overall += f"; counted as wrong: {n_invalid} BCQ answer(s) naming no option (invalid)"
    if bcq_waiting:
        overall += f"; the BCQ {bcq_waiting}"
    deciding = [r["p"] for r in rows if r["signal"] is not None]
    p_all = max(deciding) if signal is not None and len(deciding) == 4 else NAN
    rows.append(_row(c, "overall", compared, n_target, n_control, NAN, NAN, NAN, p_all, signal, overall))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["basis"] = getattr(res, "basis", None)
    out["n_control"] = out["n_control"].astype("Int64")
    return out


def holm_across_models(verdicts: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """The verdict tables of several configurations (concatenated) with ``p_holm`` on each overall
    row: Holm's adjustment of the overall p across the configurations tested; a verdict whose
    adjusted p is not below ``alpha`` no longer signals, and its reading says so."""
    out = verdicts.copy()
    out["p_holm"] = NAN
    overall = out.index[(out["test"] == "overall") & out["p"].notna()]
    if len(overall):
        out.loc[overall, "p_holm"] = holm(out.loc[overall, "p"].to_numpy(dtype=float))
        n = len(overall)
        for i in overall:
            if out.at[i, "signal"] is True and not out.at[i, "p_holm"] < alpha:
                out.at[i, "signal"] = False
                out.at[i, "reading"] = (f"not significant after Holm across {n} configurations "
                                        f"(p_holm {out.at[i, 'p_holm']:.3g}); before: {out.at[i, 'reading']}")
    return out


def _overall(quiz: bool | None, comp: bool | None, n_target: int, smallest: int,
             min_items: int, quiz_why: str = "too few items") -> tuple[str, bool | None]:
    """The overall reading and signal; ``quiz_why``: why the quiz is not tested when it is not."""
    untested_why = {"the quiz": quiz_why, "the completion test": "too few items"}
    if quiz is None and comp is None and quiz_why != "too few items":
        return f"not tested: {quiz_why}; the completion test: too few items (n = {smallest})", None
    if quiz is None and comp is None:
        why = "" if n_target else ": no target item reached the quiz or the completion test"
        return f"not tested: too few items (n = {smallest}; at least {min_items} per set){why}", None
    if quiz and comp:
        return "likely contaminated: the quiz and the completion test agree", True
    parts = {"the quiz": quiz, "the completion test": comp}
    shown = [k for k, v in parts.items() if v is True]
    untested = [k for k, v in parts.items() if v is None]
    if shown:
        other = (f"the other was not tested ({untested_why[untested[0]]})" if untested else "the other does not")
        return f"inconclusive: {shown[0]} shows a signal, {other}", False
    if untested:
        return (f"no evidence from {[k for k, v in parts.items() if v is False][0]}; {untested[0]} not tested "
                f"({untested_why[untested[0]]})"), False
    return "no evidence of contamination from these tests (absence of evidence; with small n it is weak)", False


def verdict_lines(v: pd.DataFrame) -> list[str]:
    """A verdict table as plain text for a terminal: one line per test (``–`` for a missing
    value), then the sets the overall reading compares."""

    def num(x: Any) -> str:
        return "–" if x is None or x is pd.NA or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.3f}"

    def pval(p: Any) -> str:
        return "–" if num(p) == "–" else ("< 0.0001" if p < 1e-4 else f"{p:.3g}")

    lines = []
    for r in v.itertuples(index=False):
        if r.test == "overall":
            continue
        sig = {True: "signal", False: "no signal"}.get(r.signal, "–")  # type: ignore[call-overload]
        lines.append(f"{r.test}: n = {r.n}, {num(r.statistic)} [{num(r.low)}, {num(r.high)}], p = {pval(r.p)}, "
                     f"{sig} — {r.reading}")
    last = v.iloc[-1]
    holm_p = last.get("p_holm")
    adjusted = f"; p_holm {pval(holm_p)}" if holm_p is not None and num(holm_p) != "–" else ""
    lines.append(f"overall: {last['reading']} (basis {last.get('basis')}; compares {last['sets']}{adjusted})")
    return lines
