"""The paper's grid (configs/paper_table1.yaml) as shipped, pointed at the replay server: all 18
configurations x 2 languages finish with exit 0.

Only the base URLs are rewritten to the replay server's prefixes (the host no longer tells the
provider, so each model gets the ``provider:`` its real host selects), the items are the hub
fixture (tests/fixtures/hub, one item per language) and the report is off. Every other setting, the
judge included, is the shipped file's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from replay.server import ReplayServer

REPO = Path(__file__).resolve().parents[2]
CODE = Path(os.environ.get("REPLAY_CODE", REPO))  # the checkout whose CLI is run (default: this one)
HUB = REPO / "tests" / "fixtures" / "hub"
#: the real host of each provider in the shipped config -> the replay route (and profile) serving it
ROUTES = {"api.openai.com": "openai", "openrouter.ai": "openrouter", "generativelanguage.googleapis.com": "gemini"}


def _point_at(entry: dict, srv: ReplayServer) -> None:
    provider = ROUTES[urlsplit(entry["base_url"]).hostname or ""]
    entry["base_url"] = srv.base_url(provider)
    entry.setdefault("provider", provider)


def test_paper_grid_runs_every_configuration_in_both_languages(tmp_path):
    config = yaml.safe_load((REPO / "configs" / "paper_table1.yaml").read_text())
    with ReplayServer() as srv:
        for model in config["models"]:
            _point_at(model, srv)
        _point_at(config["judge"], srv)
        config.update(items=str(HUB / "{lang}.jsonl"), limit=1, runs_dir=str(tmp_path / "grid"), report=False)
        path = tmp_path / "paper_table1_replay.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        env = dict(os.environ, PYTHONPATH=str(CODE),
                   **{name: f"replay-{name.split('_')[0].lower()}"  # placeholders: the replay checks the header, not the value
                      for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY")})
        proc = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "grid", str(path)], cwd=CODE, env=env,
                              capture_output=True, text=True, timeout=600)
        refused = [e for e in srv.log if e["status"] != 200]
        sent = list(srv.log)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not refused, refused[:3]
    configurations = sum(len(m.get("efforts", [None])) for m in config["models"])
    assert configurations == 18
    summaries = sorted((tmp_path / "grid").glob("*/summary.json"))
    assert len(summaries) == 18 * 2
    for s in summaries:
        data = json.loads(s.read_text())
        assert (data["n_items"], data["n_ok"], data["n_judged"]) == (1, 1, 1), s
    # every provider of the paper was asked; the judge (gpt-4o) was asked too (identical judge
    # prompts across cells are answered from the cache, so there are fewer calls than verdicts)
    assert {e["provider"] for e in sent} == {"openai", "openrouter", "gemini"}
    assert any(e["body"].get("model") == config["judge"]["model"] for e in sent)
