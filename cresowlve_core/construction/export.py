"""Export (issue step 8): the published schema, a richer ``full`` export, and the data card.

Layout under ``<build>/export/``:

- ``creative/{en,ru}/test.{parquet,jsonl}``: the benchmark (published schema: configs ``en`` and
  ``ru``, split ``test``, columns of :data:`~cresowlve_core.items.PUBLISHED_FIELDS`), with a
  ``README.md`` declaring the configs;
- ``factual/{en,ru}/test.*``: the factual subset, same schema;
- ``full.jsonl``: every final item (one :class:`~cresowlve_core.items.Item` per line, both views,
  reasoning type, concepts, atomic facts, filter verdicts, provenance);
- ``DATA_CARD.md``: the funnel beside the paper's numbers, Table 2, label distributions, models
  and prompt versions.

An item goes to ``creative``/``factual`` only with both views and a reasoning type; the others
are in ``full.jsonl`` and counted on the card (``untranslated``, ``no reasoning type``).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cresowlve_core import outfiles
from cresowlve_core.construction.llm_steps import is_parsed, no_usable_value
from cresowlve_core.construction.records import Candidate
from cresowlve_core.items import LANGS, Item
from cresowlve_core.sources.hub import write_published_file
from cresowlve_core.sources.sample import items_to_jsonl
from cresowlve_core.untrusted import markdown_cell

#: The paper's funnel (§3.1): step -> count.
PAPER_FUNNEL: dict[str, int] = {"collected": 3789, "needs_material": 295, "russian_specific": 799,
                                "human_validation": 282, "final": 2413, "factual": 352, "creative": 2061}

_CARD_YAML = """---
configs:
- config_name: en
  data_files:
  - split: test
    path: en/test.parquet
- config_name: ru
  data_files:
  - split: test
    path: ru/test.parquet
---
"""


def subsets(cands: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """Final items by where they go: ``creative``, ``factual``, ``untranslated``, ``no_reasoning_type``."""
    out: dict[str, list[Candidate]] = {"creative": [], "factual": [], "untranslated": [], "no_reasoning_type": []}
    for c in cands:
        if c.en is None:
            out["untranslated"].append(c)
        elif c.reasoning_type not in ("creative", "factual"):
            out["no_reasoning_type"].append(c)
        else:
            out[c.reasoning_type].append(c)
    return out


def export_build(cands: Sequence[Candidate], out_dir: str | Path) -> dict[str, Any]:
    """Write the exports (see the module docstring); returns the paths written and the counts."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = subsets(cands)
    paths: dict[str, str] = {}
    for subset in ("creative", "factual"):
        items = [c.to_item() for c in parts[subset]]
        for lang in LANGS:
            for ext in ("parquet", "jsonl"):
                p = write_published_file(items, out / subset / lang / f"test.{ext}", lang)
                paths[f"{subset}/{lang}/{ext}"] = str(p)
        outfiles.write_text(out / subset / "README.md", _CARD_YAML + f"\nCresOWLve build export, {subset} subset "
                            f"({len(items)} items). See ../DATA_CARD.md.\n")
    full = out / "full.jsonl"
    outfiles.write_text(full, items_to_jsonl([c.to_item() for c in cands]))
    paths["full"] = str(full)
    return {"paths": paths, "counts": {k: len(v) for k, v in parts.items()}}


# ---------------------------------------------------------------------------------------------
# Data card
# ---------------------------------------------------------------------------------------------


def _tokens(text: str | None) -> int:
    return len((text or "").split())


def _mean_sd(values: list[int]) -> str:
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {sd:.2f}"


