"""Re-scoring the CREATE authors' recorded judgments (no judge calls)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from cresowlve_core import jsonl
from cresowlve_core.create.report import analyse, validity_agreement
from cresowlve_core.create.scored import load_recorded, parse_field, recorded_dir, recorded_set
from cresowlve_core.create.utility import PATIENCE_GRID, creative_utility, utility_breakdown


def hashed_embedder(texts: list[str]) -> np.ndarray:
    """Deterministic stand-in for the sentence model: a unit vector per distinct text."""
    rows = []
    for t in texts:
        seed = int.from_bytes(hashlib.sha256(t.encode("utf-8")).digest()[:8], "little")
        v = np.random.default_rng(seed).normal(size=32)
        rows.append(v / np.linalg.norm(v))
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), 32)


@pytest.fixture(scope="module")
def recorded():
    return load_recorded()


def test_recorded_shape(recorded):
    assert len(recorded) == 148
    assert len({s.config for s in recorded}) == 8
    assert sum(len(s.paths) for s in recorded) == 2979
    for s in recorded:
        assert len(s.paths) == len(s.specificity) == len(s.factuality) == len(s.validity)
        assert all(len(p) == len(sp) == len(f) for p, sp, f in zip(s.paths, s.specificity, s.factuality))
        assert s.query_id and s.query_id.count("__") >= 2  # matched to the shipped queries


def test_utilities_finite_and_monotone_in_patience(recorded):
    for s in recorded:
        b = utility_breakdown(s.paths, s.specificity, s.factuality, s.validity, embedder=hashed_embedder)
        curve = b.curve(PATIENCE_GRID)
        assert all(math.isfinite(u) and u >= 0 for u in curve)
        assert all(b2 >= b1 - 1e-12 for b1, b2 in zip(curve, curve[1:])), s.config
        paper = b.curve(PATIENCE_GRID, "paper")
        assert all(p <= r + 1e-12 for p, r in zip(paper, curve))  # paper discounts one step more


def test_all_invalid_sets_score_zero(recorded):
    s = recorded[0]
    assert creative_utility(s.paths, s.specificity, s.factuality, [0] * len(s.paths)) == 0.0
    none_valid = [x for x in recorded if not any(x.validity)]
    for x in none_valid:
        assert creative_utility(x.paths, x.specificity, x.factuality, x.validity) == 0.0


def test_same_inputs_same_utility(recorded):
    s = max(recorded, key=lambda x: len(x.paths))
    args = (s.paths, s.specificity, s.factuality, s.validity)
    u1 = creative_utility(*args, embedder=hashed_embedder)
    u2 = creative_utility(*args, embedder=hashed_embedder)
    assert u1 == u2 > 0


def test_string_encoded_fields_parse_the_same():
    line = next(iter(sorted(recorded_dir().glob("*.jsonl")))).read_text(encoding="utf-8").splitlines()[0]
    row = json.loads(line)
    fields = ("paths", "judged_specificity_per_triple", "judged_factuality_per_triple", "validity_per_path")
    as_json = {**row, **{k: json.dumps(row[k]) for k in fields}}
    as_python = {**row, **{k: repr(row[k]) for k in fields}}
    base = recorded_set("m__original", row)
    for variant in (as_json, as_python):
        other = recorded_set("m__original", variant)
        assert (other.paths, other.specificity, other.factuality, other.validity) == (
            base.paths,
            base.specificity,
            base.factuality,
            base.validity,
        )


def test_recomputed_validity_is_stricter(recorded):
    recomputed = load_recorded(validity="recomputed")
    for a, b in zip(recorded, recomputed):
        assert all(vb <= va for va, vb in zip(a.validity, b.validity))
    table = validity_agreement(recorded)
    assert 0.9 < float((table.agree * table.paths).sum() / table.paths.sum()) < 1.0


def test_report_tables_with_stand_in_embedder(recorded):
    rep = analyse(recorded, embedder=hashed_embedder)
    board = rep.leaderboard(n_boot=200)
    assert len(board) == 8
    assert (board["ci_low@0.9"] <= board["utility@0.9"]).all() and (board["utility@0.9"] <= board["ci_high@0.9"]).all()
    assert board["utility@0.9"].is_monotonic_decreasing
    assert (board["utility@0.9"] >= board["utility@0.7"]).all()
    again = rep.leaderboard(n_boot=200)
    assert board.equals(again)  # seeded bootstrap
    trade = rep.factuality_tradeoff(thresholds=(0.0, 0.5, 1.0))
    assert len(trade) == 24 and np.isfinite(trade["utility"]).all()
    at_one = trade[trade.threshold == 1.0].set_index("config")["utility"]
    assert np.allclose(at_one.sort_index(), board.set_index("config")["utility@0.9"].sort_index())
    dist = rep.distinctiveness()
    assert dist["avg_nu_set"].between(0, 1).all()
    examples = rep.example_paths(per_config=2)
    assert set(examples["config"]) <= {s.config for s in recorded} and len(examples) > 0


def test_tradeoff_section_states_the_patience_and_threshold_it_used(recorded, monkeypatch):
    """The quality-vs-factuality section says which patience it computed at and records it with the
    report's factuality threshold (among the columns). Before: the report's text said p = 0.9 above a
    table and chart computed at p = 0.8, and nothing recorded which."""
    import json as _json

    from cresowlve_core.create import report as cr

    said: list[str] = []
    monkeypatch.setattr(cr, "say", said.append)
    monkeypatch.setattr(cr, "show", lambda *_a, **_k: None)
    rep = analyse(recorded[:24], embedder=hashed_embedder)
    rec = cr.tradeoff_section(rep, 0.8, factuality_threshold=0.75)
    assert said == ["Mean creative utility at patience p = 0.8; the other sections count a path as factual at t = 0.75."]
    assert (rec["patience"], rec["factuality_threshold"]) == (0.8, 0.75)
    board = rep.leaderboard((0.8,), n_boot=10, factuality_threshold=0.75).set_index("config")["utility@0.8"]
    assert {c: u["0.75"] for c, u in rec["utility"].items()} == pytest.approx(board.to_dict(), abs=1e-4)
    _json.dumps(rec)
    from cresowlve_core.paths import REPO_ROOT

    nb = _json.loads((REPO_ROOT / "notebooks" / "07_create.ipynb").read_text())
    (text,) = ["".join(c["source"]) for c in nb["cells"] if "".join(c["source"]).startswith("## Quality vs factuality")]
    assert "p = 0." not in text  # the patience is the parameter's, stated by the section


def test_threshold_zero_keeps_every_valid_path(recorded):
    s = max(recorded, key=lambda x: len(x.paths))
    lenient = creative_utility(
        s.paths, s.specificity, s.factuality, s.validity, factuality_threshold=0.0, embedder=hashed_embedder
    )
    ones = replace(s, factuality=[[1.0] * len(p) for p in s.paths])
    assert creative_utility(ones.paths, ones.specificity, ones.factuality, ones.validity, embedder=hashed_embedder) == pytest.approx(lenient)


def test_a_recorded_dir_without_sets_is_refused_naming_it(tmp_path):
    from cresowlve_core.failures import MissingInput

    with pytest.raises(MissingInput, match=r"recorded_dir: '.*nowhere' is not a folder"):
        load_recorded(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingInput, match=r"'.*empty' holds no \*\.jsonl file"):
        load_recorded(tmp_path / "empty")


def _write_sets(folder, rows) -> None:
    folder.mkdir()
    (folder / "m__original.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_a_recorded_file_with_a_bad_or_repeated_set_is_refused_naming_file_and_line(tmp_path):
    """A row without a field was a bare KeyError ('entity_b'), an unparseable list field a
    SyntaxError "<unknown>, line 1"; a query on two lines was ranked as two queries (3 sets
    over 2 queries)."""
    from cresowlve_core.failures import InputError

    rows = list(jsonl.read_jsonl(recorded_dir() / "qwen3-32b__original.jsonl"))[:2]
    _write_sets(tmp_path / "missing", [rows[0], {k: v for k, v in rows[1].items() if k != "entity_b"}])
    with pytest.raises(InputError, match=r"m__original\.jsonl:2: not a recorded CREATE set \(no field 'entity_b'\)"):
        load_recorded(tmp_path / "missing")
    _write_sets(tmp_path / "garbled", [rows[0], {**rows[1], "judged_specificity_per_triple": "not a list"}])
    with pytest.raises(InputError, match=r"m__original\.jsonl:2: not a recorded CREATE set \(SyntaxError"):
        load_recorded(tmp_path / "garbled")
    _write_sets(tmp_path / "twice", [rows[0], rows[1], rows[0]])
    with pytest.raises(InputError, match=r"m__original\.jsonl: 1 query\(ies\) answered on more than one line: "
                                         r"'.*' \(lines 1, 3\); one set per query"):
        load_recorded(tmp_path / "twice")


def test_a_recorded_judgment_off_its_scale_or_missing_a_triple_is_refused(tmp_path):
    """A NaN specificity made the query's utility NaN, a factuality of 7 passed every threshold,
    a specificity list one short left the path without a strength: each was used as given."""
    from cresowlve_core.failures import InputError

    row = next(iter(jsonl.read_jsonl(recorded_dir() / "qwen3-32b__original.jsonl")))
    spec, fact = parse_field(row["judged_specificity_per_triple"]), parse_field(row["judged_factuality_per_triple"])
    cases = {
        "nan": ({**row, "judged_specificity_per_triple": [[math.nan, *spec[0][1:]], *spec[1:]]},
                r"jsonl:1: m__original: path 1: specificity nan is not a score 0-5 \(Q935843__"),
        "seven": ({**row, "judged_factuality_per_triple": [*fact[:1], [7.0] * len(fact[1]), *fact[2:]]},
                  r"path 2: factuality 7\.0 is not a score 0-1"),
        "short": ({**row, "judged_specificity_per_triple": [spec[0][:-1], *spec[1:]]},
                  rf"path 1 has {len(spec[0])} triples but {len(spec[0]) - 1} specificity and {len(fact[0])} factuality"),
    }
    for name, (bad, problem) in cases.items():
        _write_sets(tmp_path / name, [bad])
        with pytest.raises(InputError, match=problem):
            load_recorded(tmp_path / name)


def test_configurations_are_named_like_in_every_other_report():
    from cresowlve_core.create.report import config_display_name

    assert config_display_name("gpt-5.4-medium__original") == "gpt-5.4 (medium)"
    assert config_display_name("gemini-3.1-pro-preview-medium__original") == "gemini-3.1-pro-preview (medium)"
    assert config_display_name("gpt-4.1__iterate") == "gpt-4.1, iterate"
    assert config_display_name("qwen3-32b__original") == "qwen3-32b"
    assert config_display_name("fake-model__original (yours: mine)") == "fake-model (yours: mine)"
    assert config_display_name("a free label") == "a free label"


def test_first_queries_keeps_the_first_shipped_queries(recorded):
    from cresowlve_core.create.queries import load_queries
    from cresowlve_core.create.report import first_queries, load_sets

    shipped = [q.id for q in load_queries(None)]
    answered = {s.query_id for s in recorded}
    expected = [q for q in shipped if q in answered][:4]
    assert expected == shipped[:4]  # the queries the local model's section answers first
    kept = first_queries(recorded, 4)
    assert {s.query_id for s in kept} == set(expected)
    assert kept == [s for s in recorded if s.query_id in set(expected)]  # recorded order kept
    assert (len(kept), sum(len(s.paths) for s in kept)) == (30, 560)
    assert first_queries(recorded, None) == list(recorded)
    assert len({s.query_id for s in first_queries(recorded, 1000)}) == len(answered)
    unlisted = [replace(recorded[0], query_id="Z__unlisted"), replace(recorded[1], query_id="A__unlisted")]
    mixed = first_queries([*unlisted, recorded[2]], 2)  # a query the shipped file lists comes first
    assert [s.query_id for s in mixed] == ["A__unlisted", recorded[2].query_id]
    for bad in (0, -1, True, 2.0, "4"):
        with pytest.raises(ValueError, match="n_queries"):
            first_queries(recorded, bad)
    loaded = load_sets(None, [], 4)
    assert loaded.sets == kept and loaded.message.startswith(f"recorded answers to 4 of the {len(answered)} queries")
    assert not load_sets(None, []).message.startswith("recorded answers")


def test_distinctiveness_and_examples_follow_the_reports_factuality_threshold(recorded, monkeypatch):
    """The leaderboard ranks at the report's factuality threshold; its distinctiveness and example
    paths were drawn at 1.0 whatever it was (at 0.5 on the default 4 queries: 24 paths of strength
    > 3 for gpt-5.4 (medium) where the section counted 14, and 4 of 8 first picks differ)."""
    from cresowlve_core.create import report as cr

    shown: list[object] = []
    monkeypatch.setattr(cr, "show", lambda obj, *_a, **_k: shown.append(obj))
    monkeypatch.setattr(cr, "say", lambda *_a, **_k: None)
    rep = analyse(cr.first_queries(recorded, 4), embedder=hashed_embedder)
    cr.distinctiveness_section(rep, factuality_threshold=0.5)
    table = shown[0]
    assert isinstance(table, cr.pd.DataFrame)
    assert table.n_paths.tolist() == rep.distinctiveness(factuality_threshold=0.5).n_paths.tolist()
    assert table.n_paths.sum() > rep.distinctiveness().n_paths.sum()
    cr.examples_section(rep, per_config=1, factuality_threshold=0.5)
    picks = shown[-1]
    assert isinstance(picks, cr.pd.DataFrame)
    assert picks.path.tolist() == rep.example_paths(per_config=1, factuality_threshold=0.5).path.tolist()
    assert picks.path.tolist() != rep.example_paths(per_config=1).path.tolist()
