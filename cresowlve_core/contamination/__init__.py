"""Data-contamination tests (CresOWLve App. A, and past it).

* :func:`rouge_l` — ROUGE-L F1 on words that works for Cyrillic (public API), :func:`prefix_match`;
* :mod:`~cresowlve_core.contamination.select` — target set (right in Ru, wrong in En) and controls,
  one metric per configuration for both languages;
* :mod:`~cresowlve_core.contamination.itemstats` — the tests' statistics, the item as the unit
  (``MIN_ITEMS``, BCQ majorities, difficulty-matched differences);
* :mod:`~cresowlve_core.contamination.perturb` — three word-level perturbations per question;
* :mod:`~cresowlve_core.contamination.quiz` — bias detector and bias compensator quizzes;
* :mod:`~cresowlve_core.contamination.completion` — the guided/general completion test;
* :mod:`~cresowlve_core.contamination.verdict` — one verdict table per configuration;
* :mod:`~cresowlve_core.contamination.pipeline` — ``run_contamination``, everything end to end;
* :mod:`~cresowlve_core.contamination.report` — the sections of ``notebooks/05_contamination.ipynb``.
"""

from cresowlve_core.contamination.rouge import prefix_match, rouge_l, words

__all__ = ["prefix_match", "rouge_l", "words"]
