"""Smaller command-line points: a flag typo gets the subcommand's usage and the
nearest flag; a busy port is named; ``data/errors/`` is git-ignored."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from cresowlve_core.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("argv", "usage", "hint"), [
    (["errors", "label", "--runs", "x", "--limt", "3"], "usage: cresowlve errors label", "did you mean --limit?"),
    (["eval", "--modle", "m"], "usage: cresowlve eval", "did you mean --model?"),
    (["create", "score", "--run-dir", "x", "--judge-modle", "j"], "usage: cresowlve create score",
     "did you mean --judge-model?"),
])
def test_a_flag_typo_gets_the_subcommands_usage_and_the_nearest_flag(argv, usage, hint, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith(usage) and hint in err.splitlines()[-1], err


@pytest.mark.parametrize("command", ["serve-reports", "serve-local"])
def test_a_busy_port_is_named(command, tmp_path, capsys, monkeypatch):
    from cresowlve_core.llm import local

    monkeypatch.setattr(local.LocalServer, "__enter__", lambda self: pytest.fail("the server was started"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "index.html").write_text("<html>the index</html>")
        extra = ["--reports-dir", str(tmp_path)] if command == "serve-reports" else []
        rc = main([command, "--port", str(port), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == (f"error: port {port} on 127.0.0.1 is already in use; stop what serves it or "
                               "choose another with --port")


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs the git checkout")
def test_error_labels_are_git_ignored():
    res = subprocess.run(["git", "check-ignore", "-q", "data/errors/labels/x/labels.jsonl"], cwd=REPO, timeout=30)
    assert res.returncode == 0


def test_a_bad_grid_config_gets_one_line_per_bad_key(tmp_path, capsys):
    cfg = tmp_path / "g.yaml"
    cfg.write_text('models:\n  - {model: m, base_url: "http://127.0.0.1:9/v1", efort: high}\nlangs: [en]\nitmes: demo\n')
    rc = main(["grid", str(cfg)])
    lines = capsys.readouterr().err.splitlines()
    assert rc == 2
    assert lines == [f"error: {cfg}: invalid grid config (3 problem(s)):", "  name: required",
                     "  models.0.efort: unknown key (did you mean 'efforts'?)",
                     "  itmes: unknown key (did you mean 'items'?)"]
    assert not any(p.name != "g.yaml" for p in tmp_path.iterdir())  # nothing made


def test_a_refused_build_leaves_no_folder(tmp_path, capsys):
    (tmp_path / "packs").mkdir()
    rc = main(["build", "--source", str(tmp_path / "packs"), "--build-dir", str(tmp_path / "build"),
               "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--no-cache"])
    assert rc == 2 and "no *.txt" in capsys.readouterr().err
    assert not (tmp_path / "build").exists()
