"""Optimizers: one keyword-only contract, ``compile(program, *, trainset, valset)``.

Every optimizer takes all of its configuration (seed included) in ``__init__`` and returns
``(compiled_program, CompileResult)``. Wrappers over DSPy teleprompters and the fitting of
learned strategies live one per file behind :class:`Optimizer`.
"""

from personalign.optimizers.base import CompileResult, Optimizer
from personalign.optimizers.threshold import ThresholdFit

__all__ = ["CompileResult", "Optimizer", "ThresholdFit"]
