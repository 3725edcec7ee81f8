"""The ``rfc3987_syntax`` stand-in (cresowlve_core/lazy.py): importing the analysis stack no longer
builds its parsers, and jsonschema's ``iri`` format checker still works (loading the real package)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("rfc3987_syntax")

SCRIPT = """
import sys
import cresowlve_core.notebooks as nb
nb.setup()
import altair, jsonschema
print("real loaded after altair:", "rfc3987_syntax.syntax_helpers" in sys.modules)
checker = jsonschema.Draft7Validator.FORMAT_CHECKER
print("valid iri:", checker.conforms("http://example.org/ü", "iri"))
print("invalid iri:", checker.conforms("not an iri", "iri"))
print("real loaded after a check:", "rfc3987_syntax.syntax_helpers" in sys.modules)
"""


def test_altair_import_defers_rfc3987_syntax_and_iri_checks_still_work() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "real loaded after altair: False",
        "valid iri: True",
        "invalid iri: False",
        "real loaded after a check: True",
    ]
