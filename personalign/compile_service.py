"""The one compile path: every program of every stage is compiled here.

``compare``, ``compile``, ``sweep``, the relevance Python API, the benchmarks and the tests call
:func:`compile_program` with the :class:`~personalign.stages.Stage` (label, positive class,
group key, metric, objective); nothing here assumes a stage.

Compiling an LLM strategy with a teleprompter:

1. a **dev split** of whole groups (``stage.group_key``) is held out from train
   (:func:`dev_split`); the teleprompter runs on the rest (and may use dev for its own search);
2. the teleprompter's inner loop optimizes the stage's per-example metric **class-balanced**
   (:func:`personalign.stages.objective.balanced_metric`: DSPy's mean is then balanced accuracy), so no
   teleprompter can win by predicting one class;
3. the candidates -- the **uncompiled program**, the compiled one and, for teleprompters that rank
   candidate programs (bootstrap-rs, MIPROv2), up to ``max_alternatives`` runners-up -- are run on dev
   (:func:`personalign.programs.run.run_program`, the one runner) and scored by the stage's **set**
   objective (F1, F2, kappa, ... :class:`personalign.stages.Objective`). A candidate that
   predicts a single class on dev gets a warning and never wins over a non-constant one; among the
   rest the highest objective wins and ties go to the uncompiled program. So a compile never
   returns a program that scores worse on dev than the one it was given (unless that one was
   constant and the compiled one is not). **Toward ranking** (``optimizer_settings={"select_by":
   "auc"}``, for programs whose decision the rule of step 4 makes): the candidates are compared by
   the dev ROC AUC of the scores they produce instead (a constant-decision candidate competes:
   its score may still rank), the uncompiled program first, ties to it; when a candidate has no
   score on some dev example, the set objective decides and the reason says so;
4. **decision calibration** (binary stages, programs whose predictions carry a ``score``, e.g. the
   LLM judges' own yes/no log-probability margin): a raw threshold or a rule inside a unit (top
   share, z-score, offset from the unit's median; unit = ``stage.group_key`` or
   ``stage.decision_keys``), rule and unit chosen by leave-one-group-out CV (whole
   ``group_key`` groups held out) inside train -- the chosen program's dev scores plus its scores
   on the fit examples that are not its own demos -- is added when it beats the program's own
   decisions on the same folds (:func:`personalign.optimizers.decision.fit_decision_rule`); its
   per-group figures are in ``details["selection"]["decision_rule"]``; it is saved with the program.

The ``CompileResult`` dict says all of it: ``objective``, ``dev_objective_before`` /
``dev_objective_after``, ``chosen`` and ``reason``, ``details["selection"]`` (every candidate's dev
objective, yes-rate, failures, constant flag), ``projected_lm_calls`` / ``actual_lm_calls``
(dev scoring included).

Trainable strategies are fitted by their own optimizer on all of train (their fit does its own
grouped CV); LLM strategies without an optimizer are returned as they are.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any, Sequence

from personalign.optimizers.plan import (compile_fingerprint, dev_split, make_optimizer, projected_calls, selection_calls,
                                         settings_of)


def check_fit(stage, strategy: str, rows: list, data: Any, where: str, *, hint: str = "") -> None:
    """What compile needs of the rows a trainable strategy is fitted on, checked before any work --
    by compile itself and by a sweep before its first trial (the same rows make the same verdict):
    both classes (binary stages) and as many whole groups of the stage's ``group_key`` as the
    strategy's fit holds out in its cross-validation (its ``min_groups``). LLM strategies need
    nothing here (a teleprompter without 2 groups skips the dev selection and says so).

    Raises:
        DataError: naming ``data``, ``where`` (the rows: a split, "all but topic=x") and what is
            missing; ``hint`` is appended (what would let it fit).
    """
    from personalign.errors import DataError

    info = stage.registry.info(strategy)
    if not info.trainable:
        return
    stage.check_fittable(rows, data, where)
    need = int(getattr(stage.registry.load(strategy, "optimizer"), "min_groups", 0) or 0)
    groups = {getattr(ex, stage.group_key, None) for ex in rows}
    if need and len(groups) < need:
        raise DataError(data, None, stage.group_key,
                        f"{strategy} fits its decision threshold by cross-validation over whole '{stage.group_key}' "
                        f"groups and needs {need} or more; {where} holds {len(groups)}{hint}")


def score_on(stage, program, examples: Sequence, *, lm=None, name: str = "candidate") -> dict[str, Any]:
    """Run ``program`` on ``examples`` and score it with the stage's set objective.

    Returns ``{"name", "objective", "constant", "yes_rate" and "auc" (binary stages; ``auc``: ROC
    AUC of the scores against the labels, None when a score is missing or dev holds one class),
    "failures", "lm_calls", "predictions", "scores"}``.
    """
    from personalign.evaluation import run_program
    from personalign.stages.objective import is_constant

    outcome = run_program(program, examples, inputs=stage.inputs, output=stage.output, lm=lm, progress=False,
                          description=name)
    out: dict[str, Any] = {"name": name,
                           "objective": stage.score(examples, outcome.predictions, scores=outcome.scores, lm=lm),
                           "constant": is_constant(stage, outcome.predictions), "failures": outcome.failures,
                           "lm_calls": outcome.lm_calls, "predictions": outcome.predictions,
                           "scores": outcome.scores}
    if stage.kind == "binary":
        pos = [stage.is_positive(p) for p in outcome.predictions]
        out["yes_rate"] = sum(bool(p) for p in pos) / max(1, len(pos))
        out["auc"] = _auc(stage, examples, outcome.scores)
    return out


def _auc(stage, examples: Sequence, scores) -> float | None:
    from sklearn.metrics import roc_auc_score

    gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
    if not scores or any(s is None for s in scores) or len(set(gold)) < 2:
        return None
    return float(roc_auc_score(gold, [float(s) for s in scores]))


def choose(candidates: list[dict], by: str = "objective") -> tuple[dict, str]:
    """The winning candidate (see the module docstring, step 3) and why it won; ``by`` is
    ``"objective"`` (the set objective of the decisions) or ``"auc"`` (the ranking quality of the
    scores; falls back to the objective when a candidate has no AUC)."""
    import math

    fallback = by == "auc" and any(c.get("auc") is None for c in candidates)
    key = "auc" if by == "auc" and not fallback else "objective"

    def value(c):
        v = c[key]
        return -math.inf if v is None or math.isnan(v) else v

    if key == "auc":
        live = candidates
        best = live[0]
        for c in live[1:]:
            if value(c) > value(best) + 1e-12:
                best = c
        others = ", ".join(f"{c['name']} {value(c):.4f}" for c in candidates if c is not best)
        why = f"highest dev ROC AUC of the scores {value(best):.4f}" + (f" vs {others}" if others else "")
        if any(c is not best and abs(value(c) - value(best)) <= 1e-12 for c in live):
            why += "; ties go to the earlier candidate (the uncompiled program first)"
        return best, why
    live = [c for c in candidates if not c["constant"]] or candidates
    best = live[0]
    for c in live[1:]:
        if value(c) > value(best) + 1e-12:
            best = c
    others = ", ".join(f"{c['name']} {value(c):.4f}" + (" (constant)" if c["constant"] else "")
                       for c in candidates if c is not best)
    why = f"highest dev objective {value(best):.4f}" + (f" vs {others}" if others else "")
    if fallback:
        why += "; chosen by the objective: a candidate has no score on some dev example (no AUC)"
    if len(live) < len(candidates):
        why += "; constant candidates excluded"
    elif best["constant"]:
        why += "; every candidate predicts a single class on dev"
    if any(c is not best and abs(value(c) - value(best)) <= 1e-12 for c in live):
        why += "; ties go to the earlier candidate (the uncompiled program first)"
    return best, why


def _demo_inputs(program, inputs: Sequence[str]) -> set:
    """The input tuples of every demo of ``program``'s predictors (examples it has seen answered)."""
    seen = set()
    for predictor in program.predictors():
        for demo in getattr(predictor, "demos", None) or []:
            seen.add(tuple(str(demo.get(k)) if hasattr(demo, "get") else str(getattr(demo, k, None)) for k in inputs))
    return seen


