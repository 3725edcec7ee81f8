"""notebooks/07_create.ipynb runs headless with its default parameters (4 queries) and at paper
scale (``n_queries = None``), and records the leaderboard."""

from __future__ import annotations

import os

import pytest

from cresowlve_core.paths import REPO_ROOT


@pytest.mark.embeddings
def test_notebook_07_default_run(tmp_path, monkeypatch, recorded_create_embeddings):
    """The default run: the recorded answers to the first 4 shipped queries, every section drawn."""
    pytest.importorskip("papermill")
    from cresowlve_core.notebooks import run_notebook

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    result = run_notebook("07_create", {}, reports_dir=tmp_path)
    rec = result.records
    assert (rec["n_queries"], rec["n_sets"], rec["n_paths"]) == (4, 30, 560)
    at_09, at_07 = rec["utility@0.9"], rec["utility@0.7"]
    assert len(at_09) == len(at_07) == 8
    assert all(at_09[c] >= at_07[c] > 0 for c in at_09)
    # real all-MiniLM-L6-v2 distances on the authors' recorded judgments (reference discount)
    assert at_09["claude-sonnet-4.6 (medium)"] == pytest.approx(20.52, abs=0.05)
    assert max(at_09, key=at_09.get) == "claude-sonnet-4.6 (medium)"
    assert min(at_09, key=at_09.get) == "qwen3-32b"
    assert rec["headline"].startswith(f"highest mean creative utility@0.9: claude-sonnet-4.6 (medium) "
                                      f"{at_09['claude-sonnet-4.6 (medium)']:.3f} [")
    assert rec["headline"].endswith(" over 2 queries (others up to 4); 8 configurations")  # it answered 2 of the 4
    assert 0.9 < rec["validity_agreement"] < 1.0
    assert set(rec["distinctiveness"]) == set(at_09)
    assert rec["local_model"]["status"] == "skipped"
    trade = rec["factuality_tradeoff"]  # computed at the last patience of the parameter, and says so
    assert (trade["patience"], trade["factuality_threshold"]) == (0.9, 1.0) and set(trade["utility"]) == set(at_09)
    assert all(trade["utility"][c]["1"] == pytest.approx(at_09[c], abs=1e-3) for c in at_09)
    assert "Mean creative utility at patience p = 0.9; the other sections count a path as factual at t = 1." \
        in result.ipynb.read_text()
    paired = rec["paired"]
    assert len(paired) == 14 and all(r["n_queries"] >= 2 for r in paired)
    first = [r for r in paired if r["patience"] == 0.9 and r["rank"] == 1][0]
    assert (first["n_queries"], first["n_a_only"], first["n_b_only"]) == (2, 0, 2)  # queries one side lacks
    step = [r for r in paired if r["patience"] == 0.9 and r["a"] == "gpt-5.4 (medium)"][0]
    assert step["b"] == "gpt-5 (medium)" and step["diff"] == pytest.approx(4.26, abs=0.05) and step["ci_low"] > 0
    assert "not JSON compliant" not in result.ipynb.read_text()
    assert "recorded answers to 4 of the" in result.ipynb.read_text()
    assert result.html.exists()


@pytest.mark.embeddings
def test_notebook_07_paper_scale_run(tmp_path, monkeypatch, every_recorded_create_embedding):
    pytest.importorskip("papermill")
    from cresowlve_core.notebooks import run_notebook

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    result = run_notebook("07_create", {"n_queries": None}, reports_dir=tmp_path)
    rec = result.records
    assert rec["n_sets"] == 148 and rec["n_paths"] == 2979
    at_09, at_07 = rec["utility@0.9"], rec["utility@0.7"]
    assert len(at_09) == len(at_07) == 8
    assert all(at_09[c] >= at_07[c] > 0 for c in at_09)
    # real all-MiniLM-L6-v2 distances on the authors' recorded judgments (reference discount)
    assert at_09["gpt-5 (medium)"] == pytest.approx(12.45, abs=0.05)  # the one configuration name, no file stem
    assert max(at_09, key=at_09.get) == "gpt-5.4 (medium)"
    assert min(at_09, key=at_09.get) == "qwen3-32b"
    assert {"gpt-4.1", "gpt-4.1, iterate"} <= set(at_09) and not any("__" in c for c in at_09)
    assert rec["headline"].startswith(f"highest mean creative utility@0.9: gpt-5.4 (medium) {at_09['gpt-5.4 (medium)']:.3f} [")
    assert rec["headline"].endswith("; 8 configurations")
    assert 0.9 < rec["validity_agreement"] < 1.0
    assert set(rec["distinctiveness"]) == set(at_09)
    assert rec["local_model"]["status"] == "skipped"
    # adjacent configurations compared paired by query: 7 pairs at each of 2 patience values
    paired = rec["paired"]
    assert len(paired) == 14 and all(r["n_queries"] >= 13 for r in paired)
    last = [r for r in paired if r["patience"] == 0.9 and r["b"] == "qwen3-32b"][0]
    assert last["diff"] == pytest.approx(4.39, abs=0.05) and last["ci_low"] > 0 and last["p_holm"] < 0.05
    assert "not JSON compliant" not in result.ipynb.read_text()
    assert result.html.exists()
