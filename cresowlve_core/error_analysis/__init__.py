"""Error analysis of wrong answers (CresOWLve §5): seven categories, an automatic labeller,
the distribution per model, manual annotation and agreement.

* :mod:`~cresowlve_core.error_analysis.taxonomy` — the categories and the labeller's few-shot examples;
* :mod:`~cresowlve_core.error_analysis.wrong` — which answers are wrong (judge where scored, else strict EM);
* :mod:`~cresowlve_core.error_analysis.label` — ``label_messages``, ``parse_label``, ``alabel`` (one
  ``map_with_resume`` run) and ``label_errors``;
* :mod:`~cresowlve_core.error_analysis.distribution` — Wilson intervals and χ² tests;
* :mod:`~cresowlve_core.error_analysis.annotation` — the seeded sample, the store and the ipywidgets panel;
* :mod:`~cresowlve_core.error_analysis.agreement` — Cohen's/Fleiss' κ with CIs, confusion, precision/recall;
* :mod:`~cresowlve_core.error_analysis.report` — ``analyse`` and the notebook sections.

Names are imported lazily (PEP 562), so that ``cresowlve_core.cli.errors`` (the command-line parser)
does not load scipy and pandas through ``label`` -> ``wrong`` -> ``analysis`` (start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cresowlve_core.lazy import lazy_names

if TYPE_CHECKING:
    from cresowlve_core.error_analysis.label import Label, alabel, label_errors, label_messages, parse_label
    from cresowlve_core.error_analysis.taxonomy import CATEGORIES, FEW_SHOT, SLUGS, category_of
    from cresowlve_core.error_analysis.wrong import WrongAnswer, collect_wrong, config_correctness

_WHERE: dict[str, str] = {
    **dict.fromkeys(("Label", "alabel", "label_errors", "label_messages", "parse_label"), "label"),
    **dict.fromkeys(("CATEGORIES", "FEW_SHOT", "SLUGS", "category_of"), "taxonomy"),
    **dict.fromkeys(("WrongAnswer", "collect_wrong", "config_correctness"), "wrong"),
}

__all__ = [
    "CATEGORIES",
    "FEW_SHOT",
    "SLUGS",
    "alabel",
    "category_of",
    "collect_wrong",
    "config_correctness",
    "Label",
    "label_errors",
    "label_messages",
    "parse_label",
    "WrongAnswer",
]


__getattr__, __dir__ = lazy_names(__name__, _WHERE)
