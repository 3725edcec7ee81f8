"""CREATE formulas on hand-computed cases: distance transform, judges' scores, greedy, discounts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from create_fakes import one_hot

from cresowlve_core.create.distance import (
    distance_matrix,
    path_text,
    transform_distance,
)
from cresowlve_core.create.judges import (
    is_factual,
    parse_factuality,
    parse_size_line,
    parse_specificity,
    path_strength,
    specificity_from_size,
)
from cresowlve_core.create.utility import (
    creative_utility,
    discounted_sum,
    distinctiveness,
    greedy_order,
    utility_curve,
)

# --------------------------------------------------------------------------- distance


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.0, 0.0),
        (0.35, 0.5 * (1 - math.cos(math.pi / 4))),  # (0.35/0.7)^2 = 1/4 -> 0.146447
        (0.7, 1.0),  # formula branch: cos(pi) = -1
        (0.71, 1.0),  # flat branch
        (1.0, 1.0),
        (1.2, 0.5 * (1 - math.cos(math.pi * (1.2 / 0.7) ** 2))),  # formula branch again, 0.990780
    ],
)
def test_transform_distance(x, expected):
    assert transform_distance(x) == pytest.approx(expected, abs=1e-12)


def test_transform_hand_values_and_clip():
    assert transform_distance(0.35) == pytest.approx(0.1464466, abs=1e-6)
    assert transform_distance(1.2) == pytest.approx(0.9907796, abs=1e-6)
    xs = np.linspace(0, 2, 401)
    assert np.all(np.asarray(transform_distance(xs)) <= 1.0)


def test_path_text_drops_last_triple_and_lowercases():
    path = [["Chris Nolan", "Sibling", "Jonathan Nolan"], ["Jonathan Nolan", "wrote", "The Prestige"], ["The Prestige", "x", "Y"]]
    assert path_text(path) == " [sibling] jonathan nolan | jonathan nolan [wrote] the prestige"
    assert path_text([["a", "r", "b"]]) == ""



def test_distance_matrix_diagonal_is_one_and_duplicates_are_zero():
    a = [["a", "r", "b"], ["b", "s", "c"]]
    b = [["a", "q", "d"], ["d", "s", "c"]]
    d = distance_matrix([a, a, b], embedder=one_hot)
    np.testing.assert_allclose(d, [[1, 0, 1], [0, 1, 1], [1, 1, 1]], atol=1e-12)


# --------------------------------------------------------------------------- judges


@pytest.mark.parametrize(
    ("size", "score"),
    [(1, 5), (10, 5), (11, 4), (99, 4), (100, 3), (499, 3), (500, 2), (4999, 2), (5000, 1), (10**9, 1), (None, 0)],
)
def test_specificity_from_size(size, score):
    assert specificity_from_size(size) == score


def test_parse_specificity():
    text = '```json\n[{"explanation": "e", "judgment": 7}, {"explanation": "e", "judgment": "1,200"}, {"judgment": "many"}]\n```'
    v = parse_specificity(text, 3)
    assert v.sizes == [7, 1200, None] and v.scores == [5, 2, 0] and "some_unparseable" in v.flags
    short = parse_specificity('[{"judgment": 3}]', 2)
    assert short.scores == [5, 0] and any(f.startswith("length_mismatch") for f in short.flags)
    junk = parse_specificity("no idea", 2)
    assert junk.scores == [0, 0] and "unparseable" in junk.flags


def test_a_class_size_is_read_with_its_magnitude_and_a_size_that_is_no_count_stays_unscored():
    """"1e6" or "2 million" is a large class (score 1), not the digits before its magnitude (1 or 2:
    score 5, the most specific); NaN, infinity and a negative number are no class size: unscored
    (score 0, flagged), not the largest or the smallest class."""
    sizes = ['"1e6"', '"2 million"', '"10^6"', '"1.5 x 10^4"', '"about 3,000 people"', "NaN", "-3", "Infinity",
             "1" + "0" * 400]
    v = parse_specificity("[" + ", ".join(f'{{"judgment": {s}}}' for s in sizes) + "]", len(sizes))
    assert v.sizes == [1e6, 2e6, 1e6, 15000, 3000, None, None, None, None]
    assert v.scores == [1, 1, 1, 1, 2, 0, 0, 0, 0] and "some_unparseable" in v.flags
    # the fallback for a list that does not parse reads magnitudes the same way
    broken = parse_specificity('[{"judgment": 1e6, "explanation": "a "quoted" word"}, {"judgment": "3 thousand"}', 2)
    assert "regex_fallback" in broken.flags and broken.sizes == [1e6, 3000]
    # a base model's line too
    assert [parse_size_line(t) for t in (" 2 million", " 1e5", " 12")] == [2e6, 1e5, 12]


def test_a_negative_class_size_written_as_a_string_stays_unscored_not_read_as_its_digits():
    """A judgment "-50" (or with U+2212, "−50") was read as a class of 50 members (score 4), scored and
    unflagged, while the number -50 was unscored: a negative size is no count, written either way.
    A hyphen between two numbers or after a word is no sign ("COVID-19")."""
    v = parse_specificity('[{"judgment": "-50"}, {"judgment": "−3000"}, {"judgment": "about -7 people"}, '
                          '{"judgment": "COVID-19 patients: 19"}]', 4)
    assert v.sizes == [None, None, None, 19] and v.scores == [0, 0, 0, 4] and "some_unparseable" in v.flags
    assert [parse_size_line(t) for t in (" -5", " −12", " 12")] == [None, None, 12]


def test_a_power_written_in_superscript_digits_is_read_as_a_power():
    """"10⁶" (a million members, score 1) was read as 10 (score 5, the most specific), the superscript
    dropped; "2×10⁵" named two sizes and was unscored. Both are read as "10^6" and "2 x 10^5" are."""
    v = parse_specificity('[{"judgment": "10⁶"}, {"judgment": "about 2×10⁵ people"}, {"judgment": "10²"}]', 3)
    assert v.sizes == [1e6, 2e5, 100] and v.scores == [1, 1, 3]
    assert parse_size_line(" 10⁶") == 1e6


def test_a_class_size_with_a_magnitude_letter_is_read_with_it():
    """"10k" or "2M" is a large class, not one of 10 or 2 members (score 5, the most specific)."""
    v = parse_specificity('[{"judgment": "10k"}, {"judgment": "~2M people"}, {"judgment": "1.5bn"}, '
                          '{"judgment": "10km"}]', 4)
    assert v.sizes == [1e4, 2e6, 1.5e9, 10] and v.scores == [1, 1, 1, 5]
    assert parse_size_line(" 10K") == 1e4


def test_a_rating_in_place_of_a_class_size_stays_unscored_not_read_as_its_numerator():
    """A judge writing a score ("7/10", "4 out of 5") instead of the class size the prompt asks for
    gave no size: unscored (score 0, flagged), not a class of 7 or 4 members (score 5, the most specific)."""
    v = parse_specificity('[{"judgment": "7/10"}, {"judgment": "4 out of 5"}, {"judgment": "7.5 / 10"}, '
                          '{"judgment": "about 3,000"}]', 4)
    assert v.sizes == [None, None, None, 3000] and v.scores == [0, 0, 0, 2] and "some_unparseable" in v.flags
    # the fallback for a list that does not parse, and a base model's line, read it the same way
    broken = parse_specificity('[{"judgment": "7/10", "explanation": "a "quoted" word"}, {"judgment": 40}', 2)
    assert "regex_fallback" in broken.flags and broken.sizes == [None, 40]
    assert parse_size_line(" 8/10") is None


def test_a_judgment_writing_two_class_sizes_stays_unscored_not_read_as_the_first():
    """The prompt asks for the size of the LARGER class as one integer. A judgment naming both
    ("Class A: 5, Class B: 1200") or a range ("between 100 and 500") was read as its first number
    (5: score 5, the most specific, where the larger class scores 2): it names no one size, so it is
    unscored. One size written with its words or magnitude still reads."""
    v = parse_specificity('[{"judgment": "Class A: 5, Class B: 1200"}, {"judgment": "between 100 and 500"}, '
                          '{"judgment": "1200 (Class B)"}, {"judgment": "about 2 million people"}]', 4)
    assert v.sizes == [None, None, 1200, 2e6] and v.scores == [0, 0, 2, 1] and "some_unparseable" in v.flags


def test_a_specificity_fallback_reads_each_judgment_key_not_the_word_in_an_explanation():
    """A specificity list that is not valid JSON (an unescaped quote) is read key by key. The word
    "judgment:" in an explanation added a size in front ([5, 1200] for [1200, 40]), and a key with
    no number ("many") was skipped, so the next triple's size moved up to it ([40, None] for [None, 40])."""
    text = ('[{"explanation": "In my judgment: 5 people share class "A", class B is larger", "judgment": 1200}, '
            '{"explanation": "e", "judgment": 40}]')
    v = parse_specificity(text, 2)
    assert v.sizes == [1200, 40] and v.flags == ["regex_fallback"]
    many = parse_specificity('[{"explanation": "a "b"", "judgment": "many"}, {"judgment": 40}]', 2)
    assert many.sizes == [None, 40] and many.scores == [0, 4] and "some_unparseable" in many.flags


