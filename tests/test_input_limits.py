"""Input limits, enforced by every stage's reader (cresowlve_core/inputs.py).

A NUL (or another control character) in a question or query, a question or query above 64 KB
(unless ``--max-input-chars`` raises it) and an empty field are refused with exit 2 and
``file:line`` before any request reaches the (fake) server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core.create.queries import QueriesFileError, load_queries
from cresowlve_core.inputs import DEFAULT_MAX_INPUT_CHARS, text_problem
from cresowlve_core.items import Item, ItemView
from cresowlve_core.sources.hub import ItemsFileError
from cresowlve_core.sources.sample import load_items

BIG = 70_000  # above the 65,536-character default


def items_with(tmp: Path, question: str) -> Path:
    """An items file whose second item (line 2) has ``question``."""
    items = S.eval_items()
    items[1] = Item(id=items[1].id, en=ItemView(question=question, answer="Answer1"))
    return S.write_items(tmp / "eval_items.jsonl", items)


def run_eval(srv: FakeServer, tmp: Path, items: Path, *extra: str) -> int:
    from cresowlve_core.cli import main

    return main(["eval", "--model", "fake-model", "--base-url", srv.base_url, "--items", str(items), "--lang", "en",
                 "--run-dir", str(tmp / "eval_run"), "--judge-model", "fake-judge", "--judge-base-url", srv.base_url,
                 "--max-tokens", "64", "--concurrency", "2", *extra])


def queries_with(tmp: Path, query: str) -> Path:
    """The first two shipped queries, the second (line 2) with ``query``."""
    rows = [q.model_dump() for q in load_queries(limit=2)]
    rows[1]["query"] = query
    path = tmp / "q.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def create_answers(req):
    """The CREATE fakes' reply; a plain one for the query they do not know (the long one)."""
    try:
        return S.create_answers(req)
    except StopIteration:
        return "No path found."


def run_create(srv: FakeServer, tmp: Path, queries: Path, *extra: str) -> int:
    from cresowlve_core.cli import main

    return main(["create", "generate", "--model", "fake-model", "--base-url", srv.base_url, "--limit", "2",
                 "--max-tokens", "512", "--run-dir", str(tmp / "create_run"), "--queries", str(queries), *extra])


# --------------------------------------------------------------------------- the shared check


@pytest.mark.parametrize("text,why", [("", "must not be empty"), ("  \n\t", "must not be empty"),
                                      ("a\x00b", "U+0000 at character 2"), ("a\x1bb", "U+001B"),
                                      ("a\rb", "U+000D"), ("a\x85b", "U+0085"),
                                      ("x" * (DEFAULT_MAX_INPUT_CHARS + 1), "--max-input-chars")])
def test_refused_texts(text, why):
    problem = text_problem(text, "question")
    assert problem is not None and problem.startswith("question: ") and why in problem


@pytest.mark.parametrize("text", ["tab\there", "two\nlines", "crlf\r\nline", "x" * DEFAULT_MAX_INPUT_CHARS,
                                  "Unicode \u2028 é 𝔸"])
def test_accepted_texts(text):
    assert text_problem(text, "question") is None


def test_an_answer_is_not_size_limited_but_a_question_can_be_raised():
    assert text_problem("x" * BIG, "answer", size_limited=False) is None
    assert text_problem("x" * BIG, "question", max_chars=100_000) is None
    assert "100,000" in (text_problem("x" * 100_001, "question", max_chars=100_000) or "")


# --------------------------------------------------------------------------- eval


def test_eval_refuses_a_nul_in_a_question_with_file_line_and_sends_nothing(tmp_path, capsys):
    items = items_with(tmp_path, "Who is\x00X?")
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, items) == 2
        assert srv.total == 0
    err = capsys.readouterr().err
    assert f"{items}:2 (id='chgk_0000000001'): en.question: control character U+0000" in err
    assert not (tmp_path / "eval_run").exists()


def test_eval_refuses_an_empty_answer_in_an_item_row(tmp_path, capsys):
    items = S.eval_items()
    items[2] = Item(id=items[2].id, en=ItemView(question="Puzzle number 2: who?", answer=" "))
    path = S.write_items(tmp_path / "eval_items.jsonl", items)
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, path) == 2
        assert srv.total == 0
    assert f"{path}:3 (id='chgk_0000000002'): en.answer: must not be empty" in capsys.readouterr().err


