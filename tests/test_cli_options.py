"""The client options' flags: one declaration (cli/options.py, from ClientOptions' fields), one
default for every command, help that shows it, and the embedded model's cap on calls in flight."""

from __future__ import annotations

import argparse

import pytest

from cresowlve_core.cli import build_parser
from cresowlve_core.cli.conventions import _subparsers
from cresowlve_core.cli.options import FLAGS, STAGE_TUNED, StageValue, add_client_options, client_options, stage_options
from cresowlve_core.llm.options import ClientOptions

CLIENT_FLAGS = {flag.name: name for name, flag in FLAGS.items()}


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command parser by its prog ("cresowlve create generate", ...)."""
    return {p.prog: p for p in _subparsers(build_parser())}


def _client_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {f: a for a in parser._actions for f in a.option_strings
            if f in CLIENT_FLAGS and a.dest == (FLAGS[CLIENT_FLAGS[f]].dest or CLIENT_FLAGS[f])}


def test_every_client_option_has_one_default_in_every_command():
    seen: dict[str, dict[str, object]] = {}
    for prog, parser in _commands().items():
        for flag, action in _client_actions(parser).items():
            seen.setdefault(flag, {})[prog] = action.default
    assert {"--concurrency", "--seed", "--max-cost", "--no-cache", "--max-tokens"} <= set(seen)
    differing = {flag: by_command for flag, by_command in seen.items() if len(set(map(repr, by_command.values()))) > 1}
    assert differing == {}
    assert len(seen["--concurrency"]) >= 6  # eval, build, create generate/score, synth, errors label, contamination run
    assert set(seen["--concurrency"].values()) == {ClientOptions.model_fields["concurrency"].default}


def test_a_stage_tunes_only_its_budget_and_temperature():
    for prog, parser in _commands().items():
        for action in _client_actions(parser).values():
            value: StageValue | None = getattr(action, "stage_value", None)
            if value is None:
                continue
            dumped, defaults = stage_options(value.stage).model_dump(), ClientOptions().model_dump()
            assert {k for k in dumped if dumped[k] != defaults[k]} <= set(STAGE_TUNED), prog


def test_help_shows_the_fields_default_and_no_hand_written_one():
    commands = _commands()
    for prog, parser in commands.items():
        for flag, action in _client_actions(parser).items():
            name = CLIENT_FLAGS[flag]
            if name not in STAGE_TUNED:  # the formatter appends the default; the help itself names none
                assert "default:" not in (action.help or ""), (prog, flag)
    eval_help = " ".join(commands["cresowlve eval"].format_help().split())
    assert "calls in flight at once" in eval_help and "(default: 8)" in eval_help
    assert "thinking models need room (default: 4096)" in eval_help
    label_help = " ".join(commands["cresowlve errors label"].format_help().split())
    assert "output budget per label (default: 512)" in label_help
    generate_help = " ".join(commands["cresowlve create generate"].format_help().split())
    assert "to send none (default: 0.7)" in generate_help


def test_given_flags_go_on_top_of_the_stage_options():
    parser = argparse.ArgumentParser()
    add_client_options(parser, "temperature", "max_tokens", "concurrency", "cache", "extra_body",
                       stage=ClientOptions(temperature=0.7, max_tokens=512))
    stage = ClientOptions(temperature=0.7, max_tokens=512)
    assert client_options(parser.parse_args([]), stage) == stage
    given = client_options(parser.parse_args(["--temperature", "default", "--max-tokens", "64", "--concurrency", "2",
                                              "--no-cache", "--extra-body", '{"top_k": 5}']), stage)
    assert (given.temperature, given.max_tokens, given.concurrency, given.cache) == (None, 64, 2, False)
    assert given.extra_body == {"top_k": 5}


def test_a_command_reads_the_same_options_the_library_defaults_to():
    args = build_parser().parse_args(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"])
    assert client_options(args) == ClientOptions()
    args = build_parser().parse_args(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                      "--preset", "vllm-qwen3", "--timeout", "5"])
    assert client_options(args).provider == "vllm" and client_options(args).timeout_s == 5.0


def test_the_embedded_server_is_sent_no_more_calls_than_its_slots():
    from cresowlve_core.llm.client import LLMClient
    from cresowlve_core.llm.profiles import EMBEDDED_SLOTS
    from cresowlve_core.llm.types import Endpoint

    embedded = LLMClient(Endpoint("http://127.0.0.1:9/v1", "gemma3-270m", provider="embedded"), concurrency=8)
    assert embedded.concurrency == EMBEDDED_SLOTS == 4
    assert LLMClient(Endpoint("http://127.0.0.1:9/v1", "m", provider="embedded"), concurrency=2).concurrency == 2
    assert LLMClient(Endpoint("http://127.0.0.1:9/v1", "m", provider="vllm"), concurrency=8).concurrency == 8


@pytest.mark.parametrize("field", sorted(FLAGS))
def test_every_flag_names_a_client_options_field(field):
    assert field in ClientOptions.model_fields and ClientOptions.model_fields[field].description
