"""The llm layer imports nothing of the project above it (imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import cresowlve_core.llm

ALLOWED = ("cresowlve_core.llm", "cresowlve_core.paths", "cresowlve_core.secrets",
           "cresowlve_core.jsonl", "cresowlve_core.jsontext", "cresowlve_core.outfiles",
           "cresowlve_core.lazy", "cresowlve_core.extras", "cresowlve_core.failures",
           "cresowlve_core.eventloop", "cresowlve_core.untrusted",
           "cresowlve_core.text")  # leaf utilities: stdlib and secrets only (eventloop: uvloop; text: failures)


def project_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.add(f"<relative import in {path.name}>")
    return {n for n in names if n.startswith("cresowlve_core") or n.startswith("<")}


def test_llm_modules_import_only_llm_paths_and_secrets() -> None:
    folder = Path(cresowlve_core.llm.__file__).parent
    modules = sorted(folder.glob("*.py"))
    assert len(modules) >= 8
    bad = {p.name: sorted(n for n in project_imports(p) if not n.startswith(ALLOWED)) for p in modules}
    assert {k: v for k, v in bad.items() if v} == {}
