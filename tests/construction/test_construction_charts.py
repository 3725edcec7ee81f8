"""Fig. 2 label distributions as charts: the counts, valid Vega-Lite 5, and in the rendered notebook."""

from __future__ import annotations

import json
from pathlib import Path

from fakeserver import FakeServer
from test_construction_pipeline import DEMO, SCRIPTED_DOMAINS, scripted

from cresowlve_core.construction.charts import label_charts, label_frame
from cresowlve_core.items import Item, ItemView
from cresowlve_core.notebooks import VEGALITE_MIME, run_notebook


def _items() -> list[Item]:
    labels = [(["pun", "metaphor"], ["Music"], ["russian"]), (["pun"], ["Music", "History"], []),
              (["pun"], [], ["russian", "french"])]
    return [Item(id=f"i{k}", en=ItemView(question="q", answer="a"), creative_domains=c, knowledge_domains=d,
                 cultures=u, reasoning_type="creative") for k, (c, d, u) in enumerate(labels)]


def _vega(spec: dict) -> dict:
    import vl_convert as vlc

    return vlc.vegalite_to_vega({**spec, "$schema": "https://vega.github.io/schema/vega-lite/v5.json"}, vl_version="5.21")


def test_label_frame_counts_items_per_label() -> None:
    df = label_frame(_items())
    got = {(r.field, r.label): r.items for r in df.itertuples()}
    assert got == {("Creative concepts", "pun"): 3, ("Creative concepts", "metaphor"): 1,
                   ("Knowledge domains", "Music"): 2, ("Knowledge domains", "History"): 1,
                   ("Cultures", "russian"): 2, ("Cultures", "french"): 1}
    assert df.loc[df["label"] == "pun", "share"].item() == 1.0
    assert len(label_frame(_items(), top=1)) == 3  # the most common label per field


def test_label_charts_are_three_valid_bar_charts_and_say_when_empty() -> None:
    spec = label_charts(_items()).to_dict()
    assert [p["mark"]["type"] for p in spec["hconcat"]] == ["bar"] * 3
    assert spec["hconcat"][0]["title"] == "Creative concepts (creative subset, n = 3 items)"
    rows = [r for data in spec["datasets"].values() for r in data]
    assert {"field": "Cultures", "label": "french", "items": 1, "share": 1 / 3} in rows
    assert _vega(spec)["marks"]
    empty = label_charts([]).to_dict()
    assert [p["title"] for p in empty["hconcat"]] == ["Creative concepts: no labels", "Knowledge domains: no labels",
                                                       "Cultures: no labels"]
    assert _vega(empty)["marks"]


def test_construction_notebook_draws_fig2(tmp_path: Path, tmp_cache, construction_domain_embeddings) -> None:
    """The notebook against scripted replies (the paper's items): section 8 draws the Fig. 2 charts."""
    construction_domain_embeddings(tmp_cache, SCRIPTED_DOMAINS)
    with FakeServer(answers=scripted) as srv:
        res = run_notebook("01_construction", {"sources": [DEMO], "limit": None, "model": "fake",
                                               "base_url": srv.base_url, "build_dir": str(tmp_path / "build")},
                           tmp_path / "reports")
    nb = json.loads(res.ipynb.read_text())
    charts = [o["data"][VEGALITE_MIME] for c in nb["cells"] for o in c.get("outputs", [])
              if VEGALITE_MIME in o.get("data", {})]
    assert len(charts) == 1
    rows = [r for data in charts[0]["datasets"].values() for r in data]
    # 6 creative items, every one labelled metaphor + lateral thinking, russian (the scripted replies)
    assert {"field": "Creative concepts", "label": "metaphor", "items": 6, "share": 1.0} in rows
    assert {"field": "Cultures", "label": "russian", "items": 6, "share": 1.0} in rows
    assert _vega(charts[0])["marks"]
    assert (tmp_path / "build" / "export" / "DATA_CARD.md").exists()
