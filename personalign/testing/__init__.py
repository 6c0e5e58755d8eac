"""Test doubles and conformance suites for personalign, shipped with the package (as
``dspy.utils.dummies`` and ``optuna.testing`` are). Nothing here reaches the network.

* :class:`~personalign.testing.dummies.SchemaDummyLM` -- a DSPy ``DummyLM`` that answers any
  signature with typed placeholders (no model);
* :mod:`personalign.testing.mock_provider` -- the ``mock`` litellm provider (deterministic
  answers, optional latency), for code that goes through litellm;
* :mod:`personalign.testing.faults` -- a litellm provider injecting seeded faults (exceptions,
  timeouts, empty outputs) into another provider;
* :mod:`personalign.testing.openai_server` -- a real OpenAI-compatible HTTP server on 127.0.0.1
  (latency, 429s past ``max_in_flight``, seeded HTTP faults, hangs, dropped connections;
  ``stats()``), callable as ``openai_server(latency=...)`` and runnable with ``python -m``;
  :mod:`personalign.testing.server` serves a real embedded model through llama-cpp-python's;
* :class:`~personalign.testing.suites.StageTestCase` / :class:`~personalign.testing.suites.OptimizerTestCase`
  -- pytest suites a new stage or optimizer subclasses (they import pytest; the rest does not).

Importing ``personalign`` does not import this package; importing this package imports nothing
heavy until a name is used.
"""

from __future__ import annotations

from personalign.registry import resolve

_LAZY = {
    "SchemaDummyLM": "personalign.testing.dummies",
    "SchemaEngine": "personalign.testing.dummies",
    "StageTestCase": "personalign.testing.suites",
    "OptimizerTestCase": "personalign.testing.suites",
    "FaultInjector": "personalign.testing.faults",
    "OpenAIServer": "personalign.testing.openai_server",
    "Faults": "personalign.testing.openai_server",
}


def __getattr__(name: str):
    if name in _LAZY:
        return resolve(f"{_LAZY[name]}:{name}")
    raise AttributeError(name)


__all__ = list(_LAZY)
