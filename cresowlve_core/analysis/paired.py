"""Paired analyses: the same items answered by two configurations, or in two languages.

Every run of a benchmark answers the same item ids, so two runs can be compared item by item,
which is far more sensitive than comparing two independent accuracies:

* :func:`compare_configs` — McNemar's test (exact binomial below 25 discordant items) between
  two configurations on the items both answered: every pair of configurations of the same model
  (effort levels, thinking vs non-thinking) and any pairs passed explicitly (e.g. two models);
* :func:`cross_lingual` — per configuration, En vs Ru on the **shared** items: the 2×2 table,
  McNemar, Ru − En with its paired interval, and a flag when the two runs cover different item
  sets (the comparison then says so and uses only the shared items);
* :func:`en_ru_items` / :func:`ru_right_en_wrong` — the item ids in each cell of that 2×2
  table; the contamination stage reads "right in Ru, wrong in En" and its controls.

Only items with a value on both sides are pairs. An item without an answer on either side
(errored or failed: :func:`~cresowlve_core.analysis.loading.no_answer`) is never counted wrong: it
leaves the pair, and every row says how many pairs were dropped and why (``n_error_*``: errored
on side a / b / both; ``n_unscored``: answered on both sides but a value missing, e.g. the judge
left it unscored; ``n_*_only``: not run on the other side; all in ``dropped`` as text). A
refused or filtered answer is an answer that is not correct and stays in the pair. A row with no
pair at all is *not tested* (``method == "not tested"``; no p, no interval) and stays out of
the table's Holm family. Differences are in percentage points with the Bonett–Price interval
(:func:`~cresowlve_core.stats.mcnemar`); p-values are Holm-adjusted over the tested rows of each
table (``p_holm``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from cresowlve_core.analysis.loading import RunSet, config_label, no_answer, normalise_effort
from cresowlve_core.failures import InputError
from cresowlve_core.stats import holm, mcnemar

PAIR_COLUMNS = [
    "a",
    "b",
    "lang",
    "metric",
    "n_shared",
    "n_a_only",
    "n_b_only",
    "n_error_a",
    "n_error_b",
    "n_error_both",
    "n_unscored",
    "dropped",
    "n",
    "acc_a",
    "acc_b",
    "diff",
    "low",
    "high",
    "a_only_right",
    "b_only_right",
    "p",
    "method",
    "p_holm",
]
CROSS_COLUMNS = [
    "config",
    "metric",
    "n_en",
    "n_ru",
    "n_shared",
    "mismatch",
    "n_error_en",
    "n_error_ru",
    "n_error_both",
    "n_unscored",
    "dropped",
    "n",
    "acc_en",
    "acc_ru",
    "diff",
    "low",
    "high",
    "both_right",
    "ru_right_en_wrong",
    "en_right_ru_wrong",
    "both_wrong",
    "p",
    "method",
    "p_holm",
]


JUDGE_ELSE_EM = "judge_else_em"
#: ``compare_configs(...).attrs`` key: the pairs asked for (or same-model pairs) with no language in common,
#: as ``(a, b, languages of a, languages of b)``: they have no row
NO_SHARED_LANGUAGE = "no_shared_language"


def correctness(responses: pd.DataFrame) -> pd.DataFrame:
    """The analysis's per-item rule of right and wrong: the LLM judge's verdict where the judge
    scored the response, else strict exact match.

    Returns ``correct`` (1.0 / 0.0 / NaN when neither scored) and ``basis`` (``"judge"`` /
    ``"em_strict"`` / None) per row of :attr:`RunSet.responses`. Error analysis, the contamination
    sets and the explorer all use this one rule.
    """
    judge = responses["judge"].to_numpy(dtype=float)
    em = responses["em_strict"].to_numpy(dtype=float)
    use_judge = ~np.isnan(judge)
    correct = np.where(use_judge, judge, em)
    basis = np.where(use_judge, "judge", np.where(np.isnan(em), np.array(None, dtype=object), "em_strict"))
    return pd.DataFrame({"correct": correct, "basis": basis}, index=responses.index)


def default_metric(responses: pd.DataFrame) -> str:
    """``"judge"`` when any response has a judge value, else ``"em_strict"``."""
    return "judge" if "judge" in responses and responses["judge"].notna().any() else "em_strict"


def _frame(data: RunSet | pd.DataFrame) -> pd.DataFrame:
    return data.responses if isinstance(data, RunSet) else data


@dataclass(frozen=True)
class Outcomes:
    """One side of a pair: per item id its value (1.0 / 0.0 / NaN) and whether it had no answer."""

    values: pd.Series
    missing: pd.Series

    def __len__(self) -> int:
        return len(self.values)


def _pair(x: Outcomes, y: Outcomes, names: tuple[str, str]) -> dict[str, Any]:
    """McNemar on two sides over the items both scored, with the dropped items counted by reason."""
    shared = x.values.index.intersection(y.values.index)
    mx, my = x.missing.reindex(shared).to_numpy(bool), y.missing.reindex(shared).to_numpy(bool)
    both = pd.DataFrame({"x": x.values.reindex(shared), "y": y.values.reindex(shared)})
    answered = ~mx & ~my
    scored = answered & both.notna().all(axis=1).to_numpy(bool)
    xa, ya = both["x"].to_numpy()[scored].astype(bool), both["y"].to_numpy()[scored].astype(bool)
    b, c = int((xa & ~ya).sum()), int((~xa & ya).sum())
    n = int(scored.sum())
    counts = {
        "n_shared": len(shared),
        "n_x_only": int(len(x.values.index.difference(y.values.index))),
        "n_y_only": int(len(y.values.index.difference(x.values.index))),
        "n_error_x": int((mx & ~my).sum()),
        "n_error_y": int((my & ~mx).sum()),
        "n_error_both": int((mx & my).sum()),
        "n_unscored": int((answered & ~scored).sum()),
    }
    return {
        **counts,
        "dropped": dropped_text(counts, names),
        "n": n,
        "acc_x": 100.0 * xa.mean() if n else np.nan,
        "acc_y": 100.0 * ya.mean() if n else np.nan,
        "x_only": b,
        "y_only": c,
        "both_right": int((xa & ya).sum()),
        "both_wrong": int((~xa & ~ya).sum()),
        "test": mcnemar(b, c, n),
    }


def dropped_text(counts: dict[str, int], names: tuple[str, str]) -> str:
    """``"12 errored in En, 3 errored in Ru, 1 errored in both; 2 unscored"``: the items that are not
    pairs and why (``"none"`` when every item is a pair)."""
    x, y = names
    parts = [f"{counts['n_error_x']} errored in {x}" if counts["n_error_x"] else "",
             f"{counts['n_error_y']} errored in {y}" if counts["n_error_y"] else "",
             f"{counts['n_error_both']} errored in both" if counts["n_error_both"] else "",
             f"{counts['n_unscored']} unscored" if counts["n_unscored"] else "",
             f"{counts['n_x_only']} not run in {y}" if counts["n_x_only"] else "",
             f"{counts['n_y_only']} not run in {x}" if counts["n_y_only"] else ""]
    return ", ".join(p for p in parts if p) or "none"


def run_outcomes(df: pd.DataFrame, metric: str) -> dict[tuple[str, str], Outcomes]:
    """:class:`Outcomes` of every configuration × language of ``df``, from one pass over its rows
    (the few columns a pair needs, split by run), so pairing many configurations never filters the
    whole frame once per side and pair."""
    values = correctness(df)["correct"].to_numpy(float) if metric == JUDGE_ELSE_EM else df[metric].to_numpy(float)
    narrow = pd.DataFrame({"config": df["config"].to_numpy(), "lang": df["lang"].to_numpy(),
                           "id": df["id"].astype(str).to_numpy(), "value": values, "missing": no_answer(df)})
    out: dict[tuple[str, str], Outcomes] = {}
    for (config, lang), g in narrow.groupby(["config", "lang"], sort=False):
        index = pd.Index(g["id"])
        out[(config, lang)] = Outcomes(pd.Series(g["value"].to_numpy(float), index=index),
                                       pd.Series(g["missing"].to_numpy(bool), index=index))
    return out


def _outcomes(runs: dict[tuple[str, str], Outcomes], config: str, lang: str) -> Outcomes:
    """One run's outcomes (none for a configuration × language without records)."""
    empty = pd.Index([], dtype=str)
    return runs.get((config, lang)) or Outcomes(pd.Series(dtype=float, index=empty), pd.Series(dtype=bool, index=empty))


