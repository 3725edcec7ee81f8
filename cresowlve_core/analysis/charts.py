"""Altair charts for the analysis report (one function per paper figure).

Every function takes the tidy frame produced by the matching analysis function and returns
an ``alt.Chart`` (or layered/faceted chart). A layered chart takes its frame once, on the layer
(``alt.layer(..., data=frame)``): layers that each carry the frame make altair hash it through
its text form, which prints every row under the notebooks' display options. Accuracies are in %; languages are shown as
``CresOWLve-En`` / ``CresOWLve-Ru``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final, ParamSpec, TypeVar

import altair as alt
import pandas as pd
from altair.utils.schemapi import debug_mode

P = ParamSpec("P")
R = TypeVar("R")


def _built_unchecked(build: Callable[P, R]) -> Callable[P, R]:
    """Build the chart without altair validating every part as it is made (its debug mode, about a
    third of a chart's cost); the whole spec is still validated once, when the chart is displayed."""

    @functools.wraps(build)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with debug_mode(False):
            return build(*args, **kwargs)

    return wrapper


def _tooltips(*fields: str | alt.Tooltip) -> list[alt.Tooltip]:
    """Tooltip channels, a field name made ``alt.Tooltip(name)``: the same spec as the bare name, which
    altair would otherwise match against its schema's alternatives as it encodes (about 6 ms each)."""
    return [alt.Tooltip(f) if isinstance(f, str) else f for f in fields]


def _when(channel: Callable[..., R], test: str, then: object, otherwise: object) -> R:
    """``alt.condition(test, alt.value(then), alt.value(otherwise))`` built directly as the channel's value
    class (``alt.StrokeValue``, ...): the same spec, without the schema matching of a plain dict (about
    18 ms a channel)."""
    return channel(otherwise, condition={"test": test, "value": then})


LANG_LABEL = {"en": "CresOWLve-En", "ru": "CresOWLve-Ru"}
#: distinct hues for up to 10 series (tableau20 pairs each hue with a paler copy: two near-identical blues)
PALETTE: Final = "tableau10"


def _with_lang(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["language"] = out["lang"].map(LANG_LABEL).fillna(out["lang"])
    return out


#: above this many configurations, accuracy by difficulty is drawn as one small panel per configuration
MAX_OVERLAID_CONFIGS: Final = 8


@_built_unchecked
def difficulty_chart(df: pd.DataFrame) -> alt.FacetChart:
    """Accuracy by difficulty with Wilson 95 % error bars; rows = metric, columns = language. With more
    than :data:`MAX_OVERLAID_CONFIGS` configurations, one small panel per configuration instead
    (:func:`difficulty_panels`), which reads as a static figure."""
    data = _with_lang(df)[["config", "language", "metric_label", "difficulty", "n", "acc", "low", "high", "small"]]
    if data["config"].nunique() > MAX_OVERLAID_CONFIGS:
        return difficulty_panels(data)
    pick = alt.selection_point(fields=["config"], bind="legend")  # click a legend entry to highlight it
    ranked = data.groupby("config")["acc"].mean().sort_values(ascending=False).index.tolist()  # legend: best first
    # models side by side within each difficulty (their intervals never overlap), in distinct hues
    base = alt.Chart().encode(
        x=alt.X("difficulty:O", title="Difficulty (1 = very simple, 5 = very hard)", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("config:N", sort=ranked),
        color=alt.Color("config:N", title="Model (click to highlight)", scale=alt.Scale(scheme=PALETTE), sort=ranked,
                        legend=alt.Legend(labelLimit=320)),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.12)),
    )
    line = (
        base.mark_line(point=True)
        .add_params(pick)
        .encode(
            y=alt.Y("acc:Q", title="Accuracy (%)"),
            tooltip=_tooltips(
                "config",
                "language",
                "metric_label",
                "difficulty",
                "n",
                alt.Tooltip("small:N", title="small cell"),
                alt.Tooltip("acc:Q", format=".1f"),
                alt.Tooltip("low:Q", format=".1f"),
                alt.Tooltip("high:Q", format=".1f"),
            ),
        )
    )
    bars = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title="Accuracy (%)"), y2=alt.Y2("high:Q"))
    return (
        alt.layer(bars, line, data=data)
        .properties(width=320, height=240)
        .facet(row=alt.Row("metric_label:N", title=None), column=alt.Column("language:N", title=None))
    )


