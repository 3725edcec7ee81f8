"""``cresowlve grid``: a 2 x 2 grid (models x languages) against the fake server, resumed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fakeserver import FakeServer

from cresowlve_core.analysis import load_runs
from cresowlve_core.evaluation import roles
from cresowlve_core.evaluation.grid import GRID_FILE, GridConfig, cells, load_grid
from cresowlve_core.evaluation.grid_run import run_grid


def reply(req) -> str:
    if "candidate_answer" in req.prompt:
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"Close enough.\nVERDICT-{nonce}: CORRECT"
    return "<Answer>Copernicus</Answer>"


def write_config(tmp_path: Path, srv: FakeServer, **extra) -> Path:
    cfg = {"name": "two-by-two", "items": "demo", "langs": ["en", "ru"], "limit": 2, "parallel": 2,
           "runs_dir": str(tmp_path / "grid"), "report": False,
           "options": {"concurrency": 2, "max_tokens": 32, "cache_path": str(tmp_path / "cache.sqlite")},
           "judge": {"model": "fake-judge"},
           "models": [{"model": "model-a", "label": "GPT-4.1", "base_url": srv.base_url},
                      {"model": "model-b", "base_url": srv.base_url, "efforts": ["medium"], "api": "chat"}],
           **extra}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_two_by_two_grid_runs_resumes_and_feeds_the_analysis(tmp_path):
    with FakeServer(answers=reply) as srv:
        config = write_config(tmp_path, srv)
        out = run_grid(config, progress=False)
        first = srv.total
        sent = dict(srv.by_prompt)
        again = run_grid(config, progress=False)
        assert srv.total == first  # finished cells are skipped: no request on the second run
    solves = {p: n for p, n in sent.items() if "candidate_answer" not in p}
    verdicts = {p: n for p, n in sent.items() if "candidate_answer" in p}
    # 4 cells x 2 items answered, each once
    assert out["n_cells"] == 4 and out["n_done"] == 4 and sum(solves.values()) == 4 * 2
    # 4 distinct judge calls: both models give the same prediction per item and language, so the second
    # model's verdict comes from the shared cache, or is asked again when the two cells judge it at once
    # (parallel: 2)
    assert len(verdicts) == 4 and all(1 <= n <= 2 for n in verdicts.values())
    assert [c["cell"] for c in out["cells"]] == ["model-a__en", "model-a__ru", "model-b-medium__en", "model-b-medium__ru"]
    assert all(c["skipped"] for c in again["cells"]) and out["aliases"] == {"model-a": "GPT-4.1"}
    summary = json.loads((tmp_path / "grid" / GRID_FILE).read_text())
    assert {c["status"] for c in summary["cells"]} == {"done"}
    rs = load_runs(str(tmp_path / "grid" / GRID_FILE))  # 03_analysis takes the grid summary as its input
    assert len(rs.runs) == 4 and sorted(rs.langs) == ["en", "ru"]
    m = json.loads((tmp_path / "grid" / "model-b-medium__en" / "manifest.json").read_text())
    assert m["effort"] == "medium" and m["sent"]["reasoning_effort"] == "medium"  # the label matches what was sent


def test_the_cells_share_one_load_of_each_item_set(tmp_path, monkeypatch):
    from cresowlve_core.evaluation import grid as grid_module

    loads = []
    real = grid_module.load_eval_items
    monkeypatch.setattr(grid_module, "load_eval_items", lambda cfg: loads.append(cfg.lang) or real(cfg))
    with FakeServer(answers=reply) as srv:
        out = run_grid(write_config(tmp_path, srv), progress=False)
    assert out["n_done"] == 4 and sorted(loads) == ["en", "ru"]  # 4 cells, 2 item sets read once each


def test_the_grid_summary_names_configurations_without_importing_the_analysis(tmp_path):
    script = f"""
import sys
from cresowlve_core.evaluation.grid import GridConfig, cells, write_grid_summary
grid = GridConfig(name="g", runs_dir={str(tmp_path / "g")!r}, report=False,
                  models=[{{"model": "m", "label": "M-1", "base_url": "http://x/v1", "efforts": [None, "High"]}}])
