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
    """The one error line of ``argv``, which the parser must refuse with exit 2."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "Traceback" not in err
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
