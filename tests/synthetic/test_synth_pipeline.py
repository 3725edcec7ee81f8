"""The whole build on a tiny graph against scripted models: creative-leap filter logic, multiple
valid answers, exports, determinism and resume after failures."""

from __future__ import annotations

import json
import re

import pytest
from fakeserver import FakeServer

from cresowlve_core.construction.review import ReviewSession, load_decisions
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.sources.kg import KnowledgeGraph
from cresowlve_core.sources.sample import load_items
from cresowlve_core.synthetic.leap import leap_outcome
from cresowlve_core.synthetic.pipeline import SynthConfig, run_synth


def graph() -> KnowledgeGraph:
    """Writers A1..A5 and a non-writer B, all with award PA. Schools: S12 (A1, A2), S34 (A3, A4),
    S5B (A5, B). So every writer's two facts match exactly two subjects."""
    t = [(a, "P166", "PA") for a in ("A1", "A2", "A3", "A4", "A5", "B")]
    t += [("A1", "P69", "S12"), ("A2", "P69", "S12"), ("A3", "P69", "S34"), ("A4", "P69", "S34"),
          ("A5", "P69", "S5B"), ("B", "P69", "S5B")]
    ids = ("A1", "A2", "A3", "A4", "A5", "B", "PA", "S12", "S34", "S5B")
    return KnowledgeGraph(t, labels={q: f"name {q.lower()}" for q in ids}, relation_labels={"P166": "award received", "P69": "educated at"},
                          types={q: frozenset({"Q5"}) for q in ids[:6]}, aliases={"A1": ["Ay One"]},
                          descriptions={q: "novelist" for q in ids[:5]} | {"B": "banker"})


def verbaliser(anchor: str) -> str:
    if anchor == "a5":
        return "I cannot do this."  # unparseable
    obf = f"THIS Name {anchor.upper()} is hidden." if anchor == "a4" else f"THIS one ({anchor}-obf) is hidden. Who is X?"
    return (f"<literal>X ({anchor}-lit) studied there. Who is X?</literal><obfuscated>{obf}</obfuscated>"
            f"<explanation>it is {anchor}</explanation>")


SOLVER = {  # anchor -> (literal answer, obfuscated answer)
    "a1": ("Name A1", "nobody"),  # kept
    "a2": ("ay one", "name a2"),  # literal via the other valid answer's alias; obfuscated solved -> dropped
    "a3": ("wrong", "nobody"),  # failed literal
}


def answers(req) -> str:
    p = req.prompt
    if "Now the real task" in p:
        return verbaliser(re.search(r"Answer: name (\w+) \(", p.split("Now the real task")[1]).group(1))
    m = re.search(r"\((a\d)-(lit|obf)\)", p)
    lit, obf = SOLVER[m.group(1)]
    return f"Thinking...\n<Answer>{lit if m.group(2) == 'lit' else obf}</Answer>"


def cfg(tmp_path, name="build", **kw) -> SynthConfig:
    return SynthConfig(build_dir=str(tmp_path / name), n_candidates=5, domains=["writers"], band_low=0, band_high=99,
                       cache=False, concurrency=2, **kw)


def test_leap_outcome_is_the_papers_rule():
    assert leap_outcome(True, False) == "kept"
    assert leap_outcome(False, False) == "failed_literal" and leap_outcome(False, True) == "failed_literal"
    assert leap_outcome(True, True) == "solved_obfuscated"
    assert leap_outcome(None, False) == "unscored" and leap_outcome(True, None) == "unscored"