out = write_grid_summary(grid, cells(grid), {{}})
print([r["config"] for r in out["cells"]], "pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['M-1', 'M-1', 'M-1 (high)', 'M-1 (high)'] False"  # the end of a grid pays no pandas import


def test_a_failing_cell_does_not_stop_the_others_and_the_exit_code_says_so(tmp_path):
    with FakeServer(answers=reply, faults=lambda r: "404" if r.body.get("model") == "model-b" else None) as srv:
        config = write_config(tmp_path, srv)
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", str(config)],
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr  # a model that does not exist: docs/reliability.md's exit 3
    assert proc.stderr.strip().splitlines()[-1].startswith("stopped early (2 cell(s) stopped; model-b-medium__")
    statuses = {c["cell"]: c["status"] for c in json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"]}
    assert statuses["model-a__en"] == "done" and statuses["model-b-medium__en"] in ("failed", "stopped")


def test_config_errors_are_one_clear_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels: []\n")
    with pytest.raises(ValueError, match="at least one model"):
        load_grid(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(ValueError, match="YAML mapping"):
        load_grid(bad)


def test_the_paper_grid_has_the_papers_18_configurations():
    grid = load_grid(Path(__file__).resolve().parents[2] / "configs" / "paper_table1.yaml")
    cs = cells(grid)
    configs = {(c.model.label, c.effort) for c in cs}
    assert len(configs) == 18 and len(cs) == 36
    import pandas as pd

    paper = pd.read_csv(Path(__file__).resolve().parents[2] / "data" / "cresowlve" / "paper_table1.csv")
    expected = {(m, None if pd.isna(t) else t) for m, t in zip(paper["model"], paper["thinking"])}
    assert configs == expected


def test_grid_models_and_judge_carry_their_provider_and_the_judge_takes_model_options(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({
        "name": "g", "langs": ["en"],
        "judge": {"model": "gpt-5-mini", "base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY",
                  "provider": "openai", "effort": "low", "max_tokens": 2000, "temperature": "default",
                  "extra_body": {"verbosity": "low"}, "max_cost": 2.5},
        "models": [{"model": "gemini-3-flash-preview", "base_url": "http://127.0.0.1:9/v1", "provider": "gemini",
                    "efforts": ["minimal"]}]}))
    cfg = cells(load_grid(path))[0].eval_config(load_grid(path))
    judge = roles.judge(cfg)
    assert judge is not None
    assert roles.answerer(cfg).endpoint.profile.name == "gemini" and judge.endpoint.profile.name == "openai"
    params = judge.params
    assert (params.effort, params.max_tokens, params.temperature, params.extra_body) == ("low", 2000, None,
                                                                                      {"verbosity": "low"})
    assert params.resolved_api(judge.endpoint.profile) == "responses"
    assert judge.options.max_cost == 2.5 and roles.answerer(cfg).options.max_cost is None  # each role its own cap


def test_a_grid_cell_counts_refused_and_filtered_answers(tmp_path):
    from fakeserver import Reply

    def refusing(req):  # model-b refuses every puzzle; model-a's answers are stopped by the filter
        if "candidate_answer" in req.prompt:
            return reply(req)
        if req.body.get("model") == "model-b":
            return Reply(text="", refusal="I can't help with that")
        return Reply(text="<Answer>Copernicus</Answer>", finish_reason="content_filter")

    with FakeServer(answers=refusing) as srv:
        out = run_grid(write_config(tmp_path, srv, langs=["en"]), progress=False)
        assert srv.total == 4  # 2 cells x 2 items, one request each, and no judge call
    rows = {c["cell"]: c for c in json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"]}
    assert (rows["model-a__en"]["n_refused"], rows["model-a__en"]["n_filtered"]) == (0, 2)
    assert (rows["model-b-medium__en"]["n_refused"], rows["model-b-medium__en"]["n_filtered"]) == (2, 0)
    assert "ok=2 (2 refused) error=0" in rows["model-b-medium__en"]["line"] and out["n_done"] == 2


def test_a_grids_label_names_its_configuration_everywhere(tmp_path, capsys):
    """Table 1 (display, CSV, LaTeX), the grid's console lines and ``cresowlve runs`` all say
    ``GPT-4.1``, never the run's model name ``model-a``; a model without a label keeps its name
    with its effort."""
    from cresowlve_core.analysis import table
    from cresowlve_core.cli import main

    with FakeServer(answers=reply) as srv:
        config = write_config(tmp_path, srv)
        assert main(["grid", str(config)]) == 0
    console = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[0] for line in console[:4]] == ["GPT-4.1 / en", "GPT-4.1 / ru", "model-b (medium) / en",
                                                            "model-b (medium) / ru"], console
    rs = load_runs(str(tmp_path / "grid" / GRID_FILE)).labelled()
    long, _ = table.results_table(rs)
    display = table.table1_display(long)
    assert [i[1] for i in display.index] == ["GPT-4.1", "model-b"]
    csv = table.write_table1_csv(long, tmp_path / "t1.csv").read_text()
    header, *rows = csv.splitlines()
    assert header.split(",")[2:4] == ["name", "model"] and rows[0].split(",")[2:4] == ["GPT-4.1", "model-a"], csv
    tex = table.table1_latex(long)
    assert "GPT-4.1 & -" in tex and "model-a" not in tex
    assert main(["runs", str(tmp_path / "grid" / GRID_FILE)]) == 0
    rows = capsys.readouterr().out.splitlines()[1:-1]  # between the header and the count
    assert sorted(r.split("  ")[0] for r in rows) == ["GPT-4.1", "GPT-4.1", "model-b (medium)", "model-b (medium)"]


def fake_git(monkeypatch, calls: list[str]):
    """``git`` as provenance runs it: HEAD ``abc`` with changed files; each call's thread in ``calls``."""
    import threading

    from cresowlve_core.runtime import provenance

    def run(cmd, **_kw):
        calls.append(threading.current_thread().name)
        return subprocess.CompletedProcess(cmd, 0, stdout="abc\n" if "rev-parse" in cmd else " M x.py\n", stderr="")

    monkeypatch.setattr(provenance.subprocess, "run", run)
    monkeypatch.setattr(provenance, "_last_read", [])


def test_a_read_of_the_git_sha_is_kept_only_for_a_few_seconds(monkeypatch):
    from cresowlve_core.runtime import provenance

    calls: list[str] = []
    fake_git(monkeypatch, calls)
    now = [1000.0]
    monkeypatch.setattr(provenance.time, "monotonic", lambda: now[0])
    assert provenance.git_sha() == "abc-dirty" and len(calls) == 2
    now[0] += provenance.GIT_SHA_FRESH_S
    assert provenance.git_sha() == "abc-dirty" and len(calls) == 2  # read within GIT_SHA_FRESH_S: kept
    now[0] += 0.01
    assert provenance.git_sha() == "abc-dirty" and len(calls) == 4  # older: the checkout may have changed


def test_a_grid_cell_reads_the_git_sha_off_its_event_loop(tmp_path, monkeypatch):
    import threading

    calls: list[str] = []
    fake_git(monkeypatch, calls)
    with FakeServer(answers=reply) as srv:
        out = run_grid(write_config(tmp_path, srv), progress=False, workers=1)
    assert out["n_done"] == 4
    assert calls and threading.main_thread().name not in calls  # never on the loop's thread: cells waited on git
    for c in out["cells"]:
        assert json.loads((Path(c["run_dir"]) / "manifest.json").read_text())["git_sha"] == "abc-dirty"


def test_a_configured_temperature_a_models_requests_will_not_carry_is_named_once_per_model(tmp_path):
    from cresowlve_core.evaluation.grid import GridConfig, cells
    from cresowlve_core.evaluation.grid_run import temperatures_not_sent

    def grid(options: dict) -> GridConfig:
        return GridConfig.model_validate({
            "name": "t", "runs_dir": str(tmp_path / "g"), "options": options, "models": [
                {"model": "gpt-5-mini", "base_url": "https://api.openai.com/v1", "efforts": [None, "low"]},
                {"model": "gpt-4o", "base_url": "https://api.openai.com/v1"}]})

    g = grid({"temperature": 0.7})
    (note,) = temperatures_not_sent(g, cells(g))  # gpt-5-mini's four cells, one warning; gpt-4o sends it
    assert note.startswith("temperature 0.7 is not sent to gpt-5-mini (gpt-5-mini is a reasoning model on openai")
    g = grid({})
    assert temperatures_not_sent(g, cells(g)) == []  # the default temperature is not the user's setting


def test_the_grid_last_line_names_the_incomplete_cells_beside_the_stopped_one(monkeypatch, capsys):
    """One cell stopped by its budget, another finished with errored items: the last line names both."""
    from cresowlve_core.cli import main
    from cresowlve_core.evaluation import grid_run

    cells = [{"cell": "costly__en", "config": "Costly", "lang": "en", "status": "stopped", "line": "n=6 ok=2",
              "error": "max_cost reached"},
             {"cell": "choiceerr__en", "config": "ChoiceErr", "lang": "en", "status": "incomplete",
              "line": "n=6 ok=4 error=2", "error": None},
             {"cell": "fine__en", "config": "Fine", "lang": "en", "status": "done", "line": "n=6 ok=6", "error": None}]
    monkeypatch.setattr(grid_run, "run_grid", lambda *a, **k: {"cells": cells, "n_done": 1, "n_cells": 3})
    assert main(["grid", "unused.yaml"]) == 3
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("stopped early (1 cell(s) stopped; costly__en: max_cost reached); "
                           "1 more cell(s) incomplete (choiceerr__en): 1 of 3 cells done"), last


BAD_GRID_KEYS = [
    ({"options": {"concurency": 4}}, {}, "options.concurency: unknown key (did you mean 'concurrency'?)"),
    ({"options": {"concurrency": "many"}}, {}, "options.concurrency: Input should be a valid integer"),
    ({"options": {"temperature": float("nan")}}, {}, "options.temperature: Input should be a finite number"),
    # sent as they stood (max_tokens -5, seed -1), or written to the manifest as null, "no cap" (max_cost .inf)
    ({"options": {"max_tokens": 0}}, {}, "options.max_tokens: Input should be greater than or equal to 1"),
    ({}, {"options": {"seed": -1}}, "models.0.options.seed: Input should be greater than or equal to 0"),
    ({"options": {"seed": 2**63}}, {}, "options.seed: Input should be less than or equal to 9223372036854775807"),
    ({"options": {"max_cost": float("inf")}}, {}, "options.max_cost: Input should be a finite number"),
    # recorded in the manifest as null, which no option of these takes (a timeout) or means "none"
    ({"options": {"timeout_s": float("inf")}}, {}, "options.timeout_s: Input should be a finite number"),
    ({}, {"options": {"backoff_base_s": float("inf")}}, "models.0.options.backoff_base_s: Input should be a finite"),
    ({}, {"options": {"max_token": 5}}, "models.0.options.max_token: unknown key (did you mean 'max_tokens'?)"),
    ({}, {"efforts": ["hgih"]}, "models.0.efforts: Value error, unknown effort 'hgih'"),
    ({}, {"prompt_style": "cto"}, "models.0.prompt_style: Input should be 'cot' or 'plain'"),
    ({}, {"api": "chta"}, "models.0.api: Input should be 'chat', 'responses' or 'completions'"),
    ({}, {"provider": "opnai"}, "models.0.provider: Value error, unknown provider 'opnai'"),
    ({"judge": {"model": "j", "effort": "hgih"}}, {}, "judge.effort: Value error, unknown effort 'hgih'"),
    ({"judge": {"model": "j", "provider": "opnai"}}, {}, "judge.provider: Value error, unknown provider 'opnai'"),
    # sent as NaN (not JSON) or -1, and the manifest's judge recorded temperature null (the provider's default)
    ({"judge": {"model": "j", "temperature": float("nan")}}, {}, "judge.temperature: Value error, must be a finite number >= 0, got nan"),
    ({"judge": {"model": "j", "temperature": -1}}, {}, "judge.temperature: Value error, must be a finite number >= 0, got -1.0"),
    ({"judge": {"model": "j", "max_cost": float("inf")}}, {}, "judge.max_cost: Input should be a finite number"),
    # each cell failed at its start instead, exit 3 ("change what stopped the run"), or was answered 404
    ({}, {"base_url": "127.0.0.1:8000/v1"}, "models.0.base_url: Value error, must be an http(s) URL such as"),
    ({"judge": {"model": "j", "base_url": "http://127.0.0.1:9/v1/chat/completions"}}, {},
     "judge.base_url: Value error, must be the base URL without the API path /chat/completions"),
    # a grid of no cell: "grid g (0 cells)", nothing run, exit 0
    ({"langs": []}, {}, "langs: List should have at least 1 item"),
    ({}, {"efforts": []}, "models.0.efforts: List should have at least 1 item"),
    # a blank judge: every cell "incomplete", its judge never run, "run the same command again", run after run
    ({"judge": {"model": " "}}, {}, "judge.model: Value error, must not be empty"),
    # a model that cannot name a directory: a line naming neither the file nor the key
    ({}, {"model": ".."}, "models.0.model: Value error, '..' cannot name a directory"),
    # a name that does not print as it is sent: the label of every record and report, sent in every request
    ({}, {"model": "gpt-4o\t"}, "models.0.model: Value error, must be printable text: U+0009 at position 7"),
    ({"judge": {"model": "j\u200b"}}, {}, "judge.model: Value error, must be printable text: U+200B at position 2"),
    # sent as NaN (not JSON), recorded in the manifest as null
    ({}, {"options": {"extra_body": {"top_p": float("nan")}}},
     "models.0.options.extra_body: Value error, top_p: must be a finite number"),
    ({"judge": {"model": "j", "extra_body": {"top_p": float("inf")}}}, {},
     "judge.extra_body: Value error, top_p: must be a finite number"),
    # read as no key variable: the requests went without a key (the judge's: with the model's key, on its base URL)
    ({}, {"api_key_env": ""}, "models.0.api_key_env: Value error, must not be empty"),
    ({"judge": {"model": "j", "api_key_env": " "}}, {}, "judge.api_key_env: Value error, must not be empty"),
    ({1: 2}, {}, "1: Keys should be strings"),
]


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path, capsys):
    # YAML kept the second options: and dropped the first one's max_cost: the grid ran without its budget, exit 0
    from cresowlve_core.cli import main

    path = tmp_path / "g.yaml"
    path.write_text("name: g\noptions: {max_cost: 0.000001}\nmodels:\n  - {model: m, base_url: 'http://127.0.0.1:9/v1'}\n"
                    "options: {concurrency: 4}\n")
    assert main(["grid", str(path), "--workers", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {path}: cannot read the grid config: key 'options' is given twice (lines 2 and 5); keep one")


def test_a_merge_key_may_still_be_overridden_beside_it(tmp_path):
    from cresowlve_core.evaluation.grid import load_grid

    path = tmp_path / "g.yaml"
    path.write_text("name: g\nmodels:\n  - &m {model: a, base_url: 'http://127.0.0.1:9/v1'}\n  - {<<: *m, model: b}\n")
    assert [(m.model, m.base_url) for m in load_grid(path).models] == [("a", "http://127.0.0.1:9/v1"),
                                                                        ("b", "http://127.0.0.1:9/v1")]


def test_a_grid_config_that_is_not_utf8_is_one_line_not_a_traceback(tmp_path, capsys):
    # a UTF-16 file (Windows Notepad's "Unicode") ended in UnicodeDecodeError and "bug: ... please report it", exit 1
    from cresowlve_core.cli import main

    path = tmp_path / "g.yaml"
    path.write_text("name: g\nmodels: []\n", encoding="utf-16")
    assert main(["grid", str(path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {path}: not UTF-8 (byte 0xff at byte 0); save the grid config as UTF-8")


def test_a_base_url_is_read_as_base_url_reads_it_surrounding_whitespace_stripped(tmp_path):
    # " http://host/v1 " was sent as it stood: every request of the cell a malformed HTTP line, exit 3
    from cresowlve_core.evaluation.grid import load_grid

    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({"name": "g", "langs": ["en"], "judge": {"model": "j", "base_url": " http://j/v1\n"},
                                    "models": [{"model": "m", "base_url": " http://127.0.0.1:9/v1 "}]}))
    grid = load_grid(path)
    assert grid.models[0].base_url == "http://127.0.0.1:9/v1" and grid.judge and grid.judge.base_url == "http://j/v1"


@pytest.mark.parametrize("top, model, problem", BAD_GRID_KEYS, ids=[p.split(":")[0] for _, _, p in BAD_GRID_KEYS])
def test_a_bad_option_effort_style_api_or_provider_is_a_config_error_before_any_cell_starts(tmp_path, capsys,
                                                                                        top, model, problem):
    # each used to run its cells with the setting read otherwise (an unknown effort made a "thinking" run,
    # exit 0), fail them one by one (exit 3, "run again to resume"), or end in a traceback (exit 1)
    from cresowlve_core.cli import main

    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({"name": "g", "langs": ["en"], "runs_dir": str(tmp_path / "runs"), "report": False,
                                    "models": [{"model": "m", "base_url": "http://127.0.0.1:9/v1", **model}], **top}))
    assert main(["grid", str(path), "--workers", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == f"error: {path}: invalid grid config (1 problem(s)):" and lines[1].startswith(f"  {problem}")
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_a_cell_whose_judge_errored_is_incomplete_and_the_next_run_judges_it(tmp_path):
    """The judge (llama.cpp) answers its prompts, longer than the solve prompts, with the recorded context
    overflow: each cell's answers are kept but unjudged, so the cells are ``incomplete`` (exit 1), and
    the next run does not skip them: it asks the judge again, and only the judge. Before: every cell
    ``done``, exit 0, and the next run skipped them, so their answers were never judged."""
    from replay.server import ReplayServer
    from replay.test_replay_cli import demo_prompt_words

    def config(srv: ReplayServer) -> Path:
        cfg = {"name": "judge-left", "items": "demo", "langs": ["en"], "limit": 2, "runs_dir": str(tmp_path / "grid"),
               "report": False, "options": {"concurrency": 1, "max_tokens": 32, "cache": False, "provider": "llama-cpp"},
               "judge": {"model": "qwen3-8b", "provider": "llama-cpp"},
               "models": [{"model": "qwen3-8b", "base_url": srv.base_url("llama-cpp")}]}
        path = tmp_path / "grid.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def grid(srv: ReplayServer) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", str(config(srv)), "--workers", "1"],
                              capture_output=True, text=True, timeout=300)

    with ReplayServer("llamacpp-overflow", context_limit=max(demo_prompt_words(2))) as srv:
        first = grid(srv)
    assert first.returncode == 1, first.stderr
    assert first.stderr.strip().splitlines()[-1].startswith("incomplete: 1 of 1 cells not done (qwen3-8b__en)")
    cell = json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"][0]
    assert cell["status"] == "incomplete" and "judge errors 2" in cell["line"]
    with ReplayServer() as srv:
        again = grid(srv)
        sent = srv.requests("llama-cpp")
    assert again.returncode == 0, again.stderr
    assert len(sent) == 2 and all("candidate_answer" in json.dumps(e["body"]) for e in sent)  # the judge only
    assert json.loads((tmp_path / "grid" / "qwen3-8b__en" / "summary.json").read_text())["n_judged"] == 2


def test_a_cell_whose_judge_gave_no_verdict_is_not_done_and_not_run_again(tmp_path):
    """The judge answers every prompt in Russian, outside the label set: `eval` exits 1 for such a run, so
    the grid names the cell and exits 1 too; a second run asks nothing (the replies are final) and says the
    same. Before: the cell was "done" and the grid exited 0."""
    def judge_in_russian(req) -> str:
        if "candidate_answer" in req.prompt:
            nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
            return f"Совпадает.\nВЕРДИКТ-{nonce}: ВЕРНО"
        return "<Answer>Copernicus</Answer>"

    with FakeServer(answers=judge_in_russian) as srv:
        config = write_config(tmp_path, srv, langs=["en"], models=[{"model": "model-a", "base_url": srv.base_url}])
        runs = [subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", str(config), "--workers", "1"],
                               capture_output=True, text=True, timeout=300) for _ in range(2)]
        sent_by_the_second = srv.total - 4  # the first run: 2 answers and 2 judge replies
    for proc in runs:
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == ("incomplete: the judge gave no verdict in 1 of 1 cells "
                                                        "(model-a__en); its replies are kept in their run directories")
    assert sent_by_the_second == 0
    cell = json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"][0]
    assert cell["status"] == "no verdicts" and "judge: no verdicts | unscored 2" in cell["line"]


def test_a_cell_of_another_configuration_is_refused_exit_2_not_stopped(tmp_path):
    """The grid's options changed after a cell was left unfinished: its run directory holds another
    configuration. As `eval` (exit 2, nothing sent), the cell is refused with the reason; before, it was
    "failed", and the grid said "stopped early ... run the same command again to resume" (exit 3), which
    gives the same again."""
    calls = {"n": 0}

    def second_call_fails(req):
        calls["n"] += 1
        return "404" if calls["n"] == 2 else None  # the model not found: a stop, the cell left unfinished

    with FakeServer(answers=reply, faults=second_call_fails) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        first = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", "--workers", "1",
                                str(write_config(tmp_path, srv, langs=["en"], judge=None, models=models))],
                               capture_output=True, text=True, timeout=300)
        assert first.returncode == 3, first.stderr
        sent = srv.total
        changed = write_config(tmp_path, srv, langs=["en"], judge=None, models=models,
                               options={"concurrency": 2, "max_tokens": 64, "cache": False})
        again = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", "--workers", "1", str(changed)],
                               capture_output=True, text=True, timeout=300)
        assert srv.total == sent  # nothing sent for the refused cell
    assert again.returncode == 2, again.stderr
    last = again.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 cell(s) refused (model-a__en: the run directory holds another configuration "
                           "(max_tokens: 32 → 64"), last
    assert last.endswith("0 of 1 cells done; nothing was sent for them")
    assert json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"][0]["status"] == "refused"


def test_a_cells_unreadable_summary_makes_it_run_again_not_a_traceback(tmp_path):
    """A finished cell's summary.json cut short (or edited into a list): the grid takes the cell as not
    finished and resumes it (nothing left to send), which writes the summary anew. Before: a
    JSONDecodeError traceback ("bug"), before any cell ran."""
    with FakeServer(answers=reply) as srv:
        config = write_config(tmp_path, srv, langs=["en"], models=[{"model": "model-a", "base_url": srv.base_url}])
        assert run_grid(config, progress=False)["n_done"] == 1
        sent = srv.total
        summary = tmp_path / "grid" / "model-a__en" / "summary.json"
        for broken in ('{"n_items": 2, "n_ok"', "[]"):
            summary.write_text(broken)
            out = run_grid(config, progress=False)
            assert out["n_done"] == 1 and not out["cells"][0]["skipped"]
            assert json.loads(summary.read_text())["n_ok"] == 2
        assert srv.total == sent  # every answer and verdict was on disk


def test_a_cell_line_says_what_this_grid_run_sent(tmp_path):
    """A cell's cost is its run directory's, answers of earlier runs and the cache included, so its line
    says what this grid run did: the items it ran and the calls the cache answered, or nothing for a
    cell finished before. Before: the same line each time, a warm-cache cell's cost read as new spending."""
    import shutil

    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        config = write_config(tmp_path, srv, langs=["en"], models=models)
        (first,) = run_grid(config, progress=False)["cells"]
        (again,) = run_grid(config, progress=False)["cells"]
        sent = srv.total
        shutil.rmtree(first["run_dir"])  # the answers are gone from the run directory, not from the cache
        (cached,) = run_grid(config, progress=False)["cells"]
        assert srv.total == sent
    assert first["line"].endswith(" | 2 item(s) run") and not first["skipped"]
    assert again["skipped"] and again["line"].endswith(" | finished before this grid run: nothing sent")
    assert cached["line"].endswith(" | 2 item(s) run, 4 call(s) answered from the cache")
    assert json.loads((tmp_path / "grid" / GRID_FILE).read_text())["cells"][0]["line"] == cached["line"]


def test_a_finished_cell_whose_config_was_edited_is_continued_or_refused_not_skipped_as_done(tmp_path):
    """A finished cell, then the grid's YAML edited: a larger limit continues the cell (the new items are
    answered), another max_tokens refuses it naming the change, nothing sent. Before: both skipped as
    "done" (exit 0), grid.json listing the 2 answers of max_tokens 32 as the cell of the edited config."""
    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        config = write_config(tmp_path, srv, langs=["en"], models=models)
        assert run_grid(config, progress=False)["n_done"] == 1
        sent = srv.total
        config = write_config(tmp_path, srv, langs=["en"], models=models, limit=3)
        (cell,) = run_grid(config, progress=False)["cells"]
        assert (cell["status"], cell["skipped"]) == ("done", False) and cell["line"].startswith("n=3 ok=3")
        assert srv.total == sent + 2  # the third item: its answer and its verdict
        sent = srv.total
        config = write_config(tmp_path, srv, langs=["en"], models=models, limit=3,
                              options={"concurrency": 2, "max_tokens": 64, "cache_path": str(tmp_path / "cache.sqlite")})
        (cell,) = run_grid(config, progress=False)["cells"]
        assert srv.total == sent
    assert cell["status"] == "refused" and "max_tokens: 32 → 64" in cell["error"]
    assert json.loads((tmp_path / "grid" / GRID_FILE).read_text())["n_done"] == 0


def test_a_finished_cell_of_another_configuration_not_reached_before_a_stop_is_not_run_not_done(tmp_path, monkeypatch):
    """A finished cell, its YAML edited (max_tokens), then the grid stopped before the cell started: grid.json
    says it was not run. Before: "done" and "skipped", its line that of the run with the old max_tokens."""
    import signal

    from cresowlve_core.runtime import stop

    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        assert run_grid(write_config(tmp_path, srv, langs=["en"], models=models), progress=False)["n_done"] == 1
        edited = write_config(tmp_path, srv, langs=["en"], models=models,
                              options={"concurrency": 2, "max_tokens": 64, "cache_path": str(tmp_path / "cache.sqlite")})
        monkeypatch.setattr(stop, "requested", lambda: signal.SIGINT)  # stopped before any cell starts
        out = run_grid(edited, progress=False)
    assert out["stopped"] and out["n_done"] == 0
    assert [(c["status"], c["skipped"], c["line"]) for c in out["cells"]] == [("not_run", False, None)]


def test_a_refused_efforts_remedy_reads_in_the_grids_words():
    """The remedy of a cell whose provider refused its effort (llm/effort.py) as the grid's last line gives it.
    Before: "choose another the model's efforts"."""
    from cresowlve_core.cli.evaluation import grid_words

    assert grid_words("choose another --effort (model 'g' at http://x/v1 refuses 'high')") == \
        "choose another effort in the model's efforts (model 'g' at http://x/v1 refuses 'high')"
    assert grid_words("change the value the provider refuses, set by --effort") == \
        "change the value the provider refuses, set by the model's efforts"
    assert grid_words("raise --judge-max-cost or --max-cost") == "raise the judge's max_cost or options.max_cost"
    assert grid_words("choose another --judge-effort (model 'j' at http://x/v1 refuses 'high')") == \
        "choose another value of the judge's effort (model 'j' at http://x/v1 refuses 'high')"


def test_a_cells_cut_off_answers_are_warned_about_and_reasked_by_retry_truncated(tmp_path, capsys):
    """Every answer cut off below a budget of 128: the grid warns per cell as `eval` does, in the grid's words
    (before: no warning, only "truncated 2" inside the cell's line); then a larger options.max_tokens with
    retry_truncated: true re-asks only those answers (before: the grid had no such key)."""
    from fakeserver import Reply

    from cresowlve_core.cli import main

    def cut_below_128(req):
        if "candidate_answer" in req.prompt:
            return reply(req)
        budget = req.body.get("max_tokens") or req.body.get("max_completion_tokens") or 0
        return Reply("Thinking about it, the answer", finish_reason="length") if budget < 128 else reply(req)

    with FakeServer(answers=cut_below_128) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        assert main(["grid", str(write_config(tmp_path, srv, langs=["en"], models=models)), "--workers", "1"]) == 0
        warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
        assert warnings == ["warning: model-a__en: 2 of 2 answers (100.0%) were cut off by the token limit and are "
                            "scored as wrong; re-ask only those with a larger budget: a larger options.max_tokens and "
                            "retry_truncated: true in the grid config"]
        sent = srv.total
        options = {"concurrency": 2, "max_tokens": 256, "cache_path": str(tmp_path / "cache.sqlite")}
        config = write_config(tmp_path, srv, langs=["en"], models=models, options=options, retry_truncated=True)
        assert main(["grid", str(config), "--workers", "1"]) == 0
        assert srv.total == sent + 4  # the 2 answers again, and their verdicts
        assert main(["grid", str(config), "--workers", "1"]) == 0
        assert srv.total == sent + 4  # nothing left to re-ask: the cell is skipped
    summary = json.loads((tmp_path / "grid" / "model-a__en" / "summary.json").read_text())
    assert (summary["n_truncated"], summary["n_ok"]) == (0, 2)
    assert "warning: " not in capsys.readouterr().err


def test_a_grid_with_a_refused_cell_skips_its_report_and_says_so(tmp_path, capsys):
    """A finished cell, then the YAML's max_tokens edited: the cell is refused (its run directory holds the
    run of max_tokens 32), and the report, which would show that run as the grid's cell, is skipped. Before:
    03_analysis was rendered over it, its path printed, under a last line saying the cell was refused."""
    from cresowlve_core.cli import main

    reports = tmp_path / "reports"
    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        assert run_grid(write_config(tmp_path, srv, langs=["en"], models=models), progress=False)["n_done"] == 1
        edited = write_config(tmp_path, srv, langs=["en"], models=models, report=True,
                              options={"concurrency": 2, "max_tokens": 64, "cache_path": str(tmp_path / "cache.sqlite")})
        code = main(["grid", str(edited), "--workers", "1", "--reports-dir", str(reports)])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.strip().splitlines()[-1].endswith("0 of 1 cells done; nothing was sent for them; the report was skipped")
    assert "report: " not in out and not list(reports.glob("03_analysis*"))


@pytest.mark.parametrize("judge, key", [({"api_key_env": "JUDGE_KEY"}, "JUDGE_KEY"), ({}, "MODEL_KEY"),
                                        ({"base_url": "https://api.openai.com/v1"}, None),
                                        ({"base_url": "https://api.openai.com/v1", "api_key_env": "JUDGE_KEY"},
                                         "JUDGE_KEY")])
def test_the_judges_key_variable_is_its_own_when_named_else_the_models_at_the_models_base_url(tmp_path, judge, key):
    """`api_key_env` of the judge without its own base URL: before, the model's variable was used instead
    (the judge's calls carried MODEL_KEY, and an unset JUDGE_KEY went unnoticed)."""
    grid = GridConfig.model_validate({"name": "g", "langs": ["en"], "runs_dir": str(tmp_path / "g"),
                                      "judge": {"model": "gpt-4o-mini", **judge},
                                      "models": [{"model": "m", "base_url": "http://127.0.0.1:9/v1",
                                                  "api_key_env": "MODEL_KEY"}]})
    assert cells(grid)[0].eval_config(grid).judge_api_key_env == key


@pytest.mark.parametrize("second", [{"model": "gpt-4o", "label": "GPT-4o"}, {"model": "GPT-4o"}])
def test_two_models_whose_configurations_would_share_a_name_are_a_config_error(tmp_path, capsys, second):
    """A label shared by two models, or a label that is another model's name: their cells would be one
    configuration in every table of the analysis and in `cresowlve runs`. Before: accepted, exit 0, both
    cells listed as "GPT-4o"."""
    from cresowlve_core.cli import main

    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({
        "name": "g", "langs": ["en"], "runs_dir": str(tmp_path / "runs"), "report": False,
        "models": [{"model": "gpt-4o-mini", "label": "GPT-4o", "base_url": "http://127.0.0.1:9/v1"},
                   {**second, "base_url": "http://127.0.0.1:9/v1"}]}))
    assert main(["grid", str(path), "--workers", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[1].startswith(f"  models: Value error, the configurations of {', '.join(sorted(['gpt-4o-mini', second['model']]))} "
                               "would all be named 'GPT-4o'"), lines
    assert not (tmp_path / "runs").exists()


def test_cells_that_could_not_start_refuse_the_grid_before_any_cell_runs(tmp_path, monkeypatch):
    """A cell whose key variable is not set, or whose provider does not serve the API it names, is refused as
    ``cresowlve eval`` refuses it, before any cell starts. Before: the other cells ran (and spent), and those
    cells ended ``failed`` with exit 3 at run time."""
    import pytest

    from cresowlve_core.evaluation.grid import GridConfigError

    monkeypatch.delenv("GRID_KEY_NOT_SET", raising=False)
    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url},
                  {"model": "model-b", "base_url": srv.base_url, "api_key_env": "GRID_KEY_NOT_SET"},
                  {"model": "model-c", "base_url": srv.base_url, "provider": "gemini", "api": "responses"}]
        config = write_config(tmp_path, srv, langs=["en"], models=models)
        with pytest.raises(GridConfigError) as err:
            run_grid(config, progress=False)
        assert srv.total == 0
    problems = err.value.problems
    assert len(problems) == 2, problems
    assert problems[0].startswith("model-b") and "'GRID_KEY_NOT_SET' is not set" in problems[0]
    assert problems[1].startswith("model-c") and "does not serve the Responses API" in problems[1]


