"""Declared dependencies match the imports of cresowlve_core (imports inside functions included)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import cresowlve_core

ROOT = Path(cresowlve_core.__file__).parent
PYPROJECT = ROOT.parent / "pyproject.toml"

# import name -> distribution name, where they differ beyond case and "_" vs "-"
DISTRIBUTION = {
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "IPython": "ipython",
    "vl_convert": "vl-convert-python",
}
# declared but never imported: tools and runtime pieces the code uses without an import statement
NOT_IMPORTED = {
    "torch": "pinned CPU build for the bundled sentence-embedding model",
    "jupyterlab": "the notebook front end",
    "ipykernel": "the kernel papermill and nbval run notebooks in",
    "marimo": "the marimo copies of the notebooks",
    "nbval": "pytest runs every notebook",
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def third_party_imports() -> dict[str, set[str]]:
    """Top-level third-party import name -> the modules importing it."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "cresowlve_core" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def declared() -> set[str]:
    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    return {normalise(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in deps}


def test_every_third_party_import_is_declared() -> None:
    imports = third_party_imports()
    assert {"numpy", "pydantic", "yaml"} <= set(imports)  # the walk sees imports (grid.py imports yaml)
    missing = {
        top: sorted(where)
        for top, where in imports.items()
        if normalise(DISTRIBUTION.get(top, top)) not in declared()
    }
    assert missing == {}


def test_every_declared_dependency_is_imported_or_explained() -> None:
    used = {normalise(DISTRIBUTION.get(top, top)) for top in third_party_imports()}
    unused = declared() - used - {normalise(n) for n in NOT_IMPORTED}
    assert unused == set()
