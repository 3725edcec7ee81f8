"""Contamination building blocks: ROUGE-L, option placement, answer parsing, statistics."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps

from cresowlve_core.contamination import prefix_match, rouge_l
from cresowlve_core.contamination import quiz as qz
from cresowlve_core.contamination.completion import cut_question, paired_diff, parse_continuation
from cresowlve_core.contamination.perturb import parse_perturbations, placeholders, problems
from cresowlve_core.stats import wilson_interval

# ------------------------------------------------------------------ ROUGE-L


def test_rouge_l_hand_computed_latin():
    # cand: the cat sat on the mat (6), ref: the cat lay on the mat (6); LCS = the cat on the mat = 5
    assert rouge_l("The cat sat on the mat.", "the cat lay on the mat") == pytest.approx(5 / 6)
    # cand 3 tokens, ref 6 tokens, LCS 2 ("a", "d"): P = 2/3, R = 2/6, F1 = 2PR/(P+R) = 4/9
    assert rouge_l("a x d", "a b c d e f") == pytest.approx(4 / 9)


def test_rouge_l_hand_computed_cyrillic():
    assert rouge_l("кот сидит на окне", "кот спит на окне") == pytest.approx(0.75)
    assert rouge_l("Ёлка, ЁЛКА!", "ёлка ёлка") == 1.0  # casefold keeps ё; punctuation is not a token
    text = "По предположению американских учёных, складки выполняют ту же функцию, что и ИКС."
    assert rouge_l(text, text) == 1.0  # common ROUGE packages give 0 here
    # LCS("в лесу родилась ёлочка", "родилась в лесу ёлочка") = "в лесу ёлочка" = 3 of 4 each
    assert rouge_l("в лесу родилась ёлочка", "родилась в лесу ёлочка") == pytest.approx(0.75)


def test_rouge_l_empty_and_nfkc():
    assert rouge_l("", "abc") == 0.0 and rouge_l("abc", "...") == 0.0 and rouge_l("x", "y") == 0.0
    assert rouge_l("ﬁne", "fine") == 1.0  # NFKC folds the ligature


def test_prefix_match():
    assert prefix_match("один два три четыре пять шесть", "Один, два, три, четыре, пять; и дальше", k=5)
    assert not prefix_match("один два три", "один два четыре", k=5)
    assert prefix_match("x y", "x y", k=5)  # shorter reference: all its words
    assert not prefix_match("anything", "", k=5)


# ------------------------------------------------------------------ placement


P = ["p1", "p2", "p3"]


def test_bdq_options_seeded_deterministic_and_a_permutation():
    a = qz.bdq_options(P, qz.bdq_rng(0, "ru", "chgk_1"))
    b = qz.bdq_options(P, qz.bdq_rng(0, "ru", "chgk_1"))
    assert a == b and a[1] is None
    opts = a[0]
    assert sorted(opts[:3]) == P and opts[3] == qz.NONE_OPTION
    orders = {qz.bdq_options(P, qz.bdq_rng(0, "ru", f"chgk_{i}"))[0][:3] for i in range(60)}
    assert len(orders) == 6  # every order occurs across items


def test_bcq_places_the_original_only_at_non_preferred_positions():
    seen = set()
    for i in range(200):
        opts, letter = qz.bcq_options("ORIG", P, ["B", "C"], qz.bcq_rng(0, 0, "ru", f"chgk_{i}"))
        assert letter in {"B", "C"} and opts["ABCD".index(letter)] == "ORIG"
        others = [o for o in opts[:3] if o != "ORIG"]  # the original replaces one perturbation
        assert len(others) == 2 and len(set(others)) == 2 and set(others) <= set(P) and opts[3] == qz.NONE_OPTION
        seen.add(letter)
    assert seen == {"B", "C"}
    again = qz.bcq_options("ORIG", P, ["B", "C"], qz.bcq_rng(0, 0, "ru", "chgk_7"))
    assert again == qz.bcq_options("ORIG", P, ["B", "C"], qz.bcq_rng(0, 0, "ru", "chgk_7"))


def test_bcq_repeats_have_independent_randomness():
    per_repeat = [tuple(qz.bcq_options("O", P, ["A", "B", "C"], qz.bcq_rng(0, r, "ru", f"chgk_{i}"))[1]
                        for i in range(40)) for r in range(3)]
    assert len(set(per_repeat)) == 3


def test_bcq_rejects_no_allowed_position():
    with pytest.raises(ValueError):
        qz.bcq_options("O", P, ["D"], qz.bcq_rng(0, 0, "ru", "x"))


def test_non_preferred_positions_on_the_papers_distribution():
    counts = {"A": 187, "B": 60, "C": 47, "D": 273, "invalid": 13}
    assert qz.non_preferred_positions(counts, 580) == (["B", "C"], True)  # threshold 145


def test_non_preferred_positions_fallback_when_none_below_quarter():
    counts = {"A": 30, "B": 30, "C": 28, "D": 12}
    assert qz.non_preferred_positions(counts, 100) == (["C"], False)


@pytest.mark.parametrize("counts, n, n_more, settled", [
    ({"A": 11}, 12, 0, ["B", "C"]),  # nothing more to ask: the positions as measured
    ({"A": 10}, 11, 1, ["B", "C"]),  # one more answer cannot lift B or C to (11 + 1)/4 = 3
    ({"A": 11}, 12, 12, None),  # twelve more may put B or C at or above 24/4 = 6
    ({"A": 5, "B": 5, "C": 1}, 12, 1, ["C"]),  # C stays below 13/4, A and B stay above it
    ({"A": 3, "B": 3, "C": 3, "D": 3}, 12, 1, None),  # A-C at 3: one more answer decides where 13/4 falls
    ({}, 0, 0, []),  # no answer: no BCQ
])
def test_settled_non_preferred_only_when_no_new_answers_can_move_them(counts, n, n_more, settled):
    assert qz.settled_non_preferred(counts, n, n_more) == settled
    if settled:  # every way the new answers can fall (one position each, or unanswered) keeps them
        for pick in [*qz.LETTERS, None]:
            for k in range(n_more + 1):
                more = counts | ({pick: counts.get(pick, 0) + k} if pick else {})
                assert qz.non_preferred_positions(more, n + k)[0] == settled


def test_position_counts_and_uniform_gof_against_scipy():
    counts = qz.position_counts(["A"] * 187 + ["B"] * 60 + ["C"] * 47 + ["D"] * 273 + [None] * 13)
    assert counts == {"A": 187, "B": 60, "C": 47, "D": 273, "invalid": 13, "withheld": 0, "cut_off": 0}
    gof = qz.uniform_gof(counts)
    ref = sps.chisquare([187, 60, 47, 273])
    assert gof["chi2"] == pytest.approx(ref.statistic) and gof["p"] == pytest.approx(ref.pvalue)
    assert gof["n_valid"] == 567


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize("reply, letter", [
    ("B", "B"), ("B)", "B"), ("(C)", "C"), ("D.", "D"), ("**A**", "A"), ("Answer: C", "C"), ("answer: c", "C"),
    ("Option B", "B"), ("The answer is D", "D"), ("Ответ: A", "A"), ("  \n\nB) the second one", "B"),
    ("I believe the original is this.\nAnswer: B", "B"), ("[C]", "C"), ("Final answer: A", "A"),
])
def test_parse_choice_forms(reply, letter):
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply", [None, "", "E", "None of them", "a lovely question", "Apple", "AB",
                                   "I cannot tell.", "BC", "1"])
def test_parse_choice_invalid(reply):
    assert qz.parse_choice(reply) is None


@pytest.mark.parametrize("reply, letter", [
    ("A", "A"), ("(B)", "B"), ("**C**", "C"), ("Answer: D", "D"), ("B) the second text", "B"),
    ("A. Name the instrument that has keys", "A"), ("D - none of them", "D"), ("C: after every move", "C"),
    ("**A** is the original", "A"), ("(A) is the original wording", "A"), ("A, because the wording is exact", "A"),
    ("A good question, but I cannot tell.\nAnswer: B", "B"), (" D\n\nA) Name the instrument", "D"),
])
def test_parse_choice_a_letter_standing_as_an_option(reply, letter):
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply", [
    "A good question, but I cannot tell.", "A quiz like this is hard to answer.", "A is the original.",
    "B is the original.", "B because the wording matches", "**A is the original**", "\"A good guess\" is all I have",
    "C'est difficile à dire.", "A or B", "A, B or C", "**A**, **B**", "A/B", "A.I. models cannot tell which one",
    "A-level quizzes are hard", "Answer: A good question, but I cannot tell.", "The answer is a matter of taste.",
    "I cannot choose an option: a guess would not be honest.",
])
def test_parse_choice_a_letter_that_is_a_word_of_a_sentence_is_no_answer(reply):
    """The letter as the first word of a sentence (the article of "A good question"), or one of
    several letters, names no option: the reply is invalid (counted), never a choice. The same rule
    for every letter, so no position gains answers by being an English word."""
    assert qz.parse_choice(reply) is None


@pytest.mark.parametrize("reply", [
    "(B) or (C)", "**B** or **C**", "**B** and **C**", "B) or C)", "\"B\" or \"C\"", "B; C", "(B) или (C)",
    "Answer: (B) or (C)", "The answer is **B** or **C**", "(A) and (B) are rewordings; C is the original",
])
def test_parse_choice_two_letters_in_marks_are_a_hedge_not_the_first(reply):
    """Two option letters joined by ``or``, ``and`` or ``;`` name no one option, wrapped in marks or
    not (``A or B`` already was invalid): ``(B) or (C)`` was read as B, and ``(A) and (B) are
    rewordings; C is the original`` as A."""
    assert qz.parse_choice(reply) is None


@pytest.mark.parametrize("reply", [
    "(B)(C)", "(B) (C)", "**B****C**", "Answer: (B)(C)", "[A][D]", "B, or C", "B, maybe C", "B (perhaps C)",
    "Answer: B, or maybe C",
])
def test_parse_choice_a_second_letter_right_after_the_first_is_a_hedge(reply):
    """Two option letters each in marks of their own with nothing between (``(B)(C)``), or joined by
    a comma and ``or``/``maybe`` (``B, maybe C``), name no one option: they were read as the first
    (a quiz-taker replying ``(B)(C)`` to all 12 BDQ questions: every choice B, n_invalid 0)."""
    assert qz.parse_choice(reply) is None


@pytest.mark.parametrize("reply, letter", [
    ("**C** and not **B**", "C"), ("B; the rest are rewordings", "B"), ("B) or else", "B"), ("(D) and nothing else", "D"),
])
def test_parse_choice_one_letter_then_words_is_still_that_option(reply, letter):
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("Looking at each:\n- Option A - reworded\n- Option B - reworded\n\nAnswer: C", "C"),
    ("Let me compare the wordings.\nOption A, with \"как-то\", is a reworded copy.\nThe answer is C.", "C"),
    ("Comparing them, option A: \"как-то\" replaces a word. So the answer is C.", "C"),
    ("Answer: B\nAnswer: C", None), ("B) the second text\n\nWait, actually the answer is C.", None),
    ("Ответ: B\nОтвет: C", None), ("Looking at each:\n- Option A - reworded\n- Option B - reworded", None),
    ("B\nOption A, by contrast, is reworded.", "B"), ("The answer is C. Option A, by contrast, is reworded.", "C"),
    ("Option A - reworded\nOption B - reworded\nOption C - the original", None), ("Option B", "B"),
    ("Option A - reworded\nAnswer: C", "C"),
])
def test_parse_choice_reads_the_answer_not_the_first_option_a_reply_discusses(reply, letter):
    """A reply that goes through the options before its answer was read as the first option it
    discussed (``Option A - reworded … Answer: C`` as A), and one stating two answers as the first.
    The answer phrase names the choice; two different answers, or options discussed with no answer,
    name none (invalid, counted)."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply", [
    "A. B. C. D.", "A.\nB.\nC.\nD.", "(A)\n(B)\n(C)\n(D)",
    "A) Name the instrument that has keys\nB) Name the instrument with keys\nC) Name the musical instrument\n"
    "D) None of the provided options.",
])
def test_parse_choice_a_reply_listing_the_options_names_none(reply):
    """A reply that repeats the options (their letters, or their lines) names none of them: it was
    read as A, the first it listed."""
    assert qz.parse_choice(reply) is None


