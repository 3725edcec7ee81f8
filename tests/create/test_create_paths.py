"""CREATE answer parsing and structural validity."""

from __future__ import annotations

import json

from cresowlve_core.create.paths import check_validity, normalise_path, parse_answer
from cresowlve_core.create.scored import recorded_dir

P1 = [["A", "r1", "B"], ["B", "r2", "C"]]
P2 = [["A", "x", "C"]]


def _answer(obj: object) -> str:
    return "<answer>" + json.dumps(obj) + "</answer>"


def test_clean_answer():
    pa = parse_answer("Thinking...\n" + _answer({"1": P1, "2": P2}))
    assert pa.status == "ok" and pa.paths == [P1, P2] and pa.flags == []


def test_code_fence_and_trailing_commas_without_tag():
    text = '```json\n{"1": [["A", "r1", "B"], ["B", "r2", "C"],],\n "2": [["A", "x", "C"]],}\n```'
    pa = parse_answer(text)
    assert pa.status == "ok" and pa.paths == [P1, P2]
    assert {"no_answer_tag", "code_fence", "json_cleanup"} <= set(pa.flags)


def test_truncated_output_recovers_every_complete_path():
    text = '<answer>{"1": [["A","r1","B"],["B","r2","C"]], "2": [["A","x","C"]], "3": [["A","y","D"],["D","z'
    pa = parse_answer(text)
    assert pa.status == "partial"
    assert pa.paths == [P1, P2]
    assert "unclosed_answer_tag" in pa.flags and "recovered_partial" in pa.flags


def test_python_literal_tuples_and_line_comments():
    text = '<answer>{1: [("A", "r1", "B"), ("B", "r2", "C")],  // a comment with ] and "quotes\n 2: [("A", "x", "C")]}</answer>'
    pa = parse_answer(text)
    assert pa.status == "ok" and pa.paths == [P1, P2]


def test_url_inside_string_is_not_a_comment():
    pa = parse_answer(_answer({"1": [["A", "website", "https://a.org"], ["https://a.org", "x", "C"]]}))
    assert pa.paths[0][0][2] == "https://a.org"


def test_garbage_empty_and_no_json():
    for text in ("", "   ", None):
        assert parse_answer(text).status == "unparseable"
    pa = parse_answer("I cannot find any connection, sorry.")
    assert pa.status == "unparseable" and pa.paths == [] and "no_json" in pa.flags
    pa = parse_answer("<answer>{not json at all: [</answer>")
    assert pa.status == "unparseable" and pa.paths == []
    assert parse_answer("<answer>{}</answer>").status == "empty"


def test_non_path_values_are_skipped_and_dict_paths_accepted():
    pa = parse_answer(_answer({"1": "no path", "2": {"path": P1, "path probability": 0.5}, "3": P2}))
    assert pa.paths == [P1, P2] and "skipped_non_path_value" in pa.flags


def test_a_path_with_an_empty_triple_is_kept_as_a_malformed_path_not_dropped():
    """A model's path with an empty triple was dropped like a value that is no path, so it left
    n_paths and the validity rate (1 of 1 valid where the model wrote 2 paths); it is a path that
    fails the structural check, as one with a two-part triple is."""
    from cresowlve_core.create.distance import path_text

    broken = [["Morton Gould", "knew", "X"], [], ["X", "discography", "Benny Carter discography"]]
    fine = [["Morton Gould", "knew", "X"], ["X", "discography", "Benny Carter discography"]]
    pa = parse_answer(_answer({"1": broken, "2": fine, "3": "no path"}))
    assert pa.status == "ok" and pa.paths == [broken, fine] and pa.flags == ["skipped_non_path_value"]
    assert [check_validity(p, "Morton Gould", "Benny Carter discography").valid for p in pa.paths] == [False, True]
    assert "malformed_triple" in check_validity(broken, "Morton Gould", "Benny Carter discography").reasons
    assert check_validity([[]], "a", "b").reasons == ("malformed_triple", "entity_a_not_in_first", "entity_b_not_in_last")
    assert path_text(broken)  # the report embeds every path, a malformed one too


def test_last_answer_block_wins():
    text = _answer({"1": P2}) + " revised: " + _answer({"1": P1})
    assert parse_answer(text).paths == [P1]


