"""``cresowlve synth``: synthetic CresOWLve-style puzzles from the Wikidata subset (paper App. D)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cresowlve_core import argtypes
from cresowlve_core.cli.common import _usage_error
from cresowlve_core.cli.options import add_client_options
from cresowlve_core.exitcodes import stage_exit
from cresowlve_core.inputs import add_max_input_chars
from cresowlve_core.llm.types import EFFORTS


def cmd_synth(a: argparse.Namespace) -> int:
    from cresowlve_core.banners import banner_text
    from cresowlve_core.synthetic.pipeline import (
        TASKS,
        SynthConfig,
        candidate_build,
        load_source,
        run_synth,
        summary_line,
        synth_stage,
    )

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
    return stage_exit(synth_stage(res.summary), unit=TASKS)


def add_synth_parser(sub: Any) -> None:
    """Register ``cresowlve synth``."""
    p = sub.add_parser("synth", help="synthetic CresOWLve-style puzzles from the Wikidata subset (paper App. D); "
                       "roles without a base URL run on the embedded Gemma 3 270M (pipeline demo only)")
    p.add_argument("--build-dir", required=True, type=argtypes.run_dir, help="build directory (resumable)")
    p.add_argument("--n", type=argtypes.positive_int, default=8, help="candidates to build (default: 8; the paper used 100)")
    p.add_argument("--domains", default=None, help="comma-separated: writers,musicians,scientists,films,books,places (default: all)")
    p.add_argument("--band", type=argtypes.non_negative_int, nargs=2, default=[3, 20], metavar=("LOW", "HIGH"),
                   help="notability band, inclusive (default: 3 20 graph degree; use 20 100 sitelinks with --source wikidata-sparql)")
    p.add_argument("--notability", choices=["degree", "in_degree"], default="degree",
                   help="how notability is measured on the graph")
    p.add_argument("--source", choices=["kg", "wikidata-sparql"], default="kg",
                   help="kg: the shipped subset (default); wikidata-sparql: online Wikidata (needs network)")
    add_client_options(p, "seed", help={"seed": "seed of every sample and model call"})
    for role in ("verbaliser", "solver"):
        p.add_argument(f"--{role}-model", default=None, type=argtypes.model_name, help=f"{role} model name")
        p.add_argument(f"--{role}-base-url", default=None, type=argtypes.http_url,
                       help=f"{role}'s OpenAI-compatible base URL (default: the embedded Gemma 3 270M)")
        p.add_argument(f"--{role}-api-key-env", default=None, type=argtypes.env_name,
                       help=f"NAME of the environment variable holding the {role}'s key")
        p.add_argument(f"--{role}-max-tokens", type=argtypes.positive_int, default=1024, help=f"{role}'s output budget per call")
    p.add_argument("--solver-effort", choices=EFFORTS, default=None, help="solver reasoning effort (plain solve prompt)")
    add_client_options(p, "concurrency", "max_cost", "cache")
    add_max_input_chars(p, "a knowledge-graph line")
    p.set_defaults(fn=cmd_synth)
