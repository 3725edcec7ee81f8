"""notebooks/03_analysis.ipynb headless: full synthetic set, partial data, and no runs at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cresowlve_core.analysis.synthetic_runs import write_synthetic_runs
from cresowlve_core.paths import REPO_ROOT

PAPER = REPO_ROOT / "data" / "cresowlve" / "paper_table1.csv"


@pytest.fixture(autouse=True)
def _kernel_finds_the_package(monkeypatch):
    """The kernel runs in notebooks/: make the package importable even without an editable install."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))


def _run(tmp_path: Path, params: dict) -> tuple[dict, str, str]:
    from cresowlve_core.notebooks import run_notebook

    res = run_notebook("03_analysis", {"export_dir": str(tmp_path / "export"), **params}, tmp_path / "reports")
    assert res.ipynb.exists() and res.html.exists()
    return res.records, res.ipynb.read_text(encoding="utf-8"), res.html.read_text(encoding="utf-8")


def test_small_synthetic_set(tmp_path):
    write_synthetic_runs(tmp_path / "runs", n_items=200, configs=3, seed=1)
    rec, ipynb, html = _run(
        tmp_path,
        {"runs": str(tmp_path / "runs" / "*"), "n_boot": 200, "semantic_distance": False, "min_group_size": 10},
    )
    assert rec["runs"] == {"n_runs": 6, "n_records": 1200, "synthetic": True, "langs": ["en", "ru"], "unfinished": []}
    assert rec["seeds"]["analysis"] == {"seed": 0, "n_boot": 200, "n_perm": 1000}  # the seeds are in the report
    assert {v["seed"] for v in rec["seeds"]["runs"].values()} == {1}
    assert "SYNTHETIC DATA — NOT RESULTS" in html
    t = rec["table1"]
    assert t["n_rows"] == 3 and [r["config"] for r in t["rows"]] == [
        "OLMo-2-32B-Instruct",
        "C4AI-command-a",
        "Llama-3.3-70B-Instruct",
    ]
    if PAPER.exists():
        assert t["matched_paper"] == 3
    assert all(0 <= r["en_llm_judge"] <= 100 and 0 <= r["ru_exact_match"] <= 100 for r in t["rows"])
    assert Path(t["csv"]).exists() and "SYNTHETIC DATA" in Path(t["tex"]).read_text().splitlines()[0]
    assert rec["difficulty"]["n_cells"] == 3 * 2 * 5 * 2 and rec["difficulty"]["interval"] == "wilson"
    assert rec["difficulty"]["trend_rows"] == 3 * 2 * 2
    assert t["low_coverage"] == [] and t["unfinished"] == []
    assert all(r["en_llm_judge_n_all"] >= r["en_llm_judge_n"] for r in t["rows"])
    g = rec["groups"]["knowledge_domains"]
    assert g["expected_by_chance"] == pytest.approx(0.05 * g["n_cells"]) and g["n_flagged"] <= g["n_uncorrected"]
    assert "would still reach p &lt; 0.05 by chance" in html or "would still reach p < 0.05 by chance" in html
    assert sum(g["homogeneity_tests"].values()) == 3 * 2  # the report says which test gave each row's p
    assert "p is the permutation test&#x27;s" in html or "p is the permutation test's" in html
    assert rec["paired"]["metric"] == "judge" and len(rec["paired"]["cross_lingual"]) == 3
    assert "kappa [95% CI]" in html
    assert rec["groups"]["knowledge_domains"]["metric"] == "judge"
    assert rec["groups"]["knowledge_domains"]["n_groups"] > 5
    assert len(rec["creative_vs_factual"]["gaps"]) == 3 * 2 * 2
    assert rec["complexity"]["features"] == ["n_domains", "n_atomic_facts"]
    assert "switched off" in html
    assert 0.0 < rec["reliability"]["kappa_em"] < 1.0 and rec["reliability"]["kappa_repeat"] > 0.5
    assert rec["cost"]["runs_with_unknown_cost"] == 0 and rec["cost"]["total_known_cost"] > 0
    assert "Traceback" not in ipynb


def test_no_judge_single_language_no_annotations(tmp_path):
    write_synthetic_runs(
        tmp_path / "runs",
        n_items=120,
        configs=2,
        seed=2,
        langs=("en",),
        judge=False,
        annotations=False,
        atomic_facts=False,
    )
    rec, ipynb, html = _run(tmp_path, {"runs": str(tmp_path / "runs"), "n_boot": 100, "semantic_distance": False})
    assert rec["runs"]["langs"] == ["en"] and rec["runs"]["n_runs"] == 2
    for message in (
        "Only one language (en)",
        "No LLM-judge scores",
        "No Ru runs",
        "No <code>knowledge_domains</code> annotations",  # code spans are written as <code> (untrusted.markdown)
        "No <code>cultures</code> annotations",
        "<code>n_atomic_facts</code> is empty in every record",
        "agreement and repeatability need a judged run",
    ):
        assert message in ipynb, message  # the Markdown source of the message
    assert "Only one language (en)" in html
    assert rec["difficulty"]["metrics"] == ["em_strict"]
    assert rec["groups"]["knowledge_domains"] == {"n_groups": 0, "metric": "em_lenient"}
    assert rec["reliability"]["kappa_em"] is None
    assert rec["table1"]["rows"][0].get("ru_exact_match") is None
    assert "Traceback" not in ipynb


def test_no_runs_found_stops_gracefully(tmp_path):
    rec, ipynb, html = _run(tmp_path, {"runs": str(tmp_path / "nowhere" / "*")})
    assert rec["runs"]["n_runs"] == 0
    assert all(rec[k] == {"skipped": "no runs"} for k in ("table1", "difficulty", "groups", "cost"))
    assert "No runs found" in html
    nb = json.loads(ipynb)
    assert not any(o.get("output_type") == "error" for c in nb["cells"] for o in c.get("outputs", []))


def test_the_homogeneity_parameter_is_a_parameter_papermill_reads():
    from cresowlve_core.notebooks import notebook_parameters, notebook_path

    params = notebook_parameters(notebook_path("03_analysis"))
    assert params["homogeneity_test"] == '"auto"' and params["n_perm"] == "1000"
