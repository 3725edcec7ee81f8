"""Complexity features (domains, semantic distance, atomic facts) and their correlations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cresowlve_core.analysis.complexity import (
    correlation_verdict,
    difficulty_correlations,
    features_long,
    item_features,
    max_pairwise_distance,
    performance_correlations,
)

VECTORS = {"A": [1.0, 0.0], "B": [0.0, 1.0], "C": [-1.0, 0.0], "A2": [2.0, 0.0]}


def fake_embed(texts: list[str]) -> np.ndarray:
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def _responses(rows: list[dict]) -> pd.DataFrame:
    base = {
        "config": "m",
        "thinking": False,
        "lang": "en",
        "difficulty": 3.0,
        "knowledge_domains": [],
        "n_atomic_facts": np.nan,
        "judge": np.nan,
        "em_lenient": np.nan,
    }
    return pd.DataFrame([{**base, **r} for r in rows])


def test_max_pairwise_cosine_distance():
    items = pd.DataFrame(
        {"id": ["p", "q", "r", "s", "t"], "knowledge_domains": [["A", "B"], ["A", "B", "C"], ["A", "A2"], ["A"], []]}
    )
    d = max_pairwise_distance(items, fake_embed).tolist()
    assert d[0] == pytest.approx(1.0)  # orthogonal
    assert d[1] == pytest.approx(2.0)  # opposite
    assert d[2] == pytest.approx(0.0, abs=1e-7)  # same direction, different norm
    assert d[3] == 0.0 and math.isnan(d[4])  # a single domain is distance 0; no domain at all is unknown


def test_item_features_one_row_per_item_prefers_english_annotations():
    df = _responses(
        [
            {"id": "x", "lang": "ru", "knowledge_domains": ["C"], "n_atomic_facts": 2},
            {"id": "x", "lang": "en", "knowledge_domains": ["A", "B"], "n_atomic_facts": 2},
            {"id": "y", "lang": "en", "knowledge_domains": ["A"], "n_atomic_facts": 4},
        ]
    )
    feats, notes = item_features(df, embed_fn=fake_embed)
    f = feats.set_index("id")
    assert notes == []
    assert f.loc["x", "n_domains"] == 2 and f.loc["x", "max_domain_distance"] == pytest.approx(1.0)
    assert f.loc["y", "n_atomic_facts"] == 4 and f.loc["y", "max_domain_distance"] == 0.0  # single domain


def test_missing_features_are_reported_not_raised():
    df = _responses([{"id": "x", "knowledge_domains": ["A", "B"]}])

    def broken(_: list[str]) -> np.ndarray:
        raise RuntimeError("model not installed")

    feats, notes = item_features(df, embed_fn=broken)
    assert feats["max_domain_distance"].isna().all()
    assert any("Semantic distance" in n and "model not installed" in n for n in notes)
    assert any("n_atomic_facts" in n for n in notes)
    _, notes_off = item_features(df, semantic_distance=False)
    assert any("switched off" in n for n in notes_off)
    _, notes_none = item_features(_responses([{"id": "x"}]), embed_fn=fake_embed)
    assert any("no `knowledge_domains`" in n for n in notes_none)


def test_correlations_with_difficulty_and_correctness():
    rows = []
    for i in range(60):
        d = 1 + i % 5
        rows.append(
            {
                "id": f"i{i}",
                "difficulty": float(d),
                "knowledge_domains": ["A", "B", "C"][: 1 + (i % 3)],
                "n_atomic_facts": float(d * 2),
                "judge": float(d <= 2),
            }
        )
    df = _responses(rows)
    feats, _ = item_features(df, embed_fn=fake_embed)
    dc = difficulty_correlations(feats).set_index("feature")
    assert dc.loc["n_atomic_facts", "spearman_rho"] == pytest.approx(1.0)
    assert dc.loc["n_atomic_facts", "pearson_r"] == pytest.approx(1.0)
    assert dc.loc["n_atomic_facts", "spearman_p"] < 1e-10
    assert abs(dc.loc["n_domains", "spearman_rho"]) < 0.3  # unrelated by construction
    pc = performance_correlations(df, feats, "judge").set_index("feature")
    assert pc.loc["n_atomic_facts", "spearman_rho"] < -0.8  # more facts (harder) → less often correct
    assert pc.loc["n_atomic_facts", "n"] == 60
    long = features_long(feats)
    assert set(long["feature"]) == {"n_domains", "max_domain_distance", "n_atomic_facts"}


@pytest.mark.embeddings
def test_real_embeddings_rank_related_domains_closer(tmp_cache):
    items = pd.DataFrame(
        {"id": ["near", "far"], "knowledge_domains": [["Astronomy", "Astrophysics"], ["Astronomy", "Food & Cuisine"]]}
    )
    from cresowlve_core.embeddings import embed

    d = max_pairwise_distance(items, embed).tolist()
    assert 0.0 <= d[0] < d[1] <= 2.0


def test_single_domain_items_have_distance_zero_and_stay_in():
    df = _responses(
        [
            {"id": "one", "knowledge_domains": ["A"]},
            {"id": "dup", "knowledge_domains": ["A", "A"]},
            {"id": "two", "knowledge_domains": ["A", "B"]},
            {"id": "none", "knowledge_domains": []},
        ]
    )
    f = item_features(df, embed_fn=fake_embed)[0].set_index("id")
    assert f.loc["one", "max_domain_distance"] == 0.0 and f.loc["dup", "max_domain_distance"] == 0.0
    assert f.loc["two", "max_domain_distance"] == pytest.approx(1.0)
    assert math.isnan(f.loc["none", "max_domain_distance"])


def test_every_rho_has_a_ci_and_holm_adjusted_p():
    from scipy.stats import spearmanr
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    rows = [
        {
            "id": f"i{i}",
            "difficulty": float(1 + i % 5),
            "knowledge_domains": ["A", "B", "C"][: 1 + rng.integers(0, 3)],
            "n_atomic_facts": float(1 + i % 5 + rng.integers(0, 2)),
            "judge": float(rng.random() < 0.5),
        }
        for i in range(200)
    ]
    df = _responses(rows)
    feats, _ = item_features(df, embed_fn=fake_embed)
    dc = difficulty_correlations(feats).set_index("feature")
    for f, r in dc.iterrows():
        assert r["spearman_low"] <= r["spearman_rho"] <= r["spearman_high"]
        assert r["pearson_low"] <= r["pearson_r"] <= r["pearson_high"]
        ref = spearmanr(feats[f], feats["difficulty"], nan_policy="omit")
        assert r["spearman_rho"] == pytest.approx(ref.statistic)
    assert np.allclose(dc["spearman_p_holm"], multipletests(dc["spearman_p"], method="holm")[1])
    assert dc.loc["n_atomic_facts", "significant"]
    null = dc.loc["n_domains"]
    assert not null["significant"]
    text = correlation_verdict(null)
    assert "no significant correlation" in text and "rules out |ρ| >" in text and "n = 200" in text
    assert "95% CI [" in correlation_verdict(dc.loc["n_atomic_facts"])
    pc = performance_correlations(df, feats, "judge")
    assert {"spearman_low", "spearman_high", "spearman_p_holm", "significant"} <= set(pc.columns)


def test_no_section_imports_the_embedding_model_when_semantic_distance_is_off(tmp_path, tmp_cache):
    """Every section of notebook 03, run as the notebook runs them with ``semantic_distance=False``, in a
    fresh process with an empty embedding cache: neither torch nor transformers (seconds of import) is loaded."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
