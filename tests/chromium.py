"""Headless Chromium driven over the DevTools protocol, shared by the browser tests
(``test_browser.py``: the HTML reports; ``test_jupyterlab.py``: the executed notebooks in JupyterLab).

``CHROMIUM`` is None when no Chromium is on PATH (the tests skip); ``websocket`` is None without
``websocket-client``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import websocket
except ImportError:  # the tests skip
    websocket = None

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def stop_process(proc: subprocess.Popen, wait_s: float) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited after ``wait_s`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Browser:
    """One headless Chromium driven over the DevTools protocol (one page, console collected)."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="cresowlve-chromium-")
        self.proc = subprocess.Popen(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             "--disable-quic", "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--allow-file-access-from-files",
             f"--user-data-dir={self.profile}", "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        port = self._devtools_port()
        deadline = time.monotonic() + 20
        while True:
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
                page = next(t for t in targets if t.get("type") == "page")
                break
            except (OSError, StopIteration):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self._id = 0
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.bindings: list[str] = []  # payloads of calls to functions added with add_binding
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)

    def _devtools_port(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                return int(m.group(1))
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("chromium did not start its DevTools endpoint")

    def _event(self, msg: dict[str, Any]) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "warning":
            self.warnings.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Runtime.bindingCalled":
            self.bindings.append(str(p.get("payload")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def add_binding(self, name: str) -> None:
        """A global function ``name(payload)`` in every page loaded from now on; each call is recorded
        in :attr:`bindings` (the canary test counts script executions with it)."""
        self.call("Runtime.addBinding", name=name)

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout_s: float = 60) -> None:
        """Navigate and wait (in real time) until the JS expression ``ready`` is true."""
        self.errors, self.warnings = [], []
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while not self.evaluate(f"Boolean({ready})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: not ready after {timeout_s}s ({ready})")
            time.sleep(0.25)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            stop_process(self.proc, wait_s=10)
            shutil.rmtree(self.profile, ignore_errors=True)


@contextlib.contextmanager
def marimo_run(app: Path, workdir: Path, args: list[str], timeout_s: float = 90) -> Iterator[str]:
    """``marimo run`` of a copy of ``app`` (marimo may write a session cache beside it) on a free
    loopback port with ``-- args``; yields its URL once it answers, stops it after the block."""
    import socket
    import sys

    copy = workdir / "app" / app.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(app, copy)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    marimo = Path(sys.executable).parent / "marimo"
    proc = subprocess.Popen([str(marimo), "run", str(copy), "--headless", "--no-token", "--host", "127.0.0.1",
                             "--port", str(port), "--", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(url, timeout=5)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("marimo run did not start") from None
                time.sleep(0.5)
        yield url
    finally:
        stop_process(proc, wait_s=10)


class JupyterLab:
    """A JupyterLab server on loopback serving ``root`` (no token, temporary settings, workspaces and
    runtime folders; notebooks render every cell, so every chart is drawn without scrolling)."""

    def __init__(self, root: Path) -> None:
        import socket
        import sys

        self.tmp = Path(tempfile.mkdtemp(prefix="cresowlve-jupyterlab-"))
        settings = self.tmp / "settings" / "@jupyterlab" / "notebook-extension"
        settings.mkdir(parents=True)
        (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        jupyter = Path(sys.executable).parent / "jupyter"
        env = {**__import__("os").environ, "JUPYTER_RUNTIME_DIR": str(self.tmp / "runtime"),
               "JUPYTER_CONFIG_DIR": str(self.tmp / "config")}
        self.proc = subprocess.Popen(
            [str(jupyter), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
             "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
             f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={self.tmp / 'settings'}",
             f"--LabApp.workspaces_dir={self.tmp / 'workspaces'}", "--LabApp.extension_manager=readonly",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--allow-root"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(self.url + "/api/status", timeout=5)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("jupyter lab did not start") from None
                time.sleep(0.5)

    def notebook_url(self, name: str, workspace: str) -> str:
        """The notebook opened in its own fresh workspace (``?reset`` drops any saved layout)."""
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset"

    def close(self) -> None:
        stop_process(self.proc, wait_s=20)
        shutil.rmtree(self.tmp, ignore_errors=True)


# Per Vega-Lite output of the open notebook: drew (a canvas/svg with marks of non-zero size) or not;
# and every "Javascript Error" JupyterLab printed in place of an output.
LAB_CHARTS_JS = """(() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)') || document;
  const charts = Array.from(panel.querySelectorAll('.jp-RenderedVegaCommon5')).map(div => {
    const g = div.querySelector('canvas.marks, svg.marks');
    const r = g ? g.getBoundingClientRect() : {width: 0, height: 0};
    return {kind: g ? g.tagName.toLowerCase() : null, width: r.width, height: r.height};
  });
  const errors = Array.from(panel.querySelectorAll('.jp-OutputArea pre'))
    .map(p => p.textContent).filter(t => t.startsWith('Javascript Error'));
  return {charts, errors, cells: panel.querySelectorAll('.jp-Cell').length};
})()"""


def lab_chart_outputs(ipynb: Path) -> int:
    """How many Vega-Lite outputs an executed notebook holds (what JupyterLab should draw)."""
    nb = json.loads(ipynb.read_text(encoding="utf-8"))
    return sum(1 for c in nb.get("cells", []) for o in c.get("outputs", [])
               if any(re.match(r"application/vnd\.vegalite\.v\d\+json$", k) for k in o.get("data", {})))


def lab_charts(browser: Browser, lab: JupyterLab, ipynb: Path, timeout_s: float = 120) -> dict[str, Any]:
    """Open one executed notebook in a fresh JupyterLab workspace and count the charts that drew.

    Returns ``{"expected", "drawn", "errors", "console"}``: Vega-Lite outputs in the file, charts with
    marks of non-zero size on the page, JupyterLab's "Javascript Error" outputs, console errors."""
    expected = lab_chart_outputs(ipynb)
    workspace = re.sub(r"[^A-Za-z0-9_-]", "-", ipynb.stem)
    browser.open(lab.notebook_url(ipynb.name, workspace),
                 ready="document.querySelector('.jp-NotebookPanel .jp-Cell') !== null", timeout_s=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        state = browser.evaluate(LAB_CHARTS_JS)
        drawn = sum(1 for c in state["charts"] if c["kind"] and c["width"] > 0 and c["height"] > 0)
        if drawn + len(state["errors"]) >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    time.sleep(1.0)  # late errors of the last chart
    state = browser.evaluate(LAB_CHARTS_JS)
    drawn = sum(1 for c in state["charts"] if c["kind"] and c["width"] > 0 and c["height"] > 0)
    console = [e for e in browser.errors if "'beforeunload'" not in e]  # leaving the previous lab page
    return {"expected": expected, "drawn": drawn, "errors": state["errors"], "console": console}