@pytest.mark.parametrize("reply, letter", [
    ("A... no, C", None), ("A... no wait, actually it's C", None), ("A\nWait, no. C", None), ("A\nActually, C.", None),
    ("B\nC", None), ("B) the second text\n\nActually, C.", None), ("Answer: B. Hmm, no: C.", None),
    ("The answer is B... or rather C.", None), ("I'd go with the answer B... no, actually C", None),
    ("I think it's A... no wait, actually it's C", None), ("B. Or C", None), ("B.\n\nAlso C.", None),
    ("B, but maybe C", None), ("B -> C", None),
    # another letter that does not end a line as a choice: still the one option named
    ("B, not C", "B"), ("**C** and not **B**", "C"), ("B\nThe original is about vitamin C.", "B"),
    ("B\n\nA: reworded; C: reworded", "B"), ("B\n\nRewordings: A, C.", "B"),
    ("B\n\nИли C?", None), ("Ответ: B\nИли всё-таки C.", None), ("B\n\nХотя C.", None), ("B\nЛибо C", None),
    ("Ответ: B\nЭто C", None), ("B\n\nВитамин C", "B"), ("B\n\nНе C", "B"), ("Ответ: B\nЭто B", "B"),
    ("B\n\nOr C?", None), ("B\n\nHmm, (C)?", None), ("**B**\n\nOr maybe **C**?", None), ("B\nWhy would it be C?", "B"),
    ("A\nHmm, C.", None), ("A\nWait: C", None), ("B\nI changed my mind: C", None), ("B\nOn second thought, C.", None), ("C\n\nA) x\nB) y\nC) z\nD) None of the provided options.", "C"),
])
def test_parse_choice_a_change_of_mind_without_an_answer_word_names_none(reply, letter):
    """A reply that names a letter, then ends a line with another (``A... no, C``, ``A\nActually, C.``)
    changed its mind or hedged: it was read as the first letter. It names no one option now."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("Ответ — B", "B"), ("Answer — B", "B"), ("Ответ – C.", "C"), ("Вариант A — перефразировка. Ответ — C", "C"),
    ("Вариант A — перефразировка. Ответ — не знаю", None), ("Answer — B or C", None), ("B\n\nОтвет —", None),
])
def test_parse_choice_an_answer_word_then_a_dash_names_its_option(reply, letter):
    """``Ответ — B`` (Russian sets a dash where English sets a colon) named no option (invalid), and
    ``Вариант A — … Ответ — не знаю`` was read as A, the option it discussed."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("I think it's B.", "B"), ("I'd say B.", "B"), ("I believe the answer is C.", "C"), ("I'll go with D.", "D"),
    ("I choose (C)", "C"), ("I would say D", "D"),
    ("I think A good question", None), ("I think it's a rewording", None), ("I think B or C", None),
    ("I guess B, maybe C", None), ("I think it's B.\n\nActually, C.", None),
])
def test_parse_choice_a_reply_opening_with_i_think_names_its_option(reply, letter):
    """``I think it's B.``, ``I'd say B.`` named no option (invalid, counted as wrong); they lead a reply
    as ``The answer is`` does, under the same rules."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("answer: B\n\nactually, make that C", None), ("B\n\nI'll go with C.", None), ("B. Hmm, I'd pick C", None),
    ("B\nLet me change my answer to C.", None), ("Answer: B\nI'd say C", None), ("B\nMake it C!", None),
    # the same option chosen again, or another one discussed: still the one named
    ("answer: B\n\nactually, make that B", "B"), ("B\nI'd say C is reworded.", "B"),
])
def test_parse_choice_a_letter_chosen_again_by_a_verb_is_a_change_of_mind(reply, letter):
    """A reply that names a letter, then chooses another one by a verb (``make that C``, ``go with C``)
    changed its mind: ``answer: B\n\nactually, make that C`` was read as B."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("Option A - reworded. Answer: none of them", None), ("Option A - reworded\nAnswer: I cannot tell", None),
    ("Вариант A — перефразировка. Ответ: В", None),  # the answer in a Cyrillic letter, the option in a Latin one
    ("Option C.\n\nAnswer: none", None), ("B\nAnswer: none of these", None),
    ("**Answer:** (c)", "C"), ("Option A - reworded. **Answer:** C", "C"), ("Answer:\nB", "B"),
    ("Answer: none; option A is reworded", None), ("Answer: Option B", "B"), ("Ответ: вариант B", "B"),
])
def test_parse_choice_an_answer_label_naming_no_option_makes_the_reply_name_none(reply, letter):
    """``Answer:`` followed by no option letter (``none of them``, a Cyrillic ``В``) states an answer that
    is no option: the reply was read as the option it only discussed (``Option A - reworded. Answer:
    none of them`` as A)."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("**Answer**: B", "B"), ('{"answer": "B"}', "B"), ('```json\n{\n  "answer": "C"\n}\n```', "C"),
    ('{"answer": "B", "reason": "option A is reworded"}', "B"), ("{'answer': 'D'}", "D"),
    ('{"answer": "E"}', None), ('{"answer": null}', None), ('{"answer": ["B", "C"]}', None),
    ('{"answer": "B or C"}', None),
])
def test_parse_choice_an_answer_word_closed_by_marks_names_its_option(reply, letter):
    """``**Answer**: B`` and the JSON ``{"answer": "B"}`` name one option: they were invalid (counted as
    wrong in the BCQ). A JSON answer naming no option, or two, names none."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    # the answer forms reasoning models are told to use (DeepSeek-R1's "put your final answer within
    # \\boxed{}", answer tags), and short sentences naming one option
    (r"\boxed{B}", "B"), (r"$\boxed{\text{B}}$", "B"), (r"The answer is $\boxed{C}$.", "C"),
    (r"**Final Answer:** $\boxed{D}$", "D"), (r"Option A - reworded. Option C is the original, so $\boxed{C}$.", "C"),
    (r"\[ \boxed{\text{D}} \]", "D"), (r"The answer is \( \boxed{B} \).", "B"), ("\\[\n\\boxed{C}\n\\]", "C"),
    (r"\[\boxed{B}\] or \[\boxed{C}\]", None),
    ("<answer>B</answer>", "B"), ("<answer>\nC\n</answer>", "C"), ("Answer: <answer>A</answer>", "A"),
    ("It's B.", "B"), ("It is D", "D"), ("The correct option is (B).", "B"), ("Final answer: B", "B"),
    # they still name one option or none
    (r"\boxed{B} or \boxed{C}", None), (r"\boxed{none}", None), (r"\boxed{AB}", None), ("<answer>B or C</answer>", None),
    ("<answer>B</answer>\n<answer>C</answer>", None), ("It's B or C.", None), ("It's A good question", None),
])
def test_parse_choice_a_boxed_or_tagged_answer_names_its_option(reply, letter):
    """``\\boxed{B}``, ``$\\boxed{\\text{B}}$``, ``<answer>B</answer>`` and ``It's B.`` were invalid
    (counted as wrong in the BCQ, in the BDQ's N as no position)."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("B (70%), C (30%)", None), ("B: 0.7, C: 0.3", None), ("Answer: B (70%), C (30%)", None), ("B, then C", None),
    ("B, а может C", None), ("Ответ: B, а может C", None), ("D\nOtherwise A.", None),
    # a later letter with words after it discusses that option: still the one named
    ("B. C) is a rewording.", "B"), ("B. (A) and (C) are rewordings.", "B"), ("The answer is B, not C", "B"),
    ("D. Though A is close.", "D"), ("B, а не C", "B"),
])
def test_parse_choice_a_second_option_on_the_answers_line_is_a_hedge(reply, letter):
    """Two options weighed on the answer's line (``B (70%), C (30%)``, ``B, а может C``: "or maybe C")
    name no one option: they were read as the first."""
    assert qz.parse_choice(reply) == letter


@pytest.mark.parametrize("reply, letter", [
    ("(B)\n\n(C) is also possible", None), ("B\n\nC could also be right.", None), ("Answer: B. C works too.", None),
    ("The answer is B, but C is also possible.", None), ("B\n\n**C** is also plausible", None),
    ("B\nC is equally likely.", None), ("B\n\nA and C are also possible.", None), ("Ответ: B. C тоже возможен.", None),
    # another option discussed, not put forward: still the one named
    ("B\nC is a rewording too.", "B"), ("B\n\n(C) is also a rewording.", "B"), ("B\n\nA good option is also possible", "B"),
    ("B\n\nB is also the original wording", "B"), ("B\nC is also possibly reworded.", "B"),
])
def test_parse_choice_another_option_put_forward_as_well_is_a_hedge(reply, letter):
    """A reply that names an option, then says another is possible too (``(B)\n\n(C) is also
    possible``), hedges between two: it was read as B."""
    assert qz.parse_choice(reply) == letter


def test_parse_choice_of_a_reply_cut_off_before_its_answer_is_none():
    """Cut off at the token limit, a reply that only went through options stopped before its answer;
    one that states its answer, or starts with a bare letter, named it."""
    assert qz.parse_choice("Looking at each option:\n- Option A - reworded (uses", cut_off=True) is None
    assert qz.parse_choice("Answer: B. The wording of", cut_off=True) == "B"
    assert qz.parse_choice("B) the second", cut_off=True) == "B"


@pytest.mark.parametrize("reply, cut_off, letter", [
    ("B\n\nWait, actually the answer is", True, None), ("B\n\nWait, actually the answer is", False, None),
    ("B\n\nWait,", True, None), ("B\n\nOn second thought", True, None), ("Ответ: B\n\nХотя нет,", True, None),
    ("B\n\nThe answer is:", False, None), ("Answer: B\n\nHmm, let me reconsider", True, None),
    # a reconsideration before the answer, a word of one inside a sentence, or a finished reply: the answer stands
    ("Hmm, let me think. Option A is reworded. Answer: C. The wording", True, "C"),
    ("B) the second one is actually the original, as", True, "B"), ("B\n\nWait,", False, "B"),
    ("The answer is\n\nB", False, "B"), ("B. The answer is clear.", False, "B"),
])
def test_parse_choice_a_reply_ending_while_reconsidering_names_none(reply, cut_off, letter):
    """A reply cut off at the token limit right after reconsidering its answer (``B\n\nWait, actually
    the answer is``) was read as B: it may have been about to change it. It names none now (no answer,
    counted as cut off); so does any reply ending in an answer phrase that names nothing."""
    assert qz.parse_choice(reply, cut_off=cut_off) == letter


def test_a_stored_reply_cut_off_while_reconsidering_is_counted_cut_off_not_as_its_first_letter():
    """A stored quiz record made when such a reply was read as B is read again: no choice, cut off."""
    record = {"status": "ok", "outcome": "truncated", "choice": "B", "raw": "B\n\nWait, actually the answer is"}
    assert qz.recorded_choice(record) is None
    counts = qz.position_counts([qz.recorded_choice(record)], [record["outcome"]])
    assert (counts["B"], counts["cut_off"], counts["invalid"]) == (0, 1, 0)


@pytest.mark.parametrize("reply, letter", [
    ("D (none of the provided options)", "D"), ("Answer: D (none of the provided options)", "D"),
    ("B (the second one)", "B"), ("Ответ: B (второй)", "B"), ("Answer: B (option C, by contrast, is reworded)", "B"),
    ("B (or C)", None), ("B (and C)", None),
])
def test_parse_choice_a_letter_then_a_parenthesis_stands_as_an_option(reply, letter):
    """``D (none of the provided options)`` was invalid (counted as wrong), and ``Answer: B (option C,
    by contrast, is reworded)`` read as C, the option the parenthesis discussed."""
    assert qz.parse_choice(reply) == letter


def test_parse_perturbations_forms_and_malformed():
    ok = parse_perturbations("1. First one\n2) Second one\nOption 3: Third\n   continues here")
    assert ok == ["First one", "Second one", "Third continues here"]
    assert parse_perturbations("1. only\n2. two") is None
    assert parse_perturbations("") is None and parse_perturbations(None) is None


def test_perturbation_problems():
    q = "Назовите ЕГО, если ИКС — это X."
    assert placeholders(q) == ["X", "ЕГО", "ИКС"]
    good = ["Назовите ЕГО, когда ИКС — это X.", "Укажите ЕГО, если ИКС — это X.", "Назовите ЕГО, если ИКС — то X."]
    assert problems(q, good) == []
    assert problems(q, [q, *good[1:]]) == ["rewrite 1: equals the original"]
    assert problems(q, [good[0], good[0], good[1]]) == ["rewrite 2: same as rewrite 1"]
    assert any("ИКС" in p for p in problems(q, ["Назовите ЕГО, если игрек — это X.", *good[1:]]))
    assert problems(q, None) == ["no three numbered rewrites in the reply"]


def test_parse_continuation_drops_a_repeated_prefix():
    assert parse_continuation("Кот сидит на окне и смотрит", "Кот сидит") == "на окне и смотрит"
    assert parse_continuation('"и смотрит вниз"', "Кот сидит") == "и смотрит вниз"
    assert parse_continuation("   ", "x") is None


def test_cut_question_seeded_and_too_short():
    q = " ".join(f"w{i}" for i in range(20))
    a, b = cut_question(q, 0, "id1"), cut_question(q, 0, "id1")
    assert a == b and 6 <= a.position <= 14 and f"{a.prefix} {a.suffix}" == q
    assert cut_question("too short question", 0, "x") is None


def test_a_cut_that_leaves_no_word_to_score_is_not_in_the_completion_test():
    """A suffix of symbols only has no word ROUGE-L compares: even a word-for-word continuation scored
    0, and the item entered both modes' n with a gain of 0. Such a question is not cut, as a short one."""
    q = "Name the picture: ★ ☆ ✦ ✧ ✩ ✪ ✫ ✬ ✭ ✮"
    assert all(cut_question(q, seed, "x") is None for seed in range(5))
    words = "Name the picture by its ten parts: " + " ".join(f"w{i}" for i in range(10))
    assert cut_question(words, 0, "x") is not None


