"""Who is counted where: each report section's population and its judge coverage.

* :func:`judge_coverage_by_run` — per configuration × language of a population: all items, the
  items the LLM judge gave a verdict on, errored items (the model gave no answer), and the
  coverage = verdicts / all items. **Errored items count against coverage**: they carry no
  verdict (no answer, so no value, see :mod:`~cresowlve_core.analysis.loading`), so a run
  with 10 % errors has at most 90 % coverage.
* :func:`coverage_line` — that table as one sentence for a report section (overall coverage,
  the lowest run, how many runs fall below the threshold). Refused and filtered answers have a
  value (not correct) but no judge verdict: the sentence counts them apart from the verdicts.
* :func:`population_line` — "Population: creative items (Table 1's): n = … responses, … items,
  … runs", so a reader can tell which sections compare like with like.
"""

from __future__ import annotations

import pandas as pd

from cresowlve_core.analysis.loading import no_answer, not_an_answer

COVERAGE_COLUMNS = ["config", "lang", "n_items", "n_verdict", "n_error", "coverage"]
#: the ``judge_status`` of a record the judge was called on (with a verdict or not)
JUDGE_ASKED = ("scored", "unscored", "error")


def judge_coverage_by_run(responses: pd.DataFrame) -> pd.DataFrame:
    """Per config × lang: ``n_items`` (all), ``n_verdict`` (answered and judged), ``n_error``
    (errored), ``coverage`` = n_verdict / n_items. Runs the judge was never asked about are left out;
    a run it was asked about and gave no verdict on (every call errored or unscored) stays, at 0 %."""
    if responses.empty or "judge" not in responses:
        return pd.DataFrame(columns=COVERAGE_COLUMNS)
    err = pd.Series(no_answer(responses), index=responses.index)
    asked = (responses["judge_status"].isin(JUDGE_ASKED) if "judge_status" in responses
             else pd.Series(False, index=responses.index))
    df = responses.assign(_err=err, _verdict=~err & responses["judge"].notna(), _asked=asked)
    g = df.groupby(["config", "lang"], sort=True).agg(
        n_items=("id", "size"), n_verdict=("_verdict", "sum"), n_error=("_err", "sum"), n_asked=("_asked", "sum")
    )
    g = g[(g["n_verdict"] > 0) | (g["n_asked"] > 0)].reset_index()
    for c in ("n_items", "n_verdict", "n_error"):
        g[c] = g[c].astype(int)
    g["coverage"] = g["n_verdict"] / g["n_items"]
    return g[COVERAGE_COLUMNS]


def coverage_line(responses: pd.DataFrame, threshold: float = 0.9) -> str | None:
    """One sentence on judge coverage over ``responses`` (None when no run was judged)."""
    cov = judge_coverage_by_run(responses)
    if cov.empty:
        return None
    total, verdicts, errors = int(cov["n_items"].sum()), int(cov["n_verdict"].sum()), int(cov["n_error"].sum())
    low = cov.loc[cov["coverage"].idxmin()]
    below = cov[cov["coverage"] < threshold]
    judged_runs = responses.set_index(["config", "lang"]).index.isin(cov.set_index(["config", "lang"]).index)
    withheld = int((not_an_answer(responses) & judged_runs & responses["judge"].notna().to_numpy(bool)).sum())
    counted = (f"{verdicts:,} values of {total:,} responses: {verdicts - withheld:,} judge verdicts and {withheld:,} "
               "refused or filtered answers counted not correct," if withheld else f"{verdicts:,} verdicts of {total:,} responses")
    text = (
        f"Judge coverage: **{100 * verdicts / total:.1f}%** ({counted} over {len(cov)} judged runs; {errors:,} "
        f"errored item(s) count against it); lowest "
        f"{low['config']} / {low['lang']} {100 * low['coverage']:.1f}% ({int(low['n_verdict'])} of {int(low['n_items'])})"
    )
    if len(below):
        text += (
            f"; **{len(below)} run(s) below {100 * threshold:.0f}%**: "
            + ", ".join(f"{r.config} / {r.lang}" for r in below.itertuples(index=False))
        )
    return text + "."


def population_line(responses: pd.DataFrame, name: str) -> str:
    """``Population: <name>: n = R responses, I items, K runs.``"""
    n_items = int(responses["id"].nunique()) if not responses.empty else 0
    n_runs = int(responses.groupby(["config", "lang"]).ngroups) if not responses.empty else 0
    return f"Population: **{name}**: n = {len(responses):,} responses, {n_items:,} items, {n_runs} runs."
