"""CREATE generation on the stage runtime: original / iterate / resample, manifest, resume."""

from __future__ import annotations

import json

import pytest
from create_fakes import EP, FakeClient, Q, answer_for, records

from cresowlve_core.create import generate as cg
from cresowlve_core.runtime import ClientOptions, ResumeError


def test_original_manifest_and_records(tmp_path):
    client = FakeClient()
    s = cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False,
                    options=cg.GENERATE_OPTIONS.model_copy(update={"seed": 7}))
    assert (s.n_ok, s.n_error, s.n_missing, s.n_paths) == (2, 0, 0, 6)
    assert s.generation_cost.usd == pytest.approx(0.02) and s.generation_cost.n_unknown == 0
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["kind"] == "create_generate" and m["model"] == "fake-model" and m["base_url"] == EP.base_url
    assert m["api_key_env"] == "FAKE_KEY" and m["seed"] == 7 and m["identity"]["variation"] == "original"
    assert m["prompts"] == ["create_generate@1"] and m["query_ids"] == [q.id for q in Q] and m["items"] == "shipped"
    assert m["started_at"] and m["finished_at"] and "git_sha" in m and m["stopped"] is None
    assert json.loads((tmp_path / "summary.json").read_text())["n_ok"] == 2
    recs = records(tmp_path)
    assert {r["query_id"] for r in recs} == {q.id for q in Q}
    assert all(r["status"] == "ok" and r["n_paths"] == 3 and r["seed"] == 7 and r["prompt"] == "create_generate@1"
               for r in recs)
    params = client.calls[0][1]
    assert params.temperature == 0.7 and params.max_tokens == 4096


def test_resume_resends_only_missing_or_errored(tmp_path):
    client = FakeClient(fail_first={Q[1].id})
    s1 = cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    assert s1.n_ok == 1 and s1.n_error == 1
    (err,) = [r for r in records(tmp_path) if r["status"] == "error"]
    assert err["query_id"] == Q[1].id and err["error"] == "LLMError: boom" and err["paths"] == []
    s2 = cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    assert s2.n_ok == 2 and s2.n_error == 0
    assert len(client.calls) == 3  # 2 the first time, only the errored one again
    cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    assert len(client.calls) == 3  # nothing left to do
    with pytest.raises(ResumeError, match="identity"):
        cg.generate(None, EP, tmp_path, limit=2, client=client, progress=False,
                    options=ClientOptions(temperature=0.7, seed=1))
    with pytest.raises(ResumeError, match="model"):
        cg.generate(None, EP.__class__(EP.base_url, "other-model"), tmp_path, limit=2, client=client, progress=False)


def test_iterate_continues_the_conversation(tmp_path):
    client = FakeClient()
    s = cg.generate(None, EP, tmp_path, variation="iterate", n_rounds=3, limit=1, client=client, progress=False)
    assert s.n_calls == 3 and s.n_ok == 3
    msgs = [c[0] for c in client.calls]
    assert [len(m) for m in msgs] == [1, 3, 5]
    assert [m["role"] for m in msgs[2]] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[2][1]["content"] == answer_for(Q[0].query, "r0s0")
    assert msgs[2][3]["content"] == answer_for(Q[0].query, "r1s0")
    assert "Give me more/different associations" in msgs[2][4]["content"]
    assert [c[2] for c in client.calls] == ["create_generate@1", "create_iterate@1", "create_iterate@1"]
    (g,) = cg.load_generations(tmp_path)
    # 3 rounds x 3 paths, minus the broken path repeated verbatim in rounds 2 and 3
    assert len(g.paths) == 7 and g.flags.count("duplicate_path_dropped") == 2


def test_iterate_waits_for_a_failed_round_and_resumes_it(tmp_path):
    client = FakeClient(fail_first={Q[0].id})
    s = cg.generate(None, EP, tmp_path, variation="iterate", n_rounds=2, limit=2, client=client, progress=False)
    # query 0 failed round 1, so its round 2 was not sent; query 1 did both rounds
    assert (s.n_ok, s.n_error, s.n_missing) == (2, 1, 1)
    s = cg.generate(None, EP, tmp_path, variation="iterate", n_rounds=2, limit=2, client=client, progress=False)
    assert (s.n_ok, s.n_error, s.n_missing) == (4, 0, 0) and len(client.calls) == 3 + 2


