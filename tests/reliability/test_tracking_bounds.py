"""Issue 38 item 3 (and the tracking parts of item 8): a tracking store that cannot answer fails in
one line within a stated bound, before any work, and writes nothing.

* a closed port and a server that accepts and never answers: refused within
  ``REACH_TIMEOUT_S`` (5 s) of the check -- the command ends well inside 30 s (it hung > 115 s);
* ``runs/mlflow.db`` that is a directory or not a database: one line, no MLflow retries (it took
  106 s and 37 lines);
* a store lock held by another process: waited for at most ``LOCK_TIMEOUT_S`` (was 600 s), then
  one line naming the lock file and the holder's pid;
* MLflow's HTTP client is bounded for personalign's commands (timeout, retries), unless the user
  set its variables.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from personalign import stores
from personalign.errors import ConfigurationError
from tests.reliability.hostile import DATA, STAGE, SilentServer, closed_port, refused_cleanly

COMPARE = ("compare", str(STAGE), "--data", str(DATA), "--strategies", "majority")
BOUND = 30  # seconds: a refused tracking store ends the command within this (import time included)


def test_closed_port_is_one_line_within_the_bound(tmp_path):
    port = closed_port()
    line, seconds = refused_cleanly(tmp_path, *COMPARE, "--tracking-uri", f"http://127.0.0.1:{port}",
                                    needles=(f"http://127.0.0.1:{port}", "cannot be reached", "connection refused"),
                                    timeout=120)
    assert seconds < BOUND, (seconds, line)


def test_server_that_never_answers_is_one_line_within_the_bound(tmp_path):
    with SilentServer() as server:
        line, seconds = refused_cleanly(tmp_path, *COMPARE, "--tracking-uri", f"http://127.0.0.1:{server.port}",
                                        needles=("cannot be reached", f"no answer within {stores.REACH_TIMEOUT_S:g} s"),
                                        timeout=120)
        assert server.accepted, "the check never connected"
    assert seconds < BOUND, (seconds, line)


@pytest.mark.parametrize("command", ["compare", "compile", "sweep"])
def test_unreachable_server_refused_by_every_tracked_command(tmp_path, command):
    url = f"http://127.0.0.1:{closed_port()}"
    args = {"compare": COMPARE,
            "compile": ("compile", str(STAGE), "--strategy", "majority", "--data", str(DATA), "--out", "p"),
            "sweep": ("sweep", str(STAGE), "--data", str(DATA), "--n-trials", "1")}[command]
    _, seconds = refused_cleanly(tmp_path, *args, "--tracking-uri", url, needles=("cannot be reached",))
    assert seconds < BOUND


def test_mlflow_db_that_is_a_directory_is_one_line_and_fast(tmp_path):
    (tmp_path / "runs" / "mlflow.db").mkdir(parents=True)
    line, seconds = refused_cleanly(tmp_path, *COMPARE, needles=("mlflow.db", "is a directory", "--no-track"))
    assert seconds < BOUND, (seconds, line)


def test_mlflow_db_that_is_not_a_database_is_one_line_and_fast(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mlflow.db").write_text("not a database\n" * 100)
    line, seconds = refused_cleanly(tmp_path, *COMPARE, needles=("mlflow.db", "not a database"))
    assert seconds < BOUND, (seconds, line)


HOLD = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1]); lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_held_store_lock_is_waited_for_a_bounded_time_and_named(tmp_path, monkeypatch):
    from personalign.tracking.store import Tracker

    db = tmp_path / "mlflow.db"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, f"{db}.lock"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(stores, "LOCK_TIMEOUT_S", 1.0)
        tracker = Tracker(f"sqlite:///{db}")
        t0 = time.monotonic()
        with pytest.raises(ConfigurationError) as err:
            tracker.check()
        waited = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    message = str(err.value)
    assert "\n" not in message
    assert f"{db}.lock" in message and f"process {holder.pid}" in message and "waited 1 s" in message, message
    assert 0.9 <= waited < 10, waited
    assert not db.exists()  # nothing created while the lock was held elsewhere


def test_the_default_lock_wait_is_bounded():
    assert 0 < stores.LOCK_TIMEOUT_S <= 60
    assert 0 < stores.REACH_TIMEOUT_S <= 10


def test_mlflow_http_client_is_bounded_unless_the_user_set_it(monkeypatch):
    for var in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")  # the user's own choice stays
    stores.bound_mlflow_http()
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == str(stores.MLFLOW_HTTP_TIMEOUT_S)
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR, MLFLOW_HTTP_REQUEST_TIMEOUT

    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == stores.MLFLOW_HTTP_TIMEOUT_S <= 30
    assert MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() == stores.MLFLOW_HTTP_BACKOFF_FACTOR


def test_reachability_check_hides_a_password():
    port = closed_port()
    with pytest.raises(ConfigurationError) as err:
        stores.check_reachable(f"http://user:s3cret-pw@127.0.0.1:{port}", timeout=2)
    assert "s3cret-pw" not in str(err.value) and "user:***@127.0.0.1" in str(err.value)


def test_a_server_that_answers_anything_is_reachable():
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stores.check_reachable(f"http://127.0.0.1:{server.server_port}", timeout=5)  # no error
    finally:
        server.shutdown()


@pytest.mark.parametrize("uri", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_tracking_store_is_refused(tmp_path, uri):
    """An in-memory SQLite store keeps nothing after the command (the re-attack: MLflow printed its
    INFO lines twice and `runs/mlartifacts` was created)."""
    refused_cleanly(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority", "--n-boot", "10",
                    "--tracking-uri", uri, needles=("in-memory database",))
