"""What CREATE's calls came to, recorded, counted and named: an errored call, an answer cut off at
the token limit, a judge's refusal. Over the replay server's recorded bodies where a provider's
wire decides the outcome, over the outcome double where the stage alone does."""

from __future__ import annotations

import asyncio
import json

import pytest
from create_fakes import EP, Q, answer_for, judge_reply, one_hot, records
from outcome_double import OutcomeModel, failed, refused
from replay.server import ReplayServer

from cresowlve_core.cli.create import _create_finish
from cresowlve_core.create import generate as cg
from cresowlve_core.create import judges as cj
from cresowlve_core.create import report as cr
from cresowlve_core.create import score as cs
from cresowlve_core.create.queries import load_queries
from cresowlve_core.create.records import generate_line, score_line
from cresowlve_core.failures import error_line
from cresowlve_core.llm.types import Completion, Endpoint, GenParams, LLMError
from cresowlve_core.runtime import ClientOptions

QUERIES = load_queries(limit=5)
#: one attempt per call, no cache: each replay answer is what the record shows
ONCE = {"cache": False, "max_attempts": 1, "backoff_base_s": 0.0, "concurrency": 2}
GEN_OPTIONS = cg.GENERATE_OPTIONS.model_copy(update=ONCE)
JUDGE_OPTIONS = ClientOptions(**ONCE)
WITHHELD_LINE = "their triples score 0, the paper's rule for a verdict it cannot read"


def replay_answers() -> dict[str, str]:
    """What the replay server answers: two valid three-triple paths per query, and judge answers
    that read in full for a three-triple path (class size 50, every triple holds)."""
    answers = {}
    for q in QUERIES:
        a, b, r = q.entity_a, q.entity_b, q.rel_b
        answers[q.query] = json.dumps({"1": [[a, "collaborated with", "Mid"], ["Mid", "knows", "Mid2"], ["Mid2", r, b]],
                                       "2": [[a, "award received", "Prize"], ["Prize", "winner", "Other"],
                                             ["Other", r, b]]})
    answers["Class A"] = json.dumps([{"explanation": "e", "judgment": 50}] * 3)
    answers["fact-checking"] = json.dumps({"explanation": "e", "judgments": ["not hallucinated"] * 3})
    return answers


def endpoint(srv: ReplayServer, provider: str = "openai", model: str = "gpt-4o") -> Endpoint:
    return Endpoint(srv.base_url(provider), model, "OPENAI_API_KEY", provider=provider)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def last_line(capsys, summary, unit: str) -> tuple[int, str, str]:
    """The exit code, the summary line and the last line of stderr, as `cresowlve create` prints them."""
    capsys.readouterr()
    code = _create_finish(summary, unit)
    out = capsys.readouterr()
    return code, out.out.strip(), out.err.strip().splitlines()[-1] if out.err.strip() else ""


# --------------------------------------------------------------------------- errored calls


def test_an_errored_generation_carries_its_outcome_and_the_last_line_names_the_error(tmp_path, key, capsys):
    with ReplayServer("choice-error", answers=replay_answers()) as srv:
        s = cg.generate(None, endpoint(srv, "openrouter", "openai/gpt-4o"), tmp_path, limit=5, options=GEN_OPTIONS,
                        progress=False)
    errored = [r for r in records(tmp_path) if r["status"] == "error"]
    assert errored and s.n_error == len(errored)
    # OpenRouter's error on the choice is the provider saying the response failed: not an answer
    assert {r["outcome"] for r in errored} == {"failed"}
    assert {r["outcome"] for r in records(tmp_path) if r["status"] == "ok"} == {"answer"}
    assert s.top_error == (error_line(errored[0]["error"]), len(errored))
    code, _, last = last_line(capsys, s, "calls")
    assert code == 1 and last.startswith(f"incomplete: {len(errored)} errored, 0 not run of 5 calls; "
                                         f"most common error ({len(errored)}x): LLMError: ")
    assert "an error on the answer inside HTTP 200 (502)" in last and last.endswith("run again to retry them")


