"""The optimizer contract."""

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
        lm_calls: LM calls that reached a model during compile (cache hits excluded).
        seconds: wall time.
        details: optimizer-specific facts (e.g. the fitted threshold).
    """

    optimizer: str
    config: dict[str, Any]
    train_score: float | None = None
    val_score: float | None = None
    lm_calls: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Optimizer(abc.ABC):
    """Base class. Subclasses set ``name`` and implement :meth:`compile`; ``config()`` returns the
    settings given to ``__init__`` (logged with every run)."""

    name: str = "optimizer"

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = int(seed)

    def config(self) -> dict[str, Any]:
        return {"seed": self.seed}

    @abc.abstractmethod
    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        """Return ``(compiled_program, CompileResult)``; ``program`` itself is not modified."""