def table2_rows(items: Sequence[Item]) -> list[dict[str, Any]]:
    """The paper's Table 2 for these items: per difficulty (and unrated, and total) n, English
    explanations present, mean ± sd question and answer length in whitespace tokens, En / Ru."""
    groups: dict[str, list[Item]] = {}
    for it in items:
        groups.setdefault(str(it.difficulty) if it.difficulty else "unrated", []).append(it)
    order = [k for k in ("1", "2", "3", "4", "5", "unrated") if k in groups]
    rows = []
    for key, group in [*((k, groups[k]) for k in order), ("total", list(items))]:
        def lens(lang: str, f: str, g: list[Item] = group) -> list[int]:
            return [_tokens(getattr(getattr(i, lang), f)) for i in g if getattr(i, lang) is not None]
        rows.append({"difficulty": key, "n": len(group),
                     "explanations": sum(1 for i in group if i.en and i.en.explanation),
                     "question_tokens_en": _mean_sd(lens("en", "question")),
                     "question_tokens_ru": _mean_sd(lens("ru", "question")),
                     "answer_tokens_en": _mean_sd(lens("en", "answer")),
                     "answer_tokens_ru": _mean_sd(lens("ru", "answer"))})
    return rows


#: the funnel row of the final items no reviewer has decided on yet (shown when there are any)
UNREVIEWED_ROW = "of which not human-validated"


def funnel_rows(counts: dict[str, int]) -> list[dict[str, Any]]:
    """This build's funnel beside the paper's: collected, each removal, final (and how many of those
    no reviewer has decided on, when any), factual, creative."""
    labels = [("collected", "collected", ""), ("needs_material", "needs external material", "−"),
              ("russian_specific", "Russian-specific", "−"), ("human_validation", "human validation", "−"),
              ("final", "final", "="), ("factual", "of which factual", ""), ("creative", "of which creative", "")]
    rows = [{"step": f"{sign}{label}", "this build": counts.get(key), "paper": PAPER_FUNNEL[key]}
            for key, label, sign in labels]
    if counts.get("unreviewed"):  # kept with no human decision yet: in "final", unlike every item of the paper's
        rows.insert(5, {"step": UNREVIEWED_ROW, "this build": counts["unreviewed"], "paper": 0})
    return rows


def funnel_headline(funnel: list[dict[str, Any]], calls_note: str | None = None) -> str:
    """The construction report's one line: the funnel from collected to final, beside the paper's,
    and ``calls_note`` (:meth:`~cresowlve_core.construction.build.Build.calls_note`: the model calls
    that gave no verdict) when there is one."""
    steps = {row.get("step"): row.get("this build") for row in funnel}
    return (f"construction funnel: {steps.get('collected')} collected → {steps.get('=final')} final "
            f"({steps.get('of which creative')} creative, {steps.get('of which factual')} factual); "
            + (f"{steps[UNREVIEWED_ROW]} not human-validated; " if steps.get(UNREVIEWED_ROW) else "")
            + f"the paper: {PAPER_FUNNEL['collected']:,} → {PAPER_FUNNEL['final']:,}"
            + (f" — {calls_note}" if calls_note else ""))


