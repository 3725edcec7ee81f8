"""Error labelling: the parser on every reply form, the messages, and a labelling run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeserver import FakeServer, Reply

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.error_analysis import collect_wrong, label_messages, parse_label
from cresowlve_core.error_analysis.taxonomy import CATEGORIES, FEW_SHOT, SLUGS
from cresowlve_core.items import Item, ItemView
from cresowlve_core.runtime import ClientOptions


@pytest.mark.parametrize("reply, expected", [
    ("RATIONALE: it never links the orbit.\nCATEGORY: Missing creative connection", "missing_creative_connection"),
    ("RATIONALE: x\nCATEGORY: overthinking", "overthinking"),
    ("**Rationale:** x\n**Category:** Wrong reference", "wrong_reference"),
    ("Category: 3", "hallucination"),
    ("CATEGORY: 7. Clue misinterpretation.", "clue_misinterpretation"),
    ("category: incorrect_concept_anchoring", "incorrect_concept_anchoring"),
    ("CATEGORY: Hallucination or unsupported fabrication", "hallucination"),
    ("CATEGORY: \"Wrong hypothesis\"", "wrong_hypothesis"),
    ("CATEGORY: overthinking\nthen more thought\nCATEGORY: Wrong reference", "wrong_reference"),  # last one counts
    ("CATEGORY: ran out of time", "other: ran out of time"),
    ("CATEGORY: Other: ran out of time", "other: ran out of time"),  # named "other" once, not "other: other: ..."
])
def test_parse_label_forms(reply, expected):
    label = parse_label(reply)
    assert label is not None and label.category == expected


@pytest.mark.parametrize("reply", [None, "", "I think it is overthinking.", "CATEGORY:", "CATEGORY: **",
                                   "<one or two sentences>\n<one category name>"])
def test_malformed_labeller_output_is_unlabelled(reply):
    assert parse_label(reply) is None


def test_rationale_is_read_and_other_is_not_in_taxonomy():
    lab = parse_label("RATIONALE: picks teeth instead of jaws.\nCATEGORY: Clue misinterpretation")
    assert lab.rationale == "picks teeth instead of jaws." and lab.in_taxonomy
    assert not parse_label("CATEGORY: laziness").in_taxonomy


def test_parse_label_is_linear_on_huge_input():
    # only the tail is read: a category line after a megabyte of text still counts, quickly
    assert parse_label("x " * 500_000 + "\nCATEGORY: overthinking").category == "overthinking"
    assert parse_label("CATEGORY: " + "x" * 1_000_000) is None  # the line start is outside the tail


def test_taxonomy_has_seven_categories_and_one_example_each():
    assert len(CATEGORIES) == 7 and len(set(SLUGS)) == 7
    assert sorted(ex.category for ex in FEW_SHOT) == sorted(SLUGS)


def _items(n: int) -> list[Item]:
    return [Item(id=f"chgk_{i:010x}", en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}",
                                                 explanation=f"Because {i}.", other_answers=f"Alt{i}"),
                 ru=ItemView(question=f"Вопрос номер {i}: кто такой ИКС в этой загадке?", answer=f"Ответ{i}"))
            for i in range(n)]


def write_run(root: Path, lang: str, items: list[Item], correct: dict[str, bool], *, model: str = "m",
              judged: dict[str, bool] | None = None) -> Path:
    """A run directory as the evaluation writes it (strict EM from ``correct``; judge where given)."""
    items_path = root / "items.jsonl"
    items_path.write_text("".join(json.dumps(it.model_dump(), ensure_ascii=False) + "\n" for it in items))
    d = root / f"{model}__{lang}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps({
        "run_id": d.name, "kind": "eval", "model": model, "base_url": "http://127.0.0.1:1/v1", "lang": lang,
        "items": str(items_path), "n_items": len(items), "finished_at": "2026-01-01T00:00:00Z"}))
    lines = []
    for it in items:
        rec = {"id": it.id, "lang": lang, "status": "ok", "model": model, "prediction": f"guess {it.id}",
               "raw_output": f"I think about {it.id}.\n<Answer>guess</Answer>", "thoughts": None,
               "em_strict": correct[it.id], "em_lenient": correct[it.id]}
        if judged and it.id in judged:
            rec |= {"judge_status": "scored", "judge_verdict": "CORRECT" if judged[it.id] else "INCORRECT"}
        lines.append(json.dumps(rec, ensure_ascii=False))
    (d / "responses.jsonl").write_text("\n".join(lines) + "\n")
    return d


def test_wrong_has_one_basis_per_configuration(tmp_path):
    """Judge coverage 2 of 4 (< 90%): every answer is graded by strict EM, none by the judge
    (before: item1 wrong by the judge, item2 by EM, item0 right by the judge, a mix of bases)."""
    items = _items(4)
    ids = [it.id for it in items]
    em = dict(zip(ids, [False, True, False, True]))
    write_run(tmp_path, "en", items, em, judged={ids[0]: True, ids[1]: False})
    wrong, tally = collect_wrong(load_runs(str(tmp_path / "m__*")))
    assert {(w.id, w.basis) for w in wrong} == {(ids[0], "em_strict"), (ids[2], "em_strict")}
    row = tally.iloc[0]
    assert row[["basis", "n_wrong", "n_right", "n_wrong_judge", "n_wrong_em"]].tolist() == ["em_strict", 2, 2, 0, 2]
    assert row["judge_coverage"] == pytest.approx(0.5)
    # every item judged: the judge decides every answer
    write_run(tmp_path, "en", items, em, judged=dict(zip(ids, [True, False, True, True])))
    wrong, tally = collect_wrong(load_runs(str(tmp_path / "m__*")))
    assert {(w.id, w.basis) for w in wrong} == {(ids[1], "judge")} and tally.iloc[0]["basis"] == "judge"
    w = wrong[0]
    assert w.explanation == "Because 1." and w.other_answers == "Alt1" and "I think" in w.reasoning


def test_label_messages_show_everything_the_labeller_needs(tmp_path):
    items = _items(1)
    write_run(tmp_path, "en", items, {items[0].id: False})
    (w,), _ = collect_wrong(load_runs(str(tmp_path / "m__*")))
    (msg,), tag = label_messages(w)
    text = msg["content"]
    for part in ("Puzzle number 0", "Answer0", "Because 0.", "Alt0", "I think about", "guess chgk_", "CATEGORY:"):
        assert part in text
    assert tag == "error_label@1"
    for c in CATEGORIES:
        assert c.name in text


def test_label_run_labels_counts_other_and_unlabelled(tmp_path):
    from cresowlve_core.error_analysis.distribution import distribution, label_frame
    from cresowlve_core.error_analysis.label import label_errors
    from cresowlve_core.explore import LABEL_WITHHELD, read_labels

    items = _items(7)
    write_run(tmp_path, "en", items, {it.id: False for it in items})
    wrong, _ = collect_wrong(load_runs(str(tmp_path / "m__*")))
    replies = {0: "RATIONALE: a\nCATEGORY: Overthinking", 1: "RATIONALE: b\nCATEGORY: Wrong reference",
               2: "RATIONALE: c\nCATEGORY: laziness", 3: "no idea", 4: "CATEGORY: Overthinking", 5: "CATEGORY: 1",
               6: Reply(text="", refusal="I can't help with that")}  # a refusal is no reply without a category

    def answer(req):
        n = int(req.prompt.split("<puzzle>\nPuzzle number ")[1].split(":")[0])
        return replies[n]

    with FakeServer(answers=answer) as srv:
        res = label_errors(wrong, tmp_path / "labels", model="labeller", base_url=srv.base_url,
                           options=ClientOptions(cache=False, max_attempts=1), progress=False)
        assert srv.total == 7
    lf = label_frame(wrong, res.records)
    assert lf["state"].value_counts().to_dict() == {"labelled": 5, "unlabelled": 1, "withheld": 1}
    dist = distribution(lf)
    k = dist.set_index("category")["k"]
    assert k["overthinking"] == 2 and k["other"] == 1 and k["missing_creative_connection"] == 1
    assert (dist["n"].iloc[0], dist["n_unlabelled"].iloc[0], dist["n_withheld"].iloc[0]) == (5, 1, 1)
    summary = json.loads((tmp_path / "labels" / "summary.json").read_text())
    assert summary["n_unlabelled"] == 1 and summary["n_other"] == 1 and summary["n_refused"] == 1
    notes: list[str] = []
    states = read_labels([tmp_path / "labels" / "labels.jsonl"], notes).groupby("state")["category"].agg(set)
    assert states["withheld"] == {LABEL_WITHHELD} and states["unlabelled"] == {"(unlabelled)"}  # the explorer's view
    manifest = json.loads((tmp_path / "labels" / "manifest.json").read_text())
    assert manifest["kind"] == "error_label" and manifest["prompts"] == ["error_label@1"]


def test_a_resume_of_unlabelled_replies_is_not_called_labelled(tmp_path):
    """A re-run after a labeller whose replies named no category sends nothing, and its line read
    'labelled 0 of 2 wrong answers (2 unlabelled, ...); nothing sent (every wrong answer was already
    labelled)': the replies are in hand, not labels."""
    from cresowlve_core.cli.errors import label_line
    from cresowlve_core.error_analysis.label import label_errors

    items = _items(2)
    write_run(tmp_path, "en", items, {it.id: False for it in items})
    wrong, _ = collect_wrong(load_runs(str(tmp_path / "m__*")))
    with FakeServer(answers=lambda req: "no idea") as srv:
        for _ in range(2):  # the second run resumes: every reply is already recorded
            res = label_errors(wrong, tmp_path / "labels", model="labeller", base_url=srv.base_url,
                               options=ClientOptions(cache=False, max_attempts=1), progress=False)
        assert srv.total == 2 and res.n_sent == 0
    summary = json.loads((tmp_path / "labels" / "summary.json").read_text())
    line = label_line(summary, res.n_sent, tmp_path / "labels" / "labels.jsonl")
    assert line.startswith("labelled 0 of 2 wrong answers (2 unlabelled,")
    assert "already labelled" not in line and "nothing sent (every wrong answer already had its labeller's reply)" in line


