"""Stage ``respond``: write the response to a request for a user with known attributes, so that it
does not violate the user's preference (PrefEval generation task).

Examples (:func:`personalign.programs.respond.data.load_respond`) have inputs ``prompt,
attributes`` and the label ``preference``; strategies return ``response``. Scored stage:
:func:`personalign.programs.respond.violation.preference_followed` (1 when the typed violation
judge, run with the same LM, finds no violation) -- reported as the follow rate with a 95% CI;
its complement is PrefEval's violation rate.

Its text helpers are shared: :mod:`~personalign.programs.common.text`. Light at import (no dspy).
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_G = "personalign.programs.respond.generate"

STRATEGIES = Registry(
    "respond strategy",
    [
        StrategyInfo("generic", f"{_G}:GenericResponder", "response to the prompt alone (no attributes)",
                     uses_lm=True, trainable=False),
        StrategyInfo("personalized", f"{_G}:PersonalizedResponder", "response given the prompt and the attributes",
                     uses_lm=True, trainable=False),
        StrategyInfo("personalized-implicit", f"{_G}:ImplicitResponder",
                     "personalized, never mentioning the attributes (instructed, then checked and repaired in code)",
                     uses_lm=True, trainable=False),
    ],
)

DEFAULT_STRATEGIES = "generic,personalized"

STAGE = Stage(
    name="respond",
    summary="personalized response that follows the user's preference (PrefEval generation, judged by a typed judge)",
    signature="personalign.signatures.respond:RespondSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader="personalign.programs.respond.data:load_respond",
    label="preference",
    kind="scored",
    metric="personalign.programs.respond.violation:preference_followed",
    metric_name="follow_rate",
    group_key="prompt_id",
    strata_key="topic",
    objective="mean",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