def test_eval_refuses_a_long_question_unless_max_input_chars_raises_it(tmp_path, capsys):
    items = items_with(tmp_path, "Puzzle number 1: " + "x" * BIG)
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, items) == 2
        assert srv.total == 0
        err = capsys.readouterr().err
        assert f"{items}:2" in err and "above the limit of 65,536" in err and "--max-input-chars" in err
        assert run_eval(srv, tmp_path, items, "--max-input-chars", "100000") == 0, capsys.readouterr().err
        assert srv.total == 8  # 4 answers + 4 verdicts: the long question was sent
    summary = json.loads((tmp_path / "eval_run" / "summary.json").read_text())
    assert summary["n_items"] == 4


def test_published_rows_are_checked_too(tmp_path):
    path = tmp_path / "pub.jsonl"
    row = {"id": "chgk_a", "question": "Who\x07?", "answer": "A", "explanation": None, "other_answers": None,
           "difficulty": None, "reasoning_type": None, "knowledge_domains": [], "creative_domains": [],
           "cultures": []}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ItemsFileError, match=r"pub\.jsonl:1 \(id='chgk_a'\): en\.question: control character U\+0007"):
        load_items(str(path), "en")


# --------------------------------------------------------------------------- CREATE


@pytest.mark.parametrize("query,why", [("", "query: must not be empty"), ("What\x00?", "U+0000")])
def test_create_refuses_an_empty_or_nul_query_and_sends_nothing(tmp_path, capsys, query, why):
    queries = queries_with(tmp_path, query)
    with FakeServer(answers=S.create_answers) as srv:
        assert run_create(srv, tmp_path, queries) == 2
        assert srv.total == 0
    err = capsys.readouterr().err
    assert f"{queries}:2: " in err and why in err


def test_create_refuses_a_long_query_unless_max_input_chars_raises_it(tmp_path, capsys):
    queries = queries_with(tmp_path, "What connects " + "y" * BIG + "?")
    with pytest.raises(QueriesFileError, match="--max-input-chars"):
        load_queries(queries)
    with FakeServer(answers=create_answers) as srv:
        assert run_create(srv, tmp_path, queries) == 2
        assert srv.total == 0
        assert "--max-input-chars" in capsys.readouterr().err
        assert run_create(srv, tmp_path, queries, "--max-input-chars", "100000") == 0, capsys.readouterr().err
        assert srv.total == 2  # both queries asked, the long one included
        assert any("y" * BIG in r.prompt for r in srv.requests)


# --------------------------------------------------------------------------- every other reader

PACK = """Чемпионат:
Тестовый турнир

Вопрос 1:
Кто {q}?

Ответ:
Пушкин.

Вопрос 2:
Что такое X?

Ответ:
Игрек.
"""


def write_pack(tmp: Path, question: str) -> Path:
    """A db.chgk.info pack of two questions, the first (its text on line 5) asking ``question``."""
    path = tmp / "pack.txt"
    path.write_text(PACK.format(q=question), encoding="utf-8")
    return path


def run_build(srv: FakeServer, tmp: Path, source: Path, *extra: str) -> int:
    from cresowlve_core.cli import main

    return main(["build", "--source", str(source), "--model", "fake", "--base-url", srv.base_url,
                 "--build-dir", str(tmp / "build"), "--agreement-n", "1", *extra])


def test_build_refuses_a_nul_in_a_pack_with_file_line_and_sends_nothing(tmp_path, capsys):
    pack = write_pack(tmp_path, "написал\x00это")
    with FakeServer(answers=S.build_answers) as srv:
        assert run_build(srv, tmp_path, pack) == 2
        assert srv.total == 0
    assert f"{pack}:5: control character U+0000 at column 12" in capsys.readouterr().err
    assert not (tmp_path / "build").exists()


def test_build_refuses_a_long_pack_question_unless_max_input_chars_raises_it(tmp_path, capsys):
    from cresowlve_core.sources.chgk import read_pack_checked

    pack = write_pack(tmp_path, "x" * BIG)
    with FakeServer(answers=S.build_answers) as srv:
        assert run_build(srv, tmp_path, pack) == 2
        assert srv.total == 0
    err = capsys.readouterr().err
    assert f"{pack}:4: question: " in err and "above the limit of 65,536" in err and "--max-input-chars" in err
    assert len(read_pack_checked(pack, max_input_chars=100_000).questions) == 2  # raised: read


