"""The review core API: queue, decisions saved at once, resume, split, apply in a later build."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cresowlve_core.construction import review as R
from cresowlve_core.construction.records import Candidate
from cresowlve_core.failures import InputError
from cresowlve_core.items import ItemView
from cresowlve_core.text import slug


def _cands() -> list[Candidate]:
    out = []
    for i in range(5):
        c = Candidate(id=f"chgk_{i}", ru=ItemView(question=f"Вопрос {i}?", answer=f"Ответ {i}"),
                      en=ItemView(question=f"Question {i}?", answer=f"Answer {i}"))
        out.append(c.with_verdict("translate", {"flags": ["empty_tag:explanation"], "lost_placeholders": []},
                                  review_flags=["empty_tag:explanation"]))
    return out


def test_decisions_are_saved_at_once_and_a_session_resumes(tmp_path: Path) -> None:
    cands = _cands()
    R.write_queue(tmp_path, cands)
    s = R.ReviewSession(tmp_path, "Alice Smith")
    assert s.next_card()["id"] == "chgk_0" and s.progress() == (0, 5)
    assert s.next_card()["translation_flags"] == ["empty_tag:explanation"]
    s.decide("chgk_0", "keep")
    s.decide("chgk_1", "outdated")
    lines = (tmp_path / "review" / f"decisions__{slug('Alice Smith')}.jsonl").read_text().splitlines()
    assert len(lines) == 2  # on disk the moment they are made
    resumed = R.ReviewSession(tmp_path, "Alice Smith")
    assert resumed.progress() == (2, 5) and resumed.next_card()["id"] == "chgk_2"


@pytest.mark.parametrize("code, kw, match", [
    ("maybe", {}, "unknown decision"),
    ("other", {}, "needs a note"),
    ("fix_translation", {}, "at least one"),
    ("fix_translation", {"fixes": {"answer": " "}}, "cannot be empty"),
    ("fix_translation", {"fixes": {"difficulty": "3"}}, "cannot edit"),
])
def test_invalid_decisions_are_refused(tmp_path: Path, code: str, kw: dict, match: str) -> None:
    R.write_queue(tmp_path, _cands())
    s = R.ReviewSession(tmp_path, "bob")
    with pytest.raises(R.ReviewError, match=match):
        s.decide("chgk_0", code, **kw)
    with pytest.raises(R.ReviewError, match="not in this reviewer"):
        s.decide("chgk_x", "keep")
    assert not (tmp_path / "review" / "decisions__bob.jsonl").exists()


def test_split_across_reviewers(tmp_path: Path) -> None:
    R.write_queue(tmp_path, _cands())
    parts = R.split_queue([f"chgk_{i}" for i in range(5)], ["a", "b"], seed=1)
    assert sorted(parts["a"] + parts["b"]) == [f"chgk_{i}" for i in range(5)]
    assert abs(len(parts["a"]) - len(parts["b"])) <= 1
    assert parts == R.split_queue([f"chgk_{i}" for i in range(5)], ["a", "b"], seed=1)
    s = R.ReviewSession(tmp_path, "a", assigned=parts["a"])
    assert [c["id"] for c in s.cards] == sorted(parts["a"], key=lambda x: int(x.split("_")[1]))


def test_decisions_applied_in_a_later_build(tmp_path: Path) -> None:
    cands = _cands()
    R.write_queue(tmp_path, cands)
    a, b = R.ReviewSession(tmp_path, "a"), R.ReviewSession(tmp_path, "b")
    a.decide("chgk_0", "keep")
    a.decide("chgk_1", "fix_translation", fixes={"answer": "Fixed answer", "explanation": "Why."})
    a.decide("chgk_2", "russian_specific")
    a.decide("chgk_3", "keep")
    b.decide("chgk_3", "other", note="duplicate of another question")  # later: wins, conflict counted
    decisions, report = R.load_decisions(tmp_path)
    assert report["n_conflicts"] == 1 and report["reviewers"] == ["a", "b"]
    out = R.apply_decisions(cands, decisions)
    assert [c.id for c in out.kept] == ["chgk_0", "chgk_1", "chgk_4"]
    assert [c.id for c in out.removed] == ["chgk_2", "chgk_3"]
    assert out.counts["by_code"] == {"keep": 1, "fix_translation": 1, "russian_specific": 1, "other": 1,
                                     "unreviewed": 1}
    fixed = out.kept[1]
    assert fixed.en.answer == "Fixed answer" and fixed.en.explanation == "Why." and fixed.en.question == "Question 1?"
    assert not any(f.startswith("translate:") for f in fixed.review_flags)
    assert cands[1].en.answer == "Answer 1"  # inputs untouched
    assert out.removed[1].verdicts["human"]["note"] == "duplicate of another question"


def test_agreement_annotations(tmp_path: Path) -> None:
    cands = _cands()
    ids = R.agreement_sample([c.id for c in cands], 3, seed=0)
    assert len(ids) == 3 and ids == R.agreement_sample([c.id for c in cands], 3, seed=0)
    R.write_queue(tmp_path, [c for c in cands if c.id in ids], R.AGREEMENT_QUEUE)
    s = R.AnnotationSession(tmp_path, "a")
    first = s.next_card()["id"]
    s.annotate(first, reasoning_type="creative", concepts=["metaphor"], domains=["Music"], cultures=[" Russian "])
    with pytest.raises(R.ReviewError, match="unknown concept"):
        s.annotate(first, reasoning_type="creative", concepts=["banana"])
    got = R.load_annotations(tmp_path)["a"][first]
    assert got.cultures == ["russian"] and R.AnnotationSession(tmp_path, "a").progress() == (1, 3)


def test_panel_and_marimo_share_the_card(tmp_path: Path) -> None:
    from cresowlve_core.construction.review_panel import card_html, review_panel

    cands = _cands()
    R.write_queue(tmp_path, cands)
    html = card_html(R.review_card(cands[0]))
    assert "Вопрос 0?" in html and "Question 0?" in html and "empty_tag:explanation" in html
    panel = review_panel(tmp_path, "carol")
    buttons = {b.description: b for b in panel.children[4].children}
    buttons["keep"].click()  # saved at once
    assert R.ReviewSession(tmp_path, "carol").progress() == (1, 5)
    panel.children[2].children[1].value = "Edited answer"  # the English answer field
    buttons["fix translation"].click()
    d = R.ReviewSession(tmp_path, "carol").decisions["chgk_1"]
    assert d.code == "fix_translation" and d.fixes == {"answer": "Edited answer"}


# ---- agreement mode (App. B): the form's core, the ipywidgets form


def _agreement_build(tmp_path: Path) -> list[Candidate]:
    cands = [c.model_copy(update={"reasoning_type": "creative", "concepts": ["pun"], "domains": ["Music"]})
             for c in _cands()]
    R.write_queue(tmp_path, cands[:3], R.AGREEMENT_QUEUE)
    return cands


@pytest.mark.parametrize("text, expected", [
    ("Russian, French ", ["russian", "french"]),
    ("  ANCIENT   Greek;russian\nRussian,,", ["ancient greek", "russian"]),
    ("", []), (None, []), (" , ; ", []),
])
def test_parse_cultures(text, expected) -> None:
    assert R.parse_cultures(text) == expected


def test_the_agreement_sample_stays_when_a_later_build_has_an_item_fewer() -> None:
    """The sample was random.sample over the build's item list: a decision removing one item that was not
    in it (2413 -> 2412 items) replaced 48 of the 50 sampled items, and the labels reviewers had saved for
    them were left out as "an earlier sample" (a 3-item demo build: ann 1 of 3 left, 2 outside)."""
    ids = [f"chgk_{k:05d}" for k in range(2413)]
    sample = R.agreement_sample(ids, 50, seed=0)
    assert len(sample) == 50 and sample == [i for i in ids if i in set(sample)]  # input order
    unsampled = next(i for i in ids if i not in sample)
    assert R.agreement_sample([i for i in ids if i != unsampled], 50, seed=0) == sample
    gone = sample[7]  # removed in human validation: replaced by one item, the rest stay
    again = R.agreement_sample([i for i in ids if i != gone], 50, seed=0)
    assert len(again) == 50 and len(set(again) & set(sample)) == 49
    assert R.agreement_sample(ids, 50, seed=1) != sample


def test_annotation_form_core_saves_at_once_validates_and_resumes(tmp_path: Path) -> None:
    _agreement_build(tmp_path)
    s = R.AnnotationSession(tmp_path, "ann")
    first = s.next_card()["id"]
    with pytest.raises(R.ReviewError, match="choose a reasoning type"):
        s.annotate_form(first, reasoning_type=None, concepts=["pun"])
    with pytest.raises(R.ReviewError, match="unknown concept"):
        s.annotate_form(first, reasoning_type="creative", concepts=["banana"])
    with pytest.raises(R.ReviewError, match="unknown domain"):
        s.annotate_form(first, reasoning_type="creative", domains=["Cooking"])
    assert s.progress() == (0, 3)
    a = s.annotate_form(first, reasoning_type="factual", concepts=["pun", "pun", "idiom"], domains=["Music"],
                        cultures="Russian,  Ancient Greek, russian")
    assert (a.concepts, a.domains, a.cultures) == (["pun", "idiom"], ["Music"], ["russian", "ancient greek"])
    assert len((tmp_path / "review" / "annotations__ann.jsonl").read_text().splitlines()) == 1
    resumed = R.AnnotationSession(tmp_path, "ann")
    assert resumed.progress() == (1, 3) and resumed.next_card()["id"] != first
    assert R.load_annotations(tmp_path)["ann"][first].reasoning_type == "factual"


def test_agreement_panel_labels_one_item_per_save_and_resumes(tmp_path: Path) -> None:
    from cresowlve_core.construction.review_panel import AnnotationForm, review_panel
    from cresowlve_core.construction.vocab import CONCEPTS, DOMAIN_GROUPS

    _agreement_build(tmp_path)
    form = AnnotationForm(R.AnnotationSession(tmp_path, "bob"))
    assert len(form.concepts) == len(CONCEPTS) == 16 and len(form.domains) == len(DOMAIN_GROUPS) == 34
    assert "0 / 3 annotated" in form.head.value
    shown = form.card["id"]
    assert shown in form.body.value and "Question" in form.body.value
    assert "Needs material" not in form.body.value and "pun" not in form.body.value  # no model labels shown
    form.button.click()  # nothing chosen: refused, nothing saved
    assert "choose a reasoning type" in form.status.value and form.card["id"] == shown
    assert not (tmp_path / "review" / "annotations__bob.jsonl").exists()
    form.reasoning.value = "creative"
    form.concepts["metaphor"].value = form.concepts["lateral thinking"].value = True
    form.domains["Literature"].value = True
    form.cultures.value = "French, Jewish"
    form.button.click()
    saved = R.load_annotations(tmp_path)["bob"][shown]
    assert (saved.reasoning_type, saved.concepts, saved.domains, saved.cultures) == (
        "creative", ["metaphor", "lateral thinking"], ["Literature"], ["french", "jewish"])
    assert form.card["id"] != shown and "1 / 3 annotated" in form.head.value
    assert form.reasoning.value is None and not form.concepts["metaphor"].value and form.cultures.value == ""
    reopened = review_panel(tmp_path, "bob", mode="agreement")  # the panel's agreement mode resumes
    assert "1 / 3 annotated" in reopened.children[0].value
    with pytest.raises(ValueError, match="unknown mode"):
        review_panel(tmp_path, "bob", mode="labels")


# ---- a synthetic puzzle's card (no Russian view) in the panel


def _synthetic_queue(build_dir: Path) -> dict:
    from cresowlve_core.sources.kg import KnowledgeGraph
    from cresowlve_core.synthetic.export import write_review_queue
    from cresowlve_core.synthetic.facts import Candidate as SynthCandidate

    kg = KnowledgeGraph([("A1", "P69", "S12"), ("A2", "P69", "S12"), ("A1", "P166", "PA")],
                        labels={"A1": "Ann One", "A2": "Al Two", "S12": "School", "PA": "Prize"},
                        relation_labels={"P69": "educated at", "P166": "award received"}, aliases={"A1": ["Ay"]})
    cand = SynthCandidate(anchor="A1", domain="writers", facts=(("P69", "S12"), ("P166", "PA")),
                          n_match_each=(2, 1), answers=("A1",), notability=3)
    side = {"answer": "Ann One", "correct": True, "basis": "label"}
    survivor = {"candidate": cand, "verbalisation": {"obfuscated": "THIS one <b>hid</b>. Who?", "literal": "Who studied "
                "at School?", "explanation": "It is Ann."},
                "solve": {"difficulty_score": 1.0, "outcome": "kept", "literal": side, "obfuscated": side}}
    write_review_queue([survivor], kg, build_dir)
    return R.load_queue(build_dir)[0]


def test_synthetic_card_displays_in_the_panel(tmp_path: Path) -> None:
    from cresowlve_core.construction.review_panel import card_html, review_panel

    card = _synthetic_queue(tmp_path)
    assert card["ru"] is None
    out = card_html(card)
    assert "no Russian view (synthetic puzzle)" in out and "no translation" not in out
    assert "THIS one &lt;b&gt;hid&lt;/b&gt;. Who?" in out  # the puzzle, escaped
    assert "Who studied at School?" in out and "A1 — P69 — S12" in out  # literal version, source triples
    assert "difficulty unrated" in out and "synthetic" in out
    panel = review_panel(tmp_path, "ann")
    assert "0 / 1 decided" in panel.children[0].value and card["id"] in panel.children[1].value
    edits = panel.children[2].children
    assert edits[0].value == "THIS one <b>hid</b>. Who?" and edits[1].value == "Ann One"
    keep = next(b for b in panel.children[4].children if b.description == "keep")
    keep.click()
    assert R.load_decisions(tmp_path)[0][card["id"]].code == "keep"
    assert "All items decided" in panel.children[1].value


def _marimo_export(tmp_path: Path, build: Path, mode: str) -> str:
    import html
    import subprocess
    import sys
    import urllib.parse

    marimo = Path(sys.executable).parent / "marimo"
    if not marimo.exists():
        pytest.skip("marimo not installed in this environment")
    app = Path(__file__).resolve().parents[2] / "notebooks" / "review.py"
    out = tmp_path / f"{mode}.html"
    subprocess.run([str(marimo), "export", "html", str(app), "-o", str(out), "--", "--build", str(build),
                    "--mode", mode, "--reviewer", "ann"], check=True, capture_output=True, timeout=300)
    page = urllib.parse.unquote(html.unescape(out.read_text(encoding="utf-8")))
    assert "marimo+error" not in page and "Traceback" not in page  # every cell ran
    return page


def test_marimo_app_shows_a_synthetic_card_and_the_agreement_form(tmp_path: Path) -> None:
    """The app run headless (``marimo export html``) on a synthetic queue and on an agreement sample."""
    syn = tmp_path / "syn"
    card = _synthetic_queue(syn)
    page = _marimo_export(tmp_path, syn, "validation")
    assert "no Russian view (synthetic puzzle)" in page and "0 / 1 decided" in page and card["id"] in page
    agr = tmp_path / "agr"
    _agreement_build(agr)
    R.AnnotationSession(agr, "ann").annotate_form("chgk_0", reasoning_type="creative")
    page = _marimo_export(tmp_path, agr, "agreement")
    assert "agreement sample: 1 / 3 annotated" in page  # resumed after the saved annotation
    assert "chgk_1" in page and "Question 1?" in page
    assert "creative concepts (the 16 labels)" in page and "Military" in page and "lateral thinking" in page


def test_opening_a_build_without_a_queue_creates_nothing(tmp_path: Path) -> None:
    build = tmp_path / "no_such_build"
    for session in (R.ReviewSession, R.AnnotationSession):
        with pytest.raises(FileNotFoundError, match="no review queue"):
            session(build, "ann")
    assert not build.exists()  # the app's default build directory is not created by looking at it


def _review_app() -> tuple[Path, Any]:
    """The marimo review app's path and its module (``mod.app.run(defs=...)`` runs it headless)."""
    import importlib.util

    app_path = Path(__file__).resolve().parents[2] / "notebooks" / "review.py"
    spec = importlib.util.spec_from_file_location("review_app", app_path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return app_path, mod


def test_marimo_review_app_fix_fields_are_labelled_text_areas(tmp_path: Path) -> None:
    """The English fix fields used to draw as a JSON-like dictionary; now one labelled text
    area per field, with the confirmation of the last save kept in a state shown above the next card."""
    from types import SimpleNamespace

    app_path, mod = _review_app()
    R.write_queue(tmp_path, _cands())
    _, defs = mod.app.run(defs={"build_dir": SimpleNamespace(value=str(tmp_path)),
                                "reviewer": SimpleNamespace(value="carol"),
                                "mode": SimpleNamespace(value="review")})
    edits = defs["edits"]
    assert set(edits.value) == set(R.EDITABLE_FIELDS) and edits.value["question"] == "Question 0?"
    assert "mo.ui.dictionary" not in app_path.read_text() and type(edits).__name__ == "batch"
    assert defs["last"] == ""  # nothing saved yet: no confirmation shown


@pytest.mark.parametrize(("file", "line", "problem"), [
    ("decisions__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "code": "kep"}', "unknown decision 'kep'"),
    ("decisions__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann"}', "code: Field required"),
    ("decisions__ann.jsonl", '["chgk_1", "keep"]', "expected a JSON object"),
    ("decisions__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "code": "fix_translation", '
     '"fixes": {"Question": "Fixed?"}}', "cannot edit field(s) ['Question']"),
    ("decisions__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "code": "fix_translation", '
     '"fixes": {"answer": " "}}', "the English answer cannot be empty"),
    ("decisions__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "code": "fix_translation", '
     '"fixes": {"answer": "Fixed\\u0007"}}', "the English answer: control character U+0007"),
    ("decisions__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "code": "other", "note": "why \\udc80"}',
     "not valid Unicode (a lone surrogate"),
    ("annotations__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "cultures": ["russian\\udc80"]}',
     "not valid Unicode (a lone surrogate"),
    ("annotations__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "reasoning_type": "Creative"}',
     "reasoning type must be one of"),
    ("annotations__ann.jsonl", '{"item_id": "chgk_1", "reviewer": "ann", "concepts": ["banana"]}', "unknown concept"),
])
def test_a_hand_edited_review_line_is_one_error_naming_it(tmp_path: Path, file: str, line: str, problem: str) -> None:
    """A decision with a mistyped code was applied as a removal ('kep' is not a keep code) and counted
    under 'kep'; a record without a code was a pydantic traceback; a fix of a field that is not an
    English field was counted as a fix and applied as none; a fixed field with a control character
    was exported (an eval of the export refuses it); a lone surrogate escape (valid JSON) was a
    UnicodeEncodeError traceback; an annotation label outside the vocabulary was left out of the
    scoring. Each is now one error naming file:line."""
    from cresowlve_core.failures import InputError

    cands = _cands()
    R.write_queue(tmp_path, cands)
    R.write_queue(tmp_path, cands, R.AGREEMENT_QUEUE)
    good = ('{"item_id": "chgk_0", "reviewer": "ann", "code": "keep"}' if file.startswith("decisions")
            else '{"item_id": "chgk_0", "reviewer": "ann", "reasoning_type": "creative"}')
    (tmp_path / "review" / file).write_text(f"{good}\n{line}\n", encoding="utf-8")
    where = f"{tmp_path / 'review' / file}:2: "
    if file.startswith("decisions"):
        loaders = [lambda: R.load_decisions(tmp_path), lambda: R.ReviewSession(tmp_path, "ann")]
    else:
        loaders = [lambda: R.load_annotations(tmp_path), lambda: R.AnnotationSession(tmp_path, "ann")]
    for load in loaders:
        with pytest.raises(InputError) as err:
            load()
        assert str(err.value).startswith(where) and problem in str(err.value)


@pytest.mark.parametrize("kind", ["decisions", "annotations"])
def test_a_review_file_holds_the_lines_of_the_reviewer_it_is_named_after(tmp_path: Path, kind: str) -> None:
    """Another reviewer's lines pasted into a file were merged into its reviewer (bob's decision on an
    item superseded ann's, no conflict counted), and a copy of a reviewer's file replaced the
    reviewer's annotations with the copy's (the agreement scored only those). Each is now one error
    naming file:line."""
    from cresowlve_core.failures import InputError

    cands = _cands()
    R.write_queue(tmp_path, cands)
    R.write_queue(tmp_path, cands, R.AGREEMENT_QUEUE)
    value = '"code": "keep"' if kind == "decisions" else '"reasoning_type": "creative"'
    load = R.load_decisions if kind == "decisions" else R.load_annotations
    review = tmp_path / "review"
    pasted = review / f"{kind}__ann.jsonl"
    pasted.write_text(f'{{"item_id": "chgk_0", "reviewer": "ann", {value}}}\n'
                      f'{{"item_id": "chgk_0", "reviewer": "bob", {value}}}\n', encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{re.escape(str(pasted))}:2: .*reviewer 'bob' in a file of reviewer 'ann'"):
        load(tmp_path)
    pasted.write_text(f'{{"item_id": "chgk_0", "reviewer": "ann", {value}}}\n', encoding="utf-8")
    saved = R.load_decisions(tmp_path)[0] if kind == "decisions" else R.load_annotations(tmp_path)["ann"]
    assert list(saved) == ["chgk_0"]  # the reviewer's own file alone is read
    copy = review / f"{kind}__ann (copy).jsonl"
    copy.write_text(pasted.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{re.escape(str(copy))}:1: .*reviewer 'ann' in a file of reviewer 'ann \(copy\)'"):
        load(tmp_path)


def test_the_marimo_review_app_shows_a_review_file_it_cannot_read(tmp_path: Path) -> None:
    """The app showed the FileNotFoundError and ReviewError of opening a session, but any other
    error of reading the reviewer's file (a hand-edited line) was a traceback in the cell."""
    from types import SimpleNamespace

    app_path, mod = _review_app()
    R.write_queue(tmp_path, _cands())
    (tmp_path / "review" / "decisions__carol.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "carol", "code": "kep"}\n', encoding="utf-8")
    outputs, defs = mod.app.run(defs={"build_dir": SimpleNamespace(value=str(tmp_path)),
                                      "reviewer": SimpleNamespace(value="carol"),
                                      "mode": SimpleNamespace(value="review")})
    assert defs["session"] is None
    assert any("decisions__carol.jsonl:1: not a saved decision" in str(getattr(o, "text", o)) for o in outputs)


def test_the_marimo_review_app_shows_ids_and_names_in_its_messages_as_text(tmp_path: Path) -> None:
    """The app put the save confirmation ("saved keep for <id>") and the error of opening a session (a
    hand-edited line's item id) into mo.md as they were, and marimo's Markdown passes raw HTML
    through: an item id from a dataset file such as <img src=x onerror=...> ran in the reviewer's
    browser. Both are now shown as text (untrusted.markdown)."""
    import html
    import json
    from types import SimpleNamespace

    def message_html(outputs: list[Any], words: str) -> str:
        """The HTML of the app's message holding ``words``: a Markdown output's own, or a callout's (the
        data-html attribute, JSON-encoded)."""
        texts = [str(getattr(o, "text", o)) for o in outputs]
        texts += [json.loads(html.unescape(a)) for t in texts for a in re.findall(r"data-html='([^']*)'", t)]
        return next(t for t in texts if words in t and "data-html" not in t)

    evil = "<img src=x onerror=alert(1)>"
    _, mod = _review_app()
    R.write_queue(tmp_path, [Candidate(id=f"chgk_{evil}", ru=ItemView(question="Вопрос?", answer="Ответ"))])
    dirs = {"build_dir": SimpleNamespace(value=str(tmp_path)), "reviewer": SimpleNamespace(value="carol"),
            "mode": SimpleNamespace(value="review")}
    session = R.ReviewSession(tmp_path, "carol")
    outputs, _ = mod.app.run(defs={**dirs, "session": session, "problem": None, "get_saved": lambda: 0, "set_saved": lambda f: None,
                                   "set_message": lambda m: None, "get_message": lambda: f"saved keep for chgk_{evil}"})
    shown = message_html(outputs, "saved keep")
    assert "saved keep for chgk_&lt;img" in shown and "<img" not in shown
    (tmp_path / "review" / "decisions__carol.jsonl").write_text(
        f'{{"item_id": "{evil}", "reviewer": "carol", "code": "kep"}}\n', encoding="utf-8")
    outputs, defs = mod.app.run(defs=dirs)
    shown = message_html(outputs, "unknown decision")
    assert defs["session"] is None and "&lt;img" in shown and "<img" not in shown


def test_final_items_no_reviewer_decided_on_are_counted_in_the_funnel() -> None:
    """A build nobody reviewed showed '−human validation 0 | =final 7' beside the paper's human-validated
    2,413, and '−review 0 → final 7' on its line; the unreviewed items were in 'final' without a word
    there. The funnel now has a row for them (paper: 0) and the report's headline counts them."""
    from cresowlve_core.construction.export import PAPER_FUNNEL, data_card, funnel_headline, funnel_rows

    counts = {"collected": 8, "needs_material": 0, "russian_specific": 1, "human_validation": 1, "final": 6,
              "unreviewed": 5, "factual": 1, "creative": 5}
    rows = funnel_rows(counts)
    assert [r["step"] for r in rows][4:6] == ["=final", "of which not human-validated"]
    assert rows[5] == {"step": "of which not human-validated", "this build": 5, "paper": 0}
    assert "; 5 not human-validated; the paper: " in funnel_headline(rows)
    card = data_card({"name": "t"}, counts, [])
    assert "| of which not human-validated | 5 | 0 |" in card and "unreviewed =" not in card
    reviewed = funnel_rows({**counts, "unreviewed": 0})
    assert "of which not human-validated" not in [r["step"] for r in reviewed] and len(reviewed) == len(PAPER_FUNNEL)


def test_the_data_card_says_where_reviewers_disagreed_and_which_decisions_were_not_applied() -> None:
    """Conflicts between reviewers were counted in steps_summary.json only, and decisions for items a
    rebuilt build no longer has were dropped without a word; the card now says both."""
    from cresowlve_core.construction.export import data_card

    card = data_card({"name": "t", "review_codes": {"keep": 2}, "review_conflicts": 1, "review_not_in_build": 3},
                     {}, [])
    assert "Reviewers disagreed on 1 item(s); the latest decision was applied." in card
    assert "3 saved decision(s) are for items not in this build" in card
    quiet = data_card({"name": "t", "review_codes": {"keep": 2}}, {}, [])
    assert "disagreed" not in quiet and "not in this build" not in quiet


def test_a_conflict_decided_against_a_decision_with_no_time_is_said_so(tmp_path: Path) -> None:
    """A hand-written decision without 'at' sorts before every dated one, so it lost any conflict, and the
    card said 'the latest decision was applied' of a decision whose time nobody knows."""
    from cresowlve_core.construction.export import data_card

    R.write_queue(tmp_path, _cands())
    R.ReviewSession(tmp_path, "ann").decide("chgk_0", "keep")
    (tmp_path / "review" / "decisions__bob.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "bob", "code": "outdated"}\n', encoding="utf-8")
    decisions, report = R.load_decisions(tmp_path)
    assert decisions["chgk_0"].code == "keep" and (report["n_conflicts"], report["n_undated_conflicts"]) == (1, 1)
    card = data_card({"name": "t", "review_conflicts": 1, "review_undated_conflicts": 1}, {}, [])
    assert "the latest decision was applied (on 1 of them a decision has no time, `at`" in card


def test_the_latest_decision_wins_across_time_zones_and_an_at_that_is_no_time_is_an_error(tmp_path: Path) -> None:
    """Conflicts were settled by sorting ``at`` as text: bob's 23:30+05:00 (18:30 UTC) beat ann's 20:00 UTC
    keep, and a hand-written ``"at": "yesterday"`` beat every dated decision, while the card said "the latest
    decision was applied"."""
    from cresowlve_core.failures import InputError

    R.write_queue(tmp_path, _cands())
    review = tmp_path / "review"
    (review / "decisions__ann.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "ann", "code": "keep", "at": "2026-12-07T20:00:00+00:00"}\n', encoding="utf-8")
    (review / "decisions__bob.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "bob", "code": "outdated", "at": "2026-12-07T23:30:00+05:00"}\n',
        encoding="utf-8")
    decisions, report = R.load_decisions(tmp_path)
    assert decisions["chgk_0"].reviewer == "ann" and decisions["chgk_0"].code == "keep"
    assert report["n_conflicts"] == 1

    (review / "decisions__bob.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "bob", "code": "keep", "at": "2026-12-07T23:30:00+05:00"}\n'
        '{"item_id": "chgk_0", "reviewer": "bob", "code": "outdated", "at": "yesterday"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"decisions__bob\.jsonl:2: not a saved decision \('at' must be an ISO 8601 "
                                         r"time with a time zone.*got 'yesterday'\)"):
        R.load_decisions(tmp_path)
    (review / "decisions__bob.jsonl").write_text(  # a time with no zone could be anyone's 09:00
        '{"item_id": "chgk_0", "reviewer": "bob", "code": "outdated", "at": "2026-12-07 09:00"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"decisions__bob\.jsonl:1: .*got '2026-12-07 09:00'"):
        R.load_decisions(tmp_path)


@pytest.mark.parametrize("kind, line, field", [
    # the reviewer's concepts under another name were read as "not labelled", and the card said so
    (R.Annotation, '{"item_id": "chgk_0", "reviewer": "ann", "reasoning_type": "creative", "concept": ["metaphor"]}',
     "concept"),
    # the reviewer's reasoning type under another name: "a reviewer gave no reasoning type"
    (R.Annotation, '{"item_id": "chgk_0", "reviewer": "ann", "reasoning": "creative", "concepts": []}', "reasoning"),
    # the fix under another name: applied as a keep of the translation the reviewer meant to fix
    (R.Decision, '{"item_id": "chgk_0", "reviewer": "ann", "code": "keep", "fix": {"answer": "Answer zero"}}', "fix"),
])
def test_a_review_line_with_a_field_under_another_name_is_an_error_naming_it(tmp_path: Path, kind: Any, line: str,
                                                                             field: str) -> None:
    from cresowlve_core.failures import InputError

    path = tmp_path / f"{R.REVIEW_FILE_PREFIX[kind]}ann.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"ann\.jsonl:1: not a saved {kind.__name__.lower()} \({field}: Extra inputs"):
        R.read_review_file(path, kind)


def test_edited_english_fields_with_another_decision_than_fix_translation_are_an_error(tmp_path: Path) -> None:
    """A keep carrying edited English fields was applied as a plain keep: the edit was dropped without a
    word and the item counted as human-validated with the translation the reviewer had corrected."""
    from cresowlve_core.failures import InputError

    R.write_queue(tmp_path, _cands())
    with pytest.raises(R.ReviewError, match=r"decision 'keep' with edited English field\(s\) \['answer'\]"):
        R.ReviewSession(tmp_path, "ann").decide("chgk_0", "keep", fixes={"answer": "Answer zero"})
    (tmp_path / "review" / "decisions__ann.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "ann", "code": "keep", "fixes": {"answer": "Answer zero"}}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"decisions__ann\.jsonl:1: not a saved decision \(decision 'keep' with edited"):
        R.load_decisions(tmp_path)


def test_decisions_a_build_did_not_apply_with_no_review_are_named_on_its_line_and_card(tmp_path: Path) -> None:
    """With --no-review the saved decisions were dropped before they were counted: the card listed every
    item as unreviewed and its decisions as none, and said nothing of the decisions left unapplied."""
    from cresowlve_core.construction.build import Build, BuildConfig
    from cresowlve_core.construction.export import data_card

    build = Build(BuildConfig(build_dir=str(tmp_path), apply_review=False), progress=False, clients={}).open()
    build.cands = _cands()
    build.review()
    session = R.ReviewSession(tmp_path, "ann")
    session.decide("chgk_0", "keep")
    session.decide("chgk_1", "outdated")
    summary = build.review()
    assert summary["by_code"] == {"unreviewed": 5} and summary["n_decisions_not_applied"] == 2
    assert "(5 not human-validated) (2 saved review decision(s) not applied: --no-review)" in build.summary_line()
    card = data_card({"name": "t", "review_codes": summary["by_code"],
                      "review_not_applied": summary["n_decisions_not_applied"]}, build.funnel, [])
    assert "2 saved decision(s) were not applied (the build ran with `--no-review`)" in card
    build.close()


def test_a_label_from_a_model_stays_one_cell_of_the_data_cards_tables() -> None:
    """Cultures and domains are written by the annotating model: a ``|`` in one used to end its cell
    (the row gained a column) and a tag went into the Markdown file as HTML."""
    from cresowlve_core.construction.export import data_card
    from cresowlve_core.items import Item

    hostile = "Russian | Soviet\n<img src=x onerror=alert(1)>"
    item = Item(id="chgk_1", en=ItemView(question="Q?", answer="A"), cultures=[hostile], reasoning_type="creative")
    card = data_card({"name": "t", "models": {"annotate": {"model": "m|x", "role": "<b>a</b>"}}}, {}, [item])
    row = next(line for line in card.splitlines() if "Soviet" in line)
    assert row == "| Russian \\| Soviet \\<img src=x onerror=alert(1)\\> | 1 |"
    models = next(line for line in card.splitlines() if line.startswith("| annotate"))
    assert models.count(" | ") == 2 and "m\\|x" in models
    # rendered (as the 01 report shows the card): the label and the name are text, in their own cells
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    from cresowlve_core.untrusted import markdown

    html = markdown2html_mistune(markdown(card))
    assert "<img" not in html and "<b>" not in html
    assert "<td>Russian | Soviet &lt;img src=x onerror=alert(1)&gt;</td>" in html


def test_a_reviewer_sees_the_pack_parsers_flags(tmp_path: Path) -> None:
    # a block with two "Ответ:" fields is read with both answers merged and flagged duplicate_field:answer;
    # the queue and the card showed "Flags: none", so the merged answer went out unseen
    from cresowlve_core.construction.review_panel import card_html

    c = Candidate(id="chgk_dup", ru=ItemView(question="Назовите её.", answer="Марс.\nЮпитер."),
                  parser_flags=["duplicate_field:answer"])
    R.write_queue(tmp_path, [c])
    card = R.ReviewSession(tmp_path, "alice").next_card()
    assert card["parser_flags"] == ["duplicate_field:answer"]
    assert "<b>Flags</b>: parser:duplicate_field:answer" in card_html(card)


def test_a_keep_made_on_another_translation_is_not_applied(tmp_path: Path) -> None:
    # a reviewer kept an item after reading translation A; the translation was run again (another model,
    # archive_changed) and B, which no human read, was exported as human-validated
    cands = _cands()[:2]
    R.write_queue(tmp_path, cands)
    s = R.ReviewSession(tmp_path, "alice")
    for c in cands:
        s.decide(c.id, "keep")
    retranslated = [cands[0].model_copy(update={"en": ItemView(question="Another question?", answer="Other")}),
                    cands[1]]
    decisions, _ = R.load_decisions(tmp_path)
    out = R.apply_decisions(retranslated, decisions)
    assert out.counts["by_code"] == {"stale": 1, "keep": 1} and len(out.kept) == 2
    stale = next(c for c in out.kept if c.id == cands[0].id)
    assert "human:stale_decision" in stale.review_flags and "human" not in stale.verdicts
    R.write_queue(tmp_path, retranslated)  # the next build's queue: the item is to be decided again
    assert [c["id"] for c in R.ReviewSession(tmp_path, "alice").pending] == [cands[0].id]
    # a fix made while there was no translation is not applied on top of one that came later
    R.write_queue(tmp_path, [cands[1].model_copy(update={"en": None})])
    R.ReviewSession(tmp_path, "bob").decide(cands[1].id, "fix_translation", fixes={"question": "Fixed?"})
    bob = R.load_decisions(tmp_path)[0][cands[1].id]
    assert bob.reviewer == "bob" and R.apply_decisions([cands[1]], {cands[1].id: bob}).counts["by_code"] == {
        "stale": 1}
    # a decision saved before decisions recorded their English view is applied as it is
    old = {k: d.model_copy(update={"en_digest": None}) for k, d in decisions.items()}
    assert R.apply_decisions(retranslated, old).counts["by_code"] == {"keep": 2}


@pytest.mark.parametrize(("line", "problem"), [
    ('{"en": {"question": "q", "answer": "a"}}', "a review card needs an 'id' (a non-empty string), got None"),
    ('{"id": 5}', "a review card needs an 'id' (a non-empty string), got 5"),
    ('{"id": "chgk_0", "en": "Question 0?"}', "the card's 'en' view is not an object"),
    ('{"id": "chgk_0", "ru": ["Вопрос"]}', "the card's 'ru' view is not an object"),
])
def test_a_review_card_a_session_cannot_use_is_one_error_naming_its_line(tmp_path: Path, line: str,
                                                                          problem: str) -> None:
    """A queue card without an id, or with a view that is not an object, raised KeyError 'id' or
    AttributeError ("'str' object has no attribute 'get'") in the review app's cells; a numeric id was
    shown and its decision never matched a string id."""
    from types import SimpleNamespace

    R.write_queue(tmp_path, _cands())
    queue = tmp_path / "review" / R.QUEUE
    queue.write_text(queue.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    with pytest.raises(R.InputError, match=re.escape(f"{queue}:6: {problem}")):
        R.ReviewSession(tmp_path, "carol")
    _, mod = _review_app()
    _, defs = mod.app.run(defs={"build_dir": SimpleNamespace(value=str(tmp_path)),
                                "reviewer": SimpleNamespace(value="carol"), "mode": SimpleNamespace(value="review")})
    assert defs["session"] is None and defs["card"] is None


@pytest.mark.parametrize("kind", ["decisions", "annotations"])
@pytest.mark.parametrize("first, second", [("Dan", "dan"), ("Jos\u00e9", "Jose\u0301"), ("Ann Lee", "ann  lee")])
def test_two_spellings_of_one_reviewer_are_one_reviewer_never_two(tmp_path: Path, kind: str, first: str,
                                                                    second: str) -> None:
    """Names that differ only in letter case, Unicode normalisation form (é as one character or as e
    and a combining accent) or spacing were two reviewers, each with a file: the agreement counted
    "Dan" and "dan" as two raters of every item and scored only the items both labelled, and the
    decisions listed both as reviewers. A session under the second spelling is now refused, naming
    the first's file; a folder holding both files is one error naming both."""
    from cresowlve_core.failures import InputError

    cands = _cands()
    R.write_queue(tmp_path, cands)
    R.write_queue(tmp_path, cands, R.AGREEMENT_QUEUE)
    if kind == "decisions":
        open_session: Any = R.ReviewSession
        load: Any = R.load_decisions
        R.ReviewSession(tmp_path, first).decide("chgk_0", "keep")
    else:
        open_session, load = R.AnnotationSession, R.load_annotations
        R.AnnotationSession(tmp_path, first).annotate("chgk_0", reasoning_type="creative")
    saved = tmp_path / "review" / f"{kind}__{slug(first)}.jsonl"
    with pytest.raises(R.ReviewError, match=rf"is reviewer {re.escape(repr(first))}( \(.*\))? of {re.escape(str(saved))} "
                                            r"\(names that differ only in letter case"):
        open_session(tmp_path, second)
    assert sorted(p.name for p in (tmp_path / "review").iterdir() if p.name.startswith(kind)) == [saved.name]
    value = '"code": "keep"' if kind == "decisions" else '"reasoning_type": "factual"'
    other = tmp_path / "review" / f"{kind}__{slug(second)}.jsonl"  # the second file, written by hand
    other.write_text(f'{{"item_id": "chgk_0", "reviewer": "{second}", {value}}}\n', encoding="utf-8")
    for loader in (lambda: load(tmp_path), lambda: open_session(tmp_path, first)):
        with pytest.raises(InputError, match=r"is reviewer .* of .*: names that differ only in letter case, Unicode "
                                             r"normalisation form or spacing are one reviewer") as err:
            loader()
        assert {str(saved), str(other)} <= set(re.findall(r"/\S+\.jsonl", str(err.value)))


@pytest.mark.parametrize("name", ["annotations_dan.jsonl", "dan.json", "decisions__dan.jsonl.bak",
                                  "Decisions__dan.jsonl", "decisions__dan.json"])
def test_a_file_in_the_review_folder_the_build_would_not_read_is_an_error_naming_it(tmp_path: Path, name: str) -> None:
    """A reviewer's labels saved as annotations_dan.jsonl (one underscore) or dan.json were left out of the
    agreement without a word: the build scored the other reviewers alone. Now the loaders the build calls
    raise one error naming the file; the files a build itself leaves there (a queue's .tmp, a review file's
    .torn), hidden files and folders are not looked at."""
    from cresowlve_core.failures import InputError

    cands = _cands()
    R.write_queue(tmp_path, cands)
    R.write_queue(tmp_path, cands, R.AGREEMENT_QUEUE)
    R.AnnotationSession(tmp_path, "ann").annotate("chgk_0", reasoning_type="creative")
    R.ReviewSession(tmp_path, "ann").decide("chgk_0", "keep")
    review = tmp_path / "review"
    for left in ("queue.jsonl.tmp", "decisions__ann.jsonl.torn", ".annotations__ann.jsonl.swp", "old/dan.json"):
        (review / left).parent.mkdir(exist_ok=True)
        (review / left).write_text("{}\n", encoding="utf-8")
    assert list(R.load_annotations(tmp_path)) == ["ann"] and list(R.load_decisions(tmp_path)[0]) == ["chgk_0"]
    stray = review / name
    stray.write_text('{"item_id": "chgk_1", "reviewer": "dan", "reasoning_type": "factual"}\n', encoding="utf-8")
    for load in (R.load_annotations, R.load_decisions):
        with pytest.raises(InputError, match=rf"^{re.escape(str(stray))}: not a review file, so not read: .*"
                                             r"annotations__<reviewer>\.jsonl; rename it so"):
            load(tmp_path)


@pytest.mark.parametrize("reviewers", [["ann", "bob", "ann"], ["Dan", "bob", "dan"]])
def test_a_reviewer_named_twice_in_a_split_is_an_error_not_two_shares(reviewers: list[str]) -> None:
    """split_queue(9 ids, ["ann", "bob", "ann"]) gave ann 6 items and bob 3 (its sizes "differ by at most
    one"), and ["Dan", "bob", "dan"] gave one reviewer two shares, the second under a name whose session is
    refused. Each is now an error naming the reviewer."""
    with pytest.raises(R.ReviewError, match=rf"reviewer {reviewers[2]!r} is named twice \({reviewers[0]!r} and"):
        R.split_queue([f"chgk_{i}" for i in range(9)], reviewers)


def test_a_fix_that_leaves_no_english_question_is_counted_as_not_applied_once(tmp_path: Path) -> None:
    """An item with no translation, fixed in its answer only: the fix was not applied (no English question),
    yet the card's "decisions by code" counted it under fix_translation and again under fix_incomplete (2 + 1
    rows for 2 items). Each item is now under one code, what was done to it, and the card says why."""
    from cresowlve_core.construction.export import data_card

    cands = _cands()
    cands[0] = cands[0].model_copy(update={"en": None})
    R.write_queue(tmp_path, cands)
    s = R.ReviewSession(tmp_path, "ann")
    s.decide("chgk_0", "fix_translation", fixes={"answer": "Switzerland"})
    s.decide("chgk_1", "fix_translation", fixes={"answer": "Fixed answer"})
    out = R.apply_decisions(cands, R.load_decisions(tmp_path)[0])
    assert out.counts["by_code"] == {"fix_incomplete": 1, "fix_translation": 1, "unreviewed": 3}
    assert sum(out.counts["by_code"].values()) == len(cands)
    assert out.kept[0].en is None and "human:fix_incomplete" in out.kept[0].review_flags
    assert out.kept[1].en is not None and out.kept[1].en.answer == "Fixed answer"
    card = data_card({"name": "t", "review_codes": out.counts["by_code"]}, {}, [])
    assert "| fix_translation | 1 |" in card and "| fix_incomplete | 1 |" in card
    assert "1 fix_translation decision(s) left the English question or answer empty" in card


def test_a_review_file_named_by_hand_after_a_non_ascii_reviewer_names_the_file_the_reviewer_has(tmp_path: Path) -> None:
    """decisions__José.jsonl written by hand for reviewer José was "reviewer 'José' in a file of reviewer
    'José'", an error that named no way out (a non-ASCII name's file carries a hash). It now names the file."""
    from cresowlve_core.failures import InputError

    R.write_queue(tmp_path, _cands())
    (tmp_path / "review" / "decisions__José.jsonl").write_text(
        '{"item_id": "chgk_0", "reviewer": "José", "code": "keep"}\n', encoding="utf-8")
    expected = re.escape(f"decisions__{slug('José')}.jsonl")
    with pytest.raises(InputError, match=rf"the file of reviewer 'José' is {expected}\)$"):
        R.load_decisions(tmp_path)


def _models_json(build: Path, model: str, embedded: bool) -> None:
    """``build.json``'s step models, as ``Build`` records them (the main job names its embedded server by URL)."""
    step = {"model": model, "base_url": "http://127.0.0.1:8765/v1", "api_key_env": None, "embedded": embedded}
    (build / "build.json").write_text(json.dumps({"config": {}, "models": {"needs_material": step,
                                                                          "translate": step}}), encoding="utf-8")


def test_review_of_a_build_on_the_embedded_model_carries_the_banner(tmp_path: Path) -> None:
    """The review apps showed the embedded 270M model's filter verdicts and translations as plain
    verdicts ("Needs material: LLM False"), with no banner, where the explorer and the annotation
    app carry it."""
    from types import SimpleNamespace

    from cresowlve_core.construction.review_panel import review_panel

    R.write_queue(tmp_path, _cands())
    _models_json(tmp_path, "gemma3-270m", True)
    assert R.embedded_models(tmp_path) == ["gemma3-270m"]
    for mode in ("validation", "agreement"):
        if mode == "agreement":
            R.write_queue(tmp_path, _cands()[:2], name=R.AGREEMENT_QUEUE)
        panel = review_panel(tmp_path, "carol", mode=mode)
        assert "EMBEDDED 270M BASE MODEL" in panel.children[0].value and "gemma3-270m" in panel.children[0].value
    _app_path, mod = _review_app()
    outputs, _defs = mod.app.run(defs={"build_dir": SimpleNamespace(value=str(tmp_path)),
                                       "reviewer": SimpleNamespace(value="carol"),
                                       "mode": SimpleNamespace(value="review")})
    assert any("EMBEDDED 270M BASE MODEL" in str(getattr(o, "text", o)) for o in outputs)
    # a synthetic build names its served models in summary.json
    syn = tmp_path / "syn"
    syn.mkdir()
    (syn / "summary.json").write_text(json.dumps({"served_models": {"verbalise": {"gemma3-270m": 4}}}), encoding="utf-8")
    assert R.embedded_models(syn) == ["gemma3-270m"]


def test_review_of_a_build_on_a_real_model_has_no_banner(tmp_path: Path) -> None:
    from cresowlve_core.construction.review_panel import review_panel

    R.write_queue(tmp_path, _cands())
    _models_json(tmp_path, "gpt-4o", False)
    assert R.embedded_models(tmp_path) == []
    assert "EMBEDDED" not in review_panel(tmp_path, "carol").children[0].value
    (tmp_path / "build.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="build.json: cannot be read"):
        R.embedded_models(tmp_path)