def _calibrate(stage, chosen: dict, program, dev: list, fit: list, lm) -> tuple[Any, Any, int, int]:
    """Fit a decision rule for ``program`` (the winning candidate ``chosen``) by grouped CV on
    train: its dev scores plus its scores on the fit examples that are not its own demos.

    Returns ``(program, rule | None, lm_calls, n_calibration, dev_after)``: ``dev_after`` is the
    set objective of the rule's out-of-fold decisions on the dev examples (comparable with the
    program's own dev objective), None without a rule; no rule (and no LM calls beyond dev) when
    the stage is not binary or the program's predictions carry no score."""
    from personalign.optimizers.decision import fit_decision_rule, stage_units, with_rule

    if stage.kind != "binary" or not dev or any(s is None for s in chosen["scores"]):
        return program, None, 0, 0, None
    demos = _demo_inputs(program, stage.inputs)
    extra = [ex for ex in fit if tuple(str(getattr(ex, k, None)) for k in stage.inputs) not in demos]
    scored_fit = score_on(stage, program, extra, lm=lm, name=f"{chosen['name']} on fit (calibration)")
    examples = list(dev) + extra
    scores = list(chosen["scores"]) + list(scored_fit["scores"])
    preds = list(chosen["predictions"]) + list(scored_fit["predictions"])
    keep = [i for i, s in enumerate(scores) if s is not None]  # fit calls that failed have no score
    examples, scores, preds = [examples[i] for i in keep], [scores[i] for i in keep], [preds[i] for i in keep]
    on_dev = [j for j, i in enumerate(keep) if i < len(dev)]
    # folds hold whole groups out (relevance: prompts); the rule's unit is chosen among the
    # stage's group_key and decision_keys
    groups = [getattr(ex, stage.group_key, None) if stage.group_key else stage.decision_group(ex) for ex in examples]
    units = stage_units(examples, stage.group_key, stage.decision_keys)
    raw = [bool(p) if p is not None else False for p in preds]

    def objective(idx, decisions):
        return stage.score([examples[i] for i in idx], list(decisions))

    oof: list[bool] = []
    from personalign.metrics.dspy_metrics import to_bool

    positives = [to_bool(stage.gold(ex)) is True for ex in examples]  # where a True decision is right
    rule = fit_decision_rule([float(s) for s in scores], groups, raw, objective, out_of_fold=oof,
                             units=units or None, positives=positives)
    calls = scored_fit["lm_calls"]
    if rule is None:
        return program, None, calls, len(examples), None
    dev_after = objective(on_dev, [oof[j] for j in on_dev])
    return with_rule(program, rule, stage.output, stage.decision_group), rule, calls, len(examples), dev_after


