"""Shared test setup.

* ``tests/`` is on sys.path (for ``fakeserver``).
* Tests never touch the checkout's ``data/`` or ``reports/``:

  - at import (before any ``cresowlve_core`` module freezes a path) the process-wide
    ``CRESOWLVE_DATA_DIR``, ``CRESOWLVE_CACHE_DIR`` and ``CRESOWLVE_REPORTS_DIR`` point into one
    session temporary directory; notebook kernels (nbval, papermill) inherit them;
  - every test then gets its own fresh data, cache and reports directories (autouse fixture
    :func:`isolated_dirs`);
  - a temporary data dir links the *shipped* inputs (packs, demo items, KG, CREATE data) read-only
    from the checkout, and holds the runs and cache a test writes;
  - the session fails if the checkout's ``data/`` or ``reports/`` changed between its start and
    its end (files added, removed or modified), naming what changed.

* Under pytest-xdist (``-n auto --dist loadfile`` in ``addopts``) that check runs once, in the
  controlling process, around all workers. ``loadfile`` keeps each file on one worker, in order: the
  cells of a notebook (nbval) share one kernel, and a module-scoped fixture is built once.
  (``loadgroup`` would allow finer groups, but pytest 9.2's structured node ids make xdist 3.8
  ignore ``xdist_group`` silently: pytest-dev/pytest-xdist#1386.)
* The all-MiniLM-L6-v2 embeddings of the recorded CREATE paths that ``07_create`` ranks by default
  (and, for its paper-scale run, of every recorded path), and of the demo items' knowledge domains
  (``03_analysis`` on the main job's demo runs), are computed once per run, by the real
  model, and copied into the cache of each test that renders ``07_create``
  (:func:`recorded_create_embeddings`, :func:`every_recorded_create_embedding`) and, when nbval
  runs ``notebooks/07_create.ipynb``, into the session's cache its kernel uses
  (:class:`_SeedNotebookCache`). Likewise the labels of the shipped domain mapping, for builds in a
  child process or a notebook kernel (:func:`construction_domain_embeddings`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))

GUARDED = ("data", "reports")
_OUTPUT_NAMES = {"runs", "cache", "hub"}  # user output under data/: never linked into a test's data dir


def _shipped_names() -> set[str] | None:
    """Top-level names under data/ that git tracks (the shipped inputs), or None without git."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "data"], cwd=REPO, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return {line.split("/")[1] for line in out.stdout.splitlines() if line.count("/") >= 1}


_SHIPPED = _shipped_names()


def seed_data_dir(target: Path) -> Path:
    """A data dir holding links to the checkout's shipped inputs only: never a user's output
    (runs, cache, builds, ...), so nothing a test writes can land in the checkout through a link."""
    target.mkdir(parents=True, exist_ok=True)
    for child in sorted((REPO / "data").iterdir()):
        link = target / child.name
        shipped = child.name in _SHIPPED if _SHIPPED is not None else child.name not in _OUTPUT_NAMES
        if shipped and not link.exists():
            link.symlink_to(child, target_is_directory=child.is_dir())
    return target