def default_pairs(data: RunSet | pd.DataFrame) -> list[tuple[str, str]]:
    """Every pair of configurations of the same model (effort levels, thinking vs non-thinking)."""
    df = _frame(data)
    configs = df.drop_duplicates("config")[["config", "model"]]
    pairs: list[tuple[str, str]] = []
    for _, g in configs.groupby("model", sort=True):
        pairs.extend(combinations(g["config"].tolist(), 2))
    return pairs


def resolve_config(df: pd.DataFrame, name: str, aliases: Mapping[str, str] | None = None) -> str:
    """A configuration label from a name (case-insensitive): the display name (``gpt-5.4 (medium)``),
    the model name, or a grid label (``aliases``: run model name -> the ``label:`` of a grid config,
    recorded in ``grid.json``), alone (``GPT-4.1``) or with the effort (``GPT-5.4 (medium)``).
    An unknown or ambiguous name is a ``ValueError`` listing the known names."""
    configs = df.drop_duplicates("config").reindex(columns=["config", "model", "effort"])
    labels = {str(k): str(v) for k, v in (aliases or {}).items()}
    # from the plain lists: in a frame column a missing label is NaN, which is truthy
    label = [labels.get(str(m)) for m in configs["model"]]
    configs["label"] = label
    configs["label_config"] = [config_label(lb, e) if lb else None for lb, e in zip(label, configs["effort"])]
    configs["model_config"] = [config_label(str(m), e) for m, e in zip(configs["model"], configs["effort"])]
    wanted = str(name).strip().casefold()
    for col in ("config", "model_config", "model", "label_config", "label"):
        hit = configs[configs[col].fillna("").astype(str).str.casefold() == wanted]
        if len(hit) == 1:
            return str(hit["config"].iloc[0])
        if len(hit) > 1:
            raise InputError(f"{name!r} names several configurations: {', '.join(hit['config'])}; pass one of them")
    known = ", ".join(sorted(configs["config"]))
    grid = sorted(f"{lc} = {c}" for lc, c in zip(configs["label_config"], configs["config"]) if isinstance(lc, str))
    raise InputError(f"no configuration {name!r} in these runs; known: {known}"
                     + (f"; grid labels: {', '.join(grid)}" if grid else ""))


