"""Fixtures for the optimizer tests: a schema-following DummyLM
(:class:`personalign.testing.dummies.SchemaDummyLM`) and a tiny relevance train/val set."""

from __future__ import annotations

import threading
from pathlib import Path

import dspy
import pytest

from personalign.testing.dummies import SchemaDummyLM

ROOT = Path(__file__).resolve().parents[2]

# the relevance stage's teleprompter settings (metric and label field): wrappers have no stage defaults
REL = {"metric": __import__("personalign.metrics", fromlist=["relevance_accuracy"]).relevance_accuracy,
       "label_field": "relevant"}
DEMO = ROOT / "examples" / "relevance_demo.jsonl"


@pytest.fixture
def dummy_lm():
    return SchemaDummyLM()


@pytest.fixture(scope="session")
def relevance_sets():
    from personalign.data import load_relevance

    rows = load_relevance(DEMO)
    train = [r.to_dspy() for r in rows if r.split == "train"]
    val = [r.to_dspy() for r in rows if r.split == "val"]
    return train, val


@pytest.fixture
def tiny(relevance_sets):
    """8 train / 6 val relevance examples (both labels in each)."""
    train, val = relevance_sets
    return train[:8], val[:6]


@pytest.fixture(autouse=True)
def no_configure_in_worker_threads(monkeypatch):
    """Fail any ``dspy.configure`` (or ``dspy.settings.configure``) from a non-main thread."""
    calls = []
    real = type(dspy.settings).configure

    def guarded(self, **kwargs):
        calls.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            raise AssertionError(f"dspy.configure called from worker thread {threading.current_thread().name}")
        return real(self, **kwargs)

    monkeypatch.setattr(type(dspy.settings), "configure", guarded)
    monkeypatch.setattr(dspy, "configure", lambda **kw: guarded(dspy.settings, **kw))
    yield calls
