"""The explorer: items and run results in one frame, filters, one item's side-by-side view,
the ipywidgets browser, the notebook (papermill) and the marimo app (export html)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cresowlve_core import explore as X
from cresowlve_core.error_analysis.wrong import output_hash
from cresowlve_core.sources.sample import load_items

sys.path.insert(0, str(Path(__file__).resolve().parent / "analysis"))  # the analysis tests' run writers
from test_analysis_fixtures import record, write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ITEMS = {it.id: it for it in load_items("demo", "en")}
EN = sorted(ITEMS, key=lambda i: not ITEMS[i].view("en").answer.startswith("Melody"))  # the Melody item first
RU = [it.id for it in load_items("demo", "ru")]


def _runs(tmp_path: Path) -> Path:
    """Two configurations in English (A judged, B strict EM only), one in Russian, and an answer to
    an item that is not in the demo set."""
    a = [record(EN[0], model="A", prediction="Melody", judge="CORRECT", em_strict=True, em_lenient=True,
                thoughts="staff lines... notes", raw_output="<answer>Melody</answer>", judge_raw="CORRECT"),
         record(EN[1], model="A", prediction="Kepler", judge="INCORRECT", em_strict=False,
                thoughts="astronomer? Kepler", raw_output="<answer>Kepler</answer>"),
         record(EN[2], model="A", prediction="x", em_strict=True, judge_status="error"),  # judge failed: EM decides
         record("not_a_demo_id", model="A", prediction="y", em_strict=False, difficulty=5,
                knowledge_domains=["Zoology"], answer="z")]
    b = [record(EN[0], model="B", effort="high", prediction="Music", em_strict=False, raw_output="Music"),
         record(EN[1], model="B", effort="high", status="error", error="timeout", prediction=None, em_strict=None)]
    r = [record(RU[0], lang="ru", model="A", prediction="Мелодию", em_strict=True)]
    write_run(tmp_path / "runs" / "a_en", a, model="A")
    write_run(tmp_path / "runs" / "b_en", b, model="B", effort="high")
    write_run(tmp_path / "runs" / "a_ru", r, model="A", lang="ru")
    return tmp_path / "runs"


def _labels(tmp_path: Path) -> Path:
    d = tmp_path / "errors" / "labels" / "gpt-4o"
    d.mkdir(parents=True)
    recs = [
        {"key": f"A|en|{EN[1]}|{output_hash('Kepler', 'astronomer? Kepler')}", "status": "ok", "config": "A", "lang": "en",
         "id": EN[1], "label": "wrong_reference", "rationale": "the wrong astronomer", "labeller": "gpt-4o"},
        {"key": f"A|en|{EN[1]}|0000000000", "status": "ok", "config": "A", "lang": "en", "id": EN[1],
         "label": "overthinking", "rationale": "an older output", "labeller": "gpt-4o"},  # stale
        {"key": f"B (high)|en|{EN[0]}|{output_hash('Music', 'Music')}", "status": "ok", "config": "B (high)", "lang": "en",
         "id": EN[0], "label": None, "rationale": None, "labeller": "gpt-4o"},  # no category line
    ]
    (d / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return tmp_path / "errors"


def test_items_alone_when_there_are_no_runs(tmp_path):
    ex = X.load_explorer(str(tmp_path / "nothing" / "*"))
    assert not ex.has_runs and ex.n_items == len(EN) + len(RU) and ex.n_answers == 0
    assert "No runs found" in ex.summary()
    lst = X.item_list(X.filter_frame(ex.frame, X.Filters(langs=("ru",))))
    assert list(lst["id"]) == sorted(RU) and (lst["n_answers"] == 0).all()
    html = X.detail_html(X.item_detail(ex, EN[0], "en"))
    assert "No model answered" in html and "Melody" in html
    assert ex.banners() == []


def test_tidy_frame_and_correctness_basis(tmp_path):
    ex = X.load_explorer(str(_runs(tmp_path) / "*"))
    assert ex.configs == ["A", "B (high)"]
    a = ex.frame[ex.frame["config"].notna()].set_index(["config", "lang", "id"])
    assert a.loc[("A", "en", EN[0]), "basis"] == "judge" and a.loc[("A", "en", EN[0]), "correct"] == 1.0
    assert a.loc[("A", "en", EN[1]), "correct"] == 0.0
    assert a.loc[("A", "en", EN[2]), "basis"] == "em_strict" and a.loc[("A", "en", EN[2]), "correct"] == 1.0
    assert pd.isna(a.loc[("B (high)", "en", EN[1]), "correct"])  # errored: no answer, no value (never wrong)
    # items no run answered keep one row without a configuration; the answer to an unknown item is kept
    assert len(ex.frame[ex.frame["config"].isna()]) == (len(EN) - 3) + (len(RU) - 1)
    out = ex.frame[ex.frame["id"] == "not_a_demo_id"].iloc[0]
    assert not out["in_items"] and out["knowledge_domains"] == ["Zoology"] and out["difficulty"] == 5
    s = ex.summary()
    assert "judge's verdict where it scored (2 answers)" in s and "strict exact match (4); 1 unknown" in s  # the errored call
    assert "1 answer(s) are to items not in `demo`" in s


def test_filters(tmp_path):
    ex = X.load_explorer(str(_runs(tmp_path) / "*"))
    f = X.Filters()

    def ids(**kw):
        return set(X.item_list(X.filter_frame(ex.frame, X.with_filters(f, **kw)))["id"])

    assert ids(langs=("ru",)) == set(RU)
    assert ids(configs=("B (high)",)) == {EN[0], EN[1]}
    assert ids(outcome="correct") == {EN[0], EN[2], RU[0]}
    assert ids(outcome="wrong", configs=("A",)) == {EN[1], "not_a_demo_id"}
    assert ids(outcome="unknown") == {EN[1]}  # the errored call
    assert ids(knowledge_domain="Zoology") == {"not_a_demo_id"}
    item0 = ITEMS[EN[0]]
    assert EN[0] in ids(creative_concept=item0.creative_domains[0], culture=item0.cultures[0])
    assert all(d == 5 for d in X.filter_frame(ex.frame, X.with_filters(f, difficulty=(5, 5)))["difficulty"])
    assert ids(text="kepler") == {EN[1]}
    with pytest.raises(ValueError, match="outcome"):
        X.filter_frame(ex.frame, X.with_filters(f, outcome="right"))
    opts = X.options(ex)
    assert opts["configs"] == ["A", "B (high)"] and ("Zoology (1)", "Zoology") in opts["knowledge_domain"]
    assert opts["error_category"] == []  # no labels given
    lst = X.item_list(X.filter_frame(ex.frame, X.with_filters(f, langs=("en",))))
    row = lst.set_index("id").loc[EN[0]]
    assert (row["n_answers"], row["n_correct"], row["n_wrong"]) == (2, 1, 1)


def test_error_labels_joined_stale_ones_not_shown(tmp_path):
    ex = X.load_explorer(str(_runs(tmp_path) / "*"), labels=str(_labels(tmp_path)))
    assert ex.has_labels and len(ex.labels) == 3 and int((~ex.labels["current"]).sum()) == 1
    a = ex.frame[ex.frame["config"].notna()].set_index(["config", "lang", "id"])
    assert a.loc[("A", "en", EN[1]), "error_categories"] == ["wrong_reference"]  # not the stale "overthinking"
    assert a.loc[("B (high)", "en", EN[0]), "error_categories"] == [X.UNLABELLED]
    assert a.loc[("B (high)", "en", EN[1]), "error_categories"] == []  # errored: no answer, nothing to label
    assert a.loc[("A", "en", EN[0]), "error_categories"] == []  # correct answers carry none
    f = X.Filters(error_category="wrong_reference")
    assert set(X.filter_frame(ex.frame, f)["id"]) == {EN[1]}
    assert ("Wrong reference (1)", "wrong_reference") in X.options(ex)["error_category"]
    html = X.detail_html(X.item_detail(ex, EN[1], "en"))
    assert "Wrong reference" in html and "stale" in html and "the wrong astronomer" in html
    # a label file given directly, and a path with nothing in it
    assert len(X.load_explorer(str(tmp_path / "runs" / "*"),
                               labels=str(tmp_path / "errors/labels/gpt-4o/labels.jsonl")).labels) == 3
    none = X.load_explorer(str(tmp_path / "runs" / "*"), labels=str(tmp_path / "nowhere"))
    assert not none.has_labels and any("no error labels" in n for n in none.notes)


def test_item_detail_side_by_side(tmp_path):
    ex = X.load_explorer(str(_runs(tmp_path) / "*"))
    d = X.item_detail(ex, EN[1], "en")
    item = ITEMS[EN[1]].view("en")
    assert (d["question"], d["answer"], d["explanation"], d["other_answers"]) == (
        item.question, item.answer, item.explanation, item.other_answers)
    by = {a["config"]: a for a in d["answers"]}
    assert by["A"]["thoughts"] == "astronomer? Kepler" and by["A"]["raw_output"] == "<answer>Kepler</answer>"
    assert by["A"]["judge_verdict"] == "INCORRECT" and by["A"]["basis"] == "judge" and by["A"]["correct"] is False
    assert by["B (high)"]["status"] == "error" and by["B (high)"]["error"] == "timeout"
    html = X.detail_html(d)
    assert html.count("class='ans ") == 2 and "wrong (by the judge)" in html and "timeout" in html
    assert "astronomer? Kepler" in html and "call failed" in html
    only_a = X.item_detail(ex, EN[1], "en", configs=["A"])
    assert [a["config"] for a in only_a["answers"]] == ["A"]
    with pytest.raises(KeyError):
        X.item_detail(ex, "nope", "en")


def test_resume_keeps_the_last_record_and_reads_it_back(tmp_path):
    runs = _runs(tmp_path)
    with (runs / "a_en" / "responses.jsonl").open("a") as fh:  # a resumed run re-answered EN[1]
        fh.write(json.dumps(record(EN[1], model="A", prediction="Copernicus", judge="CORRECT",
                                   thoughts="second try")) + "\n")
        fh.write('{"id": "torn')  # killed mid-write
    ex = X.load_explorer(str(runs / "*"))
    by = {a["config"]: a for a in X.item_detail(ex, EN[1], "en")["answers"]}
    assert by["A"]["prediction"] == "Copernicus" and by["A"]["thoughts"] == "second try" and by["A"]["correct"]


def test_banners_for_the_embedded_model(tmp_path):
    write_run(tmp_path / "r", [record(EN[0], model="gemma3-270m")], model="gemma3-270m")
    ex = X.load_explorer(str(tmp_path / "r"))
    assert [k for k, _ in ex.banners()] == ["embedded"] and 'data-banner="embedded"' in ex.banners_html()


def _embedded_labels(tmp_path: Path, folder: str, labeller: str) -> Path:
    """One current label of answer A/en/EN[1] (see :func:`_runs`), written by ``labeller``."""
    d = tmp_path / "errors" / "labels" / folder
    d.mkdir(parents=True)
    rec = {"key": f"A|en|{EN[1]}|{output_hash('Kepler', 'astronomer? Kepler')}", "status": "ok", "config": "A",
           "lang": "en", "id": EN[1], "label": "wrong_reference", "rationale": "r", "labeller": labeller}
    (d / "labels.jsonl").write_text(json.dumps(rec) + "\n")
    return tmp_path / "errors"


@pytest.mark.parametrize(("folder", "labeller"), [("embedded", "gemma3-270m"), ("gemma3-270m", "gemma3-270m")])
def test_banner_when_a_shown_label_came_from_the_embedded_model(tmp_path, folder, labeller):
    ex = X.load_explorer(str(_runs(tmp_path) / "*"), labels=str(_embedded_labels(tmp_path, folder, labeller)))
    banners = dict(ex.banners())
    assert set(banners) == {"embedded"} and "Error labels of gemma3-270m" in banners["embedded"]
    assert 'data-banner="embedded"' in ex.banners_html()


def test_no_banner_for_a_named_labeller_and_real_runs(tmp_path):
    ex = X.load_explorer(str(_runs(tmp_path) / "*"), labels=str(_labels(tmp_path)))
    assert ex.has_labels and ex.banners() == []


def test_banner_for_embedded_provider_and_embedded_judge(tmp_path):
    write_run(tmp_path / "p", [record(EN[0], model="served-name")], model="served-name", provider="embedded")
    write_run(tmp_path / "j", [record(EN[0], model="B", judge="CORRECT")], model="B",
              judge={"model": "gemma3-270m", "protocol": "p"})
    detail = dict(X.load_explorer([str(tmp_path / "p"), str(tmp_path / "j")]).banners())["embedded"]
    assert "Answers of served-name" in detail and "Judge verdicts of gemma3-270m" in detail


def test_items_none_reads_the_runs_item_specs(tmp_path):
    items = tmp_path / "items.jsonl"
    one = ITEMS[EN[0]]
    items.write_text(json.dumps(one.model_dump()) + "\n")
    write_run(tmp_path / "r", [record(one.id, model="A")], model="A", items=str(items))
    ex = X.load_explorer(str(tmp_path / "r"), items=None)
    assert ex.items_spec == str(items) and ex.n_items == 2 and ex.frame["in_items"].all()  # its en and ru views


def test_browser_widgets_filter_and_show(tmp_path):
    pytest.importorskip("ipywidgets")
    ex = X.load_explorer(str(_runs(tmp_path) / "*"), labels=str(_labels(tmp_path)))
    panel = X.browser(ex)
    filters, count, listing, view = panel.children[2], panel.children[3], panel.children[4], panel.children[5]
    assert len(listing.options) == ex.n_items
    first = listing.options[0][1]
    assert listing.value == first and ITEMS[first[0]].view("en").answer in view.value  # the first item is shown
    outcome = filters.children[2].children[1].children[0]
    outcome.value = "wrong"
    assert {v[0] for _, v in listing.options} == {EN[0], EN[1], "not_a_demo_id"}
    err = filters.children[2].children[1].children[1]
    err.value = "wrong_reference"
    assert [v for _, v in listing.options] == [(EN[1], "en")] and "Wrong reference" in view.value
    assert "<b>1</b> item(s)" in count.value


def test_explorer_notebook_renders_without_runs(tmp_path):
    from cresowlve_core.notebooks import run_notebook

    res = run_notebook("explore", {"runs": str(tmp_path / "none" / "*")}, tmp_path / "reports")
    nb = json.loads(res.ipynb.read_text())
    mimes = {k for c in nb["cells"] for o in c.get("outputs", []) for k in o.get("data", {})}
    assert "application/vnd.jupyter.widget-view+json" in mimes  # the browser is a live widget
    text = json.dumps(nb)
    assert "No runs found" in text and not list(tmp_path.glob("reports/*.jsonl"))


def test_explorer_notebook_with_runs_and_labels(tmp_path):
    from cresowlve_core.notebooks import read_records, run_notebook

    runs, labels = _runs(tmp_path), _labels(tmp_path)
    res = run_notebook("explore", {"runs": str(runs / "*"), "labels": str(labels)}, tmp_path / "reports")
    rec = read_records(res.ipynb)
    assert rec["explorer"]["n_answers"] == 7 and rec["explorer"]["configs"] == ["A", "B (high)"]
    nb = json.loads(res.ipynb.read_text())
    widget_state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert widget_state.get("state"), "the executed notebook stores the widget state (rendered in nbviewer/HTML)"


def _marimo() -> Path:
    exe = Path(sys.executable).parent / "marimo"
    if not exe.exists():
        pytest.skip("marimo is not installed in this environment")
    return exe


def test_marimo_app_exports_with_runs(tmp_path):
    runs, labels = _runs(tmp_path), _labels(tmp_path)
    app = tmp_path / "app" / "explore.py"  # a copy: marimo may write a session cache beside the app
    app.parent.mkdir()
    shutil.copy(REPO / "notebooks" / "explore.py", app)
    out = tmp_path / "explore.html"
    proc = subprocess.run([str(_marimo()), "export", "html", str(app), "-o", str(out), "--",
                           "--runs", str(runs / "*"), "--labels", str(labels)],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    if proc.returncode != 0 and "Traceback" not in proc.stderr + proc.stdout:
        pytest.skip(f"marimo export failed for environmental reasons: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = out.read_text(encoding="utf-8")
    assert "Unsupported mimetype" not in page
    for text in ("CresOWLve explorer", "B (high)", "Melody", "staff lines"):
        assert text in page, text


def test_marimo_app_runs_without_runs(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("explore_app", REPO / "notebooks" / "explore.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _, defs = mod.app.run(defs={"runs_arg": str(tmp_path / "none" / "*"), "labels_arg": None, "items_arg": "demo"})
    assert not defs["ex"].has_runs and isinstance(defs["listing"], pd.DataFrame) and len(defs["listing"]) > 0


def test_browser_any_filters_read_any_and_the_error_filter_says_why_it_is_off(tmp_path):
    """"any" dropdowns used to show blank (a None value is no selection to ipywidgets),
    and the error filter sat disabled without a word."""
    pytest.importorskip("ipywidgets")
    ex = X.load_explorer(str(_runs(tmp_path) / "*"), labels=str(_labels(tmp_path)))
    filters = X.browser(ex).children[2]
    lang, kd, cc, cu = filters.children[0].children[0], *filters.children[1].children
    err = filters.children[2].children[1].children[1]
    assert [w.label for w in (lang, kd, cc, cu, err)] == ["any"] * 5
    assert all(w.value is not None and w.index == 0 for w in (lang, kd, cc, cu, err))  # None draws blank
    assert not err.disabled
    unlabelled = X.browser(X.load_explorer(str(_runs(tmp_path) / "*"), labels=""))
    off = unlabelled.children[2].children[2].children[1].children[1]
    assert off.disabled and off.label == "no error labels loaded" and "labels" in off.tooltip


def test_a_refused_filtered_or_truncated_answer_says_so_in_its_card(tmp_path):
    """A refusal is shown as a refusal, with the model's words, not as an empty wrong answer."""
    recs = [record(EN[0], model="A", prediction="", em_strict=False, raw_output="", outcome="refused",
                   refusal="I'm sorry, but I can't assist with that request."),
            record(EN[1], model="A", prediction="", em_strict=False, raw_output="The melo", outcome="filtered"),
            record(EN[2], model="A", prediction="Kep", em_strict=False, raw_output="<Answer>Kep", outcome="truncated")]
    write_run(tmp_path / "runs" / "a_en", recs, model="A")
    ex = X.load_explorer(str(tmp_path / "runs" / "*"))
    cards = {i: X.detail_html(X.item_detail(ex, i, "en")) for i in EN[:3]}
    assert "refused by the model" in cards[EN[0]] and "I&#x27;m sorry, but I can&#x27;t assist" in cards[EN[0]]
    assert "no reasoning or raw output recorded" not in cards[EN[0]]
    assert "content filter" in cards[EN[1]] and "The melo" in cards[EN[1]]
    assert "cut off at the token limit" in cards[EN[2]]
    for note in ("refused by the model", "content filter", "cut off at the token limit"):  # each card names only its own
        assert sum(note in c for c in cards.values()) == 1, note


