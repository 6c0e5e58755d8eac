"""The LM cache: the same ``personalign eval`` twice; prints one JSON object.

Saves a zero-shot relevance program (``personalign compile relevance --strategy zero-shot``, which
compiles nothing and calls no LM), then runs ``personalign eval relevance --program DIR --json``
twice as separate CLI processes with the same fresh ``--cache-dir`` (a temporary directory) and
tracking off. The first run fills DSPy's disk cache; the second, in a new process (so nothing
comes from memory), should make no LM call (target 0) and be much faster (target >= 100x).

Two durations per run: ``eval_seconds``, the wall time of the evaluation itself as the CLI reports
it (``seconds`` in its JSON: running the program over the examples, LM calls or cache look-ups
included; model loading and imports excluded), and ``process_seconds``, the wall time of the
whole CLI process (Python start-up, imports, loading and sha256-checking the model, data,
evaluation, bootstrap CIs). ``speedup`` is the ratio of ``eval_seconds`` (first / second);
``process_speedup`` the ratio of ``process_seconds``, which start-up bounds to a few x.
Both runs must report identical metrics (``identical_metrics``). Unless set, the CLI runs with
``OMP_WAIT_POLICY=PASSIVE`` (llama.cpp's faster setting on a busy machine, so the first run is not
slowed by thread contention and the ratio is conservative; recorded in ``env``).

Data: ``--data`` (default: the real human labels ``../shared/data/recenter_relevance/
relevance_labels.jsonl`` when present, else ``examples/relevance_demo.jsonl``), the first
``--limit`` examples of ``--split``.

Usage: ``python benchmarks/cache.py [--data PATH] [--split val] [--limit 20] [--lm MODEL]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, shared_data

METRICS = ("n", "f1", "f1_ci", "precision", "recall", "yes_rate", "failures")


def default_data() -> Path:
    real = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    return real if real.exists() else ROOT / "examples" / "relevance_demo.jsonl"


def cli(*args: str, env: dict) -> tuple[dict, float]:
    """Run ``personalign ARGS --json``; returns (its JSON, process wall seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "personalign", *args, "--json"], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"personalign {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout), seconds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--lm", default=None)
    args = ap.parse_args(argv)
    data = str(args.data or default_data())

    with tempfile.TemporaryDirectory(prefix="personalign-cache-bench-") as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, PERSONALIGN_RUNS_DIR=str(tmp / "runs"),
                   PERSONALIGN_MODELS_DIR=os.environ.get("PERSONALIGN_MODELS_DIR", str(ROOT / "runs" / "models")))
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # the faster setting on a busy machine: a conservative ratio
        cache = tmp / "cache"
        program = tmp / "program"
        lm = ["--lm", args.lm] if args.lm else []
        cli("compile", "relevance", "--strategy", "zero-shot", "--data", data, "--out", str(program), "--no-track",
            "--no-cache", *lm, env=env)
        runs = []
        for _ in range(2):
            out, wall = cli("eval", "relevance", "--program", str(program), "--data", data, "--split", args.split,
                            "--limit", str(args.limit), "--cache-dir", str(cache), "--no-track", *lm, env=env)
            runs.append({"lm_calls": out["lm_calls"], "eval_seconds": out["seconds"],
                         "process_seconds": round(wall, 2), **{k: out[k] for k in METRICS}})
        cache_bytes = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())

    first, second = runs
    emit({
        "benchmark": "cache",
        "data": data,
        "split": args.split,
        "n": first["n"],
        "lm": out.get("lm"),
        "runs": runs,
        "second_run_lm_calls": second["lm_calls"],
        "speedup": round(first["eval_seconds"] / max(second["eval_seconds"], 1e-6), 1),
        "speedup_measures": "eval_seconds (the evaluation itself, from the CLI's JSON), first run / second run",
        "process_speedup": round(first["process_seconds"] / second["process_seconds"], 2),
        "identical_metrics": all(first[k] == second[k] for k in METRICS),
        "cache_bytes": cache_bytes,
        "env": {k: env.get(k) for k in ("OMP_WAIT_POLICY", "PERSONALIGN_THREADS")},
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "targets": {"second_run_lm_calls": 0, "speedup": ">= 100"},
    })


if __name__ == "__main__":
    main()
