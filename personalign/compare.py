"""Compare strategies of a stage on the same held-out split against human labels.

``compare_stage`` is the main job: load the stage's labelled data, compile every trainable
strategy on the train split (nothing is fitted on the evaluation split), run each strategy on the
evaluation split, and score it against the human labels -- for binary stages F1, precision,
recall and yes-rate, for scored stages the stage's metric, each with a 95% bootstrap CI, plus LM
calls and seconds -- logging an MLflow run with one child run per strategy.
"""

from __future__ import annotations

import warnings
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from personalign.data.digest import file_sha256  # noqa: F401  (public here since the first release)
from personalign.errors import DataError


def parse_strategy_specs(spec: str | None, default: str, registry) -> list[tuple[str, str | None]]:
    """Parse ``"zero-shot,zero-shot@bootstrap,minilm-cosine"`` into (strategy, optimizer or None).

    ``NAME@OPT`` compiles strategy NAME with optimizer OPT (a name of
    :data:`personalign.optimizers.OPTIMIZERS`) on the train split before evaluation.
    ``registry`` is the stage's strategy registry (``stage.registry``).

    Raises:
        ConfigurationError: unknown strategy or optimizer name, or an empty list.
    """
    from personalign.errors import ConfigurationError
    from personalign.optimizers import OPTIMIZERS

    if spec is not None and not spec.strip(", "):
        raise ConfigurationError(f"--strategies is empty; available: {', '.join(registry.names())}")
    out = []
    for item in [s.strip() for s in (spec or default).split(",") if s.strip()]:
        name, _, opt = item.partition("@")
        info = registry.info(name)
        if opt and OPTIMIZERS.info(opt).kind == "teleprompter" and info.trainable:
            raise ConfigurationError(f"'{item}': teleprompters compile LLM strategies; '{name}' is fitted by its "
                                     f"own optimizer (use '{name}')")
        if opt and not info.uses_lm:
            raise ConfigurationError(f"'{item}': '{name}' calls no LM; it has nothing for an optimizer to compile")
        out.append((name, opt or None))
    if not out:
        raise ConfigurationError(f"no strategies given; available: {', '.join(registry.names())}")
    return out


def _library_noise(w: warnings.WarningMessage) -> bool:
    """Warnings that dependencies raise about their own code on first import (pydantic's notes on
    litellm's ``ReadOnly`` TypedDicts), not about the user's data or program."""
    return "site-packages" in str(w.filename) and "ReadOnly" in str(w.message)


def compile_for_stage(stage, strategy: str, optimizer: str | None, trainset: list, **kwargs):
    """:func:`personalign.compile_service.compile_program` (the one compile path; former name)."""
    from personalign.compile_service import compile_program

    return compile_program(stage, strategy, optimizer, trainset, **kwargs)


