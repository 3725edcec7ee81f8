"""``cresowlve contamination run|report``: the contamination tests from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cresowlve_core.cli.common import data_folder


def cmd_contamination_run(a: argparse.Namespace) -> int:
    import pandas as pd

    from cresowlve_core.banners import banner_text
    from cresowlve_core.contamination.pipeline import MAX_TOKENS, QUIZ_MAX_TOKENS, Role, run_contamination
    from cresowlve_core.contamination.select import NO_SET, SETS
    from cresowlve_core.contamination.verdict import holm_across_models, verdict_lines, verdict_table
    from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_USAGE, stage_exit
    from cresowlve_core.runtime.outcomes import outcome_note, served_note
    from cresowlve_core.untrusted import one_line

    def banner() -> None:  # once the run directories are checked, before a model starts
        if a.quiz_base_url is None or a.perturber_base_url is None:
            print(banner_text("embedded"), file=sys.stderr)

    c = run_contamination(a.runs, out_dir=data_folder(a.out_dir, "contamination"), lang=a.lang,
                          perturber=Role(a.perturber_model, a.perturber_base_url, a.perturber_api_key_env),
                          quiz_taker=Role(a.quiz_model, a.quiz_base_url, a.quiz_api_key_env),
                          n_repeats=a.repeats, max_items_per_set=a.max_items, seed=a.seed, make_demo=False,
                          max_tokens=a.max_tokens or MAX_TOKENS, quiz_max_tokens=a.quiz_max_tokens or QUIZ_MAX_TOKENS,
                          concurrency=a.concurrency, progress=True, max_input_chars=a.max_input_chars,
                          max_cost=a.max_cost, cache=not a.no_cache, on_start=banner)
    print(c.source)
    for note in c.notes:  # a run left out (another run of its configuration kept), items without a question
        print(f"note: {one_line(note)}", file=sys.stderr)
    counts = c.set_counts
    paired = counts[counts[[*SETS, *(k for k in NO_SET if k != "unpaired")]].sum(axis=1) > 0] if len(counts) else counts
    if not c.results and c.stopped is None and paired.empty:
        print(f"error: no configuration with paired En and Ru runs (and a question in {a.lang}) in {a.runs!r}: "
              "nothing to test; evaluate a model in both languages first", file=sys.stderr)
        return EXIT_USAGE
    done = [r for r in c.results if not r.stopped]
    # Holm across the configurations with a verdict
    tables = holm_across_models(pd.concat([verdict_table(r) for r in done], ignore_index=True)) if done else None
    for r in c.results:
        if r.stopped:  # no verdict from missing data
            print(f"== {one_line(r.config)}: no verdict ({one_line('; '.join(r.stopped))})")
            continue
        assert tables is not None
        print(f"== {one_line(r.config)} (basis: {r.basis})\n"
              + "\n".join(verdict_lines(tables[tables["config"] == r.config].reset_index(drop=True))))
    tested = {r.config for r in c.results}
    for row in counts.itertuples(index=False):
        if row.config not in tested and not any(getattr(row, k) for k in SETS):  # say why, never drop it silently
            why = ", ".join(f"{getattr(row, k)} {k.replace('_', ' ')}" for k in NO_SET if getattr(row, k))
            print(f"== {one_line(row.config)}: not tested (no item in any set{f'; {why}' if why else ''})")
    left_out = (f"{c.n_without_question} item(s) of the sets not quizzed: no {a.lang} question could be read for "
                "them (their runs' items, the notes above)")
    if not c.results and c.stopped is None:
        if c.n_without_question:
            print(f"incomplete: {left_out}; nothing was asked", file=sys.stderr)
            return EXIT_INCOMPLETE
        print("no verdict: no configuration has an item in any set (the reasons above); nothing was asked",
              file=sys.stderr)
        return 0
    summary = c.summary()
    print(f"model calls: {summary['n_ok']} of {summary['n_items']} answered{outcome_note(summary)}, "
          f"{summary['n_error']} errored, {summary['n_not_run']} not run; {c.out_dir / 'summary.json'}"
          + "".join(served_note(s.get("served_models"), f"{one_line(s['step'], 80)} answers") for s in summary["steps"]))
    if c.stopped:
        skipped = "; the later steps were skipped, no verdict for the configuration that stopped"
        print(f"contamination stopped at {c.stopped_at} ({c.stopped}){skipped}; summary: {c.out_dir / 'summary.json'}",
              file=sys.stderr)
    code = stage_exit(summary, unit="calls")
    if c.n_without_question and code == 0:
        print(f"incomplete: {left_out}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return code


def cmd_contamination_report(a: argparse.Namespace) -> int:
    from cresowlve_core import notebook_progress
    from cresowlve_core.contamination.pipeline import MAX_TOKENS, QUIZ_MAX_TOKENS
    from cresowlve_core.exitcodes import report_exit
    from cresowlve_core.notebooks import run_notebook

    # the settings `contamination run` uses, so that the report continues the same runs
    params: dict[str, Any] = {
        "runs": a.runs, "out_dir": str(data_folder(a.out_dir, "contamination")), "lang": a.lang, "perturber_model": a.perturber_model,
        "perturber_base_url": a.perturber_base_url, "perturber_api_key_env": a.perturber_api_key_env,
        "quiz_model": a.quiz_model, "quiz_base_url": a.quiz_base_url, "quiz_api_key_env": a.quiz_api_key_env,
        "n_repeats": a.repeats, "max_items_per_set": a.max_items, "max_tokens": a.max_tokens or MAX_TOKENS,
        "quiz_max_tokens": a.quiz_max_tokens or QUIZ_MAX_TOKENS, "seed": a.seed,
        "max_cost": a.max_cost}
    res = run_notebook("05_contamination", params, Path(a.reports_dir) if a.reports_dir else None,
                       progress_every_s=notebook_progress.PROGRESS_EVERY_S)
    print(f"{res.html}  ({res.seconds:.1f}s)")
    return report_exit(res.records)  # the model calls the report made, as `contamination run` would exit


def add_contamination_parser(sub: Any) -> None:
    """Register ``cresowlve contamination run`` and ``cresowlve contamination report``."""
    from cresowlve_core.argtypes import nonempty, role_args
    from cresowlve_core.argtypes import positive_int as _positive_int
    from cresowlve_core.cli.options import add_client_options, add_reports_dir
    from cresowlve_core.inputs import add_max_input_chars

    cont = sub.add_parser("contamination", help="data-contamination tests (paper App. A)").add_subparsers(
        dest="contamination_cmd", required=True)
    for name, fn, helptext in (("run", cmd_contamination_run, "perturb, quiz (BDQ, BCQ) and completion test; "
                                "prints the verdict table per configuration (resumable)"),
                               ("report", cmd_contamination_report,
                                "render notebooks/05_contamination.ipynb as an HTML report")):
        p = cont.add_parser(name, help=helptext)
        p.add_argument("--runs", default="data/runs/demo/*", help="glob, or folder, of En and Ru evaluation runs")
        p.add_argument("--out-dir", default=None, type=nonempty,
                       help="folder of the perturbation and quiz runs; relative to the project "
                            "(default: data/contamination under the data directory)")
        p.add_argument("--lang", choices=["ru", "en"], default="ru", help="language of the quizzed questions")
        role_args(p, "perturber", "perturber")
        role_args(p, "quiz", "quiz-taker")
        p.add_argument("--repeats", type=_positive_int, default=3, help="BCQ repeats")
        p.add_argument("--max-items", type=_positive_int, default=None, help="items per set and configuration")
        p.add_argument("--max-tokens", type=_positive_int, default=None,
                       help="output budget of a perturbation and of a continuation (default: pipeline.MAX_TOKENS, "
                            "256); a reply cut off by it before its content is no answer")
        p.add_argument("--quiz-max-tokens", type=_positive_int, default=None,
                       help="output budget of a quiz reply (default: pipeline.QUIZ_MAX_TOKENS, 16; a reasoning "
                            "quiz-taker needs room to think); a reply cut off before naming an option is no answer")
        help = {"seed": "seed of every placement, cut and model call",
                "max_cost": "stop cleanly before a step (the perturbation, a configuration's quizzes or completion "
                            "test) spends more than this many USD"}
        if name == "run":
            add_client_options(p, "seed", "concurrency", "max_cost", "cache", help=help)
            add_max_input_chars(p, "an item whose question is")
        else:
            add_client_options(p, "seed", "max_cost", help=help)
            add_reports_dir(p)
        p.set_defaults(fn=fn)
