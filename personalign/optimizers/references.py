"""The optimizer registry that also takes a user's optimizer by reference or entry point.

``predict@my_opt.py:MyFewShot``, ``predict@my_pkg.opts:MyFewShot`` or ``predict@mine`` (a name an
installed package publishes in the entry-point group :data:`ENTRY_POINT_GROUP`) name an
:class:`~personalign.optimizers.base.Optimizer` class outside the package. Its ``kind`` class
attribute says how compile drives it: ``"teleprompter"`` (default; built like the DSPy wrappers, with
the stage's metric, ``label_field``, ``lm``, ``seed`` and ``score`` -- subclass
:class:`~personalign.optimizers._teleprompter.TeleprompterOptimizer` or one of its wrappers) or
``"fit"`` (built with the stage's ``label``, ``positive``, ``group_key`` where its ``__init__`` takes them).
Nothing is imported until such a name is asked for.
"""

from __future__ import annotations

from typing import Any

from personalign.errors import ConfigurationError
from personalign.registry import OptimizerInfo, Registry

ENTRY_POINT_GROUP = "personalign.optimizers"


class OptimizerRegistry(Registry):
    """:class:`~personalign.registry.Registry` of optimizers whose :meth:`info` also resolves a
    ``module:Class`` / ``file.py:Class`` reference or an entry-point name (cached per name)."""

    def __init__(self, what: str, entries) -> None:
        super().__init__(what, entries)
        self._found: dict[str, OptimizerInfo] = {}

    def info(self, name: str) -> Any:
        if name in self or name in self._found:
            return self._found.get(name) or super().info(name)
        target = None
        if ":" in name:
            from personalign.stages.ref import resolve_ref

            target = resolve_ref(name)
        else:
            from importlib.metadata import entry_points

            eps = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
            target = eps[0].load() if eps else None
        if target is None:
            return super().info(name)  # the unknown-name error, listing the built-in names
        if not (isinstance(target, type) and hasattr(target, "compile")):
            raise ConfigurationError(f"optimizer '{name}' is a {type(target).__name__}, not an Optimizer class")
        doc = ((target.__doc__ or "").strip().splitlines() or [name])[0]
        info = OptimizerInfo(name, target, doc, getattr(target, "kind", "teleprompter"))
        self._found[name] = info
        return info


__all__ = ["ENTRY_POINT_GROUP", "OptimizerRegistry"]
