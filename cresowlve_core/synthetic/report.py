"""Report sections of ``06_synthetic``: one function per notebook cell.

Each returns a small dict: ``record`` (JSON values the notebook stores with ``record``),
``table`` (a DataFrame, or ``None``), ``chart`` (an altair chart, or ``None``) and ``message``
(one line of Markdown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.stats import wilson_interval
from cresowlve_core.synthetic.domains import Domain
from cresowlve_core.synthetic.notability import (
    BAND_RULE_PERCENTILES,
    NotabilityBand,
    band_from_percentiles,
    percentile_table,
)
from cresowlve_core.synthetic.pipeline import PAPER_YIELD, SynthResult


def _section(record: Any, table: pd.DataFrame | None = None, chart: Any = None, message: str = "") -> dict[str, Any]:
    return {"record": record, "table": table, "chart": chart, "message": message}


def notability_section(source: KnowledgeSource, domains: Sequence[Domain], band: NotabilityBand) -> dict[str, Any]:
    """Degree distribution of the labelled domain members, the band, and the band the rule derives."""
    import altair as alt

    rows = []
    for d in domains:
        for q in d.members(source):
            if source.english_label(q):
                rows.append({"domain": d.name, "qid": q, "notability": source.notability(q)})
    df = pd.DataFrame(rows, columns=["domain", "qid", "notability"])
    pooled = df.drop_duplicates("qid")["notability"].to_numpy()
    derived = band_from_percentiles(pooled) if pooled.size else None
    pct = percentile_table(pooled)
    in_band = int(((pooled >= band.low) & (pooled <= band.high)).sum())
    rec = {"band": [band.low, band.high], "rule_band": [derived.low, derived.high] if derived else None,
           "rule_percentiles": list(BAND_RULE_PERCENTILES), "percentiles": pct, "n_entities": int(pooled.size),
           "n_in_band": in_band, "measure": getattr(source, "notability_measure", "?")}
    chart = None
    if len(df):
        edges = [0, 1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256, 512, 10**9]
        cut = pd.cut(df["notability"], edges, right=False, labels=[f"{a}" for a in edges[:-1]])
        hist = (df.assign(bin_start=cut.astype(int)).groupby(["domain", "bin_start"], observed=True).size()
                .reset_index(name="entities"))
        hist["in_band"] = hist["bin_start"].between(band.low, band.high)
        # one panel per domain, bins in numeric order: a log axis never carries stacked shares
        chart = alt.Chart(hist).mark_bar().encode(
            x=alt.X("bin_start:O", title=f"Notability: {rec['measure']} (bin start)", sort="ascending"),
            y=alt.Y("entities:Q", title="Entities (log scale)", scale=alt.Scale(type="symlog"),
                    axis=alt.Axis(format="d", values=[0, 1, 10, 100, 1000, 10000])),
            opacity=alt.condition(alt.datum.in_band, alt.value(1.0), alt.value(0.35)),
            tooltip=["domain", "bin_start", "entities", "in_band"],
        ).properties(width=380, height=150).facet(
            facet=alt.Facet("domain:N", title=None), columns=3,
        ).properties(title=f"Notability of labelled domain members; bins inside the band {band} in dark blue")
    table = pd.DataFrame([pct]) if pct.get("n") else None
    msg = (f"{in_band} of {pooled.size} labelled domain members lie in the band {band} ({rec['measure']}); "
           f"the rule [p{BAND_RULE_PERCENTILES[0]:g}, p{BAND_RULE_PERCENTILES[1]:g}] gives "
           f"{derived if derived else 'n/a'} on this graph.")
    return _section(rec, table, chart, msg)


#: the solver's outcome per puzzle, as the difficulty chart names it
OUTCOME_LABELS = {"kept": "kept: solved literal, failed obfuscated", "failed_literal": "dropped: failed literal",
                  "solved_obfuscated": "dropped: solved both", "unscored": "not scored"}


def yield_section(result: SynthResult) -> dict[str, Any]:
    """Units left after each stage, with the paper's 7/100 beside the final yield."""
    st = result.summary["stages"]
    labels = {
        "anchors_tried": "anchors tried (in band, labelled)",
        "candidates": "candidates (joint fact set found)",
        "verbalised": "verbaliser answered",
        "parsed": "verbalisation parsed",
        "leak_free": "no answer name leaked",
        "scored_both": "solver scored on both versions",
        "solved_literal": "solved the literal version",
        "kept": "kept: failed the obfuscated version",
    }
    n_c = st["candidates"]
    rows = []
    for k, label in labels.items():
        lo, hi = wilson_interval(st[k], n_c) if n_c else (float("nan"), float("nan"))
        share = f"{st[k] / n_c:.2f}" if n_c and k != "anchors_tried" else "–"  # anchors precede candidates
        rows.append({"stage": label, "n": st[k], "of candidates": share,
                     "95% CI": f"[{lo:.2f}, {hi:.2f}]" if n_c and k != "anchors_tried" else ""})
    table = pd.DataFrame(rows)
    kept = st["kept"]
    plo, phi = wilson_interval(PAPER_YIELD[0], PAPER_YIELD[1])
    msg = (f"Yield: **{kept}/{n_c}** candidates kept (paper, App. D: **{PAPER_YIELD[0]}/{PAPER_YIELD[1]}** with "
           f"Gemini-3-Flash as verbaliser and solver, 95% CI [{plo:.2f}, {phi:.2f}]).")
    if result.stopped:
        msg += f" The run stopped early: {result.stopped}."
    return _section({"stages": st, "outcomes": result.summary["outcomes"], "yield": result.summary["yield"]}, table,
                    None, msg)


