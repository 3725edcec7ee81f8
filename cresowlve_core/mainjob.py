"""``cresowlve run``: the main job.

1. renders the data overview;
2. evaluates the demo items in English and Russian (notebook ``02_evaluation``, one report per
   language) — on the provider named by ``CRESOWLVE_BASE_URL``/``CRESOWLVE_MODEL`` if set, else
   on the embedded Gemma 3 270M, which it starts and stops itself;
3. renders the analysis of those runs and the CREATE report (recorded leaderboard plus a few
   queries generated and scored end to end by the same model); then (not with ``quick``) the same
   analysis on a paper-scale *synthetic* run set, behind its banner, to show a full report;
4. leaves ``reports/index.html`` linking everything.

The notebooks render one after the other in one child process (:class:`Renderer`). The first Ctrl-C
or SIGTERM (:mod:`~cresowlve_core.runtime.stop`) stops the notebook being rendered (its kernel is shut
down by the child), skips the rest, prints which reports were written and raises
:class:`MainJobInterrupted` (``cresowlve run`` exits 130/143). In-process, papermill's kernel client
would replace the process's SIGINT/SIGTERM handlers.

The judge is explicit: ``CRESOWLVE_JUDGE_MODEL`` (and ``CRESOWLVE_JUDGE_BASE_URL``,
``CRESOWLVE_JUDGE_API_KEY_ENV``) when set; on the embedded default the same local model judges,
which the reports state plainly. There is no hidden default judge.

The embedded Gemma 3 270M is a base model: its server marks its endpoint with the ``embedded``
provider profile, so every stage sends it few-shot completion prompts (``llm/base_model.py``).

Re-running resumes: each demo run is checked with the very :class:`EvalConfig` the notebook will
run (:func:`demo_config`); it is archived to ``data/runs/archive/`` only when that configuration
really changed, and the job says for each run how much is left to send. Every other stage's run
directory (error labels, contamination, construction steps, CREATE, synthetic) does the same: the
notebooks render with ``CRESOWLVE_ARCHIVE_CHANGED=1``, so a run of another configuration is moved to
its ``archive/`` folder and run afresh (:meth:`~cresowlve_core.runtime.RunDir.begin`), never refused. On the embedded model the
last lines say how many tokens the server computed (0 on a re-run that had nothing to send).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cresowlve_core import notebook_progress, paths
from cresowlve_core.failures import IncompleteError, InputError
from cresowlve_core.runtime import stop
from cresowlve_core.runtime.rundir import ARCHIVE_CHANGED_ENV
from cresowlve_core.text import slug


class MainJobInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the main job: ``written`` reports exist, ``current`` was stopped."""

    def __init__(self, written: list[str], current: str):
        super().__init__(f"stopped during {current} after {len(written)} report(s)")
        self.written, self.current = written, current


_RENDER = """
import json, os, signal, sys
from pathlib import Path
from cresowlve_core.notebooks import run_notebook
given_sigint = signal.getsignal(signal.SIGINT)
while True:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # idle: a Ctrl-C at the terminal is the main job's to handle
    line = sys.stdin.readline()
    if not line:
        break
    spec = json.loads(line)
    os.environ.clear()
    os.environ.update(spec["env"])
    os.chdir(spec["cwd"])
    signal.signal(signal.SIGINT, given_sigint)
    res = run_notebook(spec["name"], spec["params"], Path(spec["reports"]), output_name=spec["output_name"],
                       title=spec["title"], progress_every_s=spec["progress_every_s"])
    print("RENDERED " + json.dumps({"html": str(res.html), "seconds": res.seconds}), flush=True)
"""


PROGRESS_EVERY_S = notebook_progress.PROGRESS_EVERY_S  # which report is rendering and its cells done of cells


