"""The sections of ``notebooks/05_contamination.ipynb``: each displays and returns a JSON summary.

Every section opens, per configuration, with its population: the metric the sets were formed by
(with judge coverage in both languages), the size of each set and the floor of items below which
nothing is tested. Tables show ``–`` for a missing value, never ``nan`` or ``None``; recorded
values carry ``None`` (JSON null) there, never a float NaN.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from cresowlve_core.analysis.table import COVERAGE_THRESHOLD
from cresowlve_core.contamination.completion import MIN_WORDS, completion_table, guided_vs_general
from cresowlve_core.contamination.itemstats import MIN_ITEMS, too_few
from cresowlve_core.contamination.pipeline import ConfigResult, Contamination
from cresowlve_core.contamination.quiz import LETTERS, bcq_table, n_answered, uniform_gof
from cresowlve_core.contamination.select import SET_LABELS, SETS, basis_text
from cresowlve_core.contamination.substitute import PROTOCOL as LEXICAL
from cresowlve_core.contamination.verdict import holm_across_models, verdict_table
from cresowlve_core.exitcodes import STAGES_RECORD, stage_record
from cresowlve_core.notebook_records import record
from cresowlve_core.reporting import jsonable, say, say_where_from, show
from cresowlve_core.stats import format_p


def _p_phrase(p: Any) -> str:
    """``"= 0.0123"`` or ``"< 0.0001"``, to follow a "p"."""
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def population(c: Contamination, r: ConfigResult) -> dict[str, Any]:
    """Say (and return) the population of one configuration's tests."""
    cov = {lg: r.judge_coverage.get(lg, float("nan")) for lg in ("en", "ru")}
    sizes = {s: int(r.counts.get(s, 0)) for s in SETS}
    tested = r.items["set"].value_counts().to_dict() if not r.items.empty else {}
    tested = {s: int(tested.get(s, 0)) for s in SETS}
    few = too_few(*tested.values())
    say(f"Population: **{r.config}** — questions in {c.lang}; sets by {basis_text(r.basis, cov['en'], cov['ru'], COVERAGE_THRESHOLD)}. "
        + ", ".join(f"{s}: {tested[s]} tested of {sizes[s]}" for s in SETS)
        + f". At least {MIN_ITEMS} items per set are needed for a test" + (f" ({few})." if few else "."))
    return jsonable({"basis": r.basis, "judge_coverage": cov, "set_sizes": sizes, "tested": tested,
                  "min_items": MIN_ITEMS})


def sets_section(c: Contamination) -> dict[str, Any]:
    """Where the runs came from, the metric each configuration's sets were formed by (judge
    coverage per language) and the size of the target and control sets (and the synthetic-data
    banner when any run is synthetic)."""
    record(STAGES_RECORD, [stage_record(c.summary(), "calls")])  # `cresowlve report 05_contamination` exits as `run`
    say_where_from(c.source, c.notes, c.synthetic)
    say(f"Questions in **{c.lang}**; perturber `{c.perturber}`, quiz-taker `{c.quiz_taker}`; folder `{c.out_dir}`.")
    if c.set_counts.empty:
        say("**Nothing to analyse**: no configuration has paired En and Ru runs.")
        return {"configs": []}
    for row in c.set_counts.itertuples(index=False):
        say(f"**{row.config}**: sets by {basis_text(row.basis, row.judge_coverage_en, row.judge_coverage_ru)}.")
    shown = c.set_counts.assign(judge_coverage_en=100 * c.set_counts["judge_coverage_en"],
                                judge_coverage_ru=100 * c.set_counts["judge_coverage_ru"])
    show(shown.rename(columns={**SET_LABELS, "judge_coverage_en": "judge coverage En %",
                               "judge_coverage_ru": "judge coverage Ru %"}), digits=1)
    say("One metric per configuration for both languages: the LLM judge where it scored at least "
        f"{100 * COVERAGE_THRESHOLD:.0f}% of the items in En *and* Ru (errored items count against it), else strict "
        "exact match. `ru_wrong_en_right`, `unknown` (no value in one language), `no_answer` (the model errored in one "
        "language), `withheld` (it refused, or its provider's filter stopped it, in one language: a refusal does not "
        "show the model did not know the answer), `cut_off` (its answer stopped at the token limit, not right, in one "
        "language: no answer to judge what it knows by) go into no set; `unpaired`: items run in one language only. "
        f"A test needs at least {MIN_ITEMS} items in every set it uses.")
    return {"configs": jsonable(c.set_counts), "min_items": MIN_ITEMS}


