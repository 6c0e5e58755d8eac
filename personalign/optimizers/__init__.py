"""Optimizers: one keyword-only contract, ``compile(program, *, trainset, valset)``.

Every optimizer takes all of its configuration (seed included) in ``__init__`` and returns
``(compiled_program, CompileResult)``. Wrappers over DSPy teleprompters and the fitting of
learned strategies live one per file behind :class:`Optimizer`.
"""

from personalign.optimizers.base import CompileResult, Optimizer
from personalign.optimizers.threshold import ThresholdFit


def __getattr__(name: str):
    # lazy: these import programs/ (and through it dspy) only when used
    if name == "LearnedSelectorFit":
        from personalign.optimizers.learned import LearnedSelectorFit

        return LearnedSelectorFit
    if name == "CorpusThresholdFit":
        from personalign.optimizers.cv_threshold import CorpusThresholdFit

        return CorpusThresholdFit
    raise AttributeError(name)


__all__ = ["CompileResult", "Optimizer", "ThresholdFit", "LearnedSelectorFit", "CorpusThresholdFit"]
