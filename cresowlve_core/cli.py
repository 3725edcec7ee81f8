"""``cresowlve``: thin command-line wrappers over the same functions the notebooks call."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

from cresowlve_core.llm.types import EFFORTS

log = logging.getLogger("cresowlve")


def _parse_value(text: str) -> Any:
    """``-p key value``: JSON where it parses (numbers, lists, null, true), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _params(pairs: list[list[str]] | None) -> dict[str, Any]:
    return {k: _parse_value(v) for k, v in (pairs or [])}


# --------------------------------------------------------------------------- commands


def cmd_serve_local(a: argparse.Namespace) -> int:
    from cresowlve_core.llm.local import LocalServer

    server = LocalServer(port=a.port, n_parallel=a.parallel)
    with server:
        print(f"serving {server.model} at {server.base_url}  (Ctrl-C to stop)", flush=True)
        stop = {"now": False}
        signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
        try:
            while not stop["now"]:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    print("stopped", flush=True)
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from cresowlve_core.notebooks import run_notebook

    res = run_notebook(a.notebook, _params(a.param), Path(a.reports_dir) if a.reports_dir else None)
    print(f"{res.html}  ({res.seconds:.1f}s)")
    return 0


def cmd_eval(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.runner import EvalConfig, evaluate, summary_line

    cfg = EvalConfig(
        model=a.model, base_url=a.base_url, run_dir=a.run_dir, items=a.items, lang=a.lang,
        api_key_env=a.api_key_env, effort=a.effort, prompt_style=a.prompt_style,
        judge_model=a.judge_model, judge_base_url=a.judge_base_url, judge_api_key_env=a.judge_api_key_env, judge_repeat=a.judge_repeat,
        concurrency=a.concurrency, limit=a.limit, seed=a.seed, temperature=a.temperature,
        max_tokens=a.max_tokens, max_cost=a.max_cost, rpm=a.rpm, tpm=a.tpm, cache=not a.no_cache, api=a.api,
    )
    if a.batch:
        from cresowlve_core.evaluation.batch_eval import batch_evaluate

        out = batch_evaluate(cfg)
        print(out)
        return 0
    outcome = evaluate(cfg)
    print(summary_line(outcome.summary))
    return 0 if not outcome.stopped else 3


def cmd_rescore(a: argparse.Namespace) -> int:
    from cresowlve_core.evaluation.runner import rescore, summary_line

    print(summary_line(rescore(a.run_dir)) + " | rescored, 0 requests")
    return 0


def cmd_cache(a: argparse.Namespace) -> int:
    from cresowlve_core.llm.cache import ResponseCache

    cache = ResponseCache(Path(a.path)) if a.path else ResponseCache()
    if a.action == "stats":
        print(json.dumps(cache.stats(), indent=2))
    else:
        n = cache.clear(model=a.model)
        print(f"removed {n} cached responses")
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    from cresowlve_core.mainjob import main_job

    main_job(reports_dir=Path(a.reports_dir) if a.reports_dir else None, quick=a.quick)
    return 0


def _create_options(a: argparse.Namespace, base: Any) -> Any:
    """The stage's default ClientOptions with the options given on the command line."""
    given = {k: getattr(a, k, None) for k in ("temperature", "max_tokens", "concurrency", "seed", "rpm", "tpm", "max_cost")}
    update = {k: v for k, v in given.items() if v is not None}
    if getattr(a, "no_cache", False):
        update["cache"] = False
    return type(base).model_validate({**base.model_dump(), **update})


def _create_finish(summary: Any) -> int:
    print(summary.model_dump_json(indent=2))
    if summary.stopped:
        print(f"stopped early: {summary.stopped}; finished work is kept, run again to resume", file=sys.stderr)
        return 3
    return 0


def cmd_create_generate(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.create.generate import GENERATE_OPTIONS, generate
    from cresowlve_core.runtime import endpoint_or_embedded

    with endpoint_or_embedded(a.model, a.base_url, a.api_key_env) as (endpoint, embedded):
        if embedded:
            print(banner_text("embedded"), file=sys.stderr)
        summary = generate(a.queries, endpoint, a.run_dir, variation=a.variation, n_samples=a.n_samples,
                           n_rounds=a.n_rounds, limit=a.limit, effort=a.effort,
                           options=_create_options(a, GENERATE_OPTIONS))
    return _create_finish(summary)


def cmd_create_score(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.create.score import JUDGE_OPTIONS, score
    from cresowlve_core.runtime import endpoint_or_embedded

    with endpoint_or_embedded(a.judge_model, a.judge_base_url, a.judge_api_key_env) as (endpoint, embedded):
        if embedded:
            print(banner_text("embedded"), file=sys.stderr)
        summary = score(a.run_dir, endpoint, score_dir=a.score_dir, effort=a.effort, judge_invalid=a.judge_invalid,
                        factuality_threshold=a.factuality_threshold, discount=a.discount,
                        options=_create_options(a, JUDGE_OPTIONS))
    return _create_finish(summary)


# --------------------------------------------------------------------------- parser


def _endpoint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model name as the endpoint knows it")
    p.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, e.g. https://api.openai.com/v1")
    p.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the key")


def _create_client_args(p: argparse.ArgumentParser) -> None:
    """Client options of the CREATE commands; unset ones keep the stage's ClientOptions defaults."""
    p.add_argument("--max-tokens", type=int, default=None, help="output budget per call (default: 4096)")
    p.add_argument("--concurrency", type=int, default=None, help="calls in flight at once (default: 8)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed sent to the provider (default: 0)")
    p.add_argument("--rpm", type=int, default=None, help="requests-per-minute limit (default: none)")
    p.add_argument("--tpm", type=int, default=None, help="tokens-per-minute limit (default: none)")
    p.add_argument("--max-cost", type=float, default=None, help="stop cleanly before spending more USD (default: no limit)")
    p.add_argument("--no-cache", action="store_true", help="bypass the response cache")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cresowlve", description=__doc__)
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve-local", help="serve the embedded Gemma 3 270M on 127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--parallel", type=int, default=4)
    p.set_defaults(fn=cmd_serve_local)

    p = sub.add_parser("report", help="execute a notebook headless and render its HTML report")
    p.add_argument("notebook", help="name in notebooks/ (e.g. 03_analysis) or a path")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("KEY", "VALUE"))
    p.add_argument("--reports-dir", default=None)
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("run", help="the main job: demo evaluation + every report, on the embedded model "
                       "unless CRESOWLVE_BASE_URL/CRESOWLVE_MODEL are set")
    p.add_argument("--reports-dir", default=None)
    p.add_argument("--quick", action="store_true", help="fewer items (for smoke tests)")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("eval", help="evaluate a model on CresOWLve items into a resumable run directory")
    p.add_argument("--items", default="demo", help="demo | hub:en | hub:ru | PATH (.jsonl/.parquet, published schema)")
    p.add_argument("--lang", choices=["en", "ru"], default="en")
    _endpoint_args(p)
    p.add_argument("--effort", choices=EFFORTS, default=None, help="reasoning effort (uses the Responses API)")
    p.add_argument("--prompt-style", choices=["cot", "plain"], default=None,
                   help="cot for non-thinking models, plain for thinking ones (default: plain iff --effort)")
    p.add_argument("--api", choices=["chat", "responses", "completions"], default=None)
    p.add_argument("--judge-model", default=None)
    p.add_argument("--judge-base-url", default=None, help="default: --base-url")
    p.add_argument("--judge-api-key-env", default=None)
    p.add_argument("--judge-repeat", action="store_true", help="judge twice (seed, seed+1): repeatability in 03_analysis")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rpm", type=int, default=None, help="requests-per-minute limit")
    p.add_argument("--tpm", type=int, default=None, help="tokens-per-minute limit")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--max-cost", type=float, default=None, help="stop cleanly before spending more USD")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--batch", action="store_true", help="submit via the OpenAI Batch API; run again to collect")
    p.add_argument("--run-dir", required=True)
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("rescore", help="recompute answer extraction and every metric of a run from its stored "
                       "raw outputs (no model call; judge verdicts kept)")
    p.add_argument("--run-dir", required=True, help="an evaluation run directory")
    p.set_defaults(fn=cmd_rescore)

    p = sub.add_parser("cache", help="the on-disk response cache")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--model", default=None, help="clear only this model's entries")
    p.add_argument("--path", default=None)
    p.set_defaults(fn=cmd_cache)

    create = sub.add_parser("create", help="CREATE: associative creativity").add_subparsers(dest="create_cmd", required=True)
    p = create.add_parser("generate", help="ask a model for paths between entities (resumable run directory)")
    p.add_argument("--model", default=None, help="model name as the endpoint knows it (required with --base-url)")
    p.add_argument("--base-url", default=None,
                   help="OpenAI-compatible base URL (default: the embedded Gemma 3 270M, a base model: pipeline demo only)")
    p.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the key")
    p.add_argument("--queries", default=None, help="JSONL of queries (default: the 24 shipped ones)")
    p.add_argument("--variation", choices=["original", "iterate", "resample"], default="original",
                   help="original: one call; iterate: ask for more paths in further rounds; "
                        "resample: independent samples merged (default: original)")
    p.add_argument("--n-samples", type=int, default=4, help="resample: independent samples merged (default: 4)")
    p.add_argument("--n-rounds", type=int, default=2, help="iterate: rounds, the first with the base prompt (default: 2)")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: 0.7, the paper's)")
    _create_client_args(p)
    p.add_argument("--effort", choices=EFFORTS, default=None, help="reasoning effort (default: none sent)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries (default: all)")
    p.add_argument("--run-dir", required=True, help="run directory; running again resumes it")
    p.set_defaults(fn=cmd_create_generate)
    p = create.add_parser("score", help="judge specificity and factuality, compute creative utility")
    p.add_argument("--run-dir", required=True, help="a run directory of `cresowlve create generate`")
    p.add_argument("--score-dir", default=None, help="where the judgments go (default: RUN_DIR/score; "
                                                     "one per judge configuration)")
    p.add_argument("--judge-model", default=None, help="judge model name (required with --judge-base-url)")
    p.add_argument("--judge-base-url", default=None,
                   help="judge's OpenAI-compatible base URL (default: the embedded Gemma 3 270M: pipeline demo only)")
    p.add_argument("--judge-api-key-env", default=None, help="NAME of the environment variable holding the judge's key")
    p.add_argument("--judge-invalid", action="store_true", help="also judge structurally invalid paths")
    p.add_argument("--effort", choices=EFFORTS, default=None, help="judge reasoning effort (default: none sent)")
    p.add_argument("--factuality-threshold", type=float, default=1.0,
                   help="a path counts iff this fraction of its triples is judged factual (default: 1.0)")
    p.add_argument("--discount", choices=["reference", "paper"], default="reference",
                   help="reference: the released scoring code; paper: eq. 1 literally (default: reference)")
    _create_client_args(p)
    p.set_defaults(fn=cmd_create_score)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        for noisy in ("papermill", "httpx", "httpx2", "traitlets"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        return fn(args)
    except KeyboardInterrupt:
        print("interrupted; completed work is saved in the run directory", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line instead of a traceback for expected failures
        from cresowlve_core.llm.local import LocalServerError
        from cresowlve_core.llm.types import LLMError

        if isinstance(exc, (LLMError, LocalServerError, FileNotFoundError, ValueError)) and not args.verbose:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise


app = main  # entry point name used in pyproject

if __name__ == "__main__":
    sys.exit(main())
