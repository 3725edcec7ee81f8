"""Tables and a chart for ``notebooks/02_evaluation.ipynb`` (one run)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from cresowlve_core.stats import wilson_interval
from cresowlve_core.evaluation.records import ResponseRecord


def records_frame(records: list[ResponseRecord]) -> pd.DataFrame:
    rows = [r.model_dump(mode="json") for r in records]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["judge_correct"] = df["judge_verdict"].map({"CORRECT": True, "INCORRECT": False})
    return df


def _pct_ci(k: int, n: int) -> str:
    if n == 0:
        return "n/a"
    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def table1_row(df: pd.DataFrame, model: str, effort: str | None, lang: str) -> pd.DataFrame:
    """The run as one Table-1 row: % with Wilson 95% CI for strict EM, lenient EM and the judge."""
    ok = df[df["status"] == "ok"] if not df.empty else df
    n = len(ok)
    judged = ok[ok["judge_status"] == "scored"] if n else ok
    row = {
        "model": model,
        "effort": effort or "-",
        "lang": lang,
        "n": n,
        "EM strict %": _pct_ci(int(ok["em_strict"].sum()), n) if n else "n/a",
        "EM lenient %": _pct_ci(int(ok["em_lenient"].sum()), n) if n else "n/a",
        "LLM judge %": _pct_ci(int(judged["judge_correct"].sum()), len(judged)) if len(judged) else "no judge verdicts",
        "unscored": int((ok["judge_status"] == "unscored").sum()) if n else 0,
        "errors": int((df["status"] == "error").sum()) if not df.empty else 0,
    }
    return pd.DataFrame([row])


def accuracy_by_difficulty(df: pd.DataFrame) -> pd.DataFrame:
    """Per difficulty level: n and accuracy for each metric (unknown difficulty kept as its own row)."""
    ok = df[df["status"] == "ok"].copy()
    ok["difficulty"] = ok["difficulty"].map(lambda v: "unknown" if pd.isna(v) else str(int(v)))
    g = ok.groupby("difficulty")
    out = pd.DataFrame({
        "n": g.size(),
        "em_strict": g["em_strict"].mean(),
        "em_lenient": g["em_lenient"].mean(),
        "judge": g["judge_correct"].mean(),
    }).reset_index()
    return out


def difficulty_chart(by_difficulty: pd.DataFrame) -> alt.Chart:
    long = by_difficulty.melt(id_vars=["difficulty", "n"], value_vars=["em_strict", "em_lenient", "judge"],
                              var_name="metric", value_name="accuracy").dropna(subset=["accuracy"])
    return (
        alt.Chart(long, title="Accuracy by difficulty")
        .mark_bar()
        .encode(
            x=alt.X("difficulty:N"), xOffset="metric:N",
            y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
            color="metric:N", tooltip=["difficulty", "metric", alt.Tooltip("accuracy:Q", format=".1%"), "n"],
        )
        .properties(width=380, height=220)
    )


def example_errors(df: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """A few items the model got wrong (by the judge where available, else lenient EM)."""
    ok = df[df["status"] == "ok"]
    wrong = ok[ok["judge_correct"] == False] if ok["judge_correct"].notna().any() else ok[~ok["em_lenient"].astype(bool)]  # noqa: E712
    cols = ["id", "difficulty", "answer", "prediction", "extraction", "em_lenient", "judge_status", "judge_verdict"]
    return wrong[cols].head(n).reset_index(drop=True)
