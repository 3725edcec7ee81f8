"""A refused or filtered verbalisation or solver answer is recorded with its outcome, read as
nothing (a refused side leaves its candidate unscored, never kept), counted, and not asked again on resume (tiny graph of test_synth_pipeline, fake server)."""

from __future__ import annotations

import json
import re

from fakeserver import FakeServer, Reply
from test_synth_pipeline import answers, cfg, graph

from cresowlve_core.llm.types import Endpoint
from cresowlve_core.synthetic.pipeline import run_synth, summary_line


def outcome_answers(req):
    p = req.prompt
    if "Now the real task" in p:
        anchor = re.search(r"Answer: name (\w+) \(", p.split("Now the real task")[1]).group(1)
        if anchor == "a3":  # a verbalisation the filter stopped: its partial puzzle is not read
            return Reply(text="<literal>X (a3-lit) studied there.", finish_reason="content_filter")
        return answers(req)
    if "(a1-obf)" in p:  # the solver refuses the obfuscated version it would have failed: unscored, not kept
        return Reply(text="", refusal="I can't help with that")
    return answers(req)


def records(build, stage):
    lines = (build / stage / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["anchor"]: r for r in map(json.loads, lines)}


def test_refused_and_filtered_synthetic_calls(tmp_path):
    with FakeServer(answers=outcome_answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        res = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        first = srv.total
        bodies = [r.body for r in srv.requests]
        assert sum("(a1-obf)" in r.prompt for r in srv.requests) == 1  # the refusal cost one request
        srv.reset()
        run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        assert srv.total == 0 and first > 0  # resume: nothing re-asked
    build = tmp_path / "build"
    verb, solve = records(build, "verbalise"), records(build, "solve")
    assert verb["A3"]["outcome"] == "filtered" and verb["A3"]["parsed"] is None and verb["A3"]["raw"]
    obf = solve["A1"]["obfuscated"]
    assert (obf["outcome"], obf["refusal"], obf["correct"], obf["answer"]) == ("refused", "I can't help with that",
                                                                               None, None)
    assert solve["A1"]["literal"]["correct"] is True
    assert solve["A1"]["outcome"] == "unscored"  # a refusal is no failure to solve: the candidate is not kept
    assert res.survivors == [] and (build / "synthetic_items.jsonl").read_text() == ""
    assert res.summary["withheld"] == {"verbalise": {"n_refused": 0, "n_filtered": 1},
                                       "solve": {"n_refused": 1, "n_filtered": 0}}
    assert res.summary["stages"]["verbalised"] == res.summary["stages"]["candidates"] - 1  # A3's filtered one is not
    from cresowlve_core.synthetic.report import yield_section

    assert ("the verbaliser refused 0 and its provider's filter stopped 1 candidates" in yield_section(res).prose
            and "the solver refused 1 and was filtered on 0 versions" in yield_section(res).prose)
    line = summary_line(res.summary, build)
    assert "verbalised (1 filtered)" in line and "answered by the solver (1 refused answers)" in line, line
    # the AUC's population: it said "(n=1)", silent on the refused puzzle it leaves out
    assert "difficulty AUC n/a (n=1 solved literally, 0 of them failed the obfuscated version; 1 unscored left out)" \
        in line, line
    from cresowlve_core.synthetic.report import difficulty_section

    assert "1 unscored puzzle(s) (a version refused, filtered, cut off or with no answer to read) are left out." \
        in difficulty_section(res).prose
    vsum = json.loads((build / "verbalise" / "summary.json").read_text())
    ssum = json.loads((build / "solve" / "summary.json").read_text())
    assert (vsum["n_refused"], vsum["n_filtered"]) == (0, 1)
    assert (ssum["n_refused_answers"], ssum["n_filtered_answers"]) == (1, 0)
    # each manifest's ``sent`` is what its requests carried besides the model and the prompt
    for stage, marker in (("verbalise", "Now the real task"), ("solve", "(a1-obf)")):
        sent = json.loads((build / stage / "manifest.json").read_text())["sent"]
        body = next(b for b in bodies if marker in json.dumps(b))
        assert sent == {k: v for k, v in body.items() if k not in ("model", "messages", "prompt")}, (stage, body)


def test_a_solver_answer_cut_off_at_the_token_limit_is_no_failure_to_solve(tmp_path):
    """The obfuscated version's answer stops at the budget before any answer: the candidate is unscored
    (a cut-off answer says nothing about the puzzle), never kept as a creative leap, and counted."""
    def cut_off_answers(req):
        if "(a1-obf)" in req.prompt:
            return Reply(text="Let me think about the clues one by one", finish_reason="length")
        return answers(req)

    with FakeServer(answers=cut_off_answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        res = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
    obf = records(tmp_path / "build", "solve")["A1"]["obfuscated"]
    assert (obf["outcome"], obf["correct"]) == ("truncated", None)
    assert records(tmp_path / "build", "solve")["A1"]["outcome"] == "unscored"
    assert all(s["candidate"].anchor != "A1" for s in res.survivors)
    assert res.summary["cut_off"] == {"verbalise": 0, "solve": 1}
    assert "(1 answers cut off at the token limit: unscored unless right)" in summary_line(res.summary, tmp_path)
    from cresowlve_core.synthetic.report import yield_section

    assert "1 solver answers were cut off at the token limit" in yield_section(res).prose


def test_a_solver_whose_replies_never_hold_an_answer_exits_1(tmp_path):
    """Every solver reply copies the prompt back (extraction ``echo``: no answer): every candidate is
    unscored. ``cresowlve synth`` said "3 answered by the solver → 0 kept" and exited 0, as if the
    filter had judged them; a copied prompt on one version only leaves its candidate unscored."""
    from cresowlve_core.exitcodes import stage_exit
    from cresowlve_core.synthetic.pipeline import synth_stage

    def echoing_solver(req):
        if "Now the real task" in req.prompt:
            return answers(req)
        return req.prompt if "(a1-obf)" in req.prompt or echo_all else answers(req)

    for echo_all, code in ((True, 1), (False, 0)):
        with FakeServer(answers=echoing_solver) as srv:
            ep = Endpoint(srv.base_url, "fake")
            res = run_synth(cfg(tmp_path, f"build-{echo_all}"), source=graph(), endpoints=(ep, ep), progress=False)
        read, unread = (0, 6) if echo_all else (5, 1)
        assert res.summary["solver_answers"] == {"read": read, "unread": unread}
        assert res.summary["outcomes"]["unscored"] == (3 if echo_all else 1)
        assert f"({unread} replies with no answer to read: unscored)" in summary_line(res.summary, tmp_path)
        assert stage_exit(synth_stage(res.summary), unit="calls") == code
        from cresowlve_core.synthetic.report import yield_section

        assert f" {unread} solver replies held no answer to read" in yield_section(res).prose


def test_a_verbalisation_cut_off_at_the_token_limit_is_named_in_the_yield(tmp_path):
    """A chat verbaliser's reply stops at the budget inside its obfuscated version (finish_reason
    "length", as the recorded ``openrouter/chat_length_with_cost`` body stops mid-line): no puzzle. The
    command's line named it ("cut off at the token limit: no puzzle"), but the report's yield said only
    "verbalisation parsed 4" of 5, as if the verbaliser had answered in another form."""
    def cut_off_verbalisation(req):
        p = req.prompt
        if "Now the real task" in p and "Answer: name a3 (" in p.split("Now the real task")[1]:
            return Reply(text="<literal>X (a3-lit) studied there. Who is X?</literal><obfuscated>THIS one (a3-o",
                         finish_reason="length")
        return answers(req)

    with FakeServer(answers=cut_off_verbalisation) as srv:
        ep = Endpoint(srv.base_url, "fake")
        res = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
    assert records(tmp_path / "build", "verbalise")["A3"]["parsed"] is None
    assert res.summary["cut_off"] == {"verbalise": 1, "solve": 0}
    from cresowlve_core.synthetic.report import yield_section

    assert ("1 verbalisations were cut off at the token limit (`verbaliser_max_tokens`) before a whole puzzle: "
            "no puzzle, never kept") in yield_section(res).prose


def test_a_build_whose_solver_answers_are_all_cut_off_scores_no_puzzle_and_exits_1(tmp_path, capsys):
    """Every solver answer stops at the budget before a right answer (finish_reason "length", as in the
    replay's truncate scenario): every candidate is unscored, 0 kept. Before: exit 0, no last line, as if
    the creative-leap filter had run. Now the build exits 1 naming the cut-offs and the remedy."""
    from cresowlve_core.exitcodes import stage_exit
    from cresowlve_core.synthetic.pipeline import synth_stage

    def cut_off_solver(req):
        if "Now the real task" in req.prompt:
            return answers(req)
        return Reply(text="Let me think about the clues one by one", finish_reason="length")

    with FakeServer(answers=cut_off_solver) as srv:
        ep = Endpoint(srv.base_url, "fake")
        res = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
    assert res.summary["stages"]["scored_both"] == 0 and res.summary["cut_off"]["solve"] > 0
    assert stage_exit(synth_stage(res.summary), unit="model tasks") == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"incomplete: no puzzle scored: {res.summary['cut_off']['solve']} solver answers cut off at the token limit; "
        "a larger --solver-max-tokens scores them in a new --build-dir")


def test_a_solver_with_no_price_leaves_the_cost_unknown_not_zero(tmp_path):
    """The solver ``fake`` has no price and its provider reports none: each solve record's cost (its two calls)
    is unknown. Before, an unknown cost was added as 0, so every record said it cost $0."""
    with FakeServer(answers=answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
    solve = records(tmp_path / "build", "solve")
    assert solve and all(r["cost"] is None for r in solve.values()), {a: r["cost"] for a, r in solve.items()}
