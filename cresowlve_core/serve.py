"""``cresowlve serve-reports``: the reports folder over HTTP on 127.0.0.1, and nothing else.

- Only regular files whose resolved path lies inside the reports folder are served: symlinks pointing
  out of the folder get 403; ``..`` (also encoded, ``%2e%2e``) is dropped from the path by
  ``translate_path``, so it names a file inside the folder or nothing (404), as anything else missing;
  a directory is served as its ``index.html`` (no listings).
- Only requests whose ``Host`` header is ``127.0.0.1:PORT`` or ``localhost:PORT`` are answered (403
  otherwise), so a web page elsewhere cannot read the reports through DNS rebinding.
- The server binds 127.0.0.1.
"""

from __future__ import annotations

import http.server
import os
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


class ReportsHandler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler restricted to the files of one folder and to loopback Host names."""

    root: Path  # the resolved reports folder
    allowed_hosts: frozenset[str]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # quiet: the terminal shows the one "serving ..." line

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "not found")
        return None

    def send_head(self) -> Any:
        if self.headers.get("Host", "").strip().lower() not in self.allowed_hosts:
            self.send_error(403, "unknown Host header (use http://127.0.0.1:PORT/ or http://localhost:PORT/)")
            return None
        try:
            resolved, is_file = self._resolve(Path(self.translate_path(self.path)))
        except (ValueError, OSError, RuntimeError):  # a NUL byte (%00), a name too long, a symlink loop
            self.send_error(404, "not found")
            return None
        if not resolved.is_relative_to(self.root):
            self.send_error(403, "outside the reports folder")
            return None
        if not is_file:
            self.send_error(404, "not found")
            return None
        return super().send_head()

    @staticmethod
    def _resolve(target: Path) -> tuple[Path, bool]:
        """The file a request path names (a directory's ``index.html``), resolved, and whether it is a regular file."""
        if target.is_dir():
            target = target / "index.html"
        resolved = target.resolve()
        return resolved, resolved.is_file()


def make_server(directory: Path, port: int) -> http.server.ThreadingHTTPServer:
    """A server for ``directory`` bound to 127.0.0.1:``port`` (0: any free port), not yet serving."""
    root = Path(directory).resolve()
    hosts: set[str] = set()  # filled once the port is bound (port 0 picks one)

    class Handler(ReportsHandler):
        def __init__(self, *args: Any) -> None:
            self.root, self.allowed_hosts = root, frozenset(hosts)
            super().__init__(*args, directory=str(root))

    httpd = http.server.ThreadingHTTPServer((HOST, port), Handler)
    bound = httpd.server_address[1]
    hosts.update({f"127.0.0.1:{bound}", f"localhost:{bound}"})
    return httpd
