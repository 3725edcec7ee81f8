"""The pure perturbation validator: difference, placeholders, punctuation, length; every reason
recorded per rewrite and counted; hand-made Russian and English examples."""

from __future__ import annotations

import pandas as pd
import pytest

from cresowlve_core.contamination.perturb import (
    length_tolerance,
    parse_perturbations,
    problems,
    punctuation,
    rejections,
    word_count,
)
from cresowlve_core.contamination.pipeline import _rejections
from cresowlve_core.contamination.report import rejection_counts

RU = "Назовите ЕГО, если ИКС — это «X»: однажды учёный сказал об этом."
RU_OK = [
    "Укажите ЕГО, если ИКС — это «X»: однажды учёный сказал об этом.",
    "Назовите ЕГО, если ИКС — это «X»: как-то учёный сказал об этом.",  # inner hyphen is part of the word
    "Назовите ЕГО, если ИКС — это «X»: однажды исследователь заявил об этом.",
]
EN = "Dickens wrote that X is \"the best of times\". Name X."
EN_OK = [
    "Dickens wrote that X is “the greatest of times”. Name X.",  # another quote style is the same class
    "Dickens stated that X is \"the best of times\". Name X.",
    "Dickens wrote that X is \"the finest of times\". Identify X.",
]


def kinds(original: str, rewrites: list[str] | None) -> list[tuple[int | None, str]]:
    return [(r.rewrite, r.kind) for r in rejections(original, rewrites)]


def test_valid_synonym_swaps_pass_in_both_languages():
    assert rejections(RU, RU_OK) == [] and problems(RU, RU_OK) == []
    assert rejections(EN, EN_OK) == []


def test_punctuation_sequence_normalises_quotes_dashes_and_ellipses():
    assert punctuation(RU) == ',—"":.'
    assert punctuation("«Он» - так…") == punctuation('"Он" — так...') == '""—...'
    assert punctuation("что-то don't") == ""  # inner hyphen and apostrophe belong to the word


@pytest.mark.parametrize("original,bad", [
    (RU, "Назовите ЕГО если ИКС — это «X»: однажды учёный заметил об этом."),  # comma dropped
    (RU, "Назовите ЕГО, если ИКС — это «X»; однажды учёный заметил об этом."),  # colon -> semicolon
    (EN, "Dickens wrote that X is \"the finest of times\"! Name X."),  # full stop -> exclamation
    (EN, "Dickens wrote that X is the finest of times. Name X."),  # quotes dropped
])
def test_changed_punctuation_is_rejected(original, bad):
    ok = RU_OK if original == RU else EN_OK
    assert kinds(original, [ok[0], bad, ok[2]]) == [(2, "punctuation_changed")]
    assert problems(original, [ok[0], bad, ok[2]])[0].startswith("rewrite 2: punctuation changed (")


def test_dropped_placeholder_is_rejected():
    bad_ru = "Назовите ЕГО, если игрек — это «X»: однажды учёный сказал об этом."
    assert kinds(RU, [*RU_OK[:2], bad_ru]) == [(3, "placeholder_lost")]
    assert "placeholder ИКС lost" in problems(RU, [*RU_OK[:2], bad_ru])[0]
    bad_en = "Dickens wrote that it is \"the best of times\". Name it."
    assert kinds(EN, [bad_en, *EN_OK[1:]]) == [(1, "placeholder_lost")]


def test_rewrite_that_changes_length_is_rejected():
    assert word_count(RU) == 11 and length_tolerance(11) == 3
    longer = "Назовите ЕГО, если ИКС — это «X»: однажды очень известный старый учёный сказал нам об этом."
    assert word_count(longer) == 15  # +4 > 3
    assert kinds(RU, [RU_OK[0], longer, RU_OK[2]]) == [(2, "length_changed")]
    plus3 = "Назовите ЕГО, если ИКС — это «X»: однажды очень известный старый учёный сказал об этом."
    assert rejections(RU, [RU_OK[0], plus3, RU_OK[2]]) == []  # +3 is within the tolerance
    shorter = "Dickens said X. Name X."  # the quotes go too, and 11 -> 5 words
    assert word_count(EN) == 11
    assert set(kinds(EN, [shorter, *EN_OK[1:]])) == {(1, "punctuation_changed"), (1, "length_changed")}


def test_length_tolerance_is_the_larger_of_three_words_and_a_fifth():
    assert [length_tolerance(n) for n in (0, 5, 15, 19, 20, 40)] == [3, 3, 3, 3, 4, 8]


