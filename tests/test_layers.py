"""The layer contract (import-linter, configured in pyproject.toml), no private name imported across
packages, and no import cycle inside cresowlve_core, counting imports inside functions too.

The layers, top down: entry points (cli, mainjob, notebooks); stages; analysis; runtime; llm and
sources; utilities. ``lint-imports`` checks them on the package, and on a copy with one planted
upward import, which it must refuse.

The graph is built from the AST of every module: `import cresowlve_core.x`, `from cresowlve_core.x import y`
and relative imports. `from pkg import name` is an edge to `pkg` and, when `name` is a submodule, to it as
well. The implicit runs of parent `__init__`s are not edges (a package's `__init__` re-exporting its
submodules is fine); importing a name from a package `__init__` is. The llm layer rule (llm imports only
llm, paths and secrets) lives in tests/llm/test_llm_layers.py.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cresowlve_core

ROOT = Path(cresowlve_core.__file__).parent
PACKAGE = "cresowlve_core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules]
        else:
            continue
        for target in targets:
            if target in modules and target != PACKAGE:
                out.add(target)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def test_graph_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    graph = import_graph()
    assert len(graph) >= 100
    # show_banner imports `record` inside the function
    assert "cresowlve_core.notebook_records" in graph["cresowlve_core.banners"]
    module = tmp_path / "fake.py"
    module.write_text(
        "def f():\n    from . import breakdowns\n    from ..llm import client\n    from ..runtime import RunDir\n",
        encoding="utf-8",
    )
    got = imported_modules("cresowlve_core.analysis.fake", module, all_modules())
    assert got == {
        "cresowlve_core.analysis",
        "cresowlve_core.analysis.breakdowns",
        "cresowlve_core.llm",
        "cresowlve_core.llm.client",
        "cresowlve_core.runtime",
    }


def test_find_cycles_reports_a_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package() -> None:
    assert find_cycles(import_graph()) == []



REPO = ROOT.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(path: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contract on the ``cresowlve_core`` found under ``path``."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(REPO / "pyproject.toml")],
                          cwd=path, env=env, capture_output=True, text=True, timeout=600)


def test_the_package_keeps_the_layer_contract() -> None:
    out = lint_imports(REPO)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


def test_the_layer_contract_refuses_a_planted_upward_import(tmp_path: Path) -> None:
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    source = copy / "sources" / "sparql.py"  # a source reaching up into a stage, inside a function
    source.write_text(source.read_text(encoding="utf-8")
                      + "\n\ndef _planted():\n    from cresowlve_core.synthetic import domains\n\n    return domains\n",
                      encoding="utf-8")
    out = lint_imports(tmp_path)
    assert out.returncode == 1, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 kept, 1 broken" in out.stdout
    assert "cresowlve_core.sources.sparql -> cresowlve_core.synthetic.domains" in out.stdout


def private_imports_across_packages() -> list[str]:
    """``from cresowlve_core.X... import _name`` in a module outside the top-level package ``X``."""
    found = []
    for name, path in all_modules().items():
        top = name.split(".")[1] if "." in name else ""
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGE + "."):
                target = (node.module or "").split(".")[1]
                found += [f"{name}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and target != top]
    return found


def test_no_module_imports_a_private_name_of_another_package() -> None:
    assert private_imports_across_packages() == []
