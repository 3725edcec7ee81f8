"""Values a researcher mistypes on the command line: refused by the parser (exit 2, one line naming the
option and what it takes) before any model call or file, never a traceback or a silently other run."""

from __future__ import annotations

import pytest

from cresowlve_core import cli
from cresowlve_core.cli.conventions import _subparsers


def _commands_with(flag: str) -> list[str]:
    """Every (sub)command that takes ``flag``, as its argv prefix (["create", "generate"], ...)."""
    out = []
    for parser in _subparsers(cli.build_parser()):
        if any(flag in action.option_strings for action in parser._actions):
            out.append(parser.prog.split()[1:])
    return out


def _refused(capsys, argv: list[str]) -> str:
    """The one error line of ``argv``, which the parser must refuse with exit 2 (parsed only: a value
    it lets through never starts the command here)."""
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    return err.strip().splitlines()[-1]


def test_every_seed_flag_takes_only_a_seed_numpy_and_the_providers_accept(capsys):
    commands = _commands_with("--seed")
    assert len(commands) >= 7  # eval, build, synth, create generate/score, errors label, contamination run/report
    for command in commands:
        for bad in ("-1", "9223372036854775808", "1e3"):
            line = _refused(capsys, [*command, "--seed", bad, "--help"])
            assert f"argument --seed: must be an integer 0..2**63-1, got '{bad}'" in line, command
    args = cli.build_parser().parse_args(["contamination", "run", "--seed", "9223372036854775807"])
    assert args.seed == 2**63 - 1



@pytest.mark.parametrize("flag", ["--extra-body", "--judge-extra-body"])
@pytest.mark.parametrize("body,where", [('{"top_p": NaN}', "top_p"), ('{"a": {"b": [1, -Infinity]}}', "a.b[1]"),
                                        ('{"top_p": 1e999}', "top_p")])
def test_an_extra_body_with_a_number_json_has_not_is_refused(capsys, flag, body, where):
    # Python's reader took them: the requests carried NaN (not JSON) and the manifest recorded null
    line = _refused(capsys, ["eval", flag, body])
    assert line.endswith(f"argument {flag}: {where}: must be a finite number (NaN and Infinity are not JSON)")


@pytest.mark.parametrize("extra,fragment", [
    (["--n", "0"], "argument --n: must be an integer >= 1, got 0"),
    (["--n", "-3"], "argument --n: must be an integer >= 1, got -3"),
    (["--band", "-5", "-1"], "argument --band: must be an integer >= 0, got -5"),
    (["--build-dir", ""], "argument --build-dir: must not be empty"),
])
def test_synth_refuses_a_count_band_or_build_dir_it_cannot_use(tmp_path, monkeypatch, capsys, extra, fragment):
    monkeypatch.chdir(tmp_path)  # an empty --build-dir was the working directory
    argv = ["synth", "--build-dir", str(tmp_path / "b"), "--verbaliser-model", "m", "--verbaliser-base-url",
            "http://127.0.0.1:9/v1", "--solver-model", "m", "--solver-base-url", "http://127.0.0.1:9/v1", *extra]
    assert fragment in _refused(capsys, argv)
    assert list(tmp_path.iterdir()) == []


def test_synth_build_dir_that_is_a_file_is_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert f"argument --build-dir: {afile} is a file" in _refused(capsys, ["synth", "--build-dir", str(afile)])


