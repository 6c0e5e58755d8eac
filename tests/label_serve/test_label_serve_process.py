"""``personalign label serve`` as a process: SIGKILL while labels are being posted loses no label
the server acknowledged and duplicates none; a restart resumes each annotator; bad input is one
line and exit 2; a 200 MB body is refused unread; 20 annotators at once, with undo, get no 503."""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ROOT, cli_env
from tests.label_serve.conftest import write_rows

N_ROWS = 120


def _rows(tmp_path):
    return write_rows(tmp_path / "rows.jsonl", [
        {"id": f"r{i:03d}", "split": "test", "prompt_id": f"p{i % 7}", "prompt": f"Plan a trip number {i}.",
         "attribute": f"The user likes thing {i}."} for i in range(N_ROWS)])


def test_sigkill_mid_session_loses_and_duplicates_nothing(tmp_path, start_server):
    rows, db = _rows(tmp_path), tmp_path / "labels.db"
    store = f"sqlite:///{db}"
    server = start_server(rows, "relevance", store)
    assert server.label("bob", "r000", True)[0] == 200
    assert server.label("bob", "r001", True)[0] == 200
    assert server.label("bob", "r001", False)[0] == 200  # a resubmission replaces
    assert server.label("bob", "r002", True)[0] == 200
    assert server.request("/api/undo", {"annotator": "bob"})[0] == 200  # r002 undone

    acked: dict[str, bool] = {}
    sent: dict[str, bool] = {}

    def alice() -> None:
        for i in range(N_ROWS):
            rid, value = f"r{i:03d}", i % 3 == 0
            sent[rid] = value
            try:
                status, _ = server.label("alice", rid, value)
            except OSError:  # the server died under us
                return
            if status == 200:
                acked[rid] = value

    worker = threading.Thread(target=alice)
    worker.start()
    deadline = time.monotonic() + 60
    while len(acked) < 25 and time.monotonic() < deadline and worker.is_alive():
        time.sleep(0.005)
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL  # mid-session: alice is still posting
    worker.join(timeout=60)
    assert 25 <= len(acked) < N_ROWS

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = conn.execute("SELECT annotator, row_id, value FROM personalign_labels ORDER BY id").fetchall()
    keys = [(a, r) for a, r, _ in stored]
    assert len(keys) == len(set(keys))  # no label twice
    mine = {r: v == "true" for a, r, v in stored if a == "alice"}
    assert all(mine.get(rid) == value for rid, value in acked.items())  # every acknowledged label is there
    assert all(sent[rid] == value for rid, value in mine.items())  # and nothing that was not sent
    assert len(mine) - len(acked) <= 1  # at most the one request in flight when killed
    assert {r: v for a, r, v in stored if a == "bob"} == {"r000": "true", "r001": "false"}

    again = start_server(rows, "relevance", store)  # a restart resumes each annotator where they stopped
    s = again.state("alice")
    assert s["progress"]["done"] == len(mine) and s["row"]["id"] == f"r{len(mine):03d}"
    assert again.state("bob")["row"]["id"] == "r002"
    status, s = again.label("alice", s["row"]["id"], True)
    assert status == 200 and s["progress"]["done"] == len(mine) + 1
    assert again.stop(signal.SIGTERM) == 143


def _serve(*args: str, runs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "personalign", "label", "serve", *args], capture_output=True,
                          text=True, cwd=ROOT, env=cli_env(runs), timeout=120)


def _one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(tmp_path, demo_rows):
    runs = tmp_path / "runs"
    bad = write_rows(tmp_path / "bad.jsonl", [{"id": "a", "prompt": "p", "attribute": "x"},
                                              {"id": "b", "prompt": "p"}])
    _one_line(_serve(str(bad), "--stage", "relevance", runs=runs), "bad.jsonl:2: field 'attribute': missing")
    _one_line(_serve(str(demo_rows), "--stage", "mcq", runs=runs), "stage 'mcq': its output 'answer_index' is int")
    _one_line(_serve(str(demo_rows), "--stage", "relevance", "--annotator", "two words", runs=runs),
              "--annotator: annotator name 'two words'")
    assert not (runs / "labels.db").exists()  # nothing was created for a refused start
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        _one_line(_serve(str(demo_rows), "--stage", "relevance", "--port", str(port), runs=runs),
                  f"port {port} on 127.0.0.1 is in use")


