"""Fixtures of the label serve / store / export tests: small rows files of real stages, and a
``personalign label serve`` subprocess with a tiny JSON client."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, cli_env

OWN_TASK = ROOT / "examples" / "own_task"


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def demo_rows(tmp_path) -> Path:
    """The first 6 rows of the relevance demo (ids demo-000 .. demo-005)."""
    lines = DEMO.read_text(encoding="utf-8").splitlines()[:6]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def multiclass_stage(tmp_path) -> Path:
    """The own-task example stage with a list of labels as its output (kind multiclass)."""
    text = (OWN_TASK / "stage.toml").read_text(encoding="utf-8")
    text = text.replace('kind = "binary"', 'kind = "multiclass"').replace(
        'type = "bool"', 'type = ["follows", "partly", "ignores"]').replace('objective = "f1"', 'objective = "kappa"')
    path = tmp_path / "stage.toml"
    path.write_text(text, encoding="utf-8")
    return path


class Server:
    """``personalign label serve ROWS --stage STAGE --store STORE --port 0`` in a subprocess."""

    def __init__(self, rows: Path, stage: str, store: str, *extra: str, runs: Path | None = None):
        cmd = [sys.executable, "-m", "personalign", "label", "serve", str(rows), "--stage", stage,
               "--store", store, "--port", "0", *extra]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(runs), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.url = self._wait_for_url(timeout=90)

    def _wait_for_url(self, timeout: float) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sel.select(timeout=0.5):
                line = self.proc.stdout.readline()
                if not line:
                    break
                if line.startswith("serving "):
                    return line.split(" at ", 1)[1].split()[0].rstrip("/")
        self.proc.kill()
        raise AssertionError(f"label serve did not start: {self.proc.stderr.read()[-2000:]}")

    def request(self, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def label(self, annotator: str, row_id: str, value) -> tuple[int, dict]:
        return self.request("/api/label", {"annotator": annotator, "row_id": row_id, "value": value})

    def state(self, annotator: str) -> dict:
        status, data = self.request(f"/api/state?annotator={annotator}")
        assert status == 200, data
        return data

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture
def start_server():
    """``start_server(rows, stage, store, *extra)`` -> a running :class:`Server` (stopped after the test)."""
    started: list[Server] = []

    def start(*args, **kwargs) -> Server:
        server = Server(*args, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    """A throwaway PostgreSQL server on 127.0.0.1 (initdb + pg_ctl, run as ``nobody`` when the tests
    run as root, as PostgreSQL requires): ``postgresql+psycopg://postgres@127.0.0.1:PORT``. Skips when
    PostgreSQL's binaries or the psycopg driver are absent."""
    import shutil
    import tempfile

    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL (initdb, pg_ctl) is not installed")
    pytest.importorskip("psycopg", reason="the psycopg driver (personalign[postgres]) is not installed")
    root = Path(tempfile.mkdtemp(prefix="personalign-pg-"))
    as_user = {}
    if os.geteuid() == 0:
        os.chown(root, 65534, 65534)
        as_user = {"user": 65534, "group": 65534, "extra_groups": []}
    port = _free_port()
    run = dict(capture_output=True, text=True, timeout=120, cwd=root, **as_user)
    made = subprocess.run([initdb, "-D", str(root / "data"), "-U", "postgres", "-A", "trust", "--no-sync",
                           "-E", "UTF8"], **run)
    assert made.returncode == 0, made.stderr
    up = subprocess.run([pg_ctl, "-D", str(root / "data"), "-w", "-l", str(root / "log"), "-o",
                         f"-h 127.0.0.1 -p {port} -k {root} -F", "start"], **run)
    assert up.returncode == 0, up.stderr + (root / "log").read_text()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([pg_ctl, "-D", str(root / "data"), "-m", "immediate", "stop"], **run)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A fresh, empty label store: an SQLite file, or a new database on :func:`postgres_server`."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'labels.db'}"
    import uuid

    server = request.getfixturevalue("postgres_server")  # skips when PostgreSQL or psycopg is absent
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.replace("postgresql+psycopg", "postgresql") + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"