def test_parse_factuality():
    v = parse_factuality('{"explanation": "x", "judgments": ["not hallucinated", "hallucinated", "Not Hallucinated"]}', 3)
    assert v.scores == [1.0, 0.0, 1.0] and v.flags == []
    bad = parse_factuality("garbage", 2)
    assert bad.scores == [0.0, 0.0] and "unparseable" in bad.flags
    loose = parse_factuality('judgments: "hallucinated", "not hallucinated"', 2)
    assert loose.scores == [0.0, 1.0] and "regex_fallback" in loose.flags


def test_factuality_verdicts_are_read_from_the_judgments_not_the_explanation():
    """Under a singular "judgment" key, the explanation's "hallucinated" was read as the first
    triple's verdict and the verdicts shifted ([0, 1] for [1, 0], both counted as scored); one
    object per triple (the specificity judge's shape) was unscored, so counted hallucinated."""
    prose = "None of these triples is hallucinated."
    singular = parse_factuality(f'{{"explanation": "{prose}", "judgment": ["not hallucinated", "hallucinated"]}}', 2)
    assert singular.verdicts == [1.0, 0.0] and singular.flags == []
    cut = parse_factuality(f'{{"explanation": "{prose}", "judgment": ["not hallucinated", "hallucinated"]', 2)
    assert cut.verdicts == [1.0, 0.0] and cut.flags == ["regex_fallback"]
    objects = parse_factuality('{"explanation": "e", "judgments": [{"triple": 1, "judgment": "not hallucinated"}, '
                               '{"triple": 2, "judgment": "hallucinated"}]}', 2)
    assert objects.verdicts == [1.0, 0.0] and objects.flags == []