def compile_program(stage, strategy: str, optimizer: str | None, trainset: list, *, lm=None, seed: int = 0,
                    optimizer_settings: dict | None = None, fit_settings: dict | None = None, program=None,
                    select: bool = True, calibrate: bool = True):
    """Build ``strategy`` of ``stage`` (or take ``program``) and compile it on ``trainset``.

    Args:
        stage: a :class:`~personalign.stages.Stage`.
        optimizer: a teleprompter name (LLM strategies), or None (trainable strategies: their own
            fit; LLM strategies: returned as they are).
        optimizer_settings: teleprompter settings (e.g. ``{"k": 4}``); ``decision_rule``: ``"auto"``
            (default: step 4) or ``"none"`` (a sweep's search space may name it).
        fit_settings: settings of a trainable strategy's own optimizer (e.g. ``{"beta": 2.0}``).
        select: choose among the uncompiled and compiled programs on dev (step 3); False returns
            the teleprompter's program.
        calibrate: fit a decision rule (step 4).

    Returns:
        ``(program, compile_info | None)``: ``compile_info`` is ``CompileResult.to_dict()``, its
        ``actual_lm_calls`` every model call the compile made (forward passes of a fit included),
        ``cached_lm_calls`` those a cache answered, ``projected_lm_calls`` :func:`projected_calls`.

    Raises:
        ConfigurationError: unknown strategy/optimizer; ValueError: empty trainset.
    """
    from personalign.lm import CallCounter
    from personalign.lm.ledger import unit

    name = compile_fingerprint(stage, strategy, optimizer, trainset, lm=lm, seed=seed,
                               optimizer_settings=optimizer_settings, fit_settings=fit_settings, program=program,
                               select=select, calibrate=calibrate)
    given = program
    with CallCounter() as counter, unit(name):  # its calls' cache keys, for the next projection
        program, info = _compile(stage, strategy, optimizer, trainset, lm=lm, seed=seed, fit_settings=fit_settings,
                                 optimizer_settings=optimizer_settings, program=program, select=select,
                                 calibrate=calibrate)
    if info is not None:
        if info.get("projected_lm_calls") is None:  # a fit (a teleprompter projects its own)
            info["projected_lm_calls"] = projected_calls(stage, strategy, optimizer, trainset, seed=seed)
        info["expected_lm_calls"] = projected_calls(stage, strategy, optimizer, trainset, lm=lm, seed=seed,
                                                    optimizer_settings=optimizer_settings, program=given,
                                                    select=select, calibrate=calibrate, expected=True)
        info.update(actual_lm_calls=counter.calls, lm_calls=counter.calls, cached_lm_calls=counter.cached)
    return program, info