def perturbation_section(c: Contamination) -> dict[str, Any]:
    """How many questions got three usable perturbations; the others with every reason, and the
    reasons counted (per rewrite: one rewrite can be rejected for several reasons)."""
    out: dict[str, Any] = {}
    info = c.perturbation or {}
    if info:
        say(protocol_text(info))
        swaps = info.get("swaps")
        if swaps is not None and len(swaps):
            n_ok = int((swaps["synonym"] != "").sum())
            say(f"The model's synonyms: {n_ok} of {len(swaps)} word(s) asked got a usable one (first line of "
                "each continuation; items passed over with the reason).")
            show(swaps.head(SWAPS_SHOWN))
            if len(swaps) > SWAPS_SHOWN:
                say(f"… and {len(swaps) - SWAPS_SHOWN} more calls in `perturbations.jsonl`.")
    for r in c.results:
        pop = population(c, r)
        n_bad = len(r.not_quizzable)
        n_all = r.n_tested
        say(f"{n_all - n_bad} of {n_all} tested questions have four distinct options; "
            f"{n_bad} reported below.")
        counts = rejection_counts(r.rejections)
        if n_bad:
            show(counts)
            show(r.not_quizzable)
        out[r.config] = {"population": pop, "protocol": info.get("protocol"), "quizzable": n_all - n_bad,
                         "not_quizzable": n_bad,
                         "rejections": {row.kind: int(row.rejections) for row in counts.itertuples()},
                         "questions_by_reason": {row.kind: int(row.questions) for row in counts.itertuples()}}
    if not c.results:
        say("No questions to perturb.")
    return out


SWAPS_SHOWN = 40


def protocol_text(info: dict[str, Any]) -> str:
    """One line on how the perturbations were made (``perturbation`` of the pipeline's summary)."""
    prompts = ", ".join(f"`{p}`" for p in info.get("prompts") or [])
    calls = f"; {info['n_model_calls']} model call(s)" if info.get("n_model_calls") is not None else ""
    if info.get("protocol") == LEXICAL:
        return (f"Perturbation protocol: **{LEXICAL}** ({prompts}{calls}): the perturber is a base model, which "
                "cannot follow the paper's rewrite instruction, so each rewrite swaps one word for the synonym the "
                "model continued a few-shot synonym dictionary with (every call and its raw continuation are in "
                "`perturbations.jsonl`). This differs from the paper's instruction-following perturber: one word per "
                "rewrite, of whatever quality the model gives.")
    return f"Perturbation protocol: **{info.get('protocol')}** ({prompts}{calls}), as in the paper."


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
        pop = population(c, r)
        n = len(r.bdq)
        counts = {k: r.bdq_counts.get(k, 0) for k in (*LETTERS, "invalid", "withheld", "cut_off")}
        answered = n_answered(r.bdq_counts)  # the N of N/4: withheld and cut-off replies are no answer
        gof = uniform_gof(r.bdq_counts)
        few = too_few(int(gof["n_valid"]))
        chi = (f"χ² vs uniform: {few}" if few or not gof["n_valid"] else
               f"χ² vs uniform = {gof['chi2']:.2f}, p {_p_phrase(gof['p'])}")
        say(f"BDQ over all quizzed items of the three sets ({n} replies, N = {answered} answers, invalid ones "
            "included; withheld and cut-off replies are no answer): "
            + ", ".join(f"'{k}': {v}" for k, v in counts.items())
            + f". {chi} (n valid = {gof['n_valid']}). "
            f"Non-preferred (chosen < N/4 = {answered / 4:.1f}): **{', '.join(r.non_preferred) or 'none'}**"
            + (" — no valid answer: position bias not measured" if n and not gof["n_valid"] else
               "" if r.truly_non_preferred or not n else " — none below N/4, the least chosen is used"))
        if n:
            import altair as alt

            from cresowlve_core.vega import count_ticks

            df = pd.DataFrame({"position": list(counts), "count": list(counts.values())})
            show(alt.Chart(df).mark_bar().encode(
                x=alt.X("position:N", sort=None, title="Position chosen", axis=alt.Axis(labelAngle=0)),
                y=alt.Y("count:Q", title="Answers", axis=alt.Axis(**count_ticks(df["count"].max()))),
                tooltip=["position", "count"]).properties(
                width=260, height=160, title=f"BDQ choices — {r.config}"))
        out[r.config] = jsonable({"population": pop, "N": n, "counts": counts, "non_preferred": r.non_preferred,
                               "chi2": gof["chi2"], "p": None if few else gof["p"],
                               "not_quizzed": not_quizzed_note(r, "BDQ")})
    return out


def bcq_section(c: Contamination) -> dict[str, Any]:
    """The bias compensator quiz: accuracy per repeat (descriptive) and the test over items
    (majorities, exact binomial vs 25%), Wilson CIs; the questions left out, with the reason."""
    out = {}
    for r in c.results:
        pop = population(c, r)
        t = bcq_table(r.bcq, c.n_repeats)
        say(f"Original at a non-preferred position ({', '.join(r.non_preferred) or 'none'}), {c.n_repeats} repeats. "
            "Each repeat's accuracy is descriptive; the test is over **items**: those right in a majority of their "
            "repeats, exact one-sided binomial test against 25% (H0: the quiz's chance rate), Wilson 95% CI. "
            "Invalid answers (no option letter) count as wrong; withheld ones (refused, or stopped by the provider's "
            "filter) and cut-off ones (stopped at the token limit before naming an option) are no answer: left out "
            "of k and n and of the items' accuracies, and counted apart.")
        not_quizzed = not_quizzed_note(r, "BCQ")
        if t.empty:
            say(f"No BCQ answers: the BCQ {r.bcq_waiting}." if r.bcq_waiting else "No BCQ answers.")
        else:
            show(t.assign(set=t["set"].map(lambda s: SET_LABELS.get(s, s))))
        out[r.config] = {"population": pop, "table": jsonable(t), "not_quizzed": jsonable(not_quizzed)}
    return out