def test_a_finished_cell_whose_items_file_grew_asks_the_new_items_not_skipped_as_done(tmp_path):
    """A finished cell over a user's items file (no limit), then two items added to the file: the cell runs again
    and its evaluation asks only the new items. Before: skipped as done (its summary and settings unchanged),
    grid.json listing 2 items as the cell over a file of 4."""
    from cresowlve_core.sources.sample import load_demo_items

    demo = load_demo_items()
    items = tmp_path / "items.jsonl"
    items.write_text("".join(it.model_dump_json() + "\n" for it in demo[:2]), encoding="utf-8")
    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        config = write_config(tmp_path, srv, langs=["en"], models=models, items=str(items), limit=None)
        assert run_grid(config, progress=False)["n_done"] == 1
        sent = srv.total
        assert run_grid(config, progress=False)["cells"][0]["skipped"] and srv.total == sent  # unchanged: skipped
        items.write_text("".join(it.model_dump_json() + "\n" for it in demo[:4]), encoding="utf-8")
        (cell,) = run_grid(config, progress=False)["cells"]
        assert srv.total == sent + 2 * 2  # the two new items: an answer and a verdict each
    assert not cell["skipped"] and cell["line"].startswith("n=4 ok=4"), cell


def test_a_hostile_model_and_grid_name_print_no_terminal_escape(tmp_path, capsys):
    """The grid's console lines and progress bar name a configuration from the YAML: an ANSI or OSC escape,
    a bell or a carriage return in a model's label or the grid's name reaches the terminal as spaces (a
    model's own name with one is refused: test_a_bad_option_effort_style_api_or_provider_...)."""
    from cresowlve_core.cli import main

    hostile = "\x1b[2J\x1b]0;pwned\x07\rOVR"
    with FakeServer(answers=reply) as srv:
        config = write_config(tmp_path, srv, name="g" + hostile, langs=["en"],
                              models=[{"model": "m", "label": "m" + hostile, "base_url": srv.base_url}])
        assert main(["grid", str(config)]) == 0
    out, err = capsys.readouterr()
    assert not any(c in out + err for c in "\x1b\x07"), (out, err)
    assert out.splitlines()[0].startswith("m [2J ]0;pwned OVR / en ")


