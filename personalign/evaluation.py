"""Score a stage's programs against its gold: :func:`stage_report`, :func:`paired_comparison`,
:func:`evaluate_stage` (run + score).

Running a program over examples -- retries, failures, LM calls, wall time -- is
:func:`personalign.programs.run.run_program` (re-exported here with :class:`EvalOutcome`,
:func:`evaluate_metric`, :func:`filled_predictions` and :func:`score_of`): a failed example is
recorded as ``None`` and scored as the wrong label, never stopping the run; configuration errors
(missing model file, unknown model) do stop it.
"""

from __future__ import annotations

from typing import Any, Sequence

from personalign.errors import PersonalignError
from personalign.lm.retry import fatal_lm_error
from personalign.programs.run import EvalOutcome, evaluate_metric, filled_predictions, run_program, score_of


def stage_report(stage, examples: Sequence, predictions: Sequence[Any], *, n_boot: int = 1000,
                 seed: int = 0, lm=None) -> dict[str, Any]:
    """Score predictions of one stage against the gold of ``examples``.

    Binary stages (``stage.kind == "binary"``): gold and predictions are mapped to the stage's
    positive class (``stage.positive``), failures (None) become the wrong label, and the result
    is :func:`personalign.metrics.binary_report` (``n, f1, f1_ci, precision, recall, yes_rate``
    -- the predicted positive rate -- ``accuracy``, each with a 95% percentile-bootstrap CI, and
    ``gold_yes_rate``), plus ``correct`` (per-example 0/1).

    Scored stages: ``stage.metric(example, Prediction(**{stage.output: p}))`` per example (a
    failure scores 0), reported as ``{metric_name: mean, metric_name + "_ci": [low, high], "n",
    "correct"}`` where ``correct`` holds the per-example scores in [0, 1]. Metrics that call an LM
    (a judge) run inside :func:`personalign.lm.use` of ``lm``; their calls are counted in
    ``metric_lm_calls``.
    """
    import warnings

    import numpy as np

    from personalign.metrics import binary_report, bootstrap_ci

    from personalign.metrics.cluster import make_clusters, summarize

    levels = stage_clusters(stage, examples)
    clusters = make_clusters(levels["levels"], len(examples), levels["names"])
    if stage.kind == "binary":
        gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
        pred = [stage.is_positive(p) for p in predictions]
        filled = filled_predictions(gold, pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = binary_report(gold, filled, n_boot=n_boot, seed=seed, clusters=clusters)
        report["correct"] = [float(g == p) for g, p in zip(gold, filled)]
        report["gold_positive"] = gold
        report["predicted_positive"] = filled
        report["cluster_levels"] = levels
        return report
    from personalign.stages.scoring import per_example_scores

    scores, metric_calls = per_example_scores(stage, examples, predictions, lm=lm)
    arr = np.asarray(scores, dtype=float)
    name = stage.metric_name
    out = {"n": int(arr.size), name: float(arr.mean()) if arr.size else float("nan"), f"{name}_ci": None}
    if arr.size:
        ci = bootstrap_ci(np.mean, arr, n_boot=n_boot, seed=seed, clusters=clusters)
        out[f"{name}_ci"] = [float(x) for x in ci]
        if not clusters.singletons:
            by_group = {str(lab): float(arr[clusters.top == c].mean()) for c, lab in enumerate(clusters.labels)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fig = summarize(out[name], np.array([]), by_group, clusters)
            out[f"{name}_by_group"], out[f"{name}_range"] = by_group, fig["range"]
            if fig["ci"] is None and clusters.n_clusters < 5:
                out[f"{name}_ci"] = None
    return {**out, "resampling": clusters.describe(n_boot), "correct": scores, "metric_lm_calls": metric_calls,
            "cluster_levels": levels}


def stage_clusters(stage, examples: Sequence) -> dict:
    """The cluster levels a stage's intervals resample: its ``group_key``, then the first of its
    ``decision_keys`` that is not the group key (relevance: prompts, then users within prompts).
    A level whose field no example has is dropped; none left: items.

    Returns:
        ``{"names": [field, ...], "levels": [[value per example], ...]}`` (JSON-friendly).
    """
    keys = [stage.group_key] if stage.group_key else []
    inner = [k for k in (stage.decision_keys or ()) if k and k not in keys]
    keys += inner[:1] if keys else []
    names, levels = [], []
    for k in keys:
        values = [getattr(ex, k, None) for ex in examples]
        if any(v is not None for v in values):
            names.append(k)
            levels.append([None if v is None else str(v) for v in values])
    return {"names": names, "levels": levels}


def across_groups(report: dict, metric: str) -> dict:
    """``report`` (:func:`stage_report`) read as a figure about *other* groups: with fewer than
    :data:`~personalign.metrics.cluster.MIN_CLUSTERS` top-level groups (its ``cluster_levels``) it
    carries no percentile interval (every ``*_ci`` None) but ``{metric}_by_group`` and
    ``{metric}_range``, and its ``resampling`` names the groups. This adds the single-group case to
    what :func:`stage_report` already does for 2-4 groups: there the interval resampled the units
    inside the one group, which says nothing about another (a sweep's dev split of one topic).
    A report with 5 or more groups, or without groups, is returned as it is.
    """
    from personalign.metrics.cluster import MIN_CLUSTERS

    levels = report.get("cluster_levels") or {}
    if not levels.get("levels") or report.get(metric) is None:
        return report
    groups = list(dict.fromkeys(str(g) for g in levels["levels"][0]))
    if len(groups) >= MIN_CLUSTERS:
        return report
    out = {k: (None if k.endswith("_ci") else v) for k, v in report.items()}
    if len(groups) == 1:
        out[f"{metric}_by_group"] = {groups[0]: float(report[metric])}
        out[f"{metric}_range"] = [float(report[metric])] * 2
        out["resampling"] = {**(report.get("resampling") or {}), "unit": levels["names"][0], "n_clusters": 1}
    return out


def paired_comparison(stage, report_a: dict, report_b: dict, *, n_boot: int = 1000, seed: int = 0,
                      examples: Sequence | None = None) -> dict:
    """System a minus system b on the same examples: the paired cluster-bootstrap difference of the
    main metric with its 95% CI (None below 5 top-level clusters), the minimum detectable effect,
    and, given ``examples``, **the paired permutation test of the stage objective's difference**
    (:func:`objective_test`: the p a table shows). Kept for reference: the sign-flip test of the
    per-cluster metric differences (``diff.permutation``) and McNemar's exact test on per-example
    correctness (when 0/1; item-level, a test of accuracy).

    The clusters are those of ``report_a`` (:func:`stage_report`'s ``cluster_levels``; items when absent).

    Returns ``{"metric", "diff": {"diff", "ci", "se", "mde", "permutation", ...}, "paired_test":
    :func:`objective_test` (with ``examples``), "mcnemar": {"b", "c", "p_value", "level": "item",
    "of": "accuracy"} | None}``.
    """
    import warnings

    import numpy as np

    from personalign.metrics import mcnemar_exact, paired_bootstrap_diff
    from personalign.metrics.cluster import (MIN_CLUSTERS, make_clusters, minimum_detectable_effect, percentile_ci,
                                             resample_weights, sign_flip_test)

    ca = np.asarray(report_a["correct"], dtype=float)
    cb = np.asarray(report_b["correct"], dtype=float)
    binary01 = bool(np.isin(ca, (0.0, 1.0)).all() and np.isin(cb, (0.0, 1.0)).all())
    mcnemar = mcnemar_exact([True] * len(ca), ca.astype(bool), cb.astype(bool)) if binary01 else None
    if mcnemar is not None:
        mcnemar.update(level="item", of="accuracy")
    test = {} if examples is None else {"paired_test": objective_test(stage, examples, report_a, report_b, seed=seed)}
    levels = report_a.get("cluster_levels") or {"names": [], "levels": []}
    cl = make_clusters(levels["levels"], int(ca.size), levels["names"])
    if stage.kind == "binary":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            diff = paired_bootstrap_diff(report_a["gold_positive"], report_a["predicted_positive"],
                                         report_b["predicted_positive"], metric="f1", n_boot=n_boot, seed=seed,
                                         clusters=cl)
        return {"metric": "f1", "diff": diff, **test, "mcnemar": mcnemar}
    w = resample_weights(cl, n_boot, seed)
    d = (w @ ca - w @ cb) / np.maximum(w.sum(axis=1), 1)
    too_few = not cl.singletons and cl.n_clusters < MIN_CLUSTERS
    ci = None if too_few else percentile_ci(d)
    diff = {"metric": stage.metric_name, "n": int(ca.size), "a": float(ca.mean()), "b": float(cb.mean()),
            "diff": float(ca.mean() - cb.mean()), "ci": ci, "se": float(d.std(ddof=1)) if d.size > 1 else None,
            "mde": minimum_detectable_effect(d), "resampling": cl.describe(n_boot)}
    if not cl.singletons:
        by = {str(lab): float(ca[cl.top == c].mean() - cb[cl.top == c].mean()) for c, lab in enumerate(cl.labels)}
        diff.update(diff_by_group=by, range=[min(by.values()), max(by.values())],
                    permutation=sign_flip_test(list(by.values()), seed=seed))
    return {"metric": stage.metric_name, "diff": diff, **test, "mcnemar": mcnemar}


def objective_test(stage, examples: Sequence, report_a: dict, report_b: dict, *, seed: int = 0,
                   n_resamples: int | None = None) -> dict:
    """The paired permutation test of ``stage.objective(a) - stage.objective(b)`` on the same
    ``examples`` (:mod:`personalign.metrics.paired`): the two reports' predictions are swapped whole
    per top-level cluster of ``report_a``'s ``cluster_levels`` (the stage's groups; one group: its
    inner units; none: rows). F1, F-beta, kappa, accuracy and macro F1 are computed from swapped
    confusion counts and a scored stage's ``mean`` from swapped per-row scores (exact below 2^13
    swaps, else 9999 seeded ones); any other objective is recomputed on 999 seeded swaps (exact
    below 2^10).

    Returns:
        ``{"test": "paired permutation", "statistic": objective name, "objective": its spec,
        "unit": the swapped unit (``prompt_id``, ``user_id``, ``item``), "within": the one group
        when there is one (else None), "p_value", "p_min", "exact", "n_resamples", "n_clusters",
        "a", "b", "diff"}`` (p None when the objective is undefined).
    """
    import numpy as np

    from personalign.metrics.cluster import make_clusters
    from personalign.metrics.paired import N_RESAMPLES, permutation_test_of_swaps, permutation_test_of_totals

    obj, n = stage.objective, len(examples)
    levels = report_a.get("cluster_levels") or stage_clusters(stage, examples)
    cl = make_clusters(levels["levels"], n, levels["names"])
    unit, _, within = cl.unit.split(" > ")[0].partition(" within one ")
    head = {"test": "paired permutation", "statistic": obj.name, "objective": obj.spec, "unit": unit,
            "within": within or None}
    totals = _objective_totals(stage, examples, report_a, report_b)
    if totals is not None:
        return {**head, **permutation_test_of_totals(*totals, cl.top, n_resamples=n_resamples or N_RESAMPLES,
                                                     seed=seed)}
    (pa, sa), (pb, sb) = ((r["predictions"], r.get("scores")) for r in (report_a, report_b))

    def score(take_a) -> float:  # the objective of a's rows where take_a, b's elsewhere
        mix = [x if t else y for x, y, t in zip(pa, pb, take_a)]
        return stage.score(examples, mix, scores=None if sa is None or sb is None else
                           [x if t else y for x, y, t in zip(sa, sb, take_a)])

    def diffs(swapped):  # (..., G) -> (...): recomputed swap by swap
        s = np.asarray(swapped)
        flat = [score(~r[cl.top]) - score(r[cl.top]) for r in s.reshape(-1, s.shape[-1])]
        return np.array(flat).reshape(s.shape[:-1])

    va, vb = score(np.ones(n, dtype=bool)), score(np.zeros(n, dtype=bool))
    return {**head, **permutation_test_of_swaps(diffs, cl.n_clusters, n_resamples=n_resamples or 999, seed=seed),
            "a": obj.value_or_none(va), "b": obj.value_or_none(vb), "diff": obj.value_or_none(va - vb)}


def _objective_totals(stage, examples: Sequence, report_a: dict, report_b: dict):
    """``(contrib_a, contrib_b, statistic)`` of :func:`~personalign.metrics.paired.permutation_test_of_totals`
    for an objective that is a function of additive totals (one-hot confusion cells for F1, F-beta,
    kappa, accuracy and macro F1; per-row scores for a scored stage's mean); None for any other."""
    import numpy as np

    from personalign.metrics.paired import confusion_cells, objective_of_counts
    from personalign.stages.objective import labels

    obj, n = stage.objective, len(examples)
    name = "fbeta" if obj.spec.startswith("fbeta:") else obj.spec
    if obj.on == "metric" and stage.kind != "binary":
        ca, cb = (np.asarray(r["correct"], dtype=float)[:, None] for r in (report_a, report_b))
        return ca, cb, lambda t: t[..., 0] / max(1, n)
    if obj.on != "labels" or name not in ("f1", "fbeta", "kappa", "accuracy", "macro_f1"):
        return None
    gold, la = labels(stage, examples, report_a["predictions"])
    lb = labels(stage, examples, report_b["predictions"])[1]
    labs = list(dict.fromkeys([*([True, False] if stage.kind == "binary" else []), *gold, *la, *lb]))
    k = len(labs)
    eye = np.eye(k * k)
    kwargs = {"positive": labs.index(True) if stage.kind == "binary" else None,
              "beta": float(obj.spec.split(":", 1)[1]) if name == "fbeta" else 1.0,
              "gold_present": [labs.index(g) for g in dict.fromkeys(gold)]}
    return (eye[confusion_cells(gold, la, labs)], eye[confusion_cells(gold, lb, labs)],
            lambda t: objective_of_counts(name, t.reshape(*t.shape[:-1], k, k), **kwargs))


def output_values(stage, outputs: Sequence[Any]) -> list[Any]:
    """Predicted outputs made JSON-friendly: booleans (None when unreadable or failed) for binary
    stages, the raw values (lists, dicts, strings) otherwise."""
    if stage.kind == "binary":
        from personalign.metrics.dspy_metrics import to_bool

        return [None if p is None else to_bool(p) for p in outputs]
    return [jsonable(p) for p in outputs]


def evaluate_stage(stage, program, examples: Sequence, *, lm=None, n_boot: int = 1000, seed: int = 0,
                   progress: bool = True, description: str = "predict", retries: int = 2) -> dict[str, Any]:
    """Run ``program`` of ``stage`` on ``examples`` and score it (:func:`run_program` +
    :func:`stage_report`).

    Returns the report plus ``lm_calls, cached_lm_calls, failures, errors (first 20), seconds, predictions``
    (JSON-friendly: booleans/None for binary stages, the raw outputs otherwise), ``scores`` and
    ``error_at`` (every failure's error by row index).
    """
    outcome = run_program(program, examples, inputs=stage.inputs, output=stage.output, lm=lm, retries=retries,
                          description=description, progress=progress)
    report = stage_report(stage, examples, outcome.predictions, n_boot=n_boot, seed=seed, lm=lm)
    preds = output_values(stage, outcome.predictions)
    return {**report, "lm_calls": outcome.lm_calls, "cached_lm_calls": outcome.cached_calls,
            "failures": outcome.failures, "errors": outcome.errors[:20],
            "seconds": round(outcome.seconds, 3), "predictions": preds, "scores": outcome.scores,
            "error_at": dict(outcome.error_at)}


def evaluate_repeats(stage, program, examples: Sequence, *, lm=None, repeats: int = 1, n_boot: int = 1000,
                     seed: int = 0, progress: bool = True, description: str = "predict") -> dict[str, Any]:
    """:func:`evaluate_stage`, run ``repeats`` times when the program samples: an LM at temperature
    > 0 gets a distinct DSPy cache key per run (``lm.copy(rollout_id=r)``). Deterministic programs
    (no LM, or temperature 0) run once and say so in ``repeat_note``.

    Binary stages: figures are :func:`personalign.metrics.repeats.repeated_binary_report` (means over
    runs; intervals resample clusters x runs); ``predictions`` / ``correct`` are the first run's
    (paired comparisons use them), ``predictions_by_repeat`` holds every run. Scored stages: the
    per-example scores are averaged over runs before the cluster bootstrap.

    Returns the report plus ``repeats`` (runs made) and ``repeat_note``; ``lm_calls``/``failures``/``seconds`` summed.
    """
    import numpy as np

    temperature = float((getattr(lm, "kwargs", None) or {}).get("temperature") or 0.0)
    if repeats < 1:
        from personalign.errors import ConfigurationError

        raise ConfigurationError(f"--repeats must be >= 1, got {repeats}")
    if repeats == 1 or lm is None or temperature == 0.0:
        report = evaluate_stage(stage, program, examples, lm=lm, n_boot=n_boot, seed=seed, progress=progress,
                                description=description)
        note = None if repeats == 1 else ("deterministic (no LM)" if lm is None else "deterministic (temperature 0)") \
            + f": ran once, not {repeats} times"
        return {**report, "repeats": 1, "repeat_note": note}
    runs = [evaluate_stage(stage, program, examples, lm=lm.copy(rollout_id=r), n_boot=n_boot, seed=seed,
                           progress=progress, description=f"{description} (run {r + 1}/{repeats})")
            for r in range(repeats)]
    first = runs[0]
    totals = {k: sum(r[k] for r in runs) for k in ("lm_calls", "cached_lm_calls", "failures", "seconds")}
    note = f"{repeats} runs at temperature {temperature:g} (rollout_id 0..{repeats - 1}); intervals resample clusters x runs"
    if stage.kind == "binary":
        from personalign.metrics.cluster import make_clusters
        from personalign.metrics.repeats import repeated_binary_report

        levels = first["cluster_levels"]
        rep = repeated_binary_report(first["gold_positive"], np.array([r["predicted_positive"] for r in runs]),
                                     n_boot=n_boot, seed=seed,
                                     clusters=make_clusters(levels["levels"], len(examples), levels["names"]))
        return {**first, **rep, **totals, "repeats": repeats, "repeat_note": note,
                "predictions_by_repeat": [r["predictions"] for r in runs]}
    mean_scores = list(np.mean([r["correct"] for r in runs], axis=0))
    from personalign.metrics import bootstrap_ci
    from personalign.metrics.cluster import make_clusters

    levels = first["cluster_levels"]
    cl = make_clusters(levels["levels"], len(examples), levels["names"])
    arr = np.asarray(mean_scores, dtype=float)
    ci = bootstrap_ci(np.mean, arr, n_boot=n_boot, seed=seed, clusters=cl)
    name = stage.metric_name
    return {**first, **totals, name: float(arr.mean()), f"{name}_ci": None if (not cl.singletons and cl.n_clusters < 5)
            else [float(x) for x in ci], "correct": mean_scores, "repeats": repeats,
            "repeat_note": note + " (scored: per-example scores averaged over runs)",
            "predictions_by_repeat": [r["predictions"] for r in runs]}


NUMBER_FIELDS = frozenset({
    "n", "n_train", "n_groups", "n_boot", "n_clusters", "n_resamples", "n_items", "seed", "repeats", "failures",
    "lm_calls", "cached_lm_calls", "compile_lm_calls", "compile_cached_lm_calls", "seconds", "precision", "recall",
    "yes_rate", "gold_yes_rate", "accuracy", "f1", "objective", "value", "diff", "a", "b", "c", "se", "mde", "p_value",
    "p_holm", "p_min", "share_of_human", "n_annotators", "min_annotators", "rows", "rows_covered",
    "spent_input_tokens", "spent_output_tokens", "spent_dollars"})
"""The fields of a comparison's strategy rows and human row that hold a number (or null), wherever
they appear in the row (``vs_first.paired_test.p_value``, ``by_group.0.cached_lm_calls``): the
report's figures (:func:`stage_report`, :func:`evaluate_stage`, :func:`paired_comparison`, McNemar's
discordant counts ``b`` / ``c``), the verbs' cost fields (``compile_lm_calls``, ``*cached_lm_calls``,
``spent_*``: :func:`personalign.lm.spend.spent_fields`)
and the human ceiling's counts; plus the stage's metric, by its name. One place for the results
page's check (:func:`personalign.results_page.checks.check_figures`); a numeric field a result
gains and this set lacks fails ``tests/results_page/test_number_fields.py``. ``diff`` may also be
the object of a comparison (``vs_first.diff``)."""


def jsonable(value: Any) -> Any:
    """``value`` as JSON values: pydantic models dumped, dicts (keys as text) and lists/tuples
    converted item by item, anything else not JSON as its text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


__all__ = ["EvalOutcome", "run_program", "evaluate_metric", "score_of", "fatal_lm_error", "filled_predictions", "stage_report", "stage_clusters", "across_groups", "paired_comparison", "objective_test",
           "evaluate_stage", "evaluate_repeats", "output_values", "jsonable", "PersonalignError", "NUMBER_FIELDS"]
