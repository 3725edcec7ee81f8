"""``cresowlve``: thin command-line wrappers over the same functions the notebooks call."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from cresowlve_core import exitcodes
from cresowlve_core.cli.build import add_build_parser
from cresowlve_core.cli.common import _one_line, _usage_error
from cresowlve_core.cli.contamination import add_contamination_parser
from cresowlve_core.cli.conventions import _apply_help_conventions, _unknown_arguments
from cresowlve_core.cli.create import add_create_parser
from cresowlve_core.cli.errors import add_errors_parser
from cresowlve_core.cli.evaluation import (
    add_cache_parser,
    add_diff_parser,
    add_eval_parser,
    add_grid_parser,
    add_rescore_parser,
    add_runs_parser,
)
from cresowlve_core.cli.reports import add_report_parser, add_run_parser, add_serve_reports_parser
from cresowlve_core.cli.roles import _add_stage_provider, apply_stage_provider, unserved_role, unset_role_key
from cresowlve_core.cli.serve_local import add_serve_local_parser
from cresowlve_core.cli.synth import add_synth_parser
from cresowlve_core.exitcodes import EXIT_INCOMPLETE
from cresowlve_core.secrets import guard_terminal

log = logging.getLogger("cresowlve")


def build_parser() -> argparse.ArgumentParser:
    """The ``cresowlve`` parser: every command, in the order ``cresowlve --help`` lists them."""
    ap = argparse.ArgumentParser(prog="cresowlve", description=__doc__)
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="debug logging, and a full traceback instead of a one-line error (default: off)")
    sub = ap.add_subparsers(dest="command", required=True)
    for add in (add_serve_local_parser, add_runs_parser, add_diff_parser, add_serve_reports_parser, add_report_parser,
                add_run_parser, add_eval_parser, add_grid_parser, add_rescore_parser, add_cache_parser,
                add_build_parser, add_create_parser, add_synth_parser, add_errors_parser, add_contamination_parser):
        add(sub)
    _add_stage_provider(ap)
    _apply_help_conventions(ap)
    return ap


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


