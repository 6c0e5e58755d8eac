"""Suite-wide fixtures.

* Offline by design: every test runs with outbound network connections refused (only loopback
  and Unix sockets are allowed), so any code path that reaches the network fails the test.
* Real data (``../shared/data``) is read in place; tests that need it skip with a reason when absent.
* Control flow runs on the tiny model: ``PERSONALIGN_LM`` is the tiny SmolLM2 for every test (and
  the CLI processes they start), so a test that does not name a model checks plumbing in seconds;
  quality tests name the shipped default (:data:`personalign.lm.DEFAULT_MODEL`, the 1.5B Qwen)
  explicitly and run it on small fixed samples.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "relevance_demo.jsonl"


def _is_local(address) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


TINY_MODEL = "local/smollm2-135m-instruct"


@pytest.fixture(autouse=True)
def tiny_model_by_default(monkeypatch):
    monkeypatch.setenv("PERSONALIGN_LM", TINY_MODEL)
    yield


TEST_MODELS_DIR = ROOT / "runs" / "models"


@pytest.fixture(autouse=True)
def test_model_cache(monkeypatch):
    """Tests never touch the user's real model cache: the assembled models live in the project's
    ``runs/models`` (assembled there once on a clean clone; tests of the cache itself use tmp dirs)."""
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(TEST_MODELS_DIR))
    yield


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Refuse any non-loopback connection for the duration of each test."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded(self, address):
        if not _is_local(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    def guarded_ex(self, address):
        if not _is_local(address):
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_ex)
    yield


def shared_data_dir() -> Path:
    env = os.environ.get("PERSONALIGN_SHARED_DATA")
    return Path(env) if env else (ROOT / ".." / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "README.md").exists():
        pytest.skip(f"real data not found at {d} (set PERSONALIGN_SHARED_DATA or check out ../shared/data)")
    return d


@pytest.fixture
def runs_dir(tmp_path, monkeypatch) -> Path:
    """A fresh runs/ directory (MLflow store, cache, results) for one test; the model cache is the
    tests' shared one (:data:`TEST_MODELS_DIR`), so nothing is re-assembled per test."""
    d = tmp_path / "runs"
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(d))
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(TEST_MODELS_DIR))
    return d


def cli_env(runs: Path | None = None, **extra: str) -> dict[str, str]:
    """Environment for running the CLI in a subprocess."""
    env = dict(os.environ)
    if runs is not None:
        env["PERSONALIGN_RUNS_DIR"] = str(runs)
        env["PERSONALIGN_MODELS_DIR"] = str(TEST_MODELS_DIR)
    env.update(extra)
    return env