# ------------------------------------------------------------------ statistics


def test_accuracy_test_matches_scipy_binomial_and_wilson():
    res = qz.accuracy_test(420, 580)
    assert res["p"] == pytest.approx(sps.binomtest(420, 580, 0.25, alternative="greater").pvalue)
    ci = sps.binomtest(420, 580).proportion_ci(method="wilson")
    assert (res["low"], res["high"]) == pytest.approx((ci.low, ci.high))
    assert wilson_interval(7, 30) == pytest.approx(tuple(sps.binomtest(7, 30).proportion_ci(method="wilson")))


def test_bcq_table_repeats_then_a_test_over_items():
    import pandas as pd

    rows = []
    for rep, k in enumerate([7, 8, 9]):
        rows += [{"set": "target", "id": f"i{i}", "repeat": rep, "correct": "B",
                  "choice": "B" if i < k else ("A" if i < 11 else None)} for i in range(12)]
    t = qz.bcq_table(pd.DataFrame(rows), 3, min_items=10)
    assert t["repeat"].tolist() == ["1", "2", "3", "items"]
    # per repeat: k of 12 items; over items: i0-i6 right 3 of 3, i7 2 of 3 -> 8 of 12 items right in a majority
    assert t["k"].tolist() == [7, 8, 9, 8] and t["n"].tolist() == [12, 12, 12, 12]
    items = t.iloc[3]
    assert items["p"] == pytest.approx(sps.binomtest(8, 12, 0.25, alternative="greater").pvalue)
    assert items["mean_item_accuracy"] == pytest.approx(np.mean([7 / 12, 8 / 12, 9 / 12]))
    assert t["invalid"].tolist() == [1, 1, 1, 3]
    assert qz.bcq_table(pd.DataFrame(rows), 3).iloc[3]["test"] == "too few items (n = 12): not tested"