def test_a_stop_error_stops_the_labelling_run_cleanly(tmp_path, monkeypatch):
    from cresowlve_core.error_analysis.label import label_errors

    monkeypatch.delenv("NO_SUCH_LABELLER_KEY", raising=False)
    items = _items(3)
    write_run(tmp_path, "en", items, {it.id: False for it in items})
    wrong, _ = collect_wrong(load_runs(str(tmp_path / "m__*")))
    with FakeServer(answers=lambda req: "CATEGORY: 1") as srv:
        res = label_errors(wrong, tmp_path / "labels", model="labeller", base_url=srv.base_url,
                           api_key_env="NO_SUCH_LABELLER_KEY", options=ClientOptions(cache=False), progress=False)
        assert srv.total == 0
    assert res.stopped and res.stopped.startswith("fatal") and "NO_SUCH_LABELLER_KEY" in res.stopped
    assert res.n_done == 0
    assert json.loads((tmp_path / "labels" / "manifest.json").read_text())["stopped"] == res.stopped
    from cresowlve_core.cli.errors import label_line

    summary = json.loads((tmp_path / "labels" / "summary.json").read_text())
    assert summary["n_not_run"] == 3  # never "nothing sent (every wrong answer already had its labeller's reply)"
    assert "; nothing sent; " in label_line(summary, 0, tmp_path / "labels" / "labels.jsonl")