def _point_env_at(root: Path, env: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    values = {
        "CRESOWLVE_DATA_DIR": str(seed_data_dir(root / "data")),
        "CRESOWLVE_CACHE_DIR": str(root / "cache"),
        "CRESOWLVE_REPORTS_DIR": str(root / "reports"),
    }
    if env is not None:
        env.update(values)
    return values


# The tests that press Ctrl-C (SIGINT to a spawned command) stand for a terminal's foreground job. A
# suite started in the background by a shell script (``cmd &``, nohup) inherits SIGINT ignored, and
# every process it starts would too (an ignored signal survives exec), so those commands would be
# tested as background jobs. Python's own handler here is reset to the default in each child at
# exec; the tests of a background job ignore SIGINT explicitly (``stophelp.spawn_cli(ignore_sigint=True)``).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_SESSION_ROOT = Path(tempfile.mkdtemp(prefix="cresowlve-tests-"))
_point_env_at(_SESSION_ROOT, os.environ)
# The xdist workers (and the kernels and commands they start) share the cores: one torch thread per
# embedding encode, so torch's OpenMP threads do not spin-wait for each other (cresowlve_core/embeddings.py).
os.environ.setdefault("CRESOWLVE_EMBED_THREADS", "1")
# Likewise the embedded model's llama.cpp server, when workers share the cores: its threads wait for
# each other at every step, so two threads beside a busy worker are slower than one (llm/local.py:
# default_threads). A run in one process keeps one thread per core.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("CRESOWLVE_LOCAL_THREADS", "1")

# One folder for the whole run, shared by the xdist workers: the controlling process (or the only
# one) makes it, the workers it starts inherit its name through the environment.
_RUN_SHARED_ENV = "CRESOWLVE_TESTS_RUN_SHARED"
_OWNS_RUN_SHARED = _RUN_SHARED_ENV not in os.environ
if _OWNS_RUN_SHARED:
    os.environ[_RUN_SHARED_ENV] = tempfile.mkdtemp(prefix="cresowlve-tests-run-")
RUN_SHARED = Path(os.environ[_RUN_SHARED_ENV])


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def fingerprint(root: Path = REPO, dirs: tuple[str, ...] = GUARDED) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``dirs`` (symlinks by target, not followed)."""
    out: dict[str, str] = {}
    for name in dirs:
        base = root / name
        if not base.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            # an editor's state beside the user's files (JupyterLab open on reports/ during a test run)
            dirnames[:] = sorted(d for d in dirnames if d != ".ipynb_checkpoints")
            for f in sorted(filenames):
                p = Path(dirpath) / f
                rel = str(p.relative_to(root))
                try:
                    if p.is_symlink():
                        out[rel] = "link:" + os.readlink(p)
                    else:
                        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
                except OSError as exc:  # vanished mid-walk: report it as changed
                    out[rel] = f"unreadable: {exc}"
            for d in dirnames:  # empty directories count too (e.g. a created data/runs/notebook/)
                p = Path(dirpath) / d
                if not any(p.iterdir()):
                    out[str(p.relative_to(root)) + "/"] = "dir"
    return out


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or modified between two fingerprints."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_xdist_worker(session.config):  # the controller fingerprints before it starts the workers
        session.config.stash[_BEFORE] = fingerprint()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        shutil.rmtree(_SESSION_ROOT, ignore_errors=True)
        return
    changed = changed_paths(before, fingerprint())
    if changed:
        shown = "\n  ".join(changed[:20]) + (f"\n  ... and {len(changed) - 20} more" if len(changed) > 20 else "")
        msg = (f"\nFAILED: the test session changed the checkout's {' or '.join(d + '/' for d in GUARDED)} "
               f"({len(changed)} paths):\n  {shown}\n")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(msg, red=True, bold=True)
        else:
            print(msg, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    shutil.rmtree(_SESSION_ROOT, ignore_errors=True)
    if _OWNS_RUN_SHARED:
        shutil.rmtree(RUN_SHARED, ignore_errors=True)


_BEFORE = pytest.StashKey[dict]()


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory, monkeypatch) -> dict[str, Path]:
    """Fresh data (with the shipped inputs linked), cache and reports directories for every test."""
    root = tmp_path_factory.mktemp("cresowlve")
    values = _point_env_at(root)
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return {"data": Path(values["CRESOWLVE_DATA_DIR"]), "cache": Path(values["CRESOWLVE_CACHE_DIR"]),
            "reports": Path(values["CRESOWLVE_REPORTS_DIR"])}


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """Point the response/embedding cache at a fresh directory for one test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def hub_cache_at_bbbb2222(tmp_path, monkeypatch) -> Path:
    """A Hugging Face cache (offline) whose CresOWLve snapshot is the test fixture at revision ``bbbb2222``
    (``refs/main``), as the hub loader finds it: the snapshot folder. A run that recorded another revision
    (``aaaa1111``) now re-reads this one."""
    hub = tmp_path / "cache" / "hub" / "datasets--mismayil--cresowlve"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "hub" / "snapshot", hub / "snapshots" / "bbbb2222")
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("bbbb2222")
    monkeypatch.setenv("CRESOWLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub / "snapshots" / "bbbb2222"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per core, but a run naming only test files gets at most one worker
    per file, and a single file runs in this process (no workers to start).
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    targets = {Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args}
    if not all(t.is_file() for t in targets):
        return cores
    return min(cores, len(targets)) if len(targets) > 1 else 0


@contextlib.contextmanager
def _run_lock(name: str):
    """An exclusive lock shared by every worker of this run."""
    with open(RUN_SHARED / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def notebook_07_default_n_queries() -> int | None:
    """``n_queries`` in the parameters cell of ``notebooks/07_create.ipynb`` (its default run)."""
    import ast
    import json

    cells = json.loads((REPO / "notebooks" / "07_create.ipynb").read_text(encoding="utf-8"))["cells"]
    params = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    for node in ast.parse("".join(params["source"])).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "n_queries" for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("notebooks/07_create.ipynb has no n_queries parameter")


def demo_domain_names() -> list[str]:
    """The knowledge domains of the shipped demo items: what ``03_analysis`` embeds for its semantic
    distance on the main job's demo runs."""
    from cresowlve_core.sources.sample import load_demo_items

    return sorted({d for item in load_demo_items(include_removed=True) for d in item.knowledge_domains})


def shared_embeddings(name: str, texts: Callable[[], list[str]], base: Path | None = None) -> Path:
    """An embedding cache (``RUN_SHARED/name/minilm.sqlite``) holding the real all-MiniLM-L6-v2
    vectors of ``texts()``, computed by the first worker that needs it (starting from a copy of the
    cache ``base``, so only what that lacks is embedded); the others wait for it and reuse it."""
    target = RUN_SHARED / name / "minilm.sqlite"
    done = target.with_suffix(".done")
    with _run_lock(name):
        if not done.exists():
            from cresowlve_core.embeddings import embed

            target.parent.mkdir(parents=True, exist_ok=True)
            if base is not None:
                shutil.copyfile(base, target)
            embed(texts(), cache_path=target)  # closed: WAL checkpointed
            done.write_text("")
    return target


def seed_embeddings(cache: Path, shared: Path) -> None:
    """Copy a shared embedding cache into ``cache`` (a test's or the session's cache dir)."""
    dest = cache / "embeddings" / "minilm.sqlite"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared, dest)


def shared_create_embeddings(every_query: bool = False) -> Path:
    """The shared embedding cache (:func:`shared_embeddings`) of the recorded CREATE paths that
    ``07_create`` ranks by default (``every_query``: every recorded path, its paper-scale run) and
    of the demo items' knowledge domains (:func:`demo_domain_names`). The full cache starts from the
    default one."""

    def texts() -> list[str]:
        from cresowlve_core.create.distance import path_text
        from cresowlve_core.create.report import load_sets

        sets = load_sets(None, [], None if every_query else notebook_07_default_n_queries()).sets
        return [path_text(p) for s in sets for p in s.paths] + ([] if every_query else demo_domain_names())

    if every_query:
        return shared_embeddings("create-embeddings-all", texts, base=shared_create_embeddings())
    return shared_embeddings("create-embeddings", texts)


def seed_create_embeddings(cache: Path, every_query: bool = False) -> None:
    """Copy the shared recorded-path embeddings into ``cache`` (a test's or the session's cache dir)."""
    seed_embeddings(cache, shared_create_embeddings(every_query))


@pytest.fixture
def construction_domain_embeddings() -> Callable[[Path, Sequence[str]], None]:
    """``seed(cache_dir, domains)``: the cache holds the real vectors of every label of the shipped
    domain mapping and of ``domains`` (the free-text domains a scripted annotator names), which a
    build embeds to route the domains the mapping lacks; a build in a child process or a notebook
    kernel then loads no model. Computed once per run for each set of ``domains``."""

    def seed(cache: Path, domains: Sequence[str]) -> None:
        from cresowlve_core.construction.domains import load_mapping

        key = hashlib.sha256("\n".join(domains).encode()).hexdigest()[:12]
        seed_embeddings(cache, shared_embeddings(f"construction-domains-{key}",
                                                 lambda: [*load_mapping(), *domains]))

    return seed


@pytest.fixture
def recorded_create_embeddings(isolated_dirs) -> Path:
    """This test's cache already holds the real all-MiniLM-L6-v2 vectors of the recorded CREATE
    paths that ``07_create`` ranks by default, so rendering that report embeds nothing new, and of
    the demo items' knowledge domains, so ``03_analysis`` on demo runs loads no model."""
    seed_create_embeddings(isolated_dirs["cache"])
    return isolated_dirs["cache"]


@pytest.fixture
def every_recorded_create_embedding(isolated_dirs) -> Path:
    """This test's cache holds the vectors of every recorded CREATE path (``07_create`` with
    ``n_queries = None``, the paper-scale run)."""
    seed_create_embeddings(isolated_dirs["cache"], every_query=True)
    return isolated_dirs["cache"]


class _SeedNotebookCache:
    """nbval starts a notebook's kernel with the session's directories: seed that cache just before
    ``notebooks/07_create.ipynb`` runs, in the process that runs it. (A plugin, not a hook of this
    file: the hooks of ``tests/conftest.py`` never see the items under ``notebooks/``. Not at
    collection: there every worker waited for the embeddings, one computing them, the other idle.)"""

    seeded = False

    @pytest.hookimpl(tryfirst=True)  # before the notebook's setup starts its kernel
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if not self.seeded and item.path.name == "07_create.ipynb" and item.path.parent.name == "notebooks":
            self.seeded = True
            seed_create_embeddings(_SESSION_ROOT / "cache")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_SeedNotebookCache(), "cresowlve-seed-notebook-cache")


