"""``cresowlve``: thin command-line wrappers over the same functions the notebooks call."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cresowlve_core import argtypes, exitcodes
from cresowlve_core.exitcodes import (
    EXIT_CODES_HELP,
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_USAGE,
    stage_exit,
)
from cresowlve_core.inputs import add_max_input_chars
from cresowlve_core.llm.effort import PRESETS
from cresowlve_core.llm.profiles import PROFILES
from cresowlve_core.llm.types import EFFORTS
from cresowlve_core.secrets import guard_terminal

log = logging.getLogger("cresowlve")


def _parse_value(text: str) -> Any:
    """``-p key value``: JSON where it parses (numbers, lists, null, true), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _params(pairs: list[list[str]] | None) -> dict[str, Any]:
    return {k: _parse_value(v) for k, v in (pairs or [])}


def _one_line(exc: BaseException) -> str:
    """An exception as one line (pydantic errors as ``field: message; ...``)."""
    from pydantic import ValidationError

    from cresowlve_core.failures import DiskFull

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
    if isinstance(exc, DiskFull):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return text or type(exc).__name__


# --------------------------------------------------------------------------- argument checks


def _unset_key_var(*names: str | None) -> str | None:
    """The first named API-key variable that is not set (checked before anything is created)."""
    return next((name for name in names if name and not os.environ.get(name)), None)


def unserved_role(a: argparse.Namespace) -> str | None:
    """Why the command is refused when one of its roles names a model without a base URL, or None.

    Every role's flags are named ``--ROLE-model``/``--ROLE-base-url`` (``--model``/``--base-url``
    for the command's own). A role with no base URL runs the embedded model, which must then not be
    filed under the model asked for; so a model named without one is refused before anything starts,
    unless the command gives that base URL a default (``base_url_defaults``: argument names, or
    environment variables in capitals)."""
    given = vars(a)
    defaults: dict[str, tuple[str, ...]] = given.get("base_url_defaults") or {}
    for dest, model in given.items():
        if not dest.endswith("model") or not isinstance(model, str) or not model:
            continue
        url_dest = f"{dest[: -len('model')]}base_url"
        if url_dest not in given or given[url_dest]:
            continue
        sources = defaults.get(url_dest, ())
        if any(os.environ.get(s) if s.isupper() else given.get(s) for s in sources):
            continue
        flag = "--" + url_dest.replace("_", "-")
        alt = "".join(f" or {s}" for s in sources if s.isupper())
        return (f"--{dest.replace('_', '-')} {model} is given without {flag}{alt}: refusing to run the embedded "
                f"model in its place (give {flag}, or no --{dest.replace('_', '-')} for the embedded model); "
                "nothing was run")
    return None


def _is_http_url(value: str) -> bool:
    try:
        argtypes.http_url(value)
    except argparse.ArgumentTypeError:
        return False
    return True


def unset_role_key(a: argparse.Namespace) -> str | None:
    """Why the command is refused when a role served at a base URL names a key variable that is not
    set (``--ROLE-api-key-env``, ``--step-model``'s KEY_ENV), or None; checked before any model starts."""
    given = vars(a)
    named = [(f"--{dest.replace('_', '-')}", name) for dest, name in given.items()
             if dest.endswith("api_key_env") and isinstance(name, str) and name
             and given.get(f"{dest[: -len('api_key_env')]}base_url")]
    named += [(f"--step-model {step}", key) for step, _, url, key in given.get("step_model") or []
              if key and _is_http_url(url)]  # a bad BASE_URL is the command's own refusal
    for flag, name in named:
        if _unset_key_var(name) is not None:
            return f"environment variable {name!r} is not set ({flag}; it should hold the API key); nothing was run"
    return None


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


# --------------------------------------------------------------------------- commands


def cmd_serve_local(a: argparse.Namespace) -> int:
    from cresowlve_core.llm.local import LocalServer
    from cresowlve_core.runtime import stop

    if (busy := _port_in_use(a.port)) is not None:
        return _usage_error(busy)
    server = LocalServer(port=a.port, n_parallel=a.parallel)
    with server:
        print(f"serving {server.model} at {server.base_url}  (Ctrl-C to stop)\n"
              f"a base model: name it with --provider embedded (few-shot completion prompts; docs/llm.md)",
              flush=True)
        while stop.requested() is None:  # Ctrl-C or SIGTERM (runtime/stop.py)
            time.sleep(0.2)
    print("stopped", flush=True)
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from cresowlve_core import notebook_progress
    from cresowlve_core.notebooks import ReportFailed, report_headline, report_name, run_notebook

    params = _params(a.param)
    if a.notebook == "03_analysis" and params.get("compare"):  # an unknown name is refused before rendering
        import ast

        from cresowlve_core.analysis.paired import check_compare
        from cresowlve_core.notebooks import notebook_parameters, notebook_path

        try:
            default_runs = ast.literal_eval(str(notebook_parameters(notebook_path(a.notebook)).get("runs")))
        except (ValueError, SyntaxError):
            default_runs = None
        check_compare(params.get("runs", default_runs), params["compare"], params.get("aliases"))
    try:  # named by its inputs unless --name: a report on other runs never overwrites the main job's
        res = run_notebook(a.notebook, params, Path(a.reports_dir) if a.reports_dir else None,
                           output_name=a.name or report_name(a.notebook, params),
                           progress_every_s=notebook_progress.PROGRESS_EVERY_S)
    except ReportFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{res.html}  ({res.seconds:.1f}s)")
    if (head := report_headline(res.records)) is not None:
        print(head)
    if res.records.get("empty"):
        print(f"empty report: {res.records['empty']}", file=sys.stderr)
        return EXIT_INCOMPLETE
    if a.open:
        return serve_reports(res.html.parent, a.port, open_page=res.html.name)
    return 0


