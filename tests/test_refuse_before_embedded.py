"""Every stage refuses before any model starts: a bad argument, an input that is not there or holds
nothing, an unset key variable. Starting the embedded server is made to fail the test, so a
refusal that came after it (the server started, then the command refused) cannot pass."""

from __future__ import annotations

import pytest

from cresowlve_core.cli import main

UNSET = "CRESOWLVE_TEST_UNSET_KEY_VAR"


@pytest.fixture
def no_embedded(monkeypatch):
    """Starting the embedded model fails the test."""
    from cresowlve_core.llm import local

    def refuse(*args, **kwargs):
        raise AssertionError("the embedded model was started")

    monkeypatch.setattr(local, "local_server", refuse)
    monkeypatch.delenv(UNSET, raising=False)


def _refused(argv: list[str], capsys) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    return err.strip().splitlines()[-1]


def test_build_of_a_missing_source_is_refused_before_the_embedded_model(tmp_path, capsys, no_embedded):
    line = _refused(["build", "--build-dir", str(tmp_path / "b"), "--source", str(tmp_path / "none.txt")], capsys)
    assert line.startswith("error: ") and "none.txt" in line
    assert not (tmp_path / "b").exists()  # no empty folder after a refusal


def test_build_of_an_empty_source_is_refused_before_the_embedded_model(tmp_path, capsys, no_embedded):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    line = _refused(["build", "--build-dir", str(tmp_path / "b"), "--source", str(empty)], capsys)
    assert "nothing to build" in line and not (tmp_path / "b").exists()