def test_iterate_after_a_refused_round_is_done_not_left_to_retry(tmp_path, capsys):
    """A conversation ends at a refused round (final, never asked again), so its later rounds are
    never asked: they are counted and named as such, not left "not run" with an exit 1 and a "run
    again" that would never send them."""
    from outcome_double import OutcomeModel, refused

    from cresowlve_core.cli.create import _create_finish

    def reply(prompt: str):
        return refused() if Q[0].query in prompt else answer_for(prompt)

    for _ in range(2):  # the second run sends nothing and says the same
        model = OutcomeModel(reply)
        s = cg.generate(None, EP, tmp_path, variation="iterate", n_rounds=2, limit=2, client=model, progress=False)
        code = _create_finish(s, "calls")
        out = capsys.readouterr()
        assert (code, out.err) == (0, "")
        assert (s.n_calls, s.n_ok, s.n_refused, s.n_error, s.n_missing, s.n_not_asked) == (4, 3, 1, 0, 0, 1)
        assert "3 of 4 calls done (2 answered, 1 refused, 0 filtered; 1 later round not asked after them) for" in out.out
    assert model.calls == []
    (g0, g1) = cg.load_generations(tmp_path)
    assert g0.paths == [] and g0.flags == ["refused"] and len(g1.paths) == 3  # round 2 repeats round 1


def test_resample_uses_distinct_seeds_and_merges(tmp_path):
    client = FakeClient()
    cg.generate(None, EP, tmp_path, variation="resample", n_samples=3, limit=1, client=client, progress=False,
                options=ClientOptions(temperature=0.7, seed=10))
    assert sorted(c[1].seed for c in client.calls) == [10, 11, 12]
    assert sorted((r["sample"], r["round"]) for r in records(tmp_path)) == [(0, 0), (1, 0), (2, 0)]
    (g,) = cg.load_generations(tmp_path)
    assert len(g.paths) == 7 and g.n_calls_ok == 3


def test_bad_variation_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="variation must be one of"):
        cg.generate(None, EP, tmp_path, variation="twice", limit=1, client=FakeClient(), progress=False)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="not a CREATE run directory"):
        cg.load_generations(tmp_path / "nothing")


def test_a_partly_unknown_cost_is_a_lower_bound_with_its_count() -> None:
    from cresowlve_core.create.records import CostTotal, _cost

    assert _cost(CostTotal(usd=None, n_calls=3, n_unknown=3)) == "cost unknown"
    assert _cost(CostTotal(usd=0.0123, n_calls=6)) == "$0.0123"
    assert _cost(CostTotal(usd=0.0003, n_calls=6, n_unknown=4)) == "≥ $0.0003 (4 of 6 unknown)"


def test_an_effort_the_provider_refuses_stops_generation_before_any_path_set_is_recorded(tmp_path):
    """The client would drop the refused field and the model would answer at its default effort, recorded
    under the run's effort. Before: 2 path sets at the provider's default in a run labelled ``none``."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))
    from test_eval_providers import _EffortRefusingServer

    from cresowlve_core.llm.types import Endpoint

    options = cg.GENERATE_OPTIONS.model_copy(update={"cache": False, "concurrency": 1})
    with _EffortRefusingServer() as srv:
        ep = Endpoint(srv.base_url, "kimi-for-coding", provider="generic")
        s = cg.generate(None, ep, tmp_path / "run", limit=2, effort="none", options=options, progress=False)
        assert s.stopped and "refused the effort 'none' (reasoning_effort: Unsupported value" in s.stopped
        assert "no path set is recorded" in s.stopped and srv.efforts == ["none", None]
        assert not (tmp_path / "run" / "responses.jsonl").exists()
        sent = len(srv.efforts)
        again = cg.generate(None, ep, tmp_path / "run", limit=2, effort="none", options=options, progress=False)
        assert again.stopped and "refused the effort 'none'" in again.stopped and len(srv.efforts) == sent


def test_summary_counts_distinct_paths_and_names_the_duplicates_scoring_drops(tmp_path, capsys):
    """A path listed twice in one answer, once more in another case, and again in a later round
    is one path of the set U that scoring judges. Before: "8 paths" for 3 distinct ones."""
    from cresowlve_core.cli.create import _create_finish
    from cresowlve_core.llm.types import Completion

    class Repeating:
        async def complete(self, messages, params, *, prompt_version):
            q = next(q for q in Q if q.query in messages[0]["content"])
            same = [[q.entity_a, "collaborated with", "Mid"], ["Mid", q.rel_b, q.entity_b]]
            shouted = [[q.entity_a.upper(), "collaborated with", " MID "], ["Mid", q.rel_b, q.entity_b]]
            other = [[q.entity_a, f"knows{len(messages)}", "X"], ["X", q.rel_b, q.entity_b]]
            return Completion(text="<answer>" + json.dumps({"1": same, "2": same, "3": shouted, "4": other}) + "</answer>")

    s = cg.generate(None, EP, tmp_path, variation="iterate", n_rounds=2, limit=1, client=Repeating(), progress=False)
    assert (s.n_paths, s.n_duplicate_paths) == (3, 5)  # same + other in round 1, another other in round 2
    (g,) = cg.load_generations(tmp_path)
    assert len(g.paths) == s.n_paths and g.flags.count("duplicate_path_dropped") == s.n_duplicate_paths
    assert json.loads((tmp_path / "summary.json").read_text())["n_duplicate_paths"] == 5
    assert _create_finish(s, "calls") == 0
    assert "; 3 distinct paths (and 5 duplicates dropped, as scoring does), 0 unparseable" in capsys.readouterr().out
