"""Stage 1 verification: accept or reject an extracted user attribute against the user's conversation.

Every strategy is a ``dspy.Module`` whose ``forward(evidence, attribute, reason="")`` returns a
``dspy.Prediction`` with ``accepted: bool`` (the
:class:`~personalign.signatures.verification.VerificationSignature` output), ``rationale: str`` and
``score: float | None`` (for scoring strategies: higher = more likely *rejected*). The stage's
positive class is a REJECTED attribute (``positive=False``): its F1, precision and recall are of
detecting attributes that should be dropped, and its learned strategies fit their threshold for
F-beta with beta = 2 (recall of rejections weighted over precision).

Data: :func:`personalign.programs.verification.data.load_verification` -- a PrefEval folder
(derived pairs, split by topic) or canonical JSONL of human-labelled
:class:`~personalign.data.schemas.VerificationExample` lines. Also here:
:mod:`~personalign.programs.verification.taxonomy` (error categories of rejected attributes); the
evidence helpers (fitting evidence to a context window) are shared:
:mod:`~personalign.programs.common.evidence`.
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_OPT = "personalign.optimizers"
_PKG = "personalign.programs.verification"

STRATEGIES = Registry(
    "verification strategy",
    [
        StrategyInfo(
            "zero-shot",
            f"{_PKG}.judges:ZeroShotVerifier",
            "LLM verifier: dspy.Predict on the typed verification signature (verdict + rationale)",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "cot",
            f"{_PKG}.judges:ChainOfThoughtVerifier",
            "LLM verifier: dspy.ChainOfThought (reasoning, then verdict and rationale)",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "criteria",
            f"{_PKG}.judges:CriteriaVerifier",
            "LLM verifier with acceptance criteria (clear evidence about the user, no over-reach) in its instructions",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "minilm-maxsim",
            f"{_PKG}.learned:MaxSimilarityVerifier",
            "baseline: 1 - max MiniLM cosine of attribute and user sentences; threshold by grouped CV (F2)",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
        StrategyInfo(
            "minilm-logreg",
            f"{_PKG}.learned:MiniLMVerifier",
            "learned: class-weighted logistic regression on MiniLM attribute/user-text features; threshold by grouped CV (F2)",
            uses_lm=False,
            trainable=True,
            optimizer=f"{_OPT}.learned:LearnedSelectorFit",
        ),
    ],
)

DEFAULT_STRATEGIES = "zero-shot,criteria,minilm-maxsim,minilm-logreg"

STAGE = Stage(
    name="verification",
    summary="Stage 1: accept or reject an extracted user attribute against the user's own messages",
    signature="personalign.signatures.verification:VerificationSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader=f"{_PKG}.data:load_verification",
    label="accepted",
    kind="binary",
    positive=False,
    positive_name="rejected",
    metric="personalign.metrics.dspy_metrics:verification_accuracy",
    metric_name="f1",
    group_key="group",
    objective="fbeta:2",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
