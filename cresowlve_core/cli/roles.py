"""What every command checks before anything starts (a role's model without its base URL, a key
variable that is not set), and ``--provider`` for every endpoint a stage command names."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cresowlve_core import argtypes
from cresowlve_core.cli.common import _unset_key_var
from cresowlve_core.cli.conventions import _subparsers
from cresowlve_core.llm.profiles import PROFILES


def unserved_role(a: argparse.Namespace) -> str | None:
    """Why the command is refused when one of its roles names a model without a base URL, or None.

    Every role's flags are named ``--ROLE-model``/``--ROLE-base-url`` (``--model``/``--base-url``
    for the command's own). A role with no base URL runs the embedded model, which must then not be
    filed under the model asked for; so a model named without one is refused before anything starts,
    unless the command gives that base URL a default (``base_url_defaults``: argument names, or
    environment variables in capitals). A base URL given without its role's model is refused too,
    naming the flags (the command's own model defaults are its to check)."""
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
    for dest, base_url in given.items():  # the converse: a base URL with no model to ask it for
        if not dest.endswith("base_url") or not isinstance(base_url, str) or not base_url or dest in defaults:
            continue  # a command that defaults a role's base URL resolves that role's model itself (eval)
        model_dest = f"{dest[: -len('base_url')]}model"
        if model_dest in given and not given[model_dest]:
            flag, model_flag = "--" + dest.replace("_", "-"), "--" + model_dest.replace("_", "-")
            return (f"{flag} is given without {model_flag}: name the model it serves (or give neither "
                    "for the embedded model); nothing was run")
    return None


def _is_http_url(value: str) -> bool:
    try:
        argtypes.http_url(value)
    except argparse.ArgumentTypeError:
        return False
    return True


def unset_role_key(a: argparse.Namespace) -> str | None:
    """Why the command is refused when a role served at a base URL names a key variable that is not
    set (``--ROLE-api-key-env``, ``--step-model``'s KEY_ENV), or gives what looks like the key itself
    instead of its variable's name, or None; checked before any model starts."""
    given = vars(a)
    named = [(f"--{dest.replace('_', '-')}", name) for dest, name in given.items()
             if dest.endswith("api_key_env") and isinstance(name, str) and name
             and given.get(f"{dest[: -len('api_key_env')]}base_url")]
    named += [(f"--step-model {step}", key) for step, _, url, key in given.get("step_model") or []
              if key and _is_http_url(url)]  # a bad BASE_URL is the command's own refusal
    for flag, name in named:
        try:
            argtypes.env_name(name)  # --step-model's KEY_ENV has no argparse type of its own
        except argparse.ArgumentTypeError as exc:  # never repeats a value that looks like the key itself
            return f"{flag}: KEY_ENV {exc}; nothing was run"
        if _unset_key_var(name) is not None:
            return f"environment variable {name!r} is not set ({flag}; it should hold the API key); nothing was run"
    return None


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