def test_paired_diff_bootstrap_is_seeded():
    x, y = np.array([0.9, 0.8, 0.7, 0.95]), np.array([0.1, 0.2, 0.1, 0.3])
    a, b = paired_diff(x, y, seed=1, key="k"), paired_diff(x, y, seed=1, key="k")
    assert a == b and a["diff"] == pytest.approx(np.mean(x - y)) and a["low"] > 0 and a["n"] == 4


def test_paired_diff_of_identical_differences_has_no_interval():
    """25 items whose guided and general continuations score alike: every gain is 0, every resample's
    mean is 0. The interval was [0.000, 0.000] (certainty from 25 items); a zero-width interval is not an
    interval, and the note says why. An ordinary interval is the resamples' percentile interval, as before."""
    from cresowlve_core.stats import bootstrap_means, percentile_interval, stable_seed

    same = paired_diff(np.full(25, 0.4), np.full(25, 0.4), seed=0, key="target")
    assert same["diff"] == 0.0 and same["n"] == 25
    assert np.isnan(same["low"]) and np.isnan(same["high"]) and "zero-width" in same["note"]
    x, y = np.linspace(0.2, 0.9, 25), np.linspace(0.1, 0.5, 25)[::-1]
    iv = paired_diff(x, y, n_boot=500, seed=3, key="k")
    assert (iv["low"], iv["high"]) == percentile_interval(bootstrap_means(x - y, 500, stable_seed(3, "paired", "k")))
    assert iv["note"] == ""


