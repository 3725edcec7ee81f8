"""Values a notebook records for tests and the reports index, readable back from the executed notebook.

``record("key", value)`` inside a notebook stores a JSON value as an invisible output (mimetype
:data:`RECORD_MIME`); :func:`read_records` reads them back. Kept apart from :mod:`cresowlve_core.notebooks`
(which renders reports and needs the banners) so that :mod:`cresowlve_core.banners` can record the
banners it shows without an import cycle. Import these from ``cresowlve_core.notebooks`` in notebooks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORD_MIME = "application/vnd.cresowlve.record+json"


def in_ipython_kernel() -> bool:
    """True inside a Jupyter kernel (JupyterLab, papermill, nbval); False under marimo or plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def record(key: str, value: Any) -> Any:
    """Store a JSON-serialisable value under ``key`` in the notebook output and return it.

    In Jupyter the output is invisible (an empty ``text/plain`` beside the record mimetype); under
    marimo or plain Python nothing is displayed at all.
    """
    json.dumps(value)  # fail loudly, here, on values tests could not read back
    if in_ipython_kernel():
        from IPython.display import display

        display({RECORD_MIME: {key: value}, "text/plain": ""}, raw=True)
    return value


def headline(text: str) -> str:
    """The report's one-line result, shown on the index page (``record("headline", text)``)."""
    return record("headline", text)


def read_records(ipynb: str | Path) -> dict[str, Any]:
    """Every value stored with :func:`record` in an executed notebook (later keys win)."""
    nb = json.loads(Path(ipynb).read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if RECORD_MIME in data:
                out.update(data[RECORD_MIME])
    return out
