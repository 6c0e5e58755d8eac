"""``bootstrap-rs``: DSPy's BootstrapFewShotWithRandomSearch -- several bootstrapped demo sets,
the best one on ``valset`` wins."""

from __future__ import annotations

from personalign.optimizers._teleprompter import TeleprompterOptimizer, seeded_shuffle


class BootstrapRS(TeleprompterOptimizer):
    """Wrap ``dspy.BootstrapFewShotWithRandomSearch``.

    Candidates: zero-shot, labeled-only, unshuffled bootstrap, and ``num_candidate_programs``
    shuffled bootstraps with random demo counts; each is scored on ``valset`` (DSPy's
    ``Evaluate``) and the best is returned. ``score_after`` is therefore measured on the set the
    candidate was selected on (optimistic); evaluate on a held-out test split for the real number.

    Projected LM calls (teleprompter), with ``C = num_candidate_programs``, ``N = len(trainset)``,
    ``V = len(valset)``, ``c = calls_per_run``, ``R = max_rounds``:
    ``(C + 3) x V x c`` (every candidate scored) ``+ (C + 1) x R x N x c`` (each bootstrap run tries
    at most every train example R times); with ``max_bootstrapped_demos = 0`` only the 3
    non-shuffled candidates run: ``3 x V x c`` and no bootstrap calls. Plus scoring ``2 x V x c``.

    Guard: DSPy 3.4.1 crashes with ``max_bootstrapped_demos=0`` (``random.randint(1, 0)`` for the
    shuffled candidates); the wrapper then restricts the search to the zero-shot, labeled-only and
    unshuffled candidates (``restrict=[-3, -2, -1]``), which honour 0 bootstrapped demos.

    Seed: DSPy's candidate seeds are fixed (-3..C-1); the wrapper shuffles the trainset with
    ``random.Random(seed)`` first.
    """

    name = "bootstrap-rs"
    max_alternatives = 2  # runner-up candidate programs offered to the final choice on dev
    seed_note = "trainset shuffled with random.Random(seed); DSPy's candidate seeds are fixed"

    def __init__(self, *, max_bootstrapped_demos: int = 4, max_labeled_demos: int = 4, max_rounds: int = 1,
                 num_candidate_programs: int = 4, stop_at_score: float | None = None,
                 metric_threshold: float | None = None, max_errors: int | None = None, **common) -> None:
        super().__init__(**common)
        if min(max_bootstrapped_demos, max_labeled_demos, num_candidate_programs) < 0 or max_rounds < 1:
            raise ValueError("demo limits and num_candidate_programs must be >= 0, max_rounds >= 1")
        self.max_bootstrapped_demos = int(max_bootstrapped_demos)
        self.max_labeled_demos = int(max_labeled_demos)
        self.max_rounds = int(max_rounds)
        self.num_candidate_programs = int(num_candidate_programs)
        self.stop_at_score = stop_at_score
        self.metric_threshold = metric_threshold
        self.max_errors = max_errors

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        c = self._calls_per_run(program)
        v = len(valset) if valset else len(trainset)  # DSPy scores on trainset when no valset
        if self.max_bootstrapped_demos == 0:
            return {"candidate_scoring": 3 * v * c, "bootstrap": 0}
        tries = self._bootstrap_tries(self.max_bootstrapped_demos, len(trainset), self.max_rounds)
        return {"candidate_scoring": (self.num_candidate_programs + 3) * v * c,
                "bootstrap": (self.num_candidate_programs + 1) * tries * c}

    def _run(self, student, trainset, valset):
        import dspy

        tp = dspy.BootstrapFewShotWithRandomSearch(
            metric=self.metric, max_bootstrapped_demos=self.max_bootstrapped_demos,
            max_labeled_demos=self.max_labeled_demos, max_rounds=self.max_rounds,
            num_candidate_programs=self.num_candidate_programs, num_threads=self.num_threads,
            max_errors=self.max_errors, stop_at_score=self.stop_at_score, metric_threshold=self.metric_threshold)
        restrict = None
        if self.max_bootstrapped_demos == 0:
            restrict = [-3, -2, -1]
            self._guards.append("max_bootstrapped_demos=0: DSPy's shuffled candidates call randint(1, 0); "
                                "searched only zero-shot, labeled-only and unshuffled candidates")
        return tp.compile(student, trainset=seeded_shuffle(trainset, self.seed), valset=valset, restrict=restrict)


__all__ = ["BootstrapRS"]
