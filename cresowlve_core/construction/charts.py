"""Label distributions of a build as charts (the paper's Fig. 2): how many items carry each
creative concept, knowledge-domain group and culture, one horizontal bar chart per field."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from cresowlve_core.construction.export import label_coverage, label_distribution
from cresowlve_core.items import Item
from cresowlve_core.vega import count_ticks

#: Item field -> chart title (the panels of Fig. 2).
FIG2_FIELDS: tuple[tuple[str, str], ...] = (
    ("creative_domains", "Creative concepts"), ("knowledge_domains", "Knowledge domains"), ("cultures", "Cultures"))


def label_frame(items: Sequence[Item], top: int = 20) -> pd.DataFrame:
    """The counts behind the charts: one row per (field, label) with the number of items carrying
    it, the ``top`` most common labels per field, and ``share`` = items / n, n being the items that
    carry their annotation step's labels (:func:`~cresowlve_core.construction.export.has_model_labels`)."""
    n = label_coverage(items)
    rows = [{"field": title, "label": r["label"], "items": r["items"], "share": r["items"] / n[field]}
            for field, title in FIG2_FIELDS for r in label_distribution(items, field, top)]
    return pd.DataFrame(rows, columns=["field", "label", "items", "share"])


def label_charts(items: Sequence[Item], top: int = 20, subset: str = "creative") -> alt.HConcatChart:
    """Fig. 2 for these items: one bar chart of label counts per field (most common first, at most
    ``top`` labels each). A field without labels gets an empty chart titled "no labels"."""
    df = label_frame(items, top)
    coverage = label_coverage(items)
    panels = []
    for field, title in FIG2_FIELDS:
        part = df[df["field"] == title]
        n = coverage[field]
        # n: the items labelled by the model; the others (refused, filtered, ...) are left out, and said so
        population = f"n = {n} items" if n == len(items) else f"n = {n} of {len(items)} items labelled"
        if part.empty:  # a sentence, not an empty axis that reads as a chart that failed
            none = (f"none of the {len(items)} items carries one" if n == len(items) and items else
                    f"none of the {n} items labelled by the model ({len(items)} in all) carries one" if items
                    else "no items")
            panels.append(alt.Chart(pd.DataFrame({"text": [none]}))
                          .mark_text(fontSize=12, color="#555").encode(text="text:N")
                          .properties(title=f"{title}: no labels", width=220, height=40))
            continue
        panels.append(alt.Chart(part).mark_bar().encode(
            x=alt.X("items:Q", title="Items", axis=alt.Axis(**count_ticks(part["items"].max()))),
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=200)),
            tooltip=["label:N", "items:Q", alt.Tooltip("share:Q", format=".1%")],
        ).properties(title=f"{title} ({subset} subset, {population})", width=220, height=alt.Step(16)))
    return alt.hconcat(*panels)