def test_bcq_repeats_of_one_item_are_distinct_questions():
    """Two repeats with the same layout were one question asked twice: the second came from the cache."""
    from cresowlve_core.contamination.quiz import bcq_repeats

    for item in range(200):
        layouts = bcq_repeats("orig", ["p1", "p2", "p3"], ["B", "C"], 3, 0, "ru", f"item{item}")
        assert len(set(layouts)) == 3
        assert all(opts[{"A": 0, "B": 1, "C": 2}[pos]] == "orig" and pos in ("B", "C") for opts, pos in layouts)


def test_a_refused_continuation_is_counted_withheld_not_empty():
    """In n (it continues nothing: ROUGE-L 0), but named as what it is."""
    import pandas as pd

    from cresowlve_core.contamination.completion import completion_table

    recs = pd.DataFrame([
        {"set": "target", "id": "a", "mode": "guided", "continuation": "and ends here", "rouge_l": 1.0,
         "prefix_match": True, "outcome": "answer"},
        {"set": "target", "id": "b", "mode": "guided", "continuation": None, "rouge_l": 0.0, "prefix_match": False,
         "outcome": "refused"},
        {"set": "target", "id": "c", "mode": "guided", "continuation": None, "rouge_l": 0.0, "prefix_match": False,
         "outcome": "answer"},
    ])
    row = completion_table(recs).iloc[0]
    assert (row["n"], row["empty"], row["withheld"]) == (3, 1, 1)
    assert row["rouge_l"] == pytest.approx(1 / 3)


