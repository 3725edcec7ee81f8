"""notebooks/04_error_analysis.ipynb renders headless against the fake server."""

from __future__ import annotations

from fakeserver import FakeServer
from test_errors_label import _items, write_run

from cresowlve_core.error_analysis.annotation import AnnotationStore, read_sample
from cresowlve_core.notebooks import run_notebook


def test_error_notebook_renders_with_distribution_and_agreement(tmp_path):
    items = _items(8)
    (tmp_path / "runs").mkdir()
    for model in ("m1", "m2"):
        write_run(tmp_path / "runs", "en", items, {it.id: False for it in items}, model=model)
    cats = ["Overthinking", "Wrong reference", "Clue misinterpretation", "no category here"]

    def answer(req):
        n = int(req.prompt.split("<puzzle>\nPuzzle number ")[1].split(":")[0])
        c = cats[n % 4]
        return f"RATIONALE: because {n}\nCATEGORY: {c}" if "category" not in c else c

    params = {"runs": str(tmp_path / "runs" / "*"), "out_dir": str(tmp_path / "out"), "labeller_model": "fake",
              "limit": None, "n_boot": 100}
    with FakeServer(answers=answer) as srv:
        params["labeller_base_url"] = srv.base_url
        res = run_notebook("04_error_analysis", params, tmp_path / "reports")
        rec = res.records
        assert rec["runs"]["n_wrong"] == 16 and rec["runs"]["n_wrong_em"] == 16
        assert rec["labels"]["labelled"] == 12 and rec["labels"]["unlabelled"] == 4
        # what `cresowlve report 04_error_analysis` exits with: the labelling as `errors label` would
        assert rec["stages"] == [{"unit": "wrong answers", "n_units": 16, "n_done": 16, "n_error": 0, "n_not_run": 0}]
        assert len(rec["distribution"]["chi2"]) == 1
        assert rec["examples"]["shown"] > 0
        sample = read_sample(rec["annotation"]["sample_path"])
        assert len(sample) == 16 and rec["annotation"]["n_annotations"] == 0
        # two annotators label the sample; a re-render computes agreement (labels are cached)
        for name in ("ann1", "ann2"):
            store = AnnotationStore(tmp_path / "out" / "annotations", name)
            for i, key in enumerate(sample["key"]):
                store.save(key, "overthinking" if i % 2 else "wrong_reference")
        srv.reset()
        res2 = run_notebook("04_error_analysis", params, tmp_path / "reports")
        assert srv.total == 0
    a = res2.records["annotation"]
    assert a["annotators"] == ["ann1", "ann2"] and a["pairs"][0]["kappa"] == 1.0
    assert a["labeller_kappa"][3] == 12  # the 4 unlabelled are left out
    html = res2.html.read_text()
    assert "Wilson" in html and "κ" in html
