"""Error analysis on the item: shares per answer, an item-clustered test between configurations."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats as sps

from cresowlve_core.error_analysis.distribution import UNIT, chi2_all_pairs, chi2_between, distribution
from cresowlve_core.stats import wilson_interval


def _answers(config: str, lang: str, labels: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"key": f"{config}|{lang}|{i}", "config": config, "lang": lang, "group": f"{config} · {lang}",
                          "id": i, "state": "labelled", "label": c, "bucket": c} for i, c in labels.items()])


def test_shares_are_per_answer_not_per_item_and_category():
    """En labels every item "missing creative connection", Ru half that and half "hallucination":
    per answer 6/8 and 2/8 (before: per item × category, 4/6 and 2/6)."""
    items = [f"q{i}" for i in range(4)]
    en = _answers("m", "en", dict.fromkeys(items, "missing_creative_connection"))
    ru = _answers("m", "ru", {i: ("missing_creative_connection" if j < 2 else "hallucination") for j, i in enumerate(items)})
    d = distribution(pd.concat([en, ru]), by="config").set_index("category")
    assert d.loc["missing_creative_connection", "p"] == pytest.approx(0.75)
    assert d.loc["hallucination", "p"] == pytest.approx(0.25)
    assert (d.loc["hallucination", "n"], d.loc["hallucination", "n_items"]) == (8, 4)
    assert (d["unit"] == UNIT).all()
    # pooled over languages the interval is clustered by item: never narrower than Wilson on 8 answers
    lo, hi = wilson_interval(2, 8)
    assert d.loc["hallucination", "high"] - d.loc["hallucination", "low"] >= hi - lo - 1e-12
    # per configuration × language, one answer per item: Wilson on the answers
    g = distribution(pd.concat([en, ru]), by="group").set_index(["group", "category"])
    assert (g.loc[("m · ru", "hallucination"), "low"], g.loc[("m · ru", "hallucination"), "high"]) == pytest.approx(
        wilson_interval(2, 4))


def test_between_configurations_the_test_is_clustered_by_item():
    """Two models wrong on disjoint items with opposite labels: the naive χ² calls that a
    difference (p < 1e-8) though every difference is between items; the item-stratified
    permutation finds nothing to compare (no shared item: p = 1)."""
    a = _answers("a", "en", {f"a{i}": "overthinking" for i in range(20)})
    b = _answers("b", "en", {f"b{i}": "wrong_reference" for i in range(20)})
    res = chi2_between(pd.concat([a, b]), "a", "b", by="config")
    assert res["chi2"] == pytest.approx(sps.chi2_contingency([[20, 0], [0, 20]], correction=False)[0])
    assert res["n_shared_items"] == 0 and res["p"] == 1.0
    # on shared items with labels that follow the configuration, the test does find it
    a2 = _answers("a", "en", {f"q{i}": "overthinking" for i in range(20)})
    b2 = _answers("b", "en", {f"q{i}": "wrong_reference" for i in range(20)})
    res2 = chi2_between(pd.concat([a2, b2]), "a", "b", by="config")
    assert res2["n_shared_items"] == 20 and res2["p"] < 0.01
    again = chi2_all_pairs(pd.concat([a2, b2]), by="config")
    assert again["p"].iloc[0] == res2["p"]  # seeded
    assert "within each item" in again["test"].iloc[0]
