"""``cresowlve contamination run`` prints the verdict table."""

from __future__ import annotations

import json
import re

import pytest
from fakeserver import FakeServer, Reply
from test_contamination_pipeline import fake_model, make_items, write_runs

from cresowlve_core.cli import main


def run_args(tmp_path, base_url: str) -> list[str]:
    """``contamination run`` over ``tmp_path``'s runs into ``tmp_path/out``, every role the model ``fake`` at ``base_url``."""
    return ["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
            "--perturber-model", "fake", "--perturber-base-url", base_url, "--quiz-model", "fake",
            "--quiz-base-url", base_url]


def run_on(tmp_path, answers) -> int:
    """``cresowlve contamination run`` over ``tmp_path``'s runs, every role on one fake server answering with
    ``answers``, the first four items, into ``tmp_path/out``: its exit code."""
    with FakeServer(answers=answers) as srv:
        return main([*run_args(tmp_path, srv.base_url), "--max-items", "4"])


def test_contamination_run_cli_prints_the_verdict(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    rc = run_on(tmp_path, fake_model(items))
    out = capsys.readouterr()
    assert rc == 0, out.err
    # 4 items per set (--max-items 4) are below the floor of 20: no signal is tested, no verdict is given
    assert "overall: not tested: too few items (n = 4; at least 20 per set)" in out.out
    assert "BCQ target: items right in a majority of repeats" in out.out and "too few items (n = 4): not tested" in out.out
    assert "likely contaminated" not in out.out and not re.search(r"\b(nan|None)\b", out.out, re.I)
    assert "EMBEDDED" not in out.err
    calls = [line for line in out.out.splitlines() if line.startswith("model calls: ")]
    assert len(calls) == 1 and re.fullmatch(r"model calls: (\d+) of \1 answered, 0 errored, 0 not run; .*summary\.json",
                                            calls[0]), calls


def test_contamination_run_counts_the_calls_a_providers_filter_stopped(tmp_path, capsys, monkeypatch):
    """Azure's recorded content-filter 400 on about half the prompts (tests/replay): the calls line
    says how many were filtered, as summary.json counts them. The filter is no error; the exit 1 is
    the perturber's other replies (the replay's solve answers), none of them three rewrites."""
    from replay.server import ReplayServer

    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("REPLAY_KEY", "replay-test-key")
    items = make_items()
    write_runs(tmp_path, items)
    with ReplayServer("content-filter") as srv:
        url = srv.base_url("azure")
        rc = main(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                   "--perturber-model", "gpt-4o", "--perturber-base-url", url, "--perturber-api-key-env", "REPLAY_KEY",
                   "--quiz-model", "gpt-4o", "--quiz-base-url", url, "--quiz-api-key-env", "REPLAY_KEY",
                   "--provider", "azure", "--max-items", "4"])
        filtered = sum(e["status"] == 400 for e in srv.requests("azure"))
    out = capsys.readouterr()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1].startswith("incomplete: perturbation: ")
    assert summary["n_error"] == summary["n_not_run"] == 0
    assert filtered > 0 and summary["n_filtered"] == filtered
    assert (f"model calls: {summary['n_ok']} of {summary['n_items']} answered ({filtered} filtered), 0 errored, "
            "0 not run;") in out.out


def test_a_paired_configuration_with_no_item_in_any_set_is_named_with_why_not_dropped(tmp_path, capsys, monkeypatch):
    """Every item of the only configuration was refused in one language (no evidence of what the model
    knows): no set, no model call, and the command says so, not "no paired runs"."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()[:5]
    write_runs(tmp_path, items, ["target"] * 5)
    en = tmp_path / "runs" / "m__en" / "responses.jsonl"
    en.write_text("".join(json.dumps({**json.loads(line), "outcome": "refused", "prediction": ""}) + "\n"
                          for line in en.read_text().splitlines()))
    with FakeServer() as srv:
        rc = main(run_args(tmp_path, srv.base_url))
        sent = srv.total
    out = capsys.readouterr()
    assert (rc, sent) == (0, 0), out.err
    assert "== m: not tested (no item in any set; 5 withheld)" in out.out
    assert out.err.strip().splitlines()[-1].startswith("no verdict: no configuration has an item in any set")


def test_the_report_continues_the_run_made_with_the_same_options(tmp_path, capsys, monkeypatch):
    """`contamination report` with `run`'s options is the same configuration: it renders from the
    runs `run` made and sends nothing (it was refused: the notebook's budget was not run's)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items)) as srv:
        opts = ["--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"), "--perturber-model", "fake",
                "--perturber-base-url", srv.base_url, "--quiz-model", "fake", "--quiz-base-url", srv.base_url,
                "--max-items", "4", "--seed", "3"]
        assert main(["contamination", "run", *opts]) == 0
        sent = srv.total
        rc = main(["contamination", "report", *opts, "--reports-dir", str(tmp_path / "reports")])
        assert (rc, srv.total) == (0, sent), capsys.readouterr().err
    assert (tmp_path / "reports" / "05_contamination.html").exists()