def test_a_withheld_bcq_answer_is_no_wrong_answer():
    """i0: right twice, refused once; i1: refused every time. Before, i0 was right in 2 of 3 repeats
    and i1 in 0 of 3 (its refusals wrong choices); now i0 is right in 2 of its 2 answered repeats and
    i1, never answered, is in no test. An invalid reply (no option letter) still counts as wrong."""
    import pandas as pd

    rows = [{"set": "target", "id": "i0", "repeat": r, "correct": "B", "choice": c, "outcome": o}
            for r, (c, o) in enumerate([("B", "answer"), ("B", "answer"), (None, "refused")])]
    rows += [{"set": "target", "id": "i1", "repeat": r, "correct": "C", "choice": None, "outcome": "filtered"}
             for r in range(3)]
    rows += [{"set": "target", "id": "i2", "repeat": r, "correct": "A", "choice": c, "outcome": "answer"}
             for r, c in enumerate(["A", None, None])]
    items = qz.bcq_items(pd.DataFrame(rows))
    assert items[["id", "repeats", "right", "majority"]].values.tolist() == [["i0", 2, 2, True], ["i2", 3, 1, False]]
    t = qz.bcq_table(pd.DataFrame(rows), 3, min_items=1).set_index("repeat")
    assert (t.loc["3", "k"], t.loc["3", "n"], t.loc["3", "withheld"], t.loc["3", "invalid"]) == (0, 1, 2, 1)
    assert (t.loc["items", "k"], t.loc["items", "n"], t.loc["items", "withheld"]) == (1, 2, 4)