def compare_stage(
    stage: str,
    *,
    data: str | Path,
    split: str = "val",
    train_split: str = "train",
    strategies: str | None = None,
    lm: str | None = None,
    seed: int = 0,
    n_boot: int = 1000,
    limit: int | None = None,
    tracker=None,
    progress: bool = True,
    out_dir: str | Path | None = None,
    on_ready=None,
    cv: str | None = None,
    repeats: int = 1,
    temperature: float | None = None,
) -> dict[str, Any]:
    """Compare strategies of ``stage`` on one split and return the result as a JSON-serializable dict.

    Every trainable strategy is compiled on ``train_split`` by
    :func:`personalign.compile_service.compile_program` (teleprompters hold out whole groups of
    train as their dev set and the final choice among the uncompiled and compiled programs is made
    there by the stage's set objective); nothing is fitted on the evaluation split. Each strategy is then
    run on the evaluation split and scored against the gold labels
    (:func:`personalign.evaluation.stage_report`), and compared with the first strategy on the
    same examples (:func:`personalign.evaluation.paired_comparison`).

    Args:
        stage: a stage name (:func:`personalign.programs.stages.get_stage`), e.g. ``relevance``.
        data: the stage's labelled data file (train and evaluation splits).
        split: the evaluation split; ``train_split`` is where trainable strategies are compiled.
        strategies: comma-separated registry names, ``NAME@OPTIMIZER`` to compile an LLM strategy
            with a teleprompter (default: the stage's ``default_strategies``).
        lm: model string for LLM strategies (default ``local/smollm2-135m-instruct``).
        seed: seed of every stochastic step (bootstrap, sampling, optimizers).
        n_boot: bootstrap resamples for the 95% CIs.
        limit: evaluate a seeded random sample of ``limit`` examples of the split, stratified over
            the stage's groups (``Stage.limit_key``; :func:`personalign.data.sample.stratified_limit`).
        tracker: a :class:`personalign.tracking.Tracker` (None: no tracking); one parent run and a
            child run per strategy.
        out_dir: when given, the result JSON and a chart (PNG, 95% CI bars) are written there
            atomically (paths in ``result_file`` and ``chart_file``; unique per run: the MLflow run id
            or a random suffix) and logged as artifacts.
        on_ready: called once every input is validated, before anything is written (the CLI
            configures the DSPy cache there, so bad input leaves no cache directory behind).
        cv: ``"groups"``: leave-one-group-out over every labelled row, all splits pooled
            (:func:`personalign.crossval.compare_stage_groups`; ``split``/``train_split`` unused);
            None: the single split.
        repeats: runs of each sampling strategy (LM at ``temperature`` > 0; distinct ``rollout_id``),
            resampled inside every cluster resample (:func:`personalign.evaluation.evaluate_repeats`);
            deterministic strategies run once and say so (``repeat_note``).
        temperature: sampling temperature of the LM (default: the model's, 0 for embedded models).

    Returns:
        ``{"stage", "kind", "metric", "objective" (its name), "data", "data_sha256", "split", "n", "lm", "seed",
        "strategies": [...]}``; each strategy row holds the report (binary: ``f1, f1_ci, precision, recall,
        yes_rate``, ...; scored: ``<metric>, <metric>_ci``), ``objective`` (the stage's set objective on the
        split: what a compile maximizes, e.g. F2 of verification or the violation judge's kappa),
        ``lm_calls, compile_lm_calls, seconds, failures, errors, compile, compile_summary`` (dev objective before/after, chosen candidate and why,
        LM calls projected/actual; :func:`personalign.compile_service.summary`), ``predictions``
        and, from the second on, ``vs_first``.

    Raises:
        DataError: unreadable data, or a split with no examples.
        ConfigurationError / UnknownModelError / ModelFileError: bad stage, strategy or model.
    """
    from personalign.compile_service import compile_program
    from personalign.compile_service import summary as compile_summary
    from personalign.errors import ConfigurationError
    from personalign.evaluation import evaluate_repeats, paired_comparison
    from personalign.lm import adapter_name, default_model, make_lm
    from personalign.lm.serving import endpoint_info
    from personalign.objectives import objective_name, objective_score, objective_spec
    from personalign.programs.stages import get_stage, splits_present
    from personalign.tracking_native import (link_traces, lm_traces, log_dataset, log_predictions, log_summary,
                                             register_prompt, run_name)

    st = get_stage(stage)
    registry = st.registry
    if n_boot < 1:
        raise ConfigurationError(f"--n-boot must be >= 1, got {n_boot}")
    if limit is not None and limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {limit}")
    specs = parse_strategy_specs(strategies, st.default_strategies, registry)
    names = [f"{n}@{o}" if o else n for n, o in specs]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a strategy is listed twice: {','.join(names)}")
    if repeats < 1:
        raise ConfigurationError(f"--repeats must be >= 1, got {repeats}")
    if cv is not None:
        if cv != "groups":
            raise ConfigurationError(f"--cv must be 'groups' (leave-one-group-out), got {cv!r}")
        from personalign.crossval import compare_stage_groups

        return compare_stage_groups(st, specs, names, data=data, lm=lm, seed=seed, n_boot=n_boot, limit=limit,
                                    tracker=tracker, progress=progress, out_dir=out_dir, on_ready=on_ready,
                                    repeats=repeats, temperature=temperature)
    model = lm or default_model()
    examples = st.load(data)
    evalset = [ex for ex in examples if getattr(ex, "split", None) == split]
    available = splits_present(examples)
    if not evalset:
        raise DataError(data, None, "split", f"no examples in split '{split}' (splits present: {available})")
    evalset = st.limit(evalset, limit, seed)
    trainset = [ex for ex in examples if getattr(ex, "split", None) == train_split]
    needs_train = [n for (b, o), n in zip(specs, names) if o or registry.info(b).trainable]
    if needs_train and not trainset:
        raise DataError(data, None, "split", f"{', '.join(needs_train)} need a '{train_split}' split to compile on "
                        f"(splits present: {available})")
    if any(registry.info(b).trainable for b, _ in specs):
        st.check_fittable(trainset, data, train_split)
    uses_lm = any(registry.info(n).uses_lm for n, _ in specs)
    lm_obj = make_lm(model, temperature=temperature) if uses_lm else None
    if on_ready is not None:
        on_ready()  # every input is valid: the caller may now create caches and stores

    result: dict[str, Any] = {
        "stage": st.name,
        "kind": st.kind,
        "metric": st.metric_name,
        "objective": objective_name(st),
        "positive_name": st.positive_name,
        "data": str(data),
        "data_sha256": file_sha256(data),
        "split": split,
        "train_split": train_split,
        "n": len(evalset),
        "n_train": len(trainset),
        "lm": model,
        "adapter": adapter_name(model) if uses_lm else None,
        "endpoint": endpoint_info(model) if uses_lm else None,
        "seed": seed,
        "n_boot": n_boot,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "strategies": [],
    }
    if st.kind == "binary":
        gold = [bool(st.is_positive(st.gold(ex))) for ex in evalset]
        result["gold_yes_rate"] = sum(gold) / len(gold)
    params = {k: result[k] for k in ("stage", "data", "data_sha256", "split", "train_split", "n", "n_train", "lm",
                                     "adapter", "seed", "n_boot")}
    params["strategies"] = ",".join(names)
    metric_keys = (("f1", "f1_ci", "f1_range", "precision", "precision_ci", "recall", "recall_ci", "yes_rate",
                    "yes_rate_ci", "accuracy") if st.kind == "binary"
                   else (st.metric_name, f"{st.metric_name}_ci", f"{st.metric_name}_range"))
    reports: list[dict] = []
    names_seen: list[str] = []  # strategy names in the order run (reports[i] is names_seen[i])

    def body():
        for (base, opt_name), name in zip(specs, names):
            info = registry.info(base)
            t0 = time.perf_counter()
            program, compile_info = compile_program(st, base, opt_name, trainset, lm=lm_obj, seed=seed)
            with warnings.catch_warnings(record=True) as caught, \
                    lm_traces(tracker, tags={"stage": st.name, "strategy": name}) as traced:
                warnings.simplefilter("always")
                report = evaluate_repeats(st, program, evalset, lm=lm_obj if info.uses_lm else None, n_boot=n_boot,
                                          seed=seed, progress=progress, description=name, repeats=repeats)
            hidden = {"correct", "gold_positive", "predicted_positive", "scores", "cluster_levels"}
            hidden |= {"predictions_by_repeat"} if report.get("repeats", 1) == 1 else set()
            objective = report.get(st.metric_name) if objective_spec(st) == "mean" else \
                objective_score(st, evalset, report["predictions"], scores=report.get("scores"))
            row = {
                "name": name,
                **{k: v for k, v in report.items() if k not in hidden},
                "objective": objective,
                "compile_lm_calls": int((compile_info or {}).get("actual_lm_calls")
                                        or (compile_info or {}).get("lm_calls") or 0),
                "seconds": round(time.perf_counter() - t0, 3),
                "compile": compile_info,
                "compile_summary": compile_summary(compile_info),
                "warnings": sorted({str(w.message) for w in caught if not _library_noise(w)}),
            }
            if reports:
                row["vs_first"] = {"against": result["strategies"][0]["name"],
                                   **paired_comparison(st, report, reports[0], n_boot=max(n_boot, 1), seed=seed)}
                row["vs_first"]["f1_diff"] = row["vs_first"]["diff"]  # former key
            base = name.split("@", 1)[0]
            if "@" in name and base in names_seen:  # the same strategy uncompiled ran earlier: pair them
                i = names_seen.index(base)
                row["vs_uncompiled"] = {"against": base, **paired_comparison(st, report, reports[i], n_boot=max(n_boot, 1),
                                                                             seed=seed)}
            names_seen.append(name)
            reports.append(report)
            result["strategies"].append(row)
            if tracker is not None:
                with tracker.run(name, nested=True, params={"strategy": name, "summary": info.summary,
                                                            "uses_lm": info.uses_lm, **({"lm": model} if info.uses_lm else {}),
                                                            **({"compile": compile_info} if compile_info else {})}):
                    dev = row["compile_summary"] or {}
                    tracker.log_metrics({**{k: row[k] for k in (*metric_keys, "objective", "lm_calls", "compile_lm_calls",
                                                                "seconds", "failures") if row.get(k) is not None},
                                         **{k: dev[k] for k in ("dev_before", "dev_after") if dev.get(k) is not None}})
                    log_predictions(tracker, st, evalset, report)
                    link_traces(tracker, traced)
                    prompt = register_prompt(tracker, program, stage=st.name, strategy=base, optimizer=opt_name,
                                             lm=model if info.uses_lm else None, run_id=tracker.run_id) \
                        if compile_info else None
                    if prompt:
                        row["prompt"] = prompt

    def outputs():
        from personalign.crossval import add_holm, result_record

        add_holm([r for r in result["strategies"] if "vs_first" not in r or "permutation" in r["vs_first"]["diff"]],
                 key=lambda r: r["vs_first"]["diff"])
        result["uses_lm"] = uses_lm
        result["run_record"] = result_record(result)
        if out_dir is None:
            return
        unique = (result.get("mlflow_run_id") or uuid.uuid4().hex)[:12]  # two runs in one second never collide
        chart = plot_result(result, Path(out_dir) / f"{st.name}-{split}-{_stamp()}-{unique}.png")
        result["chart_file"] = str(chart)
        result["result_file"] = str(write_result(result, Path(out_dir), stem=chart.stem))
        if tracker is not None:
            tracker.log_artifact(chart)
            tracker.log_artifact(result["result_file"])

    if tracker is not None:
        tracker.check()  # a bad tracking URI fails here, before any strategy runs
        from personalign.crossval import result_record
        from personalign.record import mlflow_tags

        with tracker.run(run_name("compare", st.name, data=data, split=split, lm=model if uses_lm else None),
                         params=params, tags={"command": "compare", "stage": st.name,
                                              **mlflow_tags(result_record({**result, "uses_lm": uses_lm}))}):
            log_dataset(tracker, st, evalset, data=data, sha256=result["data_sha256"], split=split)
            log_dataset(tracker, st, trainset, data=data, sha256=result["data_sha256"], split=train_split,
                        context="training")
            body()
            log_summary(tracker, result, metric_keys)
            result["mlflow_run_id"] = getattr(tracker, "run_id", None)
            outputs()
    else:
        body()
        outputs()
    return result


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def plot_result(result: dict[str, Any], path: Path) -> Path:
    """Bar chart of the main metric per strategy with 95% CI error bars (matplotlib, PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["strategies"]
    key = result.get("metric", "f1")
    names = [r["name"] for r in rows]
    f1s = [r[key] for r in rows]
    bars = [r.get(f"{key}_ci") or r.get(f"{key}_range") or [r[key], r[key]] for r in rows]  # CI, else group range
    lo = [r[key] - b[0] for r, b in zip(rows, bars)]
    hi = [b[1] - r[key] for r, b in zip(rows, bars)]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 2), 3.6))
    ax.bar(names, f1s, yerr=[lo, hi], capsize=4, color="#4c72b0")
    if key == "f1" and "gold_yes_rate" in result:
        ax.axhline(2 * result["gold_yes_rate"] / (1 + result["gold_yes_rate"]), color="grey", ls="--", lw=1,
                   label=f"all-{result.get('positive_name', 'yes')} F1")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"{key} vs human labels (95% CI)")
    ax.set_title(f"{result.get('stage', 'relevance')} on {result['split']} (n={result['n']})")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_result(result: dict[str, Any], out_dir: Path, stem: str | None = None) -> Path:
    """Write the result JSON atomically (tmp + rename) under ``out_dir``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem or result['stage'] + '-' + result['split'] + '-' + _stamp()}.json"
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    from personalign.data.strict_json import dumps  # no NaN/Infinity literal: null, listed

    tmp.write_text(dumps(result, indent=2))
    tmp.replace(path)
    return path

from personalign.registry import callable_module as _callable_module  # noqa: E402

_callable_module(__name__, "personalign.api:compare")  # personalign.compare(...) is the verb