def test_an_errored_judgment_says_its_judges_errored_and_the_last_line_names_the_error(tmp_path, capsys):
    cg.generate(None, EP, tmp_path, limit=2, client=OutcomeModel(answer_for), progress=False)

    def judge(prompt: str) -> str | BaseException:
        if "Path: " not in prompt:
            return answer_for(prompt)
        if "award received" in prompt:  # the three-triple path of each query: the provider says it failed
            return failed()
        if Q[0].entity_a in prompt and "fact-checking" in prompt:
            return LLMError("double: gave up after 6 attempts; last error: HTTP 503")
        return judge_reply(prompt)

    s = cs.score(tmp_path, EP, client=OutcomeModel(judge), embedder=one_hot, progress=False)
    judgments = {(j["query_id"], len(j["path"])): j for j in records(tmp_path / "score", "judgments.jsonl")}
    assert (s.n_judged, s.n_judge_errors) == (1, 3)
    for q in Q:  # neither judge's verdict is kept when a call of the path raised
        three = judgments[(q.id, 3)]
        assert three["status"] == "error" and (three["specificity_outcome"], three["factuality_outcome"]) == (
            "failed", "failed")
    broke = judgments[(Q[0].id, 2)]
    assert broke["status"] == "error" and (broke["specificity_outcome"], broke["factuality_outcome"]) == (
        "error", "error")
    assert judgments[(Q[1].id, 2)]["specificity_outcome"] == "answer"
    assert s.top_error is not None and s.top_error[1] == 2 and "server_error while generating" in s.top_error[0]
    code, _, last = last_line(capsys, s, "paths to judge")
    assert code == 1 and last.startswith("incomplete: 3 errored, 0 not run of 4 paths to judge; most common error (2x): "
                                         "LLMError: double: gave up after 6 attempts")


# --------------------------------------------------------------------------- cut off at the token limit


def test_generations_and_judge_answers_cut_off_at_the_token_limit_are_counted_named_and_flagged(tmp_path, key, capsys):
    with ReplayServer("truncate", answers=replay_answers()) as srv:
        ep = endpoint(srv)
        g = cg.generate(None, ep, tmp_path, limit=5, options=GEN_OPTIONS, progress=False)
        cut_gen = sum(e.get("truncated", False) for e in srv.requests())
        s = cs.score(tmp_path, ep, options=JUDGE_OPTIONS, embedder=one_hot, progress=False)
        cut_judge = sum(e.get("truncated", False) for e in srv.requests()) - cut_gen
    assert cut_gen and cut_judge, "the scenario cuts off some generations and some judge answers"
    cut = {r["query_id"] for r in records(tmp_path) if r["outcome"] == "truncated"}
    assert g.n_truncated == len(cut) == cut_gen
    assert json.loads((tmp_path / "summary.json").read_text())["n_truncated"] == cut_gen
    code, line, _ = last_line(capsys, g, "calls")
    assert code == 0 and f"{cut_gen} cut off at the token limit (--max-tokens)" in line
    assert line == generate_line(g)
    # the query says its answer was cut off, beside what its parse came to
    flags = {r["query_id"]: r["flags"] for r in json.loads((tmp_path / "score" / "scores.json").read_text())}
    assert all({"truncated", "parse_unparseable"} <= set(flags[q]) for q in cut)
    assert not any("truncated" in f for q, f in flags.items() if q not in cut)
    # a judge answer cut off: its outcome and a flag on the judgment, counted and named
    judgments = records(tmp_path / "score", "judgments.jsonl")
    cut_judgments = [(j, side) for j in judgments for side in ("specificity", "factuality")
                     if j[f"{side}_outcome"] == "truncated"]
    assert len(cut_judgments) == cut_judge == s.n_judge_truncated
    assert all("truncated" in j[f"{side}_flags"] for j, side in cut_judgments)
    assert all("judge_truncated" in flags[j["query_id"]] for j, _ in cut_judgments)
    code, line, _ = last_line(capsys, s, "paths to judge")
    answers = "judge answer" if cut_judge == 1 else "judge answers"
    assert code == 0 and f"{cut_judge} {answers} cut off at the token limit: read as far as they go" in line
    assert line == score_line(s)


