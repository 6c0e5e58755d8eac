"""Fit the LM-free majority baseline: the most frequent gold label of train."""

from __future__ import annotations

import time
from typing import Sequence

from personalign.optimizers.base import CompileResult, Optimizer


class MajorityFit(Optimizer):
    """Compile a program with ``fit(examples, *, seed) -> self`` and a ``value`` (the label it then
    predicts for every input), e.g. :class:`personalign.programs.common.generic.Majority`.

    ``train_score`` is the train share of that label (the accuracy of predicting it everywhere).
    Deterministic; ``seed`` is recorded for the uniform contract, and ``positive`` (the stage's
    positive class, passed to every fit) too: the majority is a label, whichever class it is.

    Raises:
        ValueError: empty trainset.
    """

    name = "majority-fit"

    def __init__(self, *, label: str = "label", positive: bool = True, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.label = label
        self.positive = positive

    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        if not trainset:
            raise ValueError("MajorityFit needs a non-empty trainset")
        start = time.perf_counter()
        compiled = program.deepcopy()
        compiled.fit(trainset, seed=self.seed)
        labels = [getattr(ex, self.label) for ex in trainset]
        result = CompileResult(optimizer=self.name, config=self.config(),
                               train_score=labels.count(compiled.value) / len(labels),
                               seconds=time.perf_counter() - start,
                               details={"value": compiled.value, "n_train": len(trainset)})
        if valset:
            result.val_score = sum(getattr(ex, self.label) == compiled.value for ex in valset) / len(valset)
        return compiled, result


__all__ = ["MajorityFit"]
