"""A role that names a model without a base URL is refused (exit 2, one line naming the missing
flag) before anything starts or is created: the embedded model never answers in its place.
Every stage's roles, through the command line."""

from __future__ import annotations

import pytest

from cresowlve_core.cli import main
from cresowlve_core.runtime import UnservedModel, endpoint_or_embedded

# (command line, the flag the error must name); OUT is the only place a command could write
ROLES = [
    (["errors", "label", "--runs", "RUNS/*", "--out-dir", "OUT", "--labeller-model", "gpt-4o"], "--labeller-base-url"),
    (["errors", "report", "--runs", "RUNS/*", "--out-dir", "OUT", "--reports-dir", "OUT/r",
      "--labeller-model", "gpt-4o"], "--labeller-base-url"),
    (["contamination", "run", "--runs", "RUNS/*", "--out-dir", "OUT", "--perturber-model", "gpt-4o"],
     "--perturber-base-url"),
    (["contamination", "run", "--runs", "RUNS/*", "--out-dir", "OUT", "--quiz-model", "gpt-4o"], "--quiz-base-url"),
    (["contamination", "report", "--runs", "RUNS/*", "--out-dir", "OUT", "--reports-dir", "OUT/r",
      "--quiz-model", "gpt-4o"], "--quiz-base-url"),
    (["build", "--build-dir", "OUT", "--model", "gpt-4o"], "--base-url"),
    (["build", "--build-dir", "OUT", "--step-model", "translate", "gpt-4o", "none", "KEY"], "BASE_URL"),
    (["create", "generate", "--run-dir", "OUT", "--model", "gpt-4o"], "--base-url"),
    (["create", "score", "--run-dir", "RUNS", "--score-dir", "OUT", "--judge-model", "gpt-4o"], "--judge-base-url"),
    (["synth", "--build-dir", "OUT", "--verbaliser-model", "gpt-4o"], "--verbaliser-base-url"),
    (["synth", "--build-dir", "OUT", "--solver-model", "gpt-4o"], "--solver-base-url"),
    (["eval", "--run-dir", "OUT", "--model", "gpt-4o"], "--base-url"),
]


@pytest.fixture
def no_embedded(monkeypatch):
    """Starting the embedded model fails the test."""
    from cresowlve_core.llm import local

    def refuse(*args, **kwargs):
        raise AssertionError("the embedded model was started")

    monkeypatch.setattr(local, "local_server", refuse)
    monkeypatch.setattr(local.LocalServer, "__enter__", refuse)
    for var in ("CRESOWLVE_BASE_URL", "CRESOWLVE_MODEL", "CRESOWLVE_JUDGE_MODEL", "CRESOWLVE_JUDGE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(("argv", "flag"), ROLES, ids=lambda v: "-".join(v[:3]) if isinstance(v, list) else v)
def test_a_model_without_its_base_url_is_refused_before_anything(argv, flag, tmp_path, capsys, monkeypatch,
                                                                  no_embedded):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "RUNS").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = main([a.replace("OUT", str(tmp_path / "OUT")).replace("RUNS", str(tmp_path / "RUNS")) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0] and "gpt-4o" in lines[0], err
    assert "nothing was run" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no folder made
    assert not (tmp_path / "OUT").exists()


def test_eval_judge_defaults_to_the_models_base_url_and_is_not_refused(no_embedded):
    from cresowlve_core.cli import build_parser
    from cresowlve_core.cli.roles import unserved_role

    args = build_parser().parse_args(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                      "--judge-model", "j"])
    assert unserved_role(args) is None
    args = build_parser().parse_args(["errors", "label", "--runs", "x", "--labeller-model", "m",
                                      "--labeller-base-url", "http://127.0.0.1:9/v1"])
    assert unserved_role(args) is None


def test_eval_model_with_the_base_url_from_the_environment_is_not_refused(monkeypatch, no_embedded):
    from cresowlve_core.cli import build_parser
    from cresowlve_core.cli.roles import unserved_role

    monkeypatch.setenv("CRESOWLVE_BASE_URL", "http://127.0.0.1:9/v1")
    assert unserved_role(build_parser().parse_args(["eval", "--model", "m"])) is None


def test_the_library_refuses_too(no_embedded):
    with pytest.raises(UnservedModel, match="gpt-4o"), endpoint_or_embedded("gpt-4o", None):
        pass


@pytest.mark.parametrize("env", [{"CRESOWLVE_MODEL": "gpt-4o"}, {"CRESOWLVE_JUDGE_MODEL": "gpt-4o"},
                                 {"CRESOWLVE_BASE_URL": "http://127.0.0.1:9/v1"}])
