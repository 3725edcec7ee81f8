"""Stage 3: the verbalisation parser, leak detection and alias-aware exact match."""

from __future__ import annotations

from cresowlve_core.sources.kg import KnowledgeGraph
from cresowlve_core.synthetic.answers import accepted_names, answer_names, find_leaks, match_answer
from cresowlve_core.synthetic.verbalise import parse_verbalisation

GOOD = ("<literal>X received A and B. Who is X?</literal>\n<obfuscated>HE masks himself. Who is HE?</obfuscated>"
        "<explanation>He is an undercover journalist.</explanation>")


def test_parser_takes_the_three_tags():
    v = parse_verbalisation("noise " + GOOD)
    assert v.literal == "X received A and B. Who is X?" and v.placeholders == ("HE",)
    assert v.explanation == "He is an undercover journalist."
    # the last complete block wins (an echoed example comes first)
    v2 = parse_verbalisation("<literal>old</literal>" + GOOD.replace("X received", "Y got"))
    assert v2.literal.startswith("Y got")


def test_parser_returns_none_on_malformed_output():
    assert parse_verbalisation(None) is None and parse_verbalisation("") is None
    assert parse_verbalisation(GOOD.replace("</explanation>", "")) is None  # unclosed
    assert parse_verbalisation(GOOD.replace("<literal>X received A and B. Who is X?</literal>", "<literal> </literal>")) is None
    assert parse_verbalisation(GOOD.replace("HE masks himself. Who is HE?", "he masks himself")) is None  # no placeholder
    assert parse_verbalisation("<LITERAL>a</LITERAL><Obfuscated>IT b</Obfuscated><explanation>c</explanation>").literal == "a"
    assert parse_verbalisation("<literal>" * 20_000) is None  # long junk, quickly
    # an echo of the prompt's worked example is not a puzzle
    prompt = "Example\n" + GOOD + "\nNow the real task\nAnswer: Someone"
    assert parse_verbalisation(prompt + " " + GOOD, prompt=prompt) is None
    own = ("<literal>X won C. Who is X?</literal><obfuscated>THIS one won a cup.</obfuscated>"
           "<explanation>C is a cup.</explanation>")
    assert parse_verbalisation(prompt + own, prompt=prompt).literal == "X won C. Who is X?"
    half = GOOD.replace("X received A and B", "X got C")  # own literal, copied obfuscated text
    assert parse_verbalisation(half, prompt=prompt) is None


def graph() -> KnowledgeGraph:
    return KnowledgeGraph(
        [("Q1", "P1", "Q9"), ("Q2", "P1", "Q9"), ("Q3", "P1", "Q8")],
        labels={"Q1": "Günter Wallraff", "Q2": "Boston", "Q3": "Massachusetts", "Q9": "Prize"},
        aliases={"Q1": ["Hans Esser", "GW"], "Q2": ["Beantown", "Boston", "MA", "Massachusetts"]},
    )


def test_leaks_of_labels_aliases_and_surnames():
    kg = graph()
    names = answer_names(kg, ["Q1", "Q2"])
    found = lambda text: sorted((n.qid, n.text, n.kind) for n in find_leaks(text, names))  # noqa: E731
    assert found("X went to the camps. Who is HE?") == []
    assert found("The great WALLRAFF, who is he?") == [("Q1", "wallraff", "label_token")]
    assert found("Like Günter Wallraff.") == [("Q1", "Günter Wallraff", "label"), ("Q1", "günter", "label_token"),
                                              ("Q1", "wallraff", "label_token")]
    assert found("Also known as Hans-Esser!") == [("Q1", "Hans Esser", "alias")]
    assert found("a trip to Beantown") == [("Q2", "Beantown", "alias")]
    assert found("GW wrote it") == [("Q1", "GW", "alias")]
    assert found("gw and ma in lower case are words, not names") == []  # short names: case-sensitive
    assert found("Bostonian tea") == []  # whole words only


def test_alias_aware_exact_match_records_its_basis():
    kg = graph()
    others = {"massachusetts", "prize", "günter wallraff", "boston"}
    names = accepted_names(kg, ["Q1", "Q2"], others)
    assert match_answer("günter  WALLRAFF.", names) == "label:Q1"
    assert match_answer("Hans Esser", names) == "alias:Q1:Hans Esser"
    assert match_answer("Beantown", names) == "alias:Q2:Beantown"
    assert match_answer("Massachusetts", names) is None  # a piece of "Boston, Massachusetts": another entity's label
    assert match_answer("MA", names) is None and match_answer("GW", names) is None  # too short to trust
    assert match_answer("Wallraff", names) is None  # a surname alone is not the answer
    assert match_answer("", names) is None and match_answer(None, names) is None


def test_exported_other_answers_are_the_names_the_filter_accepts(tmp_path):
    """The published item's ``other_answers`` listed every alias piece: ``cresowlve eval`` then scored
    "Massachusetts" (another entity's label) and "MA" right for a Boston puzzle the filter had scored
    with neither."""
    from cresowlve_core.sources.sample import load_items
    from cresowlve_core.synthetic.answers import other_labels
    from cresowlve_core.synthetic.export import other_answers, write_items
    from cresowlve_core.synthetic.facts import Candidate

    kg = graph()
    boston = Candidate("Q2", "places", (("P1", "Q9"),), (2,), ("Q1", "Q2"), 1)
    assert other_answers(boston, kg, other_labels(kg)) == ["Beantown", "Günter Wallraff", "Hans Esser"]
    survivor = {"candidate": boston, "solve": {"difficulty_score": 0.5},
                "verbalisation": {"literal": "X got the Prize. Who is X?", "obfuscated": "THIS got it.",
                                  "explanation": "a prize"}}
    path = write_items([survivor], kg, tmp_path / "synthetic_items.jsonl")
    (item,) = load_items(str(path), "en")
    assert item.en.other_answers == "Beantown; Günter Wallraff; Hans Esser"
