"""``bootstrap``: DSPy's BootstrapFewShot -- demos from the program's own successful traces."""

from __future__ import annotations

from personalign.optimizers._teleprompter import TeleprompterOptimizer, seeded_shuffle


class BootstrapFewShot(TeleprompterOptimizer):
    """Wrap ``dspy.BootstrapFewShot``: run the program (as its own teacher, with labeled demos) on
    train examples and keep the traces the metric accepts as demos, topped up with labeled ones.

    Projected LM calls (teleprompter): at most ``max_rounds x len(trainset) x calls_per_run`` when
    ``max_bootstrapped_demos > 0`` (every train example is tried for up to ``max_rounds`` rounds
    until enough traces are kept), else 0; expected: DSPy stops once it has its demos
    (:meth:`~personalign.optimizers._teleprompter.TeleprompterOptimizer._bootstrap_tries`). Plus
    scoring: ``2 x len(valset) x calls_per_run``.

    Seed: DSPy walks the trainset in order and samples labeled demos with a fixed ``Random(0)``;
    the wrapper shuffles the trainset with ``random.Random(seed)`` first.

    Limits: ``max_bootstrapped_demos=0`` makes no bootstrap calls (DSPy breaks out before the first
    example); ``max_labeled_demos=0`` adds no labeled demos; both 0 give no demos.

    Args:
        max_bootstrapped_demos: traces kept as demos per predictor.
        max_labeled_demos: total demos per predictor, filled up with labeled examples.
        max_rounds: attempts per train example (rounds > 0 use a fresh rollout at temperature 1).
        metric_threshold: minimum metric value for keeping a trace (None: truthy metric).
        max_errors: errors tolerated while bootstrapping (None: DSPy's setting).
    """

    name = "bootstrap"
    seed_note = "trainset shuffled with random.Random(seed) before bootstrapping"

    def __init__(self, *, max_bootstrapped_demos: int = 4, max_labeled_demos: int = 4, max_rounds: int = 1,
                 metric_threshold: float | None = None, max_errors: int | None = None, **common) -> None:
        super().__init__(**common)
        if min(max_bootstrapped_demos, max_labeled_demos) < 0 or max_rounds < 1:
            raise ValueError("demo limits must be >= 0 and max_rounds >= 1")
        self.max_bootstrapped_demos = int(max_bootstrapped_demos)
        self.max_labeled_demos = int(max_labeled_demos)
        self.max_rounds = int(max_rounds)
        self.metric_threshold = metric_threshold
        self.max_errors = max_errors

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        tries = self._bootstrap_tries(self.max_bootstrapped_demos, len(trainset), self.max_rounds)
        return {"bootstrap": tries * self._calls_per_run(program)}

    def _run(self, student, trainset, valset):
        import dspy

        tp = dspy.BootstrapFewShot(metric=self.metric, metric_threshold=self.metric_threshold,
                                   max_bootstrapped_demos=self.max_bootstrapped_demos,
                                   max_labeled_demos=self.max_labeled_demos, max_rounds=self.max_rounds,
                                   max_errors=self.max_errors)
        return tp.compile(student, trainset=seeded_shuffle(trainset, self.seed))


__all__ = ["BootstrapFewShot"]