def test_a_refused_answer_a_judge_never_saw_is_not_shown_as_that_judges_verdict(tmp_path):
    """The run's record carries the rule's INCORRECT and the judge's name for a refusal, but the judge
    was never asked: the card says so, and the summary does not count it among the judge's verdicts."""
    recs = [record(EN[0], model="A", prediction="", em_strict=False, judge=False, judge_status="not_an_answer",
                   outcome="refused", refusal="I can't help with that.", judge_verdict="INCORRECT",
                   judge_model="gpt-4o-mini"),
            record(EN[1], model="A", prediction="x", em_strict=False, judge=False, judge_verdict="INCORRECT",
                   judge_model="gpt-4o-mini")]
    write_run(tmp_path / "runs" / "a_en", recs, model="A")
    ex = X.load_explorer(str(tmp_path / "runs" / "*"))
    refused, judged = (X.detail_html(X.item_detail(ex, i, "en")) for i in EN[:2])
    assert "judge: not asked (no answer to judge)" in refused and "gpt-4o-mini" not in refused
    assert "wrong (by the rule for a refused answer)" in refused
    assert "judge: INCORRECT (gpt-4o-mini)" in judged
    assert "1 refused or filtered (never correct, not judged)" in ex.summary()


def test_a_record_whose_language_is_in_capitals_is_read_back(tmp_path):
    """``load_runs`` reads ``"EN"`` as ``en``; the full record of that answer is found under it too."""
    write_run(tmp_path / "r", [{**record(EN[1], model="A", prediction="Kepler", thoughts="astronomer? Kepler"),
                                "lang": "EN"}], model="A")
    ex = X.load_explorer(str(tmp_path / "r"))
    (answer,) = X.item_detail(ex, EN[1], "en")["answers"]
    assert answer["prediction"] == "Kepler" and answer["thoughts"] == "astronomer? Kepler"


