"""Agreement statistics against libraries: statsmodels' Fleiss' kappa, irrCAC's Gwet AC1.

The AC1 reference values were computed with irrCAC 0.4.4 (``CAC(df).gwet()``; it also gave the
Fleiss values listed), rounded by irrCAC to 5 decimals.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from cresowlve_core.construction.agreement import fleiss_kappa, gwet_ac1, multilabel_agreement, raw_agreement

TABLES = {
    "two_raters_binary": ([[1, 1], [1, 0], [0, 0], [1, 1], [1, 1], [0, 1], [1, 1], [0, 0], [1, 1], [1, 1]],
                          0.65517, 0.52381),
    "three_raters_binary": ([[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 0], [1, 1, 1], [0, 0, 1],
                             [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 0, 1]], 0.48424, 0.39799),
    "three_raters_three_cats": ([list("aab"), list("bbb"), list("cca"), list("aaa"), list("bcb"), list("abc"),
                                 list("ccc"), list("aab"), list("bba"), list("aaa")], 0.35961, 0.3299),
    "skewed": ([[1, 1]] * 7 + [[1, 0], [1, 1], [0, 0], [1, 1], [1, 1]], 0.89333, 0.61905),
}


@pytest.mark.parametrize("name", TABLES)
def test_against_irrcac(name: str) -> None:
    ratings, ac1, kappa = TABLES[name]
    assert gwet_ac1(ratings) == pytest.approx(ac1, abs=5e-6)
    assert fleiss_kappa(ratings) == pytest.approx(kappa, abs=5e-6)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_against_statsmodels_on_random_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ratings = rng.integers(0, 3 + seed % 2, size=(30, 2 + seed % 3)).tolist()
    table, _ = aggregate_raters(np.array(ratings))
    assert fleiss_kappa(ratings) == pytest.approx(sm_fleiss(table, method="fleiss"))


def test_labels_are_any_hashable_and_perfect_agreement() -> None:
    ratings = [["creative", "creative"], ["factual", "factual"], [("x",), ("x",)]]
    assert fleiss_kappa(ratings) == pytest.approx(1.0) and gwet_ac1(ratings) == pytest.approx(1.0)
    assert raw_agreement([["a", "a"], ["a", "b"]]) == 0.5
    assert math.isnan(fleiss_kappa([["a", "a"], ["a", "a"]]))
    assert gwet_ac1([[False, False], [False, False]], categories=(True, False)) == 1.0


def test_bad_tables_are_errors() -> None:
    with pytest.raises(ValueError, match="every item"):
        gwet_ac1([["a", "b"], ["a"]])
    with pytest.raises(ValueError, match="two raters"):
        fleiss_kappa([["a"], ["b"]])
    with pytest.raises(ValueError, match="not among"):
        gwet_ac1([["a", "z"]], categories=("a", "b"))


def test_multilabel_support_weighted() -> None:
    sets = [[{"metaphor", "pun"}, {"metaphor"}], [{"pun"}, {"pun"}], [set(), {"metaphor"}], [set(), set()]]
    res = multilabel_agreement(sets, ["metaphor", "pun", "poem"])
    assert set(res["per_label"]) == {"metaphor", "pun"}  # poem: no support, no weight
    m, p = res["per_label"]["metaphor"], res["per_label"]["pun"]
    assert m["support"] == 3 and p["support"] == 3
    assert m["ac1"] == pytest.approx(gwet_ac1([[True, True], [False, False], [False, True], [False, False]]))
    assert res["overall"] == pytest.approx((m["ac1"] * 3 + p["ac1"] * 3) / 6)


def test_fleiss_and_ac1_carry_seeded_item_bootstrap_intervals() -> None:
    from cresowlve_core.construction.agreement import fleiss_kappa_ci, format_ci, gwet_ac1_ci, interval_json

    ratings, ac1, kappa = TABLES["three_raters_three_cats"]
    k = fleiss_kappa_ci(ratings, n_boot=500, seed=0)
    a = gwet_ac1_ci(ratings, n_boot=500, seed=0)
    assert k.value == pytest.approx(kappa, abs=5e-6) and a.value == pytest.approx(ac1, abs=5e-6)
    assert k.low < k.value < k.high and a.low < a.value < a.high and k.n == a.n == 10
    assert fleiss_kappa_ci(ratings, n_boot=500, seed=0) == k and fleiss_kappa_ci(ratings, n_boot=500, seed=1) != k
    text = format_ci(interval_json(k))
    assert text.startswith(f"[{k.low:.3f}, {k.high:.3f}]")
    # one label used by everyone: κ undefined, no interval, and why
    flat = fleiss_kappa_ci([["a", "a"]] * 5, n_boot=100)
    assert math.isnan(flat.value) and math.isnan(flat.low) and "fewer than two categories" in flat.note
    assert format_ci(interval_json(flat)).startswith("– (undefined")


def test_multilabel_label_repeated_within_an_item_counts_once_and_has_intervals() -> None:
    """"History" listed twice by one rater on one item is one rating, not two."""
    twice = [[["History", "History"], ["History"]], [["Art"], ["Art", "History"]], [[], ["Art"]], [["Art"], ["Art"]]]
    once = [[sorted(set(s)) for s in row] for row in twice]
    res, ref = multilabel_agreement(twice, n_boot=200), multilabel_agreement(once, n_boot=200)
    assert res["per_label"]["History"]["support"] == 3 and res["overall"] == ref["overall"]
    ci = res["overall_ci"]
    assert ci["n"] == 4 and ci["n_boot"] == 200 and (ci["low"] is None or ci["low"] <= res["overall"] <= ci["high"])
    assert set(res["per_label"]["Art"]["ci"]) >= {"value", "low", "high", "n_undefined", "note"}


def test_an_item_the_model_gave_no_labels_for_is_left_out_of_that_fields_agreement() -> None:
    """A refused concepts call leaves the item's concepts empty: it is not the model saying no concept
    applies, so it is left out of the concepts' n (and counted), and stays in the other fields'."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    def cand(i: int, concepts_parsed: bool) -> Candidate:
        c = Candidate(id=f"c{i}", ru=ItemView(question="q", answer="a"))
        c = c.with_verdict("concepts", {"labels": ["metaphor"], "oov": []} if concepts_parsed else None,
                           concepts=["metaphor"] if concepts_parsed else [])
        c = c.with_verdict("domains", {"free": ["music"]}, domains=["Music"])
        return c.with_verdict("cultures", {"cultures": [], "not_cultures": [], "unrecognised": []})

    cands = [cand(0, True), cand(1, True), cand(2, False)]  # c2: the concepts call was refused
    notes = {c.id: Annotation(item_id=c.id, reviewer="ann", concepts=["metaphor"], domains=["Music"]) for c in cands}
    out = agreement_report(cands, {"ann": notes}, n_boot=50)
    assert (out["concepts"]["n_items"], out["concepts"]["n_no_model_label"]) == (2, 1)
    assert out["concepts"]["overall"] == 1.0  # the two labelled items agree; c2 does not count as a disagreement
    assert (out["domains"]["n_items"], out["domains"]["n_no_model_label"]) == (3, 0)
    assert "no labels for (refused, filtered, unparseable or errored" in agreement_section({**out, "n_sample": 3})


