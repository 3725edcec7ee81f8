"""Which items go into the contamination tests.

The target set of a configuration is the items it answered right in Russian but wrong in
English (paper App. A: 580 items for Gemini-3.1-Pro); the control sets are the items wrong in
both languages and right in both.

**One metric per configuration, for both languages** (the *basis* of its sets): the LLM judge
when its coverage reaches ``coverage_threshold`` (default 90 %, as in Table 1) in English *and*
in Russian, else strict exact match in both. Coverage is the share of the run's items with a
judge verdict on a real answer; errored items (no answer) count against it. Mixing metrics item
by item would let the measurement decide the set: an item judged right in Russian but left
unscored by the judge in English, then graded by strict EM there, would land in the target set
because of how it was graded.

An item with no value for the basis metric in either language is ``unknown``; an item the model
did not answer (``status == "error"``) in either language is ``no_answer`` (an API failure is not a
wrong answer); an item it refused, or its provider's filter stopped, in either language is
``withheld`` (in accuracy a refusal is not correct, but "wrong in En" here means the model did not
know the answer in English, which a refusal does not show: an English-only safety refusal would
otherwise look like Russian-only knowledge); an item whose answer was cut off at the token limit
and is not right, in either language, is ``cut_off`` (it stopped before an answer, which says
nothing of what the model knows; a cut-off answer that is right counts as right); items right in
En only, and items run in one language only (``unpaired``), are counted too. None of these goes into a set. Each member keeps its difficulty level (1–5, the
paper's rating; NaN when unrated) so the controls can be matched on it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cresowlve_core.analysis.coverage import judge_coverage_by_run
from cresowlve_core.analysis.loading import RunSet, not_an_answer
from cresowlve_core.analysis.table import COVERAGE_THRESHOLD

TARGET = "target"
WRONG_BOTH = "wrong_both"
RIGHT_BOTH = "right_both"
SETS = (TARGET, WRONG_BOTH, RIGHT_BOTH)
SET_LABELS = {TARGET: "right in Ru, wrong in En", WRONG_BOTH: "wrong in both (control)",
              RIGHT_BOTH: "right in both (control)"}
JUDGE, EM = "judge", "em_strict"
MEMBER_COLUMNS = ["config", "model", "id", "set", "difficulty", "basis", "correct_en", "correct_ru"]
#: the counts of a configuration's items that go into no set, by reason
NO_SET = ("ru_wrong_en_right", "unknown", "no_answer", "withheld", "cut_off", "unpaired")
COUNT_COLUMNS = ["config", "basis", "judge_coverage_en", "judge_coverage_ru", *SETS, *NO_SET]


def set_basis(responses: pd.DataFrame, threshold: float = COVERAGE_THRESHOLD) -> tuple[str, float, float]:
    """``(basis, coverage_en, coverage_ru)`` of one configuration's responses: the judge when its
    coverage (:func:`~cresowlve_core.analysis.coverage.judge_coverage_by_run`: verdicts on real
    answers / all items, errored items count against it) reaches ``threshold`` in both languages,
    else strict EM in both."""
    cov = judge_coverage_by_run(responses).set_index("lang")["coverage"]
    cov_en, cov_ru = float(cov.get("en", 0.0)), float(cov.get("ru", 0.0))
    return (JUDGE if cov_en >= threshold and cov_ru >= threshold else EM), cov_en, cov_ru


def basis_text(basis: str, cov_en: float, cov_ru: float, threshold: float = COVERAGE_THRESHOLD) -> str:
    """The basis in words, e.g. "LLM judge in both languages (coverage En 97%, Ru 95% ≥ 90%)"."""
    cov = f"judge coverage En {100 * cov_en:.0f}%, Ru {100 * cov_ru:.0f}%"
    if basis == JUDGE:
        return f"LLM judge in both languages ({cov} ≥ {100 * threshold:.0f}%)"
    return f"strict exact match in both languages ({cov}; the judge needs ≥ {100 * threshold:.0f}% in both)"


def _withheld(responses: pd.DataFrame) -> pd.DataFrame:
    """``responses`` with a ``withheld`` column: refused or filtered (:func:`~cresowlve_core.analysis.loading.not_an_answer`),
    and ``cut_off``: answered at the token limit (``truncated``; records without the field were not)."""
    cut = responses["truncated"].fillna(False).astype(bool) if "truncated" in responses else False
    return responses.assign(withheld=not_an_answer(responses), cut_off=cut)


def paired_sets(data: RunSet, coverage_threshold: float = COVERAGE_THRESHOLD) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(members, counts)``: one row per (config, item) with its ``set``, ``difficulty`` and the
    configuration's ``basis``; and per config its basis, judge coverage per language and the counts
    of each set and of the items in no set (columns :data:`COUNT_COLUMNS`)."""
    if data.empty:
        return pd.DataFrame(columns=MEMBER_COLUMNS), pd.DataFrame(columns=COUNT_COLUMNS)
    df = data.responses
    members: list[pd.DataFrame] = []
    counts: list[dict[str, object]] = []
    for config, part in df.groupby("config", sort=True):
        en = _withheld(part[part["lang"] == "en"].drop_duplicates("id", keep="last")).set_index("id")
        ru = _withheld(part[part["lang"] == "ru"].drop_duplicates("id", keep="last")).set_index("id")
        basis, cov_en, cov_ru = set_basis(part.drop_duplicates(["id", "lang"], keep="last"), coverage_threshold)
        cols = ["status", "withheld", "cut_off", basis, "difficulty", "model"]
        both = en[cols].join(ru[cols], how="inner", lsuffix="_en", rsuffix="_ru").sort_index()
        no_answer = (both["status_en"] == "error") | (both["status_ru"] == "error")
        withheld = ~no_answer & (both["withheld_en"] | both["withheld_ru"])
        ce, cr = both[f"{basis}_en"], both[f"{basis}_ru"]
        cut_off = ~no_answer & ~withheld & ((both["cut_off_en"] & (ce != 1)) | (both["cut_off_ru"] & (cr != 1)))
        unknown = ~no_answer & ~withheld & ~cut_off & (ce.isna() | cr.isna())
        known = ~no_answer & ~withheld & ~cut_off & ~unknown
        label = pd.Series(np.select([(cr == 1) & (ce == 0), (cr == 0) & (ce == 0), (cr == 1) & (ce == 1)],
                                    list(SETS), "ru_wrong_en_right"), index=both.index)[known]
        tally = {s: int((label == s).sum()) for s in (*SETS, "ru_wrong_en_right")}
        row = {"config": config, "basis": basis, "judge_coverage_en": cov_en, "judge_coverage_ru": cov_ru, **tally,
               "unknown": int(unknown.sum()), "no_answer": int(no_answer.sum()), "withheld": int(withheld.sum()),
               "cut_off": int(cut_off.sum()),
               "unpaired": int(len(en.index.symmetric_difference(ru.index)))}
        inset = label[label.isin(SETS)]
        sel = both.loc[inset.index]
        members.append(pd.DataFrame({
            "config": config, "model": sel["model_en"].to_numpy(), "id": inset.index.astype(str), "set": inset.to_numpy(),
            "difficulty": sel["difficulty_ru"].fillna(sel["difficulty_en"]).to_numpy(float), "basis": basis,
            "correct_en": ce[inset.index].to_numpy(float), "correct_ru": cr[inset.index].to_numpy(float)}))
        counts.append(row)
    out = pd.concat(members, ignore_index=True) if members else pd.DataFrame(columns=MEMBER_COLUMNS)
    return out[MEMBER_COLUMNS], pd.DataFrame(counts, columns=COUNT_COLUMNS)
