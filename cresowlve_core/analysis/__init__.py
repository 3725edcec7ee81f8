"""Analysis of evaluation run directories: every result figure of the CresOWLve paper.

Public API (see each module for details):

* loading: :func:`load_runs`, :class:`RunSet`, :func:`resolve_run_dirs`
* Table 1: :func:`results_long`, :func:`table1_display`, :func:`table1_wide`,
  :func:`write_table1_csv`, :func:`write_table1_latex`, :func:`load_paper_table`
* breakdowns: :func:`by_difficulty`, :func:`difficulty_trend`, :func:`by_group`, :func:`creative_vs_factual`
* paired: :func:`compare_configs`, :func:`cross_lingual`, :func:`en_ru_items`, :func:`ru_right_en_wrong`
* report sections (shared by notebooks 02 and 03): ``report.table1_section``,
  ``report.difficulty_section``, ``report.example_errors_section`` and the rest of :mod:`.report`
* complexity: :func:`item_features`, :func:`difficulty_correlations`, :func:`performance_correlations`
* reliability and cost: :func:`judge_vs_em`, :func:`judge_repeatability`, :func:`judge_coverage`,
  :func:`cost_table`
* synthetic inputs for tests/benchmarks only: :func:`write_synthetic_runs`
"""

from cresowlve_core.analysis.breakdowns import by_difficulty, by_group, creative_vs_factual, difficulty_trend
from cresowlve_core.analysis.complexity import difficulty_correlations, item_features, performance_correlations
from cresowlve_core.analysis.loading import RunSet, load_runs, resolve_run_dirs
from cresowlve_core.analysis.paired import compare_configs, cross_lingual, en_ru_items, ru_right_en_wrong
from cresowlve_core.analysis.reliability import cost_table, judge_coverage, judge_repeatability, judge_vs_em
from cresowlve_core.analysis.synthetic_runs import write_synthetic_runs
from cresowlve_core.analysis.table import (
    load_paper_table,
    results_long,
    table1_display,
    table1_wide,
    write_table1_csv,
    write_table1_latex,
)

__all__ = [
    "RunSet",
    "by_difficulty",
    "by_group",
    "compare_configs",
    "cross_lingual",
    "difficulty_trend",
    "en_ru_items",
    "ru_right_en_wrong",
    "cost_table",
    "creative_vs_factual",
    "difficulty_correlations",
    "item_features",
    "judge_coverage",
    "judge_repeatability",
    "judge_vs_em",
    "load_paper_table",
    "load_runs",
    "performance_correlations",
    "resolve_run_dirs",
    "results_long",
    "table1_display",
    "table1_wide",
    "write_synthetic_runs",
    "write_table1_csv",
    "write_table1_latex",
]