def test_a_field_the_model_labelled_no_annotated_item_of_is_undefined_not_a_crash() -> None:
    """Every concepts call of the sample unparsed (or refused): the field has no item left to score,
    and the build's agreement step crashed (numpy: cannot reshape array of size 0). Now the field's n is 0,
    its AC1 undefined with no interval, and the items are counted as having no model label."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    empty = multilabel_agreement([], ["metaphor"], n_boot=20)
    assert (empty["n_items"], empty["n_labels"], empty["per_label"]) == (0, 0, {}) and math.isnan(empty["overall"])
    assert empty["overall_ci"]["low"] is None and empty["overall_ci"]["n"] == 0
    cands = [Candidate(id=f"c{i}", ru=ItemView(question="q", answer="a"), reasoning_type="creative")
             .with_verdict("concepts", None) for i in range(2)]
    notes = {c.id: Annotation(item_id=c.id, reviewer="ann", reasoning_type="creative", concepts=["metaphor"])
             for c in cands}
    out = agreement_report(cands, {"ann": notes}, n_boot=20)
    assert (out["concepts"]["n_items"], out["concepts"]["n_no_model_label"]) == (0, 2)
    assert "| creative concepts | 0 | Gwet's AC1, support-weighted over 0 label(s) | undefined |" in \
        agreement_section({**out, "n_sample": 2})


def test_reviewers_who_labelled_different_items_or_an_earlier_sample_are_counted_not_hidden() -> None:
    """Two reviewers who labelled disjoint halves of the sample got "Not yet annotated"; a reviewer whose
    only labels were for an earlier sample (a rebuilt build) made n = 0 for everyone else. Each reviewer's
    coverage is now stated, and a reviewer with no label in this sample is not one of "every reviewer"."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    cands = [Candidate(id=f"c{i}", ru=ItemView(question="q", answer="a"), reasoning_type=rt)
             for i, rt in enumerate(["creative", "factual", "creative", "factual"])]

    def labels(who: str, ids: list[str]) -> dict[str, Annotation]:
        return {i: Annotation(item_id=i, reviewer=who, reasoning_type="creative") for i in ids}

    disjoint = agreement_report(cands, {"ann": labels("ann", ["c0", "c1"]), "bob": labels("bob", ["c2", "c3"])}, n_boot=20)
    assert disjoint["n_items"] == 0 and disjoint["annotated_by"] == {"ann": 2, "bob": 2}
    card = agreement_section({**disjoint, "n_sample": 4})
    assert "Not yet annotated" not in card
    assert "No item of the sample is labelled by every reviewer yet" in card and "ann 2 of 4, bob 2 of 4" in card

    rebuilt = agreement_report(cands, {"ann": labels("ann", ["c0", "c1", "c2", "c3"]), "old": labels("old", ["gone"])},
                               n_boot=20)
    assert rebuilt["reviewers"] == ["ann"] and rebuilt["n_items"] == 4 and rebuilt["reasoning_type"]["n"] == 4
    assert rebuilt["outside_sample"] == {"old": 1}
    card = agreement_section({**rebuilt, "n_sample": 4})
    assert "ann 4 of 4, old 0 of 4" in card and "not in this sample (an earlier sample of a rebuilt build), left out: old 1" in card


