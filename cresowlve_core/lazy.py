"""Package namespaces whose names are imported on first use (PEP 562), so that building the
command-line parser loads no heavy library (``cresowlve --help`` start-up time)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: name ``n`` is ``package.<where[n]>.n``,
    imported when first asked for and then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__


#: jsonschema (imported by altair, so by every report kernel) imports ``rfc3987_syntax`` for its
#: ``iri`` format checker when that package is installed (``jsonschema[format-nongpl]``, pulled in
#: by the Jupyter stack). That import builds about 35 Earley parsers: 1.7-2 s of CPU per process on
#: this machine, for a format no schema of ours (nor Vega-Lite's) uses. See python-jsonschema/
#: jsonschema#1428 and opendatahub-io/notebooks#3532. The checker keeps working: it loads the real
#: package on its first call.
DEFERRED_MODULE = "rfc3987_syntax"


def defer_rfc3987_syntax() -> bool:
    """Put a stand-in for ``rfc3987_syntax`` in ``sys.modules`` whose ``is_valid_syntax`` imports
    the real package on first use. No-op (False) when the package is absent or already imported."""
    import importlib.util
    import types

    if DEFERRED_MODULE in sys.modules or importlib.util.find_spec(DEFERRED_MODULE) is None:
        return False
    stand_in = types.ModuleType(DEFERRED_MODULE, "stand-in: the real module is imported on first use")
    real: list[Callable[..., bool]] = []

    def is_valid_syntax(term: str, value: str) -> bool:
        if not real:
            if sys.modules.get(DEFERRED_MODULE) is stand_in:
                del sys.modules[DEFERRED_MODULE]
            real.append(importlib.import_module(DEFERRED_MODULE).is_valid_syntax)
        return real[0](term, value)

    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules[DEFERRED_MODULE] = stand_in
    return True