def test_a_factuality_fallback_reads_after_the_judgments_key_not_the_word_judgment_in_the_explanation():
    """A factuality answer that is not valid JSON (an unescaped quote in its explanation) is read after
    its "judgments" key. It was read after the first word "judgment", so an explanation saying "in my
    judgment the second triple is hallucinated" added a verdict in front: [0, 1, 0] for [1, 0, 1]."""
    text = ('{"explanation": "In my judgment the second triple is hallucinated: "Prize" has no such winner.", '
            '"judgments": ["not hallucinated", "hallucinated", "not hallucinated"]}')
    v = parse_factuality(text, 3)
    assert v.verdicts == [1.0, 0.0, 1.0] and v.flags == ["regex_fallback"]
    objects = parse_factuality('{"explanation": "my "best" judgment", "judgments": [{"triple": 1, "judgment": '
                               '"not hallucinated"}, {"triple": 2, "judgment": "hallucinated"}]}', 2)
    assert objects.verdicts == [1.0, 0.0] and objects.flags == ["regex_fallback"]


def test_a_bare_true_false_or_number_is_no_factuality_verdict():
    """The judge is asked "hallucinated or not": a bare ``true``/``false``/``1``/``0`` says neither, so
    it is unscored (flagged), not read one way or the other. Before: ``[true, false]`` read [0, 1]
    and ``["true", "false"]`` or ``[1, 0]`` read [1, 0], all counted as scored verdicts."""
    for judgments in ("[true, false]", '["true", "false"]', "[1, 0]", "[1.0, 0.0]"):
        v = parse_factuality(f'{{"explanation": "e", "judgments": {judgments}}}', 2)
        assert v.verdicts == [None, None] and v.scores == [0.0, 0.0] and v.flags == ["some_unparseable"], judgments
    named = parse_factuality('{"judgments": [{"hallucinated": true}, {"hallucinated": false}]}', 2)
    assert named.verdicts == [0.0, 1.0] and named.flags == []
    words = parse_factuality('{"judgments": ["factual", "incorrect", "correct"]}', 3)
    assert words.verdicts == [1.0, 0.0, 1.0] and words.flags == []