def test_without_out_dir_the_runs_go_under_the_data_directory_not_the_working_one(tmp_path, capsys, monkeypatch,
                                                                                   isolated_dirs):
    """`--out-dir` defaults to <data dir>/contamination (CRESOWLVE_DATA_DIR when set), as `errors label`'s
    does; an empty one is refused (the library reads it as a throwaway temporary folder and cache)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "cresowlve-core"\n')
    monkeypatch.chdir(project)
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items)) as srv:
        roles = ["--perturber-model", "fake", "--perturber-base-url", srv.base_url, "--quiz-model", "fake",
                 "--quiz-base-url", srv.base_url, "--max-items", "4"]
        rc = main(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), *roles])
        assert rc == 0, capsys.readouterr().err
        assert (isolated_dirs["data"] / "contamination" / "summary.json").is_file()
        assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml"]
        sent = srv.total
        with pytest.raises(SystemExit) as exc:
            main(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), *roles, "--out-dir", ""])
        assert exc.value.code == 2 and srv.total == sent
    assert "argument --out-dir: must not be empty" in capsys.readouterr().err


@pytest.mark.parametrize("script, reply, unparsed", [
    ("perturber", "Happy to help with that question!",
     "perturbation: 12 of 12 questions answered, none with three usable rewrites (nothing to quiz)"),
    ("quiz-taker", "Happy to help with that question!", "m BDQ: 12 replies answered, none naming an option"),
    ("quiz-taker", "A good question, but I cannot tell.", "m BDQ: 12 replies answered, none naming an option"),
])
def test_answers_that_never_parse_exit_1_naming_the_step(tmp_path, capsys, monkeypatch, script, reply, unparsed):
    """A perturber whose replies are never three numbered rewrites (nothing quizzed), or a quiz-taker
    whose replies never name an option (the BCQ placed the original at positions the BDQ never
    measured): every call answered, so the run exited 0 with "not tested" verdicts. The article of
    "A good question" is no option A: such replies were all read as A (a BDQ preferring A, a BCQ
    quizzed at B and C)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    model = fake_model(items)

    def answers(req) -> str:
        rewrite = "Rewrite the question below" in req.prompt
        if (script == "perturber" and rewrite) or (script == "quiz-taker" and "four-option quiz" in req.prompt):
            return reply
        return model(req)

    rc = run_on(tmp_path, answers)
    out = capsys.readouterr()
    assert rc == 1, out.err
    last = out.err.strip().splitlines()[-1]
    assert last.startswith("incomplete: ") and unparsed in last, last
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["unparsed"].startswith(unparsed)
    if script == "quiz-taker":  # every reply invalid, none a choice
        bdq = json.loads((tmp_path / "out" / "m" / "fake" / "bdq" / "summary.json").read_text())
        assert bdq["n_invalid"] == bdq["n_done"] == 12


