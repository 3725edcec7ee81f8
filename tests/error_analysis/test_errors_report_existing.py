"""``cresowlve errors report`` without a labeller reports the labels that exist and labels nothing;
labels the embedded model made are flagged so the report carries the banner."""

from __future__ import annotations

import shutil

from fakeserver import FakeServer
from test_errors_label import _items, write_run

from cresowlve_core.error_analysis.report import analyse
from cresowlve_core.error_analysis.wrong import collect_wrong
from cresowlve_core.runtime import ClientOptions


def _labelled(tmp_path, labeller):
    from cresowlve_core.analysis.loading import load_runs
    from cresowlve_core.error_analysis.label import label_errors

    items = _items(3)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    units, _ = collect_wrong(load_runs(str(tmp_path / "runs" / "*")))
    with FakeServer(answers=lambda r: "RATIONALE: x\nCATEGORY: overthinking") as srv:
        label_errors(units, tmp_path / "out" / "labels" / "lab", model=labeller, base_url=srv.base_url,
                     options=ClientOptions(cache=False), progress=False)
        return srv


def test_without_a_labeller_the_existing_labels_are_reported_and_nothing_is_sent(tmp_path, monkeypatch):
    from cresowlve_core.llm import local

    monkeypatch.setattr(local, "local_server", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    _labelled(tmp_path, "lab")
    ea = analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False)
    assert (ea.labeller, ea.embedded, ea.label_dir.name) == ("lab", False, "lab")
    assert list(ea.labels["state"]) == ["labelled"] * 3


def test_labels_of_the_embedded_model_are_flagged_embedded(tmp_path):
    _labelled(tmp_path, "gemma3-270m")
    shutil.move(tmp_path / "out" / "labels" / "lab", tmp_path / "out" / "labels" / "embedded")
    ea = analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False)
    assert ea.embedded and ea.labeller == "gemma3-270m"


def test_no_labels_yet_is_said_not_made_up(tmp_path):
    items = _items(2)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    ea = analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False)
    assert set(ea.labels["state"]) == {"not_run"} and any("nothing was labelled" in n for n in ea.notes)


def test_the_limit_per_configuration_is_named_with_what_it_left_out(tmp_path):
    """With ``limit``, the report's counts cover fewer wrong answers than the runs hold: the notes,
    the labelling record and the headline say how many were left out, never a complete-looking 1 of 1."""
    from cresowlve_core.error_analysis.report import headline, labels_section

    _labelled(tmp_path, "lab")
    ea = analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False, limit=1)
    assert (len(ea.labels), ea.left_by_limit) == (1, 2)
    assert any("`limit = 1`" in n and "1 of the 3 to label" in n and "the other 2 are left out" in n for n in ea.notes)
    out = labels_section(ea)
    assert (out["n"], out["labelled"], out["left_by_limit"]) == (1, 1, 2)
    assert headline(out).endswith("; 2 more left out by the limit per configuration")
    assert analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False).left_by_limit == 0


def test_a_stored_label_outside_the_taxonomy_is_other_with_its_text_and_counted_so(tmp_path):
    """Labels edited by hand or made with another taxonomy: a category name is that category, an unknown slug
    is ``other: <slug>``. Before, both were pooled into the distribution's Other bucket (k = 2 of 3) while the
    labels record and the headline said "0 other", and the table of other labels listed neither."""
    import json

    from cresowlve_core.error_analysis.report import distribution_section, headline, labels_section

    _labelled(tmp_path, "lab")
    f = tmp_path / "out" / "labels" / "lab" / "labels.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[1]["label"], recs[2]["label"] = "wrong_assumption", "Overthinking"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    ea = analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False)
    by_key = dict(zip(ea.labels["key"], ea.labels["label"]))  # the file's lines are in the labeller's finishing order
    assert [by_key[r["key"]] for r in recs] == ["overthinking", "other: wrong_assumption", "overthinking"]
    rec = labels_section(ea)
    assert rec["other"] == 1 and headline(rec) == "3 wrong answers sent to the labeller: 3 labelled, 1 other, 0 unlabelled"
    shares = {r["category"]: r["k"] for r in distribution_section(ea)["distribution"] if r["k"]}
    assert shares == {"overthinking": 2, "other": 1}


def test_the_annotation_sample_is_written_in_out_dir_when_nothing_is_labelled_yet(tmp_path):
    """With no labels under OUT_DIR the sample goes to OUT_DIR/annotations, where the annotation app looks.
    Before, it was derived from the labels folder (OUT_DIR/labels, no labeller below it) and landed one level
    up, in OUT_DIR's parent: data/annotations/sample.jsonl for the default data/errors."""
    from cresowlve_core.error_analysis.report import annotation_section

    items = _items(2)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    ea = analyse(str(tmp_path / "runs" / "*"), out_dir=tmp_path / "out", make_demo=False, label=False)
    out = annotation_section(ea)
    assert out["sample_path"] == str(tmp_path / "out" / "annotations" / "sample.jsonl")
    assert (tmp_path / "out" / "annotations" / "sample.jsonl").is_file()
    assert not (tmp_path / "annotations").exists()


def test_the_headline_names_labeller_errors_and_answers_never_sent():
    """Every wrong answer is in one of the headline's counts. Before, a labeller error was in none
    ("6 wrong answers sent to the labeller: 4 labelled, 2 other, 0 unlabelled, 1 refused or filtered by the
    labeller": 5 of 6), and answers with no label record (``errors report`` before ``errors label``) were
    called sent ("2 wrong answers sent to the labeller: 0 labelled, 0 other, 0 unlabelled")."""
    from cresowlve_core.error_analysis.report import headline

    rec = {"n": 6, "labelled": 4, "unlabelled": 0, "withheld": 1, "error": 1, "not_run": 0, "other": 2, "left_by_limit": 0}
    assert headline(rec) == ("6 wrong answers sent to the labeller: 4 labelled, 2 other, 0 unlabelled, "
                             "1 refused or filtered by the labeller, 1 labeller errors")
    rec = {"n": 2, "labelled": 0, "unlabelled": 0, "withheld": 0, "error": 0, "not_run": 2, "other": 0, "left_by_limit": 0}
    assert headline(rec) == ("2 wrong answers, 0 sent to the labeller: 0 labelled, 0 other, 0 unlabelled; "
                             "2 not labelled (no label record)")