def test_a_read_only_store_is_refused_at_start_and_keeps_its_labels(tmp_path, demo_rows):
    """A store file, or its folder, that cannot be written: one line at start, every label kept.
    (As root every file is writable, so the server then runs as ``nobody``.)"""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from personalign.labels.store import LabelStore

    base = Path(tempfile.mkdtemp(prefix="personalign-ro-"))
    try:
        os.chmod(base, 0o755)
        for name in ("runs", "home"):
            (base / name).mkdir(mode=0o777)
            os.chmod(base / name, 0o777)
        rows = shutil.copy(demo_rows, base / "rows.jsonl")
        os.chmod(rows, 0o644)
        folder, db = base / "store", base / "store" / "labels.db"
        folder.mkdir()
        LabelStore(f"sqlite:///{db}").put("relevance", "demo-000", "alice", True, "h")
        prefix = []
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("running as root (every file writable) and setpriv (util-linux) is absent")
            prefix = [shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = cli_env(base / "runs", HOME=str(base / "home"))
        for file_mode, folder_mode in ((0o444, 0o755), (0o666, 0o555)):
            os.chmod(db, file_mode)
            os.chmod(folder, folder_mode)
            proc = subprocess.run([*prefix, sys.executable, "-m", "personalign", "label", "serve", str(rows),
                                   "--stage", "relevance", "--store", f"sqlite:///{db}", "--port", "0"],
                                  capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
            _one_line(proc, f"label store sqlite:///{db}: read-only")
        os.chmod(folder, 0o755)
        labels = LabelStore(f"sqlite:///{db}", write=False).labels()
        assert [(lab.row_id, lab.annotator, lab.value) for lab in labels] == [("demo-000", "alice", True)]
    finally:
        os.chmod(base / "store", 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_a_200_mb_body_is_refused_before_it_is_read(tmp_path, demo_rows, start_server):
    """Issue 46: a 200 MB POST was buffered whole and accepted. Here only its headers are sent: the
    413 comes back at once, and the server goes on answering."""
    import json

    server = start_server(demo_rows, "relevance", f"sqlite:///{tmp_path / 'labels.db'}")
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(f"POST /api/label HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {200 * 1024 * 1024}\r\n\r\n".encode() + b"{" * 1024)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = conn.recv(4096)  # socket.timeout (10 s) if the server waited for the body
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and json.loads(body) == {"error": "the request body is over 1024 KiB"}
    assert server.label("alice", "demo-000", True)[0] == 200


def test_twenty_annotators_at_once_with_undo_get_no_false_locked(tmp_path, start_server):
    """Issue 46: 20 concurrent annotators with undo got 503 "locked for more than 5 s" from one
    server (an undo's unread cursor kept SQLite's read lock after its commit; SQLite's busy
    handler polls, so a writer could lose every poll for 5 s). Every request is answered 200 and
    the store holds exactly each annotator's labels minus the undone ones."""
    rows, db = _rows(tmp_path), tmp_path / "labels.db"
    server = start_server(rows, "relevance", f"sqlite:///{db}")
    failures: list = []

    def annotator(k: int) -> None:
        for i in range(24):
            status, data = server.label(f"a{k:02d}", f"r{i:03d}", i % 2 == 0)
            if status == 200 and i % 3 == 2:  # every third label is undone at once
                status, data = server.request("/api/undo", {"annotator": f"a{k:02d}"})
            if status != 200:
                failures.append((k, i, status, data))

    workers = [threading.Thread(target=annotator, args=(k,)) for k in range(20)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert failures == []
    with sqlite3.connect(db) as conn:
        stored = set(conn.execute("SELECT annotator, row_id, value FROM personalign_labels").fetchall())
    assert stored == {(f"a{k:02d}", f"r{i:03d}", "true" if i % 2 == 0 else "false")
                      for k in range(20) for i in range(24) if i % 3 != 2}
