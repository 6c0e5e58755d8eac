"""``personalign label next``: the next rows to label, chosen to sharpen a decision, with the
probability each was chosen with (:mod:`personalign.labels.select`, :mod:`personalign.labels.estimate`).

``goal="compare"``: each strategy is fitted on the labelled rows
(:func:`personalign.compile_service.compile_program`) and predicts the pool; on the labelled rows its
predictions are cross-fitted (fitted on the other groups), so the two **leading** strategies (best
objective on the labelled rows) and the calibration of their scores into a probability of the
positive class are measured out of sample. The acquisition is where the two leading strategies'
difference is most at stake. ``goal="compile"``: a saved program's compiled decision rule; rows
whose score is near its boundary.

Every chosen row is written with ``selection_probability`` (the probability it was drawn with among
its group's unlabelled rows), ``acquisition`` and ``selection`` ``{"round", "draw", "stratum",
"stratum_size", "goal", "strategies", "floor", "seed"}``: enough to rebuild the design
(:func:`design_from_rows`) and estimate the difference without bias (:func:`fbeta_difference`).
Rows labelled outside these rounds after the first one break the design (their chance of being
labelled is unknown); the rows labelled before the first round are counted exactly.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from personalign.errors import ConfigurationError

__all__ = ["cross_fitted", "fitted_predictions", "next_rows", "design_from_rows", "boundary_distance",
           "estimate_from_rows"]

SELECTION = "selection"


def _group(stage, ex) -> str:
    return str(getattr(ex, stage.group_key, None)) if stage.group_key else "all"


def fitted_predictions(stage, strategy: str, train: Sequence, rows: Sequence, *, lm=None, seed: int = 0) -> tuple[list, list]:
    """``(positive-class predictions, scores)`` of ``strategy`` fitted on ``train``, on ``rows``
    (a failure: None; a missing score: None)."""
    from personalign.compile_service import compile_program
    from personalign.programs.run import run_program

    info = stage.registry.info(strategy)
    program, _ = compile_program(stage, strategy, None, list(train), lm=lm, seed=seed)
    out = run_program(program, list(rows), inputs=stage.inputs, output=stage.output,
                      lm=lm if info.uses_lm else None, progress=False)
    return [stage.is_positive(p) for p in out.predictions], list(out.scores)


def cross_fitted(stage, strategy: str, examples: Sequence, *, folds: int = 5, lm=None, seed: int = 0) -> tuple[list, list]:
    """Out-of-group predictions of ``strategy`` on every example: the stage's groups are dealt into
    at most ``folds`` folds (whole groups, in order of first appearance), each fold predicted by the
    strategy fitted on the others. Returns ``(predictions, scores)`` in the order of ``examples``.

    Raises:
        ConfigurationError: fewer than 2 groups.
    """
    groups = list(dict.fromkeys(_group(stage, ex) for ex in examples))
    if len(groups) < 2:
        raise ConfigurationError(f"cross-fitting needs at least 2 {stage.group_key or 'group'}s among the labelled rows")
    fold_of = {g: i % min(folds, len(groups)) for i, g in enumerate(groups)}
    preds: list = [None] * len(examples)
    scores: list = [None] * len(examples)
    for f in sorted(set(fold_of.values())):
        test = [i for i, ex in enumerate(examples) if fold_of[_group(stage, ex)] == f]
        train = [ex for i, ex in enumerate(examples) if fold_of[_group(stage, ex)] != f]
        p, s = fitted_predictions(stage, strategy, train, [examples[i] for i in test], lm=lm, seed=seed)
        for j, i in enumerate(test):
            preds[i], scores[i] = p[j], s[j]
    return preds, scores


def _score_matrix(preds: Sequence[Sequence], scores: Sequence[Sequence]) -> np.ndarray:
    cols = []
    for p, s in zip(preds, scores):
        cols.append([float(x) if x is not None else float(bool(q)) for x, q in zip(s, p)])
    return np.asarray(cols, dtype=float).T


def boundary_distance(program, stage, rows: Sequence, scores: Sequence[float]) -> np.ndarray:
    """Signed distance of each row's score to a compiled program's decision boundary: a threshold
    rule ``score - value``; ``zscore``/``offset`` the normalized score minus the value; ``top_share``
    the score minus the midpoint between the last chosen and the first unchosen score of its unit,
    over the unit's standard deviation; no rule but a ``threshold`` attribute: ``score - threshold``.

    Raises:
        ConfigurationError: the program has neither a decision rule nor a threshold.
    """
    from personalign.programs.decision import DecisionRule, normalize

    s = np.asarray(scores, dtype=float)
    raw = getattr(program, "decision_rule", None)
    if raw is None:
        threshold = getattr(program, "threshold", None)
        if threshold is None:
            raise ConfigurationError("--goal compile needs a program with a compiled decision rule or a threshold")
        return s - float(threshold)
    rule = DecisionRule.from_dict(raw) if isinstance(raw, dict) else raw
    units = [tuple(getattr(ex, k, None) for k in rule.unit) if rule.unit else stage.decision_group(ex) for ex in rows]
    if rule.kind != "top_share":
        return normalize(rule.kind, s, units) - rule.value
    out = np.zeros(s.size)
    for u in set(units):
        idx = np.array([i for i, v in enumerate(units) if v == u])
        v = np.sort(s[idx])[::-1]
        k = int(np.ceil(rule.value * idx.size - 1e-9))
        mid = v[0] + 1 if k == 0 else (v[-1] - 1 if k >= idx.size else (v[k - 1] + v[k]) / 2)
        sd = v.std() if v.std() > 0 else 1.0
        out[idx] = (s[idx] - mid) / sd
    return out


def design_from_rows(labelled: Sequence, pool_size_by_stratum: dict | None = None) -> dict:
    """The selection rounds recorded on labelled rows: ``{"round": last round, "drawn": {stratum:
    rows drawn}, "sizes": {stratum: stratum_size}}`` (rows without a ``selection`` record were
    labelled before the first round)."""
    drawn: dict[str, int] = {}
    sizes: dict[str, int] = dict(pool_size_by_stratum or {})
    last = 0
    for ex in labelled:
        rec = getattr(ex, SELECTION, None) if not isinstance(ex, dict) else ex.get(SELECTION)
        if not isinstance(rec, dict):
            continue
        s = str(rec.get("stratum"))
        drawn[s] = drawn.get(s, 0) + 1
        sizes[s] = int(rec.get("stratum_size", sizes.get(s, 0)))
        last = max(last, int(rec.get("round", 0)))
    return {"round": last, "drawn": drawn, "sizes": sizes}


def _record(ex) -> dict | None:
    rec = ex.get(SELECTION) if isinstance(ex, dict) else getattr(ex, SELECTION, None)
    return rec if isinstance(rec, dict) else None


def estimate_from_rows(stage, labelled: Sequence, pool: Sequence, pred_a: Sequence[bool], pred_b: Sequence[bool]) -> dict:
    """The unbiased paired F-beta difference of two strategies' predictions (``pred_a``/``pred_b``:
    positive class, labelled rows first, then the pool) from the rows drawn by earlier rounds of
    :func:`next_rows` (their ``selection`` records: probability, group, draw order, group size), the
    rows labelled before the first round counted exactly (:func:`~personalign.labels.estimate.fbeta_difference`,
    no control: the predictions of a round were not recorded).

    Returns:
        the estimate, or ``{"note": why there is none}`` (no drawn row yet; a group without a draw; a
        group whose recorded size is not its drawn plus pool rows: the files changed between rounds).
    """
    from personalign.stages.objective import fbeta_of, labels as positive_labels
    from personalign.labels.estimate import Draw, fbeta_difference

    beta = fbeta_of(stage)
    if beta is None:
        return {"note": f"no estimator for the objective of {stage.name} (an F-beta of a yes/no stage is needed)"}
    recs = [_record(ex) for ex in labelled]
    drawn = sorted((i for i, r in enumerate(recs) if r), key=lambda i: (recs[i]["round"], recs[i]["draw"]))
    if not drawn:
        return {"note": "no row chosen by label next is labelled yet: no weighted estimate"}
    strata = [recs[i]["stratum"] if recs[i] else None for i in range(len(labelled))] + [_group(stage, ex) for ex in pool]
    for s in {recs[i]["stratum"] for i in drawn}:
        have = sum(1 for i in drawn if recs[i]["stratum"] == s) + sum(1 for ex in pool if _group(stage, ex) == s)
        size = max(int(recs[i]["stratum_size"]) for i in drawn if recs[i]["stratum"] == s)
        if have != size:
            return {"note": f"group {s}: {have} drawn and pool rows, but the selection records say {size}: the "
                            "labelled or pool file changed between rounds; no weighted estimate"}
    gold = [bool(stage.is_positive(stage.gold(ex))) for ex in labelled] + [None] * len(pool)
    draws = [Draw(i, recs[i]["stratum"], _prob(labelled[i]), int(recs[i]["round"])) for i in drawn]
    known = [i for i, r in enumerate(recs) if not r]
    try:
        return fbeta_difference(gold, pred_a, pred_b, draws=draws, strata=strata, known=known, beta=beta)
    except ValueError as exc:
        return {"note": f"no weighted estimate: {exc}"}


def _prob(ex) -> float:
    value = ex.get("selection_probability") if isinstance(ex, dict) else getattr(ex, "selection_probability", None)
    if value is None:
        raise ConfigurationError("a labelled row has a selection record but no selection_probability")
    return float(value)


def next_rows(stage, labelled: Sequence, pool: Sequence, *, k: int, strategies: Sequence[str] = (), program=None,
              goal: str = "compare", seed: int = 0, floor: float | None = None, folds: int = 5, lm=None,
              program_name: str | None = None) -> dict[str, Any]:
    """Choose the next ``k`` rows of ``pool`` to label (see the module doc).

    Args:
        stage: a binary :class:`~personalign.stages.Stage`.
        labelled: labelled examples (the stage's loader); ``pool``: unlabelled examples with ids, not
            among the labelled ones (:func:`personalign.data.inputs.read_inputs`).
        strategies: ``goal="compare"``: at least two strategy names of the stage.
        program: ``goal="compile"``: a loaded program (:func:`personalign.programs.saved.load_program`);
            ``program_name`` what to call it (its strategy).
        floor: the uniform share of each draw (default :data:`~personalign.labels.select.DEFAULT_FLOOR`).

    Returns:
        ``{"chosen": [{"index" (into pool), "selection_probability", "acquisition", "selection"}],
        "goal", "leading", "objective" {strategy: out-of-sample objective on the labelled rows},
        "allocation" {stratum: draws}, "round", "metric", "estimate"}``; ``estimate``
        (compare): the leading pair's weighted difference from earlier rounds' rows
        (:func:`estimate_from_rows`), else its ``note``. ``objective`` is the plain figure on the
        labelled rows: not unbiased once they include chosen rows.

    Raises:
        ConfigurationError: a stage that is not binary; fewer than 2 strategies (compare) or no
            program (compile); k < 1; an empty pool.
    """
    from personalign.labels.select import DEFAULT_FLOOR, allocate, boundary_acquisition, calibrate, compare_acquisition, draw
    from personalign.stages.objective import fbeta_of, labels as positive_labels

    floor = DEFAULT_FLOOR if floor is None else floor
    if stage.kind != "binary":
        raise ConfigurationError(f"label next works on yes/no stages; {stage.name} is {stage.kind}")
    if k < 1:
        raise ConfigurationError(f"--k must be >= 1, got {k}")
    if not pool:
        raise ConfigurationError("the pool has no unlabelled row left")
    metric = stage.objective.name
    objective: dict[str, float] = {}
    estimate: dict | None = None
    if goal == "compare":
        if len(strategies) < 2:
            raise ConfigurationError("--goal compare needs at least two --strategies")
        gold = [bool(stage.is_positive(stage.gold(ex))) for ex in labelled]
        oos, full = {}, {}
        for name in strategies:
            oos[name] = cross_fitted(stage, name, labelled, folds=folds, lm=lm, seed=seed)
            full[name] = fitted_predictions(stage, name, labelled, pool, lm=lm, seed=seed)
            objective[name] = stage.score(labelled, [None if p is None else stage.positive if p
                                                                else (not stage.positive) for p in oos[name][0]])
        leading = sorted(strategies, key=lambda s: -objective[s])[:2]
        feats = np.vstack([_score_matrix([oos[s][0] for s in leading], [oos[s][1] for s in leading]),
                           _score_matrix([full[s][0] for s in leading], [full[s][1] for s in leading])])
        mask = [True] * len(labelled) + [False] * len(pool)
        p = calibrate(feats, gold + [None] * len(pool), mask)
        pa = [bool(x) for x in oos[leading[0]][0]] + [bool(x) for x in full[leading[0]][0]]
        pb = [bool(x) for x in oos[leading[1]][0]] + [bool(x) for x in full[leading[1]][0]]
        acq = compare_acquisition(pa, pb, p, gold + [None] * len(pool), mask, beta=fbeta_of(stage))[len(labelled):]
        estimate = estimate_from_rows(stage, labelled, pool, pa, pb)
    elif goal == "compile":
        if program is None:
            raise ConfigurationError("--goal compile needs --program (a saved program)")
        from personalign.programs.run import run_program

        out = run_program(program, list(pool), inputs=stage.inputs, output=None, lm=lm, progress=False)
        scores = [getattr(o, "score", None) if o is not None else None for o in out.predictions]
        if any(s is None for s in scores):
            raise ConfigurationError("--goal compile needs a program that scores every row (a score per prediction)")
        acq = boundary_acquisition(boundary_distance(program, stage, pool, scores))
        leading = [program_name or type(program).__name__]
    else:
        raise ConfigurationError(f"--goal must be compare or compile, got {goal!r}")
    strata = [_group(stage, ex) for ex in pool]
    prior = design_from_rows(labelled)
    sizes = {s: strata.count(s) + prior["drawn"].get(s, 0) for s in dict.fromkeys(strata)}
    counts = allocate(sizes, prior["drawn"], k)
    rng = np.random.default_rng(seed)
    chosen, rnd, seen = [], prior["round"] + 1, dict(prior["drawn"])
    for i, q in draw(acq, strata, [True] * len(pool), counts, rng, floor=floor):
        s = strata[i]
        seen[s] = seen.get(s, 0) + 1
        chosen.append({"index": i, "selection_probability": q, "acquisition": float(acq[i]),
                       SELECTION: {"round": rnd, "draw": seen[s], "stratum": s, "stratum_size": sizes[s],
                                   "goal": goal, "strategies": list(leading), "floor": floor, "seed": seed}})
    return {"chosen": chosen, "goal": goal, "leading": list(leading), "objective": objective, "metric": metric,
            "allocation": {s: c for s, c in counts.items() if c}, "round": rnd, "estimate": estimate}