def test_every_folder_a_command_writes_into_is_refused_when_it_is_a_file(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    written = [c for c in _commands_with("--reports-dir") if c != ["serve-reports"]]
    assert len(written) >= 5  # report, run, grid, errors report, contamination report
    for command in [*([*c, "--reports-dir"] for c in written), ["build", "--build-dir"]]:
        assert f"argument {command[-1]}: {afile} is a file, not a directory" in _refused(capsys, [*command, str(afile)])
    line = _refused(capsys, ["create", "score", "--run-dir", str(tmp_path), "--score-dir", str(afile)])
    assert f"argument --score-dir: {afile} is a file" in line
    assert afile.read_text() == "x"


@pytest.mark.parametrize("command", [["build", "--build-dir"], ["create", "score", "--run-dir", "r", "--score-dir"],
                                     ["report", "00_data_overview", "--reports-dir"], ["build", "--source"],
                                     ["create", "generate", "--queries"], ["errors", "label", "--out-dir"],
                                     ["errors", "report", "--out-dir"]])
def test_an_empty_path_flag_is_refused_not_read_as_the_default(command, capsys):
    """'' was the default folder or file (the shipped queries, data/errors), or the working directory
    (build --source read it as a folder of packs)."""
    assert f"argument {command[-1]}: must not be empty" in _refused(capsys, [*command, ""])


@pytest.mark.parametrize("value", ["nan", "-1", "5", "inf", "x"])
def test_the_factuality_threshold_is_a_fraction(value, capsys):
    """Above 1 no path is factual, below 0 every path with a triple, nan none: another scoring, silently."""
    line = _refused(capsys, ["create", "score", "--run-dir", "r", "--factuality-threshold", value])
    assert f"argument --factuality-threshold: must be a fraction 0..1, got '{value}'" in line
    args = cli.build_parser().parse_args(["create", "score", "--run-dir", "r", "--factuality-threshold", "0.5"])
    assert args.factuality_threshold == 0.5


@pytest.mark.parametrize("action", [["stats"], ["clear", "--yes"]])
def test_cache_at_a_path_that_does_not_exist_is_refused_not_created(action, tmp_path, capsys):
    """A mistyped --path used to make an empty cache (and its folders) there and report 0 entries."""
    missing = tmp_path / "nowhere" / "responses.sqlite"
    assert cli.main(["cache", *action, "--path", str(missing)]) == 2
    verb = "read" if action == ["stats"] else "removed"
    assert capsys.readouterr().err.strip() == f"error: no response cache at {missing}; nothing was {verb}"
    assert not (tmp_path / "nowhere").exists()
    assert "argument --path: must not be empty" in _refused(capsys, ["cache", *action, "--path", ""])


@pytest.mark.parametrize("url,api_path,base", [
    ("http://127.0.0.1:9/v1/chat/completions", "/chat/completions", "http://127.0.0.1:9/v1"),
    ("https://api.example.com/v1/responses/", "/responses", "https://api.example.com/v1"),
    ("http://user:hunter2@127.0.0.1:9/v1/completions", "/completions", "http://127.0.0.1:9/v1"),
])
def test_a_base_url_with_the_api_path_is_refused_with_the_base_url_to_give(url, api_path, base, capsys):
    """The client appends the API path (…/v1/chat/completions/chat/completions: a 404 after the run
    directory was made); every --*base-url is one argtypes.http_url."""
    flags = [(p.prog.split()[1:], f) for p in _subparsers(cli.build_parser()) for a in p._actions
             for f in a.option_strings if f.endswith("base-url")]
    assert len(flags) >= 12  # eval (2), build, synth (2), create (2), errors (2), contamination (4)
    for command, flag in flags:
        line = _refused(capsys, [*command, flag, url])
        assert line.endswith(f"argument {flag}: must be the base URL without the API path {api_path} "
                             f"(appended to every request), e.g. {base}"), (command, flag)
        assert "hunter2" not in line
    assert cli.build_parser().parse_args(["eval", "--base-url", base + "/"]).base_url == base + "/"


@pytest.mark.parametrize("url", ["http://127.0.0.1 :9/v1", "http://127.0.0.1:9/open ai/v1", "http://127.0.0.1:9/v1\t/x"])
def test_a_base_url_with_a_space_inside_is_refused(url, capsys):
    # it was sent as written: "looks down (DNS lookup failed for 127.0.0.1 )" or the server's "Bad request syntax",
    # exit 3 after the run directory was made
    line = _refused(capsys, ["eval", "--base-url", url])
    assert line.endswith(f"argument --base-url: must be an http(s) URL such as https://api.openai.com/v1, got {url!r}")


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/v1", "http://127.0.0.1:abc/v1"])
def test_a_base_url_with_a_port_that_is_no_port_is_refused_not_a_traceback(url, capsys):
    # urlsplit raises only when the port is read: the client read it, and the run ended in "bug: ...", exit 1
    line = _refused(capsys, ["eval", "--base-url", url])
    assert line.endswith(f"argument --base-url: must be an http(s) URL such as https://api.openai.com/v1, got {url!r}")


@pytest.mark.parametrize("var,value,why", [
    ("CRESOWLVE_MODEL", " ", "must not be empty"),
    ("CRESOWLVE_BASE_URL", "127.0.0.1:9/v1", "must be an http(s) URL such as https://api.openai.com/v1, got '127.0.0.1:9/v1'"),
])
def test_evals_defaults_from_the_main_jobs_variables_are_checked_naming_the_variable(var, value, why, tmp_path, capsys,
                                                                                     monkeypatch):
    # CRESOWLVE_MODEL=" " was sent as the model (exit 3 after the run directory was made, where --model " " is
    # refused), and a bad CRESOWLVE_BASE_URL was named "CRESOWLVE_BASE_URL / CRESOWLVE_API_KEY_ENV"
    monkeypatch.setenv(var, value)
    given = {"CRESOWLVE_MODEL": ["--base-url", "http://127.0.0.1:9/v1"], "CRESOWLVE_BASE_URL": ["--model", "m"]}[var]
    assert cli.main(["eval", *given, "--run-dir", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {var}: {why}; nothing was run"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("env,line", [
    ({"CRESOWLVE_BASE_URL": "127.0.0.1:9/v1"},
     "error: CRESOWLVE_BASE_URL: must be an http(s) URL such as https://api.openai.com/v1, got '127.0.0.1:9/v1'; "
     "nothing was run"),
    ({"CRESOWLVE_JUDGE_BASE_URL": "http://127.0.0.1:9/v1/chat/completions"},
     "error: CRESOWLVE_JUDGE_BASE_URL: must be the base URL without the API path /chat/completions (appended to "
     "every request), e.g. http://127.0.0.1:9/v1; nothing was run"),
    # a blank model name was sent as the model to answer (or judge) every question
    ({"CRESOWLVE_MODEL": " "}, "error: CRESOWLVE_MODEL: must not be empty; nothing was run"),
    ({"CRESOWLVE_JUDGE_MODEL": "\t"}, "error: CRESOWLVE_JUDGE_MODEL: must not be empty; nothing was run"),
    ({"CRESOWLVE_API_KEY_ENV": "CRESOWLVE_TEST_NO_SUCH_KEY"},
     "is not set (CRESOWLVE_API_KEY_ENV; it should hold the API key); nothing was run"),
])
def test_the_main_jobs_provider_variables_are_checked_before_the_first_report(env, line, tmp_path, capsys,
                                                                               monkeypatch):
    """As `eval` checks its flags: `run` rendered 00_data_overview, then failed in 02's cell with a
    traceback (a URL that is not one), or ran with no key at all (a key variable that is not set)."""
    from cresowlve_core import mainjob

    monkeypatch.delenv("CRESOWLVE_TEST_NO_SUCH_KEY", raising=False)
    for var, value in {"CRESOWLVE_BASE_URL": "http://127.0.0.1:9/v1", "CRESOWLVE_MODEL": "m", **env}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(mainjob.Renderer, "render", lambda *a, **kw: pytest.fail("a report was rendered"))
    assert cli.main(["run", "--quick", "--reports-dir", str(tmp_path / "reports")]) == 2
    assert capsys.readouterr().err.strip().endswith(line)
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize(("options", "named"), [
    (["--judge-repeat"], "--judge-repeat sets"),
    (["--judge-max-tokens", "4096", "--judge-effort", "low"], "--judge-effort, --judge-max-tokens set"),
    (["--judge-protocol", "paper"], "--judge-protocol sets"),
    (["--judge-temperature", "0.5"], "--judge-temperature sets"),
    (["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-max-cost", "1"], "--judge-base-url, --judge-max-cost set"),
], ids=["repeat", "budget-and-effort", "protocol", "temperature", "url-and-cost"])
def test_a_judge_option_without_a_judge_is_refused(tmp_path, capsys, options, named):
    """A judge option with no --judge-model did nothing (`--judge-repeat`: the manifest's config still said
    judge_repeat: true), and the run exited 0 with no judge. Now refused before a run directory exists."""
    code = cli.main(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", *options,
                     "--run-dir", str(tmp_path / "run")])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {named} the judge, and there is no judge: give --judge-model; nothing was run")
    assert not (tmp_path / "run").exists()