def _run_with_replies_cut_off(tmp_path, capsys, monkeypatch, prompt_marker: str, thinking: str,
                              reasoning_tokens: int):
    """``contamination run`` over four items per set, the replies to prompts holding ``prompt_marker``
    for items 0 and 1 cut off by the token limit before any text (empty, ``finish_reason: "length"``:
    OpenAI's documented shape of a reasoning model that spent its budget thinking): (exit code, output,
    the items)."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    model = fake_model(items)

    def answers(req):
        if prompt_marker in req.prompt and re.search(r"Вопрос номер [01]:", req.prompt):
            return Reply("", reasoning=thinking, reasoning_tokens=reasoning_tokens, finish_reason="length")
        return model(req)

    rc = run_on(tmp_path, answers)
    return rc, capsys.readouterr(), items


def test_quiz_replies_cut_off_before_naming_an_option_are_no_answer_and_exit_1(tmp_path, capsys, monkeypatch):
    """A reasoning quiz-taker spends the quiz's 16-token budget thinking on items 0 and 1: empty text,
    ``finish_reason: "length"`` (OpenAI's documented shape of a reasoning model cut off by its budget).
    Before: those replies were invalid, counted as wrong (target: 2 of 4 items right), n_invalid in the
    summaries, "84 of 84 answered" and exit 0. Now they are no answer, counted as cut off, and the run
    exits 1 naming them."""
    rc, out, items = _run_with_replies_cut_off(tmp_path, capsys, monkeypatch, "four-option quiz", "Comparing the wordings", 16)
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1] == (
        "incomplete: m BDQ: 2 of 12 replies cut off at the token limit before naming an option (no answer); "
        "m BCQ: 6 of 36 replies cut off at the token limit before naming an option (no answer); "
        "the model's output is kept in the run directory")
    assert "2 of 2 items right in a majority of their 3 repeat(s)" in out.out
    assert "left out as no answer: 6 BCQ answer(s) cut off at the token limit before any content" in out.out
    for quiz, cut in (("bdq", 2), ("bcq", 6)):
        summary = json.loads((tmp_path / "out" / "m" / "fake" / quiz / "summary.json").read_text())
        assert (summary["n_cut_off"], summary["n_invalid"]) == (cut, 0), summary


def test_continuations_cut_off_before_any_text_are_no_answer_and_exit_1(tmp_path, capsys, monkeypatch):
    """The guided continuations of target items 0 and 1 are cut off by the token limit before any text
    (empty, ``finish_reason: "length"``, as for the quiz above). Before: ROUGE-L 0 in their items'
    gains (target gain 0.5 over 4 items instead of 1.0 over 2), "2 of 4 continuations start with the
    true words", exit 0. Now they are no answer, counted as cut off, and the run exits 1 naming them."""
    rc, out, items = _run_with_replies_cut_off(tmp_path, capsys, monkeypatch, "Beginning:", "Recalling the question", 256)
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1] == (
        "incomplete: m completion: 2 of 24 continuations cut off at the token limit before any text (no answer); "
        "the model's output is kept in the run directory")
    assert "Completion guided − general ROUGE-L, target (paired): n = 2, 1.000" in out.out
    assert "context: 2 of 2 continuations start with the true words" in out.out
    assert "left out as no answer: 2 continuation(s) cut off at the token limit before any content" in out.out
    summary = json.loads((tmp_path / "out" / "m" / "fake" / "completion" / "summary.json").read_text())
    assert summary["n_cut_off"] == 2


def test_perturbations_cut_off_before_three_rewrites_are_named_so_and_exit_1(tmp_path, capsys, monkeypatch):
    """The perturber's replies for items 0 and 1 are cut off by the token limit before any rewrite
    (empty, ``finish_reason: "length"``). Before: those questions were left out of the quizzes as
    "no three numbered rewrites in the reply" (a reply in another form), exit 0. Now the reason is the
    cut-off, counted (n_cut_off), and the run exits 1 naming it."""
    rc, out, items = _run_with_replies_cut_off(tmp_path, capsys, monkeypatch, "Rewrite the question below", "Choosing synonyms", 256)
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1] == (
        "incomplete: perturbation: 2 of 12 replies cut off at the token limit before three rewrites (those questions "
        "not quizzed); the model's output is kept in the run directory")
    (pdir,) = (tmp_path / "out" / "perturb").iterdir()
    recs = {json.loads(line)["key"][1]: json.loads(line) for line in (pdir / "perturbations.jsonl").open()}
    assert [x["kind"] for x in recs[items[0].id]["rejections"]] == ["cut_off"]
    assert json.loads((pdir / "summary.json").read_text())["n_cut_off"] == 2