def _port_in_use(port: int) -> str | None:
    """Why ``port`` on 127.0.0.1 cannot be served (naming it and the way out), or None when it is free."""
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return f"port {port} on 127.0.0.1 is already in use; stop what serves it or choose another with --port"
    return None


def serve_reports(directory: Path, port: int, open_page: str = "index.html") -> int:
    """Serve ``directory`` on 127.0.0.1 until Ctrl-C (reports are static offline HTML; see serve.py)."""
    from cresowlve_core.serve import make_server

    if not directory.is_dir():
        print(f"error: no reports at {directory}: render one with `cresowlve report NOTEBOOK` or `cresowlve run`",
              file=sys.stderr)
        return EXIT_USAGE
    if (busy := _port_in_use(port)) is not None:
        return _usage_error(busy)
    with make_server(directory, port) as httpd:
        print(f"serving {directory} at http://127.0.0.1:{httpd.server_address[1]}/{open_page}  (Ctrl-C stops)",
              flush=True)
        from cresowlve_core.runtime import stop

        try:
            with stop.interruptible():  # Ctrl-C and SIGTERM end the (blocking) server at once
                httpd.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


def cmd_serve_reports(a: argparse.Namespace) -> int:
    from cresowlve_core.paths import reports_dir

    return serve_reports(Path(a.reports_dir) if a.reports_dir else reports_dir(), a.port)


def cmd_runs(a: argparse.Namespace) -> int:
    from cresowlve_core.analysis.loading import grid_aliases
    from cresowlve_core.evaluation.listing import HEADER, find_runs, run_row

    dirs = find_runs(a.glob)
    if not dirs:
        from cresowlve_core.paths import runs_dir

        print(f"no evaluation runs found ({a.glob or runs_dir()})", file=sys.stderr)
        return EXIT_INCOMPLETE
    aliases = grid_aliases(a.glob, dirs)  # the grid's labels, as the analysis's tables name them
    print(HEADER)
    for d in dirs:
        print(run_row(d, aliases).line())
    print(f"{len(dirs)} run(s)")
    return 0


