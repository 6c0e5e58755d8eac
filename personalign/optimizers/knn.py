"""``knn``: DSPy's KNNFewShot -- at each call, the k train examples nearest to the input become demos."""

from __future__ import annotations

from personalign.optimizers._teleprompter import TeleprompterOptimizer


def minilm_vectorizer():
    """``dspy.Embedder`` over the packaged all-MiniLM-L6-v2 (:func:`personalign.lm.embedder.embed`)."""
    import dspy

    from personalign.lm.embedder import embed

    return dspy.Embedder(lambda texts: embed(list(texts)))


class KNNFewShot(TeleprompterOptimizer):
    """Wrap ``dspy.KNNFewShot``: the compiled program embeds each input, takes the ``k`` nearest train
    examples and runs a ``BootstrapFewShot`` on them as its demos before answering.

    Defaults make that per-call step free of LM calls: ``max_bootstrapped_demos=0`` and
    ``max_labeled_demos=k`` (the neighbours are used as labeled demos).

    Projected LM calls: teleprompter 0 (compiling only embeds the trainset); scoring before
    ``V x c``; scoring after ``V x (c + R x k x c)`` where the second term (inference-time
    bootstrapping on the neighbours, ``R = max_rounds``) is 0 when ``max_bootstrapped_demos = 0``.

    Limits and guards (DSPy 3.4.1): ``k=0`` would take *every* train example as a neighbour
    (``argsort()[-0:]`` is the whole array); the wrapper returns the program with its demos reset
    instead. The compiled program replaces ``forward`` on the instance and keeps the neighbour
    index in memory: its ``dump_state()`` holds only the base program (no demos), so it cannot be
    saved and reloaded as a KNN program (``details["serializable"] = False``). Nearest neighbours are
    deterministic; the seed does not change them.

    Args:
        k: neighbours per call (0: no demos).
        vectorizer: a ``dspy.Embedder`` (None: MiniLM, :func:`minilm_vectorizer`).
        max_bootstrapped_demos / max_labeled_demos / max_rounds: the per-call BootstrapFewShot.
    """

    name = "knn"
    saveable = False  # its neighbour index lives in memory: compile refuses to save it
    seed_note = "nearest neighbours are deterministic; seed recorded and used for CIs"

    def __init__(self, *, k: int = 3, vectorizer=None, max_bootstrapped_demos: int = 0,
                 max_labeled_demos: int | None = None, max_rounds: int = 1, **common) -> None:
        super().__init__(**common)
        if k < 0 or max_bootstrapped_demos < 0 or (max_labeled_demos is not None and max_labeled_demos < 0):
            raise ValueError("k and demo limits must be >= 0")
        self.k = int(k)
        self.vectorizer = vectorizer
        self.max_bootstrapped_demos = int(max_bootstrapped_demos)
        self.max_labeled_demos = self.k if max_labeled_demos is None else int(max_labeled_demos)
        self.max_rounds = int(max_rounds)

    def config(self) -> dict:
        return {**super().config(), "vectorizer": "minilm" if self.vectorizer is None else type(self.vectorizer).__name__}

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        return {"index": 0}

    def _scoring_calls_after(self, program, valset) -> int:
        base = self._scoring_calls(program, valset)
        if self.k == 0 or self.max_bootstrapped_demos == 0:
            return base
        return base + (len(valset) if self.score and valset else 0) * self.max_rounds * self.k * self._calls_per_run(program)

    def _run(self, student, trainset, valset):
        import dspy

        if self.k == 0:
            self._guards.append("k=0: DSPy's KNN would return every train example (argsort()[-0:]); "
                                "returned the program with no demos")
            return student.reset_copy()
        vectorizer = self.vectorizer if self.vectorizer is not None else minilm_vectorizer()
        tp = dspy.KNNFewShot(k=self.k, trainset=list(trainset), vectorizer=vectorizer,
                             metric=self.metric, max_bootstrapped_demos=self.max_bootstrapped_demos,
                             max_labeled_demos=self.max_labeled_demos, max_rounds=self.max_rounds)
        return tp.compile(student)

    def compile(self, program, *, trainset, valset=None):
        compiled, result = super().compile(program, trainset=trainset, valset=valset)
        result.details["serializable"] = self.k == 0
        return compiled, result


__all__ = ["KNNFewShot", "minilm_vectorizer"]
