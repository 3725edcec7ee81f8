"""CLI start-up: building the parser (``cresowlve --help``, ``cresowlve eval --help``) imports no
heavy library. Before, 3-4 s went to imports (the openai
SDK through ``llm/__init__`` -> ``batch.py``; scipy and pandas through the error-analysis command module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "pandas", "openai", "altair", "numpy", "pyarrow", "sklearn", "papermill", "aiohttp")

PROBE = """
import json, sys
from cresowlve_core import cli
argv = json.loads(sys.argv[1])
if argv is None:
    cli.build_parser()
else:
    try:
        cli.main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [None, ["--help"], ["eval", "--help"], ["contamination", "run", "--help"],
                                  ["errors", "label", "--help"], ["synth", "--help"]])
def test_building_the_parser_imports_no_heavy_library(argv):
    code = f"HEAVY = {HEAVY!r}\n{PROBE}"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    if argv is not None:
        assert "usage: cresowlve" in proc.stdout
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == [], f"building the parser imported {sorted({m.split('.')[0] for m in loaded})}"


def test_the_lazy_package_names_still_resolve():
    from cresowlve_core import error_analysis, llm

    assert llm.LLMClient.__name__ == "LLMClient" and callable(llm.submit_batch)
    assert callable(error_analysis.collect_wrong) and "label_errors" in error_analysis.__all__
    for package in (llm, error_analysis):
        assert [n for n in package.__all__ if getattr(package, n, None) is None] == []
    with pytest.raises(AttributeError):
        llm.no_such_name  # noqa: B018
