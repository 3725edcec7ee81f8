"""A test double implementing the ChatModel protocol runs through map_with_resume: the runtime
depends on the protocol, not on the OpenAI client (the seam a native-API client would use)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cresowlve_core.llm.types import (
    ChatModel,
    Completion,
    Endpoint,
    GenParams,
    LLMError,
    LLMFatalError,
    Usage,
)
from cresowlve_core.runtime import RunDir, map_with_resume


class DoubleModel:
    """Answers ``upper(prompt)``; ``fail`` prompts raise a per-item error, ``fatal`` stops."""

    def __init__(self, fail: set[str] = frozenset(), fatal: set[str] = frozenset()) -> None:
        self.endpoint = Endpoint("double://local", "double-model", wire="double")
        self.fail, self.fatal = set(fail), set(fatal)
        self.calls: list[str] = []
        self.closed = False

    async def complete(self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> Completion:
        prompt = messages[-1]["content"]
        self.calls.append(prompt)
        await asyncio.sleep(0.001)
        if prompt in self.fatal:
            raise LLMFatalError("double: wrong key")
        if prompt in self.fail:
            raise LLMError("double: context too long")
        return Completion(text=prompt.upper(), usage=Usage(input_tokens=1, output_tokens=1), model="double-model")

    async def aclose(self) -> None:
        self.closed = True


def stage(model: ChatModel, run: RunDir, units: list[str]) -> Any:
    """A minimal stage written against the protocol only."""

    async def call(unit: str, previous: dict[str, Any] | None) -> dict[str, Any]:
        c = await model.complete([{"role": "user", "content": unit}], GenParams(), prompt_version="double@1")
        return {"key": unit, "status": "ok", "answer": c.text}

    async def go() -> Any:
        try:
            return await map_with_resume(run, "responses.jsonl", units, lambda u: u, call, progress=False)
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_double_is_a_chat_model_and_runs_with_resume(tmp_path: Path) -> None:
    units = ["a", "b", "c", "d"]
    model = DoubleModel(fail={"c"})
    assert isinstance(model, ChatModel)
    first = stage(model, RunDir(tmp_path / "run"), units)
    assert first.n_done == 3 and first.n_error == 1 and first.stopped is None and model.closed
    assert first.records["a"]["answer"] == "A" and "context too long" in first.records["c"]["error"]

    again = DoubleModel()  # the problem is gone: only the errored unit is asked again
    second = stage(again, RunDir(tmp_path / "run"), units)
    assert again.calls == ["c"] and second.n_done == 4 and second.n_skipped == 3


def test_a_fatal_error_from_the_double_stops_the_run(tmp_path: Path) -> None:
    model = DoubleModel(fatal={"b"})
    res = stage(model, RunDir(tmp_path / "run"), ["a", "b"] + [f"x{i}" for i in range(50)])
    assert isinstance(res.stop_error, LLMFatalError) and res.stopped and "wrong key" in res.stopped
    assert len(model.calls) < 52
