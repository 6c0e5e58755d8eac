"""Compare strategies of a stage on the same held-out split against human labels.

``compare_relevance`` is the main job: load labelled (attribute, prompt) pairs, compile every
trainable strategy on the train split (nothing is fitted on the evaluation split), run each
strategy on the evaluation split, and score it against the human majority label -- F1, precision,
recall, yes-rate with 95% bootstrap CIs, LM calls and seconds -- logging an MLflow run with one
child run per strategy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import warnings
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from personalign.errors import DataError


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_strategy_specs(spec: str | None, default: str) -> list[tuple[str, str | None]]:
    """Parse ``"zero-shot,zero-shot@bootstrap,minilm-cosine"`` into (strategy, optimizer or None).

    ``NAME@OPT`` compiles strategy NAME with optimizer OPT (a name of
    :data:`personalign.optimizers.OPTIMIZERS`) on the train split before evaluation.

    Raises:
        ConfigurationError: unknown strategy or optimizer name, or an empty list.
    """
    from personalign.errors import ConfigurationError
    from personalign.optimizers import OPTIMIZERS
    from personalign.programs.relevance import STRATEGIES

    if spec is not None and not spec.strip(", "):
        raise ConfigurationError(f"--strategies is empty; available: {', '.join(STRATEGIES.names())}")
    out = []
    for item in [s.strip() for s in (spec or default).split(",") if s.strip()]:
        name, _, opt = item.partition("@")
        info = STRATEGIES.info(name)
        if opt and OPTIMIZERS.info(opt).kind == "teleprompter" and info.trainable:
            raise ConfigurationError(f"'{item}': teleprompters compile LLM strategies; '{name}' is fitted by its "
                                     f"own optimizer (use '{name}')")
        out.append((name, opt or None))
    if not out:
        raise ConfigurationError(f"no strategies given; available: {', '.join(STRATEGIES.names())}")
    return out


def _dev_split(trainset: list, seed: int) -> tuple[list, list | None]:
    """Hold out whole prompts of train as the teleprompters' dev set (never the eval split)."""
    from personalign.data.splits import group_split

    groups = {getattr(ex, "prompt_id", None) for ex in trainset}
    if len(groups) < 2 or None in groups:
        return trainset, None
    parts = group_split(trainset, by=lambda ex: ex.prompt_id, fractions={"fit": 0.75, "dev": 0.25}, seed=seed)
    return parts["fit"], parts["dev"] or None


