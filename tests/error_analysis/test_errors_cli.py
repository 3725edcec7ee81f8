"""``cresowlve errors label``: a killed labelling run resumes without resending finished labels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fakeserver import FakeServer
from test_errors_label import _items, write_run

REPO = Path(__file__).resolve().parents[2]


def _number(prompt: str) -> int:
    return int(prompt.split("<puzzle>\nPuzzle number ")[1].split(":")[0])


def _labels(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_sigkill_then_resume_does_not_relabel(tmp_path):
    items = _items(20)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    out = tmp_path / "out"
    labels = out / "labels" / "fake-labeller" / "labels.jsonl"

    def cli(base_url: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "cresowlve_core.cli", "errors", "label", "--runs", str(tmp_path / "runs" / "*"),
             "--out-dir", str(out), "--labeller-model", "fake-labeller", "--labeller-base-url", base_url,
             "--concurrency", "2", "--no-cache"],
            cwd=REPO, env={**os.environ, "CRESOWLVE_CACHE_DIR": str(tmp_path / "cache")},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    with FakeServer(answers=lambda req: "RATIONALE: r\nCATEGORY: Overthinking", latency_s=0.25) as srv:
        proc = cli(srv.base_url)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(_labels(labels)) < 4:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = {r["id"] for r in _labels(labels)}
        assert 4 <= len(finished) < 20
        srv.reset()
        proc2 = cli(srv.base_url)
        stdout, stderr = proc2.communicate(timeout=120)
        assert proc2.returncode == 0, stderr
        resent = {_number(r.prompt) for r in srv.requests}
    assert not resent & {int(i[5:], 16) for i in finished}
    assert srv.total == 20 - len(finished)
    final = {r["id"]: r for r in _labels(labels)}
    assert len(final) == 20 and all(r["label"] == "overthinking" for r in final.values())
    assert stdout.startswith("labelled 20 of 20 wrong answers")


def test_label_cli_counts_no_answer_and_sends_nothing(tmp_path, capsys):
    """Two errored calls and nothing else wrong: nothing to label, and the CLI says the 2 were counted."""
    from cresowlve_core.cli import main

    items = _items(3)
    (tmp_path / "runs").mkdir()
    run = write_run(tmp_path / "runs", "en", items, {it.id: i == 2 for i, it in enumerate(items)})
    recs = [json.loads(x) for x in (run / "responses.jsonl").read_text().splitlines()]
    for r in recs[:2]:
        r |= {"status": "error", "prediction": None, "raw_output": None, "em_strict": None, "em_lenient": None,
              "error": "HTTP 503"}
    (run / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    code = main(["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                 "--labeller-model", "x", "--labeller-base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 0 and "nothing to label; 2 wrong by the rule without an answer (2 errored)" in err
    assert not (tmp_path / "out" / "labels").exists()


def test_label_cli_exits_1_when_wrong_answers_are_left_unlabelled_for_want_of_their_items(tmp_path, capsys):
    """A run whose items file is gone: its wrong answers cannot be labelled (never blind). Before, the CLI said
    "no wrong answers ...; nothing to label" and exited 0; beside a run that labels fine, it exited 0 too."""
    from cresowlve_core.cli import main

    items = _items(3)
    (tmp_path / "gone").mkdir()
    write_run(tmp_path / "gone", "en", items, {it.id: False for it in items})
    (tmp_path / "gone" / "items.jsonl").unlink()
    args = ["errors", "label", "--out-dir", str(tmp_path / "out"), "--labeller-model", "fake-labeller", "--no-cache"]
    code = main([*args, "--runs", str(tmp_path / "gone" / "*"), "--labeller-base-url", "http://127.0.0.1:9/v1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and last.startswith("incomplete: 3 wrong answer(s) not labelled: their items could not be loaded")

    (tmp_path / "here").mkdir()
    write_run(tmp_path / "here", "en", items, {it.id: False for it in items}, model="other")
    with FakeServer(answers=lambda req: "RATIONALE: r\nCATEGORY: Overthinking") as srv:
        code = main([*args, "--runs", str(tmp_path / "*" / "*__en"), "--labeller-base-url", srv.base_url])
    out, err = capsys.readouterr()
    assert out.startswith("labelled 3 of 3 wrong answers") and srv.total == 3
    assert code == 1 and err.strip().splitlines()[-1].startswith("incomplete: 3 wrong answer(s) not labelled")


def test_label_cli_does_not_call_answers_of_unknown_correctness_no_wrong_answers(tmp_path, capsys):
    """A judge-only run the judge half scored is graded by strict EM (coverage < 90%), which has no value: all 4
    answers are of unknown correctness (2 of them judged INCORRECT). Before, the CLI said only "no wrong answers
    in ...; nothing to label"."""
    from cresowlve_core.cli import main

    items = _items(4)
    (tmp_path / "runs").mkdir()
    run = write_run(tmp_path / "runs", "en", items, {it.id: False for it in items},
                    judged={items[0].id: False, items[1].id: False})
    recs = [json.loads(x) for x in (run / "responses.jsonl").read_text().splitlines()]
    for r in recs:
        r["em_strict"] = r["em_lenient"] = None
    (run / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    code = main(["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                 "--labeller-model", "x", "--labeller-base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 0 and err.startswith("no wrong answers found in ")
    assert "4 answer(s) with no value on their configuration's basis (right or wrong unknown" in err


def test_label_cli_names_the_run_it_leaves_out(tmp_path, capsys):
    """Two runs of one model, effort and language at different temperatures: only the later one is
    labelled, as in 04_error_analysis, and the command says which run it left out (before: 3 wrong
    answers labelled out of the 6 given, without a word)."""
    from cresowlve_core.cli import main

    items = _items(3)
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, temperature, finished in (("hot", 0.7, "2026-01-01T00:00:00Z"), ("cold", 0.0, "2026-01-02T00:00:00Z")):
        d = write_run(runs, "en", items, {it.id: False for it in items})
        manifest = json.loads((d / "manifest.json").read_text())
        (d / "manifest.json").write_text(json.dumps(manifest | {"temperature": temperature, "finished_at": finished}))
        d.rename(runs / name)
    with FakeServer(answers=lambda req: "RATIONALE: r\nCATEGORY: Overthinking") as srv:
        code = main(["errors", "label", "--runs", str(runs / "*"), "--out-dir", str(tmp_path / "out"),
                     "--labeller-model", "fake-labeller", "--labeller-base-url", srv.base_url, "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("labelled 3 of 3 wrong answers")
    assert "note: `hot` has the model, effort and language of the later run `cold`" in err
    assert "temperature 0.7 → 0.0" in err


def test_a_smaller_limit_is_refused_naming_it_and_a_larger_one_continues(tmp_path, capsys):
    """``errors label --limit 3`` after a run that labelled all 5 was accepted: the labels folder's
    summary.json then said n_units 3 ("labelled 3 of 3 wrong answers") while labels.jsonl held 5, and its
    manifest recorded no limit. A limit that leaves wrong answers out is recorded; a smaller one is
    refused before anything is sent, naming the folder and the change; a larger one (or none) continues."""
    from cresowlve_core.cli import main

    items = _items(5)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    labels = tmp_path / "out" / "labels" / "fake-labeller"
    args = ["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
            "--labeller-model", "fake-labeller", "--no-cache"]
    with FakeServer(answers=lambda req: "RATIONALE: r\nCATEGORY: Overthinking") as srv:
        assert main([*args, "--labeller-base-url", srv.base_url, "--limit", "4"]) == 0
        capsys.readouterr()
        before = {f: (labels / f).read_bytes() for f in ("manifest.json", "summary.json", "labels.jsonl")}
        sent = srv.total
        assert main([*args, "--labeller-base-url", srv.base_url, "--limit", "3"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"error: {labels}: the run directory holds another configuration (limit: 4 → 3 "
                              "(plans 3 of the 4 units it planned"), err
        assert srv.total == sent and {f: (labels / f).read_bytes() for f in before} == before
        assert main([*args, "--labeller-base-url", srv.base_url]) == 0
    assert capsys.readouterr().out.startswith("labelled 5 of 5 wrong answers")
    assert srv.total == sent + 1
    assert json.loads((labels / "summary.json").read_text())["n_units"] == len(_labels(labels / "labels.jsonl")) == 5


def test_a_label_cut_off_inside_its_category_name_is_no_label_and_exits_1(tmp_path, capsys):
    """The labeller's reply ends at the token limit in the middle of its category line, as the
    recorded OpenRouter body ``openrouter/chat_length_with_cost`` ends mid-line ("7 + 3 + ", finish_reason
    "length"; the fake server sends that Chat Completions shape). "CATEGORY: Over" was kept as the
    label class ``other: Over``: "labelled 4 of 4 wrong answers (0 unlabelled, 2 other, ...)", exit 0.
    A name cut short is no label: unlabelled, counted as cut off, and the run exits 1 saying so; a
    cut-off reply whose category line is whole still counts."""
    from fakeserver import Reply

    from cresowlve_core.cli import main

    items = _items(4)
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    replies = {0: Reply(text="RATIONALE: it kept going after the right idea.\nCATEGORY: Over", finish_reason="length"),
               1: Reply(text="RATIONALE: it missed the link.\nCATEGORY: Missing creat", finish_reason="length"),
               2: Reply(text="RATIONALE: r\nCATEGORY: Wrong reference\nThe model", finish_reason="length"),
               3: "RATIONALE: r\nCATEGORY: Overthinking"}
    with FakeServer(answers=lambda req: replies[_number(req.prompt)]) as srv:
        code = main(["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                     "--labeller-model", "fake-labeller", "--labeller-base-url", srv.base_url, "--no-cache"])
    out = capsys.readouterr()
    labels = {r["id"]: r["label"] for r in _labels(tmp_path / "out" / "labels" / "fake-labeller" / "labels.jsonl")}
    assert labels == {items[0].id: None, items[1].id: None, items[2].id: "wrong_reference",
                      items[3].id: "overthinking"}
    assert code == 1
    assert "labelled 2 of 4 wrong answers (2 unlabelled (2 cut off at the token limit), 0 other, 0 errored)" in out.out
    assert out.err.strip().splitlines()[-1].startswith(
        "incomplete: 2 of 4 replies cut off at the token limit before their category (no label)")


def test_label_cli_refuses_a_run_whose_manifest_it_cannot_read_in_one_line(tmp_path, capsys):
    """A colleague's run whose manifest.json this version cannot read (saved with a byte-order mark, or written by
    a newer cresowlve): the items of its answers are unknown. One line naming the file, exit 2, nothing labelled.
    Before: a JSONDecodeError / ValidationError traceback ending "bug: this is an unexpected error in cresowlve"."""
    from cresowlve_core.cli import main

    items = _items(3)
    (tmp_path / "runs").mkdir()
    run = write_run(tmp_path / "runs", "en", items, {it.id: False for it in items})
    manifest = json.loads((run / "manifest.json").read_text())
    for text, why in ((json.dumps(manifest), "not JSON (Unexpected UTF-8 BOM"),
                      (json.dumps({**manifest, "format_version": 3}), "format_version 3 is newer than this cresowlve")):
        (run / "manifest.json").write_text(text, encoding="utf-8-sig" if "BOM" in why else "utf-8")
        code = main(["errors", "label", "--runs", str(tmp_path / "runs" / "*"), "--out-dir", str(tmp_path / "out"),
                     "--labeller-model", "fake-labeller", "--labeller-base-url", "http://127.0.0.1:9/v1", "--no-cache"])
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2 and last.startswith(f"error: {run / 'manifest.json'}: cannot be read (") and why in last
        assert last.endswith("so they cannot be labelled; mend it, or leave the run out (nothing was labelled)")
        assert not (tmp_path / "out").exists()
