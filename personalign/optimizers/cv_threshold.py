"""Decision thresholds from grouped cross-validation, never from in-sample scores.

A selector fitted on train separates train far better than new prompts (measured: a MiniLM
cross-encoder fine-tuned 4 epochs separated train perfectly; its train-fitted threshold gave val F1
0.06 at val AUC 0.65). So the threshold of a *learned* scorer is fitted on out-of-fold scores:
each fold's model is fitted without one group of prompts and scores that group
(scikit-learn ``LeaveOneGroupOut`` when there are at most ``max_folds`` groups, else
``GroupKFold(max_folds)``), and :func:`personalign.metrics.fit_threshold` maximizes F1 over the
pooled out-of-fold scores (:mod:`personalign.programs.common.cv`).

Also here: :class:`CorpusThresholdFit`, the threshold fit for *unlearned* scorers that need a
label-free reference corpus from train (BM25).
"""

from __future__ import annotations

import time
from typing import Sequence

from personalign.optimizers.base import CompileResult
from personalign.optimizers.threshold import ThresholdFit


class CorpusThresholdFit(ThresholdFit):
    """:class:`ThresholdFit` for scorers with a label-free ``prepare(trainset)`` step (e.g. BM25's
    reference corpus of train attributes): ``prepare`` runs on the compiled copy, then the threshold
    maximizing train F1 is chosen on its (unlearned) scores."""

    name = "corpus-threshold-fit"

    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        if not trainset:
            raise ValueError("CorpusThresholdFit needs a non-empty trainset")
        start = time.perf_counter()
        prepared = program.deepcopy()
        prepared.prepare(trainset)
        compiled, result = super().compile(prepared, trainset=trainset, valset=valset)
        result.optimizer = self.name
        result.seconds = time.perf_counter() - start
        return compiled, result


__all__ = ["CompileResult", "CorpusThresholdFit"]