def test_a_finished_cell_whose_answered_item_was_edited_is_refused_not_skipped_as_done(tmp_path):
    """A finished cell over a user's items file, then an answered item's answer corrected in place: the cell
    is not skipped as done (the file's SHA-256 changed) and its evaluation refuses the run directory, naming
    the item; nothing is sent. Before: skipped, its answers scored against the old reference."""
    from cresowlve_core.sources.sample import load_demo_items

    demo = load_demo_items()[:2]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(it.model_dump_json() + "\n" for it in demo), encoding="utf-8")
    with FakeServer(answers=reply) as srv:
        models = [{"model": "model-a", "base_url": srv.base_url}]
        config = write_config(tmp_path, srv, langs=["en"], models=models, items=str(items), limit=None)
        assert run_grid(config, progress=False)["n_done"] == 1
        sent = srv.total
        edited = demo[1].model_copy(update={"en": demo[1].en.model_copy(update={"answer": "corrected"})})
        items.write_text("".join(it.model_dump_json() + "\n" for it in (demo[0], edited)), encoding="utf-8")
        (cell,) = run_grid(config, progress=False)["cells"]
        assert srv.total == sent
    assert not cell["skipped"] and f"answered from another text than the items give now ('{demo[1].id}')" \
        in str(cell), cell
