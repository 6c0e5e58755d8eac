"""The stage's reference constant beside a sweep's best trial.

``compare`` reads every binary stage against its reference: the constant that predicts the class
the objective scores (``all-yes`` for F1 of a true class, :func:`personalign.stages.strategies.reference_strategy`).
A sweep scores that constant on the same evaluation rows as its trials, by the same objective, so
its summary and the exported ``program.json`` (``compile.sweep.reference``) say when the best
trial does not beat answering the same thing to every row.
"""

from __future__ import annotations

from typing import Any


def reference_figure(stage, objective, evalset: list, *, n_boot: int, seed: int) -> dict[str, Any] | None:
    """``{"strategy", "objective", "value", "interval", "low", "high"}`` of ``stage``'s reference
    constant on ``evalset`` (compiled by ``objective.compile`` on the sweep's train rows, no LM),
    or None for a stage without one.

    Raises:
        Exception: whatever compiling or scoring the constant raises (the caller records it).
    """
    from personalign.evaluation import across_groups, run_program, stage_report
    from personalign.sweeps.space import TrialConfig

    name = stage.reference
    if not name or name not in stage.registry or stage.registry.info(name).uses_lm:
        return None
    config = TrialConfig(name, None, {}, {}, {}, None)
    program, _ = objective.compile(config, None)
    outcome = run_program(program, evalset, inputs=stage.inputs, output=stage.output, lm=None,
                          description=name, progress=False)
    metric = stage.objective.name
    value = float(stage.score(evalset, outcome.predictions, scores=outcome.scores))
    report = across_groups(stage_report(stage, evalset, outcome.predictions, n_boot=n_boot, seed=seed),
                           stage.metric_name)
    out: dict[str, Any] = {"strategy": name, "objective": metric, "value": value, "n": len(evalset)}
    for key, words in (("ci", "95% CI"), ("range", "range over groups")):
        bounds = report.get(f"{metric}_{key}")
        if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
            out.update({"interval": words, "low": bounds[0], "high": bounds[1]})
            break
    return out


def versus_best(reference: dict[str, Any], best_value: float | None) -> dict[str, Any]:
    """``reference`` with ``best_beats_it`` (the best trial's value strictly above the constant's;
    None without a best trial) and ``note``, one plain sentence."""
    out = dict(reference)
    if best_value is None:
        out["best_beats_it"] = None
        return out
    beats = float(best_value) > reference["value"]
    out["best_beats_it"] = beats
    metric, name = reference["objective"], reference["strategy"]
    if not beats:
        same = "scores the same" if float(best_value) == reference["value"] else "scores higher"
        out["note"] = (f"the best trial ({metric} {best_value:.3f}) does not beat the constant {name} "
                       f"({metric} {reference['value']:.3f}): answering the same to every row {same}")
    return out


__all__ = ["reference_figure", "versus_best"]