def test_path_strength_reference_and_paper():
    assert path_strength([3, 5]) == 3
    assert path_strength([5, 2, 1]) == 2  # the last (constraint) triple is excluded
    assert path_strength([5, 2, 1], scope="paper") == 1
    assert path_strength([4]) is None  # one-triple path: no strength
    assert path_strength([4], scope="paper") == 4


def test_is_factual_threshold():
    assert is_factual([1, 1, 1]) and not is_factual([1, 1, 0])
    assert is_factual([1, 1, 0], 0.6) and not is_factual([1, 1, 0], 0.7)
    assert not is_factual([], 0.0)


# --------------------------------------------------------------------------- greedy and utility

D3 = np.array([[1.0, 0.5, 1.0], [0.5, 1.0, 0.2], [1.0, 0.2, 1.0]])


def test_greedy_hand_case():
    g = greedy_order([3, 5, 5], D3)
    # first: strength 5, lowest index (1). Then 0: 0.5*3=1.5 beats 2: 0.2*5=1.0. Then 2: min(0.2,1.0)*5 = 1.0
    assert g.order == [1, 0, 2]
    assert g.marginals == pytest.approx([5.0, 1.5, 1.0])


def test_greedy_ties_go_to_lowest_index():
    ones = np.ones((3, 3))
    g = greedy_order([4, 4, 4], ones)
    assert g.order == [0, 1, 2] and g.marginals == [4.0, 4.0, 4.0]
    d = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.5], [1.0, 0.5, 1.0]])
    g = greedy_order([2, 4, 4], d)
    # first = 1; then 0 (1.0*2 = 2) ties 2 (0.5*4 = 2): the strictly-greater rule keeps 0
    assert g.order == [1, 0, 2] and g.marginals == pytest.approx([4.0, 2.0, 2.0])


def test_discount_modes():
    m = [5.0, 1.5, 1.0]
    assert discounted_sum(m, 0.9, "reference") == pytest.approx(5 + 1.5 + 1.0 * 0.9)  # 7.4
    assert discounted_sum(m, 0.9, "paper") == pytest.approx(5 + 1.5 * 0.9 + 1.0 * 0.81)  # 7.16
    assert discounted_sum(m, 0.0, "reference") == pytest.approx(6.5)
    assert discounted_sum(m, 0.0, "paper") == pytest.approx(5.0)
    assert discounted_sum([], 0.9) == 0.0
    with pytest.raises(ValueError):
        discounted_sum(m, 0.9, "other")  # type: ignore[arg-type]


PATHS = [[["a", f"r{i}", "x"], ["x", "rel", "b"]] for i in range(3)]
SPEC = [[3, 5], [5, 1], [5, 5]]  # strengths 3, 5, 5 (last triple excluded)
FACT = [[1, 1], [1, 1], [1, 1]]


@pytest.mark.parametrize("patience", [1.5, -0.5, math.nan, "0.9", True])
def test_a_patience_outside_0_to_1_is_refused_not_turned_into_a_utility(patience):
    """A patience above 1 weighed later paths more (7.4 at 0.9 became 8.0 at 1.5), a negative one
    alternated their signs, NaN made the utility NaN: each is refused naming the value."""
    with pytest.raises(ValueError, match=r"patience must be a fraction 0\.\.1, got "):
        creative_utility(PATHS, SPEC, FACT, [1, 1, 1], patience, distances=D3)


@pytest.mark.parametrize("threshold", [2.0, -1.0, math.nan])
def test_a_factuality_threshold_outside_0_to_1_is_refused(threshold):
    """Above 1 no path was factual (every utility 0), below 0 every path was, as if judged so."""
    with pytest.raises(ValueError, match=r"factuality_threshold must be a fraction 0\.\.1, got "):
        creative_utility(PATHS, SPEC, FACT, [1, 1, 1], 0.9, threshold, distances=D3)


def test_creative_utility_hand_case():
    assert creative_utility(PATHS, SPEC, FACT, [1, 1, 1], distances=D3) == pytest.approx(7.4)
    assert creative_utility(PATHS, SPEC, FACT, [1, 1, 1], discount="paper", distances=D3) == pytest.approx(7.16)
    # paper strength scope: strengths 3, 1, 5 -> first 2 (5); then 0 (d=1.0 * 3 = 3 beats 0.2 * 1); then 1: min(0.2, 0.5) * 1
    assert creative_utility(PATHS, SPEC, FACT, [1, 1, 1], distances=D3, strength_scope="paper") == pytest.approx(5 + 3 + 0.2 * 0.9)