def test_items_left_out_of_the_reasoning_types_n_are_counted_and_named() -> None:
    """An item with no reasoning type from the model (its call refused) or from a reviewer was left
    out of the reasoning type's n (4 annotated, n = 2) without a word; both are now counted and named."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    cands = [Candidate(id=f"c{i}", ru=ItemView(question="q", answer="a"), reasoning_type=rt)
             for i, rt in enumerate(["creative", None, "creative", "factual"])]  # c1: the model's call was refused
    notes = {c.id: Annotation(item_id=c.id, reviewer="ann", reasoning_type=None if c.id == "c2" else "creative")
             for c in cands}  # c2: saved through the API without a reasoning type
    rt = agreement_report(cands, {"ann": notes}, n_boot=20)["reasoning_type"]
    assert (rt["n"], rt["n_no_model_label"], rt["n_no_human_label"]) == (2, 1, 1)
    card = agreement_section({**agreement_report(cands, {"ann": notes}, n_boot=20), "n_sample": 4})
    assert "the model gave no labels for" in card and "reasoning type 1" in card
    assert "Left out of the reasoning type's n: 1 item(s) a reviewer gave no reasoning type." in card


def test_a_field_a_reviewers_saved_line_does_not_have_is_left_out_not_scored_as_none_applies(tmp_path) -> None:
    """A hand-written annotation line with a reasoning type only was read as "no concept, domain or
    culture applies", so each label the model gave that item counted as a disagreement (AC1 0.2 on two
    items that agree wherever both rated). The field is now not rated for that item: left out of that
    field's n and counted; an empty list saved by the session is still "none applies"."""
    from cresowlve_core.construction import review as R
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.items import ItemView

    cands = [Candidate(id=f"c{i}", ru=ItemView(question="q", answer="a"), reasoning_type="creative", concepts=["metaphor"])
             .with_verdict("concepts", {"labels": ["metaphor"], "oov": []}) for i in range(3)]
    R.write_queue(tmp_path, cands, R.AGREEMENT_QUEUE)
    (tmp_path / "review" / "annotations__ann.jsonl").write_text(
        '{"item_id": "c0", "reviewer": "ann", "reasoning_type": "creative", "concepts": ["metaphor"]}\n'
        '{"item_id": "c1", "reviewer": "ann", "reasoning_type": "creative"}\n'
        '{"item_id": "c2", "reviewer": "ann", "reasoning_type": "creative", "concepts": []}\n', encoding="utf-8")
    out = agreement_report(cands, R.load_annotations(tmp_path), n_boot=20)
    concepts = out["concepts"]
    assert (concepts["n_items"], concepts["n_no_model_label"], concepts["n_no_human_label"]) == (2, 0, 1)
    assert concepts["per_label"]["metaphor"]["support"] == 3  # c0 twice, c2 once (the model); c1 is not rated
    assert "items a reviewer's saved labels have no such field for" in agreement_section({**out, "n_sample": 3})
    assert "creative concepts 1" in agreement_section({**out, "n_sample": 3})


