"""``cresowlve runs|diff|eval|grid|rescore|cache``: evaluation runs, their listing and the response cache."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from cresowlve_core import argtypes, exitcodes
from cresowlve_core.cli.common import _unset_key_var, _usage_error
from cresowlve_core.cli.options import add_client_options, add_reports_dir, client_options
from cresowlve_core.exitcodes import EXIT_CODES_HELP, EXIT_INCOMPLETE, EXIT_OK, EXIT_STOPPED, EXIT_USAGE, stage_exit
from cresowlve_core.inputs import add_max_input_chars
from cresowlve_core.llm.profiles import PROFILES
from cresowlve_core.llm.types import EFFORTS
from cresowlve_core.untrusted import one_line


def cmd_runs(a: argparse.Namespace) -> int:
    from cresowlve_core.analysis.loading import grid_aliases
    from cresowlve_core.evaluation.listing import (
        HEADER,
        SUMMARY_DISAGREES,
        find_runs,
        grid_cells_without_a_run,
        run_row,
    )

    dirs = find_runs(a.glob)
    without = grid_cells_without_a_run(a.glob, dirs)
    not_listed = f"; {len(without)} cell(s) of the grid without a run directory: {', '.join(without)}" if without else ""
    if not dirs:
        from cresowlve_core.paths import runs_dir

        print(f"no evaluation runs found ({a.glob or runs_dir()}){not_listed}", file=sys.stderr)
        return EXIT_INCOMPLETE
    aliases = grid_aliases(a.glob, dirs)  # the grid's labels, as the analysis's tables name them
    print(HEADER)
    rows = [run_row(d, aliases) for d in dirs]
    for row in rows:
        print(row.line())
    disagree = sum(row.state.startswith(SUMMARY_DISAGREES) for row in rows)
    unusable = sum(".json unusable (" in row.state for row in rows)
    print(f"{len(dirs)} run(s)" + (f"; {disagree} whose summary.json disagrees with its records: `cresowlve rescore "
                                   "--run-dir RUN_DIR` recomputes it from them" if disagree else "")
          + (f"; {unusable} with a manifest.json or summary.json that cannot be used (its row says why)"
             if unusable else "") + not_listed)
    return 0


def cmd_diff(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.listing import (
        diff_report,
        diff_runs,
        items_warning,
        language_warning,
        settings_warnings,
    )

    for warning in (language_warning(Path(a.run_a), Path(a.run_b)), items_warning(Path(a.run_a), Path(a.run_b))):
        if warning is not None:
            print(warning, file=sys.stderr)
    d = diff_runs(Path(a.run_a), Path(a.run_b), a.metric)
    for warning in settings_warnings(Path(a.run_a), Path(a.run_b), d.metric):
        print(warning, file=sys.stderr)
    print(diff_report(Path(a.run_a), Path(a.run_b), d, limit=a.limit))
    return 0


def cmd_eval(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation import roles
    from cresowlve_core.evaluation.runner import (
        EvalConfig,
        eval_stages,
        evaluate,
        sent_now,
        summary_line,
        truncation_warning,
    )
    from cresowlve_core.llm.types import LLMFatalError
    from cresowlve_core.runtime import SUMMARY, stop_reason
    from cresowlve_core.untrusted import one_line

    try:
        _endpoint_from_env(a)
    except argparse.ArgumentTypeError as exc:
        return _usage_error(f"{exc}; nothing was run")
    if not a.model or not a.base_url:
        return _usage_error("--model and --base-url are required (or set CRESOWLVE_MODEL and CRESOWLVE_BASE_URL); "
                            "nothing was run")
    if not a.judge_model and (given := judge_options_given(a)):
        return _usage_error(f"{', '.join(given)} set{'s' if len(given) == 1 else ''} the judge, and there is no "
                            "judge: give --judge-model; nothing was run")
    run_dir = a.run_dir
    if not run_dir:
        run_dir = default_run_dir(a.model, a.effort, a.lang)
        print(f"run directory: {run_dir}", file=sys.stderr)
    cfg = EvalConfig.model_validate(dict(
        model=a.model, base_url=a.base_url, run_dir=run_dir, items=a.items, lang=a.lang,
        api_key_env=a.api_key_env, effort=a.effort, prompt_style=a.prompt_style,
        judge_model=a.judge_model, judge_base_url=a.judge_base_url, judge_api_key_env=a.judge_api_key_env,
        judge_repeat=a.judge_repeat, judge_protocol=a.judge_protocol, judge_provider=a.judge_provider,
        judge_api=a.judge_api, judge_effort=a.judge_effort, judge_max_tokens=a.judge_max_tokens,
        judge_temperature=getattr(a, "judge_temperature", "protocol"), judge_extra_body=a.judge_extra_body or {},
        judge_max_cost=a.judge_max_cost,
        retry_truncated=a.retry_truncated, max_input_chars=a.max_input_chars, limit=a.limit, api=a.api,
        options=client_options(a),
    ))
    resolved = roles.resolve(cfg)  # once: the key check and the run read the same roles
    judge = resolved.judge
    if (name := _unset_key_var(cfg.api_key_env, judge.endpoint.api_key_env if judge else None)) is not None:
        return _usage_error(f"environment variable {name!r} is not set (it should hold the API key); nothing was run")
    if "temperature" in vars(a) and (note := resolved.answerer.temperature_not_sent()):
        print(f"warning: --{note}", file=sys.stderr)
    if a.batch:
        from cresowlve_core.evaluation.batch_eval import batch_evaluate

        step = batch_evaluate(cfg, resolved)
        print(step.line)
        if step.summary is not None:
            if (warning := truncation_warning(step.summary)) is not None:
                print(warning, file=sys.stderr)
            return exitcodes.report_exit({exitcodes.STAGES_RECORD: eval_stages(step.summary)})
        if step.last:
            print(step.last, file=sys.stderr)
        return step.code
    try:
        outcome = evaluate(cfg, resolved=resolved)
    except LLMFatalError as exc:  # the run stopped at a wrong key/model/endpoint; its summary is on disk
        summary_file = Path(cfg.run_dir) / SUMMARY
        if not summary_file.exists():
            raise
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        summary["stopped"] = summary.get("stopped") or one_line(stop_reason(exc))
        print(summary_line(summary))
        return stage_exit(summary)
    print(f"{summary_line(outcome.summary)} | {sent_now(outcome.summary)}")
    if (warning := truncation_warning(outcome.summary)) is not None:
        print(warning, file=sys.stderr)
    return exitcodes.report_exit({exitcodes.STAGES_RECORD: eval_stages(outcome.summary)})


def default_run_dir(model: str, effort: str | None, lang: str) -> str:
    """``data/runs/<model>[-<effort>]__<lang>`` of the current project (the grid's naming)."""
    from cresowlve_core.paths import runs_dir
    from cresowlve_core.text import slug

    return str(runs_dir() / f"{slug(model)}{f'-{effort}' if effort else ''}__{lang}")


def cmd_grid(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.grid import NO_VERDICTS, GridConfigError, default_workers
    from cresowlve_core.evaluation.grid_run import run_grid

    try:
        out = run_grid(a.config, reports_dir=a.reports_dir, workers=a.workers or default_workers())
    except GridConfigError as exc:  # one line per bad key, before anything starts
        print("error: " + "\n".join(exc.lines()), file=sys.stderr)
        return EXIT_USAGE
    for cell in out["cells"]:  # the configuration's name comes from the grid's YAML: no terminal escape
        name = one_line(f"{cell['config']} / {cell['lang']}")
        print(f"{name:<40} {cell['status']:<10} {one_line(cell['line'] or cell['error'] or '')}")
    for cell in out["cells"]:
        if warning := cell.get("truncation_warning"):  # more than 2% of the cell's answers cut off
            print(warning.replace("warning: ", f"warning: {cell['cell']}: ", 1), file=sys.stderr)
    if out.get("report"):
        print(f"report: {out['report']}")
    bad = [c for c in out["cells"] if c["status"] != "done"]
    done = f"{out['n_done']} of {out['n_cells']} cells done"
    if out.get("stopped"):  # Ctrl-C / SIGTERM: the running cells stopped, the rest and the report were skipped
        print(exitcodes.interrupted_line(f"{done}; the report was skipped"), file=sys.stderr)
        return exitcodes.interrupt_code()
    refused = [c for c in out["cells"] if c["status"] == "refused"]
    if refused:  # a run directory in use or of another configuration (docs/reliability.md): exit 2, as an eval's
        # the reason says what to do: wait for the other run, or use another run directory
        skipped = "; the report was skipped" if out.get("report_skipped") else ""
        print(f"error: {len(refused)} cell(s) refused ({refused[0]['cell']}: {refused[0]['error']}): {done}; "
              f"nothing was sent for them{skipped}", file=sys.stderr)
        return EXIT_USAGE
    fatal = [c for c in out["cells"] if c["status"] in ("stopped", "failed")]
    if fatal:  # a dead endpoint, key or model, or --max-cost, in some cells; the other cells ran
        why = next((line for line in (fatal[0]["error"], fatal[0]["line"]) if line), "")
        # every stopped cell named (a budget in one, a dead worker process in another: each needs its own look)
        more = [c["cell"] for c in fatal[1:]]
        why += f"; also stopped: {', '.join(more[:5])}{', ...' if len(more) > 5 else ''}" if more else ""
        rest = [c["cell"] for c in bad if c not in fatal]  # errored or unrun items in cells that ran to the end
        also = f"; {len(rest)} more cell(s) incomplete ({', '.join(rest[:5])})" if rest else ""
        # what to change first, named by the first cell that needs a change (a key, a model, an effort, a budget)
        to_go_on = next(((c["cell"], r) for c in fatal if (r := exitcodes.stop_parts(c.get("stopped") or "")[1])), None)
        advice = (f"finished work is kept; to go on: {grid_words(to_go_on[1])} ({to_go_on[0]})" if to_go_on
                  else "finished work is kept, run the same command again to resume")
        print(f"stopped early ({len(fatal)} cell(s) stopped; {fatal[0]['cell']}: {why}){also}: {done}; {advice}",
              file=sys.stderr)
        return EXIT_STOPPED
    unjudged = [c["cell"] for c in bad if c["status"] == NO_VERDICTS]
    if len(unjudged) < len(bad):
        print(f"incomplete: {len(bad)} of {out['n_cells']} cells not done ({', '.join(c['cell'] for c in bad[:5])}); "
              "run the same command again to resume", file=sys.stderr)
        return EXIT_INCOMPLETE
    if unjudged:  # a run again would judge nothing more: the judge's replies are there, none a verdict
        print(f"incomplete: the judge gave no verdict in {len(unjudged)} of {out['n_cells']} cells "
              f"({', '.join(unjudged[:5])}); its replies are kept in their run directories", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


#: the command-line flags a stop's remedy names, as a grid's YAML sets them
GRID_SETTINGS = {"another --judge-effort": "another value of the judge's effort",
                 "another --effort": "another effort in the model's efforts", "--judge-max-cost": "the judge's max_cost", "--judge-max-tokens": "the judge's max_tokens",
                 "--max-cost": "options.max_cost", "--max-tokens": "options.max_tokens",
                 "--judge-effort": "the judge's effort", "--effort": "the model's efforts"}
_FLAG = re.compile("|".join(re.escape(flag) for flag in GRID_SETTINGS))  # the longer of two is listed first


def grid_words(remedy: str) -> str:
    """A stop's remedy (:func:`~cresowlve_core.runtime.errors.stop_remedy`) in a grid's words: its YAML
    settings instead of the flags of ``cresowlve eval`` (``--max-cost`` is ``options.max_cost``)."""
    return _FLAG.sub(lambda m: GRID_SETTINGS[m.group(0)], remedy)


def cmd_rescore(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.runner import rescore, summary_line

    summary = rescore(a.run_dir)
    print(summary_line(summary) + " | rescored, 0 requests")
    if withdrawn := summary.get("n_verdicts_withdrawn"):  # answers the rescore left unjudged
        print(f"incomplete: {withdrawn} judge verdict(s) withdrawn, each given on another candidate answer than "
              "the rescored one (kept in the record's extra); the run's `cresowlve eval` command, run again, asks "
              "the judge about the answers as they now stand", file=sys.stderr)
        return EXIT_INCOMPLETE
    return run_left_incomplete(summary)


def run_left_incomplete(summary: dict[str, Any]) -> int:
    """Exit 1, with the run's own last lines, when the rescored run has work its eval left errored, not run,
    stopped or unparsed (rescore sends nothing: the run's ``cresowlve eval``, run again, goes on); else 0."""
    import contextlib
    import io

    from cresowlve_core.evaluation.runner import eval_stages

    lines = io.StringIO()
    with contextlib.redirect_stderr(lines):
        code = exitcodes.report_exit({exitcodes.STAGES_RECORD: eval_stages(summary)})
    if code == EXIT_OK:
        return EXIT_OK
    for line in lines.getvalue().splitlines():
        print(f"{line} (the run as its eval left it: rescore sends nothing; run the run's `cresowlve eval` "
              "command again)", file=sys.stderr)
    return EXIT_INCOMPLETE


def cmd_cache(a: argparse.Namespace) -> int:
    from cresowlve_core.llm.cache import WITHOUT_CACHE_HINT, CacheError, ResponseCache

    if a.path and not Path(a.path).exists():  # opening it would create an empty cache there
        return _usage_error(f"no response cache at {a.path}; nothing was {'read' if a.action == 'stats' else 'removed'}")
    try:
        cache = ResponseCache(Path(a.path)) if a.path else ResponseCache()
        stats = cache.stats()
    except CacheError as exc:  # the cache command has no --no-cache to offer
        return _usage_error(str(exc).removesuffix(WITHOUT_CACHE_HINT))
    if a.model and a.model not in stats["per_model"]:  # a misspelt name would read as an empty cache
        known = ", ".join(map(repr, sorted(stats["per_model"]))) or "none"
        return _usage_error(f"no cached responses of model {a.model!r} in {stats['path']} (models cached: {known}); "
                            f"nothing was {'read' if a.action == 'stats' else 'removed'}")
    if a.action == "stats":
        if a.model:
            stats = {**stats, "entries": stats["per_model"][a.model], "per_model": {a.model: stats["per_model"][a.model]}}
        print(json.dumps(stats, indent=2))
        return EXIT_OK
    n = stats["per_model"][a.model] if a.model else stats["entries"]
    what = f"{n} cached responses" + (f" of model {a.model!r}" if a.model else "") + f" from {stats['path']}"
    if not a.yes:
        if not sys.stdin.isatty():
            return _usage_error(f"cache clear would remove {what}; pass --yes to confirm")
        if input(f"remove {what}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return EXIT_OK
    n = cache.clear(model=a.model)
    print(f"removed {n} cached responses")
    return EXIT_OK


def _endpoint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, type=argtypes.model_name,
                   help="model name as the endpoint knows it (default: $CRESOWLVE_MODEL; one of them is required)")
    p.add_argument("--base-url", default=None, type=argtypes.http_url,
                   help="OpenAI-compatible http(s) base URL, e.g. https://api.openai.com/v1 "
                        "(default: $CRESOWLVE_BASE_URL; one of them is required)")
    p.add_argument("--api-key-env", default=None, type=argtypes.env_name,
                   help="NAME of the environment variable holding the key (default: $CRESOWLVE_API_KEY_ENV, "
                        "else none, for local servers)")


#: the judge's options whose parser default is not None (an option given with its default is not told apart)
_JUDGE_DEFAULTS = {"judge_protocol": "nonce-verdict", "judge_repeat": False}


def judge_options_given(a: argparse.Namespace) -> list[str]:
    """The ``--judge-*`` options of ``cresowlve eval`` given a value (other than ``--judge-model``), as flags."""
    return ["--" + k.replace("_", "-") for k, v in vars(a).items()
            if k.startswith("judge_") and k != "judge_model" and v != _JUDGE_DEFAULTS.get(k)]


def _endpoint_from_env(a: argparse.Namespace) -> None:
    """``--model``/``--base-url``/``--api-key-env`` default to the main job's variables, each checked as its flag
    is (an ``ArgumentTypeError`` naming the variable)."""
    for dest, var, check in (("model", "CRESOWLVE_MODEL", argtypes.model_name),
                             ("base_url", "CRESOWLVE_BASE_URL", argtypes.http_url),
                             ("api_key_env", "CRESOWLVE_API_KEY_ENV", argtypes.env_name)):
        if not getattr(a, dest) and os.environ.get(var):
            try:
                setattr(a, dest, check(os.environ[var]))
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"{var}: {exc}") from None


def add_runs_parser(sub: Any) -> None:
    """Register ``cresowlve runs``."""
    p = sub.add_parser("runs", help="list evaluation runs: model, effort, language, items, accuracy with CI, cost, state")
    p.add_argument("glob", nargs="?", default=None,
                   help="run directories, a glob or a grid.json, as `report -p runs` takes them, relative to the "
                        "project, e.g. 'data/runs/demo/*' (default: every run under data/runs)")
    p.set_defaults(fn=cmd_runs)


def add_diff_parser(sub: Any) -> None:
    """Register ``cresowlve diff``."""
    p = sub.add_parser("diff", help="the items two runs disagree on, both answers, and McNemar's test")
    p.add_argument("run_a", help="run directory A")
    p.add_argument("run_b", help="run directory B")
    p.add_argument("--metric", default=None, choices=["judge", "em_strict", "em_lenient"],
                   help="metric compared (default: judge when both runs were judged, else em_strict)")
    p.add_argument("--limit", type=argtypes.positive_int, default=50, help="disagreements printed (default: 50)")
    p.set_defaults(fn=cmd_diff)


def add_eval_parser(sub: Any) -> None:
    """Register ``cresowlve eval``."""
    p = sub.add_parser("eval", help="evaluate a model on CresOWLve items into a resumable run directory")
    p.add_argument("--items", default="demo", type=argtypes.nonempty,
                   help="demo (the shipped demo items) | hub:en | hub:ru (downloaded once from the Hugging Face "
                        "hub) | PATH (.jsonl/.parquet: published schema, or one Item per line) (default: demo)")
    p.add_argument("--lang", choices=["en", "ru"], default="en", help="language of the questions (default: en)")
    add_max_input_chars(p)
    _endpoint_args(p)
    p.add_argument("--effort", choices=EFFORTS, default=None,
                   help="reasoning effort sent to a thinking model (default: none sent)")
    p.add_argument("--prompt-style", choices=["cot", "plain"], default=None,
                   help="cot for non-thinking models, plain for thinking ones (default: plain iff --effort)")
    p.add_argument("--api", choices=["chat", "responses", "completions"], default=None,
                   help="force an API style (default: chat; responses when --effort is given)")
    p.add_argument("--judge-model", default=None, type=argtypes.model_name,
                   help="LLM judge model; without one only exact match is scored (default: no judge)")
    p.add_argument("--judge-base-url", default=None, type=argtypes.http_url, help="judge's base URL (default: --base-url)")
    p.add_argument("--judge-api-key-env", default=None, type=argtypes.env_name,
                   help="NAME of the variable holding the judge's key (default: --api-key-env when the judge "
                        "uses the model's base URL, else none)")
    p.add_argument("--judge-protocol", choices=["nonce-verdict", "paper"], default="nonce-verdict",
                   help="nonce-verdict: our judge (reasoning, then an unforgeable verdict line, temperature 0); "
                        "paper: the paper's bare yes/no at the judge's default temperature (default: nonce-verdict)")
    p.add_argument("--judge-repeat", action="store_true",
                   help="judge twice (seed, seed+1): repeatability in 03_analysis (default: off)")
    p.add_argument("--judge-provider", default=None, choices=sorted(PROFILES),
                   help="the judge's provider profile (default: the model's when the judge shares its base URL, "
                        "else detected from the judge's base URL)")
    p.add_argument("--judge-api", choices=["chat", "responses", "completions"], default=None,
                   help="the judge's API (default: the profile's: chat, or responses with --judge-effort on OpenAI)")
    p.add_argument("--judge-effort", choices=EFFORTS, default=None, help="the judge's reasoning effort (default: none sent)")
    p.add_argument("--judge-max-tokens", type=argtypes.positive_int, default=None,
                   help="the judge's output budget (default: 512; 8192 for a thinking judge: a reasoning model or "
                        "--judge-effort)")
    p.add_argument("--judge-temperature", type=argtypes.temperature, default=argparse.SUPPRESS,
                   help="the judge's temperature, or 'default' to send none (default: 0 under nonce-verdict, none "
                        "sent under paper; never sent to a reasoning model)")
    p.add_argument("--judge-extra-body", type=argtypes.json_object, default=None,
                   help="JSON merged into every judge request; a null removes a field (default: none)")
    p.add_argument("--judge-max-cost", type=argtypes.usd, default=None, metavar="USD",
                   help="stop cleanly before the judge's new calls cost more than this (the answers so far are "
                        "kept, unjudged ones are judged on a resume; --max-cost caps the model under test; "
                        "default: no cap)")
    p.add_argument("--limit", type=argtypes.positive_int, default=None, help="only the first N items (default: all)")
    add_client_options(p, "concurrency", "http_workers", "rpm", "tpm", "seed", "temperature", "max_tokens", "max_cost",
                       "provider", "provider_preset", "extra_body")
    p.add_argument("--retry-truncated", action="store_true",
                   help="re-ask only the answers cut off by the token limit, with this --max-tokens (larger than "
                        "theirs); recorded per answer (default: off)")
    add_client_options(p, "timeout_s", "deadline_s", "cache")
    p.add_argument("--batch", action="store_true",
                   help="answer through the OpenAI Batch API: the first call submits, later calls report or "
                        "collect (an expired or cancelled batch keeps its finished answers; the next call "
                        "submits only the rest); exits 1 until every item has its answer (default: off)")
    p.add_argument("--run-dir", default=None, type=argtypes.run_dir,
                   help="run directory; running again resumes it (default: data/runs/<model>[-<effort>]__<lang>)")
    p.set_defaults(fn=cmd_eval, base_url_defaults={"base_url": ("CRESOWLVE_BASE_URL",),
                                                   "judge_base_url": ("base_url", "CRESOWLVE_BASE_URL")})


def add_grid_parser(sub: Any) -> None:
    """Register ``cresowlve grid``."""
    p = sub.add_parser("grid", help="evaluate models x efforts x languages from one YAML file, then 03_analysis",
                       epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", type=argtypes.nonempty, help="grid config (YAML); example: configs/paper_table1.yaml")
    p.add_argument("--workers", type=argtypes.positive_int, default=None, metavar="N",
                   help="processes that run the cells, at most the config's `parallel` and the cells left "
                        "(default: the number of cores; 1: all cells in this process)")
    add_reports_dir(p, "where the analysis report goes")
    p.set_defaults(fn=cmd_grid)


def add_rescore_parser(sub: Any) -> None:
    """Register ``cresowlve rescore``."""
    p = sub.add_parser("rescore", help="recompute answer extraction and every metric of a run from its stored "
                       "raw outputs (no model call; a judge verdict is kept while the candidate answer it judged is unchanged, "
                       "else withdrawn, exit 1, for the run's next eval to ask again)")
    p.add_argument("--run-dir", required=True, type=argtypes.nonempty, help="an evaluation run directory (required)")
    p.set_defaults(fn=cmd_rescore)


def add_cache_parser(sub: Any) -> None:
    """Register ``cresowlve cache``."""
    p = sub.add_parser("cache", help="the on-disk response cache")
    p.add_argument("action", choices=["stats", "clear"], help="stats: entries per model and size; clear: delete entries")
    p.add_argument("--model", default=None, help="only this model's entries: their count (stats), or delete only them "
                   "(clear); a model the cache does not hold is refused (default: all models)")
    p.add_argument("--path", default=None, type=argtypes.nonempty,
                   help="cache file (default: $CRESOWLVE_CACHE_DIR/responses.sqlite or <project>/data/cache/responses.sqlite)")
    p.add_argument("-y", "--yes", action="store_true",
                   help="clear without asking (needed when not at a terminal) (default: off)")
    p.set_defaults(fn=cmd_cache)
