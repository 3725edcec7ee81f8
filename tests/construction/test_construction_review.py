"""The review core API: queue, decisions saved at once, resume, split, apply in a later build."""

from __future__ import annotations

from pathlib import Path

import pytest

from cresowlve_core.construction import review as R
from cresowlve_core.construction.records import Candidate
from cresowlve_core.items import ItemView


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
    lines = (tmp_path / "review" / "decisions__Alice_Smith.jsonl").read_text().splitlines()
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