def test_an_item_with_a_domain_no_group_was_found_for_is_flagged_and_left_out_of_the_domains_n() -> None:
    """The model's free-text domain that neither the mapping file nor the embeddings route to a group
    left the item with no group, unflagged, and the agreement scored it as the model saying no group
    applies (a disagreement with every group a reviewer chose). It is now flagged
    ``consolidate_domains:unmapped``, counted, and left out of the knowledge domains' n."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.domains import consolidate_domains
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    free = {"c0": ["literature"], "c1": ["zxqv blorfing"], "c2": ["music", "zxqv blorfing"]}
    cands = [Candidate(id=i, ru=ItemView(question="q", answer="a")).with_verdict("domains", {"free": f}, domains_free=f)
             for i, f in free.items()]
    out, _ = consolidate_domains(cands, fallback=False)
    assert [c.domains for c in out.kept] == [["Literature"], [], ["Music"]]
    assert [c.review_flags for c in out.kept] == [[], ["consolidate_domains:unmapped"], ["consolidate_domains:unmapped"]]
    assert out.counts["n_items_unmapped"] == 2
    notes = {i: Annotation(item_id=i, reviewer="ann", domains=["Literature"] if i == "c0" else ["History"])
             for i in free}
    result = agreement_report(out.kept, {"ann": notes}, n_boot=20)
    domains = result["domains"]
    assert (domains["n_items"], domains["n_unmapped"], domains["n_no_model_label"]) == (1, 2, 0)
    assert domains["per_label"]["Literature"]["support"] == 2 and "History" not in domains["per_label"]
    assert "Left out of the knowledge domains' n: 2 item(s) with a free-text domain" in \
        agreement_section({**result, "n_sample": 3})


def test_reviewer_names_are_text_in_the_data_cards_agreement_section() -> None:
    """A reviewer name (from a review file) went into the card's sentences as it was: a name holding
    HTML became a tag in DATA_CARD.md, the card a dataset publishes."""
    from cresowlve_core.construction.export import agreement_section

    evil = "<img src=x onerror=alert(1)>"
    waiting = {"reviewers": [evil], "n_items": 0, "annotated_by": {evil: 1, "bob": 0}, "n_sample": 3,
               "outside_sample": {evil: 2}}
    scored = {"reviewers": [evil], "n_items": 1, "annotated_by": {evil: 1}, "n_sample": 3, "reasoning_type": {"n": 0}}
    for result in (waiting, scored):
        card = agreement_section(result)
        assert not re.search(r"(?<!\\)<img", card) and "\\<img src=x onerror=alert(1)\\> 1 of 3" in card
    assert "(\\<img src=x onerror=alert(1)\\>); raters per item" in agreement_section(scored)


def test_an_item_whose_every_concept_was_outside_the_vocabulary_is_left_out_of_the_concepts_n() -> None:
    """'LABELS: banana, irony' on every item: the build line said 'no usable label: concepts 4/4', yet the
    agreement scored those items as the model saying no concept applies (n 2, AC1 0.2 against a reviewer's
    metaphor and pun). They are now left out of the concepts' n and counted with the unlabelled ones."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    verdicts = {"c0": {"labels": [], "oov": ["banana", "irony"]}, "c1": {"labels": ["pun"], "oov": ["banana"]}}
    cands = [Candidate(id=i, ru=ItemView(question="q", answer="a"), concepts=v["labels"]).with_verdict("concepts", v)
             for i, v in verdicts.items()]
    notes = {i: Annotation(item_id=i, reviewer="ann", concepts=["pun"]) for i in verdicts}
    result = agreement_report(cands, {"ann": notes}, n_boot=20)
    assert (result["concepts"]["n_items"], result["concepts"]["n_no_model_label"]) == (1, 1)
    assert result["concepts"]["per_label"]["pun"]["support"] == 2  # c1 only: the model and the reviewer
    assert "every label outside the vocabulary" in agreement_section({**result, "n_sample": 2})


