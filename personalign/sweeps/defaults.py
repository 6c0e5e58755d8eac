"""The default search space of each stage, as data.

Every stage gets :data:`COMMON_SPACE` (evaluation, pruner, LM and teleprompter sections) over its
registry's default strategies, plus ``[fit] beta`` when a default strategy's fit accepts a beta.
:data:`STAGE_SPACES` adds or replaces sections per stage name; a new stage with its own default
space adds one entry there (``examples/sweep_<stage>.toml`` may show the same space as a file).
"""

from __future__ import annotations

import copy
from typing import Any

from personalign.sweeps.space_check import init_params

COMMON_SPACE: dict[str, Any] = {
    "evaluation": {"minibatch_size": 8},
    "pruner": {"kind": "median", "n_startup_trials": 4, "n_warmup_steps": 1},
    "lm": {"temperature": {"low": 0.0, "high": 1.0}, "optimizer": ["none", "labeled", "bootstrap"]},
    "optimizer": {
        "labeled": {"k": {"low": 0, "high": 8}},
        "bootstrap": {"max_bootstrapped_demos": {"low": 0, "high": 4}, "max_labeled_demos": {"low": 0, "high": 4},
                      "max_rounds": 1},
    },
}
"""Sections every stage's default space has."""

_FIT_BETA = {"beta": {"low": 0.5, "high": 2.0}}

STAGE_SPACES: dict[str, dict[str, Any]] = {
    "relevance": {
        "strategies": ["zero-shot", "criteria", "minilm-cosine", "minilm-logreg", "bm25"],
        "fit": _FIT_BETA,
        "strategy": {"minilm-logreg": {"C": {"low": 0.001, "high": 1.0, "log": True}}},
    },
}
"""Per-stage sections added to (or replacing those of) the common default space."""

DEFAULT_SPACE: dict[str, Any] = {**copy.deepcopy(COMMON_SPACE), **copy.deepcopy(STAGE_SPACES["relevance"])}
"""The default search space of the relevance stage (= ``examples/sweep_relevance.toml``)."""


def default_space(stage) -> dict[str, Any]:
    """The default search space (a fresh dict, ready for :meth:`SearchSpace.from_dict`) of ``stage``:
    :data:`COMMON_SPACE` over the stage's default strategies, ``[fit] beta`` where a default
    strategy's fit accepts it, then the stage's entry of :data:`STAGE_SPACES`."""
    strategies = [s.strip() for s in stage.default_strategies.split(",") if s.strip()]
    space: dict[str, Any] = {**copy.deepcopy(COMMON_SPACE), "strategies": strategies}
    accepted: set[str] = set()
    for name in strategies:
        opt_cls = stage.registry.load(name, "optimizer")
        if opt_cls is not None:
            accepted |= init_params(opt_cls)
    if "beta" in accepted:
        space["fit"] = copy.deepcopy(_FIT_BETA)
    space.update(copy.deepcopy(getattr(stage, "sweep_space", None) or STAGE_SPACES.get(stage.name, {})))
    return space


__all__ = ["COMMON_SPACE", "DEFAULT_SPACE", "STAGE_SPACES", "default_space"]
