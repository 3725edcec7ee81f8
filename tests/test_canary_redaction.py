"""Credentials in base URLs reach no file and no terminal, in every stage.

A canary password (``user:PASSWORD@``) and a canary query key (``?api-key=KEY``) are given in
the base URL of every model role of every stage and of the grid, against a local fake server
(which ignores them). Afterwards neither value appears in any file under the stage's output
directory, nor on stdout or stderr. Before: the manifest's nested ``judge.base_url``,
``config.base_url`` and ``config.judge_base_url``, ``build.json``, the construction export's
``DATA_CARD.md``, synth's summary and manifests, and grid cell manifests held them.
"""

from __future__ import annotations

import pytest
import stage_runs as S
from fakeserver import FakeServer

PASSWORD = "PW-canary-7f3a91"
KEY = "KEY-canary-9b1c42"


def canary_url(srv: FakeServer) -> str:
    return srv.base_url.replace("http://", f"http://canaryuser:{PASSWORD}@") + f"?api-key={KEY}&api-version=2024-06-01"


def assert_clean(out, capsys) -> int:
    """No canary in any file under ``out`` or the cache, nor on the terminal; returns the number
    of files read."""
    from cresowlve_core.paths import cache_dir

    files = S.files_under(out)
    assert files
    files += S.files_under(cache_dir())  # the response cache (its entries and WAL) too
    leaks = [str(f) for f in files if PASSWORD.encode() in f.read_bytes() or KEY.encode() in f.read_bytes()]
    assert leaks == []
    term = capsys.readouterr()
    assert PASSWORD not in term.out + term.err and KEY not in term.out + term.err
    return len(files)


