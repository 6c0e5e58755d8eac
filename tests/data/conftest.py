"""Fixtures for the data-layer tests (``shared_data`` comes from the suite-wide tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES
