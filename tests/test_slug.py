"""One slug rule for every run directory and export: injective, and "", "." and ".." refused."""

from __future__ import annotations

import pytest
import yaml
from fakeserver import FakeServer

from cresowlve_core.cli import main
from cresowlve_core.text import UnsafeNameError, id_part, slug


def test_safe_names_are_kept_and_every_other_name_gets_a_hash_of_itself():
    assert slug("gpt-4.1") == "gpt-4.1" and slug("model-a") == "model-a"
    assert slug("openai/gpt-4.1").startswith("openai-gpt-4.1-") and slug("openai/gpt-4.1") != slug("openai-gpt-4.1")
    names = ["модель-а", "модель-б", "模型", "模式", "a/b", "a b", "a-b", "a..b/..", "../../x", "x/"]
    slugs = [slug(n) for n in names]
    assert len(set(slugs)) == len(names), dict(zip(names, slugs, strict=True))
    assert all("/" not in s and s not in (".", "..") and not s.startswith(".") for s in slugs)


@pytest.mark.parametrize("name", ["", " ", ".", "..", " .. "])
def test_names_that_would_name_the_parent_are_refused(name):
    with pytest.raises(UnsafeNameError, match="cannot name a directory"):
        slug(name)


def test_a_grid_named_dotdot_is_refused_with_exit_2_and_nothing_sent(tmp_path, capsys):
    with FakeServer(answers=lambda req: "<Answer>x</Answer>") as srv:
        conf = {"name": "..", "items": "demo", "langs": ["en"], "limit": 1, "report": False,
                "models": [{"model": "model-a", "base_url": srv.base_url}]}
        (tmp_path / "grid.yaml").write_text(yaml.safe_dump(conf))
        code = main(["grid", str(tmp_path / "grid.yaml")])
        sent = srv.total
    err = capsys.readouterr().err
    assert code == 2 and sent == 0, err
    assert "cannot name a directory" in err


def test_reviewers_whose_names_differ_only_in_non_ascii_characters_get_two_files(tmp_path):
    from cresowlve_core.construction import review as R
    from cresowlve_core.construction.records import Candidate
    from cresowlve_core.items import ItemView

    R.write_queue(tmp_path, [Candidate(id="chgk_0", ru=ItemView(question="Вопрос?", answer="Ответ"),
                                       en=ItemView(question="Question?", answer="Answer"))])
    for reviewer, code in (("Jürgen", "keep"), ("Jørgen", "outdated")):
        R.ReviewSession(tmp_path, reviewer).decide("chgk_0", code)
    files = sorted(p.name for p in (tmp_path / "review").glob("decisions__*.jsonl"))
    assert len(files) == 2, files
    _, report = R.load_decisions(tmp_path)
    assert sorted(report["reviewers"]) == sorted(["Jürgen", "Jørgen"])  # named as they typed it, not by file
    assert report["n_conflicts"] == 1


def test_query_ids_of_entities_that_differ_only_in_non_ascii_characters_differ():
    from cresowlve_core.create.queries import query_id

    assert id_part("Morton Gould") == "morton-gould"  # ASCII names keep the ids they always had
    assert query_id("Q1__P1", "Job Römer", "X") != query_id("Q1__P1", "Job Rämer", "X")
    long_a, long_b = "a" * 45 + "1", "a" * 45 + "2"  # equal in their first 40 characters
    assert id_part(long_a) != id_part(long_b) and len(id_part(long_a)) <= 49



def test_a_model_name_too_long_for_a_file_name_gets_a_run_directory_cut_to_fit(tmp_path, capsys, monkeypatch):
    """``eval --model <300 characters>`` without ``--run-dir`` crashed with ``OSError: [Errno 36] File name
    too long`` and the bug line: its default run directory was the whole name. A slug longer than MAX_SLUG
    is cut, with the name's hash, so two long names that share their start get two directories."""
    from cresowlve_core.text import MAX_SLUG

    long_a, long_b = "m" * 300 + "-a", "m" * 300 + "-b"
    assert len(slug(long_a)) <= MAX_SLUG and slug(long_a) != slug(long_b)
    assert slug("x" * MAX_SLUG) == "x" * MAX_SLUG  # a name that fits keeps its directory
    monkeypatch.setenv("CRESOWLVE_DATA_DIR", str(tmp_path / "data"))
    with FakeServer(answers=lambda req: "<Answer>x</Answer>") as srv:
        code = main(["eval", "--items", "demo", "--limit", "1", "--model", long_a, "--base-url", srv.base_url,
                     "--no-cache"])
    assert code in (0, 1), capsys.readouterr().err  # scored (the answer is wrong), not a crash
    runs = list((tmp_path / "data" / "runs").iterdir())
    assert [p.name for p in runs] == [f"{slug(long_a)}__en"] and (runs[0] / "responses.jsonl").exists()
