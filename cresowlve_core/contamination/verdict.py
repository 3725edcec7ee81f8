"""One verdict table per configuration: each test, its statistic, CI, p-value and a reading.

A configuration is called *likely contaminated* only when two independent lines of evidence agree:
the BCQ (the original is picked above chance *and* more often than on the wrong-in-both control)
and the completion test (guided beats general on the target set *and* the target beats the
control). One signal alone is reported as *inconclusive*, never as contamination.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from cresowlve_core.contamination.completion import guided_vs_general, unpaired_diff
from cresowlve_core.contamination.quiz import accuracy_test, uniform_gof
from cresowlve_core.contamination.select import RIGHT_BOTH, TARGET, WRONG_BOTH
from cresowlve_core.stats import wilson_interval

ALPHA = 0.05
COLUMNS = ["config", "test", "n", "statistic", "low", "high", "p", "signal", "reading"]


def _row(config: str, test: str, n: float, stat: float, low: float, high: float, p: float, signal: bool | None,
         reading: str) -> dict[str, Any]:
    return {"config": config, "test": test, "n": int(n), "statistic": stat, "low": low, "high": high, "p": p,
            "signal": signal, "reading": reading}


def _item_accuracy(bcq: pd.DataFrame, set_name: str) -> np.ndarray:
    part = bcq[bcq["set"] == set_name]
    if part.empty:
        return np.array([])
    return part.assign(ok=(part["choice"] == part["correct"]).astype(float)).groupby("id")["ok"].mean().to_numpy()


def _mwu(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) == 0 or len(y) == 0:
        return float("nan")
    return float(sps.mannwhitneyu(x, y, alternative="greater").pvalue)


def verdict_table(res: Any, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The rows of one :class:`~cresowlve_core.contamination.pipeline.ConfigResult`, plus an
    ``overall`` row."""
    c = res.config
    rows = []
    gof = uniform_gof(res.bdq_counts)
    bdq_reading = ("no valid BDQ answers: the BCQ could not be placed" if not res.non_preferred else
                   f"non-preferred positions: {', '.join(res.non_preferred)}"
                   + ("" if res.truly_non_preferred else " (none below N/4: the least chosen used)"))
    rows.append(_row(c, "BDQ position bias (χ² vs uniform)", gof["n_valid"], gof["chi2"], np.nan, np.nan, gof["p"], None,
                     bdq_reading + "; calibrates the BCQ, not a contamination test"))
    bcq = res.bcq
    tgt = bcq[bcq["set"] == TARGET]
    k = int((tgt["choice"] == tgt["correct"]).sum())
    acc = accuracy_test(k, len(tgt))
    above = bool(acc["n"] and acc["p"] < ALPHA)
    rows.append(_row(c, "BCQ accuracy on target, all repeats (binomial vs 25%)", acc["n"], acc["accuracy"], acc["low"],
                     acc["high"], acc["p"], above if acc["n"] else None,
                     "no target items quizzed" if not acc["n"] else
                     ("picks the original above chance" if above else "not above chance")))
    ti = _item_accuracy(bcq, TARGET)
    bcq_signal = above
    for ctrl in (WRONG_BOTH, RIGHT_BOTH):
        ci = _item_accuracy(bcq, ctrl)
        d = unpaired_diff(ti, ci, n_boot=n_boot, seed=seed, key=f"bcq{ctrl}")
        p = _mwu(ti, ci)
        sig = bool(d["n"] and d["low"] > 0) if len(ti) and len(ci) else None
        if ctrl == WRONG_BOTH:
            bcq_signal = bool(above and sig)
        rows.append(_row(c, f"BCQ target − {ctrl} (per-item accuracy)", d["n"], d["diff"], d["low"], d["high"], p, sig,
                         "needs both sets" if sig is None else
                         ("target recognised more often than the control" if sig else "no difference shown")))
    comp = res.completions
    g = guided_vs_general(comp, TARGET, n_boot=n_boot, seed=seed) if not comp.empty else {"n": 0}
    gp = float("nan")
    if g.get("n"):
        wide = comp[comp["set"] == TARGET].pivot_table(index="id", columns="mode", values="rouge_l").dropna()
        diffs = (wide["guided"] - wide["general"]).to_numpy()
        gp = float(sps.wilcoxon(diffs, alternative="greater").pvalue) if np.any(diffs != 0) else 1.0
    gsig = bool(g.get("n") and g["low"] > 0) if g.get("n") else None
    rows.append(_row(c, "Completion guided − general ROUGE-L, target (paired)", g.get("n", 0), g.get("diff", np.nan),
                     g.get("low", np.nan), g.get("high", np.nan), gp, gsig,
                     "no target items" if gsig is None else
                     ("the source name helps: memorisation signal" if gsig else "no guided advantage")))
    guided = comp[comp["mode"] == "guided"] if not comp.empty else comp
    tg = guided[guided["set"] == TARGET]["rouge_l"].to_numpy(dtype=float) if not comp.empty else np.array([])
    cg = guided[guided["set"] == WRONG_BOTH]["rouge_l"].to_numpy(dtype=float) if not comp.empty else np.array([])
    d = unpaired_diff(tg, cg, n_boot=n_boot, seed=seed, key="comp")
    csig = bool(d["low"] > 0) if len(tg) and len(cg) else None
    rows.append(_row(c, "Completion guided ROUGE-L, target − wrong_both", d["n"], d["diff"], d["low"], d["high"],
                     _mwu(tg, cg), csig, "needs both sets" if csig is None else
                     ("target continued better than the control" if csig else "no difference shown")))
    if not comp.empty and len(tg):
        kk = int(guided[guided["set"] == TARGET]["prefix_match"].sum())
        lo, hi = wilson_interval(kk, len(tg))
        rows.append(_row(c, "Exact first-words match, guided, target", len(tg), kk / len(tg), lo, hi, np.nan, None,
                         f"{kk} of {len(tg)} continuations start with the true words"))
    comp_signal = bool(gsig and csig)
    n_signals = int(bcq_signal) + int(comp_signal)
    tested = bool(len(tgt)) or bool(g.get("n"))
    overall = ("not tested: no target item reached the quiz or the completion test" if not tested else
               "likely contaminated: the quiz and the completion test agree" if n_signals == 2 else
               "inconclusive: one test shows a signal, the other does not" if n_signals == 1 else
               "no evidence of contamination from these tests (absence of evidence, small n is weak)")
    rows.append(_row(c, "overall", len(ti), float(n_signals), np.nan, np.nan, np.nan, n_signals == 2, overall))
    return pd.DataFrame(rows, columns=COLUMNS)
