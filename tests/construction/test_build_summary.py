"""What ``cresowlve build`` and the 01_construction report say about calls that gave no verdict.

Before: the last line's most common error was counted in one step only (``(8x)`` for one message
all 64 calls carried); the build line's ``unparseable:`` list left out translate (its failures are
``translation_incomplete``); the report's headline read as a finished funnel when every call errored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import fakeserver
import pytest
from fakeserver import FakeServer
from stophelp import last_line
from test_construction_pipeline import DEMO

from cresowlve_core.cli import main
from cresowlve_core.notebooks import run_notebook

OVERFLOW = "This model's maximum context length is 16 tokens"


@pytest.fixture
def overflowing(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    """A server answering every request with the same context-overflow 400 (not retried)."""
    monkeypatch.setitem(fakeserver.STATUS_TEXT, 400, OVERFLOW)
    with FakeServer(faults=lambda r: "400") as srv:
        yield srv


def _build(tmp_path: Path, base_url: str) -> int:
    return main(["build", "--source", DEMO, "--model", "fake", "--base-url", base_url, "--build-dir",
                 str(tmp_path / "build"), "--no-cache", "--agreement-n", "3"])


def test_the_most_common_error_is_counted_over_every_step(tmp_path, capsys, monkeypatch, overflowing):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    rc = _build(tmp_path, overflowing.base_url)
    err = capsys.readouterr().err
    assert rc == 1, err
    n = overflowing.total  # 8 items x 8 steps: the filters keep every item without a verdict
    assert n == 64
    assert last_line(err).startswith(f"incomplete: {n} errored, 0 not run of {n} calls; most common error ({n}x): ")
    assert OVERFLOW in last_line(err)


def test_an_incomplete_translation_is_listed_as_unparseable_on_the_build_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    with FakeServer(answers=lambda req: "no idea") as srv:
        rc = _build(tmp_path, srv.base_url)
    line = capsys.readouterr().out.splitlines()[0]
    assert rc == 1, line
    assert "unparseable: needs_material 8/8, russian_specific 8/8, translate 8/8, reasoning 8/8" in line, line
    steps = json.loads((tmp_path / "build" / "build.json").read_text())["steps"]
    assert steps["translate"]["translation_incomplete"] == 8 and "unparseable" not in steps["translate"]


def test_the_report_and_the_data_card_say_every_model_call_errored(tmp_path, overflowing):
    res = run_notebook("01_construction", {"sources": [DEMO], "limit": None, "model": "fake",
                                           "base_url": overflowing.base_url, "build_dir": str(tmp_path / "build")},
                       tmp_path / "reports")
    head = res.records["headline"]
    [stage] = res.records["stages"]  # `cresowlve report 01_construction` exits 1 with this, as `build` does
    assert (stage["unit"], stage["n_items"], stage["n_error"]) == ("calls", 64, 64)
    assert re.match(r"construction funnel: 8 collected → 8 final \(0 creative, 0 factual\); 8 not human-validated; the paper: ", head), head
    assert head.endswith(" — 64 of 64 model calls errored (items without a verdict pass the filters unlabelled, "
                         "flagged for review)"), head
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "> Incomplete build: 64 of 64 model calls errored (" in card


def test_an_annotation_with_nothing_usable_is_flagged_and_counted_not_labelled(tmp_path, capsys, monkeypatch):
    """A reasoning type or concepts all outside the vocabulary, or facts that all reveal the answer,
    were counted ``labelled`` with no flag: the items were exported with no reasoning type, concepts
    ``[]`` (none applies) and ``atomic_facts`` ``[]`` (0 facts, a point of the complexity analysis),
    while the build line and the data card said every answer was usable."""
    from test_construction_pipeline import ITEMS, _item_of, _step_of, scripted

    from cresowlve_core.sources.sample import read_items_jsonl

    odd = {"reasoning": "TYPE: lateral", "concepts": "LABELS: wordplay, riddle"}

    def reply(req: fakeserver.FakeRequest) -> str:
        step = _step_of(req.prompt)
        if step == "facts":  # a fact that contains the item's answer reveals it
            return f"FACTS:\n1. Is the answer {ITEMS[_item_of(req.prompt)].en.answer}?"
        return odd.get(step) or scripted(req)

    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    with FakeServer(answers=reply) as srv:
        rc = _build(tmp_path, srv.base_url)
    line = capsys.readouterr().out.splitlines()[0]
    assert rc == 0, line
    steps = json.loads((tmp_path / "build" / "build.json").read_text())["steps"]
    n = steps["reasoning"]["n_in"]
    assert f"; no usable label: reasoning {n}/{n}, concepts {n}/{n}, facts {n}/{n};" in line, line
    assert steps["reasoning"]["oov_only"] == steps["concepts"]["oov_only"] == steps["facts"]["no_usable_facts"] == n
    assert "labelled" not in steps["reasoning"] and "labelled" not in steps["facts"]
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert f"| reasoning | {n} | 0 | 0 | 0 | {n} | 0 | 0 | 0 |" in card, card
    items = read_items_jsonl(tmp_path / "build" / "export" / "full.jsonl")
    final = [i for i in items if "reasoning" in i.meta["verdicts"]]
    assert len(final) == n
    for it in final:
        assert it.reasoning_type is None and it.creative_domains == [] and it.atomic_facts is None
        assert {"reasoning:oov_only", "concepts:oov_only", "facts:no_usable_facts"} <= set(it.meta["review_flags"])


PACK_WITH_UNUSABLE = """Чемпионат:
Тестовый турнир

