"""06_synthetic renders headless against scripted models, with every section recorded."""

from __future__ import annotations

import re

import pytest
from fakeserver import FakeServer

from cresowlve_core.notebooks import run_notebook


def answers(req) -> str:
    p = req.prompt
    if "Now the real task" in p:
        facts = re.findall(r"^- (.+?): (.+?)(?: \(|$)", p.split("Now the real task")[1], re.M)
        said = " and ".join(f"{r} {o}" for r, o in facts)
        return (f"<literal>X: {said}. Who is X?</literal><obfuscated>THIS one hides behind {len(facts)} doors. "
                f"Who is X?</obfuscated><explanation>Facts: {said}.</explanation>")
    return "<Answer>nobody</Answer>"


@pytest.mark.embeddings
def test_synthetic_notebook_renders(tmp_path):
    with FakeServer(answers=answers) as srv:
        roles = {f"{r}_{k}": v for r in ("verbaliser", "solver") for k, v in (("model", "fake"), ("base_url", srv.base_url))}
        res = run_notebook("06_synthetic", {**roles, "n_candidates": 3, "build_dir": str(tmp_path / "build")},
                           tmp_path / "reports")
    rec = res.records
    assert rec["notability"]["band"] == [3, 20] and rec["notability"]["rule_band"] == [3, 21]  # p99.5 = 21.8, floored
    st = rec["summary"]["stages"]
    assert st["candidates"] == 3 and st["parsed"] == 3 and st["solved_literal"] == 0 and st["kept"] == 0
    assert rec["yield"] == {"kept": 0, "of_candidates": 3, "paper_kept": 7, "paper_of": 100}
    [stage] = rec["stages"]  # what `cresowlve report 06_synthetic` exits with, as `synth` would
    assert stage["unit"] == "model tasks" and stage["n_error"] == stage["n_not_run"] == 0 and "unparsed" not in stage
    assert rec["n_examples"] == 3 and rec["difficulty"]["n"] == 0
    html = res.html.read_text()
    assert "7/100" in html and "EMBEDDED 270M" not in html  # no embedded banner for a configured endpoint
    assert (tmp_path / "build" / "candidates.jsonl").exists()
