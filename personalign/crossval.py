"""Leave-one-group-out (LOGO) comparison of a stage's strategies: how each does on a group it never saw.

A single-split figure says how a strategy does on the prompts of that split. What a user needs is
how it does on the **next** prompt, so :func:`compare_groups` pools every labelled row regardless
of ``split`` and, for each group g of the stage's ``group_key`` (relevance: prompts):

1. fits or compiles every strategy on all groups but g
   (:func:`personalign.compile_service.compile_program`: teleprompters take their dev split from
   whole groups of those remaining groups; nothing is fitted on g);
2. runs it on g and scores it against the human labels (per-group figures; their intervals
   resample the inner units of g, e.g. users within the prompt, or its items).

Per strategy it reports **the mean of the per-group metric as the headline** (F1 for binary
stages), the metric of the pooled out-of-group predictions beside it, and the worst group. The
headline's interval resamples groups (:mod:`personalign.metrics.cluster`); with fewer than 5
groups the per-group figures and their range are reported instead. Each strategy after the first
is compared with the first on the per-group differences: mean difference, sign-flip permutation p
(exact; smallest reachable p = 2 / 2^G), Holm-adjusted when more than two strategies are compared,
and the minimum detectable effect beside a difference that is not significant.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

MIN_GROUPS = 3
"""Leave-one-group-out needs at least this many groups (two to fit on while one is held out)."""


def groups_of(stage, examples: Sequence, data) -> list:
    """The distinct ``stage.group_key`` values of ``examples`` in file order.

    Raises:
        ConfigurationError: the stage has no group key, or fewer than :data:`MIN_GROUPS` groups.
        DataError: an example has no value for the group key (names the file and the field).
    """
    from personalign.errors import ConfigurationError, DataError

    key = stage.group_key
    if not key:
        raise ConfigurationError(f"--cv groups: stage '{stage.name}' has no group key; leave-one-group-out "
                                 "needs one (use a single split)")
    values = [getattr(ex, key, None) for ex in examples]
    missing = [i for i, v in enumerate(values) if v is None]
    if missing:
        raise DataError(data, missing[0] + 1, key, f"--cv groups: row has no '{key}'")
    groups = list(dict.fromkeys(str(v) for v in values))
    if len(groups) == len(values) and len(values) > 1:  # a stage file without group_key groups by id
        raise ConfigurationError(f"--cv groups: every row of {data} is its own '{key}' group, so leave-one-group-out "
                                 f"would be leave-one-item-out; declare the stage's group_key (rows that belong "
                                 "together: a prompt, a user, a topic)")
    if len(groups) < MIN_GROUPS:
        raise ConfigurationError(f"--cv groups: {data} has {len(groups)} {key} group(s) "
                                 f"({', '.join(groups)}); leave-one-group-out needs at least {MIN_GROUPS}")
    return groups


def _metric_of(stage) -> str:
    return "f1" if stage.kind == "binary" else stage.metric_name


def _over_groups(values: np.ndarray, labels: list, *, n_boot: int, seed: int, what: str) -> dict:
    """Mean of per-group ``values`` with a percentile interval over resampled groups (>= 5 groups)
    or their range (< 5); plus the bootstrap standard error."""
    from personalign.metrics.cluster import make_clusters, resample_weights, summarize

    cl = make_clusters([labels], len(labels), ["group"])
    w = resample_weights(cl, n_boot, seed) if cl.n_clusters > 1 else np.ones((1, len(labels)), dtype=np.int64)
    boot = (w @ values) / w.sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = summarize(float(values.mean()), boot, dict(zip(labels, map(float, values))), cl, what=what)
    fig["se"] = float(boot.std(ddof=1)) if boot.size > 1 else None
    fig["boot"] = boot
    return fig


def summarize_strategy(stage, name: str, folds: list[dict], examples: list, *, n_boot: int, seed: int) -> dict:
    """The row of one strategy from its per-group ``folds`` (each ``{"group", "report", ...}``) and
    the pooled ``examples`` in the folds' order: headline, pooled figure, worst group, per-group rows."""
    from personalign.evaluation import stage_report

    key = _metric_of(stage)
    labels = [f["group"] for f in folds]
    values = np.array([float(f["report"][key]) for f in folds])
    head = _over_groups(values, labels, n_boot=n_boot, seed=seed, what=f"{name} mean per-group {key}")
    preds = [p for f in folds for p in f["report"]["predictions"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled = stage_report(stage, examples, preds, n_boot=n_boot, seed=seed)
    worst = int(np.argmin(values))
    hidden = {"correct", "gold_positive", "predicted_positive", "scores", "cluster_levels", "predictions",
              "predictions_by_repeat"}
    by_group = [{"group": f["group"], **{k: v for k, v in f["report"].items() if k not in hidden},
                 "compile_summary": f.get("compile_summary")} for f in folds]
    return {"name": name, "metric": key,
            "headline": {"statistic": f"mean per-{stage.group_key} {key}", "value": head["value"], "ci": head["ci"],
                         "range": head["range"], "se": head["se"], "n_groups": len(labels)},
            "pooled": {"statistic": f"{key} of the pooled out-of-group predictions", "value": pooled[key],
                       "ci": pooled.get(f"{key}_ci"), "range": pooled.get(f"{key}_range"),
                       **({"precision": pooled["precision"], "recall": pooled["recall"],
                           "yes_rate": pooled["yes_rate"]} if stage.kind == "binary" else {})},
            "worst": {"group": labels[worst], "value": float(values[worst])},
            "by_group": by_group, "predictions": preds, "_values": values, "_boot": head["boot"]}


def paired_groups(row: dict, first: dict, *, seed: int) -> dict:
    """``row`` minus ``first`` on the per-group metric: mean difference, interval over resampled
    groups (or the range below 5 groups), sign-flip p, se and the minimum detectable effect."""
    from personalign.metrics.cluster import minimum_detectable_effect, sign_flip_test

    d = row["_values"] - first["_values"]
    labels = [g["group"] for g in row["by_group"]]
    fig = _over_groups(d, labels, n_boot=len(row["_boot"]), seed=seed, what=f"{row['name']} - {first['name']}")
    return {"against": first["name"], "diff": fig["value"], "ci": fig["ci"], "range": fig["range"],
            "diff_by_group": fig["by_group"], "se": fig["se"], "mde": minimum_detectable_effect(fig["boot"]),
            "permutation": sign_flip_test(d, seed=seed)}


def add_holm(rows: list[dict], key: Callable[[dict], dict] = lambda r: r["vs_first"]) -> None:
    """Holm-adjust the sign-flip p-values of the rows' comparisons with the first (``key(row)``:
    the dict holding ``permutation``) in place, as ``p_holm``, when more than two strategies are compared."""
    from personalign.metrics.cluster import holm

    compared = [r for r in rows if r.get("vs_first")]
    if len(rows) <= 2 or not compared:
        return
    for r, p in zip(compared, holm([key(r)["permutation"]["p_value"] for r in compared])):
        key(r)["p_holm"] = p


def compare_groups(stage, examples: list, specs: list[tuple[str, str | None]], names: list[str], *, data,
                   lm=None, seed: int = 0, n_boot: int = 1000, progress: bool = True,
                   on_strategy: Callable[[dict], None] | None = None, repeats: int = 1) -> dict[str, Any]:
    """Leave-one-group-out comparison of ``specs`` (``(strategy, optimizer or None)``, shown as ``names``).

    Args:
        stage: a :class:`~personalign.programs.stages.Stage` with a ``group_key``.
        examples: every labelled example of the data file (all splits are pooled).
        lm: a ``dspy.LM`` for LLM strategies (None when none uses one).
        on_strategy: called with the partial result after each strategy (``"complete": False``).
        repeats: runs of each sampling strategy per fold (:func:`personalign.evaluation.evaluate_repeats`;
            the per-group figures are means over runs); deterministic ones run once (``repeat_note``).

    Returns:
        ``{"cv": "groups", "group_key", "groups", "n_groups", "n", "metric", "strategies": [...],
        "complete": True}``; each strategy row: ``name, headline {value, ci, range, se}, pooled,
        worst {group, value}, by_group [...], lm_calls, compile_lm_calls, seconds, failures`` and,
        from the second on, ``vs_first`` (``diff, ci, range, permutation, se, mde``, ``p_holm``).

    Raises:
        ConfigurationError: no group key or fewer than 3 groups (:func:`groups_of`).
        DataError: a training fold with a single class for a learned strategy.
    """
    from personalign.compile_service import compile_program
    from personalign.compile_service import summary as compile_summary
    from personalign.evaluation import evaluate_repeats

    groups = groups_of(stage, examples, data)
    key = stage.group_key
    folds = [(g, [ex for ex in examples if str(getattr(ex, key)) != g], [ex for ex in examples
                                                                        if str(getattr(ex, key)) == g]) for g in groups]
    if any(stage.registry.info(b).trainable for b, _ in specs):
        for g, train, _ in folds:
            stage.check_fittable(train, data, f"all but {key}={g}")
    pooled = [ex for _, _, test in folds for ex in test]
    result: dict[str, Any] = {"cv": "groups", "group_key": key, "groups": groups, "n_groups": len(groups),
                              "n": len(pooled), "metric": _metric_of(stage), "strategies": [], "complete": False}
    rows: list[dict] = []
    bar = _progress(progress)
    task = bar.add_task("leave-one-group-out", total=len(specs) * len(folds))
    bar.start()
    try:
        for (base, opt), name in zip(specs, names):
            info = stage.registry.info(base)
            t0 = time.perf_counter()
            per_fold, calls, compile_calls, failures, notes = [], 0, 0, 0, set()
            for k, (g, train, test) in enumerate(folds):
                bar.update(task, description=f"{name}: fit on {len(folds) - 1} {key}s, score {g} ({k + 1}/{len(folds)})")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    program, cinfo = compile_program(stage, base, opt, train, lm=lm, seed=seed)
                notes |= {f"{g}: {w.message}" for w in caught if "site-packages" not in str(w.filename)}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    report = evaluate_repeats(stage, program, test, lm=lm if info.uses_lm else None, n_boot=n_boot,
                                              seed=seed, progress=False, description=f"{name} [{g}]", repeats=repeats)
                bar.advance(task)
                calls += report["lm_calls"]
                failures += report["failures"]
                compile_calls += int((cinfo or {}).get("actual_lm_calls") or (cinfo or {}).get("lm_calls") or 0)
                per_fold.append({"group": g, "report": report, "compile_summary": compile_summary(cinfo)})
            row = summarize_strategy(stage, name, per_fold, pooled, n_boot=n_boot, seed=seed)
            row.update(uses_lm=info.uses_lm, lm_calls=calls, compile_lm_calls=compile_calls, failures=failures,
                       seconds=round(time.perf_counter() - t0, 3), repeats=per_fold[0]["report"]["repeats"],
                       repeat_note=per_fold[0]["report"]["repeat_note"], warnings=sorted(notes))
            if rows:
                row["vs_first"] = paired_groups(row, rows[0], seed=seed)
            rows.append(row)
            add_holm(rows)
            result["strategies"] = [public_row(r) for r in rows]
            if on_strategy is not None:
                on_strategy(result)
    finally:
        bar.stop()
    result["complete"] = True
    return result


def compare_stage_groups(st, specs: list[tuple[str, str | None]], names: list[str], *, data, lm: str | None = None,
                         seed: int = 0, n_boot: int = 1000, limit: int | None = None, tracker=None,
                         progress: bool = True, out_dir=None, on_ready=None, command: str | None = None,
                         on_strategy: Callable[[dict], None] | None = None, repeats: int = 1,
                         temperature: float | None = None) -> dict[str, Any]:
    """``compare STAGE --cv groups`` (called by :func:`personalign.compare.compare_stage` with the
    stage and its parsed strategies): :func:`compare_groups` on every labelled row of ``data``, as a
    result dict like ``compare_stage``'s (``stage, kind, metric, data, data_sha256, lm, seed,
    n_boot, cv, groups, strategies, run_record``); with ``out_dir`` the JSON (rewritten after each
    strategy, ``"complete": false`` until the end) and a chart are written there and logged to the
    tracker's run. ``on_strategy`` is called with the result after each strategy (partial results).

    Raises:
        ConfigurationError: no group key or fewer than 3 groups.
        DataError: unreadable data; a training fold with one class for a learned strategy.
    """
    from pathlib import Path

    from personalign.lm import default_model, make_lm
    from personalign.record import cv_tag, git_commit, write_json
    from personalign.tracking_native import log_dataset, run_name

    git_commit()  # the commit this run starts at is the one its record names
    examples = st.limit(st.load(data), limit, seed)
    groups_of(st, examples, data)
    uses_lm = any(st.registry.info(n).uses_lm for n, _ in specs)
    model = (lm or default_model()) if uses_lm else None
    lm_obj = make_lm(model, temperature=temperature) if uses_lm else None
    if on_ready is not None:
        on_ready()
    from personalign.data.digest import file_sha256

    head = {"stage": st.name, "kind": st.kind, "metric": _metric_of(st), "positive_name": st.positive_name,
            "data": str(data), "data_sha256": file_sha256(data), "lm": model, "seed": seed, "n_boot": n_boot,
            "split": "all (leave-one-group-out)", "strategy_names": names}
    stem = None

    def save(partial: dict) -> None:
        nonlocal stem
        result.update(partial)
        result["run_record"] = result_record(result, command=command)
        if on_strategy is not None and not result.get("complete"):
            on_strategy(result)
        if out_dir is not None:
            when = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
            stem = stem or f"{st.name}-{cv_tag(st.group_key)}-{when}-{(getattr(tracker, 'run_id', None) or '')[:6]}"
            result["result_file"] = str(write_json(Path(out_dir) / f"{stem.rstrip('-')}.json", result))

    result: dict[str, Any] = dict(head)

    def body():
        save(compare_groups(st, examples, specs, names, data=data, lm=lm_obj, seed=seed, n_boot=n_boot,
                            progress=progress, on_strategy=save, repeats=repeats))
        if out_dir is not None:
            result["chart_file"] = str(plot_groups(result, Path(out_dir) / f"{stem.rstrip('-')}.png"))
            save({})

    if tracker is None:
        body()
        return result
    from personalign.record import mlflow_tags

    tracker.check()
    params = {k: head[k] for k in ("stage", "data", "data_sha256", "lm", "seed", "n_boot")}
    params.update(cv="groups", strategies=",".join(names))
    with tracker.run(run_name("compare", st.name, data=data, split="logo", lm=model), params=params,
                     tags={"command": "compare", "stage": st.name, "cv": "groups",
                           **mlflow_tags(result_record(head, command=command))}):
        log_dataset(tracker, st, examples, data=data, sha256=head["data_sha256"], split="all")
        body()
        for row in result["strategies"]:
            tracker.log_metrics({f"{row['name']}.{k}": v for k, v in (
                ("mean_group_" + row["metric"], row["headline"]["value"]), ("pooled_" + row["metric"],
                                                                               row["pooled"]["value"]),
                ("worst_group_" + row["metric"], row["worst"]["value"])) if v is not None})
        result["mlflow_run_id"] = getattr(tracker, "run_id", None)
        for f in ("result_file", "chart_file"):
            if result.get(f):
                tracker.log_artifact(result[f])
    return result


def result_figures(result: dict) -> list[dict]:
    """The run-record figures of a compare result: leave-one-group-out (headline mean per-group
    metric, pooled, worst group; per group) or single split (labelled as such)."""
    from personalign.record import cv_tag, figure, group_noun

    out, stage, key = [], result["stage"], result.get("metric", "f1")
    for row in result.get("strategies", []):
        name = row["name"]
        if result.get("cv") == "groups":
            h, gk, ng = row["headline"], result["group_key"], result["n_groups"]
            unit, rng = group_noun(gk), h.get("range")
            note = None if h["ci"] else f"{ng} {unit}s (< 5): no interval" + (
                f"; per-{unit} range [{rng[0]:.3f}, {rng[1]:.3f}]" if rng else "")
            base = f"{stage}.{cv_tag(gk)}.{name}.{key}"
            out.append(figure(f"{base}_mean", f"{name}: mean per-{unit} {key}, leave-one-{unit}-out", h["value"],
                              metric=f"{key}_mean", strategy=name, ci=h["ci"], n=ng, note=note))
            out.append(figure(f"{base}_pooled", f"{name}: {key} of pooled held-out predictions",
                              row["pooled"]["value"], metric=key, strategy=name, ci=row["pooled"]["ci"], n=result["n"]))
            out.append(figure(f"{base}_worst", f"{name}: worst {unit} ({row['worst']['group']})", row["worst"]["value"],
                              metric=key, strategy=name, n=None, note=str(row["worst"]["group"])))
            for g in row["by_group"]:
                out.append(figure(f"{base}.{unit}={g['group']}", f"{name} on {unit} {g['group']} (fitted on the others)",
                                  g[key], metric=key, strategy=name, ci=g.get(f"{key}_ci"), n=g["n"],
                                  note=(g.get("resampling") or {}).get("unit")))
        else:
            out.append(figure(f"{stage}.{result['split']}.{name}.{key}", f"{name}: {key} on split {result['split']} "
                              "(single split)", row[key], metric=key, strategy=name, ci=row.get(f"{key}_ci"), n=row["n"],
                              note=(row.get("resampling") or {}).get("unit")))
    return out


def result_record(result: dict, command: str | None = None) -> dict:
    """The :mod:`personalign.record` run record of a compare result (figures included)."""
    from personalign.lm import adapter_for
    from personalign.record import run_record, slug

    model = result.get("lm")
    uses_lm = result.get("uses_lm", True) and model
    rows = result.get("strategies", [])
    if result.get("cv") == "groups":
        resampling = {"unit": result["group_key"], "n_clusters": result["n_groups"], "n_boot": result["n_boot"]}
    else:
        resampling = next((r.get("resampling") for r in rows if r.get("resampling")), None)
    return run_record(slug(f"compare-{result['stage']}"), result_figures(result), command=command,
                      title=f"compare {result['stage']} ({'leave-one-group-out' if result.get('cv') else 'single split'})",
                      model=model if uses_lm else None,
                      adapter=type(adapter_for(model)).__name__ if uses_lm else None, data=result.get("data"),
                      data_sha256=result.get("data_sha256"), resampling=resampling, stage=result["stage"],
                      extra={"seed": result.get("seed"), "n_boot": result.get("n_boot"),
                             "strategies": [r["name"] for r in rows], "complete": result.get("complete", True)})


def plot_groups(result: dict, path) -> Any:
    """Per-strategy chart of a leave-one-group-out result: the headline mean (bar; error bar: its
    interval, else the range of the groups) and every group's figure (dots). PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, key = result["strategies"], result.get("metric", "f1")
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 2), 3.6))
    for i, r in enumerate(rows):
        h = r["headline"]
        lo, hi = h["ci"] or h["range"] or [h["value"], h["value"]]
        ax.bar(i, h["value"], yerr=[[h["value"] - lo], [hi - h["value"]]], capsize=4, color="#4c72b0")
        ax.plot([i] * len(r["by_group"]), [g[key] for g in r["by_group"]], "o", color="black", ms=3)
    ax.set_xticks(range(len(rows)), [r["name"] for r in rows], rotation=20, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"mean per-{result['group_key']} {key}")
    ax.set_title(f"{result['stage']}, leave-one-{result['group_key']}-out ({result['n_groups']} groups, n={result['n']})")
    fig.tight_layout()
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _progress(enabled: bool):
    """The one progress display of a cross-validation (stderr, cleared when done)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)  # not a terminal (a log file): no bar, not even its closing newline
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, disable=not enabled or not console.is_terminal, transient=True)


def public_row(row: dict) -> dict:
    """A strategy row without its internal arrays (JSON-serializable)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


__all__ = ["MIN_GROUPS", "groups_of", "compare_groups", "summarize_strategy", "paired_groups", "add_holm", "public_row",
           "compare_stage_groups", "result_figures", "result_record", "plot_groups"]
