"""``copro``: DSPy's COPRO -- coordinate ascent over generated instructions (no demos)."""

from __future__ import annotations

from personalign.optimizers._teleprompter import TeleprompterOptimizer


class COPRO(TeleprompterOptimizer):
    """Wrap ``dspy.COPRO``: the prompt model proposes ``breadth`` instructions (and output-field
    prefixes) per predictor, each is scored on the *trainset*, and ``depth`` rounds refine the
    best ones. Demos are not touched (the input program's demos are kept).

    Projected LM calls (teleprompter), with ``P`` predictors, ``N = len(trainset)``,
    ``c = calls_per_run``, ``p`` = calls of one prompt-model call (one request returns all
    ``breadth`` completions):

    * proposals: ``P x depth x p`` (one initial generation and ``depth - 1`` refinements per predictor);
    * scoring: ``depth x breadth x N x c`` for one predictor; with ``P > 1`` DSPy re-scores every
      candidate so far at each depth: ``P x breadth x N x c x depth (depth + 1) / 2``.

    Seed: COPRO has no random choices of its own (its candidates come from the LM at
    ``init_temperature``); the seed is recorded and used for the CIs.

    Args:
        breadth: candidates per round (> 1, DSPy requires it).
        depth: rounds.
        init_temperature: temperature of the proposals.
        prompt_lm: LM proposing instructions (None: the wrapper's LM).
    """

    name = "copro"
    seed_note = "COPRO has no random choices of its own; seed used for CIs only"

    def __init__(self, *, breadth: int = 3, depth: int = 2, init_temperature: float = 1.4, prompt_lm=None,
                 **common) -> None:
        super().__init__(**common)
        if breadth <= 1:
            raise ValueError("COPRO needs breadth > 1")
        if depth < 1:
            raise ValueError("COPRO needs depth >= 1")
        self.breadth = int(breadth)
        self.depth = int(depth)
        self.init_temperature = float(init_temperature)
        self.prompt_lm = prompt_lm

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        n_pred = max(1, len(program.predictors()))
        c = self._calls_per_run(program)
        proposals = n_pred * self.depth * self._prompt_call()
        if n_pred == 1:
            scoring = self.depth * self.breadth * len(trainset) * c
        else:
            scoring = n_pred * self.breadth * len(trainset) * c * self.depth * (self.depth + 1) // 2
        return {"proposals": proposals, "scoring": scoring}

    def _run(self, student, trainset, valset):
        import dspy

        tp = dspy.COPRO(prompt_model=self.prompt_lm, metric=self.metric, breadth=self.breadth, depth=self.depth,
                        init_temperature=self.init_temperature, track_stats=False)
        return tp.compile(student, trainset=trainset,
                          eval_kwargs={"num_threads": self.num_threads, "display_progress": False})


__all__ = ["COPRO"]
