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
    from personalign.metrics import binary_report
    from personalign.programs.relevance import DEFAULT_STRATEGIES, STRATEGIES
    from personalign.signatures.relevance import INPUTS, LABEL

    names = STRATEGIES.parse(strategies or DEFAULT_STRATEGIES)
    model = lm or DEFAULT_MODEL
    rows = load_relevance(data)
    evalset = [r.to_dspy() for r in rows if r.split == split]
    available = sorted({str(r.split) for r in rows})
    if not evalset:
        raise DataError(data, None, "split", f"no examples in split '{split}' (splits present: {', '.join(available)})")
    if limit:
        evalset = evalset[:limit]
    trainset = [r.to_dspy() for r in rows if r.split == train_split]
    gold = [bool(getattr(ex, LABEL)) for ex in evalset]
    uses_lm = any(STRATEGIES.info(n).uses_lm for n in names)
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
        for name in names:
            info = STRATEGIES.info(name)
            program = STRATEGIES.create(name)
            compile_info = None
            t0 = time.perf_counter()
            if info.trainable:
                if not trainset:
                    raise DataError(data, None, "split", f"strategy '{name}' needs a '{train_split}' split to fit on")
                optimizer = STRATEGIES.default_optimizer(name, seed=seed)
                with use(lm_obj) if info.uses_lm else contextlib.nullcontext():
                    program, compiled = optimizer.compile(program, trainset=trainset)
                compile_info = compiled.to_dict()
            outcome = run_program(program, evalset, inputs=INPUTS, output=LABEL,
                                  lm=lm_obj if info.uses_lm else None, description=name, progress=progress)
            filled = filled_predictions(gold, outcome.predictions)
            report = binary_report(gold, filled, n_boot=n_boot, seed=seed)
            row = {
                "name": name,
                **report,
                "lm_calls": outcome.lm_calls,
                "seconds": round(time.perf_counter() - t0, 3),
                "failures": outcome.failures,
                "errors": outcome.errors[:20],
                "compile": compile_info,
                "predictions": [None if p is None else bool(p) for p in outcome.predictions],
            }
            result["strategies"].append(row)
            if tracker is not None:
                with tracker.run(name, nested=True, params={"strategy": name, "summary": info.summary,
                                                            "uses_lm": info.uses_lm, **({"lm": model} if info.uses_lm else {}),
                                                            **({"compile": compile_info} if compile_info else {})}):
                    tracker.log_metrics({k: row[k] for k in ("f1", "f1_ci", "precision", "precision_ci", "recall",
                                                             "recall_ci", "yes_rate", "yes_rate_ci", "accuracy",
                                                             "lm_calls", "seconds", "failures")})
                    tracker.log_dict({"gold": gold, "predictions": row["predictions"], "errors": outcome.errors},
                                     "predictions.json")

    if tracker is not None:
        with tracker.run(f"compare-relevance-{split}", params=params, tags={"command": "compare", "stage": "relevance"}):
            body()
            tracker.log_dict(result, "compare.json")
            result["mlflow_run_id"] = getattr(tracker, "run_id", None)
    else:
        body()
    return result


def write_result(result: dict[str, Any], out_dir: Path) -> Path:
    """Write the result JSON atomically (tmp + rename) under ``out_dir``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = out_dir / f"{result['stage']}-{result['split']}-{stamp}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(path)
    return path
