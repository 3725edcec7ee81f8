"""Parsers and validators of the construction steps' model output: never a guess."""

from __future__ import annotations

import pytest

from cresowlve_core.construction import parsers as P
from cresowlve_core.construction.precheck import handout_markers
from cresowlve_core.construction.vocab import CONCEPTS, REASONING_TYPES


@pytest.mark.parametrize("text, yes, reason", [
    ("REASON: a picture is shown\nANSWER: YES", True, "a picture is shown"),
    ("**REASON:** fine\n**ANSWER:** no.", False, "fine"),
    ("ANSWER: YES\nANSWER: NO", False, None),  # the last line wins
])
def test_yes_no(text: str, yes: bool, reason: str | None) -> None:
    v = P.parse_yes_no(text)
    assert v is not None and v.yes is yes and v.reason == reason


@pytest.mark.parametrize("text", ["", None, "YES", "ANSWER: maybe", "ANSWER:", "REASON: x"])
def test_yes_no_unparseable(text: str | None) -> None:
    assert P.parse_yes_no(text) is None


@pytest.mark.parametrize("text", [
    "REASON: <one sentence>\nANSWER: YES or NO",  # the prompt's reply format written back
    "ANSWER: yes/no", "ANSWER: Да или нет",
])
def test_the_prompts_choice_written_back_is_no_yes_no_verdict(text: str) -> None:
    # read by its first word, "YES or NO" removed every item as needing external material
    assert P.parse_yes_no(text) is None


def test_the_prompts_placeholders_written_back_are_no_annotation() -> None:
    # "TYPE: creative or factual" was labelled creative; "LABELS: ..." read as "none applies"
    assert P.parse_reasoning_type("TYPE: creative or factual") is None
    assert P.parse_reasoning_type("TYPE: factual/creative") is None
    assert P.parse_reasoning_type("TYPE: creative, not factual") == "creative"
    for line in ("LABELS: ...", "LABELS: …", "LABELS:", "LABELS: ..., ..."):
        assert P.parse_label_list(line, "LABELS") is None, line
    assert P.parse_label_list("LABELS: -", "LABELS") == [] and P.parse_label_list("LABELS: metaphor, ...", "LABELS") == [
        "metaphor"]


def test_translation_tags_missing_empty_repeated() -> None:
    t = P.parse_translation("<question>Name IT.</question><question>again</question><answer></answer>"
                            "<explanation>unclosed", ["question", "answer", "explanation", "other_answers"])
    assert t.fields == {"question": "Name IT.", "answer": None, "explanation": None, "other_answers": None}
    assert t.flags == ["repeated_tag:question", "empty_tag:answer", "missing_tag:explanation",
                       "missing_tag:other_answers"]
    assert not t.complete


def test_translation_fields_absent_in_source_are_not_flagged() -> None:
    t = P.parse_translation("<QUESTION>Q?</QUESTION><answer>A</answer>", ["question", "answer"])
    assert t.complete and t.flags == [] and t.fields["question"] == "Q?"


def test_the_reply_formats_tags_written_back_are_no_translation() -> None:
    # "<question>...</question>" was a complete translation: "..." exported as the English question and answer
    t = P.parse_translation("<question>...</question>\n<answer>...</answer>\n<explanation>…</explanation>",
                            ["question", "answer", "explanation"])
    assert t.fields == {"question": None, "answer": None, "explanation": None, "other_answers": None}
    assert t.flags == ["empty_tag:question", "empty_tag:answer", "empty_tag:explanation"] and not t.complete
    few = P.parse_fewshot_translation({"question": " ...", "answer": " Mars"}, ["question", "answer"])
    assert few.fields["question"] is None and few.flags == ["empty_field:question"] and not few.complete


def test_a_question_or_answer_an_eval_would_refuse_is_no_translation() -> None:
    # a control character in the English question was exported: the build exited 0, and then
    # `cresowlve eval --items export/creative/en/test.parquet` refused the whole file
    t = P.parse_translation("<question>Name IT,\x07 X.</question><answer>Mars</answer>"
                            "<explanation>A bell \x07 here is not checked by an eval</explanation>",
                            ["question", "answer", "explanation"])
    assert t.fields["question"] is None and t.fields["explanation"] is not None and not t.complete
    assert t.flags == ["invalid_text:question"]
    few = P.parse_fewshot_translation({"question": " Name IT.", "answer": " Ma\x1b[31mrs"}, ["question", "answer"])
    assert few.fields["answer"] is None and few.flags == ["invalid_text:answer"]