def test_recorded_answers_parse_exactly_like_the_authors():
    n = 0
    for f in sorted(recorded_dir().glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            mine = [normalise_path(p) for p in parse_answer(row["raw_response"]).paths]
            assert mine == row["paths"], (f.name, row["query"])
            n += 1
    assert n == 148


# --------------------------------------------------------------------------- validity


def test_valid_path_has_no_reasons():
    v = check_validity([["Morton Gould", "knew", "Benny Carter"], ["Benny Carter", "discography", "Benny Carter discography"]], "Morton Gould", "Benny Carter discography")
    assert v.valid and v.reasons == ()


def test_each_failing_check_is_reported():
    path = [["Someone", "knew", "X"], ["Y", "r", "Y"]]
    v = check_validity(path, "Morton Gould", "Benny Carter")
    assert not v.valid
    assert v.reasons == ("entity_a_not_in_first", "entity_b_not_in_last", "last_head_equals_tail", "broken_chain_at_1")


def test_substring_and_case_rules():
    # entity_a only as a substring, different case: fine
    ok = [["morton gould (composer)", "r", "ASCAP"], ["ascap", "member", "Benny Carter"]]
    assert check_validity(ok, "Morton Gould", "benny carter").valid
    # the chain needs an entity of the NEXT triple inside an entity of the PREVIOUS one
    shorter_next = [["kun nong", "r", "8th united states congress"], ["united states congress", "has", "des moines"]]
    assert check_validity(shorter_next, "Kun Nong", "Des Moines").valid
    longer_next = [["kun nong", "venue", "beijing"], ["2008 beijing olympics", "participant", "des moines"]]
    assert check_validity(longer_next, "Kun Nong", "Des Moines").reasons == ("broken_chain_at_1",)


def test_an_entity_with_surrounding_whitespace_in_the_queries_file_is_compared_trimmed(tmp_path):
    """A triple's parts are read trimmed, so a query's ``"Morton Gould "`` (a trailing space in a
    hand-made queries file) is compared trimmed too: its paths are valid, not all rejected with
    entity_a_not_in_first / entity_b_not_in_last (a utility of 0 the file's whitespace caused)."""
    from cresowlve_core.create.queries import load_queries

    qfile = tmp_path / "queries.jsonl"
    qfile.write_text(json.dumps({"query": "Connect them?", "entity_a": "Morton Gould ", "entity_b": "\tBenny Carter\n",
                                 "rel_b": "discography"}) + "\n", encoding="utf-8")
    q = load_queries(qfile)[0]
    path = parse_answer(_answer({"1": [["Morton Gould", "award received", "Grammy Award"],
                                       ["Benny Carter ", "award received", "Grammy Award"]]})).paths[0]
    assert check_validity(path, q.entity_a, q.entity_b).valid
    # a path that does not reach the entity is still rejected
    assert check_validity([["Morton Gould", "r", "ASCAP"], ["ascap", "member", "Count Basie"]],
                          q.entity_a, q.entity_b).reasons == ("entity_b_not_in_last",)


def test_malformed_triples():
    v = check_validity([["a", "acted as", "examiner for", "c"], ["c", "r", "b"]], "a", "b")
    assert v.reasons == ("malformed_triple",)
    assert check_validity([], "a", "b").reasons == ("empty_path",)


def test_an_empty_or_null_entity_does_not_connect_two_triples():
    """An empty entity is a substring of every entity: it passed the chain check, so a path whose
    middle entity is missing (null or "") connected entity_a with entity_b as a valid path."""
    parsed = parse_answer('<answer>{"1": [["Morton Gould", "knew", "X"], ["X", "met", null], '
                          '[null, "discography", "Benny Carter discography"]], '
                          '"2": [["Morton Gould", "knew", "X"], ["X", "met", "  "], '
                          '["", "discography", "Benny Carter discography"]]}</answer>')
    assert parsed.status == "ok" and len(parsed.paths) == 2
    for path in parsed.paths:
        assert check_validity(path, "Morton Gould", "Benny Carter discography").reasons == ("malformed_triple",)


def _regex_region(text: str) -> str | None:
    """The answer region as the former lazy-regex code found it (quadratic in unclosed tags)."""
    import re

    blocks = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL | re.IGNORECASE)
    if blocks:
        return ([b for b in blocks if b.strip()] or blocks)[-1]
    opens = list(re.finditer(r"<answer>", text, re.IGNORECASE))
    return text[opens[-1].end():] if opens else None


def test_answer_region_in_one_pass_matches_the_former_regex() -> None:
    import random

    from cresowlve_core.create.paths import _answer_region

    rng = random.Random(20)
    tokens = ["<answer>", "</answer>", "<ANSWER>", "</Answer>", " ", "x", '{"1": [["a","r","b"]]}', "\n"]
    for _ in range(3000):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(0, 12)))
        flags: list[str] = []
        got = _answer_region(text, flags)
        want = _regex_region(text)
        assert got == (text if want is None else want), text
        assert ("no_answer_tag" in flags) == (want is None)
    # 16,000 unclosed tags (38 s before; bench/parsers.py times it on 400 KB inputs)
    flags = []
    assert _answer_region("<answer>" * 16_000 + " x", flags) == " x" and flags == ["unclosed_answer_tag"]


def test_cleanup_and_spans_keep_strings_escapes_and_apostrophes() -> None:
    from cresowlve_core.create.paths import _balanced_spans, _drop_trailing_commas

    s = '{"1": [["a, b", "see https://x.org", "c"],], // comment\n "2": [["don\'t", \'it\\\'s\', "q\\"]"],],}'
    assert _drop_trailing_commas(s) == ('{"1": [["a, b", "see https://x.org", "c"]], \n "2": [["don\'t", \'it\\\'s\', '
                                        '"q\\"]"]]}')
    assert _drop_trailing_commas('["unclosed, ]') == '["unclosed, ]'  # inside a string to the end
    assert _balanced_spans('{"1": [["x]"]], "2": [[\'y\']], "3": [["trunc', 0) == [(6, 14), (21, 28)]


def test_a_degenerate_answer_is_cut_and_flagged() -> None:
    from cresowlve_core.create.paths import MAX_PARSE_CHARS

    pa = parse_answer('<answer>{"1": [["a", "r", "b"]], ' + '"x": 1, ' * 100_000 + "}</answer>")
    assert f"cut_at_{MAX_PARSE_CHARS}_chars" in pa.flags
    assert pa.status == "partial" and pa.paths == [[["a", "r", "b"]]]
