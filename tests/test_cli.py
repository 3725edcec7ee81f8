"""The ``cresowlve`` command line: help, argument checks, one-line errors and exit codes.

Also the hub hint offline, ``cache clear --yes``, the judge's defaults and the help texts.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakeserver import FakeServer

from cresowlve_core import cli
from cresowlve_core.exitcodes import stage_exit
from cresowlve_core.items import Item, ItemView
from cresowlve_core.runtime import MapResult
from cresowlve_core.sources import hub

REPO = Path(__file__).resolve().parents[1]
_PUZZLE = re.compile(r"Puzzle number (\d+):")
_NONCE = re.compile(r"VERDICT-([0-9a-zA-Z]+):")


def write_items(path: Path, n: int) -> Path:
    items = [Item(id=f"chgk_{i:010x}", difficulty=1 + i % 5,
                  en=ItemView(question=f"Puzzle number {i}: who is X?", answer=f"Answer{i}")) for i in range(n)]
    path.write_text("".join(json.dumps(it.model_dump()) + "\n" for it in items), encoding="utf-8")
    return path


def answer_for(req) -> str:
    """Judge prompts get a CORRECT verdict; solve prompts the right answer for item N."""
    if (m := _NONCE.search(req.prompt)) and "candidate_answer" in req.prompt:
        return f"Fine.\nVERDICT-{m.group(1)}: CORRECT"
    n = int(_PUZZLE.search(req.prompt).group(1))
    return f"Thinking...\n<Answer>Answer{n}</Answer>"


def eval_args(items: Path, run_dir: Path, base_url: str, *extra: str) -> list[str]:
    return ["eval", "--items", str(items), "--model", "fake-model", "--base-url", base_url,
            "--run-dir", str(run_dir), "--max-tokens", "32", *extra]


def run_main(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


# --- help -----------------------------------------------------------------------------------------


def _parsers(parser: argparse.ArgumentParser, name: str = "cresowlve"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_of_every_command_has_help_and_a_default():
    parser = cli.build_parser()
    missing = []
    for name, p in _parsers(parser):
        formatter = p._get_formatter()
        assert "exit codes:" in p.format_help(), name
        for action in p._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            text = formatter._get_help_string(action) or ""
            if not (action.help and action.help.strip()) or not re.search(r"default|required", text):
                missing.append(f"{name} {action.option_strings[-1]}")
    assert not missing, f"options without a help text or a default: {missing}"


def test_help_shows_defaults_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["eval", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for fragment in ("calls in flight at once (default: 8)", "(default: 4096)", "(default: 0.0)",
                     "judge's base URL (default: --base-url)", "--run-dir RUN_DIR run directory; running again resumes it (default: data/runs/<model>[-<effort>]__<lang>)",
                     "exit codes:", "130 interrupted by Ctrl-C", "143 terminated by SIGTERM"):
        assert fragment in out, fragment
    with pytest.raises(SystemExit):
        cli.main(["serve-local", "--help"])
    assert "TCP port on 127.0.0.1 (default: 8765)" in " ".join(capsys.readouterr().out.split())


# --- argument checks: refused by argparse, nothing created -------------------------------------


@pytest.mark.parametrize(
    "extra,fragment",
    [
        (["--limit", "0"], "argument --limit: must be an integer >= 1, got 0"),
        (["--limit", "-3"], "argument --limit: must be an integer >= 1"),
        (["--temperature", "nan"], "argument --temperature: must be a finite number >= 0"),
        (["--temperature", "inf"], "argument --temperature: must be a finite number >= 0"),
        (["--temperature", "-1"], "argument --temperature: must be a finite number >= 0"),
        (["--concurrency", "0"], "argument --concurrency: must be an integer >= 1"),
        (["--max-tokens", "0"], "argument --max-tokens: must be an integer >= 1"),
        (["--max-cost", "nan"], "argument --max-cost: must be a finite number > 0"),
        (["--judge-max-cost", "0"], "argument --judge-max-cost: must be a finite number > 0"),
        (["--judge-base-url", "localhost:8000"], "argument --judge-base-url: must be an http(s) URL"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_created(tmp_path, capsys, extra, fragment):
    items = write_items(tmp_path / "items.jsonl", 2)
    with pytest.raises(SystemExit) as exc:
        cli.main(eval_args(items, tmp_path / "run", "http://127.0.0.1:9/v1", *extra))
    assert exc.value.code == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "localhost:8000/v1", "not a url", ""])
def test_base_url_must_be_http(tmp_path, capsys, url):
    with pytest.raises(SystemExit) as exc:
        cli.main(eval_args(write_items(tmp_path / "i.jsonl", 1), tmp_path / "run", url))
    assert exc.value.code == 2
    assert "argument --base-url: must be an http(s) URL" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_credentials_in_a_bad_url_are_not_echoed(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(eval_args(write_items(tmp_path / "i.jsonl", 1), tmp_path / "run", "ftp://user:hunter2@host/v1"))
    assert "hunter2" not in capsys.readouterr().err


def test_a_key_given_as_the_variable_name_is_refused_without_repeating_it(tmp_path, capsys):
    key = "sk-proj-AbCdEf0123456789xyzXYZ"
    with pytest.raises(SystemExit) as exc:
        cli.main(eval_args(write_items(tmp_path / "i.jsonl", 1), tmp_path / "run", "http://127.0.0.1:9/v1",
                           "--api-key-env", key))
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "NAME of an environment variable" in err and key not in err


@pytest.mark.parametrize("run_dir", ["", "   "])
def test_empty_run_dir_is_refused(tmp_path, capsys, run_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    items = write_items(tmp_path / "i.jsonl", 1)
    with pytest.raises(SystemExit) as exc:
        cli.main(["eval", "--items", str(items), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--run-dir", run_dir])
    assert exc.value.code == 2 and "argument --run-dir: must not be empty" in capsys.readouterr().err
    assert not (tmp_path / "manifest.json").exists()


def test_run_dir_that_is_a_file_or_under_a_file(tmp_path, capsys):
    items = write_items(tmp_path / "i.jsonl", 1)
    afile = tmp_path / "afile"
    afile.write_text("x")
    for run_dir, fragment in ((afile, "is a file, not a run directory"), (afile / "sub" / "run", f"{afile} is a file")):
        with pytest.raises(SystemExit) as exc:
            cli.main(eval_args(items, run_dir, "http://127.0.0.1:9/v1"))
        err = capsys.readouterr().err
        assert exc.value.code == 2 and fragment in err and "Traceback" not in err


def test_unwritable_run_dir(tmp_path, capsys, monkeypatch):
    items = write_items(tmp_path / "i.jsonl", 1)
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == locked else real_access(p, mode, **kw))
    with pytest.raises(SystemExit) as exc:
        cli.main(eval_args(items, locked / "run", "http://127.0.0.1:9/v1"))
    assert exc.value.code == 2 and f"{locked} is not writable" in capsys.readouterr().err
    assert not (locked / "run").exists()


def test_unset_key_variable_is_refused_before_anything_is_created(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CRESOWLVE_TEST_NO_SUCH_KEY", raising=False)
    items = write_items(tmp_path / "i.jsonl", 1)
    code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", "http://127.0.0.1:9/v1",
                                              "--api-key-env", "CRESOWLVE_TEST_NO_SUCH_KEY"))
    assert code == 2 and "'CRESOWLVE_TEST_NO_SUCH_KEY' is not set" in err
    assert not (tmp_path / "run").exists()


# --- one-line errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content,fragment",
    [
        (b'{"id": "a"}\n42\n', ":2: expected a JSON object (one item per line), got 42"),
        (b"null\n", ":1: expected a JSON object (one item per line), got null"),
        (b"id,question\n1,q\n", ":1: not JSON"),
        (b'[{"id": "a"}]\n', ": a JSON array, not JSON Lines"),
        ('{"id": "b", "en": {"question": "Вопрос", "answer": "x"}}\n'.encode("cp1251"), ":1: not UTF-8"),
    ],
)
def test_bad_items_file_is_one_line_naming_file_and_line(tmp_path, capsys, content, fragment):
    items = tmp_path / "items.jsonl"
    items.write_bytes(content)
    code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", "http://127.0.0.1:9/v1"))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"error: {items}") and fragment in err, err
    assert not (tmp_path / "run").exists()


def test_utf8_bom_items_file_runs(tmp_path, capsys):
    items = write_items(tmp_path / "items.jsonl", 3)
    items.write_bytes(b"\xef\xbb\xbf" + items.read_bytes())
    with FakeServer(answers=answer_for) as srv:
        code, out, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache"))
    assert code == 0, err
    assert "n=3 ok=3 error=0 not-run=0" in out


def test_duplicate_ids_and_lone_surrogates_are_refused_by_id_before_any_request(tmp_path, capsys):
    items = write_items(tmp_path / "items.jsonl", 4)
    lines = items.read_text().splitlines()
    items.write_text("\n".join([*lines, lines[1]]) + "\n")
    with FakeServer(answers=answer_for) as srv:
        code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url))
        assert code == 2 and "1 duplicate item id(s): 'chgk_0000000001' (items 2, 5)" in err
        items.write_text("\n".join(lines).replace("Puzzle number 2:", "Puzzle \\udcff number 2:") + "\n")
        code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url))
        assert code == 2 and "id 'chgk_0000000002' (en.question)" in err
        assert srv.total == 0
    assert not (tmp_path / "run").exists()


def test_hub_items_offline_is_one_line_with_the_local_file_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def offline(**kwargs):
        from huggingface_hub.errors import LocalEntryNotFoundError

        if kwargs.get("local_files_only"):
            raise LocalEntryNotFoundError("not cached")
        raise OSError("[Errno -2] Name or service not known")

    monkeypatch.setattr(hub, "snapshot_download", offline)
    code, _, err = run_main(capsys, ["eval", "--items", "hub:en", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                     "--run-dir", str(tmp_path / "run")])
    assert code == 2 and err.count("\n") == 1
    assert "from the Hugging Face hub" in err and "pass a local file instead: --items PATH.parquet" in err


def test_full_disk_is_one_line_and_exit_3(tmp_path, capsys, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 6)
    real_fsync = os.fsync  # the kernel reports a full disk on the third fsync of responses.jsonl
    calls = {"n": 0}

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("responses.jsonl"):
            calls["n"] += 1
            if calls["n"] > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with FakeServer(answers=answer_for) as srv:
        code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache", "--concurrency", "1"))
    assert code == 3
    assert last_line(err).startswith("error: disk full writing ") and "responses.jsonl (No space left on device)" in err
    assert "Traceback" not in err


# --- exit codes -----------------------------------------------------------------------------------


def test_all_done_exits_0_without_a_judge_cost(tmp_path, capsys):
    items = write_items(tmp_path / "items.jsonl", 4)
    with FakeServer(answers=answer_for) as srv:
        code, out, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache"))
    assert code == 0, err
    assert "n=4 ok=4 error=0 not-run=0" in out
    assert "cost unknown" in out and "(judge" not in out  # no judge: no "(judge unknown)"
    assert "incomplete" not in err


def test_errored_items_exit_1_with_count_and_most_common_error(tmp_path, capsys):
    items = write_items(tmp_path / "items.jsonl", 10)
    bad = {"Puzzle number 3:", "Puzzle number 7:"}

    def faults(req):
        return "413" if any(b in req.prompt for b in bad) else None

    with FakeServer(answers=answer_for, faults=faults) as srv:
        code, out, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache"))
    assert code == 1, err
    assert "n=10 ok=8 error=2 not-run=0" in out
    line = last_line(err)
    assert line.startswith("incomplete: 2 errored, 0 not run of 10 items; most common error (2x): ")
    assert "HTTP 413" in line and line.endswith("; run again to retry them")


def test_fatal_error_exits_3_and_names_it(tmp_path, capsys, monkeypatch):
    items = write_items(tmp_path / "items.jsonl", 5)
    monkeypatch.setenv("CRESOWLVE_TEST_KEY", "wrong-key")
    with FakeServer(answers=answer_for, api_key="right-key") as srv:
        code, out, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache",
                                                    "--api-key-env", "CRESOWLVE_TEST_KEY"))
    assert code == 3, err
    line = last_line(err)
    assert line.startswith("stopped early (fatal: ") and "401" in line and "0 of 5 items done" in line
    assert "wrong-key" not in out + err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"].startswith("fatal")


def test_connection_refused_exits_3_quickly(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    items = write_items(tmp_path / "items.jsonl", 50)
    code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", f"http://127.0.0.1:{port}/v1", "--no-cache"))
    assert code == 3, err
    assert "stopped early" in last_line(err) and "refused" in err


def test_html_pages_with_status_200_exit_3(tmp_path, capsys):
    items = write_items(tmp_path / "items.jsonl", 20)
    with FakeServer(answers=answer_for, faults=lambda req: "garbage") as srv:
        code, _, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache"))
    assert code == 3, err
    assert last_line(err).startswith("stopped early (fatal: ")


def test_judge_defaults_to_the_models_base_url_and_key(tmp_path, capsys, monkeypatch):
    """``--judge-model`` alone judges at the model's URL with the model's key."""
    items = write_items(tmp_path / "items.jsonl", 3)
    monkeypatch.setenv("CRESOWLVE_TEST_KEY", "the-key")
    with FakeServer(answers=answer_for, api_key="the-key") as srv:
        code, out, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache",
                                                    "--api-key-env", "CRESOWLVE_TEST_KEY", "--judge-model", "fake-judge"))
        judge_requests = [r for r in srv.requests if r.body.get("model") == "fake-judge"]
    assert code == 0, err
    assert len(judge_requests) == 3 and all(r.authorization == "Bearer the-key" for r in judge_requests)
    assert "judge 100.0%" in out and "(judge " in out
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "the-key" not in json.dumps(manifest)


def test_judge_max_cost_stops_the_run_with_exit_3_naming_the_judge_budget(tmp_path, capsys, monkeypatch):
    prices = tmp_path / "prices.csv"  # the judge's calls are priced (each one's upper bound ~0.5 USD), the model's free
    prices.write_text("model,input_per_mtok,output_per_mtok,batch_discount\nfake-judge,1000,1000,0.5\nfake-model,0,0,0.5\n")
    monkeypatch.setenv("CRESOWLVE_PRICES", str(prices))
    items = write_items(tmp_path / "items.jsonl", 6)
    with FakeServer(answers=answer_for) as srv:
        code, out, err = run_main(capsys, eval_args(items, tmp_path / "run", srv.base_url, "--no-cache", "--concurrency",
                                                    "1", "--judge-model", "fake-judge", "--judge-max-cost", "1.2"))
        judged = [r for r in srv.requests if r.body.get("model") == "fake-judge"]
    assert code == 3, err
    assert 0 < len(judged) < 6
    assert last_line(err).startswith("stopped early (max_cost reached: the judge budget of $1.2000 would be exceeded")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["judge_max_cost"] == 1.2


def test_stage_exit_takes_a_map_result_or_a_summary(capsys):
    recs = {("a",): {"status": "ok"}, ("b",): {"status": "error", "error": "HTTP 413: too long\nmore"},
            ("c",): {"status": "error", "error": "HTTP 413: too long"}}
    assert stage_exit(MapResult(records=recs, n_units=4, n_skipped=0, n_sent=3), unit="units") == 1
    assert last_line(capsys.readouterr().err) == (
        "incomplete: 2 errored, 1 not run of 4 units; most common error (2x): HTTP 413: too long; run again to retry them")
    done = {"n_items": 2, "n_ok": 2, "n_error": 0, "n_not_run": 0, "stopped": None, "top_error": None}
    assert stage_exit(done) == 0 and capsys.readouterr().err == ""
    budget = {**done, "n_ok": 1, "n_not_run": 1, "stopped": "max_cost reached: $0.50"}
    assert stage_exit(budget) == 3
    assert last_line(capsys.readouterr().err).startswith("stopped early (max_cost reached: $0.50): 1 of 2 items done")
    assert stage_exit({**done, "n_ok": 1, "n_not_run": 1, "stopped": "interrupted"}) == 130


# --- cache clear ----------------------------------------------------------------------------------


def test_cache_clear_needs_yes_when_not_at_a_terminal(tmp_path, capsys, monkeypatch):
    from cresowlve_core.llm.cache import ResponseCache
    from cresowlve_core.llm.types import Completion

    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        for i, model in enumerate(["m1", "m1", "m2"]):
            cache.put(f"key{i}", Completion(text=f"t{i}"), model=model)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    code, out, err = run_main(capsys, ["cache", "clear", "--path", str(path)])
    assert code == 2 and "would remove 3 cached responses" in err and "pass --yes to confirm" in err
    code, out, err = run_main(capsys, ["cache", "clear", "--path", str(path), "--model", "m1"])
    assert code == 2 and "would remove 2 cached responses of model 'm1'" in err
    assert '"entries": 3' in run_main(capsys, ["cache", "stats", "--path", str(path)])[1]
    code, out, _ = run_main(capsys, ["cache", "clear", "--path", str(path), "--model", "m1", "--yes"])
    assert code == 0 and "removed 2 cached responses" in out
    assert '"entries": 1' in run_main(capsys, ["cache", "stats", "--path", str(path)])[1]


def test_cache_of_a_model_it_does_not_hold_is_refused_naming_the_models_it_holds(tmp_path, capsys):
    """``--model`` names a model the cache holds, for ``stats`` (its entries only) and ``clear``. Before: ``cache
    clear --model m3 --yes`` printed "removed 0 cached responses" (exit 0), and ``stats --model m1`` printed the
    whole cache's counts."""
    import json

    from cresowlve_core.llm.cache import ResponseCache
    from cresowlve_core.llm.types import Completion

    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        for i, model in enumerate(["m1", "m1", "m2"]):
            cache.put(f"key{i}", Completion(text=f"t{i}"), model=model)
    for action in (["clear", "--yes"], ["stats"]):
        code, out, err = run_main(capsys, ["cache", *action, "--path", str(path), "--model", "m3"])
        assert code == 2 and "no cached responses of model 'm3'" in err and "(models cached: 'm1', 'm2')" in err, err
    code, out, _ = run_main(capsys, ["cache", "stats", "--path", str(path), "--model", "m1"])
    stats = json.loads(out)
    assert code == 0 and (stats["entries"], stats["per_model"]) == (2, {"m1": 2})
    assert json.loads(run_main(capsys, ["cache", "stats", "--path", str(path)])[1])["entries"] == 3  # nothing removed


def test_cache_clear_asks_at_a_terminal(tmp_path, capsys, monkeypatch):
    from cresowlve_core.llm.cache import ResponseCache

    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    code, out, _ = run_main(capsys, ["cache", "clear", "--path", str(path)])
    assert code == 0 and "nothing removed" in out


# --- processes: signals and the run-directory lock (points 14, 15) ---------------------------------


def _spawn(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cresowlve_core.cli", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def _wait_for_records(run_dir: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    path = run_dir / "responses.jsonl"
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} records after {timeout}s")


@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_write_the_summary_and_finish(tmp_path, signum, code):
    items = write_items(tmp_path / "items.jsonl", 40)
    run_dir = tmp_path / "run"
    with FakeServer(answers=answer_for, latency_s=0.2) as srv:
        proc = _spawn(eval_args(items, run_dir, srv.base_url, "--no-cache", "--concurrency", "2"))
        _wait_for_records(run_dir, 4)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert manifest["finished_at"] and manifest["stopped"] == "interrupted"
    assert summary["stopped"] == "interrupted" and 4 <= summary["n_ok"] < 40
    assert summary["n_ok"] + summary["n_not_run"] + summary["n_error"] == 40
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    assert last_line(err).startswith(f"interrupted ({name}): {summary['n_ok']} of 40 items done")
    assert f"n=40 ok={summary['n_ok']}" in out


