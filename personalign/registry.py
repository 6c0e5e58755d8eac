"""Named, lazily imported entries: the one registry of strategies, optimizers and stage parts.

An entry names its object by a ``"module:attr"`` string, imported only when the entry is used,
so listing names (``personalign --help``, ``personalign stages``) imports no heavy library.
:func:`resolve` is the one ``"module:attr"`` resolver of the package (stage loaders, metrics,
signatures, objectives, sweep spaces). This module imports nothing but the standard library
and :mod:`personalign.errors`: every layer may use it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Generic, Iterable, Iterator, TypeVar

from personalign.errors import ConfigurationError


def resolve(target: Any) -> Any:
    """The object a ``"module:attr"`` string names (imported now); any other value unchanged.

    Raises:
        ValueError: a string without ``:``. ImportError / AttributeError: no such module / attribute.
    """
    if not isinstance(target, str):
        return target
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attr', got {target!r}")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Entry:
    """A registered object.

    Attributes:
        name: the name it is asked for by (CLI name).
        target: ``"module:attr"`` of the object (usually a class).
        summary: one line for --help and tracking.
    """

    name: str
    target: str
    summary: str


@dataclass(frozen=True)
class StrategyInfo(Entry):
    """A registered strategy of a stage (a ``dspy.Module`` class); the one place its kind is declared.

    Attributes:
        uses_lm: the strategy calls an LM (needs ``--lm``).
        trainable: the strategy must be compiled on train before it can predict.
        optimizer: ``"module:Class"`` of its own fit (an :class:`personalign.optimizers.Optimizer`),
            resolved only at the edge so that ``programs/`` never imports ``optimizers/``;
            required when ``trainable``.
    """

    uses_lm: bool
    trainable: bool
    optimizer: str | None = None

    def __post_init__(self) -> None:
        if self.trainable and not self.optimizer:
            raise ValueError(f"strategy {self.name}: trainable but names no optimizer")


@dataclass(frozen=True)
class OptimizerInfo(Entry):
    """A registered optimizer.

    Attributes:
        kind: ``"teleprompter"`` (wraps a DSPy teleprompter; compiles LM programs) or ``"fit"``
            (fits a scorer's parameters; see each class for the program protocol it needs).
    """

    kind: str


E = TypeVar("E", bound=Entry)


class Registry(Generic[E]):
    """Entries by name. ``create(name, **kwargs)`` imports and builds one.

    Args:
        what: what an entry is, for messages: ``"relevance strategy"``, ``"optimizer"``.
        entries: the entries, in listing order (names unique).

    Raises:
        ValueError: two entries share a name.
    """

    def __init__(self, what: str, entries: Iterable[E]):
        self.what = what
        self._entries: dict[str, E] = {}
        for e in entries:
            if e.name in self._entries:
                raise ValueError(f"duplicate {what} '{e.name}'")
            self._entries[e.name] = e

    @property
    def _plural(self) -> str:
        return self.what[:-1] + "ies" if self.what.endswith("y") else self.what + "s"

    def names(self, **where: Any) -> list[str]:
        """Names in listing order; ``where``: only entries whose attributes equal the given values
        (``names(kind="fit")``)."""
        return [n for n, e in self._entries.items() if all(getattr(e, k) == v for k, v in where.items())]

    def info(self, name: str) -> E:
        """The entry called ``name``.

        Raises:
            ConfigurationError: unknown name (the message lists the available ones).
        """
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigurationError(
                f"unknown {self.what} '{name}'; available: {', '.join(self._entries)}") from None

    def load(self, name: str, field: str = "target") -> Any:
        """Import the object ``field`` of entry ``name`` names (None when that field is None)."""
        target = getattr(self.info(name), field)
        return None if target is None else resolve(target)

    def create(self, name: str, **kwargs: Any) -> Any:
        """``load(name)(**kwargs)``."""
        return self.load(name)(**kwargs)

    def default_optimizer(self, name: str, **kwargs: Any) -> Any:
        """Strategies: instantiate the entry's own fit (its ``optimizer``); None when it has none."""
        cls = self.load(name, "optimizer")
        return None if cls is None else cls(**kwargs)

    def parse(self, spec: str) -> list[str]:
        """The names of a comma-separated list, each validated.

        Raises:
            ConfigurationError: an empty list or an unknown name.
        """
        names = [s.strip() for s in spec.split(",") if s.strip()]
        if not names:
            raise ConfigurationError(f"no {self._plural} given; available: {', '.join(self._entries)}")
        for n in names:
            self.info(n)
        return names

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def callable_module(module_name: str, target: str) -> None:
    """Make the module ``module_name`` callable as the function ``target`` names (``"module:attr"``,
    imported on the first call): ``personalign.compare`` and ``personalign.sweep`` are both a
    module and the verb of the same name (:mod:`personalign.api`), so ``import personalign.sweep.runner``
    and ``personalign.sweep(stage, data)`` both work."""
    import sys
    import types

    class _Verb(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return resolve(target)(*args, **kwargs)

    sys.modules[module_name].__class__ = _Verb


__all__ = ["Entry", "OptimizerInfo", "Registry", "StrategyInfo", "callable_module", "resolve"]
