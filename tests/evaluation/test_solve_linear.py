"""extract_answer on adversarial model output: linear work, bounded input.

Speed targets live in ``bench/parsers.py``; here the inputs that took tens of seconds before
(40,000 blank lines, 8,000 unclosed tags, long runs of spaces) must give the right answer, and
the timeout only turns a regression into a failure instead of a hang.
"""

from __future__ import annotations

import pytest

from cresowlve_core.evaluation.solve import MAX_PARSE_CHARS, extract_answer

pytestmark = pytest.mark.timeout(30)


def test_forty_thousand_blank_lines():
    text = "I think it is\n" + "\n" * 40_000 + "Copernicus"
    assert extract_answer(text) == ("I think it is Copernicus", "fallback_whole_text")


def test_forty_thousand_whitespace_lines_then_an_answer_line():
    text = "reasoning\n" + " \t \n" * 40_000 + "Answer: Melody"
    assert extract_answer(text) == ("Melody", "answer_line")


def test_eight_thousand_unclosed_tags():
    text = "<Answer>" * 8_000 + " Venus"
    assert extract_answer(text) == ("Venus", "unclosed_answer_tag")
    text = "<answer>x " * 8_000
    assert extract_answer(text) == ("x", "unclosed_answer_tag")


def test_many_closed_tags_takes_the_last():
    text = "".join(f"<Answer>a{i}</Answer>\n" for i in range(20_000))
    assert extract_answer(text) == ("a19999", "answer_tag")


def test_answer_line_followed_by_long_run_of_spaces():
    assert extract_answer("Answer: Europe" + " " * 100_000 + "\n") == ("Europe", "answer_line")
    assert extract_answer("Answer:" + " " * 100_000 + "x") == ("x", "answer_line")


def test_only_the_tail_is_parsed():
    """A tag further back than MAX_PARSE_CHARS is not looked for: the cap bounds the work."""
    early = "<Answer>Venus</Answer>"
    text = early + "z" * MAX_PARSE_CHARS
    answer, how = extract_answer(text)
    assert how == "fallback_whole_text"
    assert answer.startswith(early)  # the prediction is still the whole text, nothing dropped
    assert extract_answer("z" * MAX_PARSE_CHARS + early) == ("Venus", "answer_tag")


def test_empty_answer_line_falls_back_to_an_earlier_one():
    assert extract_answer("Answer: Melody\nAnswer:   ") == ("Melody", "answer_line")


def test_case_changing_characters_do_not_shift_tag_positions():
    # "İ" lowers to two characters; the tag must still be cut at the right place
    assert extract_answer("İİİ <ANSWER>İstanbul</ANSWER>") == ("İstanbul", "answer_tag")
