"""Fixtures for the sweep tests: a mock LM (litellm custom provider with latency, from
``benchmarks/_mock_lm.py``), a small LLM search space, and a CLI runner with the mock registered."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, cli_env

MOCK_SCRIPT = ROOT / "benchmarks" / "_mock_lm.py"

MOCK_SPACE = """
strategies = ["zero-shot", "criteria"]
[evaluation]
minibatch_size = 3
[pruner]
kind = "none"
[lm]
temperature = { low = 0.0, high = 1.0 }
optimizer = ["none", "labeled"]
[optimizer.labeled]
k = { low = 0, high = 4 }
"""


def load_mock():
    spec = importlib.util.spec_from_file_location("_mock_lm", MOCK_SCRIPT)
    module = sys.modules.get("_mock_lm")
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["_mock_lm"] = module
        spec.loader.exec_module(module)
    return module


@pytest.fixture
def mock_lm():
    """Register the ``mock`` litellm provider in this process; returns the module (CALLS counter)."""
    module = load_mock()
    module.register()
    return module


@pytest.fixture
def mock_space(tmp_path) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(MOCK_SPACE)
    return path


def sweep_cmd(runs: Path, space: Path, *extra: str, n_trials: int = 6, latency_ms: int = 300, limit: int = 6) -> list[str]:
    """``personalign sweep relevance ...`` run through the mock-registering wrapper script."""
    return [sys.executable, str(MOCK_SCRIPT), "sweep", "relevance", "--data", str(DEMO), "--space", str(space),
            "--n-trials", str(n_trials), "--limit", str(limit), "--lm", f"mock/relevance-{latency_ms}ms",
            "--no-cache", "--n-boot", "100", "--split", "val", "--json", *extra]


def run(cmd: list[str], runs: Path, timeout: int = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=cli_env(runs), timeout=timeout)
    out = None
    if proc.returncode == 0 and proc.stdout.strip():
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    return proc, out


def spawn(cmd: list[str], runs: Path, log: Path) -> subprocess.Popen:
    """Start ``cmd``; stdout goes to ``log.with_suffix('.out')``, stderr to ``log.with_suffix('.err')``."""
    return subprocess.Popen(cmd, stdout=open(log.with_suffix(".out"), "w"), stderr=open(log.with_suffix(".err"), "w"),
                            cwd=ROOT, env=cli_env(runs))