STAGES = {
    "eval": (S.run_eval, S.eval_answers),
    "create_generate": (S.run_create, S.create_answers),
    "build": (S.run_build, S.build_answers),
    "errors_label": (S.run_errors, S.errors_answers),
    "contamination": (S.run_contamination, None),
    "grid": (S.run_grid, S.grid_answers),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_no_url_credential_reaches_disk_or_terminal(stage, tmp_path, capsys):
    run, answers = STAGES[stage]
    with FakeServer(answers=answers or S.contamination_answers()) as srv:
        code, out = run(canary_url(srv), tmp_path)
        assert srv.total > 0
    assert code == 0, capsys.readouterr().err[-2000:]
    assert assert_clean(out, capsys) > 1


def test_create_score_keeps_url_credentials_out(tmp_path, capsys):
    with FakeServer(answers=S.create_answers) as srv:
        code, out = S.run_create(canary_url(srv), tmp_path)
        assert code == 0
        assert S.run_create_score(canary_url(srv), out).n_valid == 4
    assert (out / "score" / "manifest.json").exists()
    assert_clean(out, capsys)


@pytest.mark.embeddings
def test_synth_keeps_url_credentials_out(tmp_path, capsys):
    with FakeServer(answers=S.synth_answers) as srv:
        code, out = S.run_synth(canary_url(srv), tmp_path)
    assert code == 0
    assert_clean(out, capsys)


def test_an_error_naming_the_url_is_scrubbed_on_the_terminal(tmp_path, capsys):
    """A dead endpoint: the error line names the endpoint, without its credentials."""
    from cresowlve_core.cli import main

    items = S.write_items(tmp_path / "items.jsonl", S.eval_items())
    url = f"http://u:{PASSWORD}@127.0.0.1:9/v1?key={KEY}"
    code = main(["eval", "--model", "m", "--base-url", url, "--items", str(items), "--lang", "en",
                 "--run-dir", str(tmp_path / "run"), "--no-cache", "--max-tokens", "8"])
    assert code != 0
    assert_clean(tmp_path / "run", capsys)


def test_scrub_strips_user_info_and_key_parameters_inside_json():
    from cresowlve_core.secrets import REDACTED, scrub

    text = '{"judge": {"base_url": "https://me:s3cr3t-pass@h/v1?api-key=abcd1234&api-version=1"}, "e": "a@b"}'
    out = scrub(text)
    assert "s3cr3t-pass" not in out and "abcd1234" not in out and "me:" not in out
    assert out == '{"judge": {"base_url": "https://h/v1?api-key=' + REDACTED + '&api-version=1"}, "e": "a@b"}'
    assert scrub("later the bare value s3cr3t-pass appears") == f"later the bare value {REDACTED} appears"
    for name in ("key", "api_key", "access_token", "token", "sig", "X-Amz-Signature", "client_secret"):
        assert scrub(f"https://h/x?{name}=zz99yy&b=1") == f"https://h/x?{name}={REDACTED}&b=1"
    assert scrub("https://h/x?monkey=1&page=2") == "https://h/x?monkey=1&page=2"


def test_the_cli_terminal_and_log_handlers_are_scrubbed(capsys, caplog, monkeypatch):
    import logging
    import sys

    from cresowlve_core.secrets import guard_terminal

    monkeypatch.setenv("MY_PROVIDER", "value-of-an-oddly-named-key-var")
    url = f"https://u:{PASSWORD}@h.example/v1?api-key={KEY}"
    restore = guard_terminal({"base_url": url, "api_key_env": "MY_PROVIDER"})
    try:
        print(f"connecting to {url}")
        print("the key is value-of-an-oddly-named-key-var", file=sys.stderr)
        logging.getLogger("cresowlve.test").warning("retrying %s", url)
    finally:
        restore()
    term = capsys.readouterr()
    logged = " ".join(r.getMessage() for r in caplog.records)
    for text in (term.out, term.err, logged):
        assert PASSWORD not in text and KEY not in text and "oddly-named" not in text
    assert "connecting to https://h.example/v1?api-key=***REDACTED***" in term.out
    assert "retrying https://h.example/v1" in logged


def test_a_short_url_password_does_not_blank_that_word_out_of_later_messages():
    """After a URL with the password 'pass', every later 'pass --yes' read '***REDACTED*** --yes'."""
    from cresowlve_core.secrets import REDACTED, scrub

    assert scrub("http://user:pass@h/v1") == "http://h/v1"
    assert scrub("pass --yes to confirm") == "pass --yes to confirm"
    # a long one is still stripped wherever it reappears, even after a short one was seen inside it
    assert scrub("https://me:pass-s3cr3t-long@h/v1") == "https://h/v1"
    assert scrub("bare pass-s3cr3t-long here") == f"bare {REDACTED} here"


def test_the_main_jobs_key_variable_name_is_not_redacted_but_its_key_is(monkeypatch):
    """`CRESOWLVE_API_KEY_ENV=OPENAI_API_KEY cresowlve run`: the variable's name looked like a credential
    (its own name holds KEY), so every manifest recorded `"api_key_env": "***REDACTED***"` and a wrong
    key's stop said `to go on: set a valid key in $***REDACTED***`."""
    from cresowlve_core.secrets import REDACTED, scrub

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789")
    monkeypatch.setenv("CRESOWLVE_API_KEY_ENV", "OPENAI_API_KEY")
    monkeypatch.setenv("CRESOWLVE_JUDGE_API_KEY_ENV", "JUDGE_PROVIDER_KEY")
    monkeypatch.setenv("JUDGE_PROVIDER_KEY", "judge-canary-0123456789")
    text = '{"api_key_env": "OPENAI_API_KEY", "judge": "JUDGE_PROVIDER_KEY"} sent sk-canary-0123456789'
    assert scrub(text) == f'{{"api_key_env": "OPENAI_API_KEY", "judge": "JUDGE_PROVIDER_KEY"}} sent {REDACTED}'
    # a key put in the variable by mistake names no variable: it stays a secret
    monkeypatch.setenv("CRESOWLVE_API_KEY_ENV", "a1b2c3d4e5f6a7b8c9d0")
    assert scrub("environment variable 'a1b2c3d4e5f6a7b8c9d0' is not set") == f"environment variable '{REDACTED}' is not set"
