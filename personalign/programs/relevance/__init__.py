"""Stage 2 strategies: decide which user attributes should change the answer to a prompt.

Every strategy is a ``dspy.Module`` whose ``forward(attribute, prompt)`` returns a
``dspy.Prediction`` with ``relevant: bool`` (the :class:`RelevanceSignature` output) and, when
the strategy scores, ``score: float``. Strategies that score in bulk also implement
``predict_batch(examples) -> list[Prediction]``.
"""

from personalign.programs._registry import Registry, StrategyInfo

STRATEGIES = Registry(
    "relevance",
    [
        StrategyInfo(
            "zero-shot",
            "personalign.programs.relevance.judges:ZeroShotJudge",
            "LLM judge: dspy.Predict on the typed relevance signature",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "minilm-cosine",
            "personalign.programs.relevance.similarity:EmbeddingSimilarity",
            "MiniLM cosine similarity of attribute and prompt, threshold fitted on train",
            uses_lm=False,
            trainable=True,
            optimizer="personalign.optimizers.threshold:ThresholdFit",
        ),
    ],
)

DEFAULT_STRATEGIES = "zero-shot,minilm-cosine"

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES"]