def _compile(stage, strategy, optimizer, trainset, *, lm, seed, optimizer_settings, fit_settings, program, select,
             calibrate):
    """:func:`compile_program`'s work (the caller counts its model calls)."""
    from personalign.lm import use

    registry = stage.registry
    info = registry.info(strategy)
    program = program if program is not None else registry.create(strategy)
    ctx = use(lm if info.uses_lm else None)
    if optimizer is None:
        if not info.trainable:
            return program, None
        check_fit(stage, strategy, trainset, "the training rows", f"{len(trainset)} training rows")
        opt = stage.default_optimizer(strategy, seed=seed, **(fit_settings or {}))
        with ctx:
            program, result = opt.compile(program, trainset=trainset)
        return program, result.to_dict()

    settings, rule_mode, select_by = settings_of(optimizer_settings)
    calibrate = calibrate and rule_mode == "auto"
    fit, dev = dev_split(trainset, seed, stage.group_key)
    opt, selecting = make_optimizer(stage, strategy, optimizer, fit, dev, lm=lm, seed=seed, settings=settings,
                                    select=select)
    # teleprompters print progress to stdout; keep stdout for results (--json)
    with ctx, contextlib.redirect_stdout(sys.stderr):
        compiled, result = opt.compile(program, trainset=fit, valset=dev)
    result.objective = stage.objective.name
    if not selecting:
        if dev is None:
            result.details["selection"] = {"skipped": f"train has fewer than 2 groups of '{stage.group_key}': "
                                                      "no dev split to choose on"}
        return compiled, result.to_dict()

    from personalign.lm import concurrency
    from personalign.lm.flight import map_in_flight

    programs = {"uncompiled": program.deepcopy(), optimizer: compiled}
    for i, alt in enumerate(getattr(opt, "alternatives", None) or [], start=2):
        programs[f"{optimizer}#{i}"] = alt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's undefined-metric warnings on tiny dev sets
        # every candidate's dev rows in flight together (the endpoint's window bounds the calls)
        candidates = map_in_flight(lambda _, item: score_on(stage, item[1], dev, lm=lm, name=item[0]),
                                   list(programs.items()), min(len(programs), concurrency(lm)))
    notes = [f"{c['name']} predicts a single class on dev" for c in candidates if c["constant"]]
    best, why = choose(candidates, by=select_by)
    chosen = programs[best["name"]]
    after, rule, calib_calls, n_calib = best["objective"], None, 0, 0
    if calibrate and info.uses_lm:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chosen, rule, calib_calls, n_calib, dev_after = _calibrate(stage, best, chosen, dev, fit, lm)
        if rule is not None:
            after = dev_after
            why += f"; decision rule ({rule.describe()}) chosen by leave-one-group-out CV on {rule.n} train examples " \
                   f"({rule.n_groups} groups) raised their mean held-out-group objective {rule.raw_objective:.4f} -> {rule.cv_objective:.4f} " \
                   f"(on dev: {best['objective']:.4f} -> {dev_after:.4f})"
    for note in notes:
        warnings.warn(f"{strategy}@{optimizer}: {note}", UserWarning, stacklevel=2)
    dev_calls = sum(c["lm_calls"] for c in candidates) + calib_calls
    result.projected_lm_calls = (result.projected_lm_calls or 0) + selection_calls(
        stage, opt, program, fit, dev, calibrate=calibrate and info.uses_lm)
    result.actual_lm_calls = (result.actual_lm_calls or 0) + dev_calls
    result.lm_calls = result.actual_lm_calls
    result.score_before, result.score_after = candidates[0]["objective"], after
    result.val_score = after
    result.dev_objective_before, result.dev_objective_after = candidates[0]["objective"], after
    result.chosen = best["name"] + ("+rule" if rule is not None else "")
    result.reason = why
    result.details["selection"] = {
        "objective": result.objective, "n_dev": len(dev), "n_fit": len(fit), "lm_calls": dev_calls,
        "select_by": select_by,
        "candidates": [{k: c.get(k) for k in ("name", "objective", "auc", "constant", "yes_rate", "failures")}
                       for c in candidates],
        "chosen": result.chosen, "reason": why, "warnings": notes,
        "decision_rule": rule.to_dict() if rule is not None else None, "n_calibration": n_calib,
        "calibration_lm_calls": calib_calls,
        "inner_metric": getattr(getattr(opt, "metric", None), "__name__", None),
        "class_weights": {("positive" if k else "negative"): round(v, 4)
                          for k, v in getattr(getattr(opt, "metric", None), "weights", {}).items()},
    }
    for key, c in (("val_before", candidates[0]), ("val_after", candidates[1])):
        result.details[key] = {"n": len(dev), "failures": c["failures"], "errors": [], "report": None,
                               "objective": c["objective"]}
    return chosen, result.to_dict()


