"""Every stage that falls back to the embedded model refuses a run directory of another
configuration before that model starts, as ``eval`` does (``test_refuse_before_embedded.py``).

The embedded server is a fake here: a :class:`FakeServer` mapped to the ``embedded`` provider
profile, as the real server maps its own port, whose starts are counted. For each stage the first
command starts it and writes the run directories; the same command with one setting changed is
refused (exit 2, naming the field) without a second start; the first command again resumes (it
starts the server: the check refuses no run directory of the same configuration)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from fakeserver import FakeServer

from cresowlve_core.cli import main

for sub in ("contamination", "error_analysis"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / sub))
from test_contamination_pipeline import make_items, write_runs  # noqa: E402
from test_errors_label import _items, write_run  # noqa: E402


@pytest.fixture
def embedded_starts(monkeypatch):
    """The embedded model is a fake server; each start is recorded."""
    from cresowlve_core.llm import local
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    starts: list[str] = []

    @contextlib.contextmanager
    def fake_local_server(port=None, **kwargs):
        with FakeServer() as srv:
            starts.append(srv.base_url)
            served = urlsplit(srv.base_url).port
            local._mark(served)
            try:
                yield SimpleNamespace(base_url=srv.base_url, model=local.LOCAL_MODEL)
            finally:
                local._unmark(served)

    monkeypatch.setattr(local, "local_server", fake_local_server)
    monkeypatch.delenv(PROVIDERS_ENV, raising=False)
    return starts


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    """The exit code, the last line of stderr and all of it."""
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    return rc, err.splitlines()[-1] if err else "", err


def _refused_before_start(first: list[str], changed: list[str], field: str, starts: list[str], capsys) -> None:
    n = len(starts)
    rc, last, _ = _run(first, capsys)
    assert len(starts) == n + 1 and "another configuration" not in last, last  # the first run started it
    rc, last, err = _run(first + changed, capsys)
    assert rc == 2 and "the run directory holds another configuration" in last and f"{field}:" in last, last
    assert len(starts) == n + 1  # refused before the embedded model started again
    assert "EMBEDDED" not in err  # nor announced it
    rc, last, _ = _run(first, capsys)
    assert len(starts) == n + 2 and "another configuration" not in last, last  # the same configuration resumes


def test_build_of_another_configuration_is_refused_before_the_embedded_model(tmp_path, capsys, embedded_starts,
                                                                            monkeypatch):
    import numpy as np

    from cresowlve_core import embeddings

    # the domains the fake "annotates" are routed by a stand-in for the sentence embedding model
    monkeypatch.setattr(embeddings, "embed", lambda texts, **kwargs: np.ones((len(texts), 4)))
    _refused_before_start(["build", "--build-dir", str(tmp_path / "b"), "--limit", "2"], ["--seed", "7"], "seed",
                          embedded_starts, capsys)


def test_synth_of_another_configuration_is_refused_before_the_embedded_model(tmp_path, capsys, embedded_starts):
    _refused_before_start(["synth", "--build-dir", str(tmp_path / "s"), "--n", "2"], ["--seed", "7"], "seed",
                          embedded_starts, capsys)


def test_create_generate_of_another_configuration_is_refused_before_the_embedded_model(tmp_path, capsys,
                                                                                       embedded_starts):
    _refused_before_start(["create", "generate", "--run-dir", str(tmp_path / "g"), "--limit", "1"],
                          ["--temperature", "0.5"], "temperature", embedded_starts, capsys)


def test_create_score_of_another_configuration_is_refused_before_the_embedded_model(tmp_path, capsys,
                                                                                    embedded_starts):
    main(["create", "generate", "--run-dir", str(tmp_path / "g"), "--limit", "1"])
    _refused_before_start(["create", "score", "--run-dir", str(tmp_path / "g")], ["--seed", "7"], "seed",
                          embedded_starts, capsys)


def test_errors_label_of_another_configuration_is_refused_before_the_embedded_model(tmp_path, capsys,
                                                                                    embedded_starts):
    items = _items(3)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    _refused_before_start(["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir",
                           str(tmp_path / "e")], ["--seed", "7"], "seed", embedded_starts, capsys)


def test_contamination_of_another_configuration_is_refused_before_the_embedded_model(tmp_path, capsys,
                                                                                     embedded_starts):
    write_runs(tmp_path, make_items())
    _refused_before_start(["contamination", "run", "--runs", str(tmp_path / "runs" / "*"), "--out-dir",
                           str(tmp_path / "c"), "--max-items", "2"], ["--seed", "7"], "seed", embedded_starts,
                          capsys)