Вопрос 1:
Назовите столицу Ингушетии.

Ответ:
Магас.

Вопрос 2:
Вопрос без ответа, только с комментарием. Что это?

Ответ:

Комментарий:
Ответ потерян при выгрузке.

Вопрос 3:
Назовите столицу Ингушетии.

Ответ:
Магас.

Вопрос 4:
ЕГО иначе называют бант жизни или ключ Нила. Назовите ЕГО одним словом.

Ответ:
Анх.
"""


def test_blocks_set_aside_at_collect_are_named_on_the_build_line_and_the_data_card(tmp_path, capsys, monkeypatch):
    """A pack of 4 blocks, one without an answer and one repeated: the build line and the data card
    said "collected 2" and nothing else (the 2 set aside were only in build.json and collect/report.json)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    pack = tmp_path / "pack.txt"
    pack.write_bytes(PACK_WITH_UNUSABLE.encode("koi8-r"))
    with FakeServer(answers=lambda req: "no idea") as srv:
        rc = main(["build", "--source", str(pack), "--model", "fake", "--base-url", srv.base_url, "--build-dir",
                   str(tmp_path / "build"), "--no-cache", "--agreement-n", "2"])
    line = capsys.readouterr().out.splitlines()[0]
    assert rc == 1, line  # nothing parsed from "no idea"
    assert "collected 2 (4 read: 1 unusable, 1 duplicate) → −needs material" in line, line
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "> Collected 2 of 4 read: 1 unusable, 1 duplicate; the unusable and duplicate ones are listed in " \
           "`collect/report.json`." in card


