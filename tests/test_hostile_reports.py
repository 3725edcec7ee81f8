"""Hostile strings stay text in the reports that read other inputs than evaluation runs:
01_construction (a build name, a model name, pack question ids and texts), 05_contamination (model
names, item ids, the quizzed questions and their rewrites), 06_synthetic (model names, the
verbalised puzzle and the solver's answers) and 07_create (a model name, a recorded configuration's
name, query entities, relations and ids, paths and the judge's outputs).

Every planted payload calls ``canary(field)`` (a DevTools binding: see ``test_hostile_strings.py``,
whose not-vacuous check covers the counter); each report must record 0 calls and show the payload as
text. Skips without Chromium.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import stage_runs as S  # noqa: F401  (puts the stage test folders on sys.path)
from chromium import CHROMIUM, Browser, websocket
from fakeserver import FakeServer
from test_hostile_strings import SHOW_TOOLTIPS, _executions, browser_text, payload
from test_hostile_strings import browser as browser  # the canary-counting browser (a fixture)

from cresowlve_core.items import ItemView
from cresowlve_core.notebooks import run_notebook

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
              pytest.mark.skipif(websocket is None, reason="websocket-client is not installed (pip install -e '.[test]')")]

MODEL = "m" + payload("model")
JUDGE = "j" + payload("judge_model")


def img(field: str) -> str:
    """The event-handler half of :func:`payload` (no ``/``: it can be part of a file name)."""
    return f"<img src=x onerror=canary('{field}')>"


@pytest.fixture(autouse=True)
def _own_cache(tmp_cache):
    """Every stage's response cache in the test's folder (the notebooks' kernels inherit it)."""
    return tmp_cache


def assert_inert(browser: Browser, html: Path, *shown: str, hostile_tooltips: bool = False) -> None:
    """``html`` runs no planted script, also when every chart tooltip is shown, and shows each of
    ``shown`` as text. ``hostile_tooltips``: some tooltip holds a payload, and shows it as text."""
    calls = _executions(browser, html.as_uri())
    tips = browser.evaluate(SHOW_TOOLTIPS)
    assert calls == [], f"{html.name}: {len(calls)} script executions: {sorted(set(calls))}"
    if hostile_tooltips:
        assert tips["hostile"] > 0 and MODEL in tips["text"], tips
    text = browser_text(browser, html)
    missing = [s for s in shown if s not in text]
    assert not missing, f"{html.name} does not show {missing}"


# --------------------------------------------------------------------------- 05_contamination


def test_contamination_report_runs_no_planted_script(browser, tmp_path):
    from test_contamination_pipeline import fake_model, make_items, ru_question, write_runs

    items = [it.model_copy(update={
        "id": f"{it.id}{payload('item_id')}",
        "en": ItemView(question=f"{it.en.question} {payload('question_en')}", answer=it.en.answer),
        "ru": ItemView(question=f"{ru_question(i)} {payload('quiz_text')}", answer=it.ru.answer)})
        for i, it in enumerate(make_items())]
    write_runs(tmp_path, items)
    for manifest in (tmp_path / "runs").glob("*/manifest.json"):  # the runs' model: a hostile name
        m = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**m, "model": MODEL}))
    for responses in (tmp_path / "runs").glob("*/responses.jsonl"):
        rows = [json.loads(x) for x in responses.read_text().splitlines()]
        responses.write_text("".join(json.dumps({**r, "model": MODEL}) + "\n" for r in rows))
    with FakeServer(answers=fake_model(items)) as srv:
        res = run_notebook("05_contamination", {
            "runs": str(tmp_path / "runs" / "*"), "out_dir": str(tmp_path / "out"), "make_demo": False,
            "perturber_model": MODEL, "perturber_base_url": srv.base_url, "quiz_model": MODEL,
            "quiz_base_url": srv.base_url, "max_items_per_set": None, "n_boot": 50}, tmp_path / "reports")
    assert srv.total > 0
    assert_inert(browser, res.html, MODEL, payload("item_id"))


# --------------------------------------------------------------------------- 07_create

ENTITY_A, ENTITY_B = "Alpha" + payload("entity_a"), "Beta" + payload("entity_b")
RELATION = "rel" + payload("relation")


