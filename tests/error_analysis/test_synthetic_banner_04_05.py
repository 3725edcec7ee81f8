"""04_error_analysis and 05_contamination carry the synthetic-data banner when any input run is
synthetic (the manifest flag ``synthetic: true`` that write_synthetic_runs sets), and only then."""

from __future__ import annotations

import json

import pytest
from test_errors_label import _items, write_run

from cresowlve_core import banners
from cresowlve_core.contamination import report as creport
from cresowlve_core.contamination.pipeline import run_contamination
from cresowlve_core.error_analysis import report as ereport


def _runs(tmp_path, synthetic: bool):
    items = _items(3)
    root = tmp_path / "runs"
    root.mkdir()
    for lang in ("en", "ru"):
        d = write_run(root, lang, items, {it.id: False for it in items})
        if synthetic:
            m = json.loads((d / "manifest.json").read_text())
            (d / "manifest.json").write_text(json.dumps({**m, "synthetic": True}))
    return str(root / "*")


@pytest.fixture
def shown(monkeypatch):
    kinds: list[str] = []
    monkeypatch.setattr(banners, "show_banner", lambda kind, detail="": kinds.append(kind))
    monkeypatch.setattr(ereport, "show", lambda obj: None)
    monkeypatch.setattr(ereport, "say", lambda text: None)
    monkeypatch.setattr(creport, "show", lambda obj: None)
    monkeypatch.setattr(creport, "say", lambda text: None)
    return kinds


@pytest.mark.parametrize("synthetic", [True, False])
def test_error_analysis_shows_the_synthetic_banner_for_synthetic_runs(tmp_path, shown, synthetic):
    ea = ereport.analyse(_runs(tmp_path, synthetic), out_dir=tmp_path / "out", make_demo=False, label=False)
    ereport.runs_section(ea)
    assert ea.synthetic is synthetic
    assert shown == (["synthetic"] if synthetic else [])


@pytest.mark.parametrize("synthetic", [True, False])
def test_contamination_shows_the_synthetic_banner_for_synthetic_runs(tmp_path, shown, synthetic):
    # every item wrong in both languages: a wrong_both set of 3, nothing to quiz is asked of no endpoint
    c = run_contamination(_runs(tmp_path, synthetic), out_dir=tmp_path / "out", make_demo=False,
                          configs=["nothing"])
    creport.sets_section(c)
    assert c.synthetic is synthetic
    assert shown == (["synthetic"] if synthetic else [])