@pytest.mark.parametrize("argv, flag", [
    (["build", "--build-dir", "OUT", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", UNSET],
     "--api-key-env"),
    (["build", "--build-dir", "OUT", "--step-model", "translate", "m", "http://127.0.0.1:9/v1", UNSET],
     "--step-model translate"),
    (["errors", "label", "--runs", "OUT/*", "--out-dir", "OUT", "--labeller-model", "m",
      "--labeller-base-url", "http://127.0.0.1:9/v1", "--labeller-api-key-env", UNSET], "--labeller-api-key-env"),
    (["contamination", "run", "--runs", "OUT/*", "--out-dir", "OUT", "--quiz-model", "m",
      "--quiz-base-url", "http://127.0.0.1:9/v1", "--quiz-api-key-env", UNSET], "--quiz-api-key-env"),
    (["create", "generate", "--run-dir", "OUT", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
      "--api-key-env", UNSET], "--api-key-env"),
    (["create", "score", "--run-dir", "OUT", "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1",
      "--judge-api-key-env", UNSET], "--judge-api-key-env"),
    (["synth", "--build-dir", "OUT", "--solver-model", "m", "--solver-base-url", "http://127.0.0.1:9/v1",
      "--solver-api-key-env", UNSET], "--solver-api-key-env"),
    (["eval", "--run-dir", "OUT", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
      "--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-api-key-env", UNSET],
     "--judge-api-key-env"),
])
def test_an_unset_key_variable_is_refused_before_any_model_starts(tmp_path, capsys, no_embedded, argv, flag):
    out = tmp_path / "out"
    line = _refused([a.replace("OUT", str(out)) for a in argv], capsys)
    assert line == (f"error: environment variable {UNSET!r} is not set ({flag}; it should hold the API key); "
                    "nothing was run")
    assert not out.exists()


def test_a_key_given_as_step_models_key_env_is_refused_without_repeating_it(tmp_path, capsys, no_embedded):
    # it was echoed whole: "environment variable 'sk-proj-...' is not set (--step-model translate; ...)"
    key = "sk-proj-" + "Ab3" * 12
    out = tmp_path / "out"
    assert main(["build", "--build-dir", str(out), "--step-model", "translate", "m", "http://127.0.0.1:9/v1", key]) == 2
    err = capsys.readouterr().err
    assert key not in err and not out.exists()
    assert err.strip().splitlines()[-1] == (f"error: --step-model translate: KEY_ENV takes the NAME of an environment variable (e.g. "
                    f"OPENAI_API_KEY), not the key; the value given ({len(key)} characters) looks like a key and was "
                    "not used; nothing was run")


def test_a_step_given_twice_to_step_model_is_refused(tmp_path, capsys, no_embedded, monkeypatch):
    # the later --step-model replaced the earlier without a word
    monkeypatch.setenv("STEP_KEY", "k")
    out, url = tmp_path / "out", "http://127.0.0.1:9/v1"
    line = _refused(["build", "--build-dir", str(out), "--model", "m", "--base-url", url, "--step-model",
                     "translate", "a", url, "STEP_KEY", "--step-model", "translate", "b", url, "STEP_KEY"], capsys)
    assert line == ("error: --step-model translate is given twice (a and b); give each step one model; "
                    "nothing was run")
    assert not out.exists()


def test_errors_label_of_no_runs_is_refused_before_the_embedded_model(tmp_path, capsys, no_embedded):
    line = _refused(["errors", "label", "--runs", str(tmp_path / "none" / "*"), "--out-dir", str(tmp_path / "e")],
                    capsys)
    assert "nothing to label" in line and not (tmp_path / "e").exists()


def test_contamination_of_no_paired_runs_is_refused_before_the_embedded_model(tmp_path, capsys, no_embedded):
    line = _refused(["contamination", "run", "--runs", str(tmp_path / "none" / "*"), "--out-dir",
                     str(tmp_path / "c")], capsys)
    assert "nothing to test" in line


def test_synth_with_no_candidate_is_refused_before_the_embedded_model(tmp_path, capsys, no_embedded):
    line = _refused(["synth", "--build-dir", str(tmp_path / "s"), "--n", "2", "--band", "999999", "1000000"], capsys)
    assert line.startswith("error: no candidate") and not (tmp_path / "s").exists()


def test_create_generate_of_a_bad_queries_file_is_refused_before_the_embedded_model(tmp_path, capsys, no_embedded):
    bad = tmp_path / "q.jsonl"
    bad.write_text("not json\n")
    line = _refused(["create", "generate", "--run-dir", str(tmp_path / "g"), "--queries", str(bad)], capsys)
    assert line.startswith("error: ") and "q.jsonl" in line and not (tmp_path / "g").exists()


def test_create_score_of_a_folder_that_is_no_generation_run_is_refused_first(tmp_path, capsys, no_embedded):
    line = _refused(["create", "score", "--run-dir", str(tmp_path / "nothing")], capsys)
    assert "not a CREATE run directory" in line


def test_build_steps_on_the_main_jobs_embedded_server_are_marked_embedded(tmp_path):
    """The main job names its embedded server by base URL: the step table must still say embedded."""
    from cresowlve_core.construction.build import BuildConfig
    from cresowlve_core.construction.llm_steps import open_step_clients

    cfg = BuildConfig(name="t", build_dir=str(tmp_path / "b"), model="gemma3-270m", base_url="http://127.0.0.1:9/v1",
                      models={"translate": {"model": "gpt-4o", "base_url": "http://127.0.0.1:9/v1"}})
    with open_step_clients(cfg.step_models(), cfg.client_options()) as clients:
        assert clients["needs_material"].embedded and not clients["translate"].embedded


class _Started(Exception):
    """Raised by the stand-in for the embedded server: the run got as far as starting it."""


@pytest.fixture
def server_starts(monkeypatch):
    """Starting the embedded model is recorded (and goes no further)."""
    from cresowlve_core.llm import local

    started: list[bool] = []

    def start(*args, **kwargs):
        started.append(True)
        raise _Started

    monkeypatch.setattr(local, "local_server", start)
    return started


def _embedded_manifest(run_dir, monkeypatch, **options):
    """A run directory holding an embedded evaluation run (the server was on another port then)."""
    from cresowlve_core.evaluation.notebook_run import config
    from cresowlve_core.evaluation.runner import build_manifest
    from cresowlve_core.llm.profiles import PROVIDERS_ENV
    from cresowlve_core.runtime import RunDir

    with monkeypatch.context() as m:
        m.setenv(PROVIDERS_ENV, "127.0.0.1:41234=embedded")
        cfg = config(items="demo", lang="en", model="gemma3-270m", base_url="http://127.0.0.1:41234/v1",
                     run_dir=str(run_dir), **options)
        RunDir(run_dir).write_manifest(build_manifest(cfg, 3))


def test_an_embedded_eval_of_another_configuration_is_refused_before_the_server_starts(tmp_path, monkeypatch,
                                                                                     server_starts):
    from cresowlve_core.evaluation import notebook_run
    from cresowlve_core.runtime import ResumeError

    run_dir = tmp_path / "run"
    _embedded_manifest(run_dir, monkeypatch, seed=1)
    with pytest.raises(ResumeError, match="seed"):
        notebook_run.run(items="demo", lang="en", model=None, base_url=None, run_dir=str(run_dir), seed=2)
    assert server_starts == []


def test_an_embedded_eval_of_the_same_configuration_goes_on_to_start_the_server(tmp_path, monkeypatch,
                                                                              server_starts):
    from cresowlve_core.evaluation import notebook_run

    run_dir = tmp_path / "run"
    _embedded_manifest(run_dir, monkeypatch, seed=1, judge_model="gemma3-270m",
                       judge_base_url="http://127.0.0.1:41234/v1")
    with pytest.raises(_Started):
        notebook_run.run(items="demo", lang="en", model=None, base_url=None, run_dir=str(run_dir), seed=1,
                         judge_model="local")
    assert server_starts == [True]


def test_the_archive_rule_lets_an_embedded_eval_of_another_configuration_start(tmp_path, monkeypatch,
                                                                             server_starts):
    from cresowlve_core.evaluation import notebook_run
    from cresowlve_core.runtime.rundir import ARCHIVE_CHANGED_ENV

    run_dir = tmp_path / "run"
    _embedded_manifest(run_dir, monkeypatch, seed=1)
    monkeypatch.setenv(ARCHIVE_CHANGED_ENV, "1")
    with pytest.raises(_Started):  # the old run is moved aside once the run begins, not refused
        notebook_run.run(items="demo", lang="en", model=None, base_url=None, run_dir=str(run_dir), seed=2)
    assert server_starts == [True]
