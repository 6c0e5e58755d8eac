"""How close the cost line is to what a run costs: for compare, compile and sweep on the relevance
demo and the own-task example, the model calls and seconds each command projected before its first
call (``personalign.Cost``: new calls, calls a cache holds, the estimate in seconds) against the
calls it made and the seconds it took, on a **cold** cache (a fresh cache dir: nothing answered
from before) and then **warm** (the same command again on that cache dir). Each command runs in a
process of its own, as a user's does.

Seconds taken run from the cost line (the verb's ``on_cost``) to the verb's return: what the
estimate covers; the seconds spent inside model calls are recorded beside them (the rest is fitting,
decision rules, intervals: work the estimate does not count). The runs folder (``PERSONALIGN_RUNS_DIR``) is a fresh temporary one; the model's
speed is measured first by ``personalign doctor --bench`` (:func:`personalign.lm.bench_model`), then
by each run's calls, as for a user. Target: projected/made within 0.75-1.25 for the new calls and
for the seconds (a run that makes no new call is on target when its projection says 0 and it
takes under :data:`IDLE_SECONDS`).

Writes ``benchmarks/results/cost-accuracy.json`` (run-record format; figures per command and cache
state) and prints it as one JSON object. Runs the embedded model: run it under the machine's model
lock. A model on an OpenAI-compatible server is one flag more: ``--lm openai/NAME --api-base URL``.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/cost_accuracy.py [--lm MODEL]
[--api-base URL] [--only NAME,...]``
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "local/qwen2.5-coder-0.5b-instruct"
RELEVANCE = ROOT / "examples" / "relevance_demo.jsonl"
OWN = ROOT / "examples" / "own_task"
FORWARD = "yes-prob,yes-prob-rank,ensemble-rank,lm-probe"  # four strategies reading one pass per pair
TARGET = (0.75, 1.25)
IDLE_SECONDS = 10.0  # a warm run's time is its overhead (loading, fitting, intervals), not model calls

# name -> (verb, stage, data, keyword arguments, the command line it stands for)
CASES: dict[str, tuple] = {
    "compare-relevance-logo": ("compare", "relevance", RELEVANCE, {"strategies": FORWARD, "cv": "groups"},
                               f"compare relevance --data examples/relevance_demo.jsonl --strategies {FORWARD} "
                               "--cv groups"),
    "compare-own-task": ("compare", "own", OWN / "data.jsonl",
                         {"strategies": "majority,predict,predict@bootstrap,yes-prob", "split": "val", "limit": 8,
                          "train_limit": 24},
                         "compare examples/own_task/stage.toml --data examples/own_task/data.jsonl --strategies "
                         "majority,predict,predict@bootstrap,yes-prob --split val --limit 8 --train-limit 24"),
    "compile-relevance": ("compile", "relevance", RELEVANCE,
                          {"strategy": "zero-shot", "optimizer": "bootstrap", "train_limit": 18},
                          "compile relevance --data examples/relevance_demo.jsonl --strategy zero-shot "
                          "--optimizer bootstrap --train-limit 18"),
    "compile-own-task": ("compile", "own", OWN / "data.jsonl",
                         {"strategy": "predict", "optimizer": "bootstrap", "train_limit": 24},
                         "compile examples/own_task/stage.toml --data examples/own_task/data.jsonl --strategy "
                         "predict --optimizer bootstrap --train-limit 24"),
    "sweep-own-task": ("sweep", "own", OWN / "data.jsonl", {"n_trials": 3, "limit": 8, "train_limit": 24},
                       "sweep examples/own_task/stage.toml --data examples/own_task/data.jsonl --n-trials 3 "
                       "--limit 8 --train-limit 24"),
    "sweep-relevance": ("sweep", "relevance", RELEVANCE, {"n_trials": 3, "limit": 8, "train_limit": 18},
                        "sweep relevance --data examples/relevance_demo.jsonl --n-trials 3 --limit 8 --train-limit 18"),
}


def run_case(name: str, work: Path, lm: str, api_base: str | None, state: str) -> dict:
    """One command on the cache dir of ``name`` under ``work``: its projection and what it did."""
    import personalign
    from personalign.lm import CallCounter, configure_cache
    from personalign.lm.calls import FORWARD as PASS, GENERATION

    verb, stage, data, kwargs, _ = CASES[name]
    stage_ref = str(OWN / "stage.toml") if stage == "own" else stage
    configure_cache(work / f"cache-{name}")
    costs: list = []
    started: list[float] = []

    def on_cost(cost) -> None:
        costs.append(cost)
        started.append(time.perf_counter())

    common = {"lm": lm, "api_base": api_base, "on_cost": on_cost}
    load = os.getloadavg()[0]  # the machine is shared: its 1-minute load before and after, for the record
    with CallCounter() as counter:
        if verb == "compare":
            personalign.compare(stage_ref, data=data, n_boot=200, **kwargs, **common)
        elif verb == "compile":
            personalign.compile(stage_ref, data=data, **kwargs, **common)
        else:
            personalign.sweep(stage_ref, data, storage=f"sqlite:///{work / f'optuna-{name}-{state}.db'}", n_boot=200,
                              export=False, **kwargs, **common)
    seconds = time.perf_counter() - started[0]
    cost = costs[0].to_dict()
    made = {"new": counter.calls, "cached": counter.cached, "generation": counter.generations,
            "forward": counter.forward_passes, "seconds_in_calls": round(sum(counter.seconds.values()), 2),
            "seconds_by_kind": {k: round(counter.seconds[k], 2) for k in (GENERATION, PASS)}}
    return {"projected": cost, "line": costs[0].line(), "made": made, "seconds": round(seconds, 2),
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)]}


def in_new_process(name: str, work: Path, lm: str, api_base: str | None, state: str) -> dict:
    """:func:`run_case` in a process of its own, as a user's command runs: nothing kept in memory
    from the run before (passes, responses, loaded embedders), the cache dir and speed file shared."""
    import json
    import subprocess

    cmd = [sys.executable, __file__, "--one", name, "--state", state, "--work", str(work), "--lm", lm,
           *(["--api-base", api_base] if api_base else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), timeout=3600)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{name} {state}: exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ratio(projected: float | None, made: float) -> float | None:
    """projected / made; 1.0 when both are 0; None when nothing was projected (time unknown)."""
    if projected is None:
        return None
    if made == 0:
        return 1.0 if projected == 0 else float("inf")
    return projected / made


def on_target(row: dict) -> bool:
    lo, hi = TARGET
    calls, secs = row["calls_ratio"], row["seconds_ratio"]
    calls_ok = calls is not None and lo <= calls <= hi
    idle = row["projected"].get("new", row["projected"]["total"]) == 0 and row["seconds"] < IDLE_SECONDS
    secs_ok = idle or (secs is not None and lo <= secs <= hi)
    return calls_ok and secs_ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lm", default=MODEL, help=f"model string (default {MODEL})")
    ap.add_argument("--api-base", default=None, help="an OpenAI-compatible server for a non-embedded --lm")
    ap.add_argument("--only", default=None, help="comma-separated case names (default: all: " + ", ".join(CASES) + ")")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # one case, in this process (the runner's child)
    ap.add_argument("--state", default="cold", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        import json

        from _common import quiet_logs

        quiet_logs()
        sys.stdout.write(json.dumps(run_case(args.one, Path(args.work), args.lm, args.api_base, args.state)) + "\n")
        return
    names = [n.strip() for n in args.only.split(",")] if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        from _common import usage_error

        usage_error(f"--only: unknown case(s) {', '.join(unknown)}; one of {', '.join(CASES)}")
    work = Path(tempfile.mkdtemp(prefix="cost-accuracy-"))
    os.environ["PERSONALIGN_RUNS_DIR"] = str(work / "runs")  # a fresh runs folder: its own speed file

    from _common import emit, log, quiet_logs, write_results

    from personalign.data.digest import file_sha256
    from personalign.lm import is_local, make_lm
    from personalign.lm.speed import bench_model, known_speed

    quiet_logs()
    t0 = time.perf_counter()
    if is_local(args.lm):
        bench = bench_model(args.lm)  # personalign doctor --bench: the speed a first run is estimated with
        log(f"doctor --bench: {bench['seconds_per_forward_pass']} s per pass, {bench['seconds_per_generation']} s per call")
    else:
        make_lm(args.lm, api_base=args.api_base)  # the endpoint probe; its speed comes from the first run
    rows: dict[str, dict] = {}
    for name in names:
        for state in ("cold", "warm"):
            row = in_new_process(name, work, args.lm, args.api_base, state)
            proj, made = row["projected"], row["made"]
            new = proj.get("new", proj["total"])
            row.update(calls_ratio=ratio(new, made["new"]), seconds_ratio=ratio(proj["seconds"], row["seconds"]))
            row["on_target"] = on_target(row)
            rows[f"{name}.{state}"] = row
            log(f"{name} {state}: {row['line']}")
            log(f"  made {made['new']} new + {made['cached']} cached in {row['seconds']:.1f} s "
                f"(calls x{row['calls_ratio'] if row['calls_ratio'] is None else round(row['calls_ratio'], 2)}, "
                f"seconds x{row['seconds_ratio'] if row['seconds_ratio'] is None else round(row['seconds_ratio'], 2)})"
                f"{'' if row['on_target'] else '  OFF TARGET'}")

    figures = []
    for key, row in rows.items():
        name, state = key.split(".")
        proj, made = row["projected"], row["made"]
        values = [("projected_new", "projected new model calls", proj.get("new", proj["total"])),
                  ("projected_cached", "projected cached model calls", proj.get("cached", 0)),
                  ("made_new", "model calls made", made["new"]),
                  ("made_cached", "model calls a cache answered", made["cached"]),
                  ("projected_seconds", "projected seconds", proj["seconds"]),
                  ("seconds", "seconds taken", row["seconds"]),
                  ("seconds_in_calls", "seconds spent in model calls", made["seconds_in_calls"]),
                  ("calls_ratio", "projected / made calls", row["calls_ratio"]),
                  ("seconds_ratio", "projected / taken seconds", row["seconds_ratio"])]
        for suffix, metric, value in values:
            if value is None or value == float("inf"):
                continue
            figures.append({"key": f"cost_accuracy.{name}.{state}.{suffix}", "label": f"{name} ({state} cache): {metric}",
                            "strategy": None, "metric": metric, "value": round(float(value), 3), "ci": None, "n": None,
                            "note": None})
    command = "python benchmarks/cost_accuracy.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    record = write_results(
        "cost-accuracy", figures, title="The cost line against the run: projected and made model calls and seconds, "
                                        "cold and warm cache", command=command.strip(), model=args.lm,
        data="examples/relevance_demo.jsonl", data_sha256=file_sha256(RELEVANCE), stage=None,
        extra={"cases": {n: {"command": f"personalign {CASES[n][4]} --lm {args.lm}", "kwargs": {
                   k: v for k, v in CASES[n][3].items()}} for n in names},
               "own_task_data_sha256": file_sha256(OWN / "data.jsonl"), "target": list(TARGET),
               "idle_seconds": IDLE_SECONDS, "runs": rows, "on_target": all(r["on_target"] for r in rows.values()),
               "speed": known_speed(args.lm), "total_seconds": round(time.perf_counter() - t0, 1)})
    emit(record)


if __name__ == "__main__":
    main()