def test_a_reasoning_quiz_taker_gets_its_budget_from_quiz_max_tokens(tmp_path, capsys, monkeypatch):
    """A quiz-taker that needs more than the quiz's 16 tokens (its thinking counts against them) is cut
    off before any letter: exit 1 naming it. `--quiz-max-tokens` is the remedy: the same run directory
    refuses it before any call (its quizzes were asked with 16), a new one is answered in full."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    model = fake_model(items)

    def answers(req):
        if "four-option quiz" in req.prompt and (req.body.get("max_tokens") or 0) < 64:
            return Reply("", reasoning="Comparing the wordings", reasoning_tokens=16, finish_reason="length")
        return model(req)

    def run(srv, out: str, *extra: str) -> int:
        return main(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / out),
                     "--perturber-model", "fake", "--perturber-base-url", srv.base_url, "--quiz-model", "fake",
                     "--quiz-base-url", srv.base_url, "--max-items", "4", *extra])

    with FakeServer(answers=answers) as srv:
        assert run(srv, "out") == 1
        assert "m BDQ: 12 of 12 replies cut off at the token limit" in capsys.readouterr().err
        srv.reset()
        assert (run(srv, "out", "--quiz-max-tokens", "64"), srv.total) == (2, 0)
        assert "another configuration (max_tokens: 16 → 64" in capsys.readouterr().err
        assert run(srv, "out64", "--quiz-max-tokens", "64") == 0, capsys.readouterr().err
        quiz = [r for r in srv.requests if "four-option quiz" in r.prompt]
        assert quiz and {r.body["max_tokens"] for r in quiz} == {64}
    assert json.loads((tmp_path / "out64" / "m" / "fake" / "bdq" / "manifest.json").read_text())["max_tokens"] == 64


def test_a_completion_test_where_no_reply_continued_the_text_exits_1_naming_it(tmp_path, capsys, monkeypatch):
    """The quiz-taker answers every continuation prompt by repeating the beginning it was given: no
    continuation at all (``empty``). Before: ROUGE-L 0 everywhere, 'no signal — no difference shown',
    '128 of 128 answered' and exit 0, a completion test that measured nothing. Now, as a quiz with no
    reply naming an option, the run exits 1 and its last line names the step."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    base = fake_model(items)

    def echo_the_beginning(req) -> str:
        for marker in ("Beginning:\n", "Text:\n"):  # the guided and the general prompt
            if marker in req.prompt and "four-option quiz" not in req.prompt:
                return req.prompt.split(marker, 1)[1].strip()
        return base(req)

    rc = run_on(tmp_path, echo_the_beginning)
    out = capsys.readouterr()
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1] == (
        "incomplete: m completion: 24 replies answered, none continuing the text (empty, or the beginning "
        "repeated); the model's output is kept in the run directory")


@pytest.mark.parametrize("ename", ["RunDirError", "ResumeError"])
def test_a_report_stopped_by_an_unusable_or_other_run_directory_is_an_input_error(tmp_path, monkeypatch, ename):
    """`cresowlve contamination report` on an out-dir whose completion manifest.json was damaged failed
    with 'error: 05_contamination failed: RunDirError: ...manifest.json: not a valid manifest' and exit 1
    (`contamination run` on the same folder: exit 2). An unusable run directory, or one of another
    configuration, is bad input: NotebookInputError, exit 2."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from cresowlve_core.notebooks import NotebookInputError, _execute

    def stopped(*args, **kwargs):
        raise PapermillExecutionError(4, 4, "c = run_contamination(...)", ename, "/x/manifest.json: not a valid manifest", [])

    monkeypatch.setattr(pm, "execute_notebook", stopped)
    with pytest.raises(NotebookInputError, match=f"05_contamination: {ename}: /x/manifest.json") as exc:
        _execute(str(tmp_path / "05_contamination.ipynb"), str(tmp_path / "out.ipynb"), tmp_path / "partial")
    assert exc.value.exit_code == 2


def test_the_run_left_out_for_a_later_one_of_its_configuration_is_named(tmp_path, capsys, monkeypatch):
    """A second En run of model m, finished earlier: only the later run is quizzed, as in
    05_contamination, and the command names the one it left out (before: "2 run(s)" for the 3
    matched, without a word)."""
    import shutil

    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    old = tmp_path / "runs" / "m_hot__en"
    shutil.copytree(tmp_path / "runs" / "m__en", old)
    manifest = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps(manifest | {"run_id": old.name, "finished_at": "2025-12-31T00:00:00Z"}))
    rc = run_on(tmp_path, fake_model(items))
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "note: `m_hot__en` duplicates m / en; kept the later run `m__en`." in out.err


def test_perturbations_cut_off_inside_the_third_rewrite_are_named_so_and_exit_1(tmp_path, capsys, monkeypatch):
    """The perturber's replies for items 0 and 1 stop at the token limit in the middle of the third
    rewrite (``finish_reason: "length"``, as the recorded ``openrouter/chat_length_with_cost`` body stops
    mid-line). Before: the cut rewrite was read as a rewrite in another form ("rewrite 3: punctuation
    changed", "length changed"), n_cut_off 0 and exit 0: the budget's doing reported as the perturber's.
    Now it is a cut-off, counted (n_cut_off), and the run exits 1 naming it."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    model = fake_model(items)

    def answers(req):
        text = model(req)
        if "Rewrite the question below" in req.prompt and re.search(r"Вопрос номер [01]:", req.prompt):
            return Reply(text[:text.index("\n3. ") + 40], finish_reason="length")
        return text

    rc = run_on(tmp_path, answers)
    out = capsys.readouterr()
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1] == (
        "incomplete: perturbation: 2 of 12 replies cut off at the token limit before three rewrites (those questions "
        "not quizzed); the model's output is kept in the run directory")
    (pdir,) = (tmp_path / "out" / "perturb").iterdir()
    recs = {json.loads(line)["key"][1]: json.loads(line) for line in (pdir / "perturbations.jsonl").open()}
    assert [(x["rewrite"], x["kind"]) for x in recs[items[0].id]["rejections"]] == [(3, "cut_off")]
    assert json.loads((pdir / "summary.json").read_text())["n_cut_off"] == 2