def test_build_refuses_a_nul_in_a_dataset_row(tmp_path, capsys):
    items = [Item(id="chgk_a", ru=ItemView(question="Кто это?", answer="Он")),
             Item(id="chgk_b", ru=ItemView(question="Кто\x00там?", answer="Я"))]
    path = S.write_items(tmp_path / "ru.jsonl", items)
    with FakeServer(answers=S.build_answers) as srv:
        assert run_build(srv, tmp_path, path) == 2
        assert srv.total == 0
    assert f"{path}:2 (id='chgk_b'): ru.question: control character U+0000" in capsys.readouterr().err


def write_kg(root: Path, label: str) -> Path:
    """A tiny knowledge graph in the shipped layout under ``root/kg/literally_wikidata``, the label of
    Q2 (line 2 of the labels file) being ``label``."""
    kg = root / "kg" / "literally_wikidata"
    (kg / "LitWD1K").mkdir(parents=True)
    (kg / "Entities").mkdir()
    (kg / "Relations").mkdir()
    (kg / "LitWD1K" / "train.txt").write_text("Q1\tP1\tQ2\nQ3\tP1\tQ2\n", encoding="utf-8")
    (kg / "Entities" / "entity_labels_en.txt").write_text(f"Q1\tAlpha\nQ2\t{label}\nQ3\tGamma\n", encoding="utf-8")
    (kg / "Relations" / "relation_labels_en.txt").write_text("P1\tknows\n", encoding="utf-8")
    return kg


def run_synth_cli(srv: FakeServer, tmp: Path, *extra: str) -> int:
    from cresowlve_core.cli import main

    return main(["synth", "--build-dir", str(tmp / "synth"), "--n", "1", "--verbaliser-model", "fake",
                 "--verbaliser-base-url", srv.base_url, "--solver-model", "fake", "--solver-base-url", srv.base_url,
                 *extra])


@pytest.mark.parametrize("label,where,why", [("Be\x00ta", ":2: ", "control character U+0000 at column 6"),
                                             ("B" * BIG, ":2: ", "above the limit of 65,536")])
def test_synth_refuses_a_bad_graph_line_with_file_line_and_sends_nothing(tmp_path, capsys, monkeypatch,
                                                                         label, where, why):
    kg = write_kg(tmp_path / "data", label)
    monkeypatch.setenv("CRESOWLVE_DATA_DIR", str(tmp_path / "data"))
    with FakeServer(answers=S.synth_answers) as srv:
        assert run_synth_cli(srv, tmp_path) == 2
        assert srv.total == 0
    err = capsys.readouterr().err
    assert f"{kg / 'Entities' / 'entity_labels_en.txt'}{where}" in err and why in err


def test_a_graph_line_that_is_not_a_triple_is_refused_never_skipped(tmp_path):
    from cresowlve_core.sources.kg import KnowledgeGraphError, load_kg

    kg = write_kg(tmp_path, "Beta")
    (kg / "LitWD1K" / "train.txt").write_text("Q1\tP1\tQ2\nQ3 P1\n", encoding="utf-8")
    with pytest.raises(KnowledgeGraphError, match=r"train\.txt:2: expected a triple QID PID QID"):
        load_kg(kg)
    assert len(load_kg(write_kg(tmp_path / "ok", "B" * BIG), max_input_chars=100_000).labels) == 3


def bad_items_runs(tmp: Path, writer) -> Path:
    """Run directories (written by a stage's test helper) whose items file has a NUL in the
    second item's questions, in both languages."""
    from test_contamination_pipeline import make_items

    items = make_items()
    bad = items[1]
    items[1] = bad.model_copy(update={"en": ItemView(question="Who\x00?", answer="A1"),
                                      "ru": ItemView(question="Кто\x00?", answer="О1")})
    writer(items)
    return tmp / "items.jsonl"


def test_errors_label_refuses_an_items_file_with_a_nul_and_sends_nothing(tmp_path, capsys):
    from test_errors_label import write_run

    from cresowlve_core.cli import main

    items = bad_items_runs(tmp_path, lambda its: write_run(tmp_path, "en", its, {it.id: False for it in its}))
    with FakeServer(answers=S.errors_answers) as srv:
        code = main(["errors", "label", "--runs", str(tmp_path / "m__*"), "--out-dir", str(tmp_path / "out"),
                     "--labeller-model", "fake", "--labeller-base-url", srv.base_url])
        assert code == 2 and srv.total == 0
    assert f"{items}:2 (id='chgk_0000000001'): en.question: control character U+0000" in capsys.readouterr().err


