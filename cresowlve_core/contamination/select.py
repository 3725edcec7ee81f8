"""Which items go into the contamination tests.

The target set of a configuration is the items it answered right in Russian but wrong in
English (paper App. A: 580 items for Gemini-3.1-Pro); the control sets are the items wrong in
both languages and right in both. Correctness follows the analysis's per-item rule (judge where
scored, else strict EM; :func:`cresowlve_core.analysis.paired.correctness`), as does
:func:`cresowlve_core.analysis.paired.en_ru_items` with ``metric="judge_else_em"``; here the sets
of every configuration come with their counts and the basis of each member. An item whose
correctness is unknown in either language is counted as ``unknown`` and goes into no set.
"""

from __future__ import annotations

import pandas as pd

from cresowlve_core.analysis.loading import RunSet
from cresowlve_core.analysis.paired import correctness

TARGET = "target"
WRONG_BOTH = "wrong_both"
RIGHT_BOTH = "right_both"
SETS = (TARGET, WRONG_BOTH, RIGHT_BOTH)
SET_LABELS = {TARGET: "right in Ru, wrong in En", WRONG_BOTH: "wrong in both (control)",
              RIGHT_BOTH: "right in both (control)"}


def paired_sets(data: RunSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(members, counts)``: one row per (config, item) with its ``set``; and per config the
    counts of each set, of En-only / Ru-only items and of unknown correctness."""
    cols = ["config", "model", "id", "set", "correct_en", "correct_ru", "basis_en", "basis_ru"]
    if data.empty:
        return pd.DataFrame(columns=cols), pd.DataFrame(columns=["config", *SETS, "ru_wrong_en_right", "unknown",
                                                                 "unpaired"])
    df = data.responses.join(correctness(data.responses))[["config", "model", "id", "lang", "correct", "basis"]]
    members, counts = [], []
    for config, part in df.groupby("config", sort=True):
        en = part[part["lang"] == "en"].set_index("id")
        ru = part[part["lang"] == "ru"].set_index("id")
        both = en.index.intersection(ru.index)
        row = {"config": config, TARGET: 0, WRONG_BOTH: 0, RIGHT_BOTH: 0, "ru_wrong_en_right": 0, "unknown": 0,
               "unpaired": int(len(en.index.symmetric_difference(ru.index)))}
        for item in sorted(both):
            ce, cr = en.at[item, "correct"], ru.at[item, "correct"]
            if pd.isna(ce) or pd.isna(cr):
                row["unknown"] += 1
                continue
            s = (TARGET if cr == 1 and ce == 0 else WRONG_BOTH if cr == 0 and ce == 0
                 else RIGHT_BOTH if cr == 1 and ce == 1 else None)
            if s is None:
                row["ru_wrong_en_right"] += 1
                continue
            row[s] += 1
            members.append({"config": config, "model": en.at[item, "model"], "id": item, "set": s,
                            "correct_en": ce, "correct_ru": cr, "basis_en": en.at[item, "basis"],
                            "basis_ru": ru.at[item, "basis"]})
        counts.append(row)
    return pd.DataFrame(members, columns=cols), pd.DataFrame(counts)
