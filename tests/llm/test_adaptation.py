"""Adapting to a field the provider refuses by name: the recorded OpenAI 400s for ``temperature``
and ``max_tokens`` on a reasoning model are answered by dropping or renaming exactly that field and
trying once more; the client keeps the adaptation for every later call, warns once, and a stage
records it in the manifest (``adapted``, not part of the resume identity). A value that cannot be
adapted stays fatal, naming the flag; vLLM's output budget over the context is fatal at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_outcomes import Scripted, chat, message, responses, run

from cresowlve_core.llm import openai_wire as wire
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.effort import refused_effort
from cresowlve_core.llm.types import Completion, Endpoint, GenParams, LLMFatalError
from cresowlve_core.runtime.manifest import check_resumable, new_manifest, record_adaptations

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures"


def recorded(name: str) -> tuple[int, bytes]:
    fx = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    text = fx["body_text"] if "body_text" in fx else json.dumps(fx["body"])
    return int(fx["status"]), text.encode()


def refusing(field: str, fixture: str) -> Scripted:
    """A server answering ``fixture`` (a recorded 400) while the request holds ``field``."""
    status, body = recorded(fixture)
    return Scripted(lambda n, b: (status, {}, body) if field in b else (200, {}, chat({"content": "Paris"})))


def test_a_refused_temperature_is_dropped_once_and_for_every_later_call(caplog: pytest.LogCaptureFixture) -> None:
    script = refusing("temperature", "openai/err_400_temperature_unsupported_gpt5")
    with caplog.at_level("WARNING"):
        out = run(script, n=4, max_attempts=1)  # the retry without the field is not an attempt
    assert all(isinstance(c, Completion) and c.text == "Paris" for c in out)
    assert len(script.bodies) == 5  # 2 for the first call, 1 for each later one
    assert "temperature" in script.bodies[0] and all("temperature" not in b for b in script.bodies[1:])
    warned = [r.getMessage() for r in caplog.records if "refused 'temperature'" in r.getMessage()]
    assert len(warned) == 1 and "Unsupported value: 'temperature' does not support 0" in warned[0]


def test_adaptations_are_kept_on_the_client() -> None:
    script = refusing("temperature", "openai/err_400_temperature_unsupported_gpt5")
    client = LLMClient(Endpoint("http://127.0.0.1:9/v1", "my-gpt5-deployment"), transport_factory=script.factory)

    async def go() -> None:
        async with client:
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"q{i}"}], GenParams(),
                                                   prompt_version="v1") for i in range(3)))

    asyncio.run(go())
    assert [(a["field"], a["action"], a["to"]) for a in client.adaptations] == [("temperature", "drop", None)]
    assert client.adaptations[0]["reason"].startswith("Unsupported value: 'temperature'")


def test_a_refused_max_tokens_is_renamed_to_max_completion_tokens() -> None:
    script = refusing("max_tokens", "openai/err_400_max_tokens_unsupported_gpt5")
    (c,) = run(script, params=GenParams(max_tokens=321))
    assert isinstance(c, Completion) and c.text == "Paris"
    assert script.bodies[0]["max_tokens"] == 321
    assert "max_tokens" not in script.bodies[1] and script.bodies[1]["max_completion_tokens"] == 321


def test_a_refused_reasoning_summary_is_dropped_and_the_effort_kept() -> None:
    """OpenAI refuses reasoning summaries to an organization it has not verified: the answer at the run's effort
    comes without them (the manifest records the drop); the effort is never what is dropped."""
    status, body = recorded("openai/err_400_reasoning_summary_unverified_org")
    answer = responses("completed", [message({"type": "output_text", "text": "Paris"})])
    script = Scripted(lambda n, b: (status, {}, body) if "summary" in b["reasoning"] else (200, {}, answer))
    client = LLMClient(Endpoint("http://127.0.0.1:9/v1", "gpt-5", provider="openai"), transport_factory=script.factory)

    async def go() -> Completion:
        async with client:
            return await client.complete([{"role": "user", "content": "q"}], GenParams(effort="low"), prompt_version="v1")

    c = asyncio.run(go())
    assert c.outcome == "answer" and len(script.bodies) == 2
    assert script.bodies[0]["reasoning"] == {"effort": "low", "summary": "auto"}
    assert script.bodies[1]["reasoning"] == {"effort": "low"}
    assert [(a["field"], a["action"]) for a in client.adaptations] == [("reasoning.summary", "drop")]
    assert refused_effort(client.adaptations) is None  # the run's effort was sent: nothing stops it


def test_an_invalid_value_is_not_adapted_and_names_the_flag() -> None:
    status, body = recorded("openai/err_400_invalid_temperature_value")
    script = Scripted(lambda n, b: (status, {}, body))
    (exc,) = run(script, params=GenParams(temperature=-1))
    assert isinstance(exc, LLMFatalError) and len(script.bodies) == 1
    assert "decimal below minimum value" in str(exc) and "--temperature" in str(exc)


def test_a_field_refused_again_after_adapting_stays_fatal() -> None:
    status, body = recorded("openai/err_400_temperature_unsupported_gpt5")
    script = Scripted(lambda n, b: (status, {}, body))  # refuses whatever is sent
    (exc,) = run(script)
    assert isinstance(exc, LLMFatalError) and len(script.bodies) == 2 and "--temperature" in str(exc)


VLLM_GREATER = (b'{"error":{"message":"\'max_tokens\' (2049) cannot be greater than the model\'s maximum context length '
                b'(2048). (parameter=max_tokens, value=2049)","type":"BadRequestError","param":"max_tokens","code":400}}')


def test_vllm_budget_over_the_context_is_fatal_naming_max_tokens() -> None:
    f = wire.classify_status(400, {}, VLLM_GREATER)
    assert f.kind == "fatal" and "--max-tokens" in f.message and f.adaptation is None
    too_large = json.dumps({"object": "error", "type": "BadRequestError", "param": None, "code": 400, "message":
                            "'max_tokens' or 'max_completion_tokens' is too large: 64000. This model's maximum context "
                            "length is 20000 tokens and your request has 16614 input tokens (64000 > 20000 - 16614)."})
    assert wire.classify_status(400, {}, too_large).kind == "fatal"
    fits = too_large.replace("64000", "4000")  # the budget fits the context: this prompt is too long
    assert wire.classify_status(400, {}, fits).kind == "item"
    _, old = recorded("vllm/err_400_context_length")  # 6048 in the completion of a 6048-token context
    assert wire.classify_status(400, {}, old).kind == "fatal"
    _, openai = recorded("openai/err_400_context_length_exceeded")  # 1000 of 4097: the prompt is too long
    assert wire.classify_status(400, {}, openai).kind == "item"


def test_vllm_budget_error_stops_after_one_request() -> None:
    script = Scripted(lambda n, b: (400, {}, VLLM_GREATER))
    (exc,) = run(script, provider="vllm", params=GenParams(max_tokens=2049))
    assert isinstance(exc, LLMFatalError) and "--max-tokens" in str(exc) and len(script.bodies) == 1


def test_the_manifest_records_adaptations_outside_the_resume_identity() -> None:
    a = {"field": "temperature", "action": "drop", "to": None, "reason": "Unsupported value"}
    m = new_manifest("eval", model="m", judge={"model": "j"})
    first = record_adaptations(m, [], [a])
    assert first.adapted == [] and first.judge == {"model": "j", "adapted": [a]}
    resumed = check_resumable(first, new_manifest("eval", model="m", judge={"model": "j"}))  # not refused
    assert resumed.judge is not None and resumed.judge["adapted"] == [a]  # a resumed run keeps what was learnt
    assert record_adaptations(resumed, [], [a]).judge["adapted"] == [a]  # one entry per field


def test_an_answer_from_the_cache_brings_the_adaptation_it_was_made_with(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Before: a second run answered from the cache recorded no adaptation (``adapted: []``), its
    manifest saying the temperature was sent to a provider that refused it."""
    from cresowlve_core.llm.cache import ResponseCache

    script = refusing("temperature", "openai/err_400_temperature_unsupported_gpt5")
    endpoint = Endpoint("http://127.0.0.1:9/v1", "my-gpt5-deployment")

    def client() -> LLMClient:
        return LLMClient(endpoint, transport_factory=script.factory, cache=ResponseCache(tmp_path / "c.sqlite"))

    async def ask(c: LLMClient) -> Completion:
        async with c:
            return await c.complete([{"role": "user", "content": "q"}], GenParams(temperature=0.0), prompt_version="v1")

    first = client()
    asyncio.run(ask(first))
    second = client()
    with caplog.at_level("WARNING"):
        hit = asyncio.run(ask(second))
    assert hit.cached and hit.text == "Paris" and len(script.bodies) == 2  # nothing sent the second time
    assert [(a["field"], a["action"]) for a in second.adaptations] == [("temperature", "drop")]
    assert second.adaptations == first.adaptations
    assert "an answer from the cache was made without 'temperature'" in caplog.text
