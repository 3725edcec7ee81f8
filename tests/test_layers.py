"""No import cycle inside cresowlve_core, counting imports inside functions too.

The graph is built from the AST of every module: `import cresowlve_core.x`, `from cresowlve_core.x import y`
and relative imports. `from pkg import name` is an edge to `pkg` and, when `name` is a submodule, to it as
well. The implicit runs of parent `__init__`s are not edges (a package's `__init__` re-exporting its
submodules is fine); importing a name from a package `__init__` is. The llm layer rule (llm imports only
llm, paths and secrets) lives in tests/llm/test_llm_layers.py.
"""

from __future__ import annotations

import ast
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
