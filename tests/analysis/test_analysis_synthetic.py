"""The synthetic run generator writes valid, flagged, realistic run directories."""

from __future__ import annotations

import json

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.analysis.synthetic_runs import KNOWLEDGE_DOMAINS, write_synthetic_runs
from cresowlve_core.evaluation.records import ResponseRecord
from cresowlve_core.runtime.manifest import Manifest as RunManifest


def test_records_and_manifests_follow_the_contract(tmp_path):
    dirs = write_synthetic_runs(tmp_path, n_items=50, configs=2, seed=0)
    assert len(dirs) == 4
    for d in dirs:
        manifest = RunManifest.model_validate_json((d / "manifest.json").read_text())
        assert manifest.synthetic
        lines = (d / "responses.jsonl").read_text().splitlines()
        assert len(lines) == 50
        for line in lines:
            rec = ResponseRecord.model_validate(json.loads(line))
            assert rec.synthetic and rec.lang == manifest.lang and rec.model == manifest.model


def test_realistic_shape_and_seeded(tmp_path):
    write_synthetic_runs(tmp_path / "a", n_items=2000, configs=3, seed=5)
    write_synthetic_runs(tmp_path / "b", n_items=2000, configs=3, seed=5)
    assert (tmp_path / "a" / "synthetic__OLMo-2-32B-Instruct__default__en" / "responses.jsonl").read_text() == (
        tmp_path / "b" / "synthetic__OLMo-2-32B-Instruct__default__en" / "responses.jsonl"
    ).read_text()
    rs = load_runs(str(tmp_path / "a" / "*"))
    df = rs.responses
    assert rs.synthetic and len(rs.runs) == 6
    assert set(df["difficulty"].unique()) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert 0.1 < df["reasoning_type"].eq("factual").mean() < 0.2
    assert set(df["knowledge_domains"].explode().dropna()) <= set(KNOWLEDGE_DOMAINS)
    acc = df.groupby("difficulty")["judge"].mean()
    assert acc.is_monotonic_decreasing  # accuracy drops with difficulty
    answered = df["status"].ne("error")
    assert (df.loc[answered, "em_strict"] <= df.loc[answered, "em_lenient"]).all()
    assert df.loc[~answered, ["em_strict", "em_lenient", "judge"]].isna().all().all()  # no answer: no value
    assert df["judge_repeat"].notna().any() and df["judge_status"].eq("unscored").any()


def test_configs_beyond_the_paper_get_distinct_names(tmp_path):
    dirs = write_synthetic_runs(tmp_path, n_items=5, configs=20, langs=("en",))
    assert len({d.name for d in dirs}) == 20
