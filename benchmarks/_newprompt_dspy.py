"""Plain DSPy beside personalign's compile, on the folds of ``relevance_newprompt.py``.

Per held-out prompt (fitted on the other prompts, at most :data:`PER_UNIT` examples per
(user, prompt) for compile, a seeded sample kept in file order):

* ``dspy:labeled-k8`` -- ``dspy.LabeledFewShot(k=8)`` on ``dspy.Predict(RelevanceSignature)``;
* ``dspy:bootstrap`` -- ``dspy.BootstrapFewShot(metric=exact_match)`` (DSPy's defaults otherwise);

both as a user runs them: the same typed signature, an exact-match metric, no decision rule, the
``relevant`` field taken as the decision. Beside them personalign's compiled
``zero-shot@labeled`` (:func:`personalign.compile_service.compile_program`: dev selection among
the uncompiled and compiled programs, decision rule ``auto``).

Every program runs on every pair of the held-out prompt through
:func:`personalign.programs.run.run_program` with the same LM; a failed call is the wrong label
(:func:`personalign.programs.run.filled_predictions`, as every figure of the project counts it).
Each (row, fold) is stored as soon as it is done (:class:`_newprompt_lm.RowStore`), so a stopped
job resumes at the next fold; the summary takes a row's mean only when every fold is done.
"""

from __future__ import annotations

import time
import warnings

from _common import log

PER_UNIT = 10
"""At most this many compile examples per (user, prompt) (the issue's budget)."""
ROWS = ("dspy:labeled-k8", "dspy:bootstrap", "zero-shot@labeled")


def compile_subset(train: list, per_unit: int = PER_UNIT, seed: int = 0) -> list:
    """At most ``per_unit`` examples per (prompt_id, user_id) of ``train``: a seeded sample,
    returned in file order."""
    import random

    units: dict[tuple, list[int]] = {}
    for i, ex in enumerate(train):
        units.setdefault((str(ex.prompt_id), str(ex.user_id)), []).append(i)
    keep: set[int] = set()
    rng = random.Random(seed)
    for key in sorted(units):
        idx = units[key]
        keep.update(idx if len(idx) <= per_unit else rng.sample(idx, per_unit))
    return [ex for i, ex in enumerate(train) if i in keep]


def exact_match(example, pred, trace=None) -> bool:
    """DSPy metric: the predicted ``relevant`` equals the label."""
    return bool(getattr(pred, "relevant", None)) == bool(example.relevant)


def plain_program(row: str, train: list, seed: int = 0):
    """The plain DSPy program of ``row`` compiled on ``train`` (inside the caller's LM context)."""
    import dspy

    from personalign.signatures.relevance import RelevanceSignature

    student = dspy.Predict(RelevanceSignature)
    if row == "dspy:labeled-k8":
        return dspy.LabeledFewShot(k=8).compile(student, trainset=train)
    if row == "dspy:bootstrap":
        return dspy.BootstrapFewShot(metric=exact_match).compile(student, trainset=train)
    raise ValueError(f"unknown plain DSPy row {row!r}")


def run_row(row: str, train: list, test: list, model: str, *, seed: int = 0) -> dict:
    """``{"pred": [bool] (n_test,), "auc": None, "facts": {...}}`` of ``row`` fitted on ``train``."""
    from personalign.compile_service import compile_program
    from personalign.lm import make_lm, use
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from personalign.programs.run import filled_predictions, run_program

    sub = compile_subset(train, seed=seed)
    t0 = time.perf_counter()
    lm = make_lm(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with use(lm):
            if row.startswith("dspy:"):
                program, info = plain_program(row, sub, seed=seed), None
            else:
                base, _, opt = row.partition("@")
                program, info = compile_program(STAGE, base, opt, sub, seed=seed)
            t1 = time.perf_counter()
            out = run_program(program, test, inputs=STAGE.inputs, output=STAGE.output, progress=False)
    gold = [bool(ex.relevant) for ex in test]
    raw = [None if p is None else bool(p) for p in out.predictions]
    details = (info or {}).get("details") or {}
    facts = {"n_compile": len(sub), "compile_seconds": round(t1 - t0, 1), "run_seconds": round(time.perf_counter() - t1, 1),
             "failures": sum(p is None for p in raw),
             "demos": sum(len(getattr(p, "demos", []) or []) for _, p in program.named_predictors())
             if hasattr(program, "named_predictors") else None,
             "selection": details.get("selection")}
    return {"pred": filled_predictions(gold, raw), "auc": None, "facts": facts}


def run_folds(store, rows_by_prompt: dict[str, tuple[list, list]], prompts: list[str], model: str, *,
              seed: int = 0, deadline: float | None = None) -> None:
    """Each row of :data:`ROWS` on each of ``prompts`` (in order) not yet in ``store``; stops before
    starting a fold after ``deadline`` (``time.time()``)."""
    for p in prompts:
        train, test = rows_by_prompt[p]
        for row in ROWS:
            if store.get(row, p, len(test)) is not None:
                continue
            if deadline is not None and time.time() > deadline:
                log(f"deadline reached: {row} on {p} not started")
                return
            hit = run_row(row, train, test, model, seed=seed)
            store.put(row, p, hit)
            f = hit["facts"]
            log(f"{row} on {p}: {sum(hit['pred'])} yes of {len(test)}, compile {f['compile_seconds']}s, "
                f"run {f['run_seconds']}s, failures {f['failures']}")


__all__ = ["PER_UNIT", "ROWS", "compile_subset", "exact_match", "plain_program", "run_row", "run_folds"]
