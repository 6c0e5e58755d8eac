"""``personalign ui``: MLflow's UI on the project's store, offline and on loopback only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

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
    assert argv[1:4] == ["-m", "mlflow", "server"]
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
