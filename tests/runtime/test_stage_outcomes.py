"""Every stage records a refused or filtered reply with its outcome, reads no content from it,
counts it, and does not ask again on resume; a failed reply stays an error, asked again.

Each stage runs against the ChatModel double of tests/outcome_double.py: unit 0 is answered,
unit 1 refused, unit 2 filtered (its partial text would parse as content), unit 3 fails.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from outcome_double import REFUSAL, OutcomeModel, failed, filtered, refused

from cresowlve_core.runtime import ClientOptions, RunDir

OPTS = ClientOptions(cache=False, max_attempts=1)


def by_unit(content: str, answer: str, pattern: str = r"Puzzle number (\d)"):
    """A reply function: unit ``n`` (read from the prompt) answered, refused, filtered, failed."""
    def reply(prompt: str, fail: bool = True) -> Any:
        n = int(re.search(pattern, prompt).group(1))
        return {0: answer, 1: refused(), 2: filtered(content)}.get(n) or (failed() if fail else answer)
    return reply


#: the adaptation LLMClient keeps after Gemini's recorded 400 (tests/replay/fixtures/gemini/err_400_unknown_field_seed_list.json)
SEED_DROPPED = {"field": "seed", "action": "drop", "to": None,
                "reason": 'Invalid JSON payload received. Unknown name "seed": Cannot find field.'}


def twice(run_stage, reply) -> tuple[Any, Any, OutcomeModel]:
    """Run a stage, then again with the failure gone: returns both results and the second model.
    The first run's provider refused ``seed`` (its client dropped it); the second's did not."""
    model = OutcomeModel(reply)
    model.adaptations = [SEED_DROPPED]
    first = asyncio.run(run_stage(model))
    again = OutcomeModel(lambda p: reply(p, fail=False))
    return first, asyncio.run(run_stage(again)), again


def check(records: dict, keys: list, content_field: str, summary: dict, raw_field: str = "raw") -> None:
    r_ok, r_ref, r_fil, r_err = (records[k] for k in keys)
    assert r_ok["outcome"] == "answer" and r_ok[content_field] is not None
    assert (r_ref["status"], r_ref["outcome"], r_ref["refusal"]) == ("ok", "refused", REFUSAL)
    assert (r_fil["status"], r_fil["outcome"]) == ("ok", "filtered") and r_fil[raw_field]  # partial text kept
    assert r_ref[content_field] is None and r_fil[content_field] is None  # nothing read from them
    assert (r_err["status"], r_err["outcome"]) == ("error", "failed") and "server_error" in r_err["error"]
    assert (summary["n_refused"], summary["n_filtered"]) == (1, 1)


def check_manifest(run_dir) -> None:
    """The run's manifest says what its requests carried besides the messages (``sent``: the
    double-model profile sends the seed and the budget) and, after the resume, still that the
    first run's provider refused the seed (``adapted``): no manifest describes requests never sent."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["sent"]["seed"] == manifest["seed"] and "max_tokens" in manifest["sent"], manifest["sent"]
    assert manifest["adapted"] == [SEED_DROPPED]


def test_error_labels(tmp_path):
    from cresowlve_core.error_analysis.label import alabel
    from cresowlve_core.error_analysis.wrong import WrongAnswer

    units = [WrongAnswer(key=f"k{i}", run_id="r", config="c", model="m", lang="en", id=f"q{i}", basis="em_strict",
                         question=f"Puzzle number {i}: who?", answer="A", explanation=None, other_answers=None,
                         prediction="B", reasoning="") for i in range(4)]
    label = "RATIONALE: r\nCATEGORY: Overthinking"

    async def run(model: OutcomeModel):
        return await alabel(units, RunDir(tmp_path / "labels"), model, OPTS, progress=False)  # type: ignore[arg-type]

    first, second, again = twice(run, by_unit(label, label))
    summary = json.loads((tmp_path / "labels" / "summary.json").read_text())
    check(first.records, ["k0", "k1", "k2", "k3"], "label", first.step_counts("label"))
    assert summary["n_refused"] == 1 and summary["n_unlabelled"] == 0  # withheld, not "unlabelled"
    assert len(again.calls) == 1 and second.n_done == 4  # only the failed unit is asked again
    check_manifest(tmp_path / "labels")


def test_quiz_answers(tmp_path):
    from cresowlve_core.contamination.quiz import QuizUnit, aquiz

    units = [QuizUnit(quiz="bcq", set="s", lang="en", id=f"q{i}", repeat=0,
                      options=(f"Puzzle number {i}", "b", "c", "d"), correct="A") for i in range(4)]

    async def run(model: OutcomeModel):
        return await aquiz("bcq", units, RunDir(tmp_path / "quiz"), model, OPTS, progress=False)  # type: ignore[arg-type]

    first, second, again = twice(run, by_unit("A", "A"))
    keys = [list(u.key) for u in units]
    recs = {tuple(k): v for k, v in first.records.items()}
    check(recs, [tuple(k) for k in keys], "choice", first.step_counts("bcq"))
    # a refused or filtered quiz answer picks no option and is not correct (the filtered text said "A")
    assert recs[tuple(keys[2])]["is_correct"] is False and recs[tuple(keys[1])]["is_correct"] is False
    assert len(again.calls) == 1
    check_manifest(tmp_path / "quiz")