def test_errored_refused_cut_off_and_empty_answers_are_no_answer_never_labelled(tmp_path):
    """An errored call (no output), a refusal, an answer cut off at the token limit and an empty
    prediction are wrong by the rule, but there is no finished answer to label: 1 of the 5 wrong
    answers goes to the labeller, and 4 are counted as no answer, each under its reason."""
    items = _items(6)
    ids = [it.id for it in items]
    run = write_run(tmp_path, "en", items, dict(zip(ids, [False, False, False, False, True, False])))
    recs = [json.loads(x) for x in (run / "responses.jsonl").read_text().splitlines()]
    recs[0] |= {"status": "error", "prediction": None, "raw_output": None, "em_strict": None, "em_lenient": None,
                "error": "HTTP 503"}
    recs[1] |= {"prediction": "   ", "raw_output": "I cannot decide."}
    recs[3] |= {"outcome": "refused", "prediction": "", "raw_output": "", "refusal": "I can't help with that."}
    recs[5] |= {"outcome": "truncated", "prediction": "Let me work through the clues one by one: first"}
    (run / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    wrong, tally = collect_wrong(load_runs(str(tmp_path / "m__*")))
    assert [w.id for w in wrong] == [ids[2]]
    t = tally.iloc[0]
    assert (t["n_wrong"], t["n_no_answer"], t["n_no_answer_error"], t["n_no_answer_withheld"],
            t["n_no_answer_truncated"], t["n_no_answer_empty"], t["n_to_label"]) == (5, 4, 1, 1, 1, 1, 1)
    assert t["n_wrong_em"] == 1  # the basis counts answers that exist


def test_a_record_of_a_status_this_version_does_not_know_is_no_answer_never_labelled(tmp_path):
    """The loader gives a record of an unknown status (a hand edit, a newer cresowlve) no value and counts it
    with the errored items; the error analysis counts it as errored too. Before: it was sent to the labeller
    as a wrong answer although strict EM had marked it right."""
    items = _items(3)
    ids = [it.id for it in items]
    run = write_run(tmp_path, "en", items, dict(zip(ids, [True, False, True])))
    recs = [json.loads(x) for x in (run / "responses.jsonl").read_text().splitlines()]
    recs[2] |= {"status": "timeout"}
    (run / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    wrong, tally = collect_wrong(load_runs(str(tmp_path / "m__*")))
    assert [w.id for w in wrong] == [ids[1]]
    t = tally.iloc[0]
    assert (t["n_wrong"], t["n_no_answer"], t["n_no_answer_error"], t["n_wrong_em"], t["n_to_label"]) == (2, 1, 1, 1, 1)


def test_a_record_whose_language_is_the_runs_or_in_capitals_is_found_and_labelled(tmp_path):
    """The loader reads a record without ``lang`` in its run's language and "EN" as "en"; the error analysis
    looks the record up the same way. Before, the record without a language was "empty" (no answer, its
    prediction not found), and "EN" was counted empty too (or, before the loader read it as "en", no item)."""
    items = _items(3)
    run = write_run(tmp_path, "en", items, {it.id: False for it in items})
    recs = [json.loads(x) for x in (run / "responses.jsonl").read_text().splitlines()]
    del recs[0]["lang"]
    recs[1]["lang"] = "EN"
    (run / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    wrong, tally = collect_wrong(load_runs(str(tmp_path / "m__*")))
    assert [(w.id, w.lang, w.prediction) for w in wrong] == [(it.id, "en", f"guess {it.id}") for it in items]
    assert (tally.iloc[0]["n_no_answer"], tally.iloc[0]["n_to_label"]) == (0, 3)


@pytest.mark.parametrize("reply, cut_off, expected", [
    ("RATIONALE: x\nCATEGORY: Over", True, None),  # a name cut short at the token limit
    ("RATIONALE: x\nCATEGORY: Over", False, "other: Over"),  # a whole reply's own word
    ("RATIONALE: x\nCATEGORY: Overthinking", True, "overthinking"),  # cut right after a whole name
    ("RATIONALE: x\nCATEGORY: laziness\nbecause", True, "other: laziness"),  # the category line is whole
])
def test_a_category_line_cut_off_at_the_token_limit_names_a_category_or_nothing(reply, cut_off, expected):
    label = parse_label(reply, cut_off=cut_off)
    assert (label.category if label else None) == expected


def test_a_base_model_label_cut_off_in_its_first_line_is_no_label():
    from cresowlve_core.error_analysis.label import parse_fewshot_label

    assert parse_fewshot_label(" Wrong hyp", cut_off=True) is None
    assert parse_fewshot_label(" Wrong hypothesis", cut_off=True).category == "wrong_hypothesis"
    assert parse_fewshot_label(" Wrong hyp\nPuzzle:", cut_off=True).category == "other: Wrong hyp"


def test_a_hub_run_whose_snapshot_file_is_now_another_revision_is_refused_not_labelled(tmp_path, monkeypatch,
                                                                                       hub_cache_at_bbbb2222):
    """A hub:en run whose manifest names the snapshot file it read, when the cache holds another revision of
    that file: refused in one line naming the run, the file and both revisions. Before: its wrong answers were
    collected for labelling with the new revision's question and reference."""
    from cresowlve_core.failures import InputError
    from cresowlve_core.sources.hub import load_published, loaded_files

    items = load_published("en", local_path=hub_cache_at_bbbb2222)[:2]
    (tmp_path / "runs").mkdir()
    run = write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    manifest = json.loads((run / "manifest.json").read_text()) | {"items": "hub:en"}

    def collected(files: list[dict]) -> list:
        (run / "manifest.json").write_text(json.dumps(manifest | {"items_files": files}))
        return collect_wrong(load_runs(str(run)))[0]

    assert [w.question for w in collected(loaded_files(items))] == [it.en.question for it in items]
    with pytest.raises(InputError) as refused:
        collected([{**f, "revision": "aaaa1111", "sha256": "0" * 64} for f in loaded_files(items)])
    assert str(refused.value) == (
        f"{run}: its items ('hub:en') are not those the run read: en/test-00000-of-00001.parquet is now revision "
        f"bbbb2222, SHA-256 {loaded_files(items)[0]['sha256'][:12]}… (the run read revision aaaa1111, SHA-256 "
        "000000000000…): its wrong answers would be labelled against another question and reference; make the "
        "files the manifest's items_files name available, or leave the run out (nothing was labelled)")