def _md_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_(none)_\n"
    cols = list(rows[0])
    lines = ["| " + " | ".join(map(markdown_cell, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(markdown_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def label_distribution(items: Sequence[Item], field: str, top: int = 20) -> list[dict[str, Any]]:
    """How many items carry each label of ``field`` (the paper's Fig. 2), most common first."""
    counts = Counter(x for it in items for x in getattr(it, field))
    return [{"label": k, "items": v} for k, v in counts.most_common(top)]


#: The Fig. 2 fields of an item and the annotation step that labels each.
FIG2_STEPS: dict[str, str] = {"creative_domains": "concepts", "knowledge_domains": "domains", "cultures": "cultures"}


def has_model_labels(item: Item, field: str) -> bool:
    """Whether the item's ``field`` holds the labels its annotation step gave it. An item whose step
    was refused, filtered, unparseable or errored, or named only labels outside the vocabulary, has an
    empty list there that is no "none applies"; an item that records no such step (one not made by a
    build) is taken with the labels it has."""
    step = FIG2_STEPS[field]
    verdicts = item.meta.get("verdicts") or {}
    if step not in verdicts:
        return True
    verdict = verdicts[step]
    return is_parsed(step, verdict) and no_usable_value(step, verdict) is None


def label_coverage(items: Sequence[Item]) -> dict[str, int]:
    """Per Fig. 2 field, how many of ``items`` carry the labels of their annotation step
    (:func:`has_model_labels`): the n of that field's label counts."""
    return {field: sum(has_model_labels(it, field) for it in items) for field in FIG2_STEPS}


def label_population(n_labelled: int | None, n_items: int) -> str:
    """The sentence under a Fig. 2 table: its n, and the items left out for want of a model label."""
    if n_labelled is None or n_labelled == n_items:
        return f"n = {n_items} items.\n"
    return (f"n = {n_labelled} of {n_items} items; left out: {n_items - n_labelled} with no labels from the model "
            "(refused, filtered, unparseable, errored or outside the vocabulary; flagged for review).\n")


def _num(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "undefined"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


#: The multi-label fields scored with Gwet's AC1, with their titles.
AGREEMENT_FIELDS = (("concepts", "creative concepts"), ("domains", "knowledge domains"), ("cultures", "cultures"))


def agreement_table(result: dict[str, Any]) -> str:
    """The summary table of a build's ``agreement.json`` (markdown): per field, n, the statistic,
    its value and its seeded item-bootstrap 95% interval (``–`` and why, when there is none)."""
    from cresowlve_core.construction.agreement import format_ci
    from cresowlve_core.stats import wilson_interval

    rt = result.get("reasoning_type") or {}
    n_rt, raw = int(rt.get("n", 0) or 0), rt.get("raw_agreement")
    raw_ci = "–"
    if n_rt and raw is not None:
        low, high = wilson_interval(round(raw * n_rt), n_rt)
        raw_ci = f"[{low:.3f}, {high:.3f}] (Wilson)"
    rows = [{"field": "reasoning type", "n": n_rt, "statistic": "raw agreement",
             "value": _num(raw), "95% CI (item bootstrap)": raw_ci},
            {"field": "reasoning type", "n": rt.get("n", 0), "statistic": "Fleiss' κ", "value": _num(rt.get("fleiss_kappa")),
             "95% CI (item bootstrap)": format_ci(rt.get("fleiss_kappa_ci"))}]
    for key, title in AGREEMENT_FIELDS:
        m = result.get(key) or {}
        rows.append({"field": title, "n": m.get("n_items", 0),
                     "statistic": f"Gwet's AC1, support-weighted over {m.get('n_labels', 0)} label(s)",
                     "value": _num(m.get("overall")), "95% CI (item bootstrap)": format_ci(m.get("overall_ci"))})
    return _md_table(rows)


def agreement_coverage(result: dict[str, Any]) -> str:
    """How many items of the sample each reviewer labelled, and the labels saved for items not in
    it (left out); ``""`` for an ``agreement.json`` written before these were counted."""
    by, outside = result.get("annotated_by"), result.get("outside_sample") or {}
    if not by:
        return ""
    n = result.get("n_sample", "?")
    # reviewer names come from the review files: written as text (markdown_cell), as in the tables
    text = "Labelled per reviewer: " + ", ".join(f"{markdown_cell(r)} {k} of {n}" for r, k in by.items()) + "."
    if any(k == 0 for k in by.values()):
        text += " A reviewer with no label in this sample is not one of \"every reviewer\"."
    if stale := result.get("stale"):
        text += (" Labels made on another English translation than the item's now (run again or fixed since), left "
                 "out until labelled again: " + ", ".join(f"{markdown_cell(r)} {k}" for r, k in stale.items()) + ".")
    if outside:
        text += (" Labels saved for items not in this sample (an earlier sample of a rebuilt build), left out: "
                 + ", ".join(f"{markdown_cell(r)} {k}" for r, k in outside.items()) + ".")
    return text


def agreement_section(result: dict[str, Any] | None) -> str:
    """The data card's agreement section (App. B) from a build's ``agreement.json``: raw
    agreement and Fleiss' kappa for reasoning type; Gwet's AC1 support-weighted and per label for
    concepts, domains and cultures, each with n and a seeded item-bootstrap 95% interval. Says
    "not yet annotated" when no item of the sample has been labelled by every reviewer."""
    from cresowlve_core.construction.agreement import format_ci

    head = "\n## Agreement: human re-annotation vs the model (paper App. B)\n"
    if not result or not result.get("n_items"):
        n = (result or {}).get("n_sample")
        sample = f"a seeded sample of {n} item(s) is in `review/agreement_queue.jsonl`" if n else "no sample yet"
        coverage = agreement_coverage(result or {})
        if (result or {}).get("reviewers"):
            return (head + f"\nNo item of the sample is labelled by every reviewer yet, so no agreement is scored "
                    f"({sample}; agreement is scored on the items every reviewer labelled). {coverage}\n")
        return (head + f"\nNot yet annotated: {sample}. Label it in the review panel or app (agreement mode), "
                f"then run the build again. {coverage}".rstrip() + "\n")
    reviewers = ", ".join(map(markdown_cell, result.get("reviewers") or []))
    raters = 1 + len(result.get("reviewers") or [])
    lines = [head, f"\n{result['n_items']} of {result.get('n_sample', '?')} sampled item(s) annotated by every "
             f"reviewer ({reviewers}); raters per item = the model + {raters - 1} human(s). Population: those items. "
             "Intervals: seeded percentile bootstrap over items (1,000 resamples); resamples where the statistic is "
             "undefined are counted; `–` where there is no interval, with the reason. "
             + agreement_coverage(result) + "\n"]
    lines.append(agreement_table(result))
    fields = (("reasoning_type", "reasoning type"), *AGREEMENT_FIELDS)
    missing = [f"{title} {(result.get(key) or {}).get('n_no_model_label')}" for key, title in fields
               if (result.get(key) or {}).get("n_no_model_label")]
    if missing:
        lines.append("\nLeft out of a field's n: items the model gave no labels for (refused, filtered, unparseable or "
                     "errored, or every label outside the vocabulary; an empty set would claim it saw none apply): "
                     f"{', '.join(missing)}.\n")
    if unmapped := (result.get("domains") or {}).get("n_unmapped"):
        lines.append(f"\nLeft out of the knowledge domains' n: {unmapped} item(s) with a free-text domain the model gave "
                     "that no group was found for (its groups are not all known; `steps/domain_routes.json`).\n")
    if no_human := (result.get("reasoning_type") or {}).get("n_no_human_label"):
        lines.append(f"\nLeft out of the reasoning type's n: {no_human} item(s) a reviewer gave no reasoning type.\n")
    unrated = [f"{title} {(result.get(key) or {}).get('n_no_human_label')}" for key, title in AGREEMENT_FIELDS
               if (result.get(key) or {}).get("n_no_human_label")]
    if unrated:
        lines.append("\nLeft out of a field's n: items a reviewer's saved labels have no such field for (not labelled, "
                     f"which is not \"none applies\"): {', '.join(unrated)}.\n")
    if unrecognised := (result.get("cultures") or {}).get("unrecognised"):
        lines.append("\nCultures a reviewer gave that are not in the list of known cultures, scored as given (a "
                     "misspelling is a label of its own, in disagreement with the model's): "
                     + "; ".join(f"{markdown_cell(r)}: {', '.join(map(markdown_cell, names))}"
                                 for r, names in unrecognised.items()) + ".\n")
    lines.append("\nAC1 per label (support = ratings marking the label present, a label counted once per rater "
                 "and item; labels nobody used are left out; undefined = fewer than two categories observed):\n")
    per = [{"field": title, "label": lab, "AC1": _num(v.get("ac1")), "95% CI": format_ci(v.get("ci")),
            "support": v.get("support"), "n": (result.get(key) or {}).get("n_items")}
           for key, title in AGREEMENT_FIELDS for lab, v in ((result.get(key) or {}).get("per_label") or {}).items()]
    lines.append(_md_table(per))
    return "\n".join(lines)


def n_unparseable(step: dict[str, Any]) -> int:
    """A model step's items whose answer could not be read: unparseable, or an incomplete translation."""
    return int(step.get("unparseable", 0)) + int(step.get("translation_incomplete", 0))


def n_unusable(step: dict[str, Any]) -> int:
    """An annotation step's items whose answer was read but held nothing usable: every label out of
    the vocabulary, or every fact rejected (:func:`~cresowlve_core.construction.llm_steps.no_usable_value`)."""
    return int(step.get("oov_only", 0)) + int(step.get("no_usable_facts", 0))


def model_steps_section(steps: dict[str, dict[str, Any]]) -> str:
    """Per model step, the items that got no usable answer: refused or filtered by the provider,
    unparseable (or an incomplete translation), nothing usable in the answer, errored or not run. A
    filter keeps such an item, an annotation leaves its label unset; both flag it for review."""
    rows = [{"step": name, "items": s.get("n_in", 0), "refused": s.get("refused", 0), "filtered": s.get("filtered", 0),
             "unparseable or incomplete": n_unparseable(s),
             "no usable label (out of vocabulary, facts rejected)": n_unusable(s),
             "errored": s.get("llm_error", 0), "not run": s.get("not_run", 0),
             "truncated (read as is)": s.get("truncated", 0)} for name, s in steps.items()]
    return ("\n## Model steps: items without a usable answer\n\n"
            "A filter keeps an item it has no verdict for, and an annotation leaves its label unset; "
            "each such item carries a review flag naming why (`meta.review_flags` in `full.jsonl`). An answer cut off "
            "at the token limit is read as it is and flagged `truncated`: its last label or fact may be cut (a "
            "translated field cut mid-way is left unset, flagged `line_cut` or `missing_tag`).\n\n"
            + _md_table(rows))


def data_card(build: dict[str, Any], funnel: dict[str, int], creative: Sequence[Item], notes: Sequence[str] = ()) -> str:
    """The data card (markdown): funnel vs the paper, Table 2 for the creative subset, label
    distributions, review decisions, agreement (``build["agreement"]``, see
    :func:`agreement_section`), models and prompt versions."""
    parts = [f"# CresOWLve build `{build.get('name')}`\n"]
    parts += [f"> {n}\n" for n in notes]
    parts.append("## Funnel (paper §3.1)\n")
    parts.append(_md_table(funnel_rows(funnel)))
    extra = {k: v for k, v in funnel.items() if k not in PAPER_FUNNEL and k != "unreviewed"}
    if extra:
        parts.append("\nAlso counted: " + ", ".join(f"{k} = {v}" for k, v in extra.items()) + "\n")
    parts.append("\n## Creative subset by difficulty (paper Table 2; tokens = whitespace-separated words)\n")
    parts.append(_md_table(table2_rows(creative)))
    for field, title in (("knowledge_domains", "Knowledge domains"), ("creative_domains", "Creative concepts"),
                         ("cultures", "Cultures")):
        parts.append(f"\n## {title} (paper Fig. 2), creative subset\n")
        parts.append(label_population((build.get("label_coverage") or {}).get(field), len(creative)))
        parts.append(_md_table(label_distribution(creative, field)))
    parts.append(model_steps_section(build.get("model_steps") or {}))
    decisions = build.get("review_codes") or {}
    parts.append("\n## Human validation decisions by code\n")
    parts.append(_md_table([{"code": k, "items": v} for k, v in sorted(decisions.items())]))
    if stale := decisions.get("stale"):
        parts.append(f"\n{stale} keep decision(s) were made on another English translation than the one exported "
                     "(the translation was run again): not applied; those items count as not human-validated.\n")
    if incomplete := decisions.get("fix_incomplete"):
        parts.append(f"\n{incomplete} fix_translation decision(s) left the English question or answer empty (an item "
                     "with no translation, fixed in some fields only): not applied, flagged `human:fix_incomplete`.\n")
    if conflicts := build.get("review_conflicts"):
        undated = build.get("review_undated_conflicts") or 0
        parts.append(f"\nReviewers disagreed on {conflicts} item(s); the latest decision was applied"
                     + (f" (on {undated} of them a decision has no time, `at`, as a hand-written line: it counts as the "
                        "earliest, whenever it was written)" if undated else "") + ".\n")
    if not_applied := build.get("review_not_applied"):
        parts.append(f"\n{not_applied} saved decision(s) were not applied (the build ran with `--no-review`): every "
                     "final item counts as not human-validated.\n")
    if other := build.get("review_not_in_build"):
        parts.append(f"\n{other} saved decision(s) are for items not in this build (another sample, source or filter "
                     "verdict since they were saved): not applied, not counted above.\n")
    parts.append(agreement_section(build.get("agreement")))
    parts.append("\n## Models and prompt versions\n")
    parts.append(_md_table([{"step": s, **m} for s, m in (build.get("models") or {}).items()]))
    return "\n".join(parts)
