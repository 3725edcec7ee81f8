"""A Step picks its chat or few-shot variant from the endpoint's provider profile, in one place."""

from __future__ import annotations

from cresowlve_core.llm.base_model import completion_params
from cresowlve_core.llm.types import Endpoint
from cresowlve_core.runtime import ClientOptions
from cresowlve_core.runtime.step import Step, Variant

CHAT = Endpoint("http://127.0.0.1:9/v1", "chat-model", provider="llama-cpp")
BASE = Endpoint("http://127.0.0.1:9/v1", "gemma3-270m", provider="embedded")

LABEL = Step("error_label",
             chat=Variant("error_label", lambda p, u: [{"role": "user", "content": f"chat {u}"}], str.upper,
                          default_max_tokens=64),
             fewshot=Variant("error_label_fewshot", lambda p, u: [{"role": "user", "content": f"few {u}"}], str.lower,
                             gen=completion_params, default_max_tokens=3))


def test_the_endpoint_profile_picks_the_variant():
    chat, base = LABEL.on(CHAT, ClientOptions()), LABEL.on(BASE, ClientOptions())
    assert not chat.fewshot and base.fewshot
    assert chat.request("x").messages == [{"role": "user", "content": "chat x"}]
    assert base.request("x").messages == [{"role": "user", "content": "few x"}]
    assert chat.request("x").tag.startswith("error_label@") and base.request("x").tag.startswith("error_label_fewshot@")
    assert chat.parse("Ab") == "AB" and base.parse("Ab") == "ab"
    assert LABEL.prompt_tags(BASE) == [base.request("x").tag]


def test_the_default_budget_is_the_variants_and_a_named_budget_replaces_the_options():
    assert LABEL.default_budget(BASE) == 3 and LABEL.default_budget(CHAT) == 64
    assert LABEL.on(BASE, ClientOptions(max_tokens=500)).max_tokens == 500  # the options' unless one is named
    call = LABEL.on(BASE, ClientOptions(max_tokens=500), max_tokens=7)
    assert call.params.max_tokens == 7 and call.options.max_tokens == 7 and call.max_tokens == 7


def test_a_base_model_gets_completion_params_unless_an_api_is_named():
    base = LABEL.on(BASE, ClientOptions())
    assert base.params.api == "completions" and base.params.extra["stop"] == ["\n\n"]
    assert LABEL.on(CHAT, ClientOptions()).params.api is None
    assert LABEL.on(BASE, ClientOptions(), api="chat").params.api == "chat"


def test_a_forced_budget_is_what_is_sent_and_recorded():
    step = Step("s", chat=Variant("judge", lambda p, u: [], str),
                fewshot=Variant("judge_fewshot", lambda p, u: [], str, gen=completion_params, max_tokens=12))
    call = step.on(BASE, ClientOptions(max_tokens=4096))
    assert call.max_tokens == 12 and call.params.max_tokens == 12 and call.options.max_tokens == 4096
    assert step.on(CHAT, ClientOptions(max_tokens=4096)).max_tokens == 4096


def test_a_step_without_a_fewshot_variant_asks_every_model_the_chat_way():
    step = Step("s", chat=Variant("judge", lambda p, u: [], str))
    assert not step.on(BASE).fewshot and step.prompt_tags(BASE) == step.prompt_tags(CHAT)


def test_per_unit_prompts_are_listed_in_order_or_collected_from_the_units():
    listed = Step("s", chat=Variant(lambda u: u, lambda p, u: [], str, prompts=("judge_paper", "judge")))
    assert [t.split("@")[0] for t in listed.prompt_tags(CHAT)] == ["judge_paper", "judge"]
    used = Step("s", chat=Variant(lambda u: u, lambda p, u: [], str))
    assert [t.split("@")[0] for t in used.prompt_tags(CHAT, ["judge", "judge_paper", "judge"])] == ["judge", "judge_paper"]
