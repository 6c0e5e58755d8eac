"""``labeled``: DSPy's LabeledFewShot -- k labeled train examples as demos of every predictor."""

from __future__ import annotations

from personalign.optimizers._teleprompter import TeleprompterOptimizer, seeded_shuffle


class LabeledFewShot(TeleprompterOptimizer):
    """Wrap ``dspy.LabeledFewShot(k)``: each predictor gets ``min(k, len(trainset))`` labeled demos.

    Projected LM calls: teleprompter 0 (no LM call); scoring ``2 x len(valset) x calls_per_run``.

    Seed: DSPy samples with a fixed ``random.Random(0)``; the wrapper shuffles the trainset with
    ``random.Random(seed)`` first, so the seed decides which demos are drawn. ``k=0`` gives no demos.

    Args:
        k: demos per predictor (0: none).
        sample: draw demos at random (True) or take the first ``k`` of the seeded order.
        **common: ``metric``, ``lm``, ``seed`` and the rest of
            :class:`~personalign.optimizers._teleprompter.TeleprompterOptimizer`.
    """

    name = "labeled"
    seed_note = "trainset shuffled with random.Random(seed) before DSPy's fixed Random(0) sampling"

    def __init__(self, *, k: int = 4, sample: bool = True, **common) -> None:
        super().__init__(**common)
        if k < 0:
            raise ValueError("k must be >= 0")
        self.k = int(k)
        self.sample = bool(sample)

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        return {"labeled": 0}

    def _run(self, student, trainset, valset):
        import dspy

        tp = dspy.LabeledFewShot(k=self.k)
        return tp.compile(student, trainset=seeded_shuffle(trainset, self.seed), sample=self.sample)


__all__ = ["LabeledFewShot"]