def test_a_bcq_reply_cut_off_before_naming_an_option_is_no_wrong_answer():
    """A reply stopped at the token limit before it named an option (a reasoning quiz-taker whose
    16-token budget went to thinking: empty text, ``truncated``) says nothing of what the model
    recognises: no answer, counted as ``cut_off``, never invalid (wrong). i0: right twice, cut off
    once; i1: cut off every time; a cut-off reply that names an option counts as that option (i2)."""
    import pandas as pd

    rows = [{"set": "target", "id": "i0", "repeat": r, "correct": "B", "choice": c, "outcome": o}
            for r, (c, o) in enumerate([("B", "answer"), ("B", "answer"), (None, "truncated")])]
    rows += [{"set": "target", "id": "i1", "repeat": r, "correct": "C", "choice": None, "outcome": "truncated"}
             for r in range(3)]
    rows += [{"set": "target", "id": "i2", "repeat": r, "correct": "A", "choice": "A", "outcome": o}
             for r, o in enumerate(["truncated", "answer", "answer"])]
    items = qz.bcq_items(pd.DataFrame(rows))
    assert items[["id", "repeats", "right", "majority"]].values.tolist() == [["i0", 2, 2, True], ["i2", 3, 3, True]]
    t = qz.bcq_table(pd.DataFrame(rows), 3, min_items=1).set_index("repeat")
    assert (t.loc["3", "k"], t.loc["3", "n"], t.loc["3", "cut_off"], t.loc["3", "invalid"]) == (1, 1, 2, 0)
    assert (t.loc["items", "k"], t.loc["items", "n"], t.loc["items", "cut_off"]) == (2, 2, 4)
    counts = qz.position_counts([r["choice"] for r in rows], [r["outcome"] for r in rows])
    assert (counts["cut_off"], counts["invalid"], counts["A"]) == (4, 0, 3)


