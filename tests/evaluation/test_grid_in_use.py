"""A grid whose cell's run directory is in use by another process exits 2 (docs/reliability.md:
"a run directory in use" is exit 2), not 3; the cell sends nothing, the other cell runs."""

from __future__ import annotations

import fcntl

import yaml
from fakeserver import FakeServer

from cresowlve_core.cli import main
from cresowlve_core.runtime.rundir import LOCK


def _answers(req) -> str:
    if "candidate_answer" in req.prompt:
        nonce = req.prompt.rsplit("VERDICT-", 1)[1].split(":")[0]
        return f"ok\nVERDICT-{nonce}: CORRECT"
    return "<Answer>x</Answer>"


def test_a_cell_in_use_is_exit_2_with_nothing_sent_for_it(tmp_path, capsys):
    with FakeServer(answers=_answers) as srv:
        conf = {"name": "busy", "items": "demo", "langs": ["en"], "limit": 2, "parallel": 1, "report": False,
                "runs_dir": str(tmp_path / "grid"), "options": {"concurrency": 2, "max_tokens": 32},
                "models": [{"model": "model-a", "base_url": srv.base_url},
                           {"model": "model-b", "base_url": srv.base_url}]}
        (tmp_path / "grid.yaml").write_text(yaml.safe_dump(conf))
        busy = tmp_path / "grid" / "model-a__en"
        busy.mkdir(parents=True)
        with open(busy / LOCK, "a+") as held:  # another process's lock (flock is per open file)
            fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            code = main(["grid", str(tmp_path / "grid.yaml")])
        models = [r.body.get("model") for r in srv.requests]
    err = capsys.readouterr().err
    assert code == 2, err
    assert "model-a" not in models and models.count("model-b") == 2  # the free cell ran, the busy one sent 0
    assert "1 cell(s) refused (model-a__en" in err and "in use" in err
