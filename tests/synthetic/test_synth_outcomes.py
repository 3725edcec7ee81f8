"""A refused or filtered verbalisation or solver answer is recorded with its outcome, read as
nothing, counted, and not asked again on resume (tiny graph of test_synth_pipeline, fake server)."""

from __future__ import annotations

import json
import re

from fakeserver import FakeServer, Reply
from test_synth_pipeline import answers, cfg, graph

from cresowlve_core.llm.types import Endpoint
from cresowlve_core.synthetic.pipeline import run_synth


def outcome_answers(req):
    p = req.prompt
    if "Now the real task" in p:
        anchor = re.search(r"Answer: name (\w+) \(", p.split("Now the real task")[1]).group(1)
        if anchor == "a3":  # a verbalisation the filter stopped: its partial puzzle is not read
            return Reply(text="<literal>X (a3-lit) studied there.", finish_reason="content_filter")
        return answers(req)
    if "(a1-lit)" in p:  # the solver refuses the literal version: not correct, so not kept
        return Reply(text="", refusal="I can't help with that")
    return answers(req)


def records(build, stage):
    lines = (build / stage / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["anchor"]: r for r in map(json.loads, lines)}


def test_refused_and_filtered_synthetic_calls(tmp_path):
    with FakeServer(answers=outcome_answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        first = srv.total
        assert sum("(a1-lit)" in r.prompt for r in srv.requests) == 1  # the refusal cost one request
        srv.reset()
        run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        assert srv.total == 0 and first > 0  # resume: nothing re-asked
    build = tmp_path / "build"
    verb, solve = records(build, "verbalise"), records(build, "solve")
    assert verb["A3"]["outcome"] == "filtered" and verb["A3"]["parsed"] is None and verb["A3"]["raw"]
    lit = solve["A1"]["literal"]
    assert (lit["outcome"], lit["refusal"], lit["correct"], lit["answer"]) == ("refused", "I can't help with that",
                                                                               False, None)
    assert solve["A1"]["outcome"] == "failed_literal"  # the creative-leap outcome counts it not solved
    vsum = json.loads((build / "verbalise" / "summary.json").read_text())
    ssum = json.loads((build / "solve" / "summary.json").read_text())
    assert (vsum["n_refused"], vsum["n_filtered"]) == (0, 1)
    assert (ssum["n_refused_answers"], ssum["n_filtered_answers"]) == (1, 0)
