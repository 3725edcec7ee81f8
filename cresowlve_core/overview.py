"""Counts behind ``notebooks/00_data_overview.ipynb``: what data the project ships, by source,
difficulty and language."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from cresowlve_core.paths import shipped_data
from cresowlve_core.vega import count_ticks

PACK_SUFFIXES = (".txt", ".4s")


def pack_table(packs_dir: Path | None = None) -> pd.DataFrame:
    """One row per parsed question block of every shipped ChGK pack (flagged blocks included)."""
    from cresowlve_core.sources.chgk import read_pack_report

    packs_dir = Path(packs_dir or shipped_data("chgk"))
    rows = []
    for path in sorted(p for p in packs_dir.iterdir() if p.suffix in PACK_SUFFIXES):
        report = read_pack_report(path)
        for q in report.questions:
            rows.append(
                {
                    "source": path.name,
                    "format": report.format,
                    "encoding": report.encoding,
                    "id": q.id,
                    "difficulty": q.difficulty,
                    "has_zachet": bool(q.other_answers),
                    "has_handout": bool(q.handout),
                    "take_rate": q.take_rate,
                    "flagged": bool(q.flags),
                    "flags": ", ".join(q.flags),
                }
            )
    return pd.DataFrame(rows)


def pack_summary(packs: pd.DataFrame) -> pd.DataFrame:
    """Per pack: questions, flagged blocks, zachet, handouts, known difficulty and take rate."""
    g = packs.groupby(["source", "format", "encoding"], dropna=False)
    return g.agg(
        questions=("id", "size"),
        flagged=("flagged", "sum"),
        with_zachet=("has_zachet", "sum"),
        with_handout=("has_handout", "sum"),
        with_difficulty=("difficulty", "count"),
        with_take_rate=("take_rate", "count"),
    ).reset_index()


def item_table(include_removed: bool = True) -> pd.DataFrame:
    """One row per (demo item, language view)."""
    from cresowlve_core.sources.sample import load_demo_items

    rows = []
    for item in load_demo_items(include_removed=include_removed):
        for lang in ("en", "ru"):
            if item.has(lang):
                rows.append(
                    {
                        "id": item.id,
                        "lang": lang,
                        "difficulty": item.difficulty,
                        "reasoning_type": item.reasoning_type or "unlabelled",
                        "in_benchmark": bool(item.meta.get("in_benchmark", True)),
                        "pipeline_outcome": item.meta.get("pipeline_outcome"),
                    }
                )
    return pd.DataFrame(rows)


def removed_items(items: pd.DataFrame) -> pd.DataFrame:
    """Paper items the construction pipeline removed, with the full reason (``pipeline_outcome``)."""
    removed = items[~items["in_benchmark"]][["id", "lang", "pipeline_outcome"]]
    return removed.reset_index(drop=True)


def headline(summary: pd.DataFrame, items: pd.DataFrame) -> str:
    """One line for the index page: packs, questions, flagged blocks, demo items per language."""
    kept = items[items["in_benchmark"]].groupby("lang").size().to_dict()
    langs = ", ".join(f"{n} {lang.upper()}" for lang, n in sorted(kept.items()))
    return (f"{len(summary)} ChGK packs, {int(summary['questions'].sum())} question blocks "
            f"({int(summary['flagged'].sum())} flagged); demo items: {langs or 'none'}")


def difficulty_counts(items: pd.DataFrame) -> pd.DataFrame:
    d = items.assign(difficulty=items["difficulty"].map(lambda v: "unknown" if pd.isna(v) else str(int(v))))
    return d.groupby(["lang", "difficulty"]).size().rename("items").reset_index()


def difficulty_chart(counts: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(counts, title="Demo items by difficulty and language")
        .mark_bar()
        .encode(
            x=alt.X("difficulty:N", title="Difficulty (1 = very simple, 5 = very hard)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("items:Q", title="Items", axis=alt.Axis(**count_ticks(counts["items"].max()))),
            color=alt.Color("lang:N", title="Language"),
            xOffset="lang:N",
            tooltip=["lang", "difficulty", "items"],
        )
        .properties(width=360, height=220)
    )
