"""A ChatModel test double whose replies carry an outcome (refused, filtered, failed), for every stage.

``OutcomeModel(reply)`` answers each call with ``reply(prompt)``: a string is an ``answer``, a
:class:`Completion` is returned as it is (``refused``/``filtered``), an exception is raised
(``failed``/``error``). :func:`patch_clients` makes ``open_client`` hand it out, wherever a stage
imports it from; every call is counted in ``calls``; ``adaptations`` stands for the client's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from cresowlve_core.llm.types import Completion, Endpoint, GenParams, LLMError, Usage

Reply = Callable[[str], "str | Completion | BaseException"]

REFUSAL = "I can't help with that"


def refused() -> Completion:
    return Completion(text="", outcome="refused", refusal=REFUSAL, usage=Usage(input_tokens=3, output_tokens=2),
                      raw={"finish_reason": "stop"})


def filtered(partial: str) -> Completion:
    return Completion(text=partial, outcome="filtered", usage=Usage(input_tokens=3, output_tokens=2),
                      raw={"finish_reason": "content_filter"})


def failed(reason: str = "the provider says: server_error while generating") -> LLMError:
    exc = LLMError(f"double: gave up after 6 attempts; last error: {reason}")
    exc.outcome = "failed"  # type: ignore[attr-defined]  # what the client's LLMError carries for a failed body
    return exc


class OutcomeModel:
    def __init__(self, reply: Reply, model: str = "double-model") -> None:
        self.endpoint = Endpoint("http://double.invalid/v1", model)
        self.reply = reply
        self.calls: list[str] = []
        #: request fields the provider refused by name, as ``LLMClient.adaptations`` holds them
        self.adaptations: list[dict[str, Any]] = []

    async def complete(self, messages: list[dict[str, Any]], params: GenParams, *, prompt_version: str) -> Completion:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        self.calls.append(prompt)
        await asyncio.sleep(0)
        out = self.reply(prompt)
        if isinstance(out, BaseException):
            raise out
        if isinstance(out, Completion):
            return out
        return Completion(text=out, usage=Usage(input_tokens=3, output_tokens=2), model=self.endpoint.model)

    async def aclose(self) -> None:
        pass

    async def __aenter__(self) -> OutcomeModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


def patch_clients(monkeypatch: pytest.MonkeyPatch, model: OutcomeModel, *modules: Any) -> None:
    """``open_client`` returns ``model`` in ``cresowlve_core.runtime`` and in each of ``modules``."""
    import cresowlve_core.runtime as runtime

    def fake_open_client(*_args: Any, **_kw: Any) -> OutcomeModel:
        return model

    for mod in (runtime, *modules):
        monkeypatch.setattr(mod, "open_client", fake_open_client)
