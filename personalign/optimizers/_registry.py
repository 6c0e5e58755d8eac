"""Optimizers by name, with lazy imports (so ``--optimizer bootstrap`` imports only that wrapper)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from personalign.errors import ConfigurationError


@dataclass(frozen=True)
class OptimizerInfo:
    """A registered optimizer.

    Attributes:
        name: the CLI name (``--optimizer NAME``); equals the class's ``name``.
        target: ``"module:Class"``.
        summary: one line for --help and tracking.
        kind: ``"teleprompter"`` (wraps a DSPy teleprompter; compiles LM programs such as the
            relevance judges) or ``"fit"`` (fits a scorer's parameters; see each class for the
            program protocol it needs).
    """

    name: str
    target: str
    summary: str
    kind: str


class OptimizerRegistry:
    """``create(name, **settings)`` imports and builds one optimizer."""

    def __init__(self, entries: list[OptimizerInfo]):
        self._entries = {e.name: e for e in entries}

    def names(self, kind: str | None = None) -> list[str]:
        return [n for n, e in self._entries.items() if kind is None or e.kind == kind]

    def info(self, name: str) -> OptimizerInfo:
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigurationError(f"unknown optimizer '{name}'; available: {', '.join(self._entries)}") from None

    def load(self, name: str) -> type:
        module, _, cls = self.info(name).target.partition(":")
        return getattr(importlib.import_module(module), cls)

    def create(self, name: str, **settings):
        return self.load(name)(**settings)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries)
