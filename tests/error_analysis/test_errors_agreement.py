"""Distribution statistics, agreement (κ against sklearn/statsmodels) and the annotation store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from cresowlve_core.error_analysis import agreement as agr
from cresowlve_core.error_analysis.annotation import (
    AnnotationStore,
    annotation_sample,
    clue_words,
    highlight,
    read_annotations,
)
from cresowlve_core.error_analysis.distribution import PAIRED_LANGS, chi2_all_pairs, chi2_between, distribution
from cresowlve_core.stats import holm, wilson_interval


def _labels(config: str, cats: list[str | None]) -> pd.DataFrame:
    return pd.DataFrame([{"key": f"{config}|{i}", "config": config, "state": "labelled" if c else "unlabelled",
                          "label": c, "bucket": ("other" if c and c.startswith("other: ") else c)}
                         for i, c in enumerate(cats)])


def test_distribution_wilson_and_unlabelled_counted_apart():
    lf = _labels("m1", ["overthinking"] * 3 + ["wrong_reference"] + ["other: lazy"] + [None] * 2)
    d = distribution(lf).set_index("category")
    assert d.loc["overthinking", "k"] == 3 and d.loc["overthinking", "n"] == 5
    assert (d.loc["overthinking", "low"], d.loc["overthinking", "high"]) == pytest.approx(wilson_interval(3, 5))
    ci = sps.binomtest(3, 5).proportion_ci(method="wilson")
    assert d.loc["overthinking", "low"] == pytest.approx(ci.low)
    assert d.loc["other", "k"] == 1 and d["n_unlabelled"].iloc[0] == 2


def test_chi2_between_two_models_matches_scipy():
    lf = pd.concat([_labels("a", ["overthinking"] * 30 + ["wrong_reference"] * 10),
                    _labels("b", ["overthinking"] * 10 + ["wrong_reference"] * 30)])
    lf["id"] = [f"q{i}" for i in range(40)] * 2  # both models answered the same 40 items
    res = chi2_between(lf, "a", "b")
    chi2, p, dof, _ = sps.chi2_contingency([[30, 10], [10, 30]], correction=False)
    assert res["chi2"] == pytest.approx(chi2) and res["dof"] == dof == 1
    assert res["categories"] == 2 and res["warning"] == "" and res["n_shared_items"] == 40
    # the p-value is the within-item permutation's, close to the χ² approximation's here
    assert res["p"] < 0.01 and p < 0.01


def test_cohen_kappa_matches_sklearn_and_ci_is_seeded():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    a = rng.choice(["x", "y", "z"], size=80).tolist()
    b = [v if rng.random() < 0.7 else "y" for v in a]
    k1 = agr.cohen_kappa_ci(a, b, n_boot=300, seed=1)
    assert k1.value == pytest.approx(cohen_kappa_score(a, b))
    assert k1.low < k1.value < k1.high and k1.n == 80 and k1.n_undefined == 0 and k1.note == ""
    assert agr.cohen_kappa_ci(a, b, n_boot=300, seed=1) == k1


def test_fleiss_kappa_matches_statsmodels():
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    rng = np.random.default_rng(5)
    truth = rng.choice(["a", "b", "c", "d"], size=60)
    ratings = [[t if rng.random() < 0.75 else rng.choice(["a", "b", "c", "d"]) for _ in range(3)] for t in truth]
    table, _ = aggregate_raters(np.array(ratings))
    assert agr.fleiss_kappa(ratings) == pytest.approx(fleiss_kappa(table, method="fleiss"))
    k = agr.fleiss_kappa_ci(ratings, n_boot=200, seed=0)
    assert k.low < k.value < k.high and k.n == 60
    assert np.isnan(agr.fleiss_kappa([["a", "a"], ["a", "a"]]))  # one label only: undefined, like Cohen's
    with pytest.raises(ValueError, match="two raters"):  # one Fleiss' κ (construction's): one rater is an error
        agr.fleiss_kappa([["a"], ["b"]])


def test_confusion_and_precision_recall():
    ref = ["x", "x", "y", "y", "z"]
    pred = ["x", "y", "y", "y", "x"]
    cm = agr.confusion(ref, pred)
    assert cm.loc["x", "x"] == 1 and cm.loc["x", "y"] == 1 and cm.loc["z", "x"] == 1 and cm.to_numpy().sum() == 5
    pr = agr.precision_recall(ref, pred).set_index("category")
    assert pr.loc["x", "precision"] == 0.5 and pr.loc["x", "recall"] == 0.5
    assert pr.loc["y", "precision"] == pytest.approx(2 / 3) and pr.loc["y", "recall"] == 1.0
    assert np.isnan(pr.loc["z", "precision"]) and pr.loc["z", "recall"] == 0.0


def test_annotator_and_labeller_agreement():
    rows = []
    for i in range(10):
        truth = "overthinking" if i < 5 else "wrong_reference"
        for ann in ("ann1", "ann2", "ann3"):
            cat = truth if not (ann == "ann3" and i == 0) else "wrong_reference"
            rows.append({"key": f"k{i}", "annotator": ann, "category": cat})
    ann = pd.DataFrame(rows)
    among = agr.annotator_agreement(ann, n_boot=100)
    assert among["annotators"] == ["ann1", "ann2", "ann3"] and len(among["pairs"]) == 3
    assert among["pairs"].set_index(["a", "b"]).loc[("ann1", "ann2"), "kappa"] == 1.0
    assert among["n_items_all_raters"] == 10
    labels = {f"k{i}": ("overthinking" if i < 4 else "wrong_reference") for i in range(9)}  # k9 unlabelled
    vs = agr.labeller_agreement(ann, labels, n_boot=100)
    assert vs["n"] == 9 and vs["n_unlabelled"] == 1 and vs["n_no_majority"] == 0
    assert vs["confusion"].loc["overthinking", "wrong_reference"] == 1


def test_annotation_store_saves_at_once_and_resumes(tmp_path):
    keys = ["a", "b", "c"]
    s = AnnotationStore(tmp_path, "Ann One")
    assert s.next_index(keys) == 0
    s.save("a", "overthinking", "clear case")
    # a new session (e.g. after the notebook was closed) sees the save and resumes at "b"
    s2 = AnnotationStore(tmp_path, "Ann One")
    assert s2.labels()["a"]["note"] == "clear case" and s2.next_index(keys) == 1
    s2.save("a", "wrong_reference")  # a correction: the last save wins
    assert s2.labels()["a"]["category"] == "wrong_reference"
    with pytest.raises(ValueError):
        s2.save("b", "nonsense")
    AnnotationStore(tmp_path, "ann2").save("a", "other", "timeout")
    df = read_annotations(tmp_path)
    assert sorted(df["annotator"]) == ["Ann One", "ann2"] and len(df) == 2


def test_the_chi2_permutation_p_does_not_depend_on_the_order_the_answers_were_loaded_in():
    """The wrong answers come in the order of each run's responses.jsonl, the order its calls finished
    in. Before, three demo runs against the replay server and their copies with the lines shuffled gave
    p = 0.048 and 0.069 for the same answers, labels and seed."""
    rng = np.random.default_rng(0)
    cats = ["overthinking", "hallucination", "wrong_reference"]
    rows = [{"key": f"{c}|{k}", "config": c, "lang": "en", "id": f"i{k:02d}", "state": "labelled", "label": None,
             "bucket": cats[rng.integers(3)]} for k in range(20) for c in ("a", "b")]
    lf = pd.DataFrame(rows)
    p = chi2_between(lf, "a", "b")["p"]
    for order in range(3):
        assert chi2_between(lf.sample(frac=1, random_state=order), "a", "b")["p"] == p


def test_annotation_sample_is_seeded_per_config():
    lf = pd.concat([_labels("a", ["overthinking"] * 30), _labels("b", ["overthinking"] * 5)])
    for col in ("lang", "id", "question", "answer", "prediction", "reasoning"):
        lf[col] = "x"
    s1, s2 = annotation_sample(lf, 10, seed=1), annotation_sample(lf, 10, seed=1)
    assert s1["key"].tolist() == s2["key"].tolist()
    assert s1["config"].value_counts().to_dict() == {"a": 10, "b": 5}
    assert annotation_sample(lf, 10, seed=2)["key"].tolist() != s1["key"].tolist()


def test_a_configurations_annotation_sample_stays_when_another_configuration_is_added():
    """Annotators' saved labels count only for answers in the sample: adding a model's runs (a
    configuration sorted before "b") must not redraw the sample of "b" they already annotated."""
    def labels(configs: list[str]) -> pd.DataFrame:
        lf = pd.concat([_labels(c, ["overthinking"] * 20) for c in configs])
        for col in ("lang", "id", "question", "answer", "prediction", "reasoning"):
            lf[col] = "x"
        return lf

    before = annotation_sample(labels(["b", "c"]), 5, seed=0)
    after = annotation_sample(labels(["a", "b", "c"]), 5, seed=0)
    for config in ("b", "c"):
        assert after.loc[after["config"] == config, "key"].tolist() == before.loc[before["config"] == config, "key"].tolist()


def test_an_answer_leaving_a_configuration_replaces_only_itself_in_its_sample():
    """A re-run turned one wrong answer right (it leaves the labels): an answer outside the sample leaves the
    sample as it was; a sampled one is replaced by one other answer. Before, the configuration's stream was
    seeded by its number of answers, so either redrew most of the sample."""
    lf = _labels("b", ["overthinking"] * 40)
    for col in ("lang", "id", "question", "answer", "prediction", "reasoning"):
        lf[col] = "x"
    before = annotation_sample(lf, 5, seed=0)["key"].tolist()
    outside = next(k for k in lf["key"] if k not in before)
    assert annotation_sample(lf[lf["key"] != outside], 5, seed=0)["key"].tolist() == before
    after = annotation_sample(lf[lf["key"] != before[0]], 5, seed=0)["key"].tolist()
    assert len(after) == 5 and len(set(after) & set(before)) == 4 and before[0] not in after
    assert after == sorted(after)  # in key order


def test_clue_highlighting_escapes_and_handles_cyrillic():
    words = clue_words("Назовите ИКС: учёный <однажды> сказал")
    assert {"учёный", "однажды", "сказал", "икс"} <= words and "назовите" not in words
    html = highlight("Учёный & <script> однажды", words)
    assert "<mark>Учёный</mark>" in html and "&lt;script&gt;" in html and "<mark>однажды</mark>" in html


def test_annotation_panel_builds_and_saves(tmp_path):
    from cresowlve_core.error_analysis.annotation import annotation_panel

    sample = pd.DataFrame([{"key": f"k{i}", "config": "m", "lang": "en", "id": f"i{i}", "question": "Name IT.",
                            "answer": "A", "prediction": "B", "reasoning": "IT is hard"} for i in range(2)])
    store = AnnotationStore(tmp_path, "ann")
    panel = annotation_panel(sample, store)
    status, body, choice, note, buttons = panel.children
    assert "Item 1 of 2" in body.value and "<mark>" in body.value
    choice.value = "overthinking"
    note.value = "n"
    buttons.children[1].click()
    assert store.labels()["k0"]["category"] == "overthinking" and "Item 2 of 2" in body.value


def test_cohen_kappa_perfect_agreement_with_a_rare_label_is_not_shown_as_certain():
    """Two annotators agree on 9 × x and 1 × y. κ = 1 (sklearn too); 347 of the
    1000 resamples miss the y item (expected 1000 · 0.9¹⁰ ≈ 349) and κ is undefined there. Before,
    they were dropped silently and the rest gave 1.0 [1.0, 1.0]; now: no interval, with a note."""
    from sklearn.metrics import cohen_kappa_score

    a = ["x"] * 9 + ["y"]
    k = agr.cohen_kappa_ci(a, a, n_boot=1000, seed=0)
    assert k.value == cohen_kappa_score(a, a) == 1.0
    assert np.isnan(k.low) and np.isnan(k.high) and (k.n_undefined, k.n_boot) == (347, 1000)
    assert k.note == "347 of 1000 resamples undefined: no interval"  # more than the 5 % a 95 % interval leaves out
    assert agr.format_interval(k).startswith("1.000 (no interval; n = 10) — 347 of 1000 resamples undefined")


def test_cohen_kappa_interval_counts_undefined_resamples():
    """18 × x and 2 items where the raters differ on y: κ = 0.643, and the 115 of 1000 resamples with no y
    at all (expected ≈ 1000 · 0.9²⁰ ≈ 122) are counted, not silently dropped. They are more than the 5 % a
    95 % interval leaves outside, so there is no interval (over the other 885 it was [0.0, 1.0])."""
    from sklearn.metrics import cohen_kappa_score

    a, b = ["x"] * 18 + ["y", "y"], ["x"] * 18 + ["y", "x"]
    k = agr.cohen_kappa_ci(a, b, n_boot=1000, seed=0)
    assert k.value == pytest.approx(cohen_kappa_score(a, b)) and k.value == pytest.approx(0.6429, abs=1e-4)
    assert np.isnan(k.low) and np.isnan(k.high) and k.n_undefined == 115
    assert k.note == "115 of 1000 resamples undefined: no interval"
    one = agr.cohen_kappa_ci(["x"] * 5, ["x"] * 5, n_boot=50)
    assert np.isnan(one.value) and one.note == "undefined: both raters used one identical label"


def test_one_fleiss_kappa_for_errors_and_construction():
    from cresowlve_core.construction import agreement as construction

    assert agr.fleiss_kappa is construction.fleiss_kappa and agr.fleiss_kappa_ci is construction.fleiss_kappa_ci
    perfect = [["x", "x", "x"]] * 9 + [["y", "y", "y"]]
    k = agr.fleiss_kappa_ci(perfect, n_boot=1000, seed=0)
    assert k.value == pytest.approx(1.0) and np.isnan(k.low) and k.n_undefined == 361  # ≈ 1000 · 0.9¹⁰
    assert "361 of 1000 resamples undefined" in k.note


def test_chi2_pairs_holm_and_en_ru_descriptive():
    """Three models in two languages: 3 same-language pairs per language are tested (6 χ²), Holm
    across them; each model's En vs Ru is listed as descriptive, with no p; mixed pairs are left out."""
    rows = []
    mix = {"a": (30, 10), "b": (10, 30), "c": (20, 20)}
    for model, (k1, k2) in mix.items():
        for lang in ("en", "ru"):
            cats = ["overthinking"] * k1 + ["wrong_reference"] * k2
            lf = _labels(model, cats)
            lf["id"] = [f"q{i}" for i in range(len(cats))]  # the models answer the same items
            rows.append(lf.assign(lang=lang, group=f"{model} · {lang}"))
    chi = chi2_all_pairs(pd.concat(rows), by="group")
    tested = chi[chi["p"].notna()]
    assert len(tested) == 6 and len(chi) == 9
    assert (chi[chi["p"].isna()]["test"] == PAIRED_LANGS).all()
    assert set(chi[chi["p"].isna()]["a"]) == {"a · en", "b · en", "c · en"}
    assert tested["p_holm"].to_numpy() == pytest.approx(holm(tested["p"].to_numpy()))
    ab = tested.set_index(["a", "b"]).loc[("a · en", "b · en")]
    assert ab["chi2"] == pytest.approx(sps.chi2_contingency([[30, 10], [10, 30]], correction=False)[0])