def test_an_answer_whose_finish_reason_says_length_is_recorded_truncated(tmp_path):
    def reply(prompt: str) -> Completion:
        return Completion(text=answer_for(prompt), raw={"finish_reason": "length"})

    s = cg.generate(None, EP, tmp_path, limit=2, client=OutcomeModel(reply), progress=False)
    assert s.n_truncated == 2 and {r["outcome"] for r in records(tmp_path)} == {"truncated"}
    assert all("truncated" in g.flags for g in cg.load_generations(tmp_path))


# --------------------------------------------------------------------------- a judge that refuses


def test_a_refused_judge_answer_is_named_scored_0_and_not_flagged_unparseable(tmp_path, key, capsys):
    answers = replay_answers()
    with ReplayServer(answers=answers) as srv:
        cg.generate(None, endpoint(srv), tmp_path, limit=5, options=GEN_OPTIONS, progress=False)
    with ReplayServer("refusal", answers=answers) as srv:
        s = cs.score(tmp_path, endpoint(srv), options=JUDGE_OPTIONS, embedder=one_hot, progress=False)
        n_refused = sum(e["rule"] == "refusal (scenario)" for e in srv.requests())
    assert n_refused and s.n_judge_refused == n_refused and s.n_judge_filtered == 0
    judgments = records(tmp_path / "score", "judgments.jsonl")
    sides = [(j, side) for j in judgments for side in ("specificity", "factuality")]
    withheld = [(j, side) for j, side in sides if j[f"{side}_outcome"] == "refused"]
    assert len(withheld) == n_refused
    for j, side in withheld:  # never parsed: flagged with its outcome only, its triples scored 0
        assert j[f"{side}_flags"] == ["refused"] and j[side] == [0.0] * len(j["path"])
    assert all(j[f"{side}_flags"] == [] for j, side in sides if j[f"{side}_outcome"] == "answer")
    code, line, _ = last_line(capsys, s, "paths to judge")
    assert code == 0 and f"; {n_refused} judge answers refused or filtered ({n_refused} refused): {WITHHELD_LINE};" in line
    # the report's flag table counts the refusals, and no unparseable judgment besides them
    table = cr.analyse(cs.scored_sets_from_run(tmp_path), embedder=one_hot).flags()
    counts = dict(zip(table.flag, table["count"], strict=True))
    assert counts["judge_refused"] == n_refused
    assert not [f for f in counts if "unparseable" in f or "length_mismatch" in f]


def test_a_base_model_judges_refused_triple_is_not_counted_unscored():
    replies = iter([refused(), Completion(text=" many"), Completion(text=" 40")])
    model = OutcomeModel(lambda _prompt: next(replies))
    path = [["A", "r", "B"], ["B", "s", "C"], ["C", "t", "D"]]
    call = asyncio.run(cj.judge_specificity(model, path, GenParams(), base_model=True))
    # one triple refused (its outcome flags it), one answered without a number (unscored), one read
    assert call.outcome == "refused" and call.verdicts.sizes == [None, None, 40.0]
    assert call.verdicts.flags == ["fewshot", "unscored_1_of_3", "refused"]


def test_a_base_model_judge_cut_off_on_a_triple_says_so():
    replies = iter([Completion(text=" 40"), Completion(text=" yes it holds because", outcome="truncated")])
    model = OutcomeModel(lambda _prompt: next(replies))
    call = asyncio.run(cj.judge_factuality(model, [["A", "r", "B"], ["B", "s", "C"]], GenParams(), base_model=True))
    assert call.outcome == "truncated" and call.verdicts.verdicts == [None, 1.0]  # " 40" holds no yes/no
    assert call.verdicts.flags == ["fewshot", "unscored_1_of_2", "truncated"]


