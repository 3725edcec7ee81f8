"""Shared fakes of the CREATE tests: scripted answers and judge replies, an injected client."""

from __future__ import annotations

import json

import numpy as np

from cresowlve_core.create.queries import load_queries
from cresowlve_core.llm.types import Completion, Endpoint, LLMError

Q = load_queries(limit=2)  # Morton Gould -> Benny Carter discography; Max von Laue -> chemist
EP = Endpoint("http://fake.invalid/v1", "fake-model", api_key_env="FAKE_KEY")


def one_hot(texts: list[str]) -> np.ndarray:
    """An embedder under which every distinct path text is at distance 1 from every other."""
    vocab = sorted(set(texts))
    v = np.zeros((len(texts), max(1, len(vocab))), dtype=np.float32)
    for i, t in enumerate(texts):
        v[i, vocab.index(t)] = 1.0
    return v


def answer_for(query_text: str, tag: str = "") -> str:
    """Two valid paths and one broken one for whichever query the prompt is about."""
    q = next(q for q in load_queries() if q.query in query_text)
    a, b, r = q.entity_a, q.entity_b, q.rel_b
    paths = {
        "1": [[a, "collaborated with", f"Mid{tag}"], [f"Mid{tag}", r, b]],
        "2": [[a, "award received", "Prize"], ["Prize", "winner", f"Other{tag}"], [f"Other{tag}", r, b]],
        "3": [[a, "knows", "Nobody"], ["Somebody", r, b]],
    }
    return "<answer>" + json.dumps(paths) + "</answer>"


def judge_reply(prompt: str) -> str:
    """Specificity: class size 50 (score 4) per triple; factuality: every triple holds."""
    path = json.loads(prompt.rsplit("Path: ", 1)[1])
    if "Class A" in prompt:
        return json.dumps([{"explanation": "e", "judgment": 50} for _ in path])
    return json.dumps({"explanation": "e", "judgments": ["not hallucinated"] * len(path)})


def server_reply(req) -> str:
    """A FakeServer answer function for both generation and judge prompts."""
    if "Path: " in req.prompt:
        return judge_reply(req.prompt)
    if "Query: " in req.prompt:
        return answer_for(req.prompt)
    return "?"


class FakeClient:
    """An injected client: answers generation and judge prompts; ``fail_first`` query ids fail
    their first generation call with an ``LLMError`` (a per-unit error the runtime records)."""

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
                raise LLMError("boom")
            tag = f"r{(len(messages) - 1) // 2}s{params.seed}"
            return Completion(text=answer_for(first, tag), cost=0.01)
        return Completion(text=judge_reply(messages[-1]["content"]), cost=0.001)


def records(path, name: str = "responses.jsonl") -> list[dict]:
    return [json.loads(x) for x in (path / name).read_text().splitlines()]
