"""Fit the decision threshold of a scoring strategy on train labels."""

from __future__ import annotations

import time
from typing import Sequence

from personalign.optimizers.base import CompileResult, Optimizer


class ThresholdFit(Optimizer):
    """Choose the score threshold that maximizes F1 on ``trainset``.

    Works with any program exposing ``score_batch(examples) -> list[float]`` and a ``threshold``
    attribute (e.g. MiniLM cosine similarity). The threshold search is
    :func:`personalign.metrics.fit_threshold` (exhaustive over midpoints of sorted train scores).
    Deterministic; ``seed`` is recorded for the uniform contract.
    """

    name = "threshold-fit"

    def __init__(self, *, label: str, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.label = label

    def config(self) -> dict:
        return {**super().config(), "objective": "f1"}

    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        from personalign.metrics import f1, fit_threshold

        if not trainset:
            raise ValueError("ThresholdFit needs a non-empty trainset")
        start = time.perf_counter()
        compiled = program.deepcopy()
        scores = compiled.score_batch(trainset)
        labels = [bool(getattr(ex, self.label)) for ex in trainset]
        compiled.threshold = float(fit_threshold(scores, labels))
        train_pred = [s >= compiled.threshold for s in scores]
        result = CompileResult(
            optimizer=self.name,
            config=self.config(),
            train_score=float(f1(labels, train_pred)),
            seconds=time.perf_counter() - start,
            details={"threshold": compiled.threshold, "n_train": len(trainset)},
        )
        if valset:
            val_scores = compiled.score_batch(valset)
            val_labels = [bool(getattr(ex, self.label)) for ex in valset]
            result.val_score = float(f1(val_labels, [s >= compiled.threshold for s in val_scores]))
        return compiled, result
