"""The main job pointed at a provider through the environment (here: the fake server)."""

from __future__ import annotations

import json

import pytest
from fakeserver import FakeServer

from cresowlve_core.mainjob import main_job


def test_main_job_on_a_configured_provider(tmp_path, monkeypatch, recorded_create_embeddings):
    key = "sk-mainjob-SECRET-0123456789abcdef"

    def answers(req):
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"Reasoning.\nVERDICT-{nonce}: CORRECT"
        return "Let me think.\n<Answer>Copernicus</Answer>"

    with FakeServer(answers=answers, api_key=key) as srv:
        monkeypatch.setenv("MAINJOB_KEY", key)
        monkeypatch.setenv("CRESOWLVE_BASE_URL", srv.base_url)
        monkeypatch.setenv("CRESOWLVE_MODEL", "fake-model")
        monkeypatch.setenv("CRESOWLVE_API_KEY_ENV", "MAINJOB_KEY")
        monkeypatch.setenv("CRESOWLVE_JUDGE_MODEL", "fake-judge")
        monkeypatch.setenv("CRESOWLVE_JUDGE_BASE_URL", srv.base_url)
        monkeypatch.setenv("CRESOWLVE_JUDGE_API_KEY_ENV", "MAINJOB_KEY")
        produced = main_job(reports_dir=tmp_path / "reports", quick=True, runs_dir=tmp_path / "runs")
    names = sorted(p.name for p in produced)
    assert names == ["00_data_overview.html", "01_construction.html", "02_evaluation_en.html", "02_evaluation_ru.html",
                     "03_analysis.html", "04_error_analysis.html", "05_contamination.html", "06_synthetic.html",
                     "07_create.html"]
    index = (tmp_path / "reports" / "index.html").read_text()
    assert all(f'href="{n}"' in index for n in names)
    summary = json.loads((tmp_path / "runs" / "demo" / "fake-model__en" / "summary.json").read_text())
    assert summary["n_ok"] == 3 and summary["judge_accuracy"] == 1.0, summary  # quick = 3 items, all judged
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    leaking = [str(p) for p in written if key in p.read_text(errors="ignore")]
    assert written and not leaking, leaking


def test_an_old_incompatible_demo_run_is_archived_not_mixed(tmp_path):
    from cresowlve_core.mainjob import Target, demo_params, prepare_demo_run
    from cresowlve_core.prompts import load_prompt

    run_dir = tmp_path / "demo" / "m__en"
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({
        "model": "m", "base_url": "http://y/v1", "lang": "en", "items": "demo", "effort": None,
        "prompt": {"name": "solve_cot_en", "version": "0"}, "n_items": 9}))
    (run_dir / "responses.jsonl").write_text('{"id": "chgk_0", "lang": "en"}\n')
    tgt = Target("m", "http://y/v1", None, None, None, None, local=False)
    params = demo_params(tgt, "en", run_dir, quick=False)
    line = prepare_demo_run(params, tmp_path / "archive")
    assert not run_dir.exists()
    assert "moved the old run" in line and "solve_cot_en@0" in line, line
    (archived,) = (tmp_path / "archive").iterdir()
    assert (archived / "responses.jsonl").read_text().startswith('{"id": "chgk_0"')  # nothing lost
    # a run of the same configuration stays where it is (the base URL is part of it: another host is
    # another configuration, tests/runtime/test_resume_identity.py)
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({
        "model": "m", "base_url": "http://y/v1", "lang": "en", "items": "demo", "effort": None, "temperature": 0.0, "max_tokens": 4096,
        "prompt": {"name": "solve_cot_en", "version": load_prompt("solve_cot_en").version}, "n_items": 9}))
    assert "nothing archived" in prepare_demo_run(params, tmp_path / "archive")
    assert run_dir.exists() and len(list((tmp_path / "archive").iterdir())) == 1


@pytest.mark.parametrize("embedded", [False, True], ids=["chat-judge", "embedded-base-model"])
def test_a_finished_demo_run_is_resumed_with_the_config_it_ran_with(tmp_path, monkeypatch, embedded):
    """The resume check builds the very config the run uses (judge, token budget and,
    on the embedded model, the few-shot prompts). Before, it left the judge out, so the prompts
    always differed (['judge@2', 'solve_cot_en@2'] -> ['solve_cot_en@2']) and every second
    `cresowlve run` archived both demo runs. A second run now sends 0 requests and archives nothing."""
    from cresowlve_core.evaluation.runner import evaluate
    from cresowlve_core.mainjob import Target, demo_config, demo_params, prepare_demo_run

    def answers(req):
        if req.path == "/completions":  # the base-model few-shot prompts
            return " yes" if req.prompt.endswith("Same:") else " Copernicus"
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"Reasoning.\nVERDICT-{nonce}: CORRECT"
        return "<Answer>Copernicus</Answer>"

    with FakeServer(answers=answers) as srv:
        if embedded:  # what the embedded server does for its own endpoint (llm/local.py)
            monkeypatch.setenv("CRESOWLVE_PROVIDERS", f"{srv.base_url.split('/')[2]}=embedded")
        tgt = Target("m", srv.base_url, None, "m", srv.base_url, None, local=embedded)
        params = {**demo_params(tgt, "en", tmp_path / "demo" / "m__en", quick=True),
                  "cache_path": str(tmp_path / "cache.sqlite")}
        assert prepare_demo_run(params, tmp_path / "archive").endswith("new, 3 of 3 items to send; nothing archived")
        first = evaluate(demo_config(params), progress=False).summary
        sent = srv.total
        assert sent == 6 and first["n_judged"] == 3, (sent, first)  # 3 answers + 3 verdicts
        line = prepare_demo_run(params, tmp_path / "archive")
        assert line.endswith("complete, 0 of 3 items to send; nothing archived"), line
        assert not (tmp_path / "archive").exists()
        again = evaluate(demo_config(params), progress=False).summary
        assert srv.total == sent, "a second run sent requests"
        assert again["n_judged"] == 3
    paths = {r.path for r in srv.requests}
    assert paths == ({"/completions"} if embedded else {"/chat/completions"}), paths