def test_a_step_record_made_from_another_text_is_run_again_and_named(tmp_path, capsys, monkeypatch):
    """A source corrected under the same id (or a translation a reviewer fixed): the resumed build reused
    every step record by id, so the new Russian question went out with the old question's translation,
    filter verdicts and labels, and the line said nothing was sent. Each step whose input text changed
    now runs that item again, and the build line names the steps and counts."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "items.jsonl"

    def write(question: str) -> None:
        source.write_text(json.dumps({"id": "q1", "ru": {"question": question, "answer": "Ответ"}},
                                     ensure_ascii=False) + "\n", encoding="utf-8")

    replies = {"external material": "ANSWER: NO", "Russian language": "ANSWER: NO", "Classify": "TYPE: creative",
               "creative language": "LABELS: metaphor", "knowledge domains": "DOMAINS: literature",
               "cultures or languages": "CULTURES: russian", "atomic facts": "FACTS:\n1. What is a river?"}

    def answer(req) -> str:
        if "Translate this puzzle" in req.prompt:
            english = "Which river?" if "реку" in req.prompt else "Which city?"
            return f"<question>{english}</question>\n<answer>Answer</answer>"
        return next(reply for marker, reply in replies.items() if marker in req.prompt)

    def build() -> str:
        assert main(["build", "--source", str(source), "--model", "fake", "--base-url", srv.base_url, "--build-dir",
                     str(tmp_path / "build"), "--no-cache", "--agreement-n", "1"]) == 0
        return capsys.readouterr().out.splitlines()[0]

    with FakeServer(answers=answer) as srv:
        write("Какой город?")
        build()
        write("Какую реку?")  # corrected under the same id
        line = build()
        assert srv.total == 16  # every step once more for the one item: its Russian and then its English changed
    item = json.loads((tmp_path / "build" / "export" / "full.jsonl").read_text(encoding="utf-8"))
    assert (item["ru"]["question"], item["en"]["question"]) == ("Какую реку?", "Which river?")
    assert "; run again for a changed text: needs_material 1, russian_specific 1, translate 1, reasoning 1" in line
    assert "8 sent" in line


def test_a_step_run_of_another_model_is_refused_naming_the_step(tmp_path, capsys, monkeypatch):
    """A resumed build with another model for one step was refused with 'the run directory holds another
    configuration', without saying which of the build's eight step directories."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STEP_KEY", "k")
    with FakeServer(answers=lambda req: "no idea") as srv:
        _build(tmp_path, srv.base_url)
        capsys.readouterr()
        rc = main(["build", "--source", DEMO, "--model", "fake", "--base-url", srv.base_url, "--build-dir",
                   str(tmp_path / "build"), "--no-cache", "--step-model", "translate", "other", srv.base_url, "STEP_KEY"])
        sent = srv.total
    assert rc == 2 and sent == 64  # the first build's calls only
    assert last_line(capsys.readouterr().err).startswith(
        f"error: {tmp_path / 'build' / 'steps' / 'translate'}: the run directory holds another configuration (model: ")


