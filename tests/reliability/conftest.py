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
    """The litellm handler of the ``mock`` provider (:mod:`personalign.testing.mock_provider`):
    deterministic answers to any DSPy signature, in JSON when the request carries a ``response_format``."""
    from personalign.testing import mock_provider
    from personalign.testing.faults import handler_of

    mock_provider.register()
    return handler_of("mock")
