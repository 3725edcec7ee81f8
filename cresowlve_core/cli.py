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


def cmd_create_generate(a: argparse.Namespace) -> int:
    from cresowlve_core.create import runs as create_runs
    from cresowlve_core.llm.types import Endpoint

    summary = create_runs.generate(
        a.queries, Endpoint(a.base_url, a.model, a.api_key_env), a.run_dir, variation=a.variation,
        n_samples=a.n_samples, n_rounds=a.n_rounds, concurrency=a.concurrency, seed=a.seed, limit=a.limit,
        temperature=a.temperature, max_tokens=a.max_tokens, effort=a.effort, max_cost=a.max_cost,
    )
    print(json.dumps(summary, indent=2, default=str))
    return 0


def cmd_create_score(a: argparse.Namespace) -> int:
    from cresowlve_core.create import runs as create_runs
    from cresowlve_core.llm.types import Endpoint

    summary = create_runs.score(
        a.run_dir, Endpoint(a.judge_base_url, a.judge_model, a.judge_api_key_env),
        concurrency=a.concurrency, seed=a.seed, factuality_threshold=a.factuality_threshold,
        discount=a.discount, max_cost=a.max_cost,
    )
    print(json.dumps(summary, indent=2, default=str))
    return 0


# --------------------------------------------------------------------------- parser


def _endpoint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model name as the endpoint knows it")
    p.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, e.g. https://api.openai.com/v1")
    p.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the key")


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
    p = create.add_parser("generate", help="ask a model for paths between entities")
    _endpoint_args(p)
    p.add_argument("--queries", default=None, help="JSONL of queries (default: the 24 shipped ones)")
    p.add_argument("--variation", choices=["original", "iterate", "resample"], default="original")
    p.add_argument("--n-samples", type=int, default=4, help="resample: independent samples merged")
    p.add_argument("--n-rounds", type=int, default=2, help="iterate: rounds of asking for more paths")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--effort", choices=EFFORTS, default=None)
    p.add_argument("--max-cost", type=float, default=None)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--run-dir", required=True)
    p.set_defaults(fn=cmd_create_generate)
    p = create.add_parser("score", help="judge specificity and factuality, compute creative utility")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--judge-model", required=True)
    p.add_argument("--judge-base-url", required=True)
    p.add_argument("--judge-api-key-env", default=None)
    p.add_argument("--factuality-threshold", type=float, default=1.0)
    p.add_argument("--discount", choices=["reference", "paper"], default="reference")
    p.add_argument("--max-cost", type=float, default=None)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
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