def test_the_main_job_refuses_a_half_configured_provider(env, tmp_path, capsys, monkeypatch, no_embedded):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rc = main(["run", "--reports-dir", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "CRESOWLVE_" in err and "nothing was run" in err
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("env", [
    # a judge on its own endpoint, and no provider for the model: the embedded model would judge instead
    {"CRESOWLVE_JUDGE_MODEL": "gpt-4o", "CRESOWLVE_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"},
    {"CRESOWLVE_JUDGE_API_KEY_ENV": "JUDGE_KEY"},
    # a judge's endpoint with no judge model: the runs would go unjudged
    {"CRESOWLVE_BASE_URL": "http://127.0.0.1:9/v1", "CRESOWLVE_MODEL": "m",
     "CRESOWLVE_JUDGE_BASE_URL": "http://127.0.0.1:8/v1"},
], ids=["judge-on-embedded", "judge-key-on-embedded", "judge-url-without-judge-model"])
def test_the_main_job_refuses_judge_variables_it_would_ignore(env, tmp_path, capsys, monkeypatch, no_embedded):
    from cresowlve_core import mainjob

    def no_render(*args, **kwargs):
        raise AssertionError("a report was rendered")

    monkeypatch.setattr(mainjob.Renderer, "render", no_render)
    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    for var in ("CRESOWLVE_API_KEY_ENV", "CRESOWLVE_JUDGE_API_KEY_ENV"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rc = main(["run", "--reports-dir", str(tmp_path / "reports")])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2, lines
    judge_vars = [k for k in env if k.startswith("CRESOWLVE_JUDGE_")]
    assert len(lines) == 1 and all(k in lines[0] for k in judge_vars) and "nothing was run" in lines[0], lines
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("setting", ["127.0.0.1:9=opneai", "127.0.0.1:9"], ids=["unknown-profile", "no-profile"])
@pytest.mark.parametrize("provider", [True, False], ids=["provider", "embedded"])
def test_the_main_job_refuses_a_bad_providers_variable_before_the_first_report(setting, provider, tmp_path, capsys,
                                                                               monkeypatch, no_embedded):
    from cresowlve_core import mainjob

    def no_render(*args, **kwargs):
        raise AssertionError("a report was rendered")

    monkeypatch.setattr(mainjob.Renderer, "render", no_render)
    monkeypatch.setenv("CRESOWLVE_PROVIDERS", setting)
    if provider:
        monkeypatch.setenv("CRESOWLVE_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("CRESOWLVE_MODEL", "m")
    rc = main(["run", "--reports-dir", str(tmp_path / "reports")])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2, lines
    assert len(lines) == 1 and lines[0].count("CRESOWLVE_PROVIDERS") == 1 and setting.split("=")[-1] in lines[0], lines
    assert "nothing was run" in lines[0]
    assert not (tmp_path / "reports").exists()


# (command line with a role's base URL and no model for it, the flags the error must name)
BASE_URL_ONLY = [
    (["errors", "label", "--runs", "RUNS/*", "--out-dir", "OUT", "--labeller-base-url", "URL"],
     ("--labeller-base-url", "--labeller-model")),
    (["contamination", "run", "--runs", "RUNS/*", "--out-dir", "OUT", "--quiz-base-url", "URL"],
     ("--quiz-base-url", "--quiz-model")),
    (["build", "--build-dir", "OUT", "--base-url", "URL"], ("--base-url", "--model")),
    (["create", "generate", "--run-dir", "OUT", "--base-url", "URL"], ("--base-url", "--model")),
    (["create", "score", "--run-dir", "RUNS", "--score-dir", "OUT", "--judge-base-url", "URL"],
     ("--judge-base-url", "--judge-model")),
    (["synth", "--build-dir", "OUT", "--verbaliser-model", "m", "--verbaliser-base-url", "URL",
      "--solver-base-url", "URL"], ("--solver-base-url", "--solver-model")),
]


@pytest.mark.parametrize(("argv", "flags"), BASE_URL_ONLY, ids=lambda v: "-".join(v[:2]) if isinstance(v, list) else "")
def test_a_base_url_without_its_model_is_refused_naming_the_role(argv, flags, tmp_path, capsys, monkeypatch,
                                                                 no_embedded):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "RUNS").mkdir()
    url = "http://user:pw-SECRET@127.0.0.1:9/v1"
    rc = main([a.replace("OUT", str(tmp_path / "OUT")).replace("RUNS", str(tmp_path / "RUNS")).replace("URL", url)
               for a in argv])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2, lines
    assert len(lines) == 1 and all(f in lines[0] for f in flags) and "nothing was run" in lines[0], lines
    assert "SECRET" not in lines[0]
    assert not (tmp_path / "OUT").exists()


# (command line with a role's model given empty, as `--labeller-model "$MODEL"` with MODEL unset gives it)
EMPTY_MODEL = [
    ["errors", "label", "--runs", "RUNS/*", "--out-dir", "OUT", "--labeller-model", ""],
    ["contamination", "run", "--runs", "RUNS/*", "--out-dir", "OUT", "--quiz-model", " "],
    ["build", "--build-dir", "OUT", "--model", ""],
    ["create", "generate", "--run-dir", "OUT", "--model", ""],
    ["create", "score", "--run-dir", "RUNS", "--score-dir", "OUT", "--judge-model", ""],
    ["synth", "--build-dir", "OUT", "--solver-model", ""],
]


@pytest.mark.parametrize("argv", EMPTY_MODEL, ids=lambda v: "-".join(v[:2]) + v[-2])
def test_an_empty_model_is_refused_not_replaced_by_the_embedded_one(argv, tmp_path, capsys, monkeypatch, no_embedded):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "RUNS").mkdir()
    with pytest.raises(SystemExit) as stopped:
        main([a.replace("OUT", str(tmp_path / "OUT")).replace("RUNS", str(tmp_path / "RUNS")) for a in argv])
    err = capsys.readouterr().err
    assert stopped.value.code == 2, err
    assert err.strip().endswith(f"error: argument {argv[-2]}: must not be empty"), err
    assert not (tmp_path / "OUT").exists()


def test_a_build_steps_empty_model_is_refused_naming_the_step(tmp_path, capsys, monkeypatch, no_embedded):
    monkeypatch.setenv("STEP_KEY", "sk-step")
    rc = main(["build", "--build-dir", str(tmp_path / "OUT"),
               "--step-model", "translate", "", "http://127.0.0.1:9/v1", "STEP_KEY"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2, lines
    assert lines == ["error: --step-model translate: MODEL must not be empty; nothing was run"], lines
    assert not (tmp_path / "OUT").exists()


# a model name with what prints as nothing or moves the text: a line break pasted with the name, a tab, an
# escape, a zero-width space, a bidirectional override; and white space around it
UNPRINTABLE_MODELS = [("gpt-4o-mini\n", "U+000A at position 12"), ("gpt\t4o", "U+0009 at position 4"),
                      ("m\x1b[2J", "U+001B at position 2"), ("gpt\u200b-4o", "U+200B at position 4"),
                      ("gpt-\u202e4o", "U+202E at position 5"), (" gpt-4o", "must not begin or end with white space")]


@pytest.mark.parametrize(("model", "why"), UNPRINTABLE_MODELS, ids=[w.split(" at")[0] for _, w in UNPRINTABLE_MODELS])
def test_a_model_name_that_does_not_print_as_it_is_sent_is_refused(model, why, tmp_path, capsys, monkeypatch,
                                                                    no_embedded):
    """A model's name is sent in every request and labels every record and report. Before, `eval --model
    $'gpt-4o-mini\\n'` was sent as written (a provider that trims it answered) and its summary line broke in
    two; an escape or a zero-width space labelled the run with a name that does not show what was sent."""
    flags = [["eval", "--items", "demo", "--run-dir", "OUT", "--base-url", "http://127.0.0.1:9/v1", "--model"],
             ["eval", "--items", "demo", "--run-dir", "OUT", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
              "--judge-model"],
             ["errors", "label", "--runs", "RUNS/*", "--out-dir", "OUT", "--labeller-base-url",
              "http://127.0.0.1:9/v1", "--labeller-model"]]
    (tmp_path / "RUNS").mkdir()
    for argv in flags:
        with pytest.raises(SystemExit) as stopped:
            main([a.replace("OUT", str(tmp_path / "OUT")).replace("RUNS", str(tmp_path / "RUNS")) for a in argv]
                 + [model])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert stopped.value.code == 2 and f"error: argument {argv[-1]}: " in err and why in err, err
    assert not (tmp_path / "OUT").exists()
    monkeypatch.setenv("STEP_KEY", "sk-step")
    rc = main(["build", "--build-dir", str(tmp_path / "OUT"), "--step-model", "translate", model,
               "http://127.0.0.1:9/v1", "STEP_KEY"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and lines[-1].startswith("error: --step-model translate: MODEL ") and why in lines[-1], lines
    assert not (tmp_path / "OUT").exists()