def test_an_answer_loaded_twice_counts_once():
    """Pooling a model's languages, item q1's En and Ru answers are two answers; the same En
    answer loaded twice (a run read twice) counts once: overthinking 2 of 3."""
    lf = _labels("m", ["overthinking", "overthinking", "overthinking", "wrong_reference"])
    lf["id"] = ["q1", "q1", "q1", "q2"]
    lf["lang"] = ["en", "en", "ru", "en"]
    d = distribution(lf, by="config").set_index("category")
    assert (d.loc["overthinking", "k"], d.loc["overthinking", "n"], d.loc["overthinking", "n_items"]) == (2, 3, 2)
    assert d.loc["overthinking", "lang"] == "mixed"


@pytest.mark.parametrize("line, problem", [
    ('{"key": "b", "annotator": "ann", "category": "OVERTHINKING", "note": ""}',
     "2: unknown category 'OVERTHINKING' for 'b'; one of missing_creative_connection, "),
    ('{"key": "b", bad json', "2: not JSON"),
    ('{"key": "b", "category": "overthinking"}', "2: an annotation needs a 'annotator' (a non-empty string), got None"),
    ('["b", "overthinking"]', "2: expected a JSON object (one label per line)"),
])
def test_an_annotation_line_that_is_not_a_label_is_one_error_naming_it(tmp_path, line, problem):
    # such a line used to be skipped: the agreement was computed over fewer labels, without a word
    AnnotationStore(tmp_path, "ann").save("a", "overthinking")
    with (tmp_path / "ann.jsonl").open("a", encoding="utf-8") as f:
        f.write(line + "\n" + '{"key": "c", "annotator": "ann", "category": "other", "note": ""}\n')
    with pytest.raises(ValueError) as err:
        read_annotations(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'ann.jsonl'}:{problem}")


