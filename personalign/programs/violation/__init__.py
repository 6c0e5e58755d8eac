"""Stage ``violation``: does a response go against the user's stated preference (follows / violates)?

The judge of PrefEval's generation task, as a stage of its own so that it is validated against
labels and compiled like any other program before it scores anything. Labels: PrefEval's MCQ
options, written by its authors -- the first option follows the stated preference, the other
three violate it (:func:`personalign.programs.violation.data.load_violation`: per question the
following option and one seeded violating option, two examples). Binary stage; the positive
class is "violates"; the **set objective is Cohen's kappa**
(:func:`personalign.programs.violation.metrics.kappa`), so ``personalign compile violation
--optimizer labeled`` compiles the judge toward kappa on a dev split of held-out train topics and
keeps the uncompiled judge unless the compiled one is higher there.

Light at import (no dspy).
"""

from personalign.programs.stages import Stage
from personalign.registry import Registry, StrategyInfo

_PKG = "personalign.programs.violation"

STRATEGIES = Registry(
    "violation strategy",
    [
        StrategyInfo("typed", "personalign.programs.common.violation:ViolationJudge",
                     "typed LLM judge: violates (bool) given preference, question, response; one call",
                     uses_lm=True, trainable=False),
        StrategyInfo("never", f"{_PKG}.baseline:NeverViolates",
                     "LM-free: every response follows (kappa 0 by construction; the floor)",
                     uses_lm=False, trainable=False),
    ],
)

DEFAULT_STRATEGIES = "typed,never"

STAGE = Stage(
    name="violation",
    summary="judge: does a response violate the user's stated preference (PrefEval option labels, kappa)",
    signature="personalign.signatures.respond:PreferenceViolationSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader=f"{_PKG}.data:load_violation",
    label="violates",
    kind="binary",
    positive=True,
    positive_name="violates",
    metric=f"{_PKG}.metrics:violation_correct",
    metric_name="f1",
    group_key="topic",
    objective=f"{_PKG}.metrics:kappa",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
