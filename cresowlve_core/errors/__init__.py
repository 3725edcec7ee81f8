"""Error analysis of wrong answers (CresOWLve §5): seven categories, an automatic labeller,
the distribution per model, manual annotation and agreement.

* :mod:`~cresowlve_core.errors.taxonomy` — the categories and the labeller's few-shot examples;
* :mod:`~cresowlve_core.errors.wrong` — which answers are wrong (judge where scored, else strict EM);
* :mod:`~cresowlve_core.errors.label` — ``label_messages``, ``parse_label``, ``alabel`` (one
  ``map_with_resume`` run) and ``label_errors``;
* :mod:`~cresowlve_core.errors.distribution` — Wilson intervals and χ² tests;
* :mod:`~cresowlve_core.errors.annotation` — the seeded sample, the store and the ipywidgets panel;
* :mod:`~cresowlve_core.errors.agreement` — Cohen's/Fleiss' κ with CIs, confusion, precision/recall;
* :mod:`~cresowlve_core.errors.report` — ``analyse`` and the notebook sections.
"""

from cresowlve_core.errors.label import Label, alabel, label_errors, label_messages, parse_label
from cresowlve_core.errors.taxonomy import CATEGORIES, FEW_SHOT, SLUGS, category_of
from cresowlve_core.errors.wrong import WrongAnswer, collect_wrong, correctness

__all__ = ["CATEGORIES", "FEW_SHOT", "SLUGS", "Label", "WrongAnswer", "alabel", "category_of", "collect_wrong",
           "correctness", "label_errors", "label_messages", "parse_label"]
