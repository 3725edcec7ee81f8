"""The sections of ``notebooks/05_contamination.ipynb``: each displays and returns a JSON summary."""

from __future__ import annotations

from typing import Any

import pandas as pd

from cresowlve_core.contamination.completion import completion_table, guided_vs_general
from cresowlve_core.contamination.pipeline import ConfigResult, Contamination
from cresowlve_core.contamination.quiz import LETTERS, bcq_table, uniform_gof
from cresowlve_core.contamination.select import SET_LABELS, SETS
from cresowlve_core.contamination.verdict import verdict_table
from cresowlve_core.errors.report import jsonable, say, show


def sets_section(c: Contamination) -> dict[str, Any]:
    """Where the runs came from and the size of the target and control sets per configuration."""
    say(c.source)
    for n in c.notes:
        say(f"- {n}")
    say(f"Questions in **{c.lang}**; perturber `{c.perturber}`, quiz-taker `{c.quiz_taker}`; folder `{c.out_dir}`.")
    if c.set_counts.empty:
        say("**Nothing to analyse**: no configuration has paired En and Ru runs.")
        return {"configs": []}
    show(c.set_counts.rename(columns=SET_LABELS))
    say("`ru_wrong_en_right` and `unknown` (no verdict in one language) go into no set; `unpaired`: items run in one "
        "language only.")
    return {"configs": jsonable(c.set_counts)}


def perturbation_section(c: Contamination) -> dict[str, Any]:
    """How many questions got three usable perturbations; the others with every reason, and the
    reasons counted (per rewrite: one rewrite can be rejected for several reasons)."""
    out = {}
    for r in c.results:
        n_bad = len(r.not_quizzable)
        n_all = r.n_tested
        say(f"**{r.config}**: {n_all - n_bad} of {n_all} tested questions have four distinct options; "
            f"{n_bad} reported below.")
        counts = rejection_counts(r.rejections)
        if n_bad:
            show(counts)
            show(r.not_quizzable)
        out[r.config] = {"quizzable": n_all - n_bad, "not_quizzable": n_bad,
                         "rejections": {row.kind: int(row.rejections) for row in counts.itertuples()},
                         "questions_by_reason": {row.kind: int(row.questions) for row in counts.itertuples()}}
    if not c.results:
        say("No questions to perturb.")
    return out


def rejection_counts(rejections: pd.DataFrame) -> pd.DataFrame:
    """Per reason: how many rejections (rewrite × reason) and how many questions it hit."""
    if rejections.empty:
        return pd.DataFrame(columns=["kind", "rejections", "questions"])
    g = rejections.groupby("kind", sort=True)
    return (pd.DataFrame({"rejections": g.size(), "questions": g["id"].nunique()}).reset_index()
            .sort_values(["rejections", "kind"], ascending=[False, True], ignore_index=True))


def not_quizzed_note(r: ConfigResult, quiz: str, limit: int = 20) -> list[dict[str, Any]]:
    """Say which questions are not in a quiz for want of four distinct options, with the reason."""
    rows = r.not_quizzable.to_dict("records")
    if rows:
        listed = "; ".join(f"`{x['id']}` ({SET_LABELS.get(x['set'], x['set'])}): {x['reason']}" for x in rows[:limit])
        more = f"; … and {len(rows) - limit} more (all in the perturbation section)" if len(rows) > limit else ""
        say(f"Not in the {quiz} ({len(rows)} question(s) without four distinct options): {listed}{more}.")
    return rows


def bdq_section(c: Contamination) -> dict[str, Any]:
    """The bias detector quiz: positions chosen (as in the paper), χ² against uniform, non-preferred;
    the questions left out for want of four distinct options, with the reason."""
    out = {}
    for r in c.results:
        n = len(r.bdq)
        counts = {k: r.bdq_counts.get(k, 0) for k in (*LETTERS, "invalid")}
        gof = uniform_gof(r.bdq_counts)
        say(f"**{r.config}** (N = {n}): " + ", ".join(f"'{k}': {v}" for k, v in counts.items())
            + f". χ² vs uniform = {gof['chi2']:.2f}, p = {gof['p']:.3g} (n valid = {gof['n_valid']}). "
            f"Non-preferred (chosen < N/4 = {n / 4:.1f}): **{', '.join(r.non_preferred) or 'none'}**"
            + ("" if r.truly_non_preferred or not n else " — none below N/4, the least chosen is used"))
        if n:
            import altair as alt

            df = pd.DataFrame({"position": list(counts), "count": list(counts.values())})
            show(alt.Chart(df).mark_bar().encode(x=alt.X("position:N", sort=None), y="count:Q",
                                                 tooltip=["position", "count"]).properties(
                width=260, height=160, title=f"BDQ choices — {r.config}"))
        out[r.config] = {"N": n, "counts": counts, "non_preferred": r.non_preferred, "chi2": gof["chi2"],
                         "p": gof["p"], "not_quizzed": not_quizzed_note(r, "BDQ")}
    return out


def bcq_section(c: Contamination) -> dict[str, Any]:
    """The bias compensator quiz: accuracy per repeat and their mean, binomial test vs 25%, Wilson CI;
    the questions left out for want of four distinct options, with the reason."""
    out = {}
    for r in c.results:
        t = bcq_table(r.bcq, c.n_repeats)
        say(f"**{r.config}**: original at a non-preferred position ({', '.join(r.non_preferred) or 'none'}), "
            f"{c.n_repeats} repeats. p: exact one-sided binomial test against 25%; invalid answers count as wrong.")
        not_quizzed = not_quizzed_note(r, "BCQ")
        if t.empty:
            say("No BCQ answers.")
        else:
            show(t.assign(set=t["set"].map(lambda s: SET_LABELS.get(s, s))).round(3))
        out[r.config] = {"table": jsonable(t), "not_quizzed": not_quizzed}
    return out


def completion_section(c: Contamination, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """ROUGE-L and exact first-words match per set and mode; guided − general per set."""
    out: dict[str, Any] = {}
    for r in c.results:
        t = completion_table(r.completions)
        if r.too_short:
            say(f"**{r.config}**: {len(r.too_short)} question(s) too short to cut: {', '.join(r.too_short)}")
        if t.empty:
            say(f"**{r.config}**: no completions.")
            out[r.config] = {"table": [], "guided_minus_general": {}}
            continue
        say(f"**{r.config}**: mean ROUGE-L F1 (words) and share of continuations whose first words match exactly.")
        show(t.round(3))
        diffs = {s: guided_vs_general(r.completions, s, n_boot=n_boot, seed=seed) for s in SETS}
        show(pd.DataFrame([{"set": SET_LABELS[s], **d} for s, d in diffs.items()]).round(3))
        out[r.config] = {"table": jsonable(t), "guided_minus_general": diffs}
    return out


def verdict_section(c: Contamination, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The verdict table per configuration."""
    out = {}
    for r in c.results:
        v = verdict_table(r, n_boot=n_boot, seed=seed)
        say(f"### {r.config}" + (f" — **stopped early**: {'; '.join(r.stopped)}" if r.stopped else ""))
        show(v.drop(columns=["config"]).round(4).style.hide(axis="index"))
        out[r.config] = {"overall": v.iloc[-1]["reading"], "rows": jsonable(v)}
    if not c.results:
        say("No configuration was tested.")
    return out