def test_a_tag_holding_the_russian_copied_back_is_no_translation() -> None:
    # the chat translation took any tag body as English: the Russian question and answer, copied back,
    # were exported as the item's English view (the few-shot translation already refused them)
    t = P.parse_translation("<question>Римляне назвали ЕЁ в честь бога войны. Назовите ЕЁ.</question>"
                            "<answer>Марс</answer><other_answers>Mars, the planet Марс</other_answers>",
                            ["question", "answer", "other_answers"])
    assert t.fields == {"question": None, "answer": None, "explanation": None, "other_answers": "Mars, the planet Марс"}
    assert t.flags == ["untranslated:question", "untranslated:answer"] and not t.complete
    kept = P.parse_translation("<question>What does the word «дом» mean in the name of this house?</question>"
                               "<answer>Home</answer>", ["question", "answer"])
    assert kept.complete and kept.flags == []


def test_placeholders_lost_in_translation() -> None:
    ru = "После смерти отца ИКСОМ был провозглашен Ричард. Назовите ЕГО. Это было в СССР."
    assert P.lost_placeholders(ru, "Richard was proclaimed X. Name HIM. It was in the USSR.") == []
    assert P.lost_placeholders(ru, "Richard was proclaimed Lord Protector. Name him. It was in the USSR.") == [
        "X:ИКСОМ", "pronoun:ЕГО"]
    assert P.lost_placeholders("ИГРЕК и ИКС", "Y and X") == []
    assert P.lost_placeholders("Назовите ЕВУ.", "Name Eve.") == ["word:ЕВУ"]
    assert P.placeholder_kinds("Обычный текст без замен") == {}


def test_vocab_check_keeps_out_of_vocabulary_labels() -> None:
    values = P.parse_label_list("LABELS: Metaphor, lateral-thinking, Banana, metaphor", "LABELS")
    assert P.check_vocab(values, CONCEPTS) == (["metaphor", "lateral thinking"], ["banana"])
    assert P.parse_label_list("LABELS: none", "LABELS") == []
    assert P.parse_label_list("metaphor, pun", "LABELS") is None


@pytest.mark.parametrize("text, value", [("TYPE: Creative.", "creative"), ("TYPE: factual", "factual"),
                                         ("TYPE: mixed reasoning", "mixed"), ("creative", None), ("TYPE:", None)])
def test_reasoning_type(text: str, value: str | None) -> None:
    assert P.parse_reasoning_type(text) == value
    if value == "mixed":
        assert P.check_vocab([value], REASONING_TYPES) == ([], ["mixed"])


def test_cultures_normalised_and_non_cultures_flagged() -> None:
    assert P.check_cultures(["Russian culture", "ENGLISH", "general", "Klingon", "russian"]) == (
        ["russian", "english", "klingon"], ["general"], ["klingon"])


def test_facts_parsed_and_checked() -> None:
    facts = P.parse_facts("Sure.\nFACTS:\n1. What replaced mechanical watches?\n- Who is [Oliver] Cromwell?\n"
                          "2) A statement\n\nTrailing prose")
    assert facts == ["What replaced mechanical watches?", "Who is [Oliver] Cromwell?", "A statement"]
    ok, revealing, not_q = P.check_facts(facts, "[Richard] Cromwell")
    assert ok == ["What replaced mechanical watches?"] and revealing == ["Who is [Oliver] Cromwell?"]
    assert not_q == ["A statement"]
    assert P.parse_facts("no header\n1. x?") is None and P.parse_facts("FACTS:\nnothing listed") is None


def test_parsers_are_capped() -> None:
    assert P.parse_yes_no("x" * 100_000 + "\nANSWER: YES") is None  # beyond MAX_TEXT: ignored, not guessed


def test_handout_precheck() -> None:
    assert handout_markers("Перед вами фрагмент постера.") == ["pered_vami"]
    assert handout_markers("фрагмент которого мы вам раздали") == ["razdali"]
    assert set(handout_markers("Вашему вниманию (pic: 1.jpg) раздаточный материал")) == {
        "pic", "razdatka", "vashemu_vnimaniyu"}
    assert handout_markers("Обычный вопрос", handout="картинка") == ["handout_field"]
    assert handout_markers("Обычный вопрос без раздачи?") == []