def test_a_refusal_in_a_run_without_a_judge_is_counted_as_refused_not_as_strict_em(tmp_path):
    """Without a judge a refused or filtered record carries ``judge_status`` not_run: the summary still
    names it (from its ``outcome``) and does not count it among the strict-EM verdicts."""
    recs = [record(EN[0], model="A", prediction=None, em_strict=False, outcome="refused", refusal="I can't help."),
            record(EN[1], model="A", prediction=None, em_strict=False, outcome="filtered"),
            record(EN[2], model="A", prediction="x", em_strict=False)]
    write_run(tmp_path / "runs" / "a_en", recs, model="A")
    ex = X.load_explorer(str(tmp_path / "runs" / "*"), labels="")
    assert "else strict exact match (1); 2 refused or filtered (never correct, not judged)" in ex.summary()


def test_a_record_whose_status_or_outcome_is_unknown_says_so_in_its_card(tmp_path):
    """A record with an outcome this version does not know had its strict EM (True in the file) shown as
    '–' and the answer as 'unknown (no judge verdict, no strict EM)', with no word of why."""
    recs = [record(EN[0], model="A", prediction="Melody", em_strict=True, outcome="pending_review"),
            record(EN[1], model="A", prediction="x", em_strict=True, status="queued"),
            record(EN[2], model="A", prediction="y", em_strict=False)]
    write_run(tmp_path / "runs" / "a_en", recs, model="A")
    ex = X.load_explorer(str(tmp_path / "runs" / "*"), labels="")
    cards = [X.detail_html(X.item_detail(ex, i, "en")) for i in EN[:3]]
    assert "outcome &#x27;pending_review&#x27; this version does not know: no value for any metric" in cards[0]
    assert "status &#x27;queued&#x27; this version does not know" in cards[1]
    assert "this version does not know" not in cards[2]


