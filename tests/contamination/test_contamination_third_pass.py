"""Contamination, third pass: a stratified interval that keeps its width with small strata,
right_both as a second deciding control of the completion test, the basis beside each verdict,
Holm across models, and no interval on a row not tested."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_contamination_verdict import DID, completions, quiz, result

from cresowlve_core.contamination.itemstats import matched_diff
from cresowlve_core.contamination.verdict import holm_across_models, verdict_table
from cresowlve_core.stats import holm

DID_RIGHT = "Completion guided − general ROUGE-L: target − right_both (difference in differences)"


def _null_sample(rng: np.random.Generator, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-item BCQ accuracy (k of 3 repeats) at five difficulty levels, each level its own rate."""
    rate = np.array([0.8, 0.6, 0.45, 0.3, 0.2])
    levels = np.repeat(np.arange(1, 6), sizes)
    return rng.binomial(3, rate[levels - 1]) / 3.0, levels


def test_matched_diff_covers_with_small_strata():
    """500 null simulations (no difference), strata of 1–3 items at four of five levels: the
    interval covers 0 in 95% ± 3% of them (before, the within-level bootstrap: 0.90 or less)."""
    rng = np.random.default_rng(2025)
    hits, defined = 0, 0
    for _ in range(500):
        x, xl = _null_sample(rng, [1, 2, 1, 3, 20])
        y, yl = _null_sample(rng, [2, 1, 3, 1, 25])
        m = matched_diff(x, xl, y, yl, n_boot=50, seed=0)
        if np.isfinite(m.low):
            defined += 1
            hits += m.low <= 0 <= m.high
    assert defined == 500
    assert abs(hits / defined - 0.95) <= 0.03, hits / defined


def test_a_one_item_stratum_adds_width():
    rng = np.random.default_rng(7)
    x, y = rng.random(30), rng.random(30)
    base = matched_diff(x, [3] * 30, y, [3] * 30, n_boot=50)
    more = matched_diff(np.r_[x, 0.9], [3] * 30 + [5], np.r_[y, 0.1], [3] * 30 + [5], n_boot=50)
    # the lone level's weight is 1/31: a bootstrap within it adds nothing, so its width would be
    # (30/31) × the level-3 width; with the pooled variance the lone level adds its share
    assert (more.high - more.low) > 1.01 * (30 / 31) * (base.high - base.low)


def _memorised(n: int = 25, right_gain: float = 0.0) -> list[dict]:
    comp = []
    for i in range(n):
        comp += completions("target", f"t{i}", 0.9 - 0.01 * i, 0.2)
        comp += completions("wrong_both", f"w{i}", 0.2 + 0.004 * i, 0.2)
        comp += completions("right_both", f"r{i}", 0.2 + right_gain - 0.01 * i, 0.2)
    return comp


def test_right_both_is_a_second_deciding_control():
    """The target gains as much as the items the model knows (right_both): "knows the item", not
    "saw the item": the completion test does not signal (before: right_both was not used)."""
    v = verdict_table(result([], _memorised(right_gain=0.7)), n_boot=300).set_index("test")
    assert v.loc[DID, "signal"] is True
    assert v.loc[DID_RIGHT, "signal"] is False
    assert "completion test" in v.loc["overall", "reading"] and v.loc["overall", "signal"] is False
    v2 = verdict_table(result([], _memorised(right_gain=0.0)), n_boot=300).set_index("test")
    assert v2.loc[DID, "signal"] is True and v2.loc[DID_RIGHT, "signal"] is True


def test_not_tested_rows_show_no_interval():
    bcq = quiz("target", "t", 3) + quiz("wrong_both", "w", 0)
    v = verdict_table(result(bcq, completions("target", "t", 1.0, 0.1)), n_boot=100).set_index("test")
    row = v.loc["BCQ per-item accuracy, target − wrong_both"]
    assert row["reading"].startswith("too few items") and np.isnan(row["low"]) and np.isnan(row["high"])
    assert np.isnan(v.loc["BCQ target: items right in a majority of repeats (exact binomial vs 25%)", "low"])


def test_verdicts_across_models_get_holm_and_their_basis():
    tables = []
    for name, gain in (("a", 0.0), ("b", 0.7)):
        bcq = [r for i in range(25) for r in quiz("target", f"t{i}", 3 if i % 5 else 2)]
        bcq += [r for i in range(25) for r in quiz("wrong_both", f"w{i}", 0 if i % 5 else 1)]
        bcq += [r for i in range(25) for r in quiz("right_both", f"r{i}", 1 if i % 5 else 2)]
        res = result(bcq, _memorised(right_gain=gain))
        res.config, res.basis = name, "judge" if name == "a" else "em_strict"
        tables.append(verdict_table(res, n_boot=300))
    out = holm_across_models(pd.concat(tables, ignore_index=True))
    deciding = out[out["p_holm"].notna()]
    assert set(deciding["config"]) == {"a", "b"}
    assert deciding["p_holm"].to_numpy() == pytest.approx(holm(deciding["p"].to_numpy()))
    assert dict(zip(out[out["test"] == "overall"]["config"], out[out["test"] == "overall"]["basis"], strict=True)) == \
        {"a": "judge", "b": "em_strict"}


def test_the_reports_guided_minus_general_shows_no_interval_below_the_floor(monkeypatch):
    """Two target items alike gave the completion section 'n 2, 1.0 [1.0, 1.0]': a percentile bootstrap
    over two items, shown as a 95% CI of zero width while the verdict says 'not tested'. Below the
    floor of items the section shows (and records) no interval, and says why."""
    from types import SimpleNamespace

    from cresowlve_core.contamination import report

    shown: list[pd.DataFrame] = []
    monkeypatch.setattr(report, "say", lambda md: None)
    monkeypatch.setattr(report, "show", lambda obj, digits=3: shown.append(obj))
    comp = completions("target", "t1", 1.0, 0.0) + completions("target", "t2", 1.0, 0.0)
    out = report.completion_section(SimpleNamespace(results=[result([], comp)], lang="ru"), n_boot=200)
    target = out["m"]["guided_minus_general"]["target"]
    assert (target["n"], target["diff"], target["low"], target["high"]) == (2, 1.0, None, None)
    table = shown[-1].set_index("set")
    row = table.loc["right in Ru, wrong in En"]
    assert np.isnan(row["low"]) and np.isnan(row["high"]) and row["interval"] == "too few items (n = 2): not tested"