import sys
from cresowlve_core.analysis import load_runs, report, write_synthetic_runs
write_synthetic_runs({str(tmp_path / "runs")!r}, n_items=40, configs=2, seed=0)
rs = load_runs({str(tmp_path / "runs" / "*")!r})
report.runs_section(rs); report.table1_section(rs, None, {str(tmp_path / "out")!r}); report.difficulty_section(rs)
report.groups_section(rs, min_group_size=5, n_perm=20); report.creative_factual_section(rs)
report.complexity_section(rs, semantic_distance=False); report.paired_section(rs)
report.reliability_section(rs, n_boot=20); report.cost_section(rs)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "sentence_transformers")))
"""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=tmp_path).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("n, why", [(3, "n = 3 is too few for an interval"), (4, "no interval at |ρ| = 1")])
def test_a_verdict_without_an_interval_says_so_and_claims_nothing_of_one(n, why):
    """Three items give ρ but no Fisher-z interval, and |ρ| = 1 a zero-width one. Before, the verdict read
    "ρ = +1.00, 95% CI [+nan, +nan], n = 3: the 95% interval excludes 0 but the Holm-corrected p (0.3333) is
    not below 0.05"."""
    feats = pd.DataFrame({"id": [f"i{i}" for i in range(n)], "difficulty": np.arange(1.0, n + 1),
                          "n_domains": np.arange(1.0, n + 1), "max_domain_distance": np.nan, "n_atomic_facts": np.nan})
    row = difficulty_correlations(feats).iloc[0]
    text = correlation_verdict(row)
    assert text.startswith(f"ρ = +1.00, n = {n} ({why}): no significant correlation with difficulty (Holm p = ")
    assert "nan" not in text and "excludes 0" not in text and "CI [" not in text


def test_a_domain_named_twice_on_an_item_counts_once():
    """Before: ["A", "A"] gave n_domains = 2 beside a max distance of 0 (one distinct domain); the group
    breakdowns count it as one domain too."""
    df = _responses([{"id": "dup", "knowledge_domains": ["A", "A"]}, {"id": "two", "knowledge_domains": ["A", "B"]},
                     {"id": "none", "knowledge_domains": []}])
    f = item_features(df, embed_fn=fake_embed)[0].set_index("id")
    assert f.loc["dup", "n_domains"] == 1.0 and f.loc["two", "n_domains"] == 2.0 and math.isnan(f.loc["none", "n_domains"])


def test_a_perfect_order_has_no_interval_in_the_table_not_a_zero_width_one():
    """Four items with domains and difficulty in the same order: ρ = r = 1, p = 0.083 (exact). The table and the
    report's record showed the 95% interval as [1.0, 1.0], certainty that 4 items do not give; the verdict
    already said "no interval at |ρ| = 1"."""
    feats = pd.DataFrame({"id": [f"i{i}" for i in range(4)], "difficulty": np.arange(1.0, 5.0),
                          "n_domains": np.arange(1.0, 5.0), "max_domain_distance": np.nan, "n_atomic_facts": np.nan})
    row = difficulty_correlations(feats).iloc[0]
    assert row["spearman_rho"] == pytest.approx(1.0) and row["spearman_p"] == pytest.approx(1 / 12)
    assert all(math.isnan(row[c]) for c in ("pearson_low", "pearson_high", "spearman_low", "spearman_high"))
    assert correlation_verdict(row).startswith("ρ = +1.00, n = 4 (no interval at |ρ| = 1)")
    feats["n_domains"] = [1.0, 3.0, 2.0, 4.0]  # ρ = 0.8: an interval with width, kept
    row = difficulty_correlations(feats).iloc[0]
    assert -1.0 < row["spearman_low"] < row["spearman_rho"] < row["spearman_high"] <= 1.0