def test_contamination_refuses_an_items_file_with_a_nul_and_sends_nothing(tmp_path, capsys):
    from test_contamination_pipeline import write_runs

    from cresowlve_core.cli import main

    items = bad_items_runs(tmp_path, lambda its: write_runs(tmp_path, its))
    with FakeServer(answers=S.contamination_answers()) as srv:
        code = main(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir",
                     str(tmp_path / "out"), "--perturber-model", "fake", "--perturber-base-url", srv.base_url,
                     "--quiz-model", "fake", "--quiz-base-url", srv.base_url])
        assert code == 2 and srv.total == 0
    assert f"{items}:2 (id='chgk_0000000001'): ru.question: control character U+0000" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["eval"], ["create", "generate"], ["build"], ["synth"], ["errors", "label"],
                                     ["contamination", "run"]])
def test_every_command_that_reads_inputs_takes_max_input_chars(command):
    from cresowlve_core.cli import build_parser
    from cresowlve_core.cli.conventions import _chosen_parser

    parser = build_parser()
    required = {"create": ["--run-dir", "x"], "synth": ["--build-dir", "x"], "errors": ["--runs", "x"]}
    args = parser.parse_args([*command, *required.get(command[0], []), "--max-input-chars", "100000"])
    assert args.max_input_chars == 100_000
    assert "65536" in _chosen_parser(parser, args).format_help()


def _raise_limit(run_dir: Path, limit: int) -> None:
    """Record in a run's manifest that it accepted its items under ``--max-input-chars limit``."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config"] = {"items": manifest["items"], "max_input_chars": limit}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def test_run_input_limit_is_the_flag_else_the_runs_own_else_the_default():
    from cresowlve_core.inputs import run_input_limit

    raised = {"config": {"max_input_chars": 100_000}}
    assert run_input_limit(raised) == 100_000
    assert run_input_limit(raised, 80_000) == 80_000
    assert run_input_limit({"config": {"max_input_chars": None}}) is None
    assert run_input_limit({}) is None
    assert run_input_limit({"config": {"max_input_chars": "100000"}}) is None  # a hand-edited string is not a limit


def test_the_error_labeller_reads_a_runs_items_under_the_limit_the_run_was_made_with(tmp_path):
    """A run evaluated with --max-input-chars 100000 over a 70,000-character question is read again
    under that limit (its wrong answer is labelled), while a run made under the default is refused."""
    from test_errors_label import write_run

    from cresowlve_core.analysis.loading import load_runs
    from cresowlve_core.error_analysis.wrong import collect_wrong

    items = [Item(id="chgk_0000000000", en=ItemView(question="Who?", answer="A0")),
             Item(id="chgk_0000000001", en=ItemView(question="x" * BIG, answer="A1"))]
    run = write_run(tmp_path, "en", items, {it.id: False for it in items})
    with pytest.raises(ItemsFileError, match="70,000 characters"):
        collect_wrong(load_runs(str(run)))
    _raise_limit(run, 100_000)
    wrong, _ = collect_wrong(load_runs(str(run)))
    assert sorted(w.id for w in wrong) == ["chgk_0000000000", "chgk_0000000001"]
    with pytest.raises(ItemsFileError, match="70,000 characters"):  # a flag given still decides
        collect_wrong(load_runs(str(run)), max_input_chars=DEFAULT_MAX_INPUT_CHARS)


@pytest.mark.parametrize("field", ["other_answers", "explanation"])
def test_eval_refuses_a_nul_in_what_the_judge_is_shown_and_sends_nothing(tmp_path, capsys, field):
    items = S.eval_items()
    view = ItemView(question="Puzzle number 2: who?", answer="Answer2", **{field: "Answer\x00Two"})
    items[2] = Item(id=items[2].id, en=view)
    path = S.write_items(tmp_path / "eval_items.jsonl", items)
    with FakeServer(answers=S.eval_answers) as srv:
        assert run_eval(srv, tmp_path, path) == 2
        assert srv.total == 0
    assert f"{path}:3 (id='chgk_0000000002'): en.{field}: control character U+0000" in capsys.readouterr().err


def test_an_empty_explanation_or_alternative_is_still_accepted(tmp_path):
    items = S.eval_items()
    items[2] = Item(id=items[2].id, en=ItemView(question="Puzzle number 2: who?", answer="Answer2",
                                                explanation="", other_answers=" "))
    path = S.write_items(tmp_path / "eval_items.jsonl", items)
    assert len(load_items(str(path), "en")) == len(items)
