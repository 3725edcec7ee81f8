"""The roles of an evaluation run are resolved from its config in one place (evaluation/roles.py)."""

from __future__ import annotations

from cresowlve_core.evaluation import roles
from cresowlve_core.evaluation.config import EvalConfig

LOCAL = "http://127.0.0.1:9/v1"


def _cfg(**kw):
    return EvalConfig(model="m", base_url=LOCAL, run_dir="unused", **kw)


def test_a_base_model_answerer_gets_the_fewshot_prompt_over_completions_unless_an_api_is_named():
    base = roles.answerer(_cfg(provider="embedded"))
    assert base.prompt.name == "solve_fewshot_en" and base.params.api == "completions" and base.call.fewshot
    named = roles.answerer(_cfg(provider="embedded", api="chat"))
    assert named.prompt.name == "solve_fewshot_en" and named.params.api == "chat"
    chat = roles.answerer(_cfg(effort="low"))
    assert chat.prompt.name == "solve_plain_en" and chat.params.api is None and chat.params.effort == "low"


def test_the_judge_shares_the_answerers_server_key_and_provider_and_has_its_own_budget():
    cfg = _cfg(api_key_env="KEY", provider="vllm", judge_model="j", max_tokens=4000, max_cost=1.0)
    judge = roles.judge(cfg)
    assert judge is not None
    assert (judge.endpoint.base_url, judge.endpoint.api_key_env, judge.endpoint.profile.name) == (LOCAL, "KEY", "vllm")
    assert (judge.options.max_tokens, judge.options.temperature, judge.options.max_cost) == (512, 0.0, None)
    assert judge.rule == "nonce-verdict" and judge.prompt.name == "judge"
    other = roles.judge(_cfg(api_key_env="KEY", judge_model="j", judge_base_url="http://127.0.0.1:10/v1"))
    assert other is not None and other.endpoint.api_key_env is None
    assert roles.judge(_cfg()) is None


def test_a_judge_at_the_models_base_url_spelt_with_a_trailing_slash_shares_its_key_and_provider():
    """`--judge-base-url URL/` beside `--base-url URL`: before, the judge went with no key (a 401
    stopped the run, exit 3) and the detected profile instead of the model's --provider."""
    judge = roles.judge(_cfg(api_key_env="KEY", provider="vllm", judge_model="j", judge_base_url=LOCAL + "/"))
    assert judge is not None
    assert (judge.endpoint.api_key_env, judge.endpoint.profile.name) == ("KEY", "vllm")


def test_a_thinking_judge_gets_the_larger_budget():
    assert roles.judge(_cfg(judge_model="j", judge_effort="low")).options.max_tokens == 8192  # type: ignore[union-attr]
    openai = EvalConfig(model="m", base_url="https://api.openai.com/v1", run_dir="unused", judge_model="o3-mini")
    assert roles.judge(openai).options.max_tokens == 8192  # type: ignore[union-attr]


def test_a_base_model_judge_answers_yes_no_under_our_protocol_and_stays_the_papers_under_the_papers():
    ours = roles.judge(_cfg(provider="embedded", judge_model="j"))
    assert ours is not None and ours.rule == "fewshot-yes-no" and ours.prompt.name == "judge_fewshot"
    assert ours.params.api == "completions"
    paper = roles.judge(_cfg(provider="embedded", judge_model="j", judge_protocol="paper"))
    assert paper is not None and paper.rule == "paper" and paper.prompt.name == "judge_paper"
    assert paper.params.api == "completions" and paper.options.temperature is None
    assert paper.params_for(7).seed == 7 and paper.params.seed != 7
