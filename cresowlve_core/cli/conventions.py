"""The parser's conventions: every option's help ends with its default, every command shows the exit
codes, and an unknown flag is refused with the nearest known one."""

from __future__ import annotations

import argparse

from cresowlve_core.exitcodes import EXIT_CODES_HELP


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


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                out += [sub, *_subparsers(sub)]
    return out


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