def resolve_pair(df: pd.DataFrame, a: str, b: str, aliases: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Two names of a ``compare`` pair as configurations (:func:`resolve_config`); an ``InputError`` when
    both name the same one (a grid label and its model name): a configuration against itself is no test."""
    ca, cb = resolve_config(df, a, aliases), resolve_config(df, b, aliases)
    if ca == cb:
        raise InputError(f"{a!r} and {b!r} name the same configuration ({ca}): nothing to compare")
    return ca, cb


def compare_configs(
    data: RunSet | pd.DataFrame,
    pairs: Sequence[tuple[str, str]] | None = None,
    metric: str | None = None,
    include_defaults: bool = True,
    aliases: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """McNemar between configurations on their shared items, per language.

    ``pairs`` are (a, b) names as :func:`resolve_config` reads them: display names, model names or
    grid labels (``aliases``; default: those recorded with a :class:`RunSet`). With
    ``include_defaults`` the same-model pairs of :func:`default_pairs` are added.
    ``diff`` = acc(a) − acc(b) in pp. A pair with no language in common has no row; it is listed in
    ``attrs[NO_SHARED_LANGUAGE]``.
    """
    if aliases is None and isinstance(data, RunSet):
        aliases = data.aliases
    df = _frame(data)
    metric = metric or default_metric(df)
    # one row per pair of configurations, in either order: a pair given twice, or as (b, a) beside the
    # default (a, b), is one test (counted twice it would double its weight in the Holm family)
    wanted: list[tuple[str, str]] = []
    for pair in [resolve_pair(df, a, b, aliases) for a, b in (pairs or [])] + (default_pairs(df) if include_defaults else []):
        if not any({*pair} == {*seen} for seen in wanted):
            wanted.append(pair)
    rows = []
    runs = run_outcomes(df, metric)
    langs: dict[str, set[str]] = {}
    for config, lang in runs:
        langs.setdefault(config, set()).add(lang)
    no_shared = [(a, b, sorted(langs.get(a, set())), sorted(langs.get(b, set()))) for a, b in wanted
                 if not langs.get(a, set()) & langs.get(b, set())]
    for a, b in wanted:
        for lang in sorted(langs.get(a, set()) & langs.get(b, set())):
            r = _pair(_outcomes(runs, a, lang), _outcomes(runs, b, lang), (a, b))
            t = r["test"]
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "lang": lang,
                    "metric": metric,
                    "n_shared": r["n_shared"],
                    "n_a_only": r["n_x_only"],
                    "n_b_only": r["n_y_only"],
                    "n_error_a": r["n_error_x"],
                    "n_error_b": r["n_error_y"],
                    "n_error_both": r["n_error_both"],
                    "n_unscored": r["n_unscored"],
                    "dropped": r["dropped"],
                    "n": r["n"],
                    "acc_a": r["acc_x"],
                    "acc_b": r["acc_y"],
                    "diff": 100.0 * t.diff,
                    "low": 100.0 * t.low,
                    "high": 100.0 * t.high,
                    "a_only_right": t.b,
                    "b_only_right": t.c,
                    "p": t.p,
                    "method": t.method,
                }
            )
    out = pd.DataFrame(rows, columns=PAIR_COLUMNS[:-1])
    out["p_holm"] = holm(out["p"].to_numpy(float)) if not out.empty else []
    out.attrs[NO_SHARED_LANGUAGE] = no_shared
    return out


def cross_lingual(data: RunSet | pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """Per configuration with both languages: En vs Ru on shared items (2×2, McNemar, Ru − En)."""
    df = _frame(data)
    metric = metric or default_metric(df)
    rows = []
    runs = run_outcomes(df, metric)
    for config in dict.fromkeys(c for c, _ in runs):
        if (config, "en") not in runs or (config, "ru") not in runs:
            continue
        en, ru = _outcomes(runs, config, "en"), _outcomes(runs, config, "ru")
        r = _pair(ru, en, ("Ru", "En"))
        t = r["test"]
        rows.append(
            {
                "config": config,
                "metric": metric,
                "n_en": len(en),
                "n_ru": len(ru),
                "n_shared": r["n_shared"],
                "mismatch": r["n_x_only"] > 0 or r["n_y_only"] > 0,
                "n_error_en": r["n_error_y"],
                "n_error_ru": r["n_error_x"],
                "n_error_both": r["n_error_both"],
                "n_unscored": r["n_unscored"],
                "dropped": r["dropped"],
                "n": r["n"],
                "acc_en": r["acc_y"],
                "acc_ru": r["acc_x"],
                "diff": 100.0 * t.diff,
                "low": 100.0 * t.low,
                "high": 100.0 * t.high,
                "both_right": r["both_right"],
                "ru_right_en_wrong": t.b,
                "en_right_ru_wrong": t.c,
                "both_wrong": r["both_wrong"],
                "p": t.p,
                "method": t.method,
            }
        )
    out = pd.DataFrame(rows, columns=CROSS_COLUMNS[:-1])
    out["p_holm"] = holm(out["p"].to_numpy(float)) if not out.empty else []
    return out


def mismatch_notes(cross: pd.DataFrame) -> list[str]:
    """One line per configuration whose En and Ru runs cover different item sets."""
    return [
        f"{r.config}: the En run has {r.n_en} items and the Ru run {r.n_ru}; only the {r.n_shared} shared items "
        "are compared."
        for r in cross.itertuples(index=False)
        if r.mismatch
    ]


def item_set_notes(data: RunSet | pd.DataFrame, shown: int = 6) -> list[str]:
    """One line per language whose configurations hold records of different item sets (a run with
    ``--limit``, on another items file, or not run to the end): their accuracies side by side in one
    table are not over the same items. Names each configuration's item count (the first ``shown``) and
    how many items all of them share."""
    df = _frame(data)
    notes = []
    for lang, g in df.groupby("lang", sort=True):
        sets = {str(c): frozenset(ids) for c, ids in g.groupby("config", sort=False)["id"]}
        if len(sets) < 2 or len(set(sets.values())) == 1:
            continue
        shared = frozenset.intersection(*sets.values())
        counts = ", ".join(f"{c} {len(ids)}" for c, ids in list(sets.items())[:shown])
        more = f", and {len(sets) - shown} more" if len(sets) > shown else ""
        notes.append(f"{str(lang).capitalize()}: the configurations hold records of different items ({counts}{more}; "
                     f"{len(shared)} in all of them), so their rows are not over the same items; the paired "
                     "section compares them on shared items.")
    return notes


def _config_of(df: pd.DataFrame, model: str, effort: str | None) -> str:
    eff = normalise_effort(effort)
    sel = df[(df["model"].str.casefold() == str(model).casefold()) & (df["effort"].map(normalise_effort) == eff)]
    if sel.empty:
        known = ", ".join(sorted(df["config"].unique()))
        raise InputError(f"no run of model {model!r} with effort {effort or '-'!r}; known: {known}")
    return str(sel["config"].iloc[0])


def en_ru_items(
    data: RunSet | pd.DataFrame, model: str, effort: str | None = None, metric: str | None = None
) -> dict[str, list[str]]:
    """Item ids of one configuration by En × Ru outcome, over items both runs scored.

    Keys: ``ru_right_en_wrong`` (the contamination stage's input), ``en_right_ru_wrong``, and the
    controls ``both_right`` and ``both_wrong``; each list sorted. ``metric`` defaults to the
    judge when these runs have judge values, else strict exact match; ``"judge_else_em"`` applies
    :func:`correctness` item by item (the contamination stage's rule).
    """
    df = _frame(data)
    config = _config_of(df, model, effort)
    metric = metric or default_metric(df[df["config"] == config])
    runs = run_outcomes(df[df["config"] == config], metric)
    en, ru = _outcomes(runs, config, "en"), _outcomes(runs, config, "ru")
    both = pd.DataFrame({"en": en.values.mask(en.missing), "ru": ru.values.mask(ru.missing)}).dropna()
    e, r = both["en"].astype(bool), both["ru"].astype(bool)
    return {
        "ru_right_en_wrong": sorted(both.index[r & ~e]),
        "en_right_ru_wrong": sorted(both.index[e & ~r]),
        "both_right": sorted(both.index[e & r]),
        "both_wrong": sorted(both.index[~e & ~r]),
    }


def ru_right_en_wrong(
    data: RunSet | pd.DataFrame, model: str, effort: str | None = None, metric: str | None = None
) -> list[str]:
    """Ids of the items one configuration got right in Russian and wrong in English."""
    return en_ru_items(data, model, effort, metric)["ru_right_en_wrong"]


def check_compare(runs: Any, compare: Any, aliases: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The ``compare`` pairs of ``03_analysis`` resolved against ``runs`` before anything renders
    (``cresowlve report 03_analysis -p compare ...``): a ``ValueError`` naming the known display names
    and grid labels for a name that is in none of them, or for a value that is not a list of pairs.
    No runs found: nothing to check (the report itself says so)."""
    from cresowlve_core.analysis.loading import load_runs

    if not isinstance(compare, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in compare):
        raise InputError(f"compare: a list of name pairs, e.g. [[\"GPT-4.1\", \"GPT-5.4 (medium)\"]]; got {compare!r}")
    rs = load_runs(runs)
    if rs.empty:
        return []
    merged = {**rs.aliases, **(aliases or {})}
    try:
        return [resolve_pair(rs.responses, a, b, merged) for a, b in compare]
    except ValueError as exc:
        raise InputError(f"compare: {exc}") from None