def compare_relevance(
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
) -> dict[str, Any]:
    """Run the relevance comparison and return its result as a JSON-serializable dict.

    Args:
        data: a relevance JSONL (recenter format or personalign canonical) with train/eval splits.
        split: the evaluation split; ``train_split`` is where trainable strategies are fitted.
        strategies: comma-separated registry names (default ``zero-shot,minilm-cosine``).
        lm: model string for LLM strategies (default ``local/smollm2-135m-instruct``).
        seed: seed of every stochastic step (bootstrap, sampling).
        n_boot: bootstrap resamples for the 95% CIs.
        limit: evaluate only the first ``limit`` examples of the split (smoke runs).
        tracker: a :class:`personalign.tracking.Tracker` (None: no tracking).
        out_dir: when given, the result JSON and an F1 chart (PNG, 95% CI bars) are written there
            (atomically) and logged as MLflow artifacts; their paths are in ``result_file`` and
            ``chart_file``.

    Returns:
        ``{"stage", "data", "data_sha256", "split", "n", "gold_yes_rate", "lm", "seed", "strategies": [...]}``
        where each strategy row has ``name, f1, f1_ci, precision, precision_ci, recall, recall_ci,
        yes_rate, yes_rate_ci, lm_calls, seconds, failures, errors, compile``.

    Raises:
        DataError: unreadable data, or a split with no examples.
        ConfigurationError / UnknownModelError / ModelFileError: bad strategy or model.
    """
    from personalign.data import load_relevance
    from personalign.evaluation import filled_predictions, run_program
    from personalign.lm import DEFAULT_MODEL, make_lm, use
    from personalign.metrics import binary_report, mcnemar_exact, paired_bootstrap_diff
    from personalign.programs.relevance import DEFAULT_STRATEGIES, STRATEGIES
    from personalign.signatures.relevance import INPUTS, LABEL

    from personalign.errors import ConfigurationError

    if n_boot < 1:
        raise ConfigurationError(f"--n-boot must be >= 1, got {n_boot}")
    if limit is not None and limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {limit}")
    specs = parse_strategy_specs(strategies, DEFAULT_STRATEGIES)
    names = [f"{n}@{o}" if o else n for n, o in specs]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a strategy is listed twice: {','.join(names)}")
    model = lm or DEFAULT_MODEL
    rows = load_relevance(data)
    evalset = [r.to_dspy() for r in rows if r.split == split]
    available = sorted({str(r.split) for r in rows})
    if not evalset:
        raise DataError(data, None, "split", f"no examples in split '{split}' (splits present: {', '.join(available)})")
    if limit:
        evalset = evalset[:limit]
    trainset = [r.to_dspy() for r in rows if r.split == train_split]
    needs_train = [n for (b, o), n in zip(specs, names) if o or STRATEGIES.info(b).trainable]
    if needs_train and not trainset:
        raise DataError(data, None, "split", f"{', '.join(needs_train)} need a '{train_split}' split to compile on "
                        f"(splits present: {', '.join(available)})")
    gold = [bool(getattr(ex, LABEL)) for ex in evalset]
    uses_lm = any(STRATEGIES.info(n).uses_lm for n, _ in specs)
    lm_obj = make_lm(model) if uses_lm else None

    result: dict[str, Any] = {
        "stage": "relevance",
        "data": str(data),
        "data_sha256": file_sha256(data),
        "split": split,
        "train_split": train_split,
        "n": len(evalset),
        "n_train": len(trainset),
        "gold_yes_rate": sum(gold) / len(gold),
        "lm": model,
        "seed": seed,
        "n_boot": n_boot,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "strategies": [],
    }
    params = {k: result[k] for k in ("stage", "data", "data_sha256", "split", "train_split", "n", "n_train", "lm", "seed", "n_boot")}
    params["strategies"] = ",".join(names)

    def body():
        for (base, opt_name), name in zip(specs, names):
            info = STRATEGIES.info(base)
            program = STRATEGIES.create(base)
            compile_info = None
            t0 = time.perf_counter()
            if opt_name is not None:
                from personalign.optimizers import OPTIMIZERS

                kwargs = {"seed": seed}
                if OPTIMIZERS.info(opt_name).kind == "teleprompter":
                    kwargs["lm"] = lm_obj
                optimizer = OPTIMIZERS.create(opt_name, **kwargs)
                fit, dev = _dev_split(trainset, seed)
                # teleprompters print progress to stdout; keep stdout for results (--json)
                with use(lm_obj) if info.uses_lm else contextlib.nullcontext(), \
                        contextlib.redirect_stdout(sys.stderr):
                    program, compiled = optimizer.compile(program, trainset=fit, valset=dev)
                compile_info = compiled.to_dict()
            elif info.trainable:
                optimizer = STRATEGIES.default_optimizer(name, seed=seed)
                with use(lm_obj) if info.uses_lm else contextlib.nullcontext():
                    program, compiled = optimizer.compile(program, trainset=trainset)
                compile_info = compiled.to_dict()
            outcome = run_program(program, evalset, inputs=INPUTS, output=LABEL,
                                  lm=lm_obj if info.uses_lm else None, description=name, progress=progress)
            filled = filled_predictions(gold, outcome.predictions)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                report = binary_report(gold, filled, n_boot=n_boot, seed=seed)
            row = {
                "name": name,
                **report,
                "lm_calls": outcome.lm_calls,
                "compile_lm_calls": int((compile_info or {}).get("actual_lm_calls") or (compile_info or {}).get("lm_calls") or 0),
                "seconds": round(time.perf_counter() - t0, 3),
                "failures": outcome.failures,
                "errors": outcome.errors[:20],
                "compile": compile_info,
                "predictions": [None if p is None else bool(p) for p in outcome.predictions],
                "warnings": sorted({str(w.message) for w in caught}),
            }
            if result["strategies"]:
                first = result["strategies"][0]
                ref = filled_predictions(gold, first["predictions"])
                row["vs_first"] = {"against": first["name"],
                                   "f1_diff": paired_bootstrap_diff(gold, filled, ref, metric="f1",
                                                                    n_boot=max(n_boot, 1), seed=seed),
                                   "mcnemar": mcnemar_exact(gold, filled, ref)}
            result["strategies"].append(row)
            if tracker is not None:
                with tracker.run(name, nested=True, params={"strategy": name, "summary": info.summary,
                                                            "uses_lm": info.uses_lm, **({"lm": model} if info.uses_lm else {}),
                                                            **({"compile": compile_info} if compile_info else {})}):
                    tracker.log_metrics({k: row[k] for k in ("f1", "f1_ci", "precision", "precision_ci", "recall",
                                                             "recall_ci", "yes_rate", "yes_rate_ci", "accuracy",
                                                             "lm_calls", "compile_lm_calls", "seconds", "failures")})
                    tracker.log_dict({"gold": gold, "predictions": row["predictions"], "errors": outcome.errors},
                                     "predictions.json")

    def outputs():
        if out_dir is None:
            return
        chart = plot_result(result, Path(out_dir) / f"relevance-{split}-{_stamp()}.png")
        result["chart_file"] = str(chart)
        result["result_file"] = str(write_result(result, Path(out_dir), stem=chart.stem))
        if tracker is not None:
            tracker.log_artifact(chart)
            tracker.log_artifact(result["result_file"])

    if tracker is not None:
        tracker.check()  # a bad tracking URI fails here, before any strategy runs
        with tracker.run(f"compare-relevance-{split}", params=params, tags={"command": "compare", "stage": "relevance"}):
            body()
            result["mlflow_run_id"] = getattr(tracker, "run_id", None)
            outputs()
    else:
        body()
        outputs()
    return result


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def plot_result(result: dict[str, Any], path: Path) -> Path:
    """Bar chart of F1 per strategy with 95% CI error bars (matplotlib, PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["strategies"]
    names = [r["name"] for r in rows]
    f1s = [r["f1"] for r in rows]
    lo = [r["f1"] - r["f1_ci"][0] for r in rows]
    hi = [r["f1_ci"][1] - r["f1"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 2), 3.6))
    ax.bar(names, f1s, yerr=[lo, hi], capsize=4, color="#4c72b0")
    ax.axhline(2 * result["gold_yes_rate"] / (1 + result["gold_yes_rate"]), color="grey", ls="--", lw=1,
               label="all-yes F1")
    ax.set_ylim(0, 1)
    ax.set_ylabel("F1 vs human majority (95% CI)")
    ax.set_title(f"relevance on {result['split']} (n={result['n']})")
    ax.legend(loc="upper right", fontsize=8)
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
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(path)
    return path
