"""The one JSON writer of the project: every file it writes (JSON Lines through
:mod:`cresowlve_core.jsonl`, whole JSON files through :mod:`cresowlve_core.outfiles`, the response
cache, the reports index) is JSON text made here.

A float that is not finite (``NaN``, ``Infinity``) is written as ``null`` (unknown), and
``allow_nan=False`` guarantees that no file holds ``NaN`` or ``Infinity``, which strict JSON readers
(pandas with pyarrow, JavaScript, ``jq``) refuse. numpy scalars and arrays are written as their
Python values; anything else JSON cannot hold (paths, dates) as ``str``.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by ``None``, at any depth (tuples
    become lists, as JSON writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def non_finite_at(value: Any, where: str = "") -> str | None:
    """Where in ``value`` the first float that is not finite is (``top_p``, ``a.b[2]``; ``value`` for the
    value itself), or None: what is sent to a provider must be strict JSON, which has no NaN or Infinity."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "value")
    if isinstance(value, dict):
        items: Any = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((at for key, v in items if (at := non_finite_at(v, key)) is not None), None)


def _default(value: Any) -> Any:
    """Values JSON cannot hold: numpy scalars and arrays as their Python values, others (paths,
    dates) as ``str``."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return finite(tolist())
        except (TypeError, ValueError):
            pass
    return str(value)


#: the encoder of the default form (one line, keys in their order), made once: ``json.dumps`` with
#: these options would make a new ``JSONEncoder`` on every call
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_default, allow_nan=False)


def dumps(data: Any, *, indent: int | None = None, sort_keys: bool = False,
          separators: tuple[str, str] | None = None) -> str:
    """The project's JSON text of ``data``: UTF-8 kept, non-finite floats as ``null``, other
    values as ``str``; ``NaN`` and ``Infinity`` can never come out (``allow_nan=False``).

    Almost every value holds no such float, so it is encoded as it is first; only when the encoder
    refuses a non-finite float (``ValueError``) is the value walked by :func:`finite` and encoded again."""
    try:
        if indent is None and not sort_keys and separators is None:
            return _ENCODER.encode(data)
        return json.dumps(data, ensure_ascii=False, default=_default, allow_nan=False, indent=indent,
                          sort_keys=sort_keys, separators=separators)
    except ValueError:
        return json.dumps(finite(data), ensure_ascii=False, default=_default, allow_nan=False, indent=indent,
                          sort_keys=sort_keys, separators=separators)
