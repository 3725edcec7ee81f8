"""The main job pointed at a provider through the environment (here: the fake server)."""

from __future__ import annotations

import json

from fakeserver import FakeServer

from cresowlve_core.mainjob import main_job


def test_main_job_on_a_configured_provider(tmp_path, monkeypatch):
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
    from cresowlve_core.mainjob import Target, _archive_if_incompatible
    from cresowlve_core.prompts import load_prompt

    run_dir = tmp_path / "demo" / "m__en"
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({
        "model": "m", "base_url": "http://x/v1", "lang": "en", "items": "demo", "effort": None,
        "prompt": {"name": "solve_cot_en", "version": "0"}, "n_items": 9}))
    (run_dir / "responses.jsonl").write_text('{"id": "chgk_0", "lang": "en"}\n')
    tgt = Target("m", "http://y/v1", None, None, None, None, local=False)
    _archive_if_incompatible(run_dir, tgt, "en", tmp_path / "archive")
    assert not run_dir.exists()
    (archived,) = (tmp_path / "archive").iterdir()
    assert (archived / "responses.jsonl").read_text().startswith('{"id": "chgk_0"')  # nothing lost
    # a compatible run (only the base URL differs) stays where it is
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({
        "model": "m", "base_url": "http://x/v1", "lang": "en", "items": "demo", "effort": None,
        "prompt": {"name": "solve_cot_en", "version": load_prompt("solve_cot_en").version}, "n_items": 9}))
    _archive_if_incompatible(run_dir, tgt, "en", tmp_path / "archive")
    assert run_dir.exists()
