"""Shared pieces of the runners: mean with a bootstrap CI, running a stage strategy."""

from __future__ import annotations

import math
from typing import Any, Sequence


def mean_ci(values: Sequence[float], *, n_boot: int = 1000, seed: int = 0) -> dict:
    """``{"mean", "ci", "n"}``: the mean of ``values`` and its 95% percentile-bootstrap CI
    (:func:`personalign.metrics.bootstrap_ci`); None for an empty list."""
    import numpy as np

    from personalign.metrics import bootstrap_ci

    v = np.asarray([float(x) for x in values], dtype=float)
    if v.size == 0:
        return {"mean": None, "ci": None, "n": 0}
    ci = bootstrap_ci(np.mean, v, n_boot=n_boot, seed=seed)
    return {"mean": float(v.mean()), "ci": None if any(math.isnan(c) for c in ci) else [float(c) for c in ci],
            "n": int(v.size)}


def run_strategy(stage_name: str, strategy: str, examples: Sequence, *, lm=None, progress: bool = False,
                 **kwargs) -> tuple[Any, Any]:
    """Build ``strategy`` of stage ``stage_name`` (``kwargs`` to its constructor) and run it with
    :func:`personalign.programs.run.run_program` (retries, failures counted). Returns
    ``(outcome, lm)``; ``outcome.predictions`` holds the stage's output field per example."""
    from personalign.evaluation import run_program
    from personalign.lm import resolve_lm
    from personalign.stages import resolve_stage

    stage = resolve_stage(stage_name)
    info = stage.registry.info(strategy)
    program = stage.registry.create(strategy, **kwargs)
    lm_obj = resolve_lm(lm, info.uses_lm)
    outcome = run_program(program, examples, inputs=stage.inputs, output=stage.output, lm=lm_obj,
                          description=f"{stage_name}:{strategy}", progress=progress)
    return outcome, lm_obj


__all__ = ["mean_ci", "run_strategy"]