class Renderer:
    """One child process that renders notebooks with ``run_notebook``, one after the other, so the
    imports of papermill and nbconvert are paid once per main job, not once per report. Each render
    runs with the environment and working directory this process has when it asks for it (the
    embedded model's provider entry, set after the first report, reaches every later one).

    A stop requested during a render sends the child SIGTERM (papermill's kernel client there shuts
    its kernel down) and raises :class:`KeyboardInterrupt`; a failed render ends the child (its
    traceback is printed) and raises :class:`IncompleteError`. Between renders the child ignores
    SIGINT: a Ctrl-C at the terminal reaches the main job, which skips the rest."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _child(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-c", _RENDER], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True)
            self._lines = queue.Queue()
            threading.Thread(target=self._read, args=(self._proc, self._lines), daemon=True).start()
        return self._proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # the child closed its output: it has exited

    def render(self, name: str, params: dict[str, Any], reports: Path, output_name: str | None = None,
               title: str | None = None) -> Path:
        """``run_notebook`` in the child; the path of the report's HTML page."""
        # the main job's own run directories follow its configuration: one of another configuration (a new
        # prompt version, another model) is archived and run afresh, not refused (runtime/rundir.py)
        spec = json.dumps({"name": name, "params": params, "reports": str(reports), "output_name": output_name,
                           "title": title, "progress_every_s": PROGRESS_EVERY_S,
                           "env": {**os.environ, ARCHIVE_CHANGED_ENV: "1"}, "cwd": os.getcwd()}, default=str)
        proc = self._child()
        assert proc.stdin is not None
        try:
            proc.stdin.write(spec + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child died: said below, with its exit code
        while True:
            try:
                line = self._lines.get(timeout=0.2)
            except queue.Empty:
                if stop.requested() is not None:
                    self._end(signal.SIGTERM)
                    raise KeyboardInterrupt from None
                continue
            if line is None:
                self._end()
                if stop.requested() is not None:  # the signal reached the child too (Ctrl-C at a terminal)
                    raise KeyboardInterrupt
                raise IncompleteError(f"rendering {name} failed (exit {proc.returncode}); its error is printed above")
            if line.startswith("RENDERED "):
                return Path(json.loads(line[len("RENDERED "):])["html"])

    def _end(self, signum: int | None = None) -> None:
        """Stop the child (SIGTERM first when ``signum`` says so) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # end of requests: an idle child exits
        if signum is not None and proc.poll() is None:
            proc.send_signal(signum)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        """No more renders: the child exits."""
        self._end()


@dataclass(frozen=True)
class Target:
    model: str
    base_url: str
    api_key_env: str | None
    judge_model: str | None
    judge_base_url: str | None
    judge_api_key_env: str | None
    local: bool


#: the variables that configure the demo runs' judge (the main job's ``--judge-*``)
JUDGE_ENV = ("CRESOWLVE_JUDGE_MODEL", "CRESOWLVE_JUDGE_BASE_URL", "CRESOWLVE_JUDGE_API_KEY_ENV")


def check_target_env() -> tuple[str | None, str | None]:
    """``(CRESOWLVE_BASE_URL, CRESOWLVE_MODEL)``; a model (or judge) named without a base URL, a
    base URL without a model, and a judge's variables without a provider or without
    ``CRESOWLVE_JUDGE_MODEL`` are refused (ValueError): the embedded model runs only when none is named."""
    from cresowlve_core.llm import profiles
    from cresowlve_core.runtime import check_served

    try:  # every stage's endpoints read it, the embedded model's too
        profiles.check_env()
    except profiles.UnknownProvider as exc:
        raise InputError(f"{exc}; nothing was run") from None
    base_url, model = os.environ.get("CRESOWLVE_BASE_URL"), os.environ.get("CRESOWLVE_MODEL")
    check_served(model, base_url, "CRESOWLVE_BASE_URL")
    check_served(os.environ.get("CRESOWLVE_JUDGE_MODEL"), os.environ.get("CRESOWLVE_JUDGE_BASE_URL") or base_url,
                 "CRESOWLVE_BASE_URL (or CRESOWLVE_JUDGE_BASE_URL)")
    if base_url and not model:
        raise InputError("CRESOWLVE_BASE_URL is set without CRESOWLVE_MODEL: name the model it serves "
                         "(or unset both for the embedded model); nothing was run")
    judge_vars = [var for var in JUDGE_ENV if os.environ.get(var)]
    if judge_vars and not base_url:  # on the embedded model, the embedded model judges: these would be ignored
        raise InputError(f"{', '.join(judge_vars)} set{'s' if len(judge_vars) == 1 else ''} the judge, and no "
                         "provider is configured: set CRESOWLVE_BASE_URL and CRESOWLVE_MODEL too (or unset them "
                         "for the embedded model, which judges itself); nothing was run")
    if base_url:  # a provider's endpoints and keys, checked as `cresowlve eval` checks its flags
        _check_endpoint_env()
    if judge_vars and not os.environ.get("CRESOWLVE_JUDGE_MODEL"):
        raise InputError(f"{', '.join(judge_vars)} set{'s' if len(judge_vars) == 1 else ''} the judge, and there "
                         "is no judge: set CRESOWLVE_JUDGE_MODEL; nothing was run")
    return base_url, model


def _check_endpoint_env() -> None:
    """Refuse (InputError) a blank model variable, a base URL variable that is not a base URL, and a key
    variable that names no set variable (requests would go without a key)."""
    import argparse

    from cresowlve_core import argtypes

    for var, check in (("CRESOWLVE_MODEL", argtypes.model_name), ("CRESOWLVE_JUDGE_MODEL", argtypes.model_name),
                       ("CRESOWLVE_BASE_URL", argtypes.http_url), ("CRESOWLVE_JUDGE_BASE_URL", argtypes.http_url),
                       ("CRESOWLVE_API_KEY_ENV", argtypes.env_name), ("CRESOWLVE_JUDGE_API_KEY_ENV", argtypes.env_name)):
        if value := os.environ.get(var):
            try:
                name = check(value)
            except argparse.ArgumentTypeError as exc:
                raise InputError(f"{var}: {exc}; nothing was run") from None
            if var.endswith("_KEY_ENV") and not os.environ.get(name):
                raise InputError(f"environment variable {name!r} is not set ({var}; it should hold the API key); "
                                 "nothing was run")


@contextlib.contextmanager
def target_from_env() -> Iterator[Target]:
    """The provider configured in the environment, or the embedded model for the block's duration."""
    base_url, model = check_target_env()
    if base_url and model:
        yield Target(
            model, base_url, os.environ.get("CRESOWLVE_API_KEY_ENV"),
            os.environ.get("CRESOWLVE_JUDGE_MODEL"), os.environ.get("CRESOWLVE_JUDGE_BASE_URL"),
            os.environ.get("CRESOWLVE_JUDGE_API_KEY_ENV"), local=False,
        )
        return
    from cresowlve_core.llm.local import local_server

    print("no provider configured (CRESOWLVE_BASE_URL/CRESOWLVE_MODEL): starting the embedded Gemma 3 270M", flush=True)
    with local_server() as srv:
        before = srv.counters()
        yield Target(srv.model, srv.base_url, None, srv.model, srv.base_url, None, local=True)
        after = srv.counters()
        if after:
            computed = {k: int(after.get(k, 0) - before.get(k, 0)) for k in ("prompt_tokens_total", "tokens_predicted_total")}
            print(f"embedded model: {computed['prompt_tokens_total']} prompt tokens read and "
                  f"{computed['tokens_predicted_total']} tokens generated in this run"
                  + (" (nothing was sent: every answer came from the run directories and the response cache)"
                     if not any(computed.values()) else ""), flush=True)


def demo_params(tgt: Target, lang: str, run_dir: Path, quick: bool) -> dict[str, Any]:
    """Every parameter of the ``02_evaluation`` notebook for one demo run, the defaults included,
    so that :func:`demo_config` and the notebook build the same configuration.
    ``docs/llm.md`` ("A main-job evaluation run by hand") shows the same settings as one ``cresowlve eval`` command."""
    return {
        "items": "demo", "lang": lang, "model": tgt.model, "base_url": tgt.base_url,
        "api_key_env": tgt.api_key_env, "judge_model": tgt.judge_model,
        "judge_base_url": tgt.judge_base_url, "judge_api_key_env": tgt.judge_api_key_env,
        "run_dir": str(run_dir), "limit": 3 if quick else None, "seed": 0, "temperature": 0.0,
        # the 270M base model answers one line of a few-shot prompt: keep its budgets small
        "max_tokens": 256 if tgt.local else 4096,
        "judge_max_tokens": 96 if tgt.local else 512,
    }


def demo_config(params: dict[str, Any]) -> Any:
    """The :class:`~cresowlve_core.evaluation.runner.EvalConfig` the notebook runs with ``params``."""
    from cresowlve_core.evaluation.notebook_run import config

    return config(**params)


def prepare_demo_run(params: dict[str, Any], archive: Path) -> str:
    """Check a demo run directory against the configuration the run will use: archive it only when that
    configuration changed (a new prompt version, another model...); return a line saying what happens."""
    from cresowlve_core.evaluation.runner import incompatible_run

    cfg = demo_config(params)
    run_dir = Path(cfg.run_dir)
    reason = incompatible_run(cfg)
    moved = ""
    if reason:
        archive.mkdir(parents=True, exist_ok=True)
        dest = archive / f"{run_dir.name}-{time.strftime('%Y%m%dT%H%M%S')}"
        shutil.move(str(run_dir), dest)
        moved = f"; moved the old run to {dest} ({reason.split(';')[0]})"
    todo, planned = pending(cfg)
    state = "new" if not run_dir.is_dir() else "resumed" if todo else "complete"
    return f"  demo run {run_dir.name}: {state}, {todo} of {planned} items to send{moved or '; nothing archived'}"


def pending(cfg: Any) -> tuple[int, int]:
    """(items still to answer or judge, items planned) of a demo run, from its run directory."""
    from cresowlve_core.evaluation.runner import load_eval_items, needs_judge, record_key
    from cresowlve_core.runtime import RESPONSES, RunDir

    items = load_eval_items(cfg)
    latest = RunDir(cfg.run_dir).latest(RESPONSES, record_key) if Path(cfg.run_dir).is_dir() else {}

    def done(rec: dict[str, Any] | None) -> bool:
        return bool(rec) and rec.get("status") == "ok" and not (cfg.judge_model and needs_judge(rec))  # type: ignore[union-attr]

    return sum(not done(latest.get((it.id, cfg.lang))) for it in items), len(items)


SYNTHETIC_SCALE: dict[str, Any] = {"n_items": 2061, "configs": 18, "seed": 0}
"""The paper-scale synthetic run set of ``bench/analysis.py`` (74,196 records, about 50 MB)."""


def _synthetic_report(report, synthetic_runs: Path, reports: Path) -> None:
    """``03_analysis_synthetic``: the full analysis on 18 configurations × 2 languages of random,
    clearly bannered data, so every section of the report can be seen filled in."""
    from cresowlve_core.analysis import write_synthetic_runs

    if not any(synthetic_runs.glob("*/responses.jsonl")):
        write_synthetic_runs(synthetic_runs, **SYNTHETIC_SCALE)
    # its exports are named after the report (03_analysis_synthetic_table1.*): the real analysis's stay untouched
    report("03_analysis", {"runs": str(synthetic_runs / "*")},
           output_name="03_analysis_synthetic",
           title="SYNTHETIC DATA: the full analysis at paper scale (random numbers, not results)")


def main_job(reports_dir: Path | None = None, quick: bool = False, runs_dir: Path | None = None) -> list[Path]:
    """Run the main job; ``runs_dir`` (default ``data/runs``) receives the run directories."""
    reports = Path(reports_dir or paths.reports_dir())
    runs = Path(runs_dir or paths.runs_dir())
    demo_runs = runs / "demo"
    produced: list[Path] = []
    t0 = time.monotonic()
    check_target_env()  # refused before the first report

    renderer = Renderer()

    def report(name: str, params: dict, output_name: str | None = None, title: str | None = None) -> None:
        t = time.monotonic()
        current = output_name or name
        try:
            if stop.requested() is not None:  # stopped between two reports: skip the rest
                raise KeyboardInterrupt
            html = renderer.render(name, params, reports, output_name=output_name, title=title)
        except KeyboardInterrupt:
            written = [p.name for p in produced]
            print(f"main job interrupted during {current}: {len(written)} report(s) written "
                  f"({', '.join(written) or 'none'}); the rest were skipped; open {reports / 'index.html'}",
                  flush=True)
            raise MainJobInterrupted(written, current) from None
        produced.append(html)
        print(f"  {html.name:<28} {time.monotonic() - t:6.1f}s", flush=True)

    with renderer:  # the child exits when the job ends, however it ends
        report("00_data_overview", {})
        with target_from_env() as tgt:
            for lang in ("en", "ru"):
                params = demo_params(tgt, lang, demo_runs / f"{slug(tgt.model)}__{lang}", quick)
                print(prepare_demo_run(params, runs / "archive"), flush=True)
                report(
                    "02_evaluation",
                    params,
                    output_name=f"02_evaluation_{lang}",
                    title=f"Evaluation of {tgt.model} on the demo items ({lang.upper()})",
                )
            report("03_analysis", {"runs": str(demo_runs / "*")}, output_name="03_analysis")  # exports: the reports dir
            small = tgt.local  # the 270M base model rambles to any limit: keep its budgets and samples small
            role = {"model": tgt.model, "base_url": tgt.base_url, "api_key_env": tgt.api_key_env}

            def roles(*names: str) -> dict[str, Any]:
                return {f"{name}_{k}": v for name in names for k, v in role.items()}

            report("04_error_analysis", {
                "runs": str(demo_runs / "*"), "out_dir": str(runs / "errors" / slug(tgt.model)), "make_demo": False,
                "embedded": small, "limit": 3 if small else None, "max_tokens": 64 if small else 512,
                **roles("labeller")})
            report("05_contamination", {
                "runs": str(demo_runs / "*"), "out_dir": str(runs / "contamination" / slug(tgt.model)),
                "make_demo": False, "embedded": small, "max_items_per_set": 2 if small else None,
                "max_tokens": 96 if small else 512, **roles("perturber", "quiz")})
            report("01_construction", {
                **role, "embedded": small, "name": f"demo-{slug(tgt.model)}", "limit": 2 if quick else 3})
            report("07_create", {
                "local_base_url": tgt.base_url, "local_model": tgt.model, "local_api_key_env": tgt.api_key_env,
                "n_local_queries": 1 if quick else 3, **({"local_max_tokens": 128} if small else {}),
                "local_run_dir": str(runs / "create" / slug(tgt.model))})
            report("06_synthetic", {
                **roles("verbaliser", "solver"), "n_candidates": 2 if quick else 4, "embedded": small,
                "build_dir": str(runs / "synth_kg" / slug(tgt.model))})
        if not quick:
            _synthetic_report(report, runs / "synthetic", reports)
    print(f"main job done in {time.monotonic() - t0:.0f}s; open {reports / 'index.html'}", flush=True)
    return produced
