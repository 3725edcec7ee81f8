"""07_create names the model the provider said answered next to your run's label, and the model that
judged next to its judge (records' ``served_model`` / ``judge_served_models``; runtime/outcomes.py
``served_as``). The served name is the one OpenAI's recorded Chat Completions reply gives when asked for
``gpt-4o-mini`` (tests/replay/fixtures/SOURCES.md); the texts are the stage's own scripted answers."""

from __future__ import annotations

import json
from pathlib import Path

import stage_runs as S
from fakeserver import FakeServer

from cresowlve_core.create import report as cr
from cresowlve_core.create import score as cs
from cresowlve_core.reporting import table

RECORDED = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "openai" / "chat_gpt4o_mini_success.json"
SNAPSHOT = json.loads(RECORDED.read_text(encoding="utf-8"))["body"]["model"]
HOSTILE = "<img src=x onerror=alert(1)>|*x*"  # a name a proxy could answer under


def _scored_run(tmp_path: Path, served: str) -> Path:
    with FakeServer(answers=S.create_answers, model=served) as srv:
        code, out = S.run_create(srv.base_url, tmp_path)
        assert code == 0
        S.run_create_score(srv.base_url, out)
    return out


def test_your_runs_label_and_judge_say_which_model_answered(tmp_path):
    """Asked for fake-model, judged by fake-judge, both answered as the recorded snapshot. Before, the
    leaderboard and your runs' table said fake-model and fake-judge only."""
    out = _scored_run(tmp_path, SNAPSHOT)
    sets = cs.load_user_runs([str(out)])
    assert {s.config for s in sets} == {f"fake-model__original (yours: create_run; served as {SNAPSHOT})"}
    assert {s.judge for s in sets} == {f"fake-judge (served as {SNAPSHOT})"}
    assert {s.model for s in sets} == {"fake-model"}
    assert cr.config_display_name(sets[0].config) == f"fake-model (yours: create_run; served as {SNAPSHOT})"


def test_a_served_name_is_shown_as_text_in_your_runs_table(tmp_path):
    out = _scored_run(tmp_path, HOSTILE)
    html = table(cr.user_runs_table(cs.load_user_runs([str(out)]))).html
    assert "fake-judge (served as &lt;img src=x onerror=alert(1)&gt;|*x*)" in html
    assert "<img" not in html


def test_your_run_begun_by_an_older_version_names_the_served_model_only_for_the_answers_that_named_it(tmp_path):
    """Every record but the last without ``served_model`` (the key removed, as a version that did not record it
    wrote them). Before, the label said "served as <snapshot>" for every answer of the run."""
    out = _scored_run(tmp_path, SNAPSHOT)
    path = out / "responses.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    older = [{k: v for k, v in rec.items() if k != "served_model"} for rec in lines[:-1]]
    path.write_text("".join(json.dumps(rec) + "\n" for rec in [*older, lines[-1]]), encoding="utf-8")
    (s, *_) = cs.load_user_runs([str(out)])
    assert s.config == (f"fake-model__original (yours: create_run; served as {SNAPSHOT} (1); "
                        f"{len(older)} named none)")