def test_a_second_process_on_the_same_run_dir_is_refused(tmp_path):
    items = write_items(tmp_path / "items.jsonl", 200)  # the first run takes ~30 s; it is stopped below
    run_dir = tmp_path / "run"
    with FakeServer(answers=answer_for, latency_s=0.3) as srv:
        first = _spawn(eval_args(items, run_dir, srv.base_url, "--no-cache", "--concurrency", "2"))
        try:
            _wait_for_records(run_dir, 2)
            second = subprocess.run([sys.executable, "-m", "cresowlve_core.cli",
                                     *eval_args(items, run_dir, srv.base_url, "--no-cache")],
                                    cwd=REPO, capture_output=True, text=True, timeout=60)
        finally:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=60)
        prompts = [r.prompt for r in srv.requests]
    assert first.returncode == 143  # still running when the second one was refused
    assert second.returncode == 2, second.stderr
    assert "is in use by another process" in second.stderr and second.stderr.count("\n") == 1
    assert len(prompts) == len(set(prompts))  # nothing was sent twice


def test_stage_exit_understands_create_summaries(capsys):
    from types import SimpleNamespace

    gen = SimpleNamespace(n_calls=24, n_ok=22, n_error=1, n_missing=1, stopped=None)
    assert stage_exit(gen, unit="calls") == 1
    assert last_line(capsys.readouterr().err) == "incomplete: 1 errored, 1 not run of 24 calls; run again to retry them"
    score = SimpleNamespace(n_to_judge=8, n_judged=8, n_judge_errors=0, n_not_judged=0, stopped=None)
    assert stage_exit(score, unit="paths to judge") == 0


def test_sent_phrase_gives_every_item_done_as_the_reason_only_when_nothing_is_left() -> None:
    from cresowlve_core.exitcodes import sent_phrase

    assert sent_phrase(4, 2, "all done before") == "4 sent"
    assert sent_phrase(0, 0, "all done before") == "nothing sent (all done before)"
    assert sent_phrase(0, 3, "all done before") == "nothing sent"  # a stop or a refusal: the last line says which
