"""Stage 2 strategies: decide which user attributes should change the answer to a prompt.

Every strategy is a ``dspy.Module`` whose ``forward(attribute, prompt)`` returns a
``dspy.Prediction`` with ``relevant: bool`` (the :class:`RelevanceSignature` output) and
``score: float | None``. Strategies that score in bulk also implement
``predict_batch(examples) -> list[Prediction]``; trainable ones are compiled by their registry
default optimizer (``optimizer=``) and save their learned parameters with ``dump_state()`` (JSON)
and, for array weights, ``save_weights(dir)`` / ``load_weights(dir)`` (npz / safetensors, no pickle).

The Python call for predictions is :func:`personalign.predict.predict_relevance`.
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_OPT = "personalign.optimizers"

STRATEGIES = Registry(
    "relevance strategy",
    [
        StrategyInfo(
            "all-yes",
            "personalign.programs.relevance.constant:AllRelevant",
            "baseline: every attribute is relevant (what a judge that always says yes scores)",
            uses_lm=False,
            trainable=False,
        ),
        StrategyInfo(
            "zero-shot",
            "personalign.programs.relevance.judges:ZeroShotJudge",
            "LLM judge: dspy.Predict on the typed relevance signature",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "cot",
            "personalign.programs.relevance.judges:ChainOfThoughtJudge",
            "LLM judge: dspy.ChainOfThought (reasoning, then the verdict)",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "criteria",
            "personalign.programs.relevance.judges:CriteriaJudge",
            "LLM judge with the annotation criteria (explicit or implicit change of the answer) in its instructions",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "batch",
            "personalign.programs.relevance.batch:BatchJudge",
            "LLM judge of all attributes of one user for a prompt in one call (list of relevant numbers)",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "yes-prob",
            "personalign.programs.relevance.yes_prob:YesProbability",
            "log p(Yes) - log p(No) of an embedded model, threshold fitted by grouped CV on train",
            uses_lm=True,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "yes-prob-rank",
            "personalign.programs.relevance.yes_prob:YesProbRank",
            "log p(Yes) - log p(No) of an embedded model; top train-rate share of each user's attributes",
            uses_lm=True,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "lm-probe",
            "personalign.programs.relevance.probe:LMProbe",
            "linear probe on the embedded model's final hidden state at the yes/no verdict position; decision rule by leave-one-prompt-out",
            uses_lm=True,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "bm25",
            "personalign.programs.relevance.bm25:BM25Relevance",
            "BM25 of prompt against attribute (bm25s), normalized per prompt, threshold fitted on train",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.cv_threshold:CorpusThresholdFit",
        ),
        StrategyInfo(
            "minilm-cosine",
            "personalign.programs.relevance.similarity:EmbeddingSimilarity",
            "MiniLM cosine similarity of attribute and prompt, threshold fitted on train",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.threshold:ThresholdFit",
        ),
        StrategyInfo(
            "minilm-logreg",
            "personalign.programs.relevance.learned:MiniLMLogReg",
            "learned: logistic regression on MiniLM features of attribute, prompt and their interaction",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "minilm-rank",
            "personalign.programs.relevance.ranked:MiniLMRank",
            "learned: logistic regression on MiniLM attribute embedding + prompt similarities; top train-rate share of each user's attributes",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "style-rank",
            "personalign.programs.relevance.ranked:StyleRank",
            "learned: 4 features (answer-style prototype similarity, prompt similarities) on soft labels; top train-rate share of each user's attributes",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "cross-encoder",
            "personalign.programs.relevance.cross_encoder:MiniLMCrossEncoder",
            "learned: MiniLM cross-encoder fine-tuned on (prompt, attribute) pairs on the CPU (minutes)",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "ensemble",
            "personalign.programs.relevance.ensemble:LearnedPlusLLM",
            "learned MiniLM selector stacked with the embedded model's yes/no margin",
            uses_lm=True,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "ensemble-rank",
            "personalign.programs.relevance.ensemble:EnsembleRank",
            "style-rank's probability stacked with the yes/no margin; top train-rate share of each user's attributes",
            uses_lm=True,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
    ],
)

DEFAULT_STRATEGIES = "zero-shot,minilm-cosine"
DEFAULT_PREDICT_STRATEGY = "minilm-logreg"

STAGE = Stage(
    name="relevance",
    summary="Stage 2: which user attributes should change the answer to a new prompt (F1 vs the human majority)",
    signature="personalign.signatures.relevance:RelevanceSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader="personalign.programs.relevance.data:load_examples",
    label="relevant",
    kind="binary",
    positive=True,
    positive_name="relevant",
    metric="personalign.metrics:relevance_accuracy",
    metric_name="f1",
    group_key="prompt_id",
    feedback_metric="personalign.programs.relevance.metrics:relevance_feedback",
    objective="f1",
    decision_keys=("prompt_id", "user_id"),
)


__all__ = ["STAGE", "STRATEGIES", "DEFAULT_STRATEGIES", "DEFAULT_PREDICT_STRATEGY"]