def test_filters_invalid_then_unfactual():
    # path 1 invalid, path 2 not fully factual: only path 0 remains -> utility = its strength
    fact = [[1, 1], [1, 1], [1, 0]]
    assert creative_utility(PATHS, SPEC, fact, [1, 0, 1], distances=D3) == pytest.approx(3.0)
    # with a lenient threshold path 2 is back: order 2 (5), then 0: d=1*3
    assert creative_utility(PATHS, SPEC, fact, [1, 0, 1], factuality_threshold=0.5, distances=D3) == pytest.approx(8.0)


def test_empty_set_is_zero():
    assert creative_utility([], [], [], []) == 0.0
    assert creative_utility(PATHS, SPEC, FACT, [0, 0, 0]) == 0.0  # all invalid: no embedding needed
    assert creative_utility(PATHS, SPEC, [[0, 1]] * 3, [1, 1, 1]) == 0.0  # none factual
    assert creative_utility(PATHS, SPEC, FACT, [0, 0, 0], discount="paper") == 0.0


def test_one_triple_path_is_dropped_not_fatal():
    paths = [[["a", "rel", "b"]], PATHS[0]]
    spec, fact = [[5], [3, 5]], [[1], [1, 1]]
    assert creative_utility(paths, spec, fact, [1, 1], embedder=one_hot) == pytest.approx(3.0)
    assert creative_utility(paths[:1], spec[:1], fact[:1], [1], embedder=one_hot) == 0.0


def test_embedder_path_matches_precomputed_distances_and_is_deterministic():
    # one-hot embeddings of distinct texts: cosine distance 1 -> d = 1 everywhere
    u1 = creative_utility(PATHS, SPEC, FACT, [1, 1, 1], embedder=one_hot)
    u2 = creative_utility(PATHS, SPEC, FACT, [1, 1, 1], distances=np.ones((3, 3)))
    assert u1 == u2 == pytest.approx(5 + 5 + 3 * 0.9)
    assert creative_utility(PATHS, SPEC, FACT, [1, 1, 1], embedder=one_hot) == u1


def _nan_row(texts):
    v = one_hot(texts)
    v[1] = np.nan
    return v


@pytest.mark.parametrize(
    ("embedder", "problem"),
    [
        (_nan_row, r"1 of 3 rows with NaN or infinity \(the first: row 1\)"),  # was a utility of NaN
        (lambda texts: np.zeros((len(texts), 4)), r"3 of 3 rows that are not L2-normalised"),  # every distance 1
        (lambda texts: np.ones((len(texts), 4)), r"not L2-normalised \(the first: row 0, length 2\)"),
        (lambda texts: one_hot(texts + ["extra"]), r"shape \(4, 4\) for 3 texts"),  # rows shifted onto other paths
    ],
)
def test_an_embedder_row_that_is_no_unit_vector_is_refused_not_turned_into_a_distance(embedder, problem):
    with pytest.raises(ValueError, match=problem):
        creative_utility(PATHS, SPEC, FACT, [1, 1, 1], embedder=embedder)
    with pytest.raises(ValueError, match=problem):
        distinctiveness(PATHS[:1], PATHS[1:], embedder=embedder)


def test_utility_curve_is_monotone_and_matches_endpoints():
    curve = utility_curve(PATHS, SPEC, FACT, [1, 1, 1], distances=D3)
    ps = [p for p, _ in curve]
    us = [u for _, u in curve]
    assert ps[0] == 0.0 and ps[-1] == 1.0
    assert all(b >= a for a, b in zip(us, us[1:]))
    assert us[-1] == pytest.approx(5 + 1.5 + 1.0)


def test_per_path_lists_must_line_up():
    with pytest.raises(ValueError):
        creative_utility(PATHS, SPEC[:2], FACT, [1, 1, 1], distances=D3)


def test_distinctiveness_min_to_population_max_over_set():
    d = np.array([[0.2, 0.9], [0.6, 0.4]])
    nu = distinctiveness([PATHS[0], PATHS[1]], [PATHS[2], PATHS[2]], distances=d)
    assert nu.per_path == pytest.approx([0.2, 0.4]) and nu.value == pytest.approx(0.4)
    assert distinctiveness([], [PATHS[0]]).value is None
    assert distinctiveness([PATHS[0]], []).value == 1.0