def test_marimo_app_with_runs_it_cannot_read_shows_the_demo_items_and_the_problem(tmp_path):
    """A damaged grid.json made load_explorer raise; the app's fallback read the same runs again and
    raised again, so the cell showed a traceback instead of '**<the error>** (showing the
    demo items)'."""
    import importlib.util

    grid = tmp_path / "grid.json"
    grid.write_text("{not json")
    spec = importlib.util.spec_from_file_location("explore_app", REPO / "notebooks" / "explore.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _, defs = mod.app.run(defs={"runs_arg": str(grid), "labels_arg": None, "items_arg": "demo"})
    assert defs["problem"]  # the error, whatever the loader calls it
    assert not defs["ex"].has_runs and len(defs["listing"]) > 0


def test_a_labels_line_that_is_not_utf8_is_skipped_as_unreadable(tmp_path):
    """One undecodable line in labels.jsonl made load_explorer raise a UnicodeDecodeError naming no file;
    it is now one of the unreadable lines the notes count, and the other labels load."""
    runs, labels = _runs(tmp_path), _labels(tmp_path)
    f = labels / "labels" / "gpt-4o" / "labels.jsonl"
    f.write_bytes(f.read_bytes() + b'{"key": "A|en|x|\xff\xfe", "status": "ok"}\n')
    ex = X.load_explorer(str(runs / "*"), labels=str(labels))
    assert len(ex.labels) == 3
    assert f"labels `{f.resolve()}`: skipped 1 unreadable line(s)." in ex.notes


def test_a_refused_or_filtered_wrong_answer_is_no_answer_to_label_not_a_gap_in_the_labels(tmp_path):
    """The labeller never gets a refused, filtered, cut-off or empty answer (docs/errors.md: no answer, counted,
    not labelled), yet the explorer put each under '(not labelled)', the bucket of wrong answers a label
    should cover: a refusal was listed as a gap in the labelling."""
    recs = [record(EN[0], model="A", prediction=None, em_strict=False, outcome="refused", refusal="I can't help."),
            record(EN[1], model="A", prediction=None, em_strict=False, outcome="filtered"),
            record(EN[2], model="A", prediction="Kep", em_strict=False, outcome="truncated"),
            record(EN[3], model="A", prediction="Kepler", em_strict=False, thoughts="astronomer? Kepler")]
    write_run(tmp_path / "runs" / "a_en", recs, model="A")
    d = tmp_path / "errors" / "labels" / "gpt-4o"
    d.mkdir(parents=True)
    (d / "labels.jsonl").write_text(json.dumps(  # a label of another answer: labels are loaded
        {"key": "Z|en|x|0000000000", "status": "ok", "config": "Z", "lang": "en", "id": "x", "label": "overthinking"}) + "\n")
    ex = X.load_explorer(str(tmp_path / "runs" / "*"), labels=str(tmp_path / "errors"))
    cats = ex.frame[ex.frame["config"].notna()].set_index("id")["error_categories"]
    assert [cats[i] for i in EN[:4]] == [[X.NO_ANSWER_TO_LABEL]] * 3 + [[X.NOT_LABELLED]]
    assert set(X.filter_frame(ex.frame, X.Filters(error_category=X.NOT_LABELLED))["id"]) == {EN[3]}
    assert ("(no answer to label) (3)", X.NO_ANSWER_TO_LABEL) in X.options(ex)["error_category"]


def test_an_answer_whose_record_moved_since_loading_is_not_shown_with_another_items_record(tmp_path):
    """Records are read back by byte offset when an item is opened. After the run's responses.jsonl was
    rewritten (``cresowlve rescore`` compacts it), an open explorer read whatever line now sat at the
    offset: another item's record (its raw output under this item, a refusal shown as an answer judged
    INCORRECT), or a partial line, shown as 'no reasoning or raw output recorded'."""
    refused = record(EN[0], model="A", prediction=None, em_strict=False, judge=False, judge_status="not_an_answer",
                     judge_verdict="INCORRECT", judge_model="j", outcome="refused", refusal="I can't help with that.")
    answered = record(EN[1], model="A", prediction="Kepler", em_strict=False, raw_output="<Answer>Kepler</Answer>")
    d = write_run(tmp_path / "runs" / "a_en", [refused, answered], model="A")
    ex = X.load_explorer(str(d), labels="")
    path = d / "responses.jsonl"
    first, second = path.read_text().splitlines(keepends=True)
    path.write_text(second + first)  # rewritten: the other item's record now starts at this one's offset
    (card,) = X.item_detail(ex, EN[0], "en")["answers"]
    assert card["raw_output"] is None and card["outcome"] == "refused" and card["record_unread"]
    html = X.detail_html(X.item_detail(ex, EN[0], "en"))
    assert "Kepler" not in html and "refused by the model" in html and "judge: not asked" in html
    assert "could not be read back" in html and "no reasoning or raw output recorded" not in html
    path.unlink()  # removed: said the same way, not a FileNotFoundError
    assert "could not be read back" in X.detail_html(X.item_detail(ex, EN[1], "en"))


def test_report_explore_on_runs_that_match_nothing_is_an_empty_report_exit_1(tmp_path, capsys, monkeypatch):
    """`report explore -p runs '<glob matching nothing>'` exited 0 with an explorer of no answers, where
    `report 03_analysis` on the same glob says "empty report: no runs found" and exits 1."""
    from cresowlve_core.cli import main

    monkeypatch.setenv("CRESOWLVE_REPORTS_DIR", str(tmp_path / "reports"))
    code = main(["report", "explore", "-p", "runs", str(tmp_path / "nothing" / "*")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"empty report: no runs found for runs = {tmp_path / 'nothing' / '*'}" in err


def test_the_plain_view_shows_a_missing_difficulty_as_a_dash_not_na(tmp_path, monkeypatch):
    """The HTML report's item list was pandas' own table: a demo item without a difficulty read
    "<NA>", booleans "True", and row numbers 0..n-1 stood before the ids. It is now the report
    kit's table (reporting.show), as every report's."""
    import IPython.display

    shown: list[str] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(getattr(obj, "data", None) or repr(obj)))
    ex = X.load_explorer(str(tmp_path / "none" / "*"), "demo", labels="")
    lst = X.item_list(X.filter_frame(ex.frame, X.Filters()))
    assert lst["difficulty"].isna().any()  # the demo set has items without a difficulty
    X.static_section(ex, n=0)
    (table,) = shown
    assert "cresowlve-table" in table and "&lt;NA&gt;" not in table and "<NA>" not in table and "–" in table


def test_a_hub_run_whose_snapshot_file_is_now_another_revision_is_noted_with_its_answers(tmp_path,
                                                                                       hub_cache_at_bbbb2222):
    """A hub:en run whose manifest names the snapshot file it read, when the cache holds another revision of that
    file: the explorer still shows its answers, with a note naming the run, the file, both revisions and how many
    answers it concerns. Before: the new revision's questions and annotations were shown beside them, unsaid."""
    from cresowlve_core.sources.hub import load_published, loaded_files

    items = load_published("en", local_path=hub_cache_at_bbbb2222)
    run = write_run(tmp_path / "runs" / "h_en", [record(it.id, model="H", prediction="x") for it in items[:2]],
                    model="H")
    manifest = json.loads((run / "manifest.json").read_text()) | {"items": "hub:en"}

    def notes(files: list[dict]) -> list[str]:
        (run / "manifest.json").write_text(json.dumps(manifest | {"items_files": files}))
        return [n for n in X.load_explorer(str(tmp_path / "runs" / "*"), items=None, labels="").notes
                if "not those the run read" in n]

    assert notes(loaded_files(items)) == []
    assert notes([{**f, "revision": "aaaa1111", "sha256": "0" * 64} for f in loaded_files(items)]) == [
        f"run `h_en`: its items `hub:en` are not those the run read (en/test-00000-of-00001.parquet is now revision "
        f"bbbb2222, SHA-256 {loaded_files(items)[0]['sha256'][:12]}… (the run read revision aaaa1111, SHA-256 "
        "000000000000…)); the items shown beside its 2 answer(s) are another revision's."]
