"""Notebooks run headless under papermill and render offline HTML reports with an index."""

from __future__ import annotations

import json

from fakeserver import FakeServer

from cresowlve_core.notebooks import run_notebook


def test_data_overview_renders_offline_html_and_index(tmp_path):
    res = run_notebook("00_data_overview", {}, tmp_path)
    assert res.ipynb.exists() and res.html.exists()
    html = res.html.read_text()
    assert "vegaEmbed" in html and "cdn.jsdelivr" not in html  # chart JS is inlined, not fetched
    assert "overview.pack_table()" not in html  # code cells are hidden
    rec = res.records
    assert rec["questions_per_pack"] == {"ingush16.txt": 60, "kubok_olgi_2015.4s": rec["questions_per_pack"]["kubok_olgi_2015.4s"],
                                         "ruch17st.txt": 90, "rusch16.txt": 90}
    assert rec["demo_items_per_lang"]["en"] >= 1
    index = (tmp_path / "index.html").read_text()
    assert 'href="00_data_overview.html"' in index
    assert json.loads((tmp_path / "index.json").read_text())["00_data_overview"]["html"] == "00_data_overview.html"


def test_evaluation_notebook_never_writes_the_key(tmp_path, monkeypatch):
    key = "sk-notebook-SECRET-0123456789abcdef"
    monkeypatch.setenv("NB_PROVIDER_KEY", key)

    def answers(req):
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"VERDICT-{nonce}: INCORRECT"
        return "I was given the key? no.\n<Answer>Copernicus</Answer>"

    with FakeServer(answers=answers, api_key=key) as srv:
        res = run_notebook(
            "02_evaluation",
            {"items": "demo", "lang": "en", "model": "fake-model", "base_url": srv.base_url,
             "api_key_env": "NB_PROVIDER_KEY", "judge_model": "fake-judge", "judge_api_key_env": "NB_PROVIDER_KEY",
             "run_dir": str(tmp_path / "run"), "limit": 4},
            tmp_path / "reports",
        )
    summary = res.records["summary"]
    assert summary["n_ok"] == 4 and summary["n_judged"] == 4 and summary["judge_accuracy"] == 0.0
    for path in [res.ipynb, res.html, *(tmp_path / "run").iterdir(), tmp_path / "reports" / "index.html"]:
        assert key not in path.read_text()
    assert "NB_PROVIDER_KEY" in res.ipynb.read_text()  # the variable name is fine
