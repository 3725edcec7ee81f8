"""The judge-vs-EM summary over runs: its interval carries the run-to-run variation of κ."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cresowlve_core.analysis.reliability import judge_vs_em


def _run(rng: np.random.Generator, config: str, disagree: float, n: int = 400) -> pd.DataFrame:
    """One run on the shared items: EM follows a fixed truth, the judge flips a ``disagree`` share."""
    truth = np.random.default_rng(0).random(n) < 0.5  # the same items, the same EM, in every run
    judge = truth ^ (rng.random(n) < disagree)
    return pd.DataFrame({"config": config, "lang": "en", "id": [f"i{k}" for k in range(n)],
                         "judge": judge.astype(float), "em_strict": truth.astype(float), "status": "ok",
                         "reasoning_type": "creative"})


def test_the_summary_interval_is_as_wide_as_the_runs_disagree():
    # four runs whose κ are about 0.9, 0.7, 0.5 and 0.3: a statement about judges in general is
    # uncertain by about their spread over √4, whatever the number of items
    rng = np.random.default_rng(3)
    df = pd.concat([_run(rng, c, d) for c, d in (("a", 0.05), ("b", 0.15), ("c", 0.25), ("d", 0.35))])
    out = judge_vs_em(df, n_boot=400, seed=0).set_index("config")
    per_run = out.loc[["a", "b", "c", "d"], "kappa"].to_numpy(float)
    assert per_run.max() - per_run.min() > 0.5
    summary = out.loc["all runs"]
    run_se = per_run.std(ddof=0) / np.sqrt(len(per_run))  # the spread a resample of the runs gives
    assert summary["kappa_high"] - summary["kappa_low"] > 2 * 1.5 * run_se
    assert summary["kappa_low"] <= per_run.mean() <= summary["kappa_high"]