def completion_section(c: Contamination, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """ROUGE-L and exact first-words match per set and mode; guided − general per set (paired
    bootstrap over items). The difference in differences is in the verdict."""
    out: dict[str, Any] = {}
    for r in c.results:
        pop = population(c, r)
        t = completion_table(r.completions)
        if r.too_short:
            say(f"{len(r.too_short)} question(s) too short to cut (fewer than {MIN_WORDS} words, or no word on one "
                f"side of the cut), not in the completion test: {', '.join(f'`{i}`' for i in r.too_short)}")
        if t.empty:
            say("No completions.")
            out[r.config] = {"population": pop, "table": [], "guided_minus_general": {}}
            continue
        say("Mean ROUGE-L F1 (words) and share of continuations whose first words match exactly, per set and mode. "
            "`empty`: replies with no continuation; `withheld`: continuations the model refused or its provider's "
            "filter stopped; `cut_off`: replies stopped at the token limit before any text (both in this table's n, "
            "continuing nothing: ROUGE-L 0; no answer for the gains below and the verdict, which leave such an item "
            "out).")
        show(t)
        diffs = {s: guided_vs_general(r.completions, s, n_boot=n_boot, seed=seed) for s in SETS}
        # as in the verdict: below the floor of items a bootstrap interval is no interval (two alike items give [x, x])
        notes = {s: too_few(int(d["n"])) for s, d in diffs.items()}
        diffs = {s: {**d, "low": float("nan"), "high": float("nan")} if notes[s] else d for s, d in diffs.items()}
        say(f"Guided − general ROUGE-L per set: mean over items, paired percentile bootstrap 95% CI over items "
            f"({n_boot} resamples, seed {seed}); no interval with fewer than {MIN_ITEMS} items. The verdict "
            "compares these gains between the target and the `wrong_both` control (difference in differences, "
            "matched on difficulty).")
        show(pd.DataFrame([{"set": SET_LABELS[s], "n": d["n"], "guided − general": d["diff"], "low": d["low"],
                            "high": d["high"], "interval": notes[s] or d.get("note") or ""}
                           for s, d in diffs.items()]))
        out[r.config] = {"population": pop, "table": jsonable(t), "guided_minus_general": jsonable(diffs)}
    return out


def headline(verdict: dict[str, Any]) -> str:
    """The contamination report's one line, from :func:`verdict_section`'s record: the first three
    configurations' overall readings."""
    if not verdict:
        return "no configuration tested"
    return "; ".join(f"{config}: {v.get('overall')}" for config, v in list(verdict.items())[:3])


def verdict_section(c: Contamination, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The verdict table per configuration, with the sets each test compares, the basis of its
    sets, and Holm's adjustment of the verdicts across the configurations."""
    out = {}
    say(f"Difficulty-matched differences: stratified t intervals over items (each set's variance pooled over its "
        f"levels); permutation p-values: {n_boot} shuffles of the set labels within difficulty level, seed {seed}. "
        f"No test with fewer than {MIN_ITEMS} items in a set it uses (and no interval shown). The completion test "
        "must signal against both controls (`wrong_both`: items the model does not know; `right_both`: items it "
        "knows). The overall p is the largest of the deciding tests' p (all must reject), Holm-adjusted across "
        "the configurations (`p_holm`).")
    tables = holm_across_models(pd.concat([verdict_table(r, n_boot=n_boot, seed=seed) for r in c.results],
                                          ignore_index=True)) if c.results else pd.DataFrame()
    for r in c.results:
        v = tables[tables["config"] == r.config]
        say(f"### {r.config}" + (f" — **stopped early**: {'; '.join(r.stopped)}" if r.stopped else ""))
        pop = population(c, r)
        last = v.iloc[-1]
        say(f"**Verdict: {last['reading']}.** Basis: {r.basis}. Compares {last['sets']}.")
        show(v.drop(columns=["config"]))
        out[r.config] = {"overall": last["reading"], "basis": r.basis, "p_holm": None if pd.isna(last["p_holm"]) else float(last["p_holm"]),
                         "compares": last["sets"], "population": pop, "n_boot": n_boot, "seed": seed,
                         "rows": jsonable(v)}
    if not c.results:
        say("No configuration was tested.")
    return out
