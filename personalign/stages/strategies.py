"""A stage's strategy registry: the generic strategies its kind allows, bound to its signature
(:func:`personalign.programs.common.generic.bind_generic`, imported when one is first used), then
its own ``[strategies]`` (replacing a generic one of the same name). A strategy is a ``dspy.Module``
class whose class attributes say what it needs: ``uses_lm`` (default true), ``optimizer``
(``"module:Class"`` of its own fit; set = trainable), ``needs_logprobs``. Nothing is imported until
a strategy is used (:class:`personalign.registry.Deferred`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from personalign.errors import ConfigurationError
from personalign.registry import Deferred, StrategyInfo, resolve
from personalign.stages.coderef import STRATEGY_GROUP, check_ref

GENERIC = {
    "binary": ("all-yes", "all-no", "majority", "predict", "cot", "yes-prob", "minilm-logreg"),
    "multiclass": ("majority", "predict", "cot"),
    "scored": ("predict", "cot"),
}
_BIND = "personalign.programs.common.generic:bind_generic"


def reference_strategy(stage) -> str | None:
    """The trivial baseline a binary stage's comparison is read against: the constant that predicts
    the class its objective scores (``all-yes`` when the positive class is a true output, else
    ``all-no``); None for other stages."""
    if stage.kind != "binary":
        return None
    return "all-yes" if stage.positive else "all-no"


def strategy_info(name: str, target: Any, summary: str | None = None) -> StrategyInfo:
    """The registry entry of a strategy class ``target`` (imported), read from its class attributes.

    Raises:
        ConfigurationError: ``target`` is not a ``dspy.Module`` subclass (a function such as
            ``os.system`` or an instance would be *called* to build the program)."""
    import dspy

    if not (isinstance(target, type) and issubclass(target, dspy.Module)):
        raise ConfigurationError(f"strategies.{name}: a {type(target).__name__}, not a dspy.Module subclass")
    optimizer = getattr(target, "optimizer", None)
    doc = summary or ((getattr(target, "__doc__", None) or "").strip().splitlines() or [f"strategy {name}"])[0]
    return StrategyInfo(name, target, doc, uses_lm=bool(getattr(target, "uses_lm", True)),
                        trainable=bool(optimizer), optimizer=optimizer if isinstance(optimizer, str) else None)


def default_names(kind: str) -> tuple[str, ...]:
    return {"binary": ("majority", "minilm-logreg", "predict")}.get(kind, ("majority", "predict"))


def strategy_entries(spec, base: Path, extra: dict[str, Any], holder: dict) -> list:
    """The generic strategies of ``spec``'s kind, then its own (replacing a generic of the same name)."""
    own: dict[str, Any] = {}
    for name, entry in spec.strategies.items():
        target, summary = (entry, None) if isinstance(entry, str) else (entry.target, entry.summary or None)
        checked = check_ref(target, base, key=f"strategies.{name}", kind="class", entry_group=STRATEGY_GROUP)
        own[name] = _deferred(name, checked, target, summary)
    for name, cls in extra.items():
        own[name] = strategy_info(name, cls)
    generic = GENERIC[spec.kind]
    if spec.kind == "scored" and spec.output is not None and not isinstance(spec.output.type, list):
        generic = ("majority", *generic)
    entries = [Deferred(n, _generic_maker(n, holder)) for n in generic if n not in own]
    return entries + list(own.values())


def _deferred(name: str, checked: str, written: str, summary: str | None) -> Deferred:
    def make():
        try:
            target = resolve(checked)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(f"strategies.{name} = {written!r}: {type(exc).__name__}: {exc}") from None
        try:
            return strategy_info(name, target, summary)
        except ConfigurationError:
            raise ConfigurationError(f"strategies.{name} = {written!r}: a {type(target).__name__}, not a "
                                     "dspy.Module subclass") from None

    return Deferred(name, make)


def _generic_maker(name: str, holder: dict) -> Callable[[], StrategyInfo]:
    def make() -> StrategyInfo:
        target, summary = resolve(_BIND)(name, holder["stage"])
        return strategy_info(name, target, summary)

    return make


__all__ = ["GENERIC", "default_names", "reference_strategy", "strategy_entries", "strategy_info"]
