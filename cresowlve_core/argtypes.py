"""``argparse`` argument types shared by ``cresowlve`` and every stage's command module.

Each one checks a value and raises :class:`argparse.ArgumentTypeError` with a one-line reason, so a bad
argument is refused (exit code 2) before any work. Below :mod:`cresowlve_core.cli` and the stages, so a
stage can check a value the same way the command line does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cresowlve_core.jsontext import non_finite_at
from cresowlve_core.text import MAX_SLUG


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0)


#: the largest seed: providers take a signed 64-bit one (vLLM refuses a larger one with a 400)
MAX_SEED = 2**63 - 1


def seed(text: str) -> int:
    """A seed, 0 .. :data:`MAX_SEED`: sent to the provider and also the seed of the stage's own draws
    (numpy's generators refuse a negative one)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer 0..2**63-1, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port 1-65535, got {value}")
    return value


def finite_float(text: str, *, minimum: float = 0.0, strict: bool = False) -> float:
    """A finite number >= ``minimum`` (> it when ``strict``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text!r}")
    return value


def temperature(text: str) -> float | None:
    """A sampling temperature >= 0, or ``default``: send none (the provider's default decoding)."""
    if text.strip().lower() == "default":
        return None  # sent as nothing: the provider's default decoding
    return finite_float(text)


def fraction(text: str) -> float:
    """A fraction, 0 to 1 inclusive."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # nan and inf too
        raise argparse.ArgumentTypeError(f"must be a fraction 0..1, got {text!r}")
    return value


def usd(text: str) -> float:
    """An amount in USD > 0 (``--max-cost``)."""
    return finite_float(text, strict=True)


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = finite_float(text, strict=True)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text!r}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line, e.g. ``'{"top_p": 0.95}'``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg.removesuffix(' at')} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"top_p\": 0.95}'")
    if (at := non_finite_at(value)) is not None:  # Python's reader takes NaN, Infinity and 1e999; JSON has none
        raise argparse.ArgumentTypeError(f"{at}: must be a finite number (NaN and Infinity are not JSON)")
    return value


#: the API paths the client appends to a base URL (llm/openai_wire.py)
API_PATHS = ("/chat/completions", "/completions", "/responses")


def http_url(text: str) -> str:
    """An http(s) URL with a host (never echoed with its credentials), and a base URL: not one ending
    in an API path, which the client would append a second time."""
    from cresowlve_core.secrets import strip_url_credentials

    try:
        parts = urlsplit(text.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (a port that is not a number 0-65535 raises ValueError when read)
    except ValueError:
        ok = False
    ok = ok and not any(c.isspace() for c in text.strip())  # a host or path with a space is no URL a server takes
    if not ok:
        raise argparse.ArgumentTypeError(
            f"must be an http(s) URL such as https://api.openai.com/v1, got {strip_url_credentials(text)!r}")
    if api_path := next((p for p in API_PATHS if parts.path.rstrip("/").endswith(p)), None):
        base = strip_url_credentials(urlunsplit(parts._replace(path=parts.path.rstrip("/")[: -len(api_path)])))
        raise argparse.ArgumentTypeError(
            f"must be the base URL without the API path {api_path} (appended to every request), e.g. {base}")
    return text.strip()


def env_name(text: str) -> str:
    """The NAME of an environment variable; a value that looks like a key itself is refused, unrepeated."""
    from cresowlve_core.secrets import looks_like_key

    if looks_like_key(text):  # never repeat it: it is probably the key itself
        raise argparse.ArgumentTypeError(
            f"takes the NAME of an environment variable (e.g. OPENAI_API_KEY), not the key; the value given "
            f"({len(text)} characters) looks like a key and was not used")
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text.strip()


def nonempty(text: str) -> str:
    """Any text that is not blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def model_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a model's name, or None: blank, white space around it, or a character that
    prints as nothing or moves the text (a line break, a tab, an escape, a zero-width or bidirectional mark).
    It is sent in every request and is the label of every record, table and report: a provider knows no
    such name, and the label would not show what was sent."""
    if not name.strip():
        return "must not be empty"
    if bad := next((ch for ch in name if not ch.isprintable()), None):
        return f"must be printable text: U+{ord(bad):04X} at position {name.index(bad) + 1} of {name!r}"
    if name != name.strip():
        return f"must not begin or end with white space ({name!r})"
    return None


def model_name(text: str) -> str:
    """A model's name (:func:`model_name_problem`)."""
    if (problem := model_name_problem(text)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


#: the longest report name: its staging folder (``.render-STEM-xxxxxxxx``) and its exports (``STEM_table1.csv``)
#: must fit the 255 bytes of a file name (the slugs' limit)
MAX_FILE_STEM = MAX_SLUG


def file_stem(text: str) -> str:
    """A file name without folder or suffix (a report's name): letters, digits, ``.``, ``_`` and ``-``, at most
    :data:`MAX_FILE_STEM` of them."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a file name: use letters, digits, '.', '_' and '-'")
    if len(text) > MAX_FILE_STEM:
        raise argparse.ArgumentTypeError(f"a name of {len(text)} characters is too long for its files: at most "
                                         f"{MAX_FILE_STEM}")
    return text


def run_dir(text: str) -> str:
    """A usable run directory path, checked without creating anything."""
    return _usable_dir(text, "a run directory")


def output_dir(text: str) -> str:
    """A usable folder to write into (reports, a build), checked without creating anything."""
    return _usable_dir(text, "a directory")


def _usable_dir(text: str, what: str) -> str:
    """``text`` when it names ``what`` that exists or can be created and written."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a file, not {what}")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {path}: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {path}: {existing} is not writable")
    return text


def role_args(p: argparse.ArgumentParser, role: str, what: str) -> None:
    """The three flags of a command's model role: ``--ROLE-model``, ``--ROLE-base-url``, ``--ROLE-api-key-env``
    (``what`` names the role in their help)."""
    p.add_argument(f"--{role}-model", default=None, type=model_name, help=f"{what} model name (required with --{role}-base-url)")
    p.add_argument(f"--{role}-base-url", default=None, type=http_url,
                   help=f"{what}'s OpenAI-compatible base URL (default: the embedded Gemma 3 270M: demo only)")
    p.add_argument(f"--{role}-api-key-env", default=None, type=env_name,
                   help=f"NAME of the environment variable holding the {what}'s key")
