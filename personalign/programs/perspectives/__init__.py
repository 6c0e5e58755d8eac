"""Stage ``perspectives``: answer an open question from k sampled user profiles and merge the
answers under explicit rules (:mod:`personalign.programs.perspectives.aggregator`), against a
single answer and its baselines.

Examples (:func:`personalign.programs.perspectives.data.load_questions`) have inputs
``question, profile_bank`` (a bank path; see :mod:`~personalign.programs.perspectives.bank`).
Scored stage: :func:`~personalign.programs.perspectives.metrics.answer_win_rate` (LLM-judged win
rate against the reference / single answer, both orders). Light at import (no dspy).
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_A = "personalign.programs.perspectives.aggregator"

STRATEGIES = Registry(
    "perspectives strategy",
    [
        StrategyInfo("aggregator", f"{_A}:MultiPerspective",
                     "k=5 profiles by MiniLM similarity + typed plausibility check, one answer each, rule-bound merge",
                     uses_lm=True, trainable=False),
        StrategyInfo("no-profile", f"{_A}:SingleAnswer", "single answer, no profile (temperature 0)", uses_lm=True,
                     trainable=False),
        StrategyInfo("random-profiles", f"{_A}:RandomProfiles", "k random profiles from the bank, merged",
                     uses_lm=True, trainable=False),
        StrategyInfo("high-temperature", f"{_A}:HighTemperature", "k answers at temperature 1.0 without profiles, merged",
                     uses_lm=True, trainable=False),
        StrategyInfo("synthetic-profiles", f"{_A}:SyntheticProfiles", "k profiles written by the LM, merged",
                     uses_lm=True, trainable=False),
    ],
)

DEFAULT_STRATEGIES = "no-profile,aggregator"

STAGE = Stage(
    name="perspectives",
    summary="multi-perspective answer (k sampled profiles, rule-bound aggregation) vs single answer and baselines",
    signature="personalign.signatures.perspectives:PerspectivesSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader="personalign.programs.perspectives.data:load_questions",
    label="reference",
    kind="scored",
    metric="personalign.programs.perspectives.metrics:answer_win_rate",
    metric_name="win_rate",
    group_key="prompt_id",
    objective="mean",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
