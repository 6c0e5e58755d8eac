"""A small name -> strategy class registry with lazy imports (Optuna-style injected strategies)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from personalign.errors import ConfigurationError


@dataclass(frozen=True)
class StrategyInfo:
    """A registered strategy.

    Attributes:
        target: ``"module:Class"`` of the strategy (a dspy.Module).
        summary: one line for --help and tracking.
        uses_lm: the strategy calls an LM (needs ``--lm``).
        trainable: the strategy must be compiled on train before it can predict.
        optimizer: ``"module:Class"`` of its default optimizer (an
            :class:`personalign.optimizers.Optimizer`), resolved only at the edge so that
            ``programs/`` never imports ``optimizers/``.
    """

    name: str
    target: str
    summary: str
    uses_lm: bool
    trainable: bool
    optimizer: str | None = None


class Registry:
    """Strategies of one stage, by name. ``create(name, **kwargs)`` imports and builds one."""

    def __init__(self, stage: str, entries: list[StrategyInfo]):
        self.stage = stage
        self._entries = {e.name: e for e in entries}

    def names(self) -> list[str]:
        return list(self._entries)

    def info(self, name: str) -> StrategyInfo:
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigurationError(
                f"unknown {self.stage} strategy '{name}'; available: {', '.join(self._entries)}"
            ) from None

    def load(self, name: str) -> type:
        module, _, cls = self.info(name).target.partition(":")
        return getattr(importlib.import_module(module), cls)

    def create(self, name: str, **kwargs):
        return self.load(name)(**kwargs)

    def default_optimizer(self, name: str, **kwargs):
        """Instantiate the strategy's default optimizer (None when it has none)."""
        target = self.info(name).optimizer
        if target is None:
            return None
        module, _, cls = target.partition(":")
        return getattr(importlib.import_module(module), cls)(**kwargs)

    def parse(self, spec: str) -> list[str]:
        """Parse a comma-separated list of names, validating each (raises ConfigurationError)."""
        names = [s.strip() for s in spec.split(",") if s.strip()]
        if not names:
            raise ConfigurationError(f"no {self.stage} strategies given; available: {', '.join(self._entries)}")
        for n in names:
            self.info(n)
        return names