@_built_unchecked
def difficulty_panels(data: pd.DataFrame, columns: int = 6) -> alt.FacetChart:
    """Small multiples: a panel per configuration (in order of overall accuracy), accuracy with its 95 %
    Wilson interval per difficulty, language × metric as colour, dodged side by side (no overlap)."""
    data = data.assign(series=data["language"] + " · " + data["metric_label"])
    order = data.groupby("config")["acc"].mean().sort_values(ascending=False).index.tolist()
    base = alt.Chart().encode(
        x=alt.X("difficulty:O", title="Difficulty", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("series:N"),
        color=alt.Color("series:N", title="Language · metric", scale=alt.Scale(scheme="category10"),
                        legend=alt.Legend(orient="top", columns=4, labelLimit=320)),
    )
    points = base.mark_point(filled=True, size=22).encode(
        y=alt.Y("acc:Q", title="Accuracy (%)", scale=alt.Scale(domain=[0, 100])),
        tooltip=_tooltips("config", "series", "difficulty", "n", alt.Tooltip("acc:Q", format=".1f"),
                 alt.Tooltip("low:Q", format=".1f"), alt.Tooltip("high:Q", format=".1f")),
    )
    bars = base.mark_rule(strokeWidth=1).encode(y=alt.Y("low:Q", title="Accuracy (%)"), y2=alt.Y2("high:Q"))
    return alt.layer(bars, points, data=data).properties(width=170, height=130).facet(
        facet=alt.Facet("config:N", title=None, sort=order, header=alt.Header(labelFontSize=11)), columns=columns,
    )


#: the widest a figure is drawn (the static screenshots and the HTML reports are read at this width)
PAGE_WIDTH: Final = 1400
#: up to this many configurations the groups are drawn as a heatmap with a column per configuration;
#: past it a column would be narrower than its own label, and :func:`group_spread` is drawn instead
MAX_HEATMAP_CONFIGS: Final = 24


@_built_unchecked
def group_heatmap(df: pd.DataFrame, group_title: str, metric_label: str) -> alt.FacetChart:
    """Group × model heatmap of accuracy, one panel per language side by side, with each cell's 95 %
    Wilson interval printed under its value; cells that differ from the model's other items after
    Benjamini–Hochberg control are outlined and starred. The panels share the page width
    (:data:`PAGE_WIDTH`), so 34 groups × 18 configurations is one screen tall, not two stacked panels.
    Past :data:`MAX_HEATMAP_CONFIGS` configurations the figure is :func:`group_spread`."""
    if df["config"].nunique() > MAX_HEATMAP_CONFIGS:
        return group_spread(df, group_title, metric_label)
    data = _with_lang(df)[["config", "language", "group", "n", "n_items", "acc", "low", "high", "overall", "q", "flagged"]]
    data["label"] = data["acc"].map(lambda v: f"{v:.0f}") + data["flagged"].map(lambda f: "*" if f else "")
    data["ci"] = [f"{lo:.0f}–{hi:.0f}" for lo, hi in zip(data["low"], data["high"], strict=True)]
    n_configs = max(1, data["config"].nunique())
    n_panels = max(1, data["language"].nunique())
    # the cells of every panel within the page, beside the group names and the colour legend
    cell = max(24, min(46, (PAGE_WIDTH - 380) // (n_configs * n_panels)))
    # models in order of overall accuracy (best first): a name order carries no meaning
    ranked = data.groupby("config")["overall"].mean().sort_values(ascending=False).index.tolist()
    # groups in order of their mean accuracy over the models (highest first), the same in every panel
    groups = data.groupby("group")["acc"].mean().sort_values(ascending=False).index.tolist()
    base = alt.Chart().encode(y=alt.Y("group:N", title=f"{group_title} (highest mean first)", sort=groups))
    # model names above and below every panel: a tall panel (34 groups) never leaves its cells
    # hundreds of pixels away from the names that identify their columns; upright names never reach
    # into the next panel
    x_below = alt.X("config:N", title="Model (best overall first)", sort=ranked,
                    axis=alt.Axis(labelAngle=-90, orient="bottom", labelLimit=180))
    x_above = alt.X("config:N", title=None, sort=ranked,
                    axis=alt.Axis(labelAngle=-90, orient="top", labelAlign="left", labelLimit=180))
    rect = base.mark_rect().encode(
        x=x_below,
        color=alt.Color("acc:Q", title=f"{metric_label} (%)", scale=alt.Scale(scheme="viridis")),
        stroke=_when(alt.StrokeValue, "datum.flagged", "red", None),
        strokeWidth=_when(alt.StrokeWidthValue, "datum.flagged", 2.5, 0),
        tooltip=_tooltips(
            "config",
            "language",
            "group",
            alt.Tooltip("n:Q", title="n (responses)"),
            alt.Tooltip("n_items:Q", title="items in group"),
            alt.Tooltip("acc:Q", format=".1f"),
            alt.Tooltip("low:Q", format=".1f", title="95% CI low"),
            alt.Tooltip("high:Q", format=".1f", title="95% CI high"),
            alt.Tooltip("overall:Q", format=".1f", title="model overall"),
            alt.Tooltip("q:Q", format=".3g", title="BH q vs rest"),
        ),
    )
    colour = _when(alt.ColorValue, "datum.acc > 50", "black", "white")
    value = base.mark_text(fontSize=9, dy=-5, fontWeight="bold").encode(x=x_above, text=alt.Text("label:N"), color=colour)
    interval = base.mark_text(fontSize=7, dy=6).encode(x=alt.X("config:N", axis=None, sort=ranked), text=alt.Text("ci:N"),
                                                        color=colour)
    return (
        alt.layer(rect, value, interval, data=data)
        .resolve_axis(x="independent")
        .properties(width=cell * n_configs, height=alt.Step(24))
        .facet(column=alt.Column("language:N", title=None, header=alt.Header(labelFontSize=13, labelFontWeight="bold")))
        .resolve_axis(x="independent")
    )


@_built_unchecked
def group_spread(df: pd.DataFrame, group_title: str, metric_label: str) -> alt.FacetChart:
    """Accuracy per group across many configurations, one panel per language side by side: for each
    group the range over the configurations (line), the middle half (bar) and the median (tick), and
    a red dot for each configuration whose cell differs from its other items after
    Benjamini–Hochberg control. Groups in order of their median (highest first). One row per group,
    whatever the number of configurations; the per-configuration cells are in the table below it.
    The chart carries the per-group summary and the marked cells only, not every cell."""
    data = _with_lang(df)
    by = ["language", "group"]
    acc = data.groupby(by)["acc"]
    spread = pd.DataFrame({"min": acc.min(), "q1": acc.quantile(0.25), "median": acc.median(),
                           "q3": acc.quantile(0.75), "max": acc.max(), "configs": acc.size(),
                           "marked": data.groupby(by)["flagged"].sum().astype(int)}).reset_index()
    marked = data.loc[data["flagged"], ["config", *by, "acc", "low", "high", "n", "q"]]
    groups = spread.groupby("group")["median"].mean().sort_values(ascending=False).index.tolist()
    # one frame (a facet splits one dataset): the summary rows, then one row per marked cell
    rows = pd.concat([spread.assign(kind="summary"), marked.assign(kind="marked")], ignore_index=True)
    x_title = f"{metric_label} (%) across configurations"
    y = alt.Y("group:N", title=f"{group_title} (highest median first)", sort=groups, axis=alt.Axis(labelLimit=240))
    summary = alt.Chart().transform_filter("datum.kind == 'summary'").encode(
        y=y,
        tooltip=_tooltips("language", "group", alt.Tooltip("configs:Q", title="configurations"),
                 alt.Tooltip("min:Q", format=".1f"), alt.Tooltip("q1:Q", format=".1f", title="25th percentile"),
                 alt.Tooltip("median:Q", format=".1f"), alt.Tooltip("q3:Q", format=".1f", title="75th percentile"),
                 alt.Tooltip("max:Q", format=".1f"), alt.Tooltip("marked:Q", title="marked cells (BH)")),
    )
    whisker = summary.mark_rule(color="#4c78a8").encode(
        x=alt.X("min:Q", title=x_title, scale=alt.Scale(domain=[0, 100])), x2=alt.X2("max:Q"))
    box = summary.mark_bar(color="#9ecae9", size=12).encode(x=alt.X("q1:Q", title=x_title), x2=alt.X2("q3:Q"))
    median = summary.mark_tick(color="black", thickness=2, size=12).encode(x=alt.X("median:Q", title=x_title))
    dots = alt.Chart().transform_filter("datum.kind == 'marked'").mark_point(color="red", filled=True, size=28).encode(
        y=y, x=alt.X("acc:Q", title=x_title),
        tooltip=_tooltips("config", "language", "group", "n", alt.Tooltip("acc:Q", format=".1f"),
                 alt.Tooltip("low:Q", format=".1f", title="95% CI low"),
                 alt.Tooltip("high:Q", format=".1f", title="95% CI high"),
                 alt.Tooltip("q:Q", format=".3g", title="BH q vs rest")))
    n_panels = max(1, spread["language"].nunique())
    return (
        alt.layer(whisker, box, median, dots, data=rows)
        .properties(width=(PAGE_WIDTH - 320) // n_panels - 20, height=alt.Step(18))
        .facet(column=alt.Column("language:N", title=None, header=alt.Header(labelFontSize=13, labelFontWeight="bold")))
    )


@_built_unchecked
def gap_chart(df: pd.DataFrame) -> alt.FacetChart:
    """Creative − factual gap with bootstrap CI per model; columns = metric, colour = language; models
    in order of their mean gap (largest first): a name order carries no meaning."""
    data = _with_lang(df)[["config", "language", "metric_label", "gap", "low", "high", "n_matched"]]
    order = data.groupby("config")["gap"].mean().sort_values(ascending=False).index.tolist()
    base = alt.Chart().encode(
        y=alt.Y("config:N", title="Model (largest mean gap first)", sort=order),
        yOffset=alt.YOffset("language:N"),
        color=alt.Color("language:N", title="Language", scale=alt.Scale(scheme="category10")),
    )
    points = base.mark_point(filled=True, size=50).encode(
        x=alt.X("gap:Q", title="Creative − factual accuracy (pp)", axis=alt.Axis(tickCount=6)),
        tooltip=_tooltips(
            "config",
            "language",
            "metric_label",
            alt.Tooltip("n_matched:Q", title="matched pairs"),
            alt.Tooltip("gap:Q", format=".1f"),
            alt.Tooltip("low:Q", format=".1f", title="95% CI low"),
            alt.Tooltip("high:Q", format=".1f", title="95% CI high"),
        ),
    )
    bars = base.mark_rule().encode(x=alt.X("low:Q"), x2=alt.X2("high:Q"))
    zero = alt.Chart().mark_rule(strokeDash=[4, 3], color="grey").encode(x=alt.XDatum(0))
    return (
        alt.layer(zero, bars, points, data=data)
        .properties(width=320, height=alt.Step(14))
        .facet(column=alt.Column("metric_label:N", title=None))
    )


@_built_unchecked
def difficulty_share_chart(df: pd.DataFrame) -> alt.Chart:
    """Share of creative and factual items per difficulty level (paper Fig. 15)."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("difficulty:O", title="Difficulty", axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("reasoning_type:N"),
            y=alt.Y("share:Q", title="Share of items", axis=alt.Axis(format="%")),
            color=alt.Color("reasoning_type:N", title="Reasoning type", scale=alt.Scale(scheme="category10")),
            tooltip=_tooltips("reasoning_type", "difficulty", "n", alt.Tooltip("share:Q", format=".1%")),
        )
        .properties(width=320, height=200)
    )


@_built_unchecked
def complexity_boxplot(features_long: pd.DataFrame) -> alt.FacetChart:
    """Box plots of each complexity feature by difficulty (independent y scales)."""
    data = features_long[["difficulty", "feature_label", "value"]]
    return (
        alt.Chart(data)
        .mark_boxplot(extent=1.5)
        .encode(
            x=alt.X("difficulty:O", title="Difficulty", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("difficulty:O", legend=None, scale=alt.Scale(scheme="blues")),
        )
        .properties(width=220, height=200)
        .facet(column=alt.Column("feature_label:N", title=None))
        .resolve_scale(y="independent")
    )


@_built_unchecked
def note_chart(title: str, text: str, width: int = 420, height: int = 50) -> alt.Chart:
    """A chart holding one sentence under its title: what a figure shows when there is nothing to draw
    (never a blank frame that reads as a rendering failure)."""
    return (
        alt.Chart(pd.DataFrame({"text": [text]}))
        .mark_text(fontSize=13, color="#555")
        .encode(text=alt.Text("text:N"))
        .properties(title=title, width=width, height=height)
    )


@_built_unchecked
def correlation_bars(df: pd.DataFrame, by_model: bool = True) -> alt.LayerChart | alt.FacetChart | alt.Chart:
    """Spearman ρ per feature with its 95 % interval, one row per feature in order of ρ (and, when
    ``by_model``, one panel per feature with a row per model, in order of mean ρ, languages dodged).
    Correlations significant after Holm correction are outlined in black. Rows whose ρ is undefined
    (too few items, a constant feature) are left out; with none left, a sentence says so."""
    data = df[df["spearman_rho"].notna()].copy()
    if data.empty:
        return note_chart(f"Spearman ρ with {'correctness' if by_model else 'difficulty'}",
                          "No correlation could be computed: too few items, or a feature without variation.")
    tooltip = _tooltips(
        alt.Tooltip("feature_label:N", title="feature"),
        "n",
        alt.Tooltip("spearman_rho:Q", format=".3f", title="Spearman ρ"),
        alt.Tooltip("spearman_low:Q", format=".3f", title="95% CI low"),
        alt.Tooltip("spearman_high:Q", format=".3f", title="95% CI high"),
        alt.Tooltip("spearman_p_holm:Q", format=".3g", title="p (Holm)"),
        alt.Tooltip("pearson_r:Q", format=".3f", title="Pearson r"),
    )
    stroke = _when(alt.StrokeValue, "datum.significant", "black", None)
    if not by_model:
        zero = alt.Chart().mark_rule(strokeDash=[4, 3], color="grey").encode(x=alt.XDatum(0))
        title = "Spearman ρ with difficulty"
        order = data.sort_values("spearman_rho", ascending=False)["feature_label"].tolist()
        base = alt.Chart().encode(y=alt.Y("feature_label:N", title=None, sort=order,
                                              axis=alt.Axis(labelLimit=320)))
        bars = base.mark_bar(color="#4c78a8", strokeWidth=2).encode(
            x=alt.X("spearman_rho:Q", title=title, scale=alt.Scale(domain=[-1, 1])),
            stroke=stroke, tooltip=tooltip,
        )
        ci = base.mark_errorbar(ticks=True, color="black").encode(x=alt.X("spearman_low:Q", title=title),
                                                                  x2=alt.X2("spearman_high:Q"))  # one title, no field name
        return alt.layer(bars, ci, zero, data=data).properties(width=420, height=alt.Step(30))
    data = _with_lang(data)
    title = "Spearman ρ with correctness"
    order = data.groupby("config")["spearman_rho"].mean().sort_values(ascending=False).index.tolist()
    base = alt.Chart().encode(
        y=alt.Y("config:N", title="Model (highest mean ρ first)", sort=order, axis=alt.Axis(labelLimit=320)),
        yOffset=alt.YOffset("language:N"),
        color=alt.Color("language:N", title="Language", scale=alt.Scale(scheme="category10")),
    )
    points = base.mark_point(filled=True, size=45, strokeWidth=1.5).encode(
        x=alt.X("spearman_rho:Q", title=title, axis=alt.Axis(tickCount=6)),
        stroke=stroke, tooltip=_tooltips("config", "language", *tooltip),
    )
    ci = base.mark_rule().encode(x=alt.X("spearman_low:Q", title=title), x2=alt.X2("spearman_high:Q"))
    zero = alt.Chart().mark_rule(strokeDash=[4, 3], color="grey").encode(x=alt.XDatum(0))
    return alt.layer(zero, ci, points, data=data).properties(width=260, height=alt.Step(14)).facet(
        column=alt.Column("feature_label:N", title=None, header=alt.Header(labelFontSize=12, labelLimit=260)))
