"""``cresowlve serve-local``: the embedded Gemma 3 270M as a local OpenAI-compatible server."""

from __future__ import annotations

import argparse
import time
from typing import Any

from cresowlve_core import argtypes
from cresowlve_core.cli.common import _port_in_use, _usage_error
from cresowlve_core.llm.local import DEFAULT_PORT
from cresowlve_core.llm.profiles import EMBEDDED_SLOTS


def cmd_serve_local(a: argparse.Namespace) -> int:
    from cresowlve_core.llm.local import LocalServer
    from cresowlve_core.runtime import stop

    if (busy := _port_in_use(a.port)) is not None:
        return _usage_error(busy)
    server = LocalServer(port=a.port, n_parallel=a.parallel)
    with server:
        print(f"serving {server.model} at {server.base_url}  (Ctrl-C to stop)\n"
              f"a base model: name it with --provider embedded (few-shot completion prompts; docs/llm.md)",
              flush=True)
        while stop.requested() is None:  # Ctrl-C or SIGTERM (runtime/stop.py)
            time.sleep(0.2)
    print("stopped", flush=True)
    return 0


def add_serve_local_parser(sub: Any) -> None:
    """Register ``cresowlve serve-local``."""
    p = sub.add_parser("serve-local", help="serve the embedded Gemma 3 270M on 127.0.0.1")
    p.add_argument("--port", type=argtypes.port, default=DEFAULT_PORT, help="TCP port on 127.0.0.1")
    p.add_argument("--parallel", type=argtypes.positive_int, default=EMBEDDED_SLOTS, help="requests decoded at once")
    p.set_defaults(fn=cmd_serve_local)
