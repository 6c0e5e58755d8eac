"""Named, lazily imported entries: the one registry of strategies, optimizers and stage parts.

An entry names its object by a ``"module:attr"`` string, imported only when the entry is used,
so listing names (``personalign --help``, ``personalign stages``) imports no heavy library.
:func:`resolve` is the one ``"module:attr"`` resolver of the package (stage loaders, metrics,
signatures, objectives, sweep spaces). This module imports nothing but the standard library
and :mod:`personalign.errors`: every layer may use it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Iterable, Iterator, TypeVar

from personalign.errors import ConfigurationError


def resolve(target: Any) -> Any:
    """The object a ``"module:attr"`` or ``"/absolute/file.py:attr"`` string names (imported now,
    a file by :func:`import_file`); any other value unchanged.

    Raises:
        ValueError: a string without ``:``. ImportError / AttributeError: no such module / attribute.
        ConfigurationError: a file that does not import.
    """
    if not isinstance(target, str):
        return target
    module, sep, attr = target.rpartition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attr', got {target!r}")
    if module.endswith(".py") and Path(module).is_absolute():
        return getattr(import_file(module), attr)
    return getattr(importlib.import_module(module), attr)


def resolve_callable(target: Any, key: str) -> Any:
    """:func:`resolve`, then the object must be callable (a function, a class): what a stage's
    ``loader``, ``metric``, ``feedback_metric`` and ``objective`` name.

    Raises:
        ConfigurationError: one line naming ``key`` and what the reference names instead.
    """
    obj = resolve(target)
    if not callable(obj):
        from personalign.errors import ConfigurationError

        raise ConfigurationError(f"{key} = {target!r:.200} names {type(obj).__name__} {obj!r:.40}, not a function")
    return obj


_files: dict[Path, Any] = {}
_lock = threading.RLock()


def import_file(path: str | Path) -> Any:
    """The module of the Python file ``path``, imported once per process (by resolved path) under a
    private name ``personalign_user_<sha>``; its directory is not added to ``sys.path``. Before it
    runs the file, one line on stderr names it (``note: importing code from PATH``): a file is
    imported only because the user named it, and they see which.

    Raises:
        ConfigurationError: no such file, or importing it raised (the message names the file and
            the exception's first line).
    """
    path = Path(path).expanduser().resolve()
    with _lock:
        if path in _files:
            return _files[path]
        if not path.is_file():
            raise ConfigurationError(f"{path}: no such Python file")
        name = "personalign_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.stderr.write(f"note: importing code from {path}\n")
        sys.stderr.flush()
        sys.modules[name] = module  # dataclasses and pydantic look their module up by name
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 -- the user's file is input: one line, no traceback
            sys.modules.pop(name, None)
            raise ConfigurationError(f"{path}: importing it failed: {type(exc).__name__}: "
                                     f"{(str(exc).splitlines() or [''])[0][:200]}") from None
        _files[path] = module
        return module


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


@dataclass(frozen=True)
class Deferred:
    """A registry entry known by name now and built (``make()``, which may import code) only when
    it is first asked for: a stage file's own strategies are listed and checked without running
    the files that define them."""

    name: str
    make: Any


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
        self._entries: dict[str, Any] = {}
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
        if not where:
            return list(self._entries)
        return [n for n in self._entries if all(getattr(self.info(n), k) == v for k, v in where.items())]

    def info(self, name: str) -> E:
        """The entry called ``name``.

        Raises:
            ConfigurationError: unknown name (the message lists the available ones).
        """
        try:
            entry = self._entries[name]
        except KeyError:
            raise ConfigurationError(
                f"unknown {self.what} '{name}'; available: {', '.join(self._entries)}") from None
        if isinstance(entry, Deferred):
            entry = self._entries[name] = entry.make()
        return entry

    def load(self, name: str, field: str = "target") -> Any:
        """Import the object ``field`` of entry ``name`` names (None when that field is None)."""
        target = getattr(self.info(name), field)
        return None if target is None else resolve(target)

    def create(self, name: str, **kwargs: Any) -> Any:
        """``load(name)(**kwargs)``."""
        return self.load(name)(**kwargs)

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

    def with_entry(self, entry: Entry) -> "Registry":
        """A new registry holding these entries and ``entry`` (last; replacing one of the same name)."""
        entries = [e for n, e in self._entries.items() if n != entry.name] + [entry]
        return type(self)(self.what, entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def param_names(cls: type) -> list[str]:
    """The keyword settings of ``cls.__init__`` along its class hierarchy (a ``**kwargs`` forwarded
    to a base class is resolved there), in declaration order: the one introspection of settings
    (scikit-learn's ``BaseEstimator._get_param_names``), for optimizers, strategies and sweep spaces."""
    import inspect

    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in names:
                names.append(p.name)
    return names


__all__ = ["Deferred", "Entry", "OptimizerInfo", "Registry", "StrategyInfo", "import_file", "param_names", "resolve",
           "resolve_callable"]