def summary(compile_info: dict | None) -> dict[str, Any] | None:
    """The reporting part of a ``CompileResult`` dict: ``{"objective", "dev_before", "dev_after",
    "chosen", "reason", "projected_lm_calls", "expected_lm_calls", "actual_lm_calls", "cached_lm_calls",
    "decision_rule"}``
    (None: nothing compiled, or no dev selection ran)."""
    if not compile_info or compile_info.get("chosen") is None:
        return None
    sel = (compile_info.get("details") or {}).get("selection") or {}
    return {"objective": compile_info.get("objective"), "dev_before": compile_info.get("dev_objective_before"),
            "dev_after": compile_info.get("dev_objective_after"), "chosen": compile_info.get("chosen"),
            "reason": compile_info.get("reason"), "projected_lm_calls": compile_info.get("projected_lm_calls"),
            "expected_lm_calls": compile_info.get("expected_lm_calls"),
            "actual_lm_calls": compile_info.get("actual_lm_calls"), "cached_lm_calls": compile_info.get("cached_lm_calls"),
            "decision_rule": sel.get("decision_rule"),
            "warnings": sel.get("warnings") or []}


def decision_rule_of(compile_info: dict | None) -> dict[str, Any] | None:
    """The decision rule a compile fitted -- a trainable scorer's (``details["decision_rule"]``) or
    a teleprompter's calibration (``details["selection"]["decision_rule"]``) -- in brief:
    ``{"rule": "top_share@prompt_id", "describe", "reason", "band"}``; None: no rule."""
    from personalign.programs.decision import DecisionRule

    details = (compile_info or {}).get("details") or {}
    raw = details.get("decision_rule") or (details.get("selection") or {}).get("decision_rule")
    if not isinstance(raw, dict) or "kind" not in raw:
        return None
    rule = DecisionRule.from_dict(raw)
    where = "+".join(rule.unit) if rule.unit else "group"
    return {"rule": rule.kind if rule.kind == "threshold" else f"{rule.kind}@{where}", "describe": rule.describe(),
            "reason": rule.reason, "band": rule.band}


def summary_line(name: str, compile_info: dict | None) -> str | None:
    """One line for humans: ``NAME: dev f1 0.412 -> 0.455, chose bootstrap (why); LM calls 42 actual / 46
    expected (at most 120)``; None when :func:`summary` is None."""
    s = summary(compile_info)
    if s is None:
        return None
    cached = f" (+{s['cached_lm_calls']} cached)" if s.get("cached_lm_calls") else ""
    return (f"{name}: dev {s['objective']} {s['dev_before']:.3f} -> {s['dev_after']:.3f}, chose {s['chosen']} "
            f"({s['reason']}); LM calls {s['actual_lm_calls']} actual{cached} / "
            + (f"{s['projected_lm_calls']} projected" if s.get("expected_lm_calls") is None else  # a record made before
               f"{s['expected_lm_calls']} expected (at most {s['projected_lm_calls']})"))


__all__ = ["check_fit", "compile_program", "decision_rule_of", "dev_split", "make_optimizer", "projected_calls", "score_on", "choose",
           "selection_calls", "summary", "summary_line"]
