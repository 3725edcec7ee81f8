"""`-p compare` of 03_analysis accepts the grid's labels: the paper names a grid
config gives its models (`label:`, recorded in grid.json `aliases`) as well as the display names; an
unknown name is an error listing the known ones, refused before the report renders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_analysis_fixtures import record, write_run

from cresowlve_core.analysis.loading import grid_aliases, load_runs
from cresowlve_core.analysis.paired import check_compare, compare_configs
from cresowlve_core.analysis.report import paired_section

REPO = Path(__file__).resolve().parents[2]
ALIASES = {"gpt-4.1": "GPT-4.1", "gpt-5.4": "GPT-5.4"}


def _grid(tmp_path: Path) -> Path:
    """A grid folder as `cresowlve grid` leaves it: one run per cell beside grid.json."""
    d = tmp_path / "grid" / "paper-table1"
    ids = [f"i{k:03d}" for k in range(40)]
    cells = []
    for model, effort, right in (("gpt-4.1", None, 10), ("gpt-5.4", "none", 20), ("gpt-5.4", "medium", 30)):
        name = model + (f"-{effort}" if effort else "") + "__en"
        recs = [record(i, model=model, effort=effort, em_strict=k < right) for k, i in enumerate(ids)]
        write_run(d / name, recs, model=model, effort=effort, thinking=effort is not None)
        cells.append({"cell": name, "model": model, "label": ALIASES[model], "effort": effort, "lang": "en",
                      "run_dir": str(d / name), "status": "done"})
    (d / "grid.json").write_text(json.dumps({"name": "paper-table1", "cells": cells, "aliases": ALIASES}))
    return d


def test_grid_labels_are_read_with_the_runs_from_grid_json_or_beside_a_glob(tmp_path):
    d = _grid(tmp_path)
    assert load_runs(str(d / "grid.json")).aliases == ALIASES
    assert load_runs(str(d / "*")).aliases == ALIASES  # the cells' folder holds grid.json
    assert grid_aliases(str(tmp_path / "nowhere" / "*")) == {}


def test_compare_by_grid_label_display_name_or_model(tmp_path):
    rs = load_runs(str(_grid(tmp_path) / "grid.json"))
    out = compare_configs(rs, [("GPT-4.1", "GPT-5.4 (medium)")], include_defaults=False)
    row = out.iloc[0]
    assert (row["a"], row["b"], row["n"]) == ("gpt-4.1", "gpt-5.4 (medium)", 40)
    assert (row["a_only_right"], row["b_only_right"]) == (0, 20)  # right on 10 vs 30 of the same 40 items
    # the display names and model names of before still work, and give the same row
    same = compare_configs(rs, [("gpt-4.1", "gpt-5.4 (medium)")], include_defaults=False).iloc[0]
    assert same["p"] == row["p"]
    with pytest.raises(ValueError, match="names several configurations: gpt-5.4 \\(none\\), gpt-5.4 \\(medium\\)"):
        compare_configs(rs, [("GPT-5.4", "GPT-4.1")])  # the label alone names two efforts
    with pytest.raises(ValueError) as err:
        compare_configs(rs, [("GPT-4.2", "GPT-4.1")])
    msg = str(err.value)
    assert "no configuration 'GPT-4.2'" in msg and "known: gpt-4.1, gpt-5.4 (medium), gpt-5.4 (none)" in msg
    assert "grid labels: GPT-4.1 = gpt-4.1, GPT-5.4 (medium) = gpt-5.4 (medium)" in msg


def test_a_model_the_grid_gives_no_label_has_none_not_nan(tmp_path):
    """Only some models labelled: the others' missing label is NaN in the frame, which is truthy, and
    was listed (and accepted) as a grid label named "nan"."""
    write_run(tmp_path / "a", [record("i1", model="openai/gpt-4.1")], model="openai/gpt-4.1")
    write_run(tmp_path / "b", [record("i1", model="qwen3", effort="high")], model="qwen3", effort="high", thinking=True)
    rs = load_runs(str(tmp_path / "*"))
    rs.aliases.update({"openai/gpt-4.1": "GPT-4.1"})
    with pytest.raises(ValueError) as err:
        compare_configs(rs, [("GPT-4.1", "nope")])
    assert str(err.value).endswith("known: openai/gpt-4.1, qwen3 (high); grid labels: GPT-4.1 = openai/gpt-4.1")
    with pytest.raises(ValueError, match="no configuration 'nan \\(high\\)'"):
        compare_configs(rs, [("GPT-4.1", "nan (high)")])
    assert compare_configs(rs, [("GPT-4.1", "qwen3 (high)")], include_defaults=False).iloc[0]["n"] == 1


def test_the_report_section_takes_grid_labels(tmp_path):
    rs = load_runs(str(_grid(tmp_path) / "*"))
    out = paired_section(rs, compare=[["GPT-4.1", "GPT-5.4 (none)"]])
    assert out["n_config_pairs"] == 2  # the pair asked for, and gpt-5.4's two efforts (a default pair)


def test_check_compare_refuses_unknown_names_and_bad_shapes(tmp_path):
    g = str(_grid(tmp_path) / "grid.json")
    assert check_compare(g, [["GPT-4.1", "gpt-5.4 (none)"]]) == [("gpt-4.1", "gpt-5.4 (none)")]
    with pytest.raises(ValueError, match="compare: no configuration 'Claude'.*known: gpt-4.1"):
        check_compare(g, [["Claude", "GPT-4.1"]])
    with pytest.raises(ValueError, match="compare: a list of name pairs"):
        check_compare(g, ["GPT-4.1", "GPT-5.4"])
    assert check_compare(str(tmp_path / "nothing" / "*"), [["a", "b"]]) == []  # no runs: the report says so


def test_cli_refuses_an_unknown_compare_name_before_rendering(tmp_path):
    g = _grid(tmp_path) / "grid.json"
    out = subprocess.run([sys.executable, "-m", "cresowlve_core.cli", "report", "03_analysis", "-p", "runs", str(g),
                          "-p", "compare", '[["GPT-4.1", "GPT-4.2"]]', "--reports-dir", str(tmp_path / "reports")],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ})
    assert out.returncode == 2, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: compare: no configuration 'GPT-4.2'") and "GPT-5.4 (medium) = gpt-5.4 (medium)" in last
    assert not (tmp_path / "reports" / "03_analysis.html").exists()


def test_the_report_names_configurations_by_their_grid_labels(tmp_path):
    """The grid's labels used to be never shown. 03 names configurations by them
    (RunSet.labelled); Table 1 still matches on the model; every earlier name still resolves."""
    rs = load_runs(str(_grid(tmp_path) / "grid.json")).labelled()
    assert sorted(rs.runs["config"]) == ["GPT-4.1", "GPT-5.4 (medium)", "GPT-5.4 (none)"]
    assert set(rs.responses["config"]) == set(rs.runs["config"]) and set(rs.runs["model"]) == {"gpt-4.1", "gpt-5.4"}
    for name in ("GPT-4.1", "gpt-4.1", "gpt-5.4 (medium)", "GPT-5.4 (medium)"):
        assert compare_configs(rs, [(name, "GPT-5.4 (none)")], include_defaults=False).iloc[0]["n"] == 40
    alone = tmp_path / "alone" / "gpt-4.1__en"
    write_run(alone, [record(f"i{k:03d}", model="gpt-4.1", effort=None, em_strict=True) for k in range(3)],
              model="gpt-4.1", effort=None, thinking=False)
    unlabelled = load_runs(str(alone))
    assert unlabelled.labelled() is unlabelled  # no grid, no labels: nothing renamed
    assert unlabelled.labelled({"gpt-4.1": "GPT-4.1"}).runs["config"].tolist() == ["GPT-4.1"]  # the notebook's aliases


def test_labels_that_would_merge_configurations_are_not_used(tmp_path):
    rs = load_runs(str(_grid(tmp_path) / "grid.json"))
    merging = rs.labelled({"gpt-4.1": "GPT-5.4 (none)", "gpt-5.4": "GPT-5.4"})  # two configs -> one name
    assert sorted(merging.runs["config"]) == ["gpt-4.1", "gpt-5.4 (medium)", "gpt-5.4 (none)"]


def test_a_pair_naming_one_configuration_twice_is_refused_not_tested(tmp_path):
    """A grid label and its model name are one configuration. Before, the pair was "tested" against itself:
    diff 0.0, p 1.0 over 40 pairs, a row in the Holm family that looked like a finding of no difference."""
    g = str(_grid(tmp_path) / "grid.json")
    with pytest.raises(ValueError, match=r"compare: 'GPT-4.1' and 'gpt-4.1' name the same configuration \(gpt-4.1\)"):
        check_compare(g, [["GPT-4.1", "gpt-4.1"]])
    with pytest.raises(ValueError, match="name the same configuration"):
        compare_configs(load_runs(g), [("GPT-5.4 (medium)", "gpt-5.4 (medium)")])


def test_a_pair_with_no_language_in_common_is_named_not_dropped(tmp_path, monkeypatch):
    """``compare`` asked for gpt-4.1 (En only) vs qwen3 (Ru only): no row, and the section said "No two
    configurations to compare (... and no `compare` pairs given)" although a pair was given."""
    write_run(tmp_path / "a", [record("i1", model="gpt-4.1")], model="gpt-4.1")
    write_run(tmp_path / "b", [record("i1", model="qwen3", lang="ru")], model="qwen3", lang="ru")
    rs = load_runs(str(tmp_path / "*"))
    assert compare_configs(rs, [("gpt-4.1", "qwen3")]).attrs["no_shared_language"] == [("gpt-4.1", "qwen3", ["en"], ["ru"])]
    from cresowlve_core.analysis import report

    said: list[str] = []
    monkeypatch.setattr(report, "say", said.append)
    out = paired_section(rs, compare=[["gpt-4.1", "qwen3"]])
    text = "\n".join(said)
    assert out["n_config_pairs"] == 0 and out["n_not_compared"] == 1
    assert "**Not compared** (the two have no language in common" in text and "gpt-4.1 (en) vs qwen3 (ru)" in text
    assert "no `compare` pairs given" not in text


