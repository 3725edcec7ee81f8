"""Report sections of ``06_synthetic``: one call per notebook cell.

:func:`build_section` runs the pipeline and shows what ran; every other section returns a
:class:`~cresowlve_core.reporting.Section` (records, prose, table, chart), which the notebook shows
with ``.show()`` (that returns the records it stores).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.reporting import Section
from cresowlve_core.sources.kg import KnowledgeSource
from cresowlve_core.stats import wilson_interval
from cresowlve_core.synthetic.domains import Domain, domains_by_name
from cresowlve_core.synthetic.notability import (
    BAND_RULE_PERCENTILES,
    NotabilityBand,
    band_from_percentiles,
    percentile_table,
)
from cresowlve_core.synthetic.pipeline import (
    PAPER_YIELD,
    SynthConfig,
    SynthResult,
    load_source,
    run_synth,
    synth_stage,
)
from cresowlve_core.text import shown


def notability_section(cfg: SynthConfig) -> Section:
    """Degree distribution of the labelled domain members of ``cfg``'s domains, its band, and the band
    the rule derives."""
    return notability(load_source(cfg), domains_by_name(cfg.domains), cfg.band())


def notability(source: KnowledgeSource, domains: Sequence[Domain], band: NotabilityBand) -> Section:
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
    return Section(rec, msg, table, chart)


#: the solver's outcome per puzzle, as the difficulty chart names it
OUTCOME_LABELS = {"kept": "kept: solved literal, failed obfuscated", "failed_literal": "dropped: failed literal",
                  "solved_obfuscated": "dropped: solved both", "unscored": "not scored"}


def build_section(cfg: SynthConfig, embedded: bool | None = None) -> SynthResult:
    """Run every stage (resumable), show the embedded-model banner when a role ran on it (or
    ``embedded``), record the summary and print the build directory and the prompts each step used."""
    from cresowlve_core.banners import show_banner
    from cresowlve_core.exitcodes import STAGES_RECORD
    from cresowlve_core.notebook_records import record

    result = run_synth(cfg)
    if embedded or any(result.embedded.values()):
        show_banner("embedded", "Verbaliser and solver run on the embedded model: few-shot completion prompts; "
                                "the puzzles, answers and yield are weak and say nothing about the method.")
    record("summary", {k: result.summary[k] for k in ("stages", "outcomes", "yield", "embedded", "prompts", "errors",
                                                      "stopped", "scoring")})
    record(STAGES_RECORD, [synth_stage(result.summary)])  # `cresowlve report 06_synthetic` exits as `synth` would
    print(f"build directory: {cfg.build_dir}")
    print("prompts: " + "; ".join(f"{k} {', '.join(v) or '(no call)'}" for k, v in result.summary["prompts"].items()))
    return result


def outputs_section(result: SynthResult) -> dict[str, str]:
    """Print where each output file of the build is; return them for the record."""
    exports: dict[str, str] = result.summary["exports"]
    print("\n".join(f"{k}: {v}" for k, v in exports.items()))
    return exports


def yield_section(result: SynthResult) -> Section:
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
    if short := result.summary.get("candidate_shortfall"):
        msg += f" Fewer candidates than asked: {short}."
    if result.stopped:
        msg += f" The run stopped early: {result.stopped}."
    withheld = result.summary.get("withheld") or {}
    verb, solve = withheld.get("verbalise") or {}, withheld.get("solve") or {}
    if any(verb.values()) or any(solve.values()):
        msg += (f" Not answers: the verbaliser refused {verb.get('n_refused', 0)} and its provider's filter stopped "
                f"{verb.get('n_filtered', 0)} candidates (no puzzle, not counted as answered); the solver refused "
                f"{solve.get('n_refused', 0)} and was filtered on {solve.get('n_filtered', 0)} versions (their "
                "candidates are unscored, never kept).")
    if cut := (result.summary.get("cut_off") or {}).get("verbalise"):
        msg += (f" {cut} verbalisations were cut off at the token limit (`verbaliser_max_tokens`) before a whole "
                "puzzle: no puzzle, never kept.")
    if cut := (result.summary.get("cut_off") or {}).get("solve"):
        msg += (f" {cut} solver answers were cut off at the token limit (`solver_max_tokens`): a cut-off answer that "
                "is not right leaves its candidate unscored, never kept as a creative leap.")
    if unread := (result.summary.get("solver_answers") or {}).get("unread"):
        msg += (f" {unread} solver replies held no answer to read (a copy of the prompt): their candidates "
                "are unscored, never kept.")
    if errored := (result.summary.get("errors") or {}).get("solve"):
        msg += (f" **{errored} puzzles errored at the solver**: their candidates have no solver answer and are not kept; "
                "run again to retry them.")
    return Section(result.summary["yield"], msg, table)


def headline(result: SynthResult) -> str:
    """The synthetic report's one line: candidates kept, beside the paper's yield."""
    kept = result.summary["yield"]
    calls = result.summary.get("calls") or {}
    unfinished = [f"{calls[k]} model tasks {word}" for k, word in (("n_error", "errored"), ("n_not_run", "not run"))
                  if calls.get(k)]
    return (f"kept {shown(kept['kept'])} of {shown(kept.get('of_candidates'))} synthetic candidates "
            f"(the paper: {kept.get('paper_kept')} of {kept.get('paper_of')})"
            + (f" — incomplete: {', '.join(unfinished)}" if unfinished else ""))


def _facts_text(result: SynthResult, cand: Any) -> str:
    src = result.source
    return "; ".join(f"{src.english_label(p) or p} → {src.english_label(o) or o}" for p, o in cand.facts)


def examples_section(result: SynthResult, k: int = 3) -> Section:
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
            "outcome": s.get("outcome") or ("leak: " + ", ".join(x["name"] for x in v["leaks"]) if v["leaks"]
                                            else "no solver answer (errored or not run)"),
            "difficulty_score": s.get("difficulty_score"),
        })
    if rows:
        return Section(len(rows), f"{len(rows)} example(s).", pd.DataFrame(rows))
    raw = [{"anchor": result.source.english_label(by_id[i].anchor), "facts": _facts_text(result, by_id[i]),
            "verbaliser output (unparseable)": (r.get("raw") or "")[:400]} for i, r in list(result.verbalised.items())[:k]]
    return Section(0, "No verbalisation parsed, so there is no puzzle to show; the raw outputs are below.",
                   pd.DataFrame(raw) if raw else None)


def difficulty_section(result: SynthResult) -> Section:
    """Difficulty scores by outcome, and whether the score predicts failing the obfuscated version."""
    import altair as alt

    rows = [{"id": i, "outcome": r["outcome"], "difficulty_score": r.get("difficulty_score"),
             "failed_obfuscated": r["obfuscated"]["correct"] is False}
            for i, r in result.solved.items() if r.get("difficulty_score") is not None]
    pred = result.summary["difficulty"]
    if not rows:
        return Section(pred, "No item was scored by the solver on both versions: no difficulty analysis.")
    df = pd.DataFrame(rows)
    table = df.groupby("outcome")["difficulty_score"].agg(["count", "mean", "median"]).reset_index()
    labelled = df.assign(outcome=df["outcome"].map(OUTCOME_LABELS).fillna(df["outcome"]))
    chart = alt.Chart(labelled).mark_tick(thickness=2, size=24).encode(
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
    if unscored := (result.summary.get("outcomes") or {}).get("unscored"):
        msg += (f" {unscored} unscored puzzle(s) (a version refused, filtered, cut off or with no answer to read) "
                "are left out.")
    return Section(pred, msg, table, chart)
