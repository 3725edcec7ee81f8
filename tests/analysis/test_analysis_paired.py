"""Paired analyses on shared item ids: McNemar between configurations, En vs Ru, item lists."""

from __future__ import annotations

import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.analysis.paired import (
    compare_configs,
    cross_lingual,
    default_pairs,
    en_ru_items,
    mismatch_notes,
    ru_right_en_wrong,
)


def _write(tmp_path, name, outcomes: dict[str, bool], lang="en", model="gpt-4.1", effort=None, **kw):
    recs = [record(i, lang=lang, model=model, effort=effort, em_strict=v, judge="CORRECT" if v else "INCORRECT") for i, v in outcomes.items()]
    return write_run(tmp_path / name, recs, model=model, effort=effort, lang=lang, **kw)


def test_en_vs_ru_two_by_two_mcnemar_and_item_lists(tmp_path):
    ids = [f"i{k:02d}" for k in range(40)]
    en = {i: k < 10 for k, i in enumerate(ids)}  # right on 0-9
    ru = {i: 5 <= k < 25 for k, i in enumerate(ids)}  # right on 5-24
    _write(tmp_path, "g_en", en)
    _write(tmp_path, "g_ru", ru, lang="ru")
    rs = load_runs(str(tmp_path / "*"))
    row = cross_lingual(rs).iloc[0]
    assert (row["both_right"], row["ru_right_en_wrong"], row["en_right_ru_wrong"], row["both_wrong"]) == (5, 15, 5, 15)
    assert row["metric"] == "judge" and row["n"] == 40 and not row["mismatch"]
    assert row["diff"] == pytest.approx(25.0) and row["acc_ru"] == 50.0 and row["acc_en"] == 25.0
    from statsmodels.stats.contingency_tables import mcnemar

    assert row["p"] == pytest.approx(mcnemar([[5, 15], [5, 15]], exact=True).pvalue) and row["method"] == "exact"
    items = en_ru_items(rs, "GPT-4.1", None)
    assert items["ru_right_en_wrong"] == ids[10:25] == ru_right_en_wrong(rs, "gpt-4.1", None)
    assert items["en_right_ru_wrong"] == ids[:5] and items["both_right"] == ids[5:10] and items["both_wrong"] == ids[25:]
    with pytest.raises(ValueError, match="no run of model"):
        ru_right_en_wrong(rs, "gpt-4.1", "high")


def test_mismatched_item_sets_use_the_shared_items_and_say_so(tmp_path):
    _write(tmp_path, "g_en", {f"i{k}": True for k in range(30)})
    _write(tmp_path, "g_ru", {f"i{k}": k % 2 == 0 for k in range(10, 50)}, lang="ru")
    row = cross_lingual(load_runs(str(tmp_path / "*"))).iloc[0]
    assert (row["n_en"], row["n_ru"], row["n_shared"], row["n"]) == (30, 40, 20, 20) and row["mismatch"]
    assert row["acc_en"] == 100.0 and row["acc_ru"] == 50.0  # over the shared items only
    assert "only the 20 shared items are compared" in mismatch_notes(cross_lingual(load_runs(str(tmp_path / "*"))))[0]


def test_effort_levels_and_chosen_models_compared_on_shared_items(tmp_path):
    ids = [f"i{k:03d}" for k in range(200)]
    _write(tmp_path, "lo_en", {i: k < 60 for k, i in enumerate(ids)}, model="gem", effort="low", thinking=True)
    _write(tmp_path, "hi_en", {i: k < 100 for k, i in enumerate(ids)}, model="gem", effort="high", thinking=True)
    _write(tmp_path, "none_en", {i: k < 58 for k, i in enumerate(ids)}, model="gem", effort=None)
    _write(tmp_path, "other_en", {i: k % 2 == 0 for k, i in enumerate(ids)}, model="other")
    rs = load_runs(str(tmp_path / "*"))
    assert len(default_pairs(rs)) == 3  # gem: low/high, low/none, high/none; never across models
    out = compare_configs(rs, pairs=[("other", "gem (high)")])
    def pick(x, y):
        return out[((out["a"] == x) & (out["b"] == y)) | ((out["a"] == y) & (out["b"] == x))].iloc[0]

    row = pick("gem (high)", "gem (low)")
    assert row["n"] == 200 and {row["a_only_right"], row["b_only_right"]} == {0, 40}
    assert row["method"] == "chi2-cc" and row["p"] < 1e-8  # 40 discordant pairs: asymptotic
    thinking = pick("gem (low)", "gem")  # thinking vs non-thinking
    assert thinking["method"] == "exact" and thinking["p"] == pytest.approx(0.5)  # 2 discordant pairs
    chosen = out[out["a"] == "other"].iloc[0]
    assert chosen["b"] == "gem (high)" and chosen["diff"] == pytest.approx(0.0)
    assert (out["p_holm"] >= out["p"]).all()
    assert compare_configs(rs, pairs=[("GEM", "other")], include_defaults=False)["a"].tolist() == ["gem"]
    with pytest.raises(ValueError, match="no configuration 'nope'"):
        compare_configs(rs, pairs=[("nope", "other")])


def test_a_pair_asked_in_the_other_order_or_twice_is_one_test_in_holms_family(tmp_path):
    """`compare` names the default pair (gem (high), gem (low)) the other way round: one McNemar test, which
    was listed twice (a − b and b − a) and counted twice in Holm's family, p_holm 0.0039 for p 0.00195
    (statsmodels' multipletests on the one p gives it back unchanged)."""
    from statsmodels.stats.multitest import multipletests

    ids = [f"i{k:02d}" for k in range(60)]
    _write(tmp_path, "lo_en", {i: k < 20 for k, i in enumerate(ids)}, model="gem", effort="low", thinking=True)
    _write(tmp_path, "hi_en", {i: k < 30 for k, i in enumerate(ids)}, model="gem", effort="high", thinking=True)
    rs = load_runs(str(tmp_path / "*"))
    for pairs in ([("gem (low)", "gem (high)")], [("gem (high)", "gem (low)")] * 2):
        out = compare_configs(rs, pairs=pairs)
        assert len(out) == 1 and (out["a"].iloc[0], out["b"].iloc[0]) == pairs[0]
        assert out["p_holm"].iloc[0] == pytest.approx(multipletests(out["p"], method="holm")[1][0]) == out["p"].iloc[0]


def test_configurations_over_different_item_sets_are_named_with_their_counts(tmp_path):
    """Two configurations in one language, one run on 30 items and one on 20 of them plus 5 others: Table 1
    put their accuracies side by side with no word that they are not over the same items (each row's n
    only). Runs over the same items give no note; En and Ru are compared apart (mismatch_notes)."""
    from cresowlve_core.analysis.paired import item_set_notes

    _write(tmp_path, "a_en", {f"i{k}": True for k in range(30)}, model="a")
    _write(tmp_path, "b_en", {f"i{k}": True for k in range(10, 35)}, model="b")
    _write(tmp_path, "a_ru", {f"i{k}": True for k in range(30)}, model="a", lang="ru")
    _write(tmp_path, "b_ru", {f"i{k}": False for k in range(30)}, model="b", lang="ru")
    (note,) = item_set_notes(load_runs(str(tmp_path / "*")))
    assert note == ("En: the configurations hold records of different items (a 30, b 25; 20 in all of them), so their "
                    "rows are not over the same items; the paired section compares them on shared items.")
    assert item_set_notes(load_runs(str(tmp_path / "*_ru"))) == []