def test_a_label_names_a_model_whose_name_holds_a_control_character(tmp_path):
    """The runs hold a model name as one line (a terminal escape's ESC as a space); its grid label,
    recorded in grid.json under the name as written, still names it, as ``cresowlve runs`` does."""
    d = tmp_path / "grid" / "g"
    model = "m\x1b[2J"
    write_run(d / "m__en", [record(f"i{k}", model=model, effort=None, em_strict=True) for k in range(3)],
              model=model, effort=None, thinking=False)
    (d / "grid.json").write_text(json.dumps({"name": "g", "aliases": {model: "GPT-X"}, "cells": [
        {"cell": "m__en", "model": model, "label": "GPT-X", "effort": None, "lang": "en", "run_dir": str(d / "m__en"),
         "status": "done"}]}))
    rs = load_runs(str(d / "grid.json"))
    assert rs.runs["model"].tolist() == ["m [2J"]
    assert rs.labelled().runs["config"].tolist() == ["GPT-X"]
    assert rs.labelled({model: "GPT-Y"}).runs["config"].tolist() == ["GPT-Y"]  # the notebook's aliases


def test_a_grid_label_is_one_line_like_the_model_name_it_replaces(tmp_path):
    """A label with line breaks (a YAML block string) would start a heading or a list in every Markdown
    sentence of 03 that names the configuration, and a terminal escape would reach Table 1's CSV: a label
    is a name, so it is one line, as the model name is."""
    d = tmp_path / "grid" / "g"
    write_run(d / "m__en", [record(f"i{k}", model="m", effort=None, em_strict=True) for k in range(3)],
              model="m", effort=None, thinking=False)
    label = "GPT\n\n# FAKE HEADING\n\n- fake bullet\x1b[31m"
    (d / "grid.json").write_text(json.dumps({"name": "g", "aliases": {"m": label}, "cells": [
        {"cell": "m__en", "model": "m", "label": label, "effort": None, "lang": "en", "run_dir": str(d / "m__en"),
         "status": "done"}]}))
    rs = load_runs(str(d / "grid.json"))
    assert rs.labelled().runs["config"].tolist() == ["GPT # FAKE HEADING - fake bullet [31m"]
    assert rs.labelled().runs["name"].tolist() == ["GPT # FAKE HEADING - fake bullet [31m"]
    assert load_runs(str(d / "m__en")).labelled({"m": label}).runs["config"].tolist()[0].startswith("GPT # FAKE")