def test_a_reviewers_cultures_are_compared_as_the_models_are_normalised() -> None:
    """The model's cultures are normalised (lower case, 'X culture' is X, 'general' is no culture); a
    reviewer's were compared as saved, so 'Russian' in a hand-written line, or 'russian culture' typed
    in the app, was a disagreement with the model's 'russian' (AC1 0.2 on two items that agree)."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    typed = {"c0": ["Russian"], "c1": ["russian culture", "general"], "c2": ["french"]}
    cands = [Candidate(id=i, ru=ItemView(question="q", answer="a"), cultures=["russian"] if i != "c2" else ["french"])
             .with_verdict("cultures", {"cultures": ["russian"], "not_cultures": [], "unrecognised": []})
             for i in typed]
    notes = {i: Annotation(item_id=i, reviewer="ann", cultures=v) for i, v in typed.items()}
    cultures = agreement_report(cands, {"ann": notes}, n_boot=20)["cultures"]
    assert sorted(cultures["per_label"]) == ["french", "russian"] and cultures["overall"] == 1.0


def test_a_culture_a_reviewer_misspelled_is_named_not_only_scored_as_a_disagreement() -> None:
    """'russain' typed by a reviewer was scored as a label of its own against the model's 'russian' (AC1
    0.538 on two labels) with nothing saying it is no known culture; the model's own are counted by its step."""
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.construction.review import Annotation
    from cresowlve_core.items import ItemView

    typed = {"c0": ["russain"], "c1": ["Russian"], "c2": ["russian"]}
    cands = [Candidate(id=i, ru=ItemView(question="q", answer="a"), cultures=["russian"])
             .with_verdict("cultures", {"cultures": ["russian"], "not_cultures": [], "unrecognised": []})
             for i in typed]
    out = agreement_report(cands, {"ann": {i: Annotation(item_id=i, reviewer="ann", reasoning_type="creative",
                                                       cultures=v) for i, v in typed.items()},
                                   "bob": {i: Annotation(item_id=i, reviewer="bob", cultures=["russian"])
                                           for i in typed}}, n_boot=20)
    assert out["cultures"]["unrecognised"] == {"ann": ["russain"]}
    assert "russain" in out["cultures"]["per_label"]  # still scored as given
    card = agreement_section({**out, "n_sample": 3})
    assert "Cultures a reviewer gave that are not in the list of known cultures" in card and "ann: russain." in card


def test_labels_made_on_another_translation_are_left_out_and_asked_again(tmp_path) -> None:
    """A reviewer labelled an item of the agreement sample; its translation then changed (run again, or a
    reviewer's fix_translation, after which the model labels it again): the old labels were scored against
    the model's labels of the new text. They are now left out and counted, and the session asks again."""
    from cresowlve_core.construction import review as R
    from cresowlve_core.construction.build import agreement_report
    from cresowlve_core.construction.export import agreement_section
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.items import ItemView

    def cands(english: str) -> list[Candidate]:
        return [Candidate(id=f"c{i}", ru=ItemView(question="Вопрос?", answer="Ответ"), reasoning_type="creative",
                          en=ItemView(question=english if i == 0 else "Same?", answer="A")) for i in range(2)]

    R.write_queue(tmp_path, cands("Old?"), R.AGREEMENT_QUEUE)
    session = R.AnnotationSession(tmp_path, "ann")
    for i in ("c0", "c1"):
        session.annotate_form(i, reasoning_type="creative", concepts=["metaphor"])
    now = cands("New?")
    result = agreement_report(now, R.load_annotations(tmp_path), n_boot=20)
    assert (result["n_items"], result["annotated_by"], result["stale"]) == (1, {"ann": 1}, {"ann": 1})
    assert "another English translation than the item's now (run again or fixed since), left out until labelled " \
           "again: ann 1." in agreement_section({**result, "n_sample": 2})
    R.write_queue(tmp_path, now, R.AGREEMENT_QUEUE)
    assert R.AnnotationSession(tmp_path, "ann").next_card()["id"] == "c0"
