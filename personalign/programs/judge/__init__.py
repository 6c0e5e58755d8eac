"""Stage ``judge``: rate, per attribute of a user, which of two responses serves the user better
(1 = A much better, 3 = equal, 5 = B much better), against human ratings.

Examples (:func:`personalign.programs.judge.data.load_ratings`, canonical
preference-rating JSONL) have inputs ``profile, prompt, response_a, response_b, attributes`` and
the gold ``ratings`` (attribute -> 1-5). Scored stage: per example
:func:`personalign.metrics.rating_agreement` (mean over attributes of ``1 - ((judge - human)/4)^2``,
the per-item analogue of the quadratic weights of kappa_w), so any teleprompter compiles a judge
toward human agreement; the set objective a compile maximizes is Cohen's kappa of the verdicts
(A better / tie / B better) of the unrounded debiased scores
(:func:`personalign.programs.judge.metrics.verdict_kappa`); corpus Spearman rho and weighted
kappa come from :func:`personalign.programs.judge.metrics.judge_agreement`.

Also here (not strategies of the stage): explicit-mention detectors and the rating gap
(:mod:`personalign.programs.judge.mentions`). The validation of the violation and pairwise judges
against PrefEval's option labels before they score anything runs programs, so it sits a layer up:
:func:`personalign.judge_validation.validate_judges` (``usable`` = the kappa CI above 0 and the
accuracy CI above 0.5).
Light at import (no dspy).
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_P = "personalign.programs.judge.pairwise"

STRATEGIES = Registry(
    "judge strategy",
    [
        StrategyInfo("pairwise", f"{_P}:PairwiseJudge",
                     "typed 1-5 LLM judge per attribute, both orders, position-debiased (2 calls/attribute)",
                     uses_lm=True, trainable=False),
        StrategyInfo("pairwise-implicit", f"{_P}:ImplicitPairwiseJudge",
                     "as pairwise, instructed that restating an attribute earns nothing and 3 is most common",
                     uses_lm=True, trainable=False),
        StrategyInfo("pairwise-expected", f"{_P}:ExpectedPairwiseJudge",
                     "as pairwise, each order read as the expected 1-5 rating under the model's log-probabilities",
                     uses_lm=True, trainable=False),
        StrategyInfo("single-order", f"{_P}:SingleOrderJudge",
                     "typed 1-5 LLM judge, one seeded order per attribute (position-biased baseline)",
                     uses_lm=True, trainable=False),
        StrategyInfo("minilm", f"{_P}:EmbeddingJudge",
                     "LM-free: MiniLM cosine of attribute to B minus to A, fixed cut points", uses_lm=False,
                     trainable=False),
        StrategyInfo("tie", f"{_P}:TieJudge", "LM-free: always 3 (no difference)", uses_lm=False, trainable=False),
    ],
)

DEFAULT_STRATEGIES = "pairwise,single-order,tie"

STAGE = Stage(
    name="judge",
    summary="pairwise 1-5 preference per attribute between two responses, against human ratings",
    signature="personalign.signatures.judge:PairwiseRatingsSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader="personalign.programs.judge.data:load_ratings",
    label="ratings",
    kind="scored",
    metric="personalign.metrics:rating_agreement",
    metric_name="rating_agreement",
    group_key="prompt_id",
    objective="personalign.programs.judge.metrics:verdict_kappa",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
