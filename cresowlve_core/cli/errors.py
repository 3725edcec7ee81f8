"""``cresowlve errors label|report``: the error analysis from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cresowlve_core.argtypes import role_args
from cresowlve_core.cli.common import data_folder
from cresowlve_core.cli.options import add_client_options, add_reports_dir, client_options
from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_OK, sent_phrase
from cresowlve_core.llm.options import ClientOptions

#: the labeller's options: a label is one short line, so a small budget (notebook 04's default too); the
#: same in `errors label` and `errors report`, since a labels folder resumes only its own configuration
LABEL_OPTIONS = ClientOptions(max_tokens=512)


def cmd_errors_label(a: argparse.Namespace) -> int:
    from cresowlve_core.analysis.loading import load_runs
    from cresowlve_core.banners import banner_text
    from cresowlve_core.error_analysis.label import label_errors, label_stage
    from cresowlve_core.error_analysis.wrong import NO_ANSWER_REASONS, collect_wrong
    from cresowlve_core.exitcodes import stage_exit
    from cresowlve_core.text import slug
    from cresowlve_core.untrusted import one_line

    runs = load_runs(a.runs)
    for note in runs.notes:  # a run left out (another run of its configuration kept), a file read in part
        print(f"note: {one_line(note)}", file=sys.stderr)
    units, tally = collect_wrong(runs, max_input_chars=a.max_input_chars)
    no_answer = int(tally["n_no_answer"].sum()) if len(tally) else 0
    skipped = ""
    if no_answer:
        counts = {word: int(tally[f"n_no_answer_{k}"].sum()) for k, word in NO_ANSWER_REASONS.items()}
        why = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
        skipped = f"; {no_answer} wrong by the rule without an answer ({why}): counted, not labelled"
    unknown = int(tally["n_unknown"].sum()) if len(tally) else 0
    if unknown:  # neither right nor wrong on the basis (e.g. a judge-only run the judge half scored, graded by EM)
        skipped += (f"; {unknown} answer(s) with no value on their configuration's basis (right or wrong unknown, "
                    "see n_unknown and basis in 04_error_analysis): not counted, not labelled")
    # wrong answers whose item could not be loaded (collect_wrong warns which items file): never labelled blind
    no_item = int(tally["n_no_item"].sum()) if len(tally) else 0
    unlabelled = (f"{no_item} wrong answer(s) not labelled: their items could not be loaded (the warning above "
                  "names the items file)") if no_item else ""
    if not units:
        if no_item:
            print(f"incomplete: {unlabelled}{skipped}", file=sys.stderr)
            return EXIT_INCOMPLETE
        print(f"no wrong answers {'found ' if unknown else ''}in {a.runs!r} ({len(tally)} run(s)); nothing to label"
              f"{skipped}", file=sys.stderr)
        return 0 if len(tally) else 2
    if skipped:
        print(f"{len(units)} wrong answer(s) to label{skipped}", file=sys.stderr)
    limited = a.limit is not None and a.limit < len(units)  # the limit leaves wrong answers out
    if limited:
        print(f"--limit {a.limit}: labelling {a.limit} of the {len(units)} wrong answers (the other "
              f"{len(units) - a.limit} are left out of this run; labels an earlier run gave them are kept)",
              file=sys.stderr)
        units = sorted(units, key=lambda u: u.key)[: a.limit]
    out = out_dir(a.out_dir) / "labels" / slug(a.labeller_model or "embedded")
    res = label_errors(units, out, model=a.labeller_model, base_url=a.labeller_base_url,
                       api_key_env=a.labeller_api_key_env, options=client_options(a, LABEL_OPTIONS),
                       limit=a.limit if limited else None,
                       on_start=(lambda: print(banner_text("embedded"), file=sys.stderr))  # once the folder is checked
                       if a.labeller_base_url is None else None)
    summary = json.loads((out / "summary.json").read_text())
    print(label_line(summary, res.n_sent, out / "labels.jsonl"))
    code = stage_exit(label_stage(summary, res), unit="wrong answers")
    if no_item and code == EXIT_OK:
        print(f"incomplete: {unlabelled}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return code


def label_line(summary: dict[str, Any], n_sent: int, labels: Path) -> str:
    """``cresowlve errors label`` in one line (summary.json has every count)."""
    from cresowlve_core.runtime.outcomes import served_note

    withheld = "".join(f", {summary[k]} {k[2:]}" for k in ("n_refused", "n_filtered") if summary.get(k))
    sent = sent_phrase(n_sent, summary["n_error"] + summary.get("n_not_run", 0), "every wrong answer already had its labeller's reply")
    labelled = summary["n_done"] - sum(summary.get(k, 0) for k in ("n_unlabelled", "n_refused", "n_filtered"))
    cut_off = f" ({summary['n_cut_off']} cut off at the token limit)" if summary.get("n_cut_off") else ""
    return (f"labelled {labelled} of {summary['n_units']} wrong answers "
            f"({summary.get('n_unlabelled', 0)} unlabelled{cut_off}, {summary.get('n_other', 0)} other{withheld}, "
            f"{summary['n_error']} errored); {sent}; labels: {labels}{served_note(summary.get('served_models'))}")


def cmd_errors_report(a: argparse.Namespace) -> int:
    from cresowlve_core import notebook_progress
    from cresowlve_core.exitcodes import report_exit
    from cresowlve_core.notebooks import report_name, run_notebook

    options = client_options(a, LABEL_OPTIONS)
    params: dict[str, Any] = {"runs": a.runs, "out_dir": str(out_dir(a.out_dir)), "labeller_model": a.labeller_model,
                              "labeller_base_url": a.labeller_base_url, "labeller_api_key_env": a.labeller_api_key_env,
                              "limit": a.limit, "max_tokens": options.max_tokens, "seed": options.seed,
                              "label": bool(a.labeller_model),  # no labeller: report what exists
                              "make_demo": False}  # runs that match nothing are an empty report, never a demo evaluation
    # named after its runs, as `cresowlve report` names it: a report on other runs never replaces the main job's
    res = run_notebook("04_error_analysis", params, Path(a.reports_dir) if a.reports_dir else None,
                       output_name=report_name("04_error_analysis", {"runs": a.runs}),
                       progress_every_s=notebook_progress.PROGRESS_EVERY_S)
    print(f"{res.html}  ({res.seconds:.1f}s)")
    if res.records.get("empty"):
        print(f"empty report: {res.records['empty']}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return report_exit(res.records)  # the model calls the report made, as `errors label` would exit


def out_dir(value: str | None) -> Path:
    """``--out-dir``: default ``<data dir>/errors`` (where the apps look for labels and samples)."""
    return data_folder(value, "errors")


def add_errors_parser(sub: Any) -> None:
    """Register ``cresowlve errors label`` and ``cresowlve errors report``."""
    from cresowlve_core.argtypes import nonempty
    from cresowlve_core.argtypes import positive_int as _positive_int
    from cresowlve_core.inputs import add_max_input_chars

    errors = sub.add_parser("errors", help="error analysis of wrong answers (paper §5)").add_subparsers(
        dest="errors_cmd", required=True)
    p = errors.add_parser("label", help="label every wrong answer of the runs with one of seven categories "
                                        "(resumable)")
    p.add_argument("--runs", required=True, help="glob, or folder, of evaluation run directories")
    p.add_argument("--out-dir", default=None, type=nonempty, help="labels go to OUT_DIR/labels/LABELLER (default: data/errors)")
    role_args(p, "labeller", "labeller")
    p.add_argument("--limit", type=_positive_int, default=None, help="only the first N wrong answers (by key)")
    add_max_input_chars(p, "an item whose question is")
    add_client_options(p, "max_tokens", "concurrency", "seed", "max_cost", "cache", stage=LABEL_OPTIONS,
                       help={"max_tokens": "output budget per label"})
    p.set_defaults(fn=cmd_errors_label)
    p = errors.add_parser("report", help="render notebooks/04_error_analysis.ipynb as an HTML report")
    p.add_argument("--runs", default="data/runs/demo/*", help="glob, or folder, of evaluation run directories")
    p.add_argument("--out-dir", default=None, type=nonempty, help="labels and annotations folder (default: data/errors)")
    role_args(p, "labeller", "labeller")
    p.add_argument("--limit", type=_positive_int, default=None, help="wrong answers labelled per configuration")
    add_client_options(p, "max_tokens", "seed", stage=LABEL_OPTIONS,
                       help={"max_tokens": "output budget per label",
                             "seed": "the labeller's seed (as `errors label --seed`), the annotation sample's and the "
                                     "permutation tests'"})
    add_reports_dir(p)
    p.set_defaults(fn=cmd_errors_report)