def test_completion_test(tmp_path):
    from cresowlve_core.contamination.completion import CompletionUnit, Cut, acomplete

    units = [CompletionUnit(set="s", lang="en", id=f"q{i}", mode="general",
                            cut=Cut(prefix=f"Puzzle number {i} starts", suffix="and ends here", position=4))
             for i in range(4)]

    async def run(model: OutcomeModel):
        return await acomplete(units, RunDir(tmp_path / "completion"), model, OPTS, progress=False)  # type: ignore[arg-type]

    first, second, again = twice(run, by_unit("and ends here", "and ends here"))
    recs = {tuple(k): v for k, v in first.records.items()}
    check(recs, [u.key for u in units], "continuation", first.step_counts("completion"))
    filt = recs[units[2].key]
    assert filt["rouge_l"] == 0 and not filt["prefix_match"]  # the filtered suffix is not counted as recalled
    assert len(again.calls) == 1
    check_manifest(tmp_path / "completion")


def test_perturbations(tmp_path):
    from cresowlve_core.contamination.perturb import QuizItem, aperturb

    units = [QuizItem(lang="en", id=f"q{i}", question=f"Puzzle number {i}: who wrote the famous old book?")
             for i in range(4)]
    rewrites = "\n".join(f"{k}. Puzzle number X: who penned the {w} old book?" for k, w in
                         ((1, "famous"), (2, "celebrated"), (3, "renowned")))

    async def run(model: OutcomeModel):
        return await aperturb(units, RunDir(tmp_path / "perturb"), model, OPTS, progress=False)  # type: ignore[arg-type]

    first, second, again = twice(run, by_unit(rewrites, rewrites))
    recs = {tuple(k): v for k, v in first.records.items()}
    check(recs, [("en", f"q{i}") for i in range(4)], "perturbations", first.step_counts("perturb"))
    assert recs[("en", "q1")]["problems"] and recs[("en", "q1")]["rejections"][0]["kind"] == "refused"
    assert len(again.calls) == 1
    check_manifest(tmp_path / "perturb")


def test_create_generation(tmp_path):
    from cresowlve_core.create.generate import agenerate, load_generations
    from cresowlve_core.create.queries import CreateQuery
    from cresowlve_core.llm.types import Endpoint

    queries = [CreateQuery(id=f"q{i}", query=f"Puzzle number {i}: connect A and B", entity_a=f"A{i}",
                           entity_b="B", rel_b="r") for i in range(4)]
    paths = '{"1": [["A", "r", "B"]]}'
    qfile = tmp_path / "queries.jsonl"
    qfile.write_text("".join(q.model_dump_json() + "\n" for q in queries), encoding="utf-8")

    async def run(model: OutcomeModel):
        return await agenerate(queries, model, tmp_path / "create", Endpoint("http://double.invalid/v1", "double-model"),
                               n_samples=1, n_rounds=1, options=OPTS, queries_path=qfile, progress=False)

    first, second, again = twice(run, by_unit(paths, paths))
    assert (first.n_ok, first.n_refused, first.n_filtered, first.n_error) == (3, 1, 1, 1)
    assert len(again.calls) == 1 and second.n_ok == 4
    gens = {g.query.id: g for g in load_generations(tmp_path / "create")}
    assert gens["q2"].paths == [] and "filtered" in gens["q2"].flags  # the filtered text is not read as paths
    assert gens["q1"].paths == [] and "refused" in gens["q1"].flags and gens["q0"].paths
    check_manifest(tmp_path / "create")


def test_construction_filter_step(tmp_path):
    from cresowlve_core.construction.llm_steps import StepClient, StepContext, filter_step
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.items import ItemView

    cands = [Candidate(id=f"chgk_{i}", ru=ItemView(question=f"Puzzle number {i}: кто?", answer="Ответ"))
             for i in range(4)]
    no = "REASON: self-contained\nANSWER: NO"

    async def run(model: OutcomeModel):
        ctx = StepContext(tmp_path / "build", {"needs_material": StepClient(model, "double-model", None, None, False)},
                          options=OPTS, progress=False)
        return await filter_step("needs_material", cands, ctx)

    first, second, again = twice(run, by_unit("REASON: a handout\nANSWER: YES", no))
    # the filtered reply said YES (remove): it is not read, the item is kept and flagged with its outcome
    assert [c.id for c in first.removed] == [] and len(first.kept) == 4
    flags = {c.id: c.review_flags for c in first.kept}
    assert "needs_material:refused" in flags["chgk_1"] and "needs_material:filtered" in flags["chgk_2"]
    assert "needs_material:llm_error" in flags["chgk_3"] and first.counts["refused"] == 1
    summary = json.loads((tmp_path / "build" / "steps" / "needs_material" / "summary.json").read_text())
    # the resumed step's summary: the refusal and the filter still counted, the failure answered now
    assert (summary["n_refused"], summary["n_filtered"], summary["n_error"]) == (1, 1, 0)
    assert len(again.calls) == 1 and second.counts.get("llm_error", 0) == 0
    check_manifest(tmp_path / "build" / "steps" / "needs_material")


def test_create_judge_refusal_leaves_its_triples_unscored():
    from cresowlve_core.create.paths import Validity
    from cresowlve_core.create.score import JudgeUnit, judge_path
    from cresowlve_core.llm.types import GenParams

    def reply(prompt: str) -> Any:
        if "fact-checking" in prompt:
            return refused()
        return '[{"explanation": "few", "judgment": 3}]'

    model = OutcomeModel(reply)
    unit = JudgeUnit(query_id="q", index=0, path=(("A", "r", "B"),), validity=Validity(True))
    rec = asyncio.run(judge_path(model, unit, GenParams()))
    assert len(model.calls) == 2  # one call per judge, the refusal not retried
    assert rec["factuality_outcome"] == "refused" and "refused" in rec["factuality_flags"]
    assert rec["factuality_raw"] == REFUSAL and rec["factuality_verdicts"] == [None]  # unscored, not a verdict
    assert rec["specificity_outcome"] == "answer" and rec["specificity_sizes"] == [3.0]