def test_the_annotation_sample_and_a_torn_last_line_are_not_labels(tmp_path):
    from cresowlve_core.error_analysis.annotation import write_sample

    write_sample(pd.DataFrame([{"key": "a", "config": "c", "lang": "en", "id": "i", "question": "q", "answer": "x",
                                "prediction": "y", "reasoning": ""}]), tmp_path / "sample.jsonl")
    AnnotationStore(tmp_path, "ann").save("a", "overthinking")
    with (tmp_path / "ann.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"key": "b", "annot')  # a save cut off by a kill
    assert read_annotations(tmp_path)[["key", "category"]].values.tolist() == [["a", "overthinking"]]


def _analysis(tmp_path, n: int = 4):
    from cresowlve_core.error_analysis.report import ErrorAnalysis

    labels = _labels("m", ["overthinking", "wrong_reference"] * (n // 2))
    for col in ("lang", "id", "question", "answer", "prediction", "reasoning"):
        labels[col] = labels["key"] if col == "id" else "en" if col == "lang" else "x"
    return ErrorAnalysis(source="test", tally=pd.DataFrame(), labels=labels, label_dir=tmp_path / "labels" / "m",
                         labeller="lab", embedded=False)


def test_labels_saved_for_answers_not_in_the_sample_are_counted_not_dropped_without_a_word(tmp_path, monkeypatch):
    """The sample is drawn afresh from the runs at every render; labels saved for an earlier sample
    were filtered out without a word (10 labels saved, 'n_annotations': 1, nothing said). They are now
    counted and named, and each annotator's coverage of the sample is stated."""
    from cresowlve_core.error_analysis import report

    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda *a, **k: None)
    folder = tmp_path / "annotations"
    ann = AnnotationStore(folder, "ann")
    for i in range(10):
        ann.save(f"old|{i}", "overthinking")  # an earlier sample's answers
    ann.save("m|0", "overthinking")
    AnnotationStore(folder, "bob").save("m|1", "wrong_reference")
    out = report.annotation_section(_analysis(tmp_path), folder, n_boot=20)
    assert out["n_annotations"] == 2 and out["n_outside_sample"] == 10 and out["labelled_by"] == {"ann": 1, "bob": 1}
    text = "\n".join(said)
    assert "10 saved label(s) are for wrong answers not in this sample" in text and "left out of the agreement: ann 10." in text
    assert "Labelled per annotator: ann 1 of 4, bob 1 of 4." in text

    said.clear()
    only_old = tmp_path / "only_old"
    AnnotationStore(only_old, "carl").save("old|0", "overthinking")
    out = report.annotation_section(_analysis(tmp_path), only_old, n_boot=20)
    assert out["n_outside_sample"] == 1 and "No annotations of this sample yet" in "\n".join(said)


def test_a_kappa_that_is_zero_by_construction_says_so():
    """One annotator (the reference) who always chose 'overthinking' and a labeller that agreed on 4 of 6:
    κ = 0 whatever the labeller did, and the report read 'κ = 0.000 ... every defined resample gives 0'
    as if it were measured chance-level agreement. It now says κ = 0 by construction, with the raw count."""
    ann = pd.DataFrame([{"key": f"k{i}", "annotator": "ann", "category": "overthinking"} for i in range(6)])
    labels = {f"k{i}": "overthinking" if i < 4 else "wrong_reference" for i in range(6)}
    vs = agr.labeller_agreement(ann, labels, n_boot=50)
    k = vs["kappa"]
    assert k.value == 0.0 and np.isnan(k.low) and k.note == agr.ONE_RATER and (vs["n"], vs["n_agree"]) == (6, 4)
    assert "κ = 0 by construction" in agr.format_interval(k)
    both_varied = agr.cohen_kappa_ci(["x", "y", "x", "y"], ["x", "y", "y", "y"], n_boot=50)
    assert both_varied.note != agr.ONE_RATER and both_varied.value == 0.5


def test_an_example_whose_labeller_gave_no_rationale_says_so():
    """The 04 report showed an empty "Labeller's rationale." under each base-model label."""
    import math

    from cresowlve_core.error_analysis.report import _rationale_html

    assert _rationale_html("") == _rationale_html("  ") == _rationale_html(None) == _rationale_html(math.nan)
    assert _rationale_html(None) == "<i>none given</i>" and _rationale_html("a <b>") == "a &lt;b&gt;"


def test_the_agreement_section_states_the_undefined_resample_rule_it_applies(tmp_path, monkeypatch):
    """The section said no interval is shown when "most resamples are undefined", but the rule is more
    than 5 % of them (stats.MAX_UNDEFINED_SHARE): a report could show no interval with 88 of 1,000
    undefined and describe a rule under which it would have shown one."""
    from cresowlve_core.error_analysis import report
    from cresowlve_core.stats import MAX_UNDEFINED_SHARE

    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    monkeypatch.setattr(report, "show", lambda *a, **k: None)
    folder = tmp_path / "annotations"
    AnnotationStore(folder, "ann").save("m|0", "overthinking")
    AnnotationStore(folder, "bob").save("m|0", "wrong_reference")
    report.annotation_section(_analysis(tmp_path), folder, n_boot=20)
    rule = next(line for line in said if line.startswith("**Between annotators**"))
    assert MAX_UNDEFINED_SHARE == 0.05 and "more than 5% of the resamples are undefined" in rule
    assert "most resamples" not in rule