def test_stored_quiz_replies_are_read_again_under_the_current_rule(tmp_path):
    """Records written before the article of "A good question" stopped being option A kept choice A:
    a resumed quiz (nothing asked again) counted them as answers. Their raw text is read again; the
    file is left as written, and a reply longer than the record keeps keeps its choice."""
    import asyncio

    from outcome_double import OutcomeModel

    from cresowlve_core.runtime import ClientOptions, RunDir

    units = [qz.QuizUnit("bcq", "target", "ru", f"q{i}", 0, ("a", "b", "c", qz.NONE_OPTION), "A") for i in range(3)]
    stored = [("A good question, but I cannot tell.", "A"), ("B) the second text", "B"),
              ("A " + "x" * qz.RAW_CHARS, "A")]
    lines = [json.dumps({"key": list(u.key), "status": "ok", "outcome": "answer", "refusal": None, "set": u.set,
                         "lang": u.lang, "id": u.id, "repeat": 0, "correct": "A", "choice": choice,
                         "is_correct": choice == "A", "raw": raw[:qz.RAW_CHARS], "usage": {}, "cost": 0.0})
             for u, (raw, choice) in zip(units, stored, strict=True)]
    run = tmp_path / "bcq"
    run.mkdir()
    (run / "bcq.jsonl").write_text("\n".join(lines) + "\n")
    model = OutcomeModel(lambda prompt: "A")
    res = asyncio.run(qz.aquiz("bcq", units, RunDir(run), model, ClientOptions(cache=False),  # type: ignore[arg-type]
                               progress=False))
    assert model.calls == []
    got = {k[1]: (r["choice"], r["is_correct"]) for k, r in res.records.items()}
    assert got == {"q0": (None, False), "q1": ("B", False), "q2": ("A", True)}
    assert json.loads((run / "summary.json").read_text())["n_invalid"] == 1
    assert (run / "bcq.jsonl").read_text() == "\n".join(lines) + "\n"


def test_a_continuation_cut_off_before_any_text_is_no_answer():
    """A continuation stopped at the token limit before any text (a reasoning model's budget spent
    thinking) continued nothing the model chose: its item has no guided − general gain, and the table
    counts it as ``cut_off``, not ``empty``. A cut-off continuation with text is scored as that text."""
    import pandas as pd

    from cresowlve_core.contamination.completion import completion_table, guided_vs_general

    def rec(item, mode, cont, rouge, outcome="answer"):
        return {"set": "target", "id": item, "mode": mode, "continuation": cont, "rouge_l": rouge,
                "prefix_match": rouge == 1.0, "outcome": outcome}

    recs = pd.DataFrame([rec("a", "guided", "ends here", 1.0), rec("a", "general", "and so on", 0.0),
                         rec("b", "guided", None, 0.0, "truncated"), rec("b", "general", "and so on", 0.0),
                         rec("c", "guided", "ends", 0.5, "truncated"), rec("c", "general", "and so on", 0.0)])
    gain = guided_vs_general(recs, "target", n_boot=50)
    assert (gain["n"], gain["diff"]) == (2, pytest.approx(0.75))
    row = completion_table(recs).set_index("mode").loc["guided"]
    assert (row["n"], row["empty"], row["cut_off"]) == (3, 0, 1)