def test_a_class_size_cut_off_at_the_token_limit_is_unscored_not_read_short():
    """A judge answer cut off inside its last size ("3,0" of "3,000") read that size as 30: score 4
    for a class of thousands. The size running to the end of a cut-off answer is unscored; a
    complete size before it, and the same text when the answer was not cut off, are read."""
    text = '[{"explanation": "e", "judgment": 50}, {"explanation": "e", "judgment": "3,0'
    path = [["A", "r", "B"], ["B", "s", "C"]]
    cut = asyncio.run(cj.judge_specificity(OutcomeModel(lambda _p: Completion(text=text, outcome="truncated")), path,
                                           GenParams()))
    assert cut.outcome == "truncated" and cut.verdicts.sizes == [50.0, None] and cut.verdicts.scores == [4.0, 0.0]
    assert cut.verdicts.flags == ["regex_fallback", "some_unparseable", "truncated"]
    whole = asyncio.run(cj.judge_specificity(OutcomeModel(lambda _p: text), path, GenParams()))
    assert whole.outcome == "answer" and whole.verdicts.sizes == [50.0, 30.0]


def test_a_run_with_nothing_read_says_why_in_its_last_line(tmp_path, capsys):
    def cut_off(prompt: str) -> Completion:
        return Completion(text="<answer>{\"1\": [[", outcome="truncated")

    g = cg.generate(None, EP, tmp_path, limit=2, client=OutcomeModel(cut_off), progress=False)
    code, _, last = last_line(capsys, g, "calls")
    assert code == 1 and last.startswith("incomplete: no answer parsed: 2 of 2 answers unparseable "
                                         "(2 cut off at the token limit: --max-tokens)")
    cg.generate(None, EP, tmp_path / "run", limit=2, client=OutcomeModel(answer_for), progress=False)
    s = cs.score(tmp_path / "run", EP, client=OutcomeModel(lambda _prompt: refused()), embedder=one_hot,
                 progress=False)
    code, line, last = last_line(capsys, s, "paths to judge")
    assert (s.n_judge_refused, s.n_judge_withheld) == (8, 4)
    assert f"; 8 judge answers refused or filtered (8 refused): {WITHHELD_LINE};" in line
    assert code == 1 and last.startswith("incomplete: no judgment parsed: 0 of 10 triples scored by either judge "
                                         "(8 judge answers refused or filtered)")


def test_a_judge_that_scored_no_triple_makes_the_score_incomplete(tmp_path, key, capsys):
    """A specificity judge whose every answer holds no class size (prose): every strength is 0, so
    every utility is 0.000, and `create score` exited 0 because the factuality judge had read its
    triples. The last line now names the judge that scored nothing, and the exit code is 1."""
    answers = {**replay_answers(), "Class A": "These classes look fairly small to me."}
    with ReplayServer("default", answers=answers) as srv:
        cg.generate(None, endpoint(srv), tmp_path, limit=2, options=GEN_OPTIONS, progress=False)
        s = cs.score(tmp_path, endpoint(srv), options=JUDGE_OPTIONS, embedder=one_hot, progress=False)
    assert s.n_triples == 12 and (s.n_specificity_scored, s.n_factuality_scored) == (0, 12)
    code, line, last = last_line(capsys, s, "paths to judge")
    assert "utility@0.9 0.000" in line
    assert code == 1 and last.startswith("incomplete: no specificity judgment parsed: 0 of 12 triples scored by the "
                                         "specificity judge, so every path's strength is 0")


# --------------------------------------------------------------------------- refused generations


