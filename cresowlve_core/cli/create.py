"""``cresowlve create generate|score``: CREATE (associative creativity) from the command line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cresowlve_core import argtypes
from cresowlve_core.cli.options import add_client_options, client_options
from cresowlve_core.exitcodes import stage_exit
from cresowlve_core.inputs import add_max_input_chars
from cresowlve_core.llm.types import EFFORTS


def _create_finish(summary: Any, unit: str) -> int:
    """One summary line (summary.json has everything), then the exit code; a run in which every
    call answered but nothing parsed exits 1, and so does a scoring whose mean utility leaves out
    queries the generation did not finish (a failed or missing call: named last, since running the
    generation again finishes them)."""
    from cresowlve_core.create.records import GenerateSummary, generate_line, score_line, unparsed_line
    from cresowlve_core.exitcodes import EXIT_INCOMPLETE, EXIT_OK

    print(generate_line(summary) if isinstance(summary, GenerateSummary) else score_line(summary))
    code = stage_exit({**summary.model_dump(), "unparsed": unparsed_line(summary)}, unit=unit)
    if (code in (EXIT_OK, EXIT_INCOMPLETE) and not isinstance(summary, GenerateSummary) and summary.n_unfinished_queries
            and not (summary.n_judge_errors or summary.n_not_judged)):
        # every path was judged, so what is left unfinished is the generation of those queries
        print(f"incomplete: {summary.n_unfinished_queries} of {summary.n_queries} queries have no utility, their "
              f"generation has a failed or missing call (flags in scores.json); run `cresowlve create generate` "
              f"on {summary.run_dir} again, then `cresowlve create score`", file=sys.stderr)
        return EXIT_INCOMPLETE
    return code


def _generation_options(a: argparse.Namespace, endpoint: Any) -> tuple[Any, int | None]:
    """The generation's client options for ``endpoint``, and the base model's budget put in them
    when ``--max-tokens`` is not given (None: the options' own budget)."""
    from cresowlve_core.create.generate import GENERATE, GENERATE_OPTIONS

    options = client_options(a, GENERATE_OPTIONS)
    budget = GENERATE.default_budget(endpoint)  # a base model's: 4096 tokens would repeat one path for minutes
    if a.max_tokens is None and budget is not None:
        return options.model_copy(update={"max_tokens": budget}), budget
    return options, None


def cmd_create_generate(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.create.generate import generate, generation_manifest, generation_temperature_not_sent
    from cresowlve_core.create.queries import load_queries
    from cresowlve_core.runtime import endpoint_or_embedded, planned_endpoint, refuse_changed

    # a bad file, or a run directory of another configuration, is refused before any model starts
    queries = load_queries(a.queries, a.limit, max_input_chars=a.max_input_chars)
    with planned_endpoint(a.model, a.base_url, a.api_key_env) as (planned, _):
        refuse_changed(a.run_dir, generation_manifest(
            queries, planned, variation=a.variation, n_samples=a.n_samples, n_rounds=a.n_rounds, effort=a.effort,
            options=_generation_options(a, planned)[0], queries_path=a.queries, limit=a.limit))
    with endpoint_or_embedded(a.model, a.base_url, a.api_key_env) as (endpoint, embedded):
        if embedded:
            print(banner_text("embedded"), file=sys.stderr)
        options, budget = _generation_options(a, endpoint)
        if budget is not None:
            print(f"{endpoint.model} is a base model: few-shot generation with --max-tokens {budget}", file=sys.stderr)
        if note := generation_temperature_not_sent(endpoint, options, a.effort):
            print(f"warning: {note}; the paper samples at 0.7", file=sys.stderr)
        summary = generate(a.queries, endpoint, a.run_dir, variation=a.variation, n_samples=a.n_samples,
                           n_rounds=a.n_rounds, limit=a.limit, effort=a.effort, options=options,
                           max_input_chars=a.max_input_chars)
    return _create_finish(summary, "calls")


def cmd_create_score(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.create.generate import read_generation_manifest
    from cresowlve_core.create.score import JUDGE_OPTIONS, JUDGES, default_score_dir, score, score_manifest
    from cresowlve_core.runtime import endpoint_or_embedded, planned_endpoint, refuse_changed

    gm = read_generation_manifest(a.run_dir)  # not a generation run: refused before any model starts
    options = client_options(a, JUDGE_OPTIONS)
    settings: dict[str, Any] = dict(effort=a.effort, judge_invalid=a.judge_invalid,
                                    factuality_threshold=a.factuality_threshold, discount=a.discount, options=options)
    with planned_endpoint(a.judge_model, a.judge_base_url, a.judge_api_key_env) as (planned, _):
        refuse_changed(a.score_dir or default_score_dir(a.run_dir),  # another judge configuration: refused first
                       score_manifest(a.run_dir, planned, n_units=0, generation=gm, **settings))
    with endpoint_or_embedded(a.judge_model, a.judge_base_url, a.judge_api_key_env) as (endpoint, embedded):
        if embedded:
            print(banner_text("embedded"), file=sys.stderr)
        budget = JUDGES.on(endpoint, options).max_tokens  # a base model's judges: a few tokens per triple, always
        if a.max_tokens is not None and budget != a.max_tokens:
            print(f"{endpoint.model} is a base model: its judges answer one triple per call with {budget} tokens; "
                  f"--max-tokens {a.max_tokens} is not used", file=sys.stderr)
        summary = score(a.run_dir, endpoint, score_dir=a.score_dir, **settings)
    return _create_finish(summary, "paths to judge")


#: the client options of both CREATE commands
CLIENT_FLAGS = ("max_tokens", "concurrency", "seed", "rpm", "tpm", "max_cost", "cache")


def _generate_options() -> Any:
    from cresowlve_core.create.generate import GENERATE_OPTIONS

    return GENERATE_OPTIONS


def _judge_options() -> Any:
    from cresowlve_core.create.score import JUDGE_OPTIONS

    return JUDGE_OPTIONS


def add_create_parser(sub: Any) -> None:
    """Register ``cresowlve create``."""
    create = sub.add_parser("create", help="CREATE: associative creativity").add_subparsers(dest="create_cmd", required=True)
    p = create.add_parser("generate", help="ask a model for paths between entities (resumable run directory)")
    p.add_argument("--model", default=None, type=argtypes.model_name, help="model name as the endpoint knows it (required with --base-url)")
    p.add_argument("--base-url", default=None, type=argtypes.http_url,
                   help="OpenAI-compatible base URL (default: the embedded Gemma 3 270M, a base model: pipeline demo only)")
    p.add_argument("--api-key-env", default=None, type=argtypes.env_name, help="NAME of the environment variable holding the key")
    p.add_argument("--queries", default=None, type=argtypes.nonempty, help="JSONL of queries (default: the 24 shipped ones)")
    add_max_input_chars(p, "a query")
    p.add_argument("--variation", choices=["original", "iterate", "resample"], default="original",
                   help="original: one call; iterate: ask for more paths in further rounds; "
                        "resample: independent samples merged (default: original)")
    p.add_argument("--n-samples", type=argtypes.positive_int, default=4, help="resample: independent samples merged (default: 4)")
    p.add_argument("--n-rounds", type=argtypes.positive_int, default=2, help="iterate: rounds, the first with the base prompt (default: 2)")
    add_client_options(p, "temperature", *CLIENT_FLAGS, stage=_generate_options,
                       help={"temperature": "sampling temperature (the paper's by default), or 'default' to send none"})
    p.add_argument("--effort", choices=EFFORTS, default=None, help="reasoning effort (default: none sent)")
    p.add_argument("--limit", type=argtypes.positive_int, default=None, help="only the first N queries (default: all)")
    p.add_argument("--run-dir", required=True, type=argtypes.run_dir, help="run directory; running again resumes it")
    p.set_defaults(fn=cmd_create_generate)
    p = create.add_parser("score", help="judge specificity and factuality, compute creative utility")
    p.add_argument("--run-dir", required=True, type=argtypes.nonempty, help="a run directory of `cresowlve create generate`")
    p.add_argument("--score-dir", default=None, type=argtypes.run_dir, help="where the judgments go (default: RUN_DIR/score; "
                                                     "one per judge configuration)")
    p.add_argument("--judge-model", default=None, type=argtypes.model_name, help="judge model name (required with --judge-base-url)")
    p.add_argument("--judge-base-url", default=None, type=argtypes.http_url,
                   help="judge's OpenAI-compatible base URL (default: the embedded Gemma 3 270M: pipeline demo only)")
    p.add_argument("--judge-api-key-env", default=None, type=argtypes.env_name,
                   help="NAME of the environment variable holding the judge's key")
    p.add_argument("--judge-invalid", action="store_true", help="also judge structurally invalid paths")
    p.add_argument("--effort", choices=EFFORTS, default=None, help="judge reasoning effort (default: none sent)")
    p.add_argument("--factuality-threshold", type=argtypes.fraction, default=1.0,
                   help="a path counts iff this fraction of its triples is judged factual (default: 1.0)")
    p.add_argument("--discount", choices=["reference", "paper"], default="reference",
                   help="reference: the released scoring code; paper: eq. 1 literally (default: reference)")
    add_client_options(p, *CLIENT_FLAGS, stage=_judge_options)
    p.set_defaults(fn=cmd_create_score)
