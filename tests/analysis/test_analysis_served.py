"""The reports name the model the provider said answered next to the label that was asked for
(records' ``served_model`` / ``judge_served_model``; runtime/outcomes.py ``served_as``): the runs table
(02 and 03), Table 1 and its exports, and the models on the index card.

The served names are the ones OpenAI's recorded replies give (tests/replay/fixtures/SOURCES.md): the Chat
Completions reply asked for ``gpt-4o-mini`` names ``gpt-4o-mini-2024-07-18``, and the Responses reply
asked for ``gpt-4o`` names ``gpt-4o-2024-08-06``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis import report, table
from cresowlve_core.analysis.loading import load_runs

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "openai"
MINI_SNAPSHOT = json.loads((FIXTURES / "chat_gpt4o_mini_success.json").read_text(encoding="utf-8"))["body"]["model"]
JUDGE_SNAPSHOT = json.loads((FIXTURES / "responses_refusal_part.json").read_text(encoding="utf-8"))["body"]["model"]
HTML_TAG = "<b onmouseover=alert(1)>gpt|4*1*</b>"  # a served name a proxy could send
JUDGE = {"model": "gpt-4o", "protocol": "nonce-verdict", "seed": 0}


def _run(path: Path, model: str, served: list[str | None], judge_served: str | None = JUDGE_SNAPSHOT) -> Path:
    recs = [record(f"i{k}", model=model, judge="INCORRECT", served_model=name, judge_served_model=judge_served)
            for k, name in enumerate(served)]
    return write_run(path, recs, model=model, judge=JUDGE)


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    out: list[Any] = []
    monkeypatch.setattr(report, "say", out.append)
    monkeypatch.setattr(report, "show", lambda obj, *_: out.append(obj))
    import cresowlve_core.notebook_records as records

    monkeypatch.setattr(records, "record", lambda key, value: out.append({key: value}))
    return out


def test_the_runs_table_says_which_model_answered_and_which_judged(tmp_path, shown):
    """Asked for gpt-4o-mini, judged by gpt-4o; the provider served the dated snapshots. Before, the runs
    table said gpt-4o-mini and gpt-4o only: the served names were in the records and nowhere in the report."""
    _run(tmp_path / "runs" / "mini", "gpt-4o-mini", [MINI_SNAPSHOT] * 3)
    report.runs_section(load_runs(str(tmp_path / "runs" / "*")))
    runs = next(x for x in shown if isinstance(x, pd.DataFrame))
    assert runs["config"].tolist() == ["gpt-4o-mini (served as gpt-4o-mini-2024-07-18)"]
    assert runs["judge_model"].tolist() == ["gpt-4o (served as gpt-4o-2024-08-06)"]


def test_a_label_the_provider_answered_under_or_named_nothing_for_is_left_as_it_is(tmp_path, shown):
    """Replies naming the requested model, or none (an older record, a server that names none): no claim."""
    _run(tmp_path / "runs" / "same", "gpt-4o-mini", ["gpt-4o-mini"] * 2, judge_served="gpt-4o")
    _run(tmp_path / "runs" / "none", "gpt-4.1", [None] * 2, judge_served=None)
    report.runs_section(load_runs(str(tmp_path / "runs" / "*")))
    runs = next(x for x in shown if isinstance(x, pd.DataFrame))
    assert sorted(runs["config"]) == ["gpt-4.1", "gpt-4o-mini"] and set(runs["judge_model"]) == {"gpt-4o"}


def test_table1_names_every_model_that_answered_and_still_matches_the_paper_on_the_requested_name(tmp_path):
    """One label, two models (an alias that moved, a router's fallback) with a hostile name among them: Table 1
    counts both, escaped in its HTML, and the published GPT-4.1 row is still overlaid."""
    _run(tmp_path / "runs" / "g", "gpt-4.1", ["gpt-4.1-2025-04-14"] * 2 + [HTML_TAG], judge_served=None)
    long, _ = table.results_table(load_runs(str(tmp_path / "runs" / "*")))
    assert set(long["name"]) == {f"gpt-4.1 (served as {HTML_TAG} (1), gpt-4.1-2025-04-14 (2))"}
    assert long["paper"].notna().any()
    html = table.style_table1(table.table1_display(long)).to_html()
    assert HTML_TAG not in html and "gpt-4.1-2025-04-14 (2))" in html


def test_the_index_cards_models_name_the_served_model_and_judge(tmp_path, shown):
    """02's card said "gpt-4o-mini, gpt-4o (judge)" (its records and parameters) for answers and verdicts the
    provider said came from the dated snapshots; now the recorded names say so, and stand for the parameters."""
    from cresowlve_core.notebooks import _models

    _run(tmp_path / "runs" / "mini", "gpt-4o-mini", [MINI_SNAPSHOT] * 2)
    report.runs_section(load_runs(str(tmp_path / "runs" / "*")))
    records = [x for x in shown if isinstance(x, dict)]
    assert records == [{"models": [f"gpt-4o-mini (served as {MINI_SNAPSHOT})", f"gpt-4o (judge; served as {JUDGE_SNAPSHOT})"]}]
    assert _models(records[0], {"model": "gpt-4o-mini", "judge_model": "gpt-4o", "items": "demo"}) == records[0]["models"]
    assert _models({"models": ["gpt-4o-mini"]}, {"model": "gpt-4o-mini", "judge_model": "gpt-4o"}) == [
        "gpt-4o-mini", "gpt-4o (judge)"]


def test_the_charts_name_the_served_model_in_their_legend(tmp_path, shown):
    """The accuracy-by-difficulty chart's legend said gpt-4o-mini for answers the provider said came from
    gpt-4o-mini-2024-07-18. The records keep the requested name, so the legend's click-to-highlight still
    selects by configuration."""
    _run(tmp_path / "runs" / "mini", "gpt-4o-mini", [MINI_SNAPSHOT] * 3)
    rs = load_runs(str(tmp_path / "runs" / "*"))
    report.difficulty_section(rs)
    import altair as alt

    (chart,) = [x for x in shown if isinstance(x, alt.TopLevelMixin)]
    spec = json.dumps(chart.to_dict())
    assert f"gpt-4o-mini (served as {MINI_SNAPSHOT})" in spec
    assert set(rs.responses["config"]) == {"gpt-4o-mini"}


def test_a_run_an_older_version_began_names_the_served_model_only_for_the_answers_that_named_it(tmp_path, shown):
    """6 answers and verdicts written by a version that did not record the served model (no ``served_model``,
    no ``judge_served_model``), 3 by this one naming the dated snapshots. Before, the runs table and Table 1
    said "gpt-4o-mini (served as gpt-4o-mini-2024-07-18)" for all 9, its accuracy included: the 6 named none."""
    older = [record(f"old{k}", model="gpt-4o-mini", judge="CORRECT") for k in range(6)]
    newer = [record(f"new{k}", model="gpt-4o-mini", judge="INCORRECT", served_model=MINI_SNAPSHOT,
                    judge_served_model=JUDGE_SNAPSHOT) for k in range(3)]
    write_run(tmp_path / "runs" / "mixed", older + newer, model="gpt-4o-mini", judge=JUDGE)
    rs = load_runs(str(tmp_path / "runs" / "*"))
    report.runs_section(rs)
    runs = next(x for x in shown if isinstance(x, pd.DataFrame))
    assert runs["config"].tolist() == [f"gpt-4o-mini (served as {MINI_SNAPSHOT} (3); 6 named none)"]
    assert runs["judge_model"].tolist() == [f"gpt-4o (served as {JUDGE_SNAPSHOT} (3); 6 named none)"]
    long, _ = table.results_table(rs)
    assert set(long["name"]) == {f"gpt-4o-mini (served as {MINI_SNAPSHOT} (3); 6 named none)"}