def test_the_generate_line_does_not_count_refused_calls_as_answered(tmp_path, key, capsys):
    """OpenAI's recorded refusal on some generation calls: each is a call done, final, but no answer.
    Before: "6 of 6 calls answered, 4 refused" above "no answer parsed: 2 of 2 answers"."""
    with ReplayServer("refusal", answers=replay_answers(), refusal_fraction=0.5) as srv:
        g = cg.generate(None, endpoint(srv), tmp_path, limit=5, options=GEN_OPTIONS, progress=False)
    n_refused = sum(r["outcome"] == "refused" for r in records(tmp_path))
    assert 0 < n_refused < 5 and (g.n_ok, g.n_refused) == (5, n_refused)
    code, line, _ = last_line(capsys, g, "calls")
    assert code == 0 and line == generate_line(g)
    assert f": 5 of 5 calls done ({5 - n_refused} answered, {n_refused} refused, 0 filtered) for 5 queries; " in line


def test_a_score_of_a_generation_with_no_answer_parsed_names_its_zeros_and_exits_1(tmp_path, key, capsys):
    """The replay server answers `<Answer>replay-…</Answer>` to every query: `create generate`
    exits 1 naming the unparseable answers. `create score` printed "utility@0.7 0.000 …; nothing sent
    (all already judged); cost unknown" and exited 0. The utility line now says what its 0s are
    over, nothing sent is because there is no path to judge, no call costs $0, and it exits 1."""
    with ReplayServer("default") as srv:
        g = cg.generate(None, endpoint(srv), tmp_path, limit=2, options=GEN_OPTIONS, progress=False)
        s = cs.score(tmp_path, endpoint(srv), options=JUDGE_OPTIONS, embedder=one_hot, progress=False)
    assert (g.n_unparseable, s.n_to_judge, s.n_unparsed_queries) == (2, 0, 2)
    code, line, last = last_line(capsys, s, "paths to judge")
    assert ("utility@0.9 0.000 (2 queries with no path, no answer of the generation parsed: each a utility of 0); "
            "nothing sent (no path to judge); $0.0000;") in line
    assert code == 1 and last.startswith("incomplete: no path to judge: 2 of 2 queries have no parsed answer")
    # beside a query whose generation call failed: both are said, the one a re-run can finish last
    mixed = s.model_copy(update={"n_queries": 3, "n_unfinished_queries": 1})
    capsys.readouterr()
    assert _create_finish(mixed, "paths to judge") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2].startswith("incomplete: no path to judge: 2 of 3 queries have no parsed answer")
    assert err[-1].startswith("incomplete: 1 of 3 queries have no utility, their generation has a failed or missing call")


def test_a_judge_listing_another_number_of_triples_is_counted_and_named(tmp_path, key, capsys):
    """The specificity judge lists four verdicts for each three-triple path. Its verdicts are taken in order
    (the extra one left out), and each judgment is flagged; before, nothing outside judgments.jsonl said so,
    though a verdict added at the front would put every verdict on the wrong triple."""
    answers = replay_answers()
    answers["Class A"] = json.dumps([{"explanation": "e", "judgment": 50}] * 4)
    with ReplayServer("default", answers=answers) as srv:
        ep = endpoint(srv)
        cg.generate(None, ep, tmp_path, limit=2, options=GEN_OPTIONS, progress=False)
        s = cs.score(tmp_path, ep, options=JUDGE_OPTIONS, embedder=one_hot, progress=False)
    judgments = records(tmp_path / "score", "judgments.jsonl")
    flagged = [j for j in judgments if "length_mismatch_4_for_3" in j["specificity_flags"]]
    assert len(flagged) == len(judgments) == s.n_judged == s.n_judge_length_mismatch == 4
    assert json.loads((tmp_path / "score" / "summary.json").read_text())["n_judge_length_mismatch"] == 4
    code, line, _ = last_line(capsys, s, "paths to judge")
    assert code == 0 and ("4 judge answers listing another number of triples than its path has: verdicts taken in "
                          "order, those missing unscored (flag length_mismatch)") in line