def test_duplicates_and_copies_of_the_original_are_rejected_per_rewrite():
    assert kinds(RU, [RU, *RU_OK[1:]]) == [(1, "same_as_original")]
    # differing only in case or quote style is still the same words
    assert kinds(EN, [EN_OK[1], EN_OK[1].lower().replace(" x ", " X ").replace(" x.", " X."), EN_OK[2]]) == [
        (2, "duplicate")]
    assert kinds(EN, ["Dickens wrote that X is “the best of times”. Name X.", *EN_OK[1:]]) == [
        (1, "same_as_original")]
    assert problems(RU, [RU_OK[0], RU_OK[0], RU_OK[0]]) == ["rewrite 2: same as rewrite 1",
                                                            "rewrite 3: same as rewrite 1"]
    assert kinds(RU, None) == [(None, "unparsed")]


def test_every_reason_of_one_rewrite_is_kept():
    bad = "Назовите ЕГО, если игрек — это «X» и ещё много разных других слов, что учёный сказал об этом"
    assert kinds(RU, [bad, *RU_OK[1:]]) == [(1, "placeholder_lost"), (1, "punctuation_changed"),
                                            (1, "length_changed")]


def test_parse_keeps_quotes_that_belong_to_the_question():
    q = "«Война и мир» — роман, где ОН «главный»"
    reply = "1. «Война и мир» — книга, где ОН «главный»\n2. \"«Война и мир» — роман, где ОН «основной»\"\n" \
            "3. «Война и мир» — повесть, где ОН «главный»"
    got = parse_perturbations(reply, q)
    assert got is not None and got[0] == "«Война и мир» — книга, где ОН «главный»"
    assert kinds(q, got) == [(2, "punctuation_changed")]  # the model's extra wrapping quotes are not guessed away
    # a question that does not start with a quote: a quote pair wrapping the whole rewrite is the model's
    assert parse_perturbations('1. "Name X."\n2. «Identify X.»\n3. Call X.', "Name X.") == [
        "Name X.", "Identify X.", "Call X."]


def test_pipeline_revalidates_cached_records_and_reports_failed_calls():
    # a record cached under older rules (no punctuation check) is judged by the current ones
    old = {"status": "ok", "perturbations": [RU_OK[0], RU_OK[1], RU_OK[2].replace(",", "")], "problems": []}
    assert [(r.rewrite, r.kind) for r in _rejections(old, RU)] == [(3, "punctuation_changed")]
    assert [r.kind for r in _rejections({"status": "error", "error": "HTTP 500"}, RU)] == ["call_failed"]
    assert [r.kind for r in _rejections(None, RU)] == ["not_perturbed"]


def test_rejection_counts_count_rewrites_and_questions_per_reason():
    rows = [("target", "a", 1, "punctuation_changed"), ("target", "a", 2, "punctuation_changed"),
            ("target", "b", 3, "punctuation_changed"), ("wrong_both", "c", 0, "unparsed"),
            ("target", "a", 2, "length_changed")]
    df = pd.DataFrame([{"set": s, "id": i, "rewrite": k, "kind": kind, "detail": ""} for s, i, k, kind in rows])
    t = rejection_counts(df)
    assert t.to_dict("records") == [{"kind": "punctuation_changed", "rejections": 3, "questions": 2},
                                    {"kind": "length_changed", "rejections": 1, "questions": 1},
                                    {"kind": "unparsed", "rejections": 1, "questions": 1}]
    assert rejection_counts(df.iloc[:0]).empty


def test_a_reply_cut_off_in_its_last_rewrite_is_rejected_as_cut_off_and_keeps_the_others_reasons():
    from cresowlve_core.contamination.perturb import reply_rejections

    cut = [*RU_OK[:2], RU_OK[2][:20]]
    assert [(r.rewrite, r.kind) for r in reply_rejections(RU, cut, cut_off=True)] == [(3, "cut_off")]
    assert {r.kind for r in reply_rejections(RU, cut, cut_off=False)} >= {"punctuation_changed"}  # a whole reply's own
    assert reply_rejections(RU, RU_OK, cut_off=True) == []  # cut after three whole rewrites: usable
    broken = [RU, *RU_OK[1:2], RU_OK[2][:20]]  # rewrite 1 equals the original: its reason stays
    assert [(r.rewrite, r.kind) for r in reply_rejections(RU, broken, cut_off=True)] == [(1, "same_as_original"),
                                                                                          (3, "cut_off")]
    # the pipeline re-reads a stored record of a cut-off reply the same way
    rec = {"status": "ok", "outcome": "truncated", "perturbations": cut, "rejections": []}
    assert [(r.rewrite, r.kind) for r in _rejections(rec, RU)] == [(3, "cut_off")]
