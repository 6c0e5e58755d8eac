"""Programs: per stage, the strategies that share the stage's signature.

A strategy is a ``dspy.Module`` registered by name in its stage's registry
(``personalign.programs.<stage>.STRATEGIES``); names are resolved to classes only at the
edge (CLI, sweeps), so adding a strategy is one file plus one registry line.
"""

from personalign.registry import Registry, StrategyInfo

__all__ = ["Registry", "StrategyInfo"]
