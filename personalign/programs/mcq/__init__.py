"""Stage ``mcq``: choose the option that follows the user's preference (PrefEval classification
task, PersonaMem multiple choice).

Examples (:func:`personalign.programs.mcq.data.load_mcq`) have inputs ``context`` (the stated
preference / conversation), ``question``, ``options``, ``attributes`` (extracted attributes, may be
empty) and the gold ``gold_index``; strategies return ``answer_index`` (0-based). Scored stage:
per-example :func:`personalign.metrics.mcq_correct`, reported as accuracy with a 95% CI.

Light at import (no dspy): strategies are resolved by name.
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_S = "personalign.programs.mcq.strategies"

STRATEGIES = Registry(
    "mcq strategy",
    [
        StrategyInfo("no-profile", f"{_S}:NoProfileMCQ",
                     "LLM picks an option from the question alone (typed Literal index)", uses_lm=True, trainable=False),
        StrategyInfo("gold-preference", f"{_S}:ContextMCQ",
                     "LLM picks an option given the context: the stated preference (PrefEval) or conversation",
                     uses_lm=True, trainable=False),
        StrategyInfo("extracted-attributes", f"{_S}:AttributesMCQ",
                     "LLM picks an option given the user's extracted attributes (input field)", uses_lm=True,
                     trainable=False),
        StrategyInfo("minilm-preference", f"{_S}:EmbeddingMCQ",
                     "LM-free: option closest to the context (else attributes) by MiniLM cosine", uses_lm=False,
                     trainable=False),
        StrategyInfo("random", f"{_S}:RandomMCQ", "chance: seeded uniform pick", uses_lm=False, trainable=False),
    ],
)

DEFAULT_STRATEGIES = "no-profile,gold-preference,extracted-attributes"

STAGE = Stage(
    name="mcq",
    summary="choose the option that follows the user's preference (PrefEval MCQ, PersonaMem)",
    signature="personalign.signatures.mcq:MCQTaskSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader="personalign.programs.mcq.data:load_mcq",
    label="gold_index",
    kind="scored",
    metric="personalign.metrics:mcq_correct",
    metric_name="accuracy",
    group_key="prompt_id",
    strata_key="topic",
    objective="mean",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
