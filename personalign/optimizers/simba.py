"""``simba``: DSPy's SIMBA -- stochastic introspective mini-batch ascent (rules and demos)."""

from __future__ import annotations

from personalign.optimizers._teleprompter import TeleprompterOptimizer


class SIMBA(TeleprompterOptimizer):
    """Wrap ``dspy.SIMBA``: per step, sample program trajectories on a mini-batch at temperature 1,
    find the examples with the most variable outcomes, and build new candidates by appending a
    self-reflective rule (prompt model) or a successful trace as a demo; the best candidates on the
    full trainset win.

    Projected LM calls (teleprompter), with ``B = min(bsize, len(trainset))``, ``C = num_candidates``,
    ``S = max_steps``, ``N = len(trainset)``, ``c = calls_per_run``, ``p`` = prompt-model call cost:
    ``S x [C x B x c (trajectories) + min(B, C + 1) x p (rules) + (C + 1) x B x c (candidate scoring)]
    + min(C + 1, S + 1) x N x c`` (final scoring of the winners).

    Guards: DSPy asserts ``len(trainset) >= bsize``; the wrapper uses ``bsize = min(bsize,
    len(trainset))`` (recorded in ``details["guards"]``). ``max_demos=0`` leaves only the rule
    strategy, so no demos are added. The seed goes to ``compile(seed=)`` (0 included).
    """

    name = "simba"
    seed_note = "seed passed to SIMBA.compile(seed=) (mini-batches, program sampling, strategies)"

    def __init__(self, *, bsize: int = 4, num_candidates: int = 2, max_steps: int = 2, max_demos: int = 2,
                 prompt_lm=None, demo_input_field_maxlen: int = 100_000, temperature_for_sampling: float = 0.2,
                 temperature_for_candidates: float = 0.2, **common) -> None:
        super().__init__(**common)
        if bsize < 1 or num_candidates < 1 or max_steps < 1 or max_demos < 0:
            raise ValueError("bsize, num_candidates, max_steps must be >= 1 and max_demos >= 0")
        self.bsize = int(bsize)
        self.num_candidates = int(num_candidates)
        self.max_steps = int(max_steps)
        self.max_demos = int(max_demos)
        self.prompt_lm = prompt_lm
        self.demo_input_field_maxlen = int(demo_input_field_maxlen)
        self.temperature_for_sampling = float(temperature_for_sampling)
        self.temperature_for_candidates = float(temperature_for_candidates)

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        b = min(self.bsize, len(trainset))
        cand, steps = self.num_candidates, self.max_steps
        c = self._calls_per_run(program)
        return {"trajectories": steps * cand * b * c,
                "rules": steps * min(b, cand + 1) * self._prompt_call(),
                "candidate_scoring": steps * (cand + 1) * b * c,
                "final_scoring": min(cand + 1, steps + 1) * len(trainset) * c}

    def _run(self, student, trainset, valset):
        import dspy

        bsize = min(self.bsize, len(trainset))
        if bsize != self.bsize:
            self._guards.append(f"bsize {self.bsize} > len(trainset): used bsize={bsize} (DSPy asserts)")
        tp = dspy.SIMBA(metric=self.metric, bsize=bsize, num_candidates=self.num_candidates,
                        max_steps=self.max_steps, max_demos=self.max_demos, prompt_model=self.prompt_lm,
                        demo_input_field_maxlen=self.demo_input_field_maxlen, num_threads=self.num_threads,
                        temperature_for_sampling=self.temperature_for_sampling,
                        temperature_for_candidates=self.temperature_for_candidates)
        return tp.compile(student, trainset=trainset, seed=self.seed)


__all__ = ["SIMBA"]