def cmd_diff(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.listing import diff_report, diff_runs, language_warning

    if (warning := language_warning(Path(a.run_a), Path(a.run_b))) is not None:
        print(warning, file=sys.stderr)
    d = diff_runs(Path(a.run_a), Path(a.run_b), a.metric)
    print(diff_report(Path(a.run_a), Path(a.run_b), d, limit=a.limit))
    return 0


def cmd_eval(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.runner import EvalConfig, evaluate, summary_line, truncation_warning
    from cresowlve_core.llm.profiles import get_profile
    from cresowlve_core.llm.types import LLMFatalError
    from cresowlve_core.runtime import SUMMARY

    try:
        _endpoint_from_env(a)
    except argparse.ArgumentTypeError as exc:
        return _usage_error(f"CRESOWLVE_BASE_URL / CRESOWLVE_API_KEY_ENV: {exc}")
    if not a.model or not a.base_url:
        return _usage_error("--model and --base-url are required (or set CRESOWLVE_MODEL and CRESOWLVE_BASE_URL); "
                            "nothing was run")
    run_dir = a.run_dir
    if not run_dir:
        run_dir = default_run_dir(a.model, a.effort, a.lang)
        print(f"run directory: {run_dir}", file=sys.stderr)
    cfg = EvalConfig.model_validate(dict(  # flat client settings become ``options`` (EvalConfig._flat_options)
        model=a.model, base_url=a.base_url, run_dir=run_dir, items=a.items, lang=a.lang,
        api_key_env=a.api_key_env, effort=a.effort, prompt_style=a.prompt_style,
        judge_model=a.judge_model, judge_base_url=a.judge_base_url, judge_api_key_env=a.judge_api_key_env,
        judge_repeat=a.judge_repeat, judge_protocol=a.judge_protocol, judge_provider=a.judge_provider,
        judge_api=a.judge_api, judge_effort=a.judge_effort, judge_max_tokens=a.judge_max_tokens,
        judge_temperature=getattr(a, "judge_temperature", "protocol"), judge_extra_body=a.judge_extra_body or {},
        retry_truncated=a.retry_truncated,
        max_input_chars=a.max_input_chars,
        concurrency=a.concurrency, limit=a.limit, seed=a.seed, temperature=a.temperature,
        max_tokens=a.max_tokens, max_cost=a.max_cost, rpm=a.rpm, tpm=a.tpm, cache=not a.no_cache, api=a.api,
        provider=a.provider or (get_profile(a.preset).name if a.preset else None),
        extra_body=a.extra_body or {}, timeout_s=a.timeout, deadline_s=a.deadline,
    ))
    je = cfg.judge_endpoint()
    if (name := _unset_key_var(cfg.api_key_env, je.api_key_env if je else None)) is not None:
        return _usage_error(f"environment variable {name!r} is not set (it should hold the API key); nothing was run")
    if a.batch:
        from cresowlve_core.evaluation.batch_eval import batch_evaluate

        step = batch_evaluate(cfg)
        print(step.line)
        if step.summary is not None:
            return stage_exit(step.summary)
        if step.last:
            print(step.last, file=sys.stderr)
        return step.code
    try:
        outcome = evaluate(cfg)
    except LLMFatalError as exc:  # the run stopped at a wrong key/model/endpoint; its summary is on disk
        summary_file = Path(cfg.run_dir) / SUMMARY
        if not summary_file.exists():
            raise
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        summary["stopped"] = summary.get("stopped") or f"fatal: {_one_line(exc)}"
        print(summary_line(summary))
        return stage_exit(summary)
    print(summary_line(outcome.summary))
    if (warning := truncation_warning(outcome.summary)) is not None:
        print(warning, file=sys.stderr)
    return stage_exit(outcome.summary)


def default_run_dir(model: str, effort: str | None, lang: str) -> str:
    """``data/runs/<model>[-<effort>]__<lang>`` of the current project (the grid's naming)."""
    from cresowlve_core.paths import runs_dir
    from cresowlve_core.text import slug

    return str(runs_dir() / f"{slug(model)}{f'-{effort}' if effort else ''}__{lang}")


def cmd_grid(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.grid import GridConfigError, run_grid

    try:
        out = run_grid(a.config, reports_dir=a.reports_dir)
    except GridConfigError as exc:  # one line per bad key, before anything starts
        print("error: " + "\n".join(exc.lines()), file=sys.stderr)
        return EXIT_USAGE
    for cell in out["cells"]:
        print(f"{cell['config'] + ' / ' + cell['lang']:<40} {cell['status']:<10} {cell['line'] or cell['error'] or ''}")
    if out.get("report"):
        print(f"report: {out['report']}")
    bad = [c for c in out["cells"] if c["status"] != "done"]
    done = f"{out['n_done']} of {out['n_cells']} cells done"
    if out.get("stopped"):  # Ctrl-C / SIGTERM: the running cells stopped, the rest and the report were skipped
        print(exitcodes.interrupted_line(f"{done}; the report was skipped"), file=sys.stderr)
        return exitcodes.interrupt_code()
    refused = [c for c in out["cells"] if c["status"] == "refused"]
    if refused:  # a run directory in use (docs/reliability.md): exit 2, as a single eval would
        print(f"error: {len(refused)} cell(s) refused ({refused[0]['cell']}: {refused[0]['error']}): {done}; "
              "run the same command again when the other run has finished", file=sys.stderr)
        return EXIT_USAGE
    fatal = [c for c in out["cells"] if c["status"] in ("stopped", "failed")]
    if fatal:  # a dead endpoint, key or model, or --max-cost, in some cells; the other cells ran
        why = next((line for line in (fatal[0]["error"], fatal[0]["line"]) if line), "")
        print(f"stopped early ({len(fatal)} cell(s) stopped; {fatal[0]['cell']}: {why}): {done}; "
              "finished work is kept, run the same command again to resume", file=sys.stderr)
        return EXIT_STOPPED
    if bad:
        print(f"incomplete: {len(bad)} of {out['n_cells']} cells not done ({', '.join(c['cell'] for c in bad[:5])}); "
              "run the same command again to resume", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def cmd_rescore(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.runner import rescore, summary_line

    print(summary_line(rescore(a.run_dir)) + " | rescored, 0 requests")
    return 0


def cmd_cache(a: argparse.Namespace) -> int:
    from cresowlve_core.llm.cache import ResponseCache

    cache = ResponseCache(Path(a.path)) if a.path else ResponseCache()
    if a.action == "stats":
        print(json.dumps(cache.stats(), indent=2))
        return EXIT_OK
    stats = cache.stats()
    n = stats["per_model"].get(a.model, 0) if a.model else stats["entries"]
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


def cmd_run(a: argparse.Namespace) -> int:
    from cresowlve_core.mainjob import MainJobInterrupted, main_job

    try:
        main_job(reports_dir=Path(a.reports_dir) if a.reports_dir else None, quick=a.quick)
    except MainJobInterrupted as exc:  # the notebook being rendered was stopped; the rest skipped
        print(exitcodes.interrupted_line(f"{len(exc.written)} report(s) written, stopped during {exc.current}, "
                                         "the rest skipped"), file=sys.stderr)
        return exitcodes.interrupt_code()
    return 0


def _create_options(a: argparse.Namespace, base: Any) -> Any:
    """The stage's default ClientOptions with the options given on the command line."""
    given = {k: getattr(a, k, None) for k in ("temperature", "max_tokens", "concurrency", "seed", "rpm", "tpm", "max_cost")}
    update = {k: v for k, v in given.items() if v is not None}
    if getattr(a, "no_cache", False):
        update["cache"] = False
    return type(base).model_validate({**base.model_dump(), **update})


def _create_finish(summary: Any, unit: str) -> int:
    """One summary line (summary.json has everything), then the exit code; a run in which every
    call answered but nothing parsed exits 1."""
    from cresowlve_core.create.records import GenerateSummary, generate_line, score_line, unparsed_line

    print(generate_line(summary) if isinstance(summary, GenerateSummary) else score_line(summary))
    return stage_exit({**summary.model_dump(), "unparsed": unparsed_line(summary)}, unit=unit)


def cmd_build(a: argparse.Namespace) -> int:
    from cresowlve_core.construction.build import Build, BuildConfig, BuildStopped
    from cresowlve_core.failures import UsageError

    for step, model, url, _ in a.step_model or []:  # a step's model is never run on the embedded one instead
        try:
            argtypes.http_url(url)
        except argparse.ArgumentTypeError as exc:
            return _usage_error(f"--step-model {step} {model}: BASE_URL {exc}; nothing was run")
    cfg = BuildConfig(name=a.name, build_dir=a.build_dir, sources=a.source or None, per_level=a.per_level,
                      limit=a.limit, seed=a.seed, model=a.model, base_url=a.base_url, api_key_env=a.api_key_env,
                      concurrency=a.concurrency, max_cost=a.max_cost, cache=not a.no_cache,
                      apply_review=not a.no_review, agreement_n=a.agreement_n, max_input_chars=a.max_input_chars,
                      models={s: {"model": m, "base_url": u, "api_key_env": k} for s, m, u, k in (a.step_model or [])})
    existed = cfg.path.exists()
    with Build(cfg) as build:  # an empty source raises BuildEmpty (exit 2, one line naming the sources)
        try:
            res = build.run_all()
        except UsageError:  # refused (no source, an empty one): leave no folder it made
            if not existed and not (cfg.path / "steps").exists():  # never finished model work
                import shutil

                shutil.rmtree(cfg.path, ignore_errors=True)
            raise
        except BuildStopped as exc:  # finished work is saved; the later steps were skipped
            print(f"build stopped at step {exc.step!r} ({exc.reason}); the later steps were skipped; "
                  f"summary: {build.path / 'build.json'}", file=sys.stderr)
            return stage_exit(build.calls(), unit="calls")
    print(build.summary_line())
    print(f"data card: {res['data_card']}")
    return stage_exit(build.calls(), unit="calls")  # 1 with a last line when some calls errored or none parsed


def cmd_create_generate(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.create.generate import FEWSHOT_MAX_TOKENS, GENERATE_OPTIONS, generate
    from cresowlve_core.create.queries import load_queries
    from cresowlve_core.llm.base_model import is_base_model
    from cresowlve_core.runtime import endpoint_or_embedded

    load_queries(a.queries, a.limit, max_input_chars=a.max_input_chars)  # a bad file is refused before any model starts
    with endpoint_or_embedded(a.model, a.base_url, a.api_key_env) as (endpoint, embedded):
        if embedded:
            print(banner_text("embedded"), file=sys.stderr)
        options = _create_options(a, GENERATE_OPTIONS)
        if a.max_tokens is None and is_base_model(endpoint):  # 4096 tokens of one path repeated, minutes per query
            options = options.model_copy(update={"max_tokens": FEWSHOT_MAX_TOKENS})
            print(f"{endpoint.model} is a base model: few-shot generation with --max-tokens {FEWSHOT_MAX_TOKENS}",
                  file=sys.stderr)
        summary = generate(a.queries, endpoint, a.run_dir, variation=a.variation, n_samples=a.n_samples,
                           n_rounds=a.n_rounds, limit=a.limit, effort=a.effort, options=options,
                           max_input_chars=a.max_input_chars)
    return _create_finish(summary, "calls")


def cmd_create_score(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.create.generate import read_generation_manifest
    from cresowlve_core.create.score import JUDGE_OPTIONS, score
    from cresowlve_core.runtime import endpoint_or_embedded

    read_generation_manifest(a.run_dir)  # not a generation run: refused before any model starts
    with endpoint_or_embedded(a.judge_model, a.judge_base_url, a.judge_api_key_env) as (endpoint, embedded):
        if embedded:
            print(banner_text("embedded"), file=sys.stderr)
        summary = score(a.run_dir, endpoint, score_dir=a.score_dir, effort=a.effort, judge_invalid=a.judge_invalid,
                        factuality_threshold=a.factuality_threshold, discount=a.discount,
                        options=_create_options(a, JUDGE_OPTIONS))
    return _create_finish(summary, "paths to judge")


def cmd_synth(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.synthetic.pipeline import SynthConfig, candidate_build, load_source, run_synth, summary_line

    cfg = SynthConfig(
        build_dir=a.build_dir, n_candidates=a.n, domains=a.domains.split(",") if a.domains else None,
        band_low=a.band[0], band_high=a.band[1], notability=a.notability, seed=a.seed, knowledge_source=a.source,
        verbaliser_model=a.verbaliser_model, verbaliser_base_url=a.verbaliser_base_url,
        verbaliser_api_key_env=a.verbaliser_api_key_env, verbaliser_max_tokens=a.verbaliser_max_tokens,
        solver_model=a.solver_model, solver_base_url=a.solver_base_url, solver_api_key_env=a.solver_api_key_env,
        solver_effort=a.solver_effort, solver_max_tokens=a.solver_max_tokens, concurrency=a.concurrency,
        max_cost=a.max_cost, cache=not a.no_cache, max_input_chars=a.max_input_chars,
    )
    source = load_source(cfg)
    build = candidate_build(cfg, source)
    if not build.candidates:  # refused before any model starts: the band or domains leave no candidate
        return _usage_error(f"no candidate in the notability band {a.band[0]}..{a.band[1]} ({a.notability}) "
                            f"of the domains {a.domains or 'all'} ({len(build.tried)} anchors "
                            "tried): nothing to verbalise; widen --band or add --domains")
    res = run_synth(cfg, source=source, build=build)
    if any(res.embedded.values()):
        print(banner_text("embedded"), file=sys.stderr)
    print(summary_line(res.summary, cfg.build_dir))
    if res.stopped:
        print(f"synth stopped at {res.summary['stopped_at']} ({res.stopped}); the later steps were skipped; "
              f"summary: {Path(cfg.build_dir) / 'summary.json'}", file=sys.stderr)
    st = res.summary["stages"]
    unparsed = (f"no verbalisation parsed: {st['verbalised']} of {st['candidates']} answered, 0 parsed"
                if st["verbalised"] and not st["parsed"] else None)
    return stage_exit({**res.summary["calls"], "unparsed": unparsed}, unit="calls")


# --------------------------------------------------------------------------- parser


def _endpoint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, type=argtypes.nonempty,
                   help="model name as the endpoint knows it (default: $CRESOWLVE_MODEL; one of them is required)")
    p.add_argument("--base-url", default=None, type=argtypes.http_url,
                   help="OpenAI-compatible http(s) base URL, e.g. https://api.openai.com/v1 "
                        "(default: $CRESOWLVE_BASE_URL; one of them is required)")
    p.add_argument("--api-key-env", default=None, type=argtypes.env_name,
                   help="NAME of the environment variable holding the key (default: $CRESOWLVE_API_KEY_ENV, "
                        "else none, for local servers)")


def _endpoint_from_env(a: argparse.Namespace) -> None:
    """``--model``/``--base-url``/``--api-key-env`` default to the main job's variables."""
    a.model = a.model or os.environ.get("CRESOWLVE_MODEL") or None
    if not a.base_url and os.environ.get("CRESOWLVE_BASE_URL"):
        a.base_url = argtypes.http_url(os.environ["CRESOWLVE_BASE_URL"])
    if not a.api_key_env and os.environ.get("CRESOWLVE_API_KEY_ENV"):
        a.api_key_env = argtypes.env_name(os.environ["CRESOWLVE_API_KEY_ENV"])


def _create_client_args(p: argparse.ArgumentParser) -> None:
    """Client options of the CREATE commands; unset ones keep the stage's ClientOptions defaults."""
    p.add_argument("--max-tokens", type=argtypes.positive_int, default=None, help="output budget per call (default: 4096)")
    p.add_argument("--concurrency", type=argtypes.positive_int, default=None, help="calls in flight at once (default: 8)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed sent to the provider (default: 0)")
    p.add_argument("--rpm", type=argtypes.positive_int, default=None, help="requests-per-minute limit (default: none)")
    p.add_argument("--tpm", type=argtypes.positive_int, default=None, help="tokens-per-minute limit (default: none)")
    p.add_argument("--max-cost", type=argtypes.usd, default=None, help="stop cleanly before spending more USD (default: no limit)")
    p.add_argument("--no-cache", action="store_true", help="bypass the response cache")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout, and ends every option's help with its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if action.required:
            return text if "required" in text else f"{text} (required)"
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return f"{text} (default: {'on' if action.default else 'off'})"
        return f"{text} (default: {'none' if action.default is None else '%(default)s'})"


def _apply_help_conventions(parser: argparse.ArgumentParser) -> None:
    """The help formatter and the exit-code epilog on ``parser`` and every subcommand under it."""
    parser.formatter_class = _HelpFormatter
    parser.epilog = parser.epilog or EXIT_CODES_HELP
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                _apply_help_conventions(sub)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cresowlve", description=__doc__)
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="debug logging, and a full traceback instead of a one-line error (default: off)")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve-local", help="serve the embedded Gemma 3 270M on 127.0.0.1")
    p.add_argument("--port", type=argtypes.port, default=8765, help="TCP port on 127.0.0.1 (default: 8765)")
    p.add_argument("--parallel", type=argtypes.positive_int, default=4, help="requests decoded at once (default: 4)")
    p.set_defaults(fn=cmd_serve_local)

    p = sub.add_parser("runs", help="list evaluation runs: model, effort, language, items, accuracy with CI, cost, state")
    p.add_argument("glob", nargs="?", default=None,
                   help="run directories, a glob or a grid.json, as `report -p runs` takes them, relative to the "
                        "project, e.g. 'data/runs/demo/*' (default: every run under data/runs)")
    p.set_defaults(fn=cmd_runs)

    p = sub.add_parser("diff", help="the items two runs disagree on, both answers, and McNemar's test")
    p.add_argument("run_a", help="run directory A")
    p.add_argument("run_b", help="run directory B")
    p.add_argument("--metric", default=None, choices=["judge", "em_strict", "em_lenient"],
                   help="metric compared (default: judge when both runs were judged, else em_strict)")
    p.add_argument("--limit", type=argtypes.positive_int, default=50, help="disagreements printed (default: 50)")
    p.set_defaults(fn=cmd_diff)

    p = sub.add_parser("serve-reports", help="serve reports/ on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=argtypes.port, default=8766, help="TCP port on 127.0.0.1 (default: 8766)")
    p.add_argument("--reports-dir", default=None,
                   help="directory served (default: $CRESOWLVE_REPORTS_DIR or <project>/reports)")
    p.set_defaults(fn=cmd_serve_reports)

    p = sub.add_parser("report", help="execute a notebook headless and render its HTML report")
    p.add_argument("--open", action="store_true",
                   help="then serve the reports on 127.0.0.1 and print the report's address (default: off)")
    p.add_argument("--port", type=argtypes.port, default=8766, help="port for --open (default: 8766)")
    p.add_argument("notebook", help="name in notebooks/ (e.g. 03_analysis) or a path")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("KEY", "VALUE"),
                   help="set a notebook parameter; VALUE is JSON where it parses, else a string; "
                        "repeatable (default: the notebook's own defaults)")
    p.add_argument("--name", type=argtypes.file_stem, default=None,
                   help="file stem of the report (default: the notebook's name, plus a label of its inputs "
                        "when they are not the defaults, e.g. 03_analysis_mine for -p runs 'data/runs/mine/*')")
    p.add_argument("--reports-dir", default=None,
                   help="where the report goes (default: $CRESOWLVE_REPORTS_DIR or <project>/reports)")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("run", help="the main job: demo evaluation + every report, on the embedded model "
                       "unless CRESOWLVE_BASE_URL/CRESOWLVE_MODEL are set")
    p.add_argument("--reports-dir", default=None,
                   help="where the reports go (default: $CRESOWLVE_REPORTS_DIR or <project>/reports)")
    p.add_argument("--quick", action="store_true", help="fewer items (for smoke tests) (default: off)")
    p.set_defaults(fn=cmd_run)

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
    p.add_argument("--judge-model", default=None, type=argtypes.nonempty,
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
    p.add_argument("--concurrency", type=argtypes.positive_int, default=8, help="calls in flight at once (default: 8)")
    p.add_argument("--rpm", type=argtypes.positive_int, default=None, help="requests-per-minute limit (default: none)")
    p.add_argument("--tpm", type=argtypes.positive_int, default=None, help="tokens-per-minute limit (default: none)")
    p.add_argument("--limit", type=argtypes.positive_int, default=None, help="only the first N items (default: all)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed sent to the provider (default: 0)")
    p.add_argument("--temperature", type=argtypes.temperature, default=0.0,
                   help="sampling temperature, finite and >= 0, or 'default' to send none (the provider's "
                        "default decoding, as in the paper) (default: 0.0)")
    p.add_argument("--max-tokens", type=argtypes.positive_int, default=4096,
                   help="output budget per answer; thinking models need room (default: 4096)")
    p.add_argument("--max-cost", type=argtypes.usd, default=None,
                   help="stop cleanly before spending more than this many USD (default: no limit)")
    p.add_argument("--provider", default=None, choices=sorted(PROFILES),
                   help="provider profile: which fields are sent and how the effort, cost and reasoning are "
                        "read (docs/providers.md) (default: detected from the base URL's host; generic otherwise)")
    p.add_argument("--preset", default=None, choices=sorted(PRESETS),
                   help="old name of --provider: vllm-qwen3 = vllm, llama-cpp, openrouter, openai (default: none)")
    p.add_argument("--extra-body", type=argtypes.json_object, default=None,
                   help="JSON object merged into every request body, last; {\"field\": null} removes a field the "
                        "profile would send; recorded in the manifest's 'sent' (default: none)")
    p.add_argument("--retry-truncated", action="store_true",
                   help="re-ask only the answers cut off by the token limit, with this --max-tokens (larger than "
                        "theirs); recorded per answer (default: off)")
    p.add_argument("--timeout", type=argtypes.positive_float, default=300.0,
                   help="read timeout of one HTTP attempt, seconds (default: 300)")
    p.add_argument("--deadline", type=argtypes.positive_float, default=600.0,
                   help="total deadline of one HTTP attempt, seconds (default: 600)")
    p.add_argument("--no-cache", action="store_true", help="bypass the response cache (default: off)")
    p.add_argument("--batch", action="store_true",
                   help="answer through the OpenAI Batch API: the first call submits, later calls report or "
                        "collect (an expired or cancelled batch keeps its finished answers; the next call "
                        "submits only the rest); exits 1 until every item has its answer (default: off)")
    p.add_argument("--run-dir", default=None, type=argtypes.run_dir,
                   help="run directory; running again resumes it (default: data/runs/<model>[-<effort>]__<lang>)")
    p.set_defaults(fn=cmd_eval, base_url_defaults={"base_url": ("CRESOWLVE_BASE_URL",),
                                                   "judge_base_url": ("base_url", "CRESOWLVE_BASE_URL")})

    p = sub.add_parser("grid", help="evaluate models x efforts x languages from one YAML file, then 03_analysis",
                       epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", type=argtypes.nonempty, help="grid config (YAML); example: configs/paper_table1.yaml")
    p.add_argument("--reports-dir", default=None,
                   help="where the analysis report goes (default: $CRESOWLVE_REPORTS_DIR or <project>/reports)")
    p.set_defaults(fn=cmd_grid)

    p = sub.add_parser("rescore", help="recompute answer extraction and every metric of a run from its stored "
                       "raw outputs (no model call; judge verdicts kept)")
    p.add_argument("--run-dir", required=True, type=argtypes.nonempty, help="an evaluation run directory (required)")
    p.set_defaults(fn=cmd_rescore)

    p = sub.add_parser("cache", help="the on-disk response cache")
    p.add_argument("action", choices=["stats", "clear"], help="stats: entries per model and size; clear: delete entries")
    p.add_argument("--model", default=None, help="clear only this model's entries (default: all models)")
    p.add_argument("--path", default=None,
                   help="cache file (default: $CRESOWLVE_CACHE_DIR/responses.sqlite or <project>/data/cache/responses.sqlite)")
    p.add_argument("-y", "--yes", action="store_true",
                   help="clear without asking (needed when not at a terminal) (default: off)")
    p.set_defaults(fn=cmd_cache)

    p = sub.add_parser("build", help="construct a benchmark from ChGK packs (filters, translation, review, "
                       "annotation, export); default: the shipped packs on the embedded model")
    p.add_argument("--name", default="demo", help="build name; the build goes to data/builds/NAME (default: demo)")
    p.add_argument("--build-dir", default=None, help="build directory (default: data/builds/NAME); re-running resumes")
    p.add_argument("--source", action="append", help="pack file, folder of packs, dataset file or hub:ru "
                   "(repeatable; default: the shipped packs)")
    p.add_argument("--per-level", type=argtypes.positive_int, default=None, help="stratified sample: items per difficulty (default: all)")
    p.add_argument("--limit", type=argtypes.positive_int, default=None, help="keep a seeded subset of N items (small demo builds)")
    p.add_argument("--seed", type=int, default=0, help="seed of every sample and model call")
    p.add_argument("--model", default=None, help="model of every step (required with --base-url)")
    p.add_argument("--base-url", default=None, type=argtypes.http_url, help="OpenAI-compatible base URL (default: the embedded "
                   "Gemma 3 270M, a base model: pipeline demo only)")
    p.add_argument("--api-key-env", default=None, type=argtypes.env_name, help="NAME of the environment variable holding the key")
    p.add_argument("--step-model", nargs=4, action="append", metavar=("STEP", "MODEL", "BASE_URL", "KEY_ENV"),
                   help="another endpoint for one step (e.g. translate); repeatable")
    p.add_argument("--concurrency", type=argtypes.positive_int, default=4, help="calls in flight at once")
    p.add_argument("--max-cost", type=argtypes.usd, default=None, help="stop cleanly before spending more USD (per step)")
    p.add_argument("--no-cache", action="store_true", help="bypass the response cache")
    p.add_argument("--no-review", action="store_true", help="do not apply saved human-validation decisions")
    p.add_argument("--agreement-n", type=argtypes.positive_int, default=50, help="size of the agreement re-annotation sample")
    add_max_input_chars(p)
    p.set_defaults(fn=cmd_build)

    create = sub.add_parser("create", help="CREATE: associative creativity").add_subparsers(dest="create_cmd", required=True)
    p = create.add_parser("generate", help="ask a model for paths between entities (resumable run directory)")
    p.add_argument("--model", default=None, help="model name as the endpoint knows it (required with --base-url)")
    p.add_argument("--base-url", default=None, type=argtypes.http_url,
                   help="OpenAI-compatible base URL (default: the embedded Gemma 3 270M, a base model: pipeline demo only)")
    p.add_argument("--api-key-env", default=None, type=argtypes.env_name, help="NAME of the environment variable holding the key")
    p.add_argument("--queries", default=None, help="JSONL of queries (default: the 24 shipped ones)")
    add_max_input_chars(p, "a query")
    p.add_argument("--variation", choices=["original", "iterate", "resample"], default="original",
                   help="original: one call; iterate: ask for more paths in further rounds; "
                        "resample: independent samples merged (default: original)")
    p.add_argument("--n-samples", type=argtypes.positive_int, default=4, help="resample: independent samples merged (default: 4)")
    p.add_argument("--n-rounds", type=argtypes.positive_int, default=2, help="iterate: rounds, the first with the base prompt (default: 2)")
    p.add_argument("--temperature", type=argtypes.temperature, default=None, help="sampling temperature (default: 0.7, the paper's)")
    _create_client_args(p)
    p.add_argument("--effort", choices=EFFORTS, default=None, help="reasoning effort (default: none sent)")
    p.add_argument("--limit", type=argtypes.positive_int, default=None, help="only the first N queries (default: all)")
    p.add_argument("--run-dir", required=True, type=argtypes.run_dir, help="run directory; running again resumes it")
    p.set_defaults(fn=cmd_create_generate)
    p = create.add_parser("score", help="judge specificity and factuality, compute creative utility")
    p.add_argument("--run-dir", required=True, type=argtypes.nonempty, help="a run directory of `cresowlve create generate`")
    p.add_argument("--score-dir", default=None, help="where the judgments go (default: RUN_DIR/score; "
                                                     "one per judge configuration)")
    p.add_argument("--judge-model", default=None, help="judge model name (required with --judge-base-url)")
    p.add_argument("--judge-base-url", default=None, type=argtypes.http_url,
                   help="judge's OpenAI-compatible base URL (default: the embedded Gemma 3 270M: pipeline demo only)")
    p.add_argument("--judge-api-key-env", default=None, type=argtypes.env_name,
                   help="NAME of the environment variable holding the judge's key")
    p.add_argument("--judge-invalid", action="store_true", help="also judge structurally invalid paths")
    p.add_argument("--effort", choices=EFFORTS, default=None, help="judge reasoning effort (default: none sent)")
    p.add_argument("--factuality-threshold", type=float, default=1.0,
                   help="a path counts iff this fraction of its triples is judged factual (default: 1.0)")
    p.add_argument("--discount", choices=["reference", "paper"], default="reference",
                   help="reference: the released scoring code; paper: eq. 1 literally (default: reference)")
    _create_client_args(p)
    p.set_defaults(fn=cmd_create_score)
    p = sub.add_parser("synth", help="synthetic CresOWLve-style puzzles from the Wikidata subset (paper App. D); "
                       "roles without a base URL run on the embedded Gemma 3 270M (pipeline demo only)")
    p.add_argument("--build-dir", required=True, help="build directory (resumable)")
    p.add_argument("--n", type=int, default=8, help="candidates to build (default: 8; the paper used 100)")
    p.add_argument("--domains", default=None, help="comma-separated: writers,musicians,scientists,films,books,places (default: all)")
    p.add_argument("--band", type=int, nargs=2, default=[3, 20], metavar=("LOW", "HIGH"),
                   help="notability band, inclusive (default: 3 20 graph degree; use 20 100 sitelinks with --source wikidata-sparql)")
    p.add_argument("--notability", choices=["degree", "in_degree"], default="degree",
                   help="how notability is measured on the graph")
    p.add_argument("--source", choices=["kg", "wikidata-sparql"], default="kg",
                   help="kg: the shipped subset (default); wikidata-sparql: online Wikidata (needs network)")
    p.add_argument("--seed", type=int, default=0, help="seed of every sample and model call")
    for role in ("verbaliser", "solver"):
        p.add_argument(f"--{role}-model", default=None, help=f"{role} model name")
        p.add_argument(f"--{role}-base-url", default=None, type=argtypes.http_url,
                       help=f"{role}'s OpenAI-compatible base URL (default: the embedded Gemma 3 270M)")
        p.add_argument(f"--{role}-api-key-env", default=None, type=argtypes.env_name,
                       help=f"NAME of the environment variable holding the {role}'s key")
        p.add_argument(f"--{role}-max-tokens", type=argtypes.positive_int, default=1024, help=f"{role}'s output budget per call")
    p.add_argument("--solver-effort", choices=EFFORTS, default=None, help="solver reasoning effort (plain solve prompt)")
    p.add_argument("--concurrency", type=argtypes.positive_int, default=4, help="calls in flight at once")
    p.add_argument("--max-cost", type=argtypes.usd, default=None, help="stop cleanly before spending more USD")
    p.add_argument("--no-cache", action="store_true", help="bypass the response cache")
    add_max_input_chars(p, "a knowledge-graph line")
    p.set_defaults(fn=cmd_synth)
    from cresowlve_core.contamination.cli import add_contamination_parser
    from cresowlve_core.error_analysis.cli import add_errors_parser

    add_errors_parser(sub)
    add_contamination_parser(sub)
    _add_stage_provider(ap)
    _apply_help_conventions(ap)
    return ap


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                out += [sub, *_subparsers(sub)]
    return out


def _add_stage_provider(parser: argparse.ArgumentParser) -> None:
    """``--provider NAME`` on every stage command that takes a base URL (eval has its own): the
    profile of every endpoint the command names (docs/providers.md)."""
    for sub in _subparsers(parser):
        flags = {f for a in sub._actions for f in a.option_strings}
        if "--provider" not in flags and any(f.endswith("base-url") for f in flags):
            sub.add_argument("--provider", dest="stage_provider", default=None, choices=sorted(PROFILES),
                             help="provider profile of every endpoint this command names (docs/providers.md) "
                                  "(default: detected from each base URL's host)")


def apply_stage_provider(args: argparse.Namespace) -> None:
    """Map the host of every base URL the command names to ``--provider`` through
    ``CRESOWLVE_PROVIDERS``, which every stage's roles read (so grids of roles need no flag each)."""
    name = getattr(args, "stage_provider", None)
    if not name:
        return
    from urllib.parse import urlsplit

    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    def urls(value: Any) -> list[str]:
        if isinstance(value, (list, tuple)):
            return [u for v in value for u in urls(v)]
        return [value] if isinstance(value, str) and value.startswith(("http://", "https://")) else []

    hosts = []
    for url in urls(list(vars(args).values())):
        parts = urlsplit(url)
        if parts.hostname:
            hosts.append(parts.hostname + (f":{parts.port}" if parts.port else ""))
    entries = [e for e in os.environ.get(PROVIDERS_ENV, "").split(",") if e.strip()]
    os.environ[PROVIDERS_ENV] = ",".join([*(f"{h}={name}" for h in dict.fromkeys(hosts)), *entries])


def _chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser ``args`` went through, deepest first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(args, action.dest, None)
            if name in action.choices:
                return _chosen_parser(action.choices[name], args)
    return parser


def _unknown_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 through the chosen subcommand's parser (its usage), naming the nearest known flag."""
    import difflib

    sub = _chosen_parser(parser, args)
    flags = [f for action in sub._actions for f in action.option_strings if f.startswith("--")]
    hints = []
    for arg in extra:
        if arg.startswith("-"):
            close = difflib.get_close_matches(arg.split("=", 1)[0], flags, n=1, cutoff=0.6)
            if close:
                hints.append(f"{arg}: did you mean {close[0]}?")
    sub.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


#: the last line after the traceback of an exception no code path anticipated
BUG_LINE = ("bug: this is an unexpected error in cresowlve, not a problem with your input; "
            "please report it with the traceback above")


def _failure_exit(exc: Exception, verbose: bool) -> int:
    """Exit code for an exception that reached the CLI: ``exc.exit_code`` after one ``error:`` line for a
    :class:`~cresowlve_core.failures.CresowlveError`; anything else is a bug (traceback, :data:`BUG_LINE`, 1)."""
    import traceback

    from cresowlve_core.failures import CresowlveError

    code = exc.exit_code if isinstance(exc, CresowlveError) else None
    if code is None or verbose:
        traceback.print_exception(exc, file=sys.stderr)
    if code is None:
        print(BUG_LINE, file=sys.stderr)
        return EXIT_INCOMPLETE
    print(f"error: {_one_line(exc)}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run one ``cresowlve`` command; returns the exit code (see :data:`EXIT_CODES_HELP`)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # refused by the subcommand that was given, with its usage and the nearest flag
        _unknown_arguments(parser, args, extra)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        for noisy in ("papermill", "httpx", "httpx2", "traitlets"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    fn: Callable[[argparse.Namespace], int] = args.fn
    if (why := unserved_role(args) or unset_role_key(args)) is not None:
        return _usage_error(why)
    apply_stage_provider(args)
    from cresowlve_core.runtime import stop

    restore_terminal = guard_terminal(vars(args))  # no key or URL credential reaches the terminal
    try:
        with stop.handle_signals():  # the first Ctrl-C / SIGTERM stops the current step (runtime/stop.py)
            return fn(args)
    except KeyboardInterrupt:
        print(exitcodes.interrupted_line("completed work is saved in the run directory"), file=sys.stderr)
        return exitcodes.interrupt_code()
    except Exception as exc:  # one clear line for a project error, a traceback for a bug
        return _failure_exit(exc, args.verbose)
    finally:
        restore_terminal()


if __name__ == "__main__":
    sys.exit(main())
