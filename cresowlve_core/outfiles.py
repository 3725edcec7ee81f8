"""Whole files a run writes (manifests, summaries, configs, build records, data cards, grid files).

Every writer here goes through :func:`cresowlve_core.secrets.scrub`, the redaction choke point:
known key values and every URL's credentials (``user:pass@``, ``?api-key=``...) are removed
before a byte reaches disk. Files are written atomically (a temporary file, fsynced, renamed), so
a kill or a full disk leaves the old file or the new one, never half of one. JSON Lines go through
:func:`cresowlve_core.jsonl.write_jsonl`, which scrubs the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cresowlve_core.failures import failed_write
from cresowlve_core.jsontext import dumps
from cresowlve_core.secrets import scrub


def write_text(path: str | Path, text: str, *, secrets: list[str] | None = None) -> Path:
    """Write ``text`` (scrubbed) to ``path`` atomically; ``secrets`` are further values to remove."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(scrub(text, secrets))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:  # name the file the user knows, not only the temporary one
            exc.filename = str(path)
        raise failed_write(exc, path)  # noqa: B904 (DiskFull on a full disk, caused by exc; else exc)
    return path


def dumps_json(data: Any) -> str:
    """The project's JSON file format: :func:`cresowlve_core.jsontext.dumps`, indented (never ``NaN``
    or ``Infinity``: a non-finite float is ``null``)."""
    return dumps(data, indent=2)


def write_json(path: str | Path, data: Any, *, secrets: list[str] | None = None) -> Path:
    """Write ``data`` as an indented JSON file (scrubbed, atomic)."""
    return write_text(path, dumps_json(data) + "\n", secrets=secrets)


def write_csv(path: str | Path, df: Any) -> Path:
    """Write a DataFrame as an export CSV (no index; scrubbed, atomic): every string cell and column
    name that a spreadsheet would read as a formula is written as text (``untrusted.csv_cell``)."""
    from cresowlve_core.untrusted import csv_frame

    return write_text(path, csv_frame(df).to_csv(index=False))