def test_questions_left_out_by_the_stratified_sample_are_named_on_the_build_line_and_the_data_card(tmp_path, capsys,
                                                                                                  monkeypatch):
    """--per-level 1 over 4 usable questions (2 per level) kept 2: the line and the card said "collected 2"
    beside the paper's 3,789 and nothing said a sample was taken (only --limit had a note)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "items.jsonl"
    source.write_text("".join(json.dumps({"id": f"q{i}", "difficulty": 1 + i // 2, "ru": {"question": f"Вопрос {i}?",
                                                                                        "answer": "Ответ"}},
                                         ensure_ascii=False) + "\n" for i in range(4)), encoding="utf-8")
    with FakeServer(answers=lambda req: "no idea") as srv:
        main(["build", "--source", str(source), "--per-level", "1", "--model", "fake", "--base-url", srv.base_url,
              "--build-dir", str(tmp_path / "build"), "--no-cache", "--agreement-n", "1"])
    line = capsys.readouterr().out.splitlines()[0]
    assert "collected 2 (4 read: 2 not sampled) → −needs material" in line, line
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "> Collected 2 of 4 read: 2 not sampled (a stratified sample of 1 per difficulty level, seed 0).\n" in card


def test_a_creative_item_whose_labels_were_refused_is_left_out_of_the_fig2_counts_n(tmp_path, capsys, monkeypatch):
    """One creative item's concepts, domains and cultures refused: the data card's Fig. 2 tables counted
    labels over the creative subset with no n, so the refused item read as one no label applies to (5
    items with "metaphor" of 6 creative); the notebook's charts divided by 6. The refusal is OpenAI's
    documented shape (content null, message.refusal) with the recorded text of
    tests/replay/fixtures/openai/chat_gpt4o_refusal.json."""
    from fakeserver import Reply
    from test_construction_pipeline import _item_of, _step_of, scripted

    from cresowlve_core.construction.build import Build, BuildConfig
    from cresowlve_core.construction.export import subsets

    fixture = Path(__file__).parents[1] / "replay" / "fixtures" / "openai" / "chat_gpt4o_refusal.json"
    refusal = json.loads(fixture.read_text(encoding="utf-8"))["body"]["choices"][0]["message"]["refusal"]
    refused = "chgk_c97e6fd16d"  # typed creative by the scripted replies

    def reply(req: fakeserver.FakeRequest) -> str | Reply:
        if _step_of(req.prompt) in ("concepts", "domains", "cultures") and _item_of(req.prompt) == refused:
            return Reply("", refusal=refusal)
        return scripted(req)

    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    with FakeServer(answers=reply) as srv:
        assert _build(tmp_path, srv.base_url) == 0
        line = capsys.readouterr().out.splitlines()[0]
        assert "; refused: concepts 1/7, domains 1/7, cultures 1/7;" in line, line
        config = BuildConfig(build_dir=str(tmp_path / "build"), sources=[DEMO], model="fake", base_url=srv.base_url,
                             cache=False, agreement_n=3)
        with Build(config, progress=False) as b:  # the notebook's resumed build: nothing sent
            b.run_all()
            creative = subsets(b.cands)["creative"]
            spec = b.label_charts().to_dict()
    n = len(creative)
    assert refused in {c.id for c in creative} and n > 1
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    for title in ("Knowledge domains", "Creative concepts", "Cultures"):
        section = card.split(f"## {title} (paper Fig. 2), creative subset\n", 1)[1]
        assert section.lstrip().startswith(f"n = {n - 1} of {n} items; left out: 1 with no labels from the model "
                                           "(refused, "), section[:300]
    assert f"| metaphor | {n - 1} |" in card
    assert spec["hconcat"][0]["title"] == f"Creative concepts (creative subset, n = {n - 1} of {n} items labelled)"
    rows = [r for data in spec["datasets"].values() for r in data]
    assert {"field": "Creative concepts", "label": "metaphor", "items": n - 1, "share": 1.0} in rows


def test_a_step_models_base_url_is_read_as_base_url_reads_it_surrounding_whitespace_stripped(tmp_path, capsys,
                                                                                             monkeypatch):
    """--step-model's BASE_URL was checked stripped but used as typed: " http://host/v1 " went into every
    request line of the step (the server's 400 "Bad request syntax"), and the build stopped at that step, exit 3."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STEP_KEY", "k")
    with FakeServer(answers=lambda req: "no idea") as srv:
        rc = main(["build", "--source", DEMO, "--model", "fake", "--base-url", srv.base_url, "--build-dir",
                   str(tmp_path / "build"), "--no-cache", "--agreement-n", "3",
                   "--step-model", "translate", "other", f" {srv.base_url} ", "STEP_KEY"])
        translated = [r for r in srv.requests if r.body.get("model") == "other"]
    assert rc != 3, last_line(capsys.readouterr().err)
    assert translated  # the translate step reached the server
    build = json.loads((tmp_path / "build" / "build.json").read_text(encoding="utf-8"))
    assert build["config"]["models"]["translate"]["base_url"] == srv.base_url


def test_a_limit_above_the_items_sampled_is_not_called_a_small_build_on_the_data_card(tmp_path, capsys, monkeypatch):
    """--limit 100 over the demo's 8 usable questions kept all 8, but the card's first note read "Small build:
    limited to 100 items after sampling", as if items had been left out."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    with FakeServer(answers=lambda req: "no idea") as srv:
        main(["build", "--source", DEMO, "--limit", "100", "--model", "fake", "--base-url", srv.base_url,
              "--build-dir", str(tmp_path / "build"), "--no-cache", "--agreement-n", "1"])
    assert "collected 8 (15 read: 7 unusable) → " in capsys.readouterr().out.splitlines()[0]
    card = (tmp_path / "build" / "export" / "DATA_CARD.md").read_text(encoding="utf-8")
    assert "> Limit 100 at or above the 8 items sampled: it left none out.\n" in card and "Small build" not in card
