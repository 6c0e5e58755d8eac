"""Judge agreement with human 1-5 ratings: Spearman's rho and quadratic-weighted kappa (95%
bootstrap CIs), exact agreement, MAE, inflation, per ``judge`` strategy, on a canonical
preference-rating JSONL (:class:`~personalign.data.PreferenceRatingExample`)."""

from __future__ import annotations

import os
import time
from typing import Sequence

from personalign.lm import resolve_lm


def run_judge_agreement(ratings: str | os.PathLike, *, strategies: Sequence[str] = ("pairwise", "single-order", "tie"),
                        split: str | None = "val", limit: int | None = None, lm=None, n_boot: int = 1000,
                        seed: int = 0, progress: bool = False) -> dict:
    """Run each ``judge`` strategy on the rated pairs of ``split`` (``limit`` of them: a seeded
    sample stratified by prompt, :meth:`personalign.stages.Stage.limit`) and compare its
    ratings with the humans' (:func:`personalign.programs.judge.metrics.judge_agreement`).

    Returns:
        ``{"data", "split", "n", "strategies": [{"name", "spearman", "spearman_ci", "qwk",
        "qwk_ci", "exact", "mae", "inflation", "rating_agreement", "position_consistency",
        "lm_calls", "failures", "seconds"}]}``.

    Raises:
        DataError: unreadable ratings file or empty split.
    """
    from personalign.evaluation import run_program
    from personalign.programs.judge.metrics import judge_agreement
    from personalign.stages import resolve_stage

    stage = resolve_stage("judge")
    examples = stage.limit(stage.load(ratings, split=split), limit, seed)
    rows, lm_obj = [], None
    for name in strategies:
        info = stage.registry.info(name)
        if info.uses_lm and lm_obj is None:
            lm_obj = resolve_lm(lm, True)
        t0 = time.perf_counter()
        program = stage.registry.create(name)
        out = run_program(program, examples, inputs=stage.inputs, output=stage.output,
                          lm=lm_obj if info.uses_lm else None, description=name, progress=progress)
        rep = judge_agreement(examples, out.predictions, n_boot=n_boot, seed=seed)
        metric = stage.metric_fn()
        per = [metric(ex, {"ratings": p}) if p is not None else 0.0 for ex, p in zip(examples, out.predictions)]
        rows.append({"name": name, **{k: rep[k] for k in ("n_pairs", "n_missing", "spearman", "spearman_ci", "qwk",
                                                          "qwk_ci", "exact", "mae", "judge_mean", "human_mean",
                                                          "inflation")},
                     "rating_agreement": sum(per) / len(per) if per else None, "lm_calls": out.lm_calls,
                     "failures": out.failures, "errors": out.errors[:3], "seconds": round(time.perf_counter() - t0, 2)})
    return {"data": str(ratings), "split": split, "n": len(examples), "strategies": rows}


__all__ = ["run_judge_agreement"]
