"""notebooks/05_contamination.ipynb renders headless against the fake server."""

from __future__ import annotations

from fakeserver import FakeServer
from test_contamination_pipeline import N_TARGET, fake_model, make_items, write_runs

from cresowlve_core.notebooks import run_notebook


def test_contamination_notebook_renders_verdict(tmp_path):
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items)) as srv:
        params = {"runs": str(tmp_path / "runs" / "*"), "out_dir": str(tmp_path / "out"), "make_demo": False,
                  "perturber_model": "fake", "perturber_base_url": srv.base_url, "quiz_model": "fake",
                  "quiz_base_url": srv.base_url, "max_items_per_set": None, "n_boot": 200}
        res = run_notebook("05_contamination", params, tmp_path / "reports")
    rec = res.records
    assert rec["sets"]["configs"][0]["target"] == N_TARGET + 1
    assert rec["perturbations"]["m"]["not_quizzable"] == 1
    assert rec["perturbations"]["m"]["rejections"] == {"unparsed": 1}
    not_quizzed = [{"set": "target", "id": items[-1].id, "reason": "no three numbered rewrites in the reply"}]
    assert rec["bdq"]["m"]["not_quizzed"] == rec["bcq"]["m"]["not_quizzed"] == not_quizzed
    assert rec["bdq"]["m"]["non_preferred"] == ["B", "C"]
    mean = [r for r in rec["bcq"]["m"]["table"] if r["set"] == "target" and r["repeat"] == "mean"][0]
    assert mean["accuracy"] == 1.0 and mean["p"] < 1e-6
    assert rec["verdict"]["m"]["overall"].startswith("likely contaminated")
    html = res.html.read_text()
    assert html.count(f"Not in the BDQ (1 question(s) without four distinct options): <code>{items[-1].id}</code>") == 1
    assert "EMBEDDED" not in html  # real roles: no embedded banner
