"""``cresowlve build``: construct a benchmark from ChGK packs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cresowlve_core import argtypes
from cresowlve_core.cli.common import _usage_error
from cresowlve_core.cli.options import add_client_options
from cresowlve_core.exitcodes import stage_exit
from cresowlve_core.inputs import add_max_input_chars


def cmd_build(a: argparse.Namespace) -> int:
    from cresowlve_core.construction.build import Build, BuildConfig, BuildStopped
    from cresowlve_core.failures import UsageError
    from cresowlve_core.runtime import RunDir

    step_models: dict[str, dict[str, str | None]] = {}
    for step, model, url, key_env in a.step_model or []:  # a step's model is never run on the embedded one instead
        if (problem := argtypes.model_name_problem(model)) is not None:
            return _usage_error(f"--step-model {step}: MODEL {problem}; nothing was run")
        try:
            url = argtypes.http_url(url)  # as --base-url reads it: surrounding whitespace stripped
        except argparse.ArgumentTypeError as exc:
            return _usage_error(f"--step-model {step} {model}: BASE_URL {exc}; nothing was run")
        if step in step_models:  # the later one would replace the earlier without a word
            return _usage_error(f"--step-model {step} is given twice ({step_models[step]['model']} and {model}); "
                                "give each step one model; nothing was run")
        step_models[step] = {"model": model, "base_url": url, "api_key_env": key_env}
    cfg = BuildConfig(name=a.name, build_dir=a.build_dir, sources=a.source or None, per_level=a.per_level,
                      limit=a.limit, seed=a.seed, model=a.model, base_url=a.base_url, api_key_env=a.api_key_env,
                      concurrency=a.concurrency, max_cost=a.max_cost, cache=not a.no_cache,
                      apply_review=not a.no_review, agreement_n=a.agreement_n, max_input_chars=a.max_input_chars,
                      models=step_models)
    existed = cfg.path.exists()
    # one build at a time: a second one is refused before it collects, writes or sends anything
    with RunDir(cfg.path).lock(), Build(cfg) as build:  # an empty source raises BuildEmpty (exit 2, one line)
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


def add_build_parser(sub: Any) -> None:
    """Register ``cresowlve build``."""
    p = sub.add_parser("build", help="construct a benchmark from ChGK packs (filters, translation, review, "
                       "annotation, export); default: the shipped packs on the embedded model")
    p.add_argument("--name", default="demo", help="build name; the build goes to data/builds/NAME (default: demo)")
    p.add_argument("--build-dir", default=None, type=argtypes.output_dir, help="build directory (default: data/builds/NAME); re-running resumes")
    p.add_argument("--source", action="append", type=argtypes.nonempty, help="pack file, folder of packs, dataset file or hub:ru "
                   "(repeatable; default: the shipped packs)")
    p.add_argument("--per-level", type=argtypes.positive_int, default=None, help="stratified sample: items per difficulty (default: all)")
    p.add_argument("--limit", type=argtypes.positive_int, default=None, help="keep the N items of lowest seeded rank (small demo builds; a larger N with the same --seed keeps them)")
    add_client_options(p, "seed", help={"seed": "seed of every sample and model call"})
    p.add_argument("--model", default=None, type=argtypes.model_name, help="model of every step (required with --base-url)")
    p.add_argument("--base-url", default=None, type=argtypes.http_url, help="OpenAI-compatible base URL (default: the embedded "
                   "Gemma 3 270M, a base model: pipeline demo only)")
    p.add_argument("--api-key-env", default=None, type=argtypes.env_name, help="NAME of the environment variable holding the key")
    p.add_argument("--step-model", nargs=4, action="append", metavar=("STEP", "MODEL", "BASE_URL", "KEY_ENV"),
                   help="another endpoint for one step (e.g. translate); repeatable")
    add_client_options(p, "concurrency", "max_cost", "cache",
                       help={"max_cost": "stop cleanly before a step spends more than this many USD"})
    p.add_argument("--no-review", action="store_true", help="do not apply saved human-validation decisions")
    p.add_argument("--agreement-n", type=argtypes.positive_int, default=50, help="size of the agreement re-annotation sample")
    add_max_input_chars(p)
    p.set_defaults(fn=cmd_build)