def _facts_text(result: SynthResult, cand: Any) -> str:
    src = result.source
    return "; ".join(f"{src.english_label(p) or p} → {src.english_label(o) or o}" for p, o in cand.facts)


def examples_section(result: SynthResult, k: int = 3) -> dict[str, Any]:
    """Survivors first, then other solved items, then parsed verbalisations; raw text if nothing parsed."""
    by_id = {c.id: c for c in result.build.candidates}
    order = ([s["candidate"].id for s in result.survivors]
             + [i for i in result.solved if result.solved[i]["outcome"] != "kept"]
             + [i for i, r in result.verbalised.items() if r.get("parsed") and i not in result.solved])
    rows = []
    for i in list(dict.fromkeys(order))[:k]:
        c, v = by_id[i], result.verbalised[i]
        s = result.solved.get(i, {})
        rows.append({
            "anchor": result.source.english_label(c.anchor), "facts": _facts_text(result, c),
            "answers (all)": ", ".join(result.source.english_label(q) or q for q in c.answers),
            "literal": v["parsed"]["literal"], "obfuscated": v["parsed"]["obfuscated"],
            "explanation": v["parsed"]["explanation"],
            "solver literal": (s.get("literal") or {}).get("answer"),
            "solver obfuscated": (s.get("obfuscated") or {}).get("answer"),
            "outcome": s.get("outcome") or ("leak: " + ", ".join(x["name"] for x in v["leaks"]) if v["leaks"] else "not solved"),
            "difficulty_score": s.get("difficulty_score"),
        })
    if rows:
        return _section({"n_examples": len(rows)}, pd.DataFrame(rows), None, f"{len(rows)} example(s).")
    raw = [{"anchor": result.source.english_label(by_id[i].anchor), "facts": _facts_text(result, by_id[i]),
            "verbaliser output (unparseable)": (r.get("raw") or "")[:400]} for i, r in list(result.verbalised.items())[:k]]
    return _section({"n_examples": 0}, pd.DataFrame(raw) if raw else None, None,
                    "No verbalisation parsed, so there is no puzzle to show; the raw outputs are below.")


def difficulty_section(result: SynthResult) -> dict[str, Any]:
    """Difficulty scores by outcome, and whether the score predicts failing the obfuscated version."""
    import altair as alt

    rows = [{"id": i, "outcome": r["outcome"], "difficulty_score": r.get("difficulty_score"),
             "failed_obfuscated": r["obfuscated"]["correct"] is False}
            for i, r in result.solved.items() if r.get("difficulty_score") is not None]
    pred = result.summary["difficulty"]
    if not rows:
        return _section(pred, None, None, "No item was scored by the solver on both versions: no difficulty analysis.")
    df = pd.DataFrame(rows)
    table = df.groupby("outcome")["difficulty_score"].agg(["count", "mean", "median"]).reset_index()
    shown = df.assign(outcome=df["outcome"].map(OUTCOME_LABELS).fillna(df["outcome"]))
    chart = alt.Chart(shown).mark_tick(thickness=2, size=24).encode(
        x=alt.X("difficulty_score:Q", title="Difficulty score: 1 − cos(literal, obfuscated), MiniLM"),
        y=alt.Y("outcome:N", title=None, axis=alt.Axis(labelLimit=260)),
        tooltip=["id", alt.Tooltip("difficulty_score:Q", format=".3f", title="difficulty score"), "outcome"],
    ).properties(width=560, height=alt.Step(40))

    def fmt(v: Any) -> str:
        return "n/a" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.2f}"

    if pred["auc"] is None:
        msg = (f"Over the {pred['n']} item(s) solved literally, {pred['n_failed']} failed the obfuscated version: "
               "both outcomes are needed for AUC and the point-biserial correlation, so they are not reported.")
    else:
        msg = (f"Over {pred['n']} items solved literally ({pred['n_failed']} failed the obfuscated version): "
               f"AUC {fmt(pred['auc'])} [{fmt(pred['auc_low'])}, {fmt(pred['auc_high'])}] (bootstrap, "
               f"{pred['n_boot']} resamples); point-biserial r {fmt(pred['point_biserial'])} "
               f"[{fmt(pred['pb_low'])}, {fmt(pred['pb_high'])}] (Fisher z).")
    return _section(pred, table, chart, msg)
