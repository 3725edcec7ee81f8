"""The marimo annotation app loads a sample and resumes at the first item not yet labelled."""

from __future__ import annotations

import html
import importlib.util
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from cresowlve_core.error_analysis.annotation import AnnotationStore, write_sample

APP = Path(__file__).resolve().parents[2] / "notebooks" / "annotate_errors.py"


def _app():
    spec = importlib.util.spec_from_file_location("annotate_errors_app", APP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def test_marimo_app_resumes_at_first_unlabelled(tmp_path):
    sample = pd.DataFrame([{"key": f"k{i}", "config": "m", "lang": "ru", "id": f"i{i}", "question": "Назовите ИКС.",
                            "answer": "a", "prediction": "b", "reasoning": "ИКС — это"} for i in range(3)])
    path = write_sample(sample, tmp_path / "ann" / "sample.jsonl")
    AnnotationStore(path.parent, "ann1").save("k0", "overthinking")
    _, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(path)),
                               "annotator": SimpleNamespace(value="ann1")})
    assert defs["row"]["key"] == "k1" and defs["done"] == 1


def test_marimo_app_without_a_sample_says_so(tmp_path):
    _, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(tmp_path / "none.jsonl")),
                               "annotator": SimpleNamespace(value="x")})
    assert "no sample" in defs["problem"] and defs["row"] is None


def test_marimo_app_banners_answers_of_the_embedded_model(tmp_path):
    """The annotate app used to show junk answers of the embedded 270M model unbannered."""
    rows = [{"key": f"k{i}", "config": c, "lang": "en", "id": f"i{i}", "question": "q", "answer": "a",
             "prediction": "b", "reasoning": ""} for i, c in enumerate(["gemma3-270m", "gpt-4.1 (high)"])]
    path = write_sample(pd.DataFrame(rows), tmp_path / "ann" / "sample.jsonl")
    outputs, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(path)),
                                     "annotator": SimpleNamespace(value="ann1")})
    assert defs["embedded"] == ["gemma3-270m"]
    assert any("data-banner=\"embedded\"" in str(getattr(o, "text", o)) for o in outputs)
    clean = write_sample(pd.DataFrame(rows[1:]), tmp_path / "ann2" / "sample.jsonl")
    _, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(clean)),
                               "annotator": SimpleNamespace(value="ann1")})
    assert defs["embedded"] == []


def test_marimo_app_keeps_the_save_confirmation_in_a_state():
    """The confirmation lives in a state the next item's view shows (a cell output of its own was
    cleared as soon as the next item's button replaced the clicked one)."""
    text = APP.read_text()
    assert 'set_message(f"saved {choice.value}' in text and "last = get_message()" in text


def test_marimo_app_counts_only_this_samples_labels(tmp_path):
    """An annotator with 10 labels of an earlier sample and 1 of this 3-item sample read
    'Item 2 of 3 · 11 labelled by you'; only this sample's labels are counted now."""
    sample = pd.DataFrame([{"key": f"k{i}", "config": "m", "lang": "en", "id": f"i{i}", "question": "q",
                            "answer": "a", "prediction": "b", "reasoning": ""} for i in range(3)])
    path = write_sample(sample, tmp_path / "ann" / "sample.jsonl")
    store = AnnotationStore(path.parent, "ann1")
    for i in range(10):
        store.save(f"old{i}", "overthinking")
    store.save("k0", "overthinking")
    outputs, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(path)),
                                     "annotator": SimpleNamespace(value="ann1")})
    assert defs["row"]["key"] == "k1" and defs["done"] == 1
    assert any("Item 2 of 3 · 1 labelled by you" in str(getattr(o, "text", o)) for o in outputs)


def test_an_annotator_named_like_the_sample_file_is_refused(tmp_path):
    """An annotator named 'sample' had their labels appended to sample.jsonl itself: read back as extra
    sample rows, never read as labels, and lost when the next render rewrote the sample."""
    import pytest

    from cresowlve_core.error_analysis.annotation import SAMPLE_FILE, read_sample
    from cresowlve_core.failures import InputError

    sample = pd.DataFrame([{"key": "k0", "config": "m", "lang": "en", "id": "i0", "question": "q", "answer": "a",
                            "prediction": "b", "reasoning": ""}])
    path = write_sample(sample, tmp_path / "ann" / SAMPLE_FILE)
    with pytest.raises(InputError, match="taken by the annotation sample's file; choose another name"):
        AnnotationStore(path.parent, "sample")
    _, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(path)),
                               "annotator": SimpleNamespace(value="sample")})
    assert "choose another name" in defs["problem"] and defs["store"] is None and defs["row"] is None
    assert len(read_sample(path)) == 1


