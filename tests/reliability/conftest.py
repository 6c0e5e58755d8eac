"""Fixtures for the reliability tests: a fresh DSPy cache per test and the ``mock`` provider."""

from __future__ import annotations

import pytest


@pytest.fixture
def fresh_cache(tmp_path, runs_dir, monkeypatch):
    """DSPy's cache pointed at an empty directory of this test (the previous cache restored after)."""
    import dspy

    from personalign.lm import configure_cache

    monkeypatch.setenv("DSPY_CACHEDIR", str(tmp_path / "cache"))
    monkeypatch.setattr(dspy, "cache", dspy.cache)  # restored after the test
    return configure_cache(tmp_path / "cache")


@pytest.fixture
def mock_handler():
    """The litellm handler of the ``mock`` provider (``benchmarks/_mock_lm.py``): deterministic answers
    to any DSPy signature, in JSON when the request carries a ``response_format``."""
    from tests.reliability.faults import handler_of, load_mock_module

    load_mock_module().register()
    return handler_of("mock")
