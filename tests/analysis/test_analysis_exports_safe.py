"""Table 1 exports are safe to open: no CSV cell a spreadsheet reads as a formula, every LaTeX
special character escaped in every cell, hostile model names included."""

from __future__ import annotations

import csv

from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis.loading import load_runs
from cresowlve_core.analysis.table import results_long, table1_latex, write_table1_csv

HOSTILE = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\\input{/etc/passwd} $x$ & % # _ ^ ~"]


def _long(tmp_path):
    for i, model in enumerate(HOSTILE):
        write_run(tmp_path / f"r{i}_en", [record(f"i{k}", model=model, em_strict=k < 1) for k in range(3)],
                  model=model, effort="=1+1" if i == 0 else None)
    return results_long(load_runs(str(tmp_path / "r*_en")))


def test_no_csv_cell_starts_a_formula_and_numbers_stay_numbers(tmp_path):
    long = _long(tmp_path)
    path = write_table1_csv(long, tmp_path / "t.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    cells = [c for row in rows for c in row]
    formulas = [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and c != "-" and not _number(c))]
    assert formulas == [], formulas
    shown = {c for c in cells if c.startswith("'")}
    assert {"'" + m for m in HOSTILE[:4]} <= shown, shown  # the names are kept, as text
    assert "x" in cells  # "\tx": a name is one line of text, its control characters and edges' blanks dropped
    assert "'=1+1" in shown


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_latex_escapes_every_special_character_of_a_name(tmp_path):
    tex = table1_latex(_long(tmp_path))
    row = next(line for line in tex.splitlines() if "input" in line)
    name = row.split(" & ")[0]
    assert name == (r"\textbackslash{}input\{/etc/passwd\} \$x\$ \& \% \# \_ \textasciicircum{} "
                    r"\textasciitilde{}")
    assert r"=HYPERLINK(" in tex and r"\=" not in tex  # "=" is not special in LaTeX: kept as it is
    assert "\t" not in tex