@pytest.mark.embeddings
def test_filter_on_scripted_models_and_exports(tmp_path):
    with FakeServer(answers=answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        res = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        assert {r.path for r in srv.requests} == {"/chat/completions"}  # a chat model keeps the chat prompts
    assert res.summary["prompts"] == {"verbalise": ["synth_verbalise@1"], "solve": ["solve_cot_en@2"]}
    st = res.summary["stages"]
    assert st["candidates"] == 5 and st["verbalised"] == 5 and st["parsed"] == 4 and st["leak_free"] == 3
    assert res.summary["outcomes"] == {"kept": 1, "failed_literal": 1, "solved_obfuscated": 1, "unscored": 0}
    by_anchor = {r["anchor"]: r for r in res.solved.values()}
    assert by_anchor["A2"]["literal"]["basis"] == "alias:A1:Ay One"  # another valid answer counts
    assert by_anchor["A1"]["literal"]["basis"] == "label:A1" and by_anchor["A1"]["obfuscated"]["basis"] is None
    leaks = next(r["leaks"] for r in res.verbalised.values() if r["anchor"] == "A4")
    assert leaks == [{"field": "obfuscated", "qid": "A4", "name": "name a4", "kind": "label"}]
    rows = [json.loads(x) for x in (tmp_path / "build" / "synthetic_items.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["answer"] == "name a1" and rows[0]["anchor"] == "A1"
    assert rows[0]["other_answers"] == "Ay One; name a2"  # anchor alias, then the other valid answer
    assert rows[0]["source_triples"] == [["A1", "P166", "PA"], ["A1", "P69", "S12"]]
    assert 0.0 <= rows[0]["difficulty_score"] <= 2.0
    items = load_items(str(tmp_path / "build" / "synthetic_items.jsonl"), "en")  # what `cresowlve eval` reads
    assert [i.id for i in items] == [rows[0]["id"]] and items[0].en.question == rows[0]["question"]
    session = ReviewSession(tmp_path / "build", "ann")  # the construction pipeline's review API
    assert [c["id"] for c in session.pending] == [rows[0]["id"]]
    assert session.pending[0]["synthetic"]["creative_leap"] == "kept" and session.pending[0]["ru"] is None
    session.decide(rows[0]["id"], "keep")
    assert load_decisions(tmp_path / "build")[0][rows[0]["id"]].code == "keep"
    assert res.summary["yield"] == {"kept": 1, "of_candidates": 5, "paper_kept": 7, "paper_of": 100}


@pytest.mark.embeddings
def test_resume_after_a_stop_and_determinism(tmp_path):
    failing = {"on": True}

    def faults(req):  # a wrong key mid-run: a stop error
        return "401" if failing["on"] and "(a3-lit)" in req.prompt else None

    with FakeServer(answers=answers, faults=faults) as srv:
        ep = Endpoint(srv.base_url, "fake")
        first = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        assert first.stopped and "fatal" in first.summary["stopped"]
        assert first.summary["stages"]["verbalised"] == 5  # everything finished before the stop is kept
        failing["on"] = False
        again = run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        assert not again.stopped and again.summary["outcomes"]["kept"] == 1
        # nothing finished was sent twice: only the refused request was repeated
        repeated = {p: n for p, n in srv.by_prompt.items() if n > 1}
        assert len(repeated) == 1 and "(a3-lit)" in next(iter(repeated))
        done = srv.total
        run_synth(cfg(tmp_path), source=graph(), endpoints=(ep, ep), progress=False)
        assert srv.total == done  # a finished build makes no call
        other = run_synth(cfg(tmp_path, "other"), source=graph(), endpoints=(ep, ep), progress=False)
    for f in ("candidates.jsonl", "synthetic_items.jsonl"):
        assert (tmp_path / "build" / f).read_text() == (tmp_path / "other" / f).read_text()
    assert other.summary["stages"] == again.summary["stages"]


def test_resume_refuses_another_configuration(tmp_path):
    from cresowlve_core.runtime import ResumeError

    with FakeServer(answers=answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        run_synth(cfg(tmp_path, max_facts=2).model_copy(update={"n_candidates": 1}), source=graph(),
                  endpoints=(ep, ep), progress=False)
        with pytest.raises(ResumeError):
            run_synth(cfg(tmp_path, seed=1), source=graph(), endpoints=(ep, ep), progress=False)


def test_resume_refuses_another_graph_under_the_same_settings(tmp_path):
    """A build resumed on another graph (another CRESOWLVE_DATA_DIR, an edited label) under the same
    settings reused the first graph's verbalisations and solver verdicts: the identity held
    ``kg_dir: None`` and never the graph itself."""
    from cresowlve_core.runtime import ResumeError

    relabelled = graph()
    relabelled.labels["A1"] = "name a1 renamed"
    with FakeServer(answers=answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        one = cfg(tmp_path, max_facts=2).model_copy(update={"n_candidates": 1})
        run_synth(one, source=graph(), endpoints=(ep, ep), progress=False)
        sent = srv.total
        run_synth(one, source=graph(), endpoints=(ep, ep), progress=False)  # the same content: resumed
        assert srv.total == sent
        with pytest.raises(ResumeError, match="knowledge"):
            run_synth(one, source=relabelled, endpoints=(ep, ep), progress=False)
        assert srv.total == sent


@pytest.mark.embeddings
def test_fewer_candidates_than_asked_are_said_with_why(tmp_path):
    """The graph holds five writers: `--n 50` built 5 candidates and the line said "5 candidates",
    never that 50 were asked nor why the rest are missing."""
    from cresowlve_core.synthetic.pipeline import candidate_build, summary_line
    from cresowlve_core.synthetic.report import yield_section

    with FakeServer(answers=answers) as srv:
        ep = Endpoint(srv.base_url, "fake")
        res = run_synth(cfg(tmp_path).model_copy(update={"n_candidates": 50}), source=graph(), endpoints=(ep, ep),
                        progress=False)
    short = "5 of 50 asked: every anchor in the band was tried (5, each in anchors.jsonl with its outcome)"
    assert res.summary["candidate_shortfall"] == short
    assert f"synth: 5 candidates ({short}) → " in summary_line(res.summary, tmp_path)
    assert f"Fewer candidates than asked: {short}." in yield_section(res).prose
    limited = candidate_build(cfg(tmp_path), graph())  # 5 asked, 5 built: nothing to say
    assert limited.shortfall() is None
    from cresowlve_core.synthetic.candidates import build_candidates
    from cresowlve_core.synthetic.domains import domains_by_name

    capped = build_candidates(graph(), domains_by_name(["writers"]), cfg(tmp_path).band(), cfg(tmp_path).rules(), 5, 0,
                              max_tries=2)
    assert capped.shortfall() == "2 of 5 asked: the limit of 2 anchors tried was reached"


def test_a_smaller_n_is_refused_before_anything_is_written_and_a_larger_one_continues(tmp_path):
    """``synth --n 3`` then ``--n 2`` on one build directory was accepted: candidates.jsonl was rewritten
    with 2 candidates and the verbaliser's summary counted 2 while its records held 3 (its manifest
    recorded no limit). The verbaliser's manifest records ``--n`` as its limit, so a smaller one is
    refused before a file is written or a call sent; a larger one continues the build."""
    from cresowlve_core.runtime import ResumeError

    def at(n: int) -> SynthConfig:  # the CLI's path: the build's own endpoints, checked before anything starts
        return cfg(tmp_path).model_copy(update={"n_candidates": n, "verbaliser_model": "fake", "solver_model": "fake",
                                                "verbaliser_base_url": srv.base_url, "solver_base_url": srv.base_url})

    with FakeServer(answers=lambda req: "I cannot do this.") as srv:
        run_synth(at(3), source=graph(), progress=False)
        build = tmp_path / "build"
        before = {f: (build / f).read_text() for f in ("candidates.jsonl", "verbalise/manifest.json",
                                                       "verbalise/summary.json", "summary.json")}
        sent = srv.total
        with pytest.raises(ResumeError, match=r"verbalise: .*limit: 3 → 2 \(plans 2 of the 3 units"):
            run_synth(at(2), source=graph(), progress=False)
        assert srv.total == sent
        assert {f: (build / f).read_text() for f in before} == before
        res = run_synth(at(4), source=graph(), progress=False)
        assert srv.total == sent + 1  # only the new candidate is verbalised
    summary = json.loads((build / "verbalise" / "summary.json").read_text())
    assert summary["n_candidates"] == res.summary["stages"]["candidates"] == 4
    assert len((build / "verbalise" / "responses.jsonl").read_text().splitlines()) == 4
