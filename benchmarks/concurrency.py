"""Concurrency and kill -9 on fresh stores; prints one JSON object.

1. 6 concurrent ``compare relevance --strategies bm25`` on a brand-new MLflow sqlite store:
   how many succeed, whether the store is usable after, distinct result files.
2. 2 ``sweep`` worker processes x 4 trials on one journal study (same --seed) over a continuous
   space (minilm-logreg C, fit beta): distinct configurations among the 8 trials.
3. 10 ``compile`` processes killed with SIGKILL while their MLflow run is open, then one more
   tracked command: RUNNING runs before and after it (each compile already closes the runs its
   killed predecessors left, so at most one is RUNNING before the last command).

Usage: ``python benchmarks/concurrency.py``. Every process gets its own temp runs/ tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit

DEMO = ROOT / "examples" / "relevance_demo.jsonl"
SPACE = """
strategies = ["minilm-logreg"]
[evaluation]
minibatch_size = 9
[pruner]
kind = "none"
[fit]
beta = { low = 0.5, high = 2.0 }
[strategy.minilm-logreg]
C = { low = 0.001, high = 1.0, log = true }
"""


def _env(runs: Path) -> dict:
    env = dict(os.environ, PERSONALIGN_RUNS_DIR=str(runs), PYTHONPATH=str(ROOT))
    env.pop("PERSONALIGN_CACHE_DIR", None)
    env.pop("DSPY_CACHEDIR", None)
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "personalign", *args]


def _client(runs: Path):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}")


def _runs_by_status(runs: Path) -> dict[str, int]:
    client = _client(runs)
    exp = client.get_experiment_by_name("personalign")
    out: dict[str, int] = {}
    if exp is not None:
        for r in client.search_runs([exp.experiment_id], max_results=5000):
            out[r.info.status] = out.get(r.info.status, 0) + 1
    return out


def concurrent_compares(base: Path, n: int = 6) -> dict:
    runs = base / "compare-runs"
    procs = [subprocess.Popen(_cli("compare", "relevance", "--data", str(DEMO), "--strategies", "bm25", "--json",
                                   "--n-boot", "50"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(runs), cwd=base) for _ in range(n)]
    outs = [p.communicate(timeout=900) for p in procs]
    ok = [p.returncode == 0 for p in procs]
    files = {json.loads(o[0])["result_file"] for o, good in zip(outs, ok) if good}
    after = subprocess.run(_cli("compare", "relevance", "--data", str(DEMO), "--strategies", "bm25", "--json",
                                "--n-boot", "50"), capture_output=True, text=True, env=_env(runs), cwd=base, timeout=900)
    errors = [o[1].strip().splitlines()[-1][:200] for o, good in zip(outs, ok) if not good and o[1].strip()]
    return {"processes": n, "succeeded": sum(ok), "distinct_result_files": len(files),
            "store_usable_after": after.returncode == 0, "runs": _runs_by_status(runs), "errors": errors}


def sweep_workers(base: Path, workers: int = 2, per_worker: int = 4) -> dict:
    import optuna

    runs = base / "sweep-runs"
    space = base / "space.toml"
    space.write_text(SPACE)
    journal = base / "study.journal"
    cmd = _cli("sweep", "relevance", "--data", str(DEMO), "--space", str(space), "--n-trials",
               str(workers * per_worker), "--storage", f"journal:{journal}", "--study-name", "bench", "--seed", "0",
               "--no-export", "--n-boot", "50", "--json")
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(runs),
                              cwd=base) for _ in range(workers)]
    outs = [p.communicate(timeout=1800) for p in procs]
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    trials = optuna.load_study(study_name="bench", storage=storage).get_trials(deepcopy=False)
    done = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    configs = {json.dumps(t.params, sort_keys=True) for t in done}
    return {"workers": workers, "exit_codes": [p.returncode for p in procs], "trials": len(trials),
            "finished_trials": len(done), "distinct_configurations": len(configs),
            "states": {s: sum(t.state.name == s for t in trials) for s in {t.state.name for t in trials}},
            "mlflow_runs": _runs_by_status(runs),
            "errors": [o[1].strip().splitlines()[-1][:200] for o, p in zip(outs, procs) if p.returncode and o[1]]}


def _running_of(runs: Path, pid: int) -> bool:
    """Whether process ``pid`` has a RUNNING run (its ``personalign.worker`` tag holds the pid)."""
    if not (runs / "mlflow.db").exists():
        return False
    client = _client(runs)
    exp = client.get_experiment_by_name("personalign")
    if exp is None:
        return False
    query = f"attributes.status = 'RUNNING' and tags.`personalign.worker` LIKE '%|{pid}|%'"
    return bool(client.search_runs([exp.experiment_id], query, max_results=1))


def kill_compiles(base: Path, n: int = 10) -> dict:
    runs = base / "kill-runs"
    killed, finished_first = 0, 0
    for i in range(n):
        proc = subprocess.Popen(_cli("compile", "relevance", "--strategy", "minilm-logreg", "--data", str(DEMO),
                                     "--out", str(base / f"prog-{i}")), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=_env(runs), cwd=base)
        deadline = time.time() + 300
        while proc.poll() is None and time.time() < deadline:
            if _running_of(runs, proc.pid):  # this process's own run is open: kill it now
                break
            time.sleep(0.2)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed += 1
        else:
            finished_first += 1
        proc.wait(timeout=60)
    running_before = _runs_by_status(runs).get("RUNNING", 0)
    nxt = subprocess.run(_cli("compile", "relevance", "--strategy", "bm25", "--data", str(DEMO), "--json"),
                         capture_output=True, text=True, env=_env(runs), cwd=base, timeout=900)
    status = _runs_by_status(runs)
    return {"killed": killed, "finished_before_kill": finished_first, "running_before_next_command": running_before,
            "next_command_exit": nxt.returncode, "running_after_next_command": status.get("RUNNING", 0),
            "runs": status, "half_written_programs": sum(1 for i in range(n) if (base / f"prog-{i}").exists()
                                                      and not (base / f"prog-{i}" / "program.json").exists())}


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("compares", "sweep", "kill9"), default=None)
    only = ap.parse_args().only
    if only:
        with tempfile.TemporaryDirectory(prefix="conc-") as tmp:
            fn = {"compares": concurrent_compares, "sweep": sweep_workers, "kill9": kill_compiles}[only]
            emit({"benchmark": "concurrency", only: fn(Path(tmp))})
        return
    t0 = time.perf_counter()
    out: dict = {"benchmark": "concurrency"}
    with tempfile.TemporaryDirectory(prefix="conc-") as tmp:
        base = Path(tmp)
        t = time.perf_counter()
        out["fresh_store_compares"] = {**concurrent_compares(base), "seconds": round(time.perf_counter() - t, 1)}
        t = time.perf_counter()
        out["sweep_workers"] = {**sweep_workers(base), "seconds": round(time.perf_counter() - t, 1)}
        t = time.perf_counter()
        out["kill9_compile"] = {**kill_compiles(base), "seconds": round(time.perf_counter() - t, 1)}
    c, s, k = out["fresh_store_compares"], out["sweep_workers"], out["kill9_compile"]
    out["targets_met"] = {
        "compares": c["succeeded"] == c["processes"] and c["store_usable_after"] and c["distinct_result_files"] == 6,
        "sweep": s["distinct_configurations"] == s["finished_trials"] == 8,
        "kill9": k["killed"] == 10 and k["running_after_next_command"] == 0,
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    emit(out)


if __name__ == "__main__":
    main()