def create_answers(req: Any) -> str:
    from create_fakes import answer_for, judge_reply

    if "Path: " in req.prompt:  # the judges: a hostile explanation beside valid judgments
        return judge_reply(req.prompt).replace('"e"', json.dumps(payload("judge_output")))
    if ENTITY_A in req.prompt:
        mid = "Mid" + payload("path")
        return "<answer>" + json.dumps({"1": [[ENTITY_A, "knows", mid], [mid, RELATION, ENTITY_B]]}) + "</answer>"
    return answer_for(req.prompt)  # a shipped query (the local section)


@pytest.mark.embeddings
def test_create_report_runs_no_planted_script(browser, tmp_path):
    from create_fakes import one_hot

    from cresowlve_core.cli import main
    from cresowlve_core.create import score as cs
    from cresowlve_core.create.scored import recorded_dir
    from cresowlve_core.llm.types import Endpoint

    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": f"What connects {ENTITY_A} and {ENTITY_B}?", "entity_a": ENTITY_A,
                                   "entity_b": ENTITY_B, "rel_b": RELATION,
                                   "description": "Q1__P1" + payload("query_id")}) + "\n", encoding="utf-8")
    recorded = tmp_path / "recorded"  # three recorded sets under a hostile configuration name
    recorded.mkdir()
    shipped = sorted(recorded_dir().glob("*.jsonl"))[0]
    (recorded / f"r{img('recorded_config')}__original.jsonl").write_text(
        "".join(shipped.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")
    run_dir = tmp_path / "create_run"
    with FakeServer(answers=create_answers) as srv:
        assert main(["create", "generate", "--model", MODEL, "--base-url", srv.base_url, "--queries", str(queries),
                     "--max-tokens", "512", "--run-dir", str(run_dir)]) == 0
        cs.score(run_dir, Endpoint(srv.base_url, JUDGE), embedder=one_hot, progress=False)
        res = run_notebook("07_create", {
            "recorded_dir": str(recorded), "user_runs": [str(run_dir)], "n_boot": 50, "local_base_url": srv.base_url,
            "discount": "paper",  # the run was scored at "reference": its name is in the "recomputed" note too
            "local_model": MODEL, "n_local_queries": 1, "local_run_dir": str(tmp_path / "local")},
            tmp_path / "reports")
    assert "Recomputed at this report" in res.ipynb.read_text(encoding="utf-8")
    assert_inert(browser, res.html, MODEL, hostile_tooltips=True)


# --------------------------------------------------------------------------- 06_synthetic


def synth_answers(req: Any) -> str:
    p = req.prompt
    if "Now the real task" in p:
        return (f"<literal>X: {payload('literal')}. Who is X?</literal><obfuscated>{payload('obfuscated')} "
                f"Who is X?</obfuscated><explanation>{payload('explanation')}</explanation>")
    return f"<Answer>{payload('solver_answer')}</Answer>"


@pytest.mark.embeddings
def test_synthetic_report_runs_no_planted_script(browser, tmp_path):
    with FakeServer(answers=synth_answers) as srv:
        roles = {f"{r}_{k}": v for r in ("verbaliser", "solver")
                 for k, v in (("model", MODEL + r), ("base_url", srv.base_url))}
        res = run_notebook("06_synthetic", {**roles, "n_candidates": 3, "build_dir": str(tmp_path / "build")},
                           tmp_path / "reports")
    assert res.records["summary"]["stages"]["parsed"] == 3
    assert_inert(browser, res.html, payload("obfuscated"))


# --------------------------------------------------------------------------- 01_construction


def test_construction_report_runs_no_planted_script(browser, tmp_path, tmp_cache, construction_domain_embeddings):
    from test_construction_pipeline import DEMO, SCRIPTED_DOMAINS, scripted

    construction_domain_embeddings(tmp_cache, SCRIPTED_DOMAINS)

    from cresowlve_core.sources.sample import read_items_jsonl

    hostile = []
    for it in read_items_jsonl(DEMO):
        if it.ru is not None:  # the scripted replies find an item by the first 60 characters of its question
            ru = it.ru.model_copy(update={"question": f"{it.ru.question} {payload('pack_question')}"})
            hostile.append(it.model_copy(update={"id": f"{it.id}{payload('item_id')}", "ru": ru}))
    source = S.write_items(tmp_path / "hostile_items.jsonl", hostile)
    with FakeServer(answers=scripted) as srv:
        res = run_notebook("01_construction", {"name": "b" + img("build_name"),
                                               "sources": [str(source)], "limit": None, "model": MODEL,
                                               "base_url": srv.base_url, "build_dir": str(tmp_path / "build")},
                           tmp_path / "reports")
    assert srv.total > 0
    assert_inert(browser, res.html, MODEL)