def test_a_smaller_max_items_is_refused_naming_it_and_a_larger_one_continues(tmp_path, capsys, monkeypatch):
    """``contamination run --max-items 4`` then ``--max-items 2`` into one out dir was accepted: every
    configuration's completion test then counted the continuations of 2 items per set while its records
    held those of 4 ("model calls: N of N answered"), and nothing recorded the limit. The completion
    test's manifest records it: a smaller one is refused before any model starts, naming the folder
    and the change; a larger one continues."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    with FakeServer(answers=fake_model(items)) as srv:
        opts = ["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                "--perturber-model", "fake", "--perturber-base-url", srv.base_url, "--quiz-model", "fake",
                "--quiz-base-url", srv.base_url]
        assert main([*opts, "--max-items", "4"]) == 0
        summary = (tmp_path / "out" / "summary.json").read_bytes()
        sent = srv.total
        capsys.readouterr()
        assert main([*opts, "--max-items", "2"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert srv.total == sent and (tmp_path / "out" / "summary.json").read_bytes() == summary
        assert re.match(r"error: .*/completion: the run directory holds another configuration \(limit: 4 → 2 "
                        r"\(plans \d+ of the \d+ units it planned, .*; a limit of 4 or more continues it\)", err), err
        assert main([*opts, "--max-items", "5"]) == 0
    assert srv.total > sent


def test_runs_whose_items_file_is_not_here_are_not_quizzed_and_exit_1_saying_so(tmp_path, capsys, monkeypatch):
    """A colleague's En and Ru runs whose manifests name an items file on their machine: the items of the sets
    have no question here, so nothing can be quizzed. The last line says so, exit 1. Before: "no verdict: no
    configuration has an item in any set (the reasons above); nothing was asked", exit 0."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()[:5]
    write_runs(tmp_path, items, ["target"] * 5)
    for lang in ("en", "ru"):
        manifest = tmp_path / "runs" / f"m__{lang}" / "manifest.json"
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "items": "/home/alice/items.jsonl"}))
    with FakeServer() as srv:
        rc = main(run_args(tmp_path, srv.base_url))
        sent = srv.total
    out = capsys.readouterr()
    assert (rc, sent) == (1, 0), out.err
    assert "note: items '/home/alice/items.jsonl' (ru) could not be loaded" in out.err
    assert out.err.strip().splitlines()[-1] == ("incomplete: 5 item(s) of the sets not quizzed: no ru question could "
                                                "be read for them (their runs' items, the notes above); nothing was asked")


