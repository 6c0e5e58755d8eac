"""Fixtures for the data-layer tests.

Real data lives outside the repository in ``../shared/data`` (relative to the project root)
or wherever ``PERSONALIGN_SHARED_DATA`` points; tests that need it skip when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def shared_data_dir() -> Path:
    env = os.environ.get("PERSONALIGN_SHARED_DATA")
    return Path(env) if env else (ROOT / ".." / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "README.md").exists():
        pytest.skip(f"real data not found at {d} (set PERSONALIGN_SHARED_DATA or check out ../shared/data)")
    return d


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES
