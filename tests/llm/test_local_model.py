"""The embedded Gemma 3 270M server (slow-ish: ~2 s to start; CI runs these)."""

from __future__ import annotations

import pytest
from openai import OpenAI

from cresowlve_core.llm.local import LocalServer, LocalServerError, local_server

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def server():
    with local_server() as srv:
        yield srv


def test_chat_completion_through_openai_client(server):
    client = OpenAI(base_url=server.base_url, api_key="not-needed")
    r = client.chat.completions.create(
        model=server.model, messages=[{"role": "user", "content": "Name a planet."}], max_tokens=8, temperature=0, seed=0
    )
    assert r.choices[0].message.content  # some text came back
    assert r.usage.completion_tokens > 0


def test_chat_template_keeps_the_prompt(server):
    """The jinja trap would turn every prompt into the word 'gemma': then token counts would not grow."""
    client = OpenAI(base_url=server.base_url, api_key="x")
    counts = []
    for words in (1, 20, 80):
        r = client.chat.completions.create(
            model=server.model, messages=[{"role": "user", "content": " ".join(["puzzle"] * words)}], max_tokens=1
        )
        counts.append(r.usage.prompt_tokens)
    assert counts[0] < counts[1] < counts[2]
    assert counts[2] - counts[0] >= 70


def test_temperature_zero_is_deterministic(server):
    client = OpenAI(base_url=server.base_url, api_key="x")
    outs = {
        client.completions.create(model=server.model, prompt="The capital of France is", max_tokens=8, temperature=0, seed=1)
        .choices[0]
        .text
        for _ in range(2)
    }
    assert len(outs) == 1


def test_port_taken_is_a_clear_error(server):
    with pytest.raises(LocalServerError, match=f"port {server.port}.*already in use"):
        LocalServer(port=server.port).start()


def test_stop_frees_the_port():
    from cresowlve_core.llm.local import free_port, port_is_free

    port = free_port()
    srv = LocalServer(port=port).start()
    assert not port_is_free(port)
    srv.stop()
    assert port_is_free(port)


def test_models_endpoint_lists_the_model_id(server):
    """``/v1/models`` names the model by its id (not ``"-"`` with one-letter aliases)."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as r:
        data = json.load(r)["data"]
    ids = [m.get("id") for m in data]
    assert server.model in ids, data
    aliases = [a for m in data for a in (m.get("aliases") or [])]
    assert all(len(a) > 1 for a in aliases), aliases


def test_a_port_taken_after_the_check_is_retried_on_another(monkeypatch):
    """Two processes can both see the default port free and race to bind it; the loser starts on
    another free port instead of failing ("Failed to init server")."""
    import json
    import socket
    import urllib.request

    from cresowlve_core.llm import local

    real = local.port_is_free
    calls = []

    def free_at_first_look(port, host=local.HOST):
        calls.append(port)
        return True if len(calls) == 1 else real(port, host)

    monkeypatch.setattr(local, "port_is_free", free_at_first_look)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # the "default" port is one this test holds, so no other process (another test worker's
        # embedded server on 8765) can release or take it in between
        holder.bind((local.HOST, 0))
        holder.listen()
        taken = holder.getsockname()[1]
        monkeypatch.setattr(local, "DEFAULT_PORT", taken)
        with local_server() as srv:
            assert srv.port != taken
            with urllib.request.urlopen(f"{srv.base_url.removesuffix('/v1')}/health", timeout=5) as r:
                assert json.load(r)["status"] == "ok"
    finally:
        holder.close()
    assert calls[0] == taken
