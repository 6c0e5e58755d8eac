"""Sweep parallelism: the same 16-trial sweep with ``--n-jobs 4`` vs ``--n-jobs 1``; one JSON object.

The LM is a mock with 200 ms latency per call (a litellm custom provider registered in-process,
:mod:`benchmarks._mock_lm`; its ``time.sleep`` releases the GIL like waiting on a hosted API), so
the measurement isolates what ``n_jobs`` threads buy when trials wait on the LM. Each trial
compiles an LLM judge (``zero-shot`` or ``criteria``, optionally with ``labeled`` demos -- no LM
calls at compile time) and evaluates it on ``--limit`` examples of the demo val split: ``limit``
LM calls per trial, identical work for both runs. Pruning is off (pruning decisions would differ
between the runs), the LM cache is off (the second run would otherwise hit the first run's
cache), MLflow tracking is on (a parent run and one child run per trial, SQLite store in a temp
dir), the Optuna storage is a fresh SQLite file per run. Target: speedup >= 3.

Usage: ``python benchmarks/sweep_parallel.py [--trials 16] [--jobs 4] [--latency-ms 200] [--limit 8]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, emit, quiet_logs  # noqa: E402

SPACE = """
strategies = ["zero-shot", "criteria"]
[evaluation]
minibatch_size = 4
[pruner]
kind = "none"
[lm]
temperature = { low = 0.0, high = 1.0 }
optimizer = ["none", "labeled"]
[optimizer.labeled]
k = { low = 0, high = 4 }
"""


def run_once(n_jobs: int, *, trials: int, model: str, limit: int, workdir: Path, study: str | None = None) -> dict:
    import _mock_lm

    import personalign
    from personalign.tracking import MLflowCallback
    from personalign.tracking.store import Tracker

    space = workdir / "space.toml"
    space.write_text(SPACE)
    tracker = Tracker(f"sqlite:///{workdir / 'mlflow.db'}")
    tracker.check()
    study = study or f"bench-{n_jobs}"
    calls0 = _mock_lm.CALLS["n"]
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        result = personalign.sweep("relevance", ROOT / "examples" / "relevance_demo.jsonl", space=space,
                                   n_trials=trials, storage=f"sqlite:///{workdir / f'optuna-{study}.db'}",
                                   study_name=study, n_jobs=n_jobs, seed=0, lm=model,
                                   callbacks=[MLflowCallback(tracker.tracking_uri)], limit=limit, n_boot=200,
                                   export=False).to_dict()
    wall = time.perf_counter() - t0
    client = tracker.client()
    children = client.search_runs([client.get_experiment_by_name(tracker.experiment).experiment_id],
                                  filter_string=f"tags.`personalign.study` = '{study}' "
                                                "and tags.command = 'sweep-trial'", max_results=1000)
    per_trial = {}
    for run in children:
        per_trial.setdefault(run.data.tags["personalign.trial"], []).append(run.info.status)
    return {"n_jobs": n_jobs, "wall_seconds": round(wall, 2), "n_complete": result["n_complete"],
            "n_pruned": result["n_pruned"], "n_fail": result["n_fail"], "lm_calls": result["lm_calls"],
            "mock_calls": _mock_lm.CALLS["n"] - calls0, "best_f1": (result["best"] or {}).get("value"),
            "mlflow_child_runs": len(children),
            "mlflow_trials_with_one_finished_run": sum(1 for v in per_trial.values() if v == ["FINISHED"]),
            "tracking_errors": result["tracking_errors"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--latency-ms", type=int, default=200)
    ap.add_argument("--limit", type=int, default=8)
    args = ap.parse_args()

    import _mock_lm

    _mock_lm.register()
    quiet_logs()
    from personalign.lm import configure_cache

    model = f"mock/relevance-{args.latency_ms}ms"
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        os.environ["PERSONALIGN_RUNS_DIR"] = tmp
        configure_cache(None, enabled=False)
        # warm-up, not measured: imports, the MLflow store and the first DSPy/litellm calls
        run_once(1, trials=1, model=model, limit=1, workdir=Path(tmp), study="warm-up")
        runs = {}
        for jobs in (1, args.jobs):
            runs[jobs] = run_once(jobs, trials=args.trials, model=model, limit=args.limit, workdir=Path(tmp))
    seq, par = runs[1], runs[args.jobs]
    speedup = seq["wall_seconds"] / par["wall_seconds"]
    ideal = args.trials * args.limit * args.latency_ms / 1000
    emit({
        "benchmark": "sweep_parallel",
        "trials": args.trials, "latency_ms": args.latency_ms, "lm_calls_per_trial": args.limit,
        "ideal_sequential_lm_seconds": ideal,
        "n_jobs_1": seq, f"n_jobs_{args.jobs}": par,
        "speedup": round(speedup, 2), "target_speedup": 3.0, "meets_target": speedup >= 3.0,
        "cpu_count": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