def test_marimo_app_save_confirmation_shows_a_hostile_item_id_as_text(tmp_path):
    """The confirmation 'saved <category> for <id>' was rendered by mo.md as written: an item id from a
    run directory with an HTML tag became that tag in the page. It is shown as text now."""
    hostile = '<img src=x onerror="alert(1)">'
    sample = pd.DataFrame([{"key": f"k{i}", "config": "m", "lang": "en", "id": f"{hostile}{i}", "question": "q",
                            "answer": "a", "prediction": "b", "reasoning": ""} for i in range(2)])
    path = write_sample(sample, tmp_path / "ann" / "sample.jsonl")
    store, rows = AnnotationStore(path.parent, "ann1"), sample.to_dict("records")
    said: list[str] = []
    state = {"embedded": [], "rows": rows, "store": store, "get_saved": lambda: 0, "set_saved": lambda f: None,
             "Path": Path, "path": path, "problem": None}  # the loading cell's names
    view = {"row": rows[0], "choice": SimpleNamespace(value="overthinking"), "note": SimpleNamespace(value=""),
            "save": SimpleNamespace(value=True), "done": 0, "i": 0, "keys": ["k0", "k1"], "last": "", "view": None}
    _app().run(defs={**state, **view, "get_message": lambda: "", "set_message": said.append})  # a click on "save"
    assert said == [f"saved overthinking for {hostile}0"]
    outputs, _ = _app().run(defs={**state, "get_message": lambda: said[0], "set_message": said.append})
    # a callout carries its HTML as JSON in an attribute: read back as the HTML the page gets
    page = "".join(str(getattr(o, "text", o)) for o in outputs)
    callout = json.loads(html.unescape(re.search(r"<marimo-callout-output data-html='([^']*)'", page).group(1)))
    assert "saved overthinking for &lt;img" in callout and "<img" not in callout


def test_an_annotators_file_the_app_cannot_read_is_one_message_naming_its_line(tmp_path):
    """A hand-edited line of the annotator's own labels file (no key, not JSON) made the app's cell raise
    KeyError 'key' or RunDirError instead of saying which line of which file it cannot use."""
    sample = pd.DataFrame([{"key": f"k{i}", "config": "m", "lang": "en", "id": f"i{i}", "question": "q",
                            "answer": "a", "prediction": "b", "reasoning": ""} for i in range(2)])
    path = write_sample(sample, tmp_path / "ann" / "sample.jsonl")
    labels = path.parent / "ann1.jsonl"
    for line, problem in (('{"annotator": "ann1", "category": "other"}', "needs a 'key'"), ("{nope", "not JSON")):
        labels.write_text(line + '\n{"key": "k0", "annotator": "ann1", "category": "other"}\n')
        _, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(path)),
                                   "annotator": SimpleNamespace(value="ann1")})
        assert defs["problem"].startswith(f"{labels}:1: ") and problem in defs["problem"]
        assert defs["row"] is None


def test_a_sample_row_without_a_key_is_one_message_naming_its_line(tmp_path):
    """Sample rows without a key were shown with the key NaN: every such row was keyed 'nan', so the first
    label saved counted for all of them and the app went on to 'All N items labelled'."""
    path = tmp_path / "ann" / "sample.jsonl"
    path.parent.mkdir()
    path.write_text('{"id": "i0", "question": "q"}\n{"id": "i1", "question": "q"}\n')
    _, defs = _app().run(defs={"sample_path": SimpleNamespace(value=str(path)),
                               "annotator": SimpleNamespace(value="ann1")})
    assert defs["problem"] == f"{path}:1: a sampled answer needs a 'key' (a non-empty string), got None"
    assert defs["row"] is None
