"""``serve-reports`` on a real socket: files inside the reports folder only, loopback Host names only."""

from __future__ import annotations

import http.client
import os
import socket
import threading

import pytest

from cresowlve_core.serve import HOST, make_server


@pytest.fixture
def served(tmp_path):
    reports = tmp_path / "reports"
    (reports / "sub").mkdir(parents=True)
    (reports / "index.html").write_text("<html>the index</html>")
    (reports / "sub" / "a.csv").write_text("x\n1\n")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", reports / "link.txt")  # a symlink out of the folder
    os.symlink(tmp_path, reports / "up")  # a directory symlink out of it
    os.symlink(reports / "sub" / "a.csv", reports / "inside.csv")  # a symlink that stays inside
    httpd = make_server(reports, 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res.status, body


def test_binds_loopback_and_serves_the_files_inside(served):
    port = served
    assert get(port, "/index.html", f"127.0.0.1:{port}") == (200, b"<html>the index</html>")
    assert get(port, "/", f"localhost:{port}") == (200, b"<html>the index</html>")
    assert get(port, "/sub/a.csv", f"127.0.0.1:{port}") == (200, b"x\n1\n")
    assert get(port, "/inside.csv", f"127.0.0.1:{port}") == (200, b"x\n1\n")


def test_refuses_symlinks_and_paths_out_of_the_folder(served):
    port, host = served, f"127.0.0.1:{served}"
    assert get(port, "/link.txt", host)[0] == 403
    assert get(port, "/up/secret.txt", host)[0] == 403
    for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/sub/..%5c..%5csecret.txt"):
        status, body = get(port, path, host)
        assert status in (403, 404) and b"outside" not in body, path
    assert get(port, "/nothing.html", host)[0] == 404
    assert get(port, "/sub/", host)[0] == 404  # no directory listing


def test_answers_only_loopback_host_names(served):
    port = served
    for host in (f"evil.example:{port}", "127.0.0.1", "localhost", f"127.0.0.1:{port + 1}", "", None):
        status, body = get(port, "/index.html", host)
        assert status == 403 and b"the index" not in body, host


def test_a_nul_byte_in_the_path_is_a_404_not_a_dropped_connection(served, capfd):
    """``/index.html%00``: before, resolving the path raised ValueError (embedded null byte) in the handler,
    the server printed a traceback and closed the connection without an answer."""
    port, host = served, f"127.0.0.1:{served}"
    for path in ("/%00", "/index.html%00", "/sub/%00a.csv"):
        assert get(port, path, host)[0] == 404, path
    assert "Traceback" not in capfd.readouterr().err
    assert get(port, "/index.html", host)[0] == 200


def test_a_name_too_long_or_a_symlink_loop_is_a_404_not_a_dropped_connection(served, capfd, tmp_path):
    """A path segment longer than the file system allows (ENAMETOOLONG) or a symlink loop inside the folder:
    before, ``is_dir``/``resolve`` raised in the handler, the server printed a traceback and closed the
    connection without an answer."""
    reports = tmp_path / "reports"
    os.symlink("loop_b", reports / "loop_a")
    os.symlink("loop_a", reports / "loop_b")
    port, host = served, f"127.0.0.1:{served}"
    for path in ("/" + "a" * 300, "/sub/" + "b" * 300, "/a/" * 2000, "/loop_a", "/loop_a/x.html"):
        assert get(port, path, host)[0] == 404, path[:40]
    assert "Traceback" not in capfd.readouterr().err
    assert get(port, "/index.html", host)[0] == 200


@pytest.mark.parametrize("files", [[], [".gitkeep"]])
def test_a_reports_folder_without_its_index_is_no_reports_not_a_served_404(tmp_path, capsys, monkeypatch, files):
    """A fresh checkout's reports/ holds only .gitkeep: serve-reports printed 'serving reports at
    http://127.0.0.1:8766/index.html', and that address answered 404."""
    from cresowlve_core import serve
    from cresowlve_core.cli import main

    monkeypatch.setattr(serve, "make_server", lambda *a: pytest.fail("the server was started"))
    for name in files:
        (tmp_path / name).write_text("")
    with socket.socket() as free:
        free.bind((HOST, 0))
        port = free.getsockname()[1]
    rc = main(["serve-reports", "--port", str(port), "--reports-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 2 and "serving" not in out
    assert err.strip() == (f"error: no reports at {tmp_path} (no index.html): render one with `cresowlve report "
                           "NOTEBOOK` or `cresowlve run`")
