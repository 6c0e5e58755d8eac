"""The optimizer contract.

Every optimizer takes all of its settings, seed included, in ``__init__`` and exposes one
keyword-only call::

    compiled, result = optimizer.compile(program, trainset=train, valset=val)

``program`` is never modified; ``result`` is a :class:`CompileResult`. Optimizers that call an LM
also answer :meth:`Optimizer.projected_lm_calls` (an upper bound computed from their settings)
before they run and report the actual count after.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence


@dataclass
class CompileResult:
    """What a compile did.

    Attributes:
        optimizer: optimizer name.
        config: every setting of the optimizer (JSON-serializable), seed included.
        train_score / val_score: the optimizer's objective after compiling (None if not computed).
            Teleprompter wrappers set ``val_score`` to ``score_after``.
        lm_calls: LM calls that reached a model during compile (cache hits excluded).
        seconds: wall time.
        details: optimizer-specific facts (e.g. the fitted threshold). Teleprompter wrappers add
            ``over_budget_reason`` when ``actual_lm_calls > projected_lm_calls``.
        score_before / score_before_ci: mean metric of the input program on ``valset`` and its
            95% percentile-bootstrap CI (None when not measured).
        score_after / score_after_ci: the same for the compiled program.
        projected_lm_calls: the upper bound announced before running (None: not projected).
        actual_lm_calls: LM calls counted while compiling, scoring included (None: not counted).
        cached_lm_calls: calls a cache answered while compiling (set by the compile service).
        seed: the seed the optimizer ran with.
        objective: name of the stage's set objective the compile chose on (``f1``, ``f2``, ...;
            :mod:`personalign.stages.objective`); None when no dev selection ran.
        dev_objective_before / dev_objective_after: that objective on the dev split for the input
            program and for the returned one.
        chosen: the candidate returned (``uncompiled``, the optimizer's name; ``+rule`` when a
            decision rule was added); reason: why it won.
    """

    optimizer: str
    config: dict[str, Any]
    train_score: float | None = None
    val_score: float | None = None
    lm_calls: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    score_before: float | None = None
    score_before_ci: list[float] | None = None
    score_after: float | None = None
    score_after_ci: list[float] | None = None
    projected_lm_calls: int | None = None
    actual_lm_calls: int | None = None
    cached_lm_calls: int | None = None
    seed: int | None = None
    objective: str | None = None
    dev_objective_before: float | None = None
    dev_objective_after: float | None = None
    chosen: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _jsonable(value: Any) -> Any:
    """A setting as JSON: plain values as they are, an LM by its model string, a function (metric,
    callback) by its name, any other object by its type name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(getattr(value, "model", None), str):
        return value.model
    if callable(value) and getattr(value, "__name__", None):
        return value.__name__
    return type(value).__name__


class Optimizer(abc.ABC):
    """Base class. Subclasses set ``name`` and implement :meth:`compile`, and store every
    ``__init__`` argument as an attribute of the same name: :meth:`get_params` reads them back
    (scikit-learn's and DSPy's convention) and :meth:`config` is their JSON form (logged with
    every run).

    Contract (pinned by ``tests/optimizers/test_conformance.py`` for every registered optimizer):
    ``compile(program, *, trainset, valset=None)`` is keyword-only after ``program``, returns
    ``(compiled_program, CompileResult)``, leaves ``program`` unchanged, and gives the same
    compiled state for the same seed.
    """

    name: str = "optimizer"

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = int(seed)

    @classmethod
    def _param_names(cls) -> list[str]:
        """Keyword arguments of ``__init__`` along the class hierarchy, in declaration order
        (:func:`personalign.registry.param_names`)."""
        from personalign.registry import param_names

        return param_names(cls)

    def get_params(self) -> dict[str, Any]:
        """Every ``__init__`` setting as the optimizer holds it (``{name: value}``, objects as they are)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def config(self) -> dict[str, Any]:
        """:meth:`get_params` as JSON (LMs by model string, functions by name, objects by type name)."""
        return {k: _jsonable(v) for k, v in self.get_params().items()}

    def projected_lm_calls(self, program, trainset: Sequence, valset: Sequence | None = None) -> int | None:
        """Upper bound of the LM calls :meth:`compile` will make; None when the optimizer cannot
        know (e.g. fitting a scorer whose LM use depends on the program)."""
        return None

    def expected_lm_calls(self, program, trainset: Sequence, valset: Sequence | None = None) -> int | None:
        """The LM calls :meth:`compile` is expected to make (no retry; a teleprompter that stops
        early, as soon as it stops); default :meth:`projected_lm_calls`."""
        return self.projected_lm_calls(program, trainset, valset)

    @abc.abstractmethod
    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        """Return ``(compiled_program, CompileResult)``; ``program`` itself is not modified."""
