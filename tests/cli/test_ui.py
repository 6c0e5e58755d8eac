"""``personalign ui``: MLflow's UI on the project's store, offline and on loopback only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.cli.test_cli import assert_one_line_error, run_cli
from tests.conftest import ROOT, cli_env

# Loaded by every Python process of the server (PYTHONPATH): refuses and records any connection
# that is not loopback or a Unix socket.
GUARD = '''
import ipaddress, os, socket
_real = socket.socket.connect
def _guarded(self, address):
    if isinstance(address, tuple):
        host = address[0]
        try:
            local = host in ("localhost", "") or ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = False
        if not local:
            with open(os.environ["NETWORK_LOG"], "a") as fh:
                fh.write(repr(address) + "\\n")
            raise OSError("network refused by test guard")
    return _real(self, address)
socket.socket.connect = _guarded
_real_gai = socket.getaddrinfo
def _guarded_gai(host, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else str(host)
    try:
        local = name in ("localhost", "", "None") or ipaddress.ip_address(name).is_loopback
    except ValueError:
        local = False
    if not local:
        with open(os.environ["NETWORK_LOG"], "a") as fh:
            fh.write("lookup " + name + "\\n")
        raise socket.gaierror(socket.EAI_NONAME, "network refused by test guard")
    return _real_gai(host, *args, **kwargs)
socket.getaddrinfo = _guarded_gai
'''


def test_ui_command_is_offline_and_loopback(runs_dir, monkeypatch):
    from personalign.cli._ui import ui_command

    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    argv, env = ui_command(port=5123)
    assert argv[1:3] == ["-m", "personalign._mlflow_ui"]  # mlflow server behind an origin check
    assert argv[argv.index("--allowed-hosts") + 1] == "127.0.0.1:5123"
    assert argv[argv.index("--cors-allowed-origins") + 1] == "http://127.0.0.1:5123"
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "5123"
    assert argv[argv.index("--backend-store-uri") + 1] == f"sqlite:///{runs_dir / 'mlflow.db'}"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and env["MLFLOW_DISABLE_TELEMETRY"] == "true"
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")  # an explicit choice wins
    assert ui_command()[1]["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"


def test_ui_without_a_store_is_a_one_line_error(tmp_path):
    assert_one_line_error(run_cli("ui", env=cli_env(tmp_path / "runs")), "no MLflow store at", "mlflow.db")
    assert_one_line_error(run_cli("ui", "--tracking-uri", "http://127.0.0.1:5000", env=cli_env(tmp_path / "runs")),
                          "is an MLflow server already")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_ui(*args: str, cwd: Path, env: dict[str, str], log: Path, timeout: float = 120) -> Iterator[str]:
    """``personalign ui --port PORT *args`` (a free port) until it answers ``/health``: yields its base
    URL; stopped with its whole process group afterwards. Its output goes to ``log``."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "personalign", "ui", "--port", str(port), *args], cwd=cwd, env=env,
                              stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            try:
                if urllib.request.urlopen(f"{base}/health", timeout=2).read() == b"OK":
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the MLflow UI did not answer /health in {timeout:g} s: " + log.read_text()[-2000:])
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@pytest.mark.slow  # starts the MLflow server (~10-30 s)
def test_ui_starts_without_reaching_the_network(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    import mlflow

    mlflow.MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}").search_experiments()  # create the store
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "network.log"
    port = _free_port()
    env = cli_env(runs, NETWORK_LOG=str(log),
                  PYTHONPATH=os.pathsep.join([str(guard), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for key in ("LITELLM_LOCAL_MODEL_COST_MAP", "MLFLOW_DISABLE_TELEMETRY"):
        env.pop(key, None)  # as a user's shell: only `personalign ui` sets them
    out = tmp_path / "ui.out"
    proc = subprocess.Popen([sys.executable, "-m", "personalign", "ui", "--port", str(port)], cwd=tmp_path, env=env,
                            stdout=out.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        body = None
        for _ in range(180):
            if proc.poll() is not None:
                break
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        assert body == b"OK", (proc.poll(), out.read_text()[-3000:])
        time.sleep(8)  # what the server does right after start-up (plain `mlflow ui` fetches the cost map here)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    output = out.read_text()
    assert not log.exists() or log.read_text() == "", log.read_text()
    assert "cost map" not in output, output[-2000:]
    assert not (tmp_path / "mlartifacts").exists() and not (tmp_path / "mlruns").exists()


def test_stopping_the_ui_stops_the_servers_whole_process_group():
    """mlflow server leaves its workers running when only its own process is signalled (a fresh
    user found 7 huey consumers spinning after `kill`): the command stops the whole group."""
    import os
    import subprocess

    from personalign.cli._ui import _stop_group

    server = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"], start_new_session=True)
    try:
        _stop_group(server, grace=5.0)
        with pytest.raises(ProcessLookupError):
            os.killpg(server.pid, 0)  # no process of the group is left
    finally:
        try:
            os.killpg(server.pid, 9)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory) -> str:
    """An empty MLflow SQLite store (what `personalign compare` creates), as a tracking URI."""
    import mlflow

    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return f"sqlite:///{db}"


def test_ui_opens_only_an_existing_mlflow_store(tmp_path, mlflow_store):
    """Security review 2: a garbage file with SQLite's header and `file:///etc` printed MLflow's
    traceback (exit 0); an unrelated SQLite database got MLflow's ~60 tables and was served."""
    import sqlite3

    from personalign.cli._ui import check_store

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\x00" + b"garbage" * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE experiments (x)")  # a name MLflow uses, and nothing else of it
    before = other.read_bytes()
    env = cli_env(tmp_path / "runs")
    assert_one_line_error(run_cli("ui", "--port", "5999", "--tracking-uri", f"sqlite:///{garbage}", env=env),
                          "is not a readable SQLite database")
    assert_one_line_error(run_cli("ui", "--port", "5999", "--tracking-uri", f"sqlite:///{other}", env=env),
                          f"{other} is not an MLflow store (no table alembic_version, runs")
    assert other.read_bytes() == before and not list(tmp_path.glob("other.db-*"))  # opened read-only
    assert_one_line_error(run_cli("ui", "--port", "5999", "--tracking-uri", "file:///etc", env=env),
                          "/etc is not an MLflow file store")
    store = tmp_path / "mlruns"
    (store / "0").mkdir(parents=True)
    (store / "0" / "meta.yaml").write_text("experiment_id: '0'\nname: Default\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
        with pytest.raises(Exception, match="MLFLOW_ALLOW_FILE_STORE=true"):
            check_store(str(store))
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        check_store(str(store))  # a file store, opted in: served
    check_store(mlflow_store)


def test_ui_error_lines_escape_a_newline_in_the_uri(tmp_path):
    proc = run_cli("ui", "--tracking-uri", f"sqlite:///{tmp_path}/a\nb.db", env=cli_env(tmp_path / "runs"))
    assert_one_line_error(proc, "no MLflow store at", "a\\nb.db")


def test_ui_on_a_port_in_use_is_one_line_before_the_server_starts(tmp_path, mlflow_store):
    """Security review 2: the server printed 13 lines of bind errors and the command exited 0."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli("ui", "--port", str(port), "--tracking-uri", mlflow_store, env=cli_env(tmp_path / "runs"),
                       timeout=60)
    assert_one_line_error(proc, f"--port {port}: cannot listen on 127.0.0.1:{port}", "give another port")


def test_a_server_that_stops_with_an_error_is_one_line_naming_its_log(tmp_path, mlflow_store, monkeypatch):
    import personalign.cli._ui as ui
    import personalign.tracking

    failing = [sys.executable, "-c", "import sys; print('Traceback: the server failed'); sys.exit(3)"]
    monkeypatch.setattr(ui, "ui_command", lambda uri, port: (failing, dict(os.environ)))
    monkeypatch.setattr(personalign.tracking, "runs_page_url", lambda uri, base: base)
    with pytest.raises(ui.ServerExited, match="stopped with exit code 3; its output is in ") as exc:
        ui.run_ui(tracking_uri=mlflow_store, port=_free_port())
    log = str(exc.value).rsplit(" ", 1)[-1]
    assert "the server failed" in open(log).read()
    os.unlink(log)


def _group_running(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that are not zombies (from /proc)."""
    out = []
    for stat in os.listdir("/proc"):
        try:
            text = open(f"/proc/{stat}/stat").read()
        except (OSError, ValueError):
            continue
        fields = text.rsplit(")", 1)[-1].split()
        if stat.isdigit() and int(fields[2]) == pgid and fields[0] != "Z":
            out.append(text[:80])
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_servers_group_stops_when_ui_dies_by_sigkill():
    """`personalign ui` killed by SIGKILL runs no cleanup: the kernel signals the server's group
    leader (PR_SET_PDEATHSIG), which stops the whole group -- here a server with two workers."""
    parent = subprocess.Popen([sys.executable, "-c", (
        "import os, subprocess, sys, time\n"
        "from personalign.cli._ui import GROUP_LEADER\n"
        "p = subprocess.Popen([sys.executable, '-c', GROUP_LEADER, str(os.getpid()), 'sh', '-c', "
        "'sleep 300 & sleep 300 & wait'], start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(300)\n")], stdout=subprocess.PIPE, text=True)
    leader = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 20
        while len(_group_running(leader)) < 4 and time.monotonic() < deadline:  # leader, sh, two sleeps
            time.sleep(0.1)
        assert len(_group_running(leader)) == 4, _group_running(leader)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 15
        while _group_running(leader) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _group_running(leader) == []
    finally:
        try:
            os.killpg(leader, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow  # starts the MLflow server twice (~10-30 s each)
@pytest.mark.parametrize("sig,code", [(signal.SIGHUP, 129), (signal.SIGKILL, -9)])
def test_hangup_or_kill_of_ui_stops_the_whole_mlflow_server(tmp_path, mlflow_store, sig, code):
    """Security review 2: `kill -HUP` of ui left the MLflow server, uvicorn and huey consumers running."""
    port = _free_port()
    out = tmp_path / "ui.out"
    proc = subprocess.Popen([sys.executable, "-m", "personalign", "ui", "--port", str(port), "--tracking-uri",
                             mlflow_store], cwd=tmp_path, env=cli_env(tmp_path / "runs"), stdout=out.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    leader = None
    try:
        for _ in range(180):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, out.read_text()
                time.sleep(0.5)
        leader = int(open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()[0])
        assert len(_group_running(leader)) >= 3  # the leader, mlflow server, uvicorn (and more)
        os.kill(proc.pid, sig)
        assert proc.wait(timeout=30) == code, out.read_text()
        deadline = time.monotonic() + 20
        while _group_running(leader) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _group_running(leader) == []
        if sig == signal.SIGHUP:
            assert out.read_text().strip().splitlines()[-1] == "interrupted (SIGHUP): no complete result written"
    finally:
        for pgid in (proc.pid, leader):
            try:
                os.killpg(pgid, signal.SIGKILL) if pgid else None
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("port", ["５０００", "0", "65536", "50 00", "-1"])
def test_a_port_that_is_not_ascii_digits_in_range_is_refused(port):
    from personalign.cli._ui import parse_port
    from personalign.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="is not a TCP port"):
        parse_port(port)
    assert parse_port(" 5000 ") == 5000