#: The files that take longest, longest first (seconds in a whole run with Chromium on the 2-core
#: machine, --dist loadfile). Under loadfile a file is what a worker takes; xdist's own order (most
#: tests first) handed these 1- to 4-test files out last, so a worker could start a 70 s file while
#: the other had nothing left. The first file computes the shared CREATE embeddings
#: (:func:`shared_create_embeddings`); the main-job file, which needs them, is not among the first two.
SLOW_FIRST = (
    "tests/create/test_create_notebook.py",  # 70-90
    "tests/test_hostile_reports.py",  # 78
    "tests/llm/test_transport_hostile.py",  # 70: every case on the run's loop and through a worker process
    "tests/test_jupyterlab.py",  # 70
    "tests/replay/test_replay_cli.py",  # 62
    "tests/test_mainjob.py",  # 56
    "tests/test_explore_browser.py",  # 52
    "notebooks/06_synthetic.ipynb",  # 49
    "notebooks/05_contamination.ipynb",  # 49
    "tests/test_hostile_strings.py",  # 48
    "tests/synthetic/test_synth_stop.py",  # 39
    "tests/synthetic/test_synth_data_dir.py",  # 38
    "tests/evaluation/test_listing.py",  # 37
    "notebooks/07_create.ipynb",  # 32
    "notebooks/04_error_analysis.ipynb",  # 28
    "tests/test_browser.py",  # 28
    "tests/contamination/test_contamination_stop.py",  # 27
    "tests/test_report_replace.py",  # 26
    "notebooks/01_construction.ipynb",  # 24
    "tests/error_analysis/test_errors_out_dir.py",  # 24
    "tests/synthetic/test_synth_notebook.py",  # 24
    "tests/evaluation/test_grid_workers.py",  # 23
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files in :data:`SLOW_FIRST` order, then the others as xdist would order them (most tests first,
    then as collected); the tests of a file keep their order. ``addopts`` has ``--no-loadscope-reorder``,
    so xdist hands the files out in this order (every worker sorts the same collection the same way)."""
    def file_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    rank = {f: i for i, f in enumerate(SLOW_FIRST)}
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        f = file_of(item)
        count[f] = count.get(f, 0) + 1
        first.setdefault(f, i)
    items.sort(key=lambda it: (rank.get(file_of(it), len(rank)), -count[file_of(it)], first[file_of(it)]))
