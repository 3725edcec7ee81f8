"""What the command modules share: ``-p`` values, one-line errors, usage refusals, the port check."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

from cresowlve_core.exitcodes import EXIT_USAGE


def _parse_value(text: str) -> Any:
    """``-p key value``: JSON where it parses (numbers, lists, null, true), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _params(pairs: list[list[str]] | None) -> dict[str, Any]:
    return {k: _parse_value(v) for k, v in (pairs or [])}


def _one_line(exc: BaseException) -> str:
    """An exception as one line (pydantic errors as ``field: message; ...``)."""
    from pydantic import ValidationError

    from cresowlve_core.failures import DiskFull, WriteDenied, validation_problems

    if isinstance(exc, ValidationError):
        return validation_problems(exc)
    if isinstance(exc, (DiskFull, WriteDenied)):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return text or type(exc).__name__


def data_folder(value: str | None, name: str) -> Path:
    """A stage's ``--out-dir``: ``<data dir>/NAME`` when not given (where the apps look), a relative
    path against the current project, like ``--runs`` (not the working directory or the notebook's folder)."""
    from cresowlve_core import paths

    if not value:
        return paths.data_dir() / name
    p = Path(value).expanduser()
    return p if p.is_absolute() else paths.project_root() / p


def _unset_key_var(*names: str | None) -> str | None:
    """The first named API-key variable that is not set (checked before anything is created)."""
    return next((name for name in names if name and not os.environ.get(name)), None)


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _port_in_use(port: int) -> str | None:
    """Why ``port`` on 127.0.0.1 cannot be served (naming it and the way out), or None when it is free."""
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return f"port {port} on 127.0.0.1 is already in use; stop what serves it or choose another with --port"
    return None
