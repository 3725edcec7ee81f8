"""notebooks/05_contamination.ipynb renders headless against the fake server."""

from __future__ import annotations

import html as htmllib
import json
import re

from fakeserver import FakeServer
from test_contamination_pipeline import N_TARGET, N_WRONG, fake_model, make_items, write_runs

from cresowlve_core.notebooks import run_notebook


def visible_text(path) -> str:
    """The report's visible text: scripts (the inlined chart library) and styles removed."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", path.read_text(encoding="utf-8"), flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", "\n", page))


def assert_clean_report(res) -> None:
    """No kernel warning, no raw nan/None in what a reader sees, no NaN in the notebook's JSON."""
    text = visible_text(res.html)
    assert not re.search(r"\b(nan|NaN|None|NaT|<NA>)\b", text), re.findall(r".*\b(?:nan|NaN|None)\b.*", text)[:5]
    assert "Out of range float values" not in text and "Warning" not in text
    nb = res.ipynb.read_text(encoding="utf-8")
    assert "Out of range float values" not in nb and "NaN" not in nb
    outputs = [o for c in json.loads(nb)["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stderr"]


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
    assert rec["sets"]["configs"][0]["basis"] == "em_strict"
    [stage] = rec["stages"]  # what `cresowlve report 05_contamination` exits with, as `contamination run` would
    assert stage["unit"] == "calls" and stage["n_items"] > 0 and stage["n_error"] == stage["n_not_run"] == 0
    assert rec["perturbations"]["m"]["not_quizzable"] == 1
    assert rec["perturbations"]["m"]["rejections"] == {"unparsed": 1}
    not_quizzed = [{"set": "target", "id": items[-1].id, "reason": "no three numbered rewrites in the reply"}]
    assert rec["bdq"]["m"]["not_quizzed"] == rec["bcq"]["m"]["not_quizzed"] == not_quizzed
    assert rec["bdq"]["m"]["non_preferred"] == ["B", "C"]
    items_row = [r for r in rec["bcq"]["m"]["table"] if r["set"] == "target" and r["repeat"] == "items"][0]
    assert (items_row["k"], items_row["n"]) == (N_TARGET, N_TARGET) and items_row["p"] < 1e-6
    verdict = rec["verdict"]["m"]
    assert verdict["overall"].startswith("likely contaminated")
    assert verdict["compares"].startswith(f"target (n = {N_TARGET + 1}) vs wrong_both (n = {N_WRONG})")
    assert (verdict["n_boot"], verdict["seed"]) == (200, 0)
    for section in ("bdq", "bcq", "completion", "verdict"):  # population, n and coverage in every section
        pop = rec[section]["m"]["population"]
        assert pop["basis"] == "em_strict" and pop["judge_coverage"] == {"en": 0.0, "ru": 0.0}
        assert pop["tested"]["target"] == N_TARGET + 1 and pop["min_items"] == 20
    html = res.html.read_text()
    assert html.count(f"Not in the BDQ (1 question(s) without four distinct options): <code>{items[-1].id}</code>") == 1
    assert "EMBEDDED" not in html  # real roles: no embedded banner
    text = visible_text(res.html)
    assert "sets by strict exact match in both languages (judge coverage En 0%, Ru 0%" in text
    assert "matched on difficulty (levels 1, 2, 3)" in text
    assert_clean_report(res)


def any_question_model(req) -> str:
    """Synonym swaps of the first word of any question; "A" in every quiz; "и так далее" as a continuation."""
    p = req.prompt
    if "Rewrite the question below" in p:
        q = p.split("Question:\n", 1)[1].split("\n\nReply with", 1)[0].strip()
        first, rest = q.split(" ", 1)
        return "\n".join(f"{k}. {w} {rest}" for k, w in ((1, "Иногда"), (2, "Порой"), (3, "Однажды")) if w != first)
    return "A" if "four-option quiz" in p else "и так далее"


def test_contamination_notebook_on_the_main_jobs_demo_runs_tests_nothing(tmp_path):
    """The main job's setting: the three bilingual demo items, two per set. Too few for any test."""
    from cresowlve_core.sources.sample import load_items

    items = load_items("demo", "ru")
    write_runs(tmp_path, items, ["target", "wrong_both", "wrong_both"])
    with FakeServer(answers=any_question_model) as srv:
        params = {"runs": str(tmp_path / "runs" / "*"), "out_dir": str(tmp_path / "out"), "make_demo": False,
                  "perturber_model": "fake", "perturber_base_url": srv.base_url, "quiz_model": "fake",
                  "quiz_base_url": srv.base_url, "max_items_per_set": 2, "n_boot": 200}
        res = run_notebook("05_contamination", params, tmp_path / "reports")
    verdict = res.records["verdict"]["m"]
    assert verdict["overall"] == "not tested: too few items (n = 1; at least 20 per set)"
    signals = [r for r in verdict["rows"] if r["test"] != "overall"]
    assert all(r["signal"] is None and r["p"] is None for r in signals)
    text = visible_text(res.html)
    assert "Verdict: not tested: too few items" in text and "likely contaminated" not in text
    assert_clean_report(res)