def test_quiz_replies_naming_no_option_are_named_in_the_verdict(tmp_path, capsys, monkeypatch):
    """The quiz-taker answers the quiz questions of items 0 and 1 (targets) with no option letter.
    Invalid answers count as wrong (the paper's rule), so the BCQ line read "2 of 4 items right"
    and the BDQ line "n = 10" with the N = 12 of its N/4 threshold unsaid: the 8 replies naming no
    option were in no line of the output. Now the BDQ row and the overall reading name them."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    model = fake_model(items)

    def answers(req) -> str:
        if "four-option quiz" in req.prompt and re.search(r"Вопрос номер [01]:", req.prompt):
            return "I cannot tell which one."
        return model(req)

    rc = run_on(tmp_path, answers)
    out = capsys.readouterr()
    assert rc == 0, out.err  # some replies name an option: the quizzes measured something
    assert "2 of 4 items right in a majority of their 3 repeat(s)" in out.out
    bdq = next(line for line in out.out.splitlines() if line.startswith("BDQ position bias"))
    assert "2 of N = 12 answers named no option (in N, not in the χ²)" in bdq, bdq
    overall = next(line for line in out.out.splitlines() if line.startswith("overall: "))
    assert "counted as wrong: 6 BCQ answer(s) naming no option (invalid)" in overall, overall


def test_a_quiz_reply_cut_off_while_going_through_the_options_is_no_answer(tmp_path, capsys, monkeypatch):
    """A verbose quiz-taker goes through the options and its 16-token budget ends before an answer
    on items 0 and 1 (``finish_reason: "length"``). Its first "Option A - reworded" was read as the
    choice A: 2 BDQ and 6 BCQ answers of A from replies that stopped before answering, exit 0. Now
    they are cut off before naming an option: no answer, counted, exit 1 naming them."""
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    items = make_items()
    write_runs(tmp_path, items)
    model = fake_model(items)

    def answers(req):
        if "four-option quiz" in req.prompt and re.search(r"Вопрос номер [01]:", req.prompt):
            return Reply("Looking at each option:\n- Option A - reworded (uses", finish_reason="length")
        return model(req)

    rc = run_on(tmp_path, answers)
    out = capsys.readouterr()
    assert rc == 1, out.err
    assert out.err.strip().splitlines()[-1] == (
        "incomplete: m BDQ: 2 of 12 replies cut off at the token limit before naming an option (no answer); "
        "m BCQ: 6 of 36 replies cut off at the token limit before naming an option (no answer); "
        "the model's output is kept in the run directory")
    for quiz, cut in (("bdq", 2), ("bcq", 6)):
        summary = json.loads((tmp_path / "out" / "m" / "fake" / quiz / "summary.json").read_text())
        assert (summary["n_cut_off"], summary["n_invalid"]) == (cut, 0), summary


def test_a_hub_run_whose_snapshot_file_is_now_another_revision_is_refused_before_any_quiz(tmp_path, capsys,
                                                                                          hub_cache_at_bbbb2222):
    """Hub runs (hub:en, hub:ru) whose Ru manifest names a snapshot file of another revision than the cache now
    holds: exit 2 before any model starts, the last line naming the run, the file and both revisions. Before:
    the quiz asked the new revision's questions as the ones the run answered."""
    from cresowlve_core.sources.hub import load_published, loaded_files

    shared = "chgk_83a712ed75"  # the one item both configs of the fixture snapshot hold
    for lang, files in (("en", None), ("ru", "aaaa1111")):
        read = loaded_files(load_published(lang, local_path=hub_cache_at_bbbb2222))
        d = tmp_path / "runs" / f"m__{lang}"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({
            "run_id": d.name, "kind": "eval", "model": "m", "base_url": "http://127.0.0.1:1/v1", "lang": lang,
            "items": f"hub:{lang}", "n_items": 1, "finished_at": "2026-01-01T00:00:00Z",
            "items_files": [{**f, "revision": files, "sha256": "0" * 64} for f in read] if files else read}))
        (d / "responses.jsonl").write_text(json.dumps({"id": shared, "lang": lang, "status": "ok", "model": "m",
                                                       "prediction": "x", "em_strict": lang == "ru",
                                                       "em_lenient": lang == "ru"}) + "\n")
    rc = main(run_args(tmp_path, "http://127.0.0.1:1/v1"))
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2, last
    assert last.startswith(f"error: {tmp_path / 'runs' / 'm__ru'}: its items ('hub:ru') are not those the run read: "
                           "ru/test-00000-of-00001.parquet is now revision bbbb2222, SHA-256 ")
    assert "(the run read revision aaaa1111, SHA-256 000000000000…)" in last and last.endswith("(nothing was quizzed)")
    assert not (tmp_path / "out" / "summary.json").exists()
