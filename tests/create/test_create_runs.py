"""CREATE run directories: generate (original / iterate / resample), resume, score, end to end over HTTP."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cresowlve_core.create import runs
from cresowlve_core.create.queries import load_queries
from cresowlve_core.create.utility import creative_utility
from cresowlve_core.llm.types import Completion, Endpoint

Q = load_queries(limit=2)  # Morton Gould → Benny Carter discography; Max von Laue → chemist


def one_hot(texts: list[str]) -> np.ndarray:
    vocab = sorted(set(texts))
    v = np.zeros((len(texts), max(1, len(vocab))), dtype=np.float32)
    for i, t in enumerate(texts):
        v[i, vocab.index(t)] = 1.0
    return v


def answer_for(query_text: str, tag: str = "") -> str:
    """Two valid paths and one broken one for whichever query the prompt is about."""
    q = next(q for q in Q if q.query in query_text)
    a, b, r = q.entity_a, q.entity_b, q.rel_b
    paths = {
        "1": [[a, "collaborated with", f"Mid{tag}"], [f"Mid{tag}", r, b]],
        "2": [[a, "award received", "Prize"], ["Prize", "winner", f"Other{tag}"], [f"Other{tag}", r, b]],
        "3": [[a, "knows", "Nobody"], ["Somebody", r, b]],
    }
    return "<answer>" + json.dumps(paths) + "</answer>"


def judge_reply(prompt: str) -> str:
    path = json.loads(prompt.rsplit("Path: ", 1)[1])
    if "Class A" in prompt:  # specificity: 50 -> 4 for every triple
        return json.dumps([{"explanation": "e", "judgment": 50} for _ in path])
    return json.dumps({"explanation": "e", "judgments": ["not hallucinated"] * len(path)})


class FakeClient:
    """An injected client: answers generation and judge prompts, can fail chosen calls."""

    def __init__(self, fail_first: set[str] | None = None):
        self.calls: list[tuple[list[dict], object, str]] = []
        self.fail_first = set(fail_first or ())

    async def complete(self, messages, params, *, prompt_version):
        self.calls.append((messages, params, prompt_version))
        first = messages[0]["content"]
        if prompt_version.startswith(("create_generate", "create_iterate")):
            q = next(q for q in Q if q.query in first)
            if q.id in self.fail_first:
                self.fail_first.discard(q.id)
                raise RuntimeError("boom")
            tag = f"r{(len(messages) - 1) // 2}s{params.seed}"
            return Completion(text=answer_for(first, tag), cost=0.01)
        return Completion(text=judge_reply(messages[-1]["content"]), cost=0.001)


EP = Endpoint("http://fake.invalid/v1", "fake-model", api_key_env="FAKE_KEY")


def _records(run_dir, name="responses.jsonl"):
    return [json.loads(x) for x in (run_dir / name).read_text().splitlines()]


def test_original_manifest_and_records(tmp_path):
    client = FakeClient()
    summary = runs.generate(None, EP, tmp_path, limit=2, seed=7, client=client, progress=False)
    assert summary["n_ok"] == 2 and summary["n_paths"] == 6 and summary["generation_cost"] == pytest.approx(0.02)
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["kind"] == "create" and m["model"] == "fake-model" and m["base_url"] == EP.base_url
    assert m["api_key_env"] == "FAKE_KEY" and m["seed"] == 7 and m["variation"] == "original"
    assert "create_generate@1" in m["prompts"] and m["query_ids"] == [q.id for q in Q]
    assert m["started_at"] and m["finished_at"] and "git_sha" in m
    recs = _records(tmp_path)
    assert {r["query_id"] for r in recs} == {q.id for q in Q}
    assert all(r["status"] == "ok" and r["n_paths"] == 3 and r["seed"] == 7 for r in recs)
    params = client.calls[0][1]
    assert params.temperature == 0.7 and params.max_tokens == 4096


def test_resume_resends_only_missing_or_errored(tmp_path):
    client = FakeClient(fail_first={Q[1].id})
    s1 = runs.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    assert s1["n_ok"] == 1 and s1["n_error"] == 1
    s2 = runs.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    assert s2["n_ok"] == 2 and s2["n_error"] == 0
    assert len(client.calls) == 3  # 2 first time, only the errored one again
    runs.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    assert len(client.calls) == 3  # nothing left to do
    with pytest.raises(ValueError, match="different CREATE run"):
        runs.generate(None, EP, tmp_path, limit=2, seed=1, client=client, progress=False)


def test_iterate_continues_the_conversation(tmp_path):
    client = FakeClient()
    runs.generate(None, EP, tmp_path, variation="iterate", n_rounds=3, limit=1, client=client, progress=False)
    msgs = [c[0] for c in client.calls]
    assert [len(m) for m in msgs] == [1, 3, 5]
    assert [m["role"] for m in msgs[2]] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[2][1]["content"] == answer_for(Q[0].query, "r0s0")
    assert msgs[2][3]["content"] == answer_for(Q[0].query, "r1s0")
    assert "Give me more/different associations" in msgs[2][4]["content"]
    assert [c[2] for c in client.calls] == ["create_generate@1", "create_iterate@1", "create_iterate@1"]
    (g,) = runs.load_generations(tmp_path)
    # 3 rounds x 3 paths, minus the broken path repeated verbatim in rounds 2 and 3
    assert len(g.paths) == 7 and g.flags.count("duplicate_path_dropped") == 2


def test_resample_uses_distinct_seeds_and_merges(tmp_path):
    client = FakeClient()
    runs.generate(None, EP, tmp_path, variation="resample", n_samples=3, limit=1, seed=10, client=client, progress=False)
    assert sorted(c[1].seed for c in client.calls) == [10, 11, 12]
    recs = _records(tmp_path)
    assert sorted((r["sample"], r["round"]) for r in recs) == [(0, 0), (1, 0), (2, 0)]
    (g,) = runs.load_generations(tmp_path)
    assert len(g.paths) == 7 and g.n_calls_ok == 3


def test_score_judges_valid_paths_and_computes_utility(tmp_path):
    client = FakeClient()
    runs.generate(None, EP, tmp_path, limit=2, client=client, progress=False)
    n_gen = len(client.calls)
    summary = runs.score(tmp_path, EP, client=client, embedder=one_hot, progress=False)
    judge_calls = client.calls[n_gen:]
    assert len(judge_calls) == 2 * 2 * 2  # 2 queries x 2 valid paths x 2 judges
    assert all(c[1].temperature == 0.0 for c in judge_calls)
    assert summary["n_paths"] == 6 and summary["n_valid"] == 4 and summary["n_factual"] == 4
    assert summary["judge_cost"] == pytest.approx(0.008) and summary["generation_cost"] == pytest.approx(0.02)
    judgments = _records(tmp_path, "judgments.jsonl")
    assert len(judgments) == 4 and all(j["specificity"] == [4.0] * len(j["path"]) for j in judgments)
    rows = _records(tmp_path, "scores.jsonl")
    # per query: strengths 4 and 4, one-hot distances 1 -> 4 + 4 (second path undiscounted)
    assert [r["utility"]["0.9"] for r in rows] == pytest.approx([8.0, 8.0])
    sets = runs.scored_sets_from_run(tmp_path)
    s = sets[0]
    assert s.validity == [1, 1, 0] and s.config == "fake-model__original"
    assert creative_utility(s.paths, s.specificity, s.factuality, s.validity, embedder=one_hot) == pytest.approx(8.0)
    # re-scoring reuses the recorded judgments
    runs.score(tmp_path, EP, client=client, embedder=one_hot, progress=False)
    assert len(client.calls) == n_gen + 8


def test_generate_and_score_end_to_end_over_http(tmp_path, tmp_cache):
    fakeserver = pytest.importorskip("fakeserver")

    def reply(req):
        prompt = req.prompt
        if "Path: " in prompt:
            return judge_reply(prompt)
        if "Query: " in prompt:
            return "Sure! " + answer_for(prompt)
        return "?"

    with fakeserver.FakeServer(answers=reply) as srv:
        ep = Endpoint(srv.base_url, "fake-model")
        cache = tmp_path / "responses.sqlite"
        sets, summaries = runs.generate_and_score(ep, tmp_path / "run", limit=2, embedder=one_hot, cache_path=cache)
        assert summaries["generate"]["n_ok"] == 2 and summaries["score"]["n_valid"] == 4
        assert [round(u, 6) for u in summaries["score"]["mean_utility"].values()] == [8.0, 8.0]
        assert srv.total == 2 + 8
        # the same generation in a new run directory is served from the response cache
        runs.generate(None, ep, tmp_path / "run2", limit=2, max_tokens=1024, concurrency=4, cache_path=cache, progress=False)
        assert srv.total == 2 + 8
    assert len(sets) == 2 and all(sum(s.validity) == 2 for s in sets)
