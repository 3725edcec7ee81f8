"""The client options' flags, made from :class:`~cresowlve_core.llm.options.ClientOptions`' fields.

Each flag is declared here once, by its name and type; its help is the field's description and
its default the field's default, so every command that exposes an option gives it the same
default (the help formatter shows it). A command picks the fields it exposes
(:func:`add_client_options`) and reads them back as its stage's options (:func:`client_options`).

Only a stage's own model call sets its budget and temperature (:data:`STAGE_TUNED`: the error
labeller's short budget, CREATE's temperature of the paper): those flags default to "not given",
the stage's value applies, and the help shows that value.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cresowlve_core import argtypes
from cresowlve_core.llm.effort import PRESETS
from cresowlve_core.llm.options import ClientOptions
from cresowlve_core.llm.profiles import PROFILES

#: the fields a stage's own options may set; every other option has one default for every command
STAGE_TUNED = ("max_tokens", "temperature")


@dataclass(frozen=True)
class Flag:
    """How one ClientOptions field is given on the command line."""

    name: str
    type: Callable[[str], Any] = str
    dest: str | None = None  # the Namespace attribute (default: the field's name)
    choices: tuple[str, ...] | None = None
    negates: bool = False  # a ``--no-X`` switch that turns a boolean field off
    help: str | None = None  # instead of the field's description (a switch says what it does)
    #: what a stage-tuned flag holds when not given (SUPPRESS, no attribute, where None is a value it gives)
    unset: Any = None


FLAGS: dict[str, Flag] = {
    "max_tokens": Flag("--max-tokens", argtypes.positive_int),
    "temperature": Flag("--temperature", argtypes.temperature, unset=argparse.SUPPRESS),
    "seed": Flag("--seed", argtypes.seed),
    "concurrency": Flag("--concurrency", argtypes.positive_int),
    "http_workers": Flag("--http-workers", argtypes.non_negative_int),
    "rpm": Flag("--rpm", argtypes.positive_int),
    "tpm": Flag("--tpm", argtypes.positive_int),
    "timeout_s": Flag("--timeout", argtypes.positive_float, dest="timeout"),
    "deadline_s": Flag("--deadline", argtypes.positive_float, dest="deadline"),
    "max_cost": Flag("--max-cost", argtypes.usd),
    "cache": Flag("--no-cache", dest="no_cache", negates=True, help="bypass the response cache"),
    "provider": Flag("--provider", choices=tuple(sorted(PROFILES))),
    "provider_preset": Flag("--preset", dest="preset", choices=tuple(sorted(PRESETS))),
    "extra_body": Flag("--extra-body", argtypes.json_object),
}


def add_reports_dir(p: argparse.ArgumentParser, what: str = "where the report goes", *, written: bool = True) -> None:
    """The ``--reports-dir`` flag, one declaration for every command that writes or serves reports
    (``written``: a folder it writes into, refused by the parser when it is a file or cannot be made)."""
    p.add_argument("--reports-dir", default=None, type=argtypes.output_dir if written else argtypes.nonempty,
                   help=f"{what} (default: $CRESOWLVE_REPORTS_DIR or <project>/reports)")


#: a stage's own options, or a function giving them (looked up only when the help is shown or the
#: command runs: a stage's module may be slow to import)
Stage = ClientOptions | Callable[[], ClientOptions]


def stage_options(stage: Stage | None) -> ClientOptions:
    """The options ``stage`` stands for (None: ClientOptions())."""
    return stage() if callable(stage) else stage or ClientOptions()


@dataclass(frozen=True)
class StageValue:
    """One field's value in a stage's options, as the help shows it (``%(stage_value)s``)."""

    stage: Stage | None
    field: str

    def __str__(self) -> str:
        value = getattr(stage_options(self.stage), self.field)
        return "none" if value is None else str(value)


def add_client_options(p: argparse.ArgumentParser, *fields: str, stage: Stage | None = None,
                       help: dict[str, str] | None = None) -> None:
    """Add the flags of ``fields`` (ClientOptions field names) to ``p``, in that order.

    ``stage``: the stage's own options (default: ClientOptions()); they may differ from the defaults
    only in :data:`STAGE_TUNED` fields (``tests/test_cli_options.py`` checks every command), whose
    help then shows the stage's value. ``help``: a field's help where the command gives the option a
    wider meaning (a seed that also draws samples)."""
    for name in fields:
        flag, field = FLAGS[name], ClientOptions.model_fields[name]
        dest = flag.dest or name
        text = (help or {}).get(name) or flag.help or field.description or ""
        if name in STAGE_TUNED:
            action = p.add_argument(flag.name, dest=dest, type=flag.type, default=flag.unset,
                                    help=f"{text} (default: %(stage_value)s)")
            setattr(action, "stage_value", StageValue(stage, name))  # noqa: B010 (argparse expands it)
        elif flag.negates:
            p.add_argument(flag.name, dest=dest, action="store_true", help=text)
        else:  # the formatter shows the default; a field made by a factory (extra_body) has none to show
            default = None if field.default_factory is not None else field.default
            p.add_argument(flag.name, dest=dest, type=flag.type, choices=flag.choices, default=default, help=text)


def client_options(a: argparse.Namespace, stage: Stage | None = None) -> ClientOptions:
    """The stage's options (default: ClientOptions()) with every client flag ``a`` holds on top
    (a stage-tuned one only when it was given)."""
    given, update = vars(a), {}
    for name, flag in FLAGS.items():
        dest = flag.dest or name
        if dest not in given or (name in STAGE_TUNED and given[dest] is flag.unset):
            continue
        if flag.negates:
            update[name] = not given[dest]
        elif given[dest] is not None or ClientOptions.model_fields[name].default_factory is None:
            update[name] = given[dest]  # (no --extra-body keeps the stage's {})
    return ClientOptions.model_validate({**stage_options(stage).model_dump(), **update})
