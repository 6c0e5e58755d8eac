"""What the README's own-task commands cost on the default model: their projected model calls (the
``cost:`` line each prints before its first call), the calls they made and their seconds.

The commands are the README's (``examples/own_task``, option-follows, 60 rows written for this
project), run through the Python verbs with a fresh DSPy cache (nothing answered from an earlier
run) and a temporary runs folder:

* ``compare --split val --limit 8 --train-limit 24 --strategies majority,minilm-logreg,predict,predict@bootstrap``
* ``compile --strategy yes-prob --train-limit 24``
* ``eval --split test`` of that program

Writes ``benchmarks/results/own-task-cost.json`` (run-record format; figures: per command its
projected calls, calls made, calls a cache answered and seconds; no interval: one run each) and
prints it. Runs the embedded model: run it under the machine's model lock.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/own_task_cost.py [--lm MODEL]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXAMPLE = ROOT / "examples" / "own_task"
STRATEGIES = "majority,minilm-logreg,predict,predict@bootstrap"
LIMIT, TRAIN_LIMIT = 8, 24


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lm", default=None, help="model (default: personalign's default model)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="own-task-cost-"))
    os.environ["PERSONALIGN_RUNS_DIR"] = str(work / "runs")  # a fresh cache: every call reaches the model

    import personalign
    from personalign.data.digest import file_sha256
    from personalign.lm import configure_cache, default_model

    from _common import emit, log, quiet_logs, write_results

    quiet_logs()
    configure_cache(work / "runs" / "cache")
    model = args.lm or default_model()
    stage, data = str(EXAMPLE / "stage.toml"), EXAMPLE / "data.jsonl"
    rows: dict[str, dict] = {}

    def timed(name: str, run):
        costs: list = []
        t0 = time.perf_counter()
        out = run(costs.append)
        seconds = time.perf_counter() - t0
        log(f"{name}: {costs[0].line()} -- {seconds:.0f} s")
        return out, costs[0], seconds

    report, cost, secs = timed("compare", lambda hook: personalign.compare(
        stage, STRATEGIES, data, split="val", limit=LIMIT, train_limit=TRAIN_LIMIT, lm=model, n_boot=200,
        on_cost=hook))
    made = sum(r["lm_calls"] + r["compile_lm_calls"] for r in report.rows)
    cached = sum(r.get("cached_lm_calls", 0) + r.get("compile_cached_lm_calls", 0) for r in report.rows)
    rows["compare"] = {"projected": cost.total, "calls": made, "cached": cached, "seconds": secs,
                       "strategies": cost.to_dict()["strategies"]}
    program = work / "yes-prob"
    compiled, cost, secs = timed("compile", lambda hook: personalign.compile(
        stage, "yes-prob", data, train_limit=TRAIN_LIMIT, lm=model, out=program, on_cost=hook))
    rows["compile"] = {"projected": cost.total, "calls": compiled.info["actual_lm_calls"],
                       "cached": compiled.info["cached_lm_calls"], "seconds": secs}
    ev, cost, secs = timed("eval", lambda hook: personalign.evaluate(
        stage, program, data, split="test", lm=model, n_boot=200, on_cost=hook))
    rows["eval"] = {"projected": cost.total, "calls": ev["lm_calls"], "cached": ev["cached_lm_calls"], "seconds": secs}

    figures = []
    for command, row in rows.items():
        for key, metric in (("projected", "projected model calls"), ("calls", "model calls"),
                            ("cached", "cached model calls"), ("seconds", "seconds")):
            figures.append({"key": f"own_task_cost.{command}.{key}", "label": f"README own-task {command}: {metric}",
                            "strategy": None, "metric": metric, "value": round(float(row[key]), 1), "ci": None,
                            "n": None, "note": None})
    figures.append({"key": "own_task_cost.total.seconds", "label": "README own-task commands: seconds in all",
                    "strategy": None, "metric": "seconds", "value": round(sum(r["seconds"] for r in rows.values()), 1),
                    "ci": None, "n": None, "note": "one run each, fresh DSPy cache, on this machine"})
    from personalign.lm.speed import known_speed

    record = write_results(
        "own-task-cost", figures, title="What the README's own-task commands cost on the default model",
        command="python benchmarks/own_task_cost.py " + " ".join(sys.argv[1:]), model=model,
        data=data.relative_to(ROOT), data_sha256=file_sha256(data), stage="examples/own_task/stage.toml",
        extra={"commands": rows, "limit": LIMIT, "train_limit": TRAIN_LIMIT, "strategies": STRATEGIES,
               "speed": known_speed(model)})
    emit(record)


if __name__ == "__main__":
    main()
