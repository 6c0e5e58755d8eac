"""One forward pass for yes-prob and lm-probe: ``compare relevance`` of both vs ``yes-prob`` alone.

``yes-prob`` reads the yes/no margin of a pair's question and ``lm-probe`` the final hidden state
of the same prompt at the same position; both come from one forward pass, cached by the model
file's sha256 and the prompt tokens (:mod:`personalign.lm.forward`). So a compare of
``yes-prob,lm-probe`` should cost little more than ``yes-prob`` alone (target: at most 1.2x).

Each round runs, as separate whole CLI processes side by side (the order alternating between
rounds, so drift in the machine's speed falls on both):

* **A** -- ``personalign compare relevance --strategies yes-prob,lm-probe``;
* **B** -- ``personalign compare relevance --strategies yes-prob``;

each with a fresh ``--cache-dir`` (nothing from an earlier run) and tracking off, on the same
slice: ``--train-per-prompt`` train rows of each train prompt (seeded sample) and ``--limit``
evaluation rows (compare's own seeded sample). Recorded per command: the process's wall seconds,
its CPU seconds (user + system, the OS's accounting of the finished child) and each strategy's
row (seconds, LM calls); the ratio A/B of wall seconds is taken round by round and its median is
the headline (the CPU ratio beside it: on a shared machine wall time also measures the others'
load). Unless set, the CLI runs with ``OMP_WAIT_POLICY=PASSIVE`` (as ``benchmarks/cache.py``). Both commands' ``yes-prob`` rows must score the
same rows identically (``identical_yes_prob``). After the rounds, A runs once more on the cache dir
of its last run (``warm_rerun_seconds``: a later run reads every pass from disk).

Data: the real human labels ``../shared/data/recenter_relevance/relevance_labels.jsonl`` (else
``examples/relevance_demo.jsonl``); the slice is written to a temporary file (never into the
repository); the record names the source file and its sha256 and the slice's sha256.

Writes ``benchmarks/results/forward-pass.json`` (run-record format; rewritten after every round,
``extra.complete`` false until the end) and prints it.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/forward_pass.py [--lm MODEL]
[--train-per-prompt 10] [--limit 20] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, log, shared_data, usage_error, write_results

BOTH, ALONE = "yes-prob,lm-probe", "yes-prob"


def default_data() -> Path:
    real = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    return real if real.exists() else ROOT / "examples" / "relevance_demo.jsonl"


def write_slice(source: Path, out: Path, per_prompt: int, seed: int) -> dict:
    """Every non-train line of ``source`` and ``per_prompt`` seeded train lines of each train
    prompt, in file order, written to ``out``; returns counts and the slice's sha256."""
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [json.loads(line) for line in lines]
    prompt = [str(r.get("prompt_id", r.get("prompt_index"))) for r in rows]
    train: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r.get("split") == "train":
            train.setdefault(prompt[i], []).append(i)
    rng = random.Random(seed)
    keep = {i for i, r in enumerate(rows) if r.get("split") != "train"}
    for idx in train.values():
        keep.update(rng.sample(idx, min(per_prompt, len(idx))))
    text = "".join(lines[i] + "\n" for i in sorted(keep))
    out.write_text(text, encoding="utf-8")
    return {"rows": len(keep), "train_rows": sum(1 for i in keep if rows[i].get("split") == "train"),
            "train_prompts": len(train), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def run_compare(strategies: str, data: Path, cache: Path, args, env: dict) -> dict:
    """One ``personalign compare`` process; its wall and CPU seconds and its JSON's strategy rows."""
    cmd = [sys.executable, "-m", "personalign", "compare", "relevance", "--data", str(data), "--strategies",
           strategies, "--lm", args.lm, "--limit", str(args.limit), "--seed", str(args.seed), "--cache-dir",
           str(cache), "--no-track", "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"compare --strategies {strategies} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    rows = {r["name"]: r for r in out["strategies"]}
    keep = ("seconds", "lm_calls", "compile_lm_calls", "failures", "objective", "n")
    return {"strategies": strategies, "wall_seconds": round(wall, 2),
            "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
            "rows": {name: {k: r.get(k) for k in keep if k in r} for name, r in rows.items()},
            "yes_prob": [rows[ALONE].get("predictions"), rows[ALONE].get("scores")]}


def figures(rounds: list[dict], warm: float | None) -> list[dict]:
    from personalign.record import figure

    a = [r["both"]["wall_seconds"] for r in rounds]
    b = [r["alone"]["wall_seconds"] for r in rounds]
    ratios = [r["ratio"] for r in rounds]
    cpu = [r["ratio_cpu"] for r in rounds]
    out = [figure("seconds_both", f"compare {BOTH}: process wall seconds (median of {len(a)})",
                  statistics.median(a), metric="seconds", strategy=None, n=len(a)),
           figure("seconds_alone", f"compare {ALONE}: process wall seconds (median of {len(b)})",
                  statistics.median(b), metric="seconds", strategy=ALONE, n=len(b)),
           figure("ratio", f"{BOTH} / {ALONE}, wall seconds, median of paired rounds (target <= 1.2)",
                  statistics.median(ratios), metric="ratio", n=len(ratios),
                  note=f"rounds: {', '.join(f'{x:.3f}' for x in ratios)}"),
           figure("ratio_cpu", f"{BOTH} / {ALONE}, CPU seconds, median of paired rounds",
                  statistics.median(cpu), metric="ratio", n=len(cpu),
                  note=f"rounds: {', '.join(f'{x:.3f}' for x in cpu)}")]
    if warm is not None:
        out.append(figure("warm_rerun_seconds", f"compare {BOTH} again on its cache dir: process wall seconds",
                          warm, metric="seconds", strategy=None, n=1))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default="local/qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--data", default=None, help="relevance labels (default: the real ones, else the demo)")
    ap.add_argument("--train-per-prompt", type=int, default=10)
    ap.add_argument("--limit", type=int, default=20, help="evaluation rows (compare --limit)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="forward-pass", help="results file stem (benchmarks/results/NAME.json)")
    args = ap.parse_args(argv)
    if min(args.train_per_prompt, args.limit, args.rounds) < 1:
        usage_error("--train-per-prompt, --limit and --rounds must be >= 1")
    source = Path(args.data) if args.data else default_data()
    if not source.is_file():
        usage_error(f"--data {source}: no such file")
    command = "flock /tmp/personalign-model.lock python benchmarks/forward_pass.py " + " ".join(
        sys.argv[1:] if argv is None else argv)

    rounds: list[dict] = []
    warm: float | None = None
    with tempfile.TemporaryDirectory(prefix="personalign-forward-pass-") as tmp:
        tmp = Path(tmp)
        data = tmp / "slice.jsonl"
        sliced = write_slice(source, data, args.train_per_prompt, args.seed)
        env = dict(os.environ, PERSONALIGN_RUNS_DIR=str(tmp / "runs"),
                   PERSONALIGN_MODELS_DIR=os.environ.get("PERSONALIGN_MODELS_DIR", str(ROOT / "runs" / "models")))
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")

        def save(complete: bool) -> dict:
            extra = {"complete": complete, "slice": {**sliced, "train_per_prompt": args.train_per_prompt,
                                                     "limit": args.limit, "seed": args.seed},
                     "rounds": rounds,
                     "identical_yes_prob": all(r["identical_yes_prob"] for r in rounds),
                     "env": {k: env.get(k) for k in ("OMP_WAIT_POLICY", "PERSONALIGN_THREADS")},
                     "cpus": os.cpu_count()}
            return write_results(args.name, figures(rounds, warm), command=command, model=args.lm, data=source,
                                 stage="relevance", extra=extra,
                                 title="One forward pass: compare yes-prob,lm-probe vs yes-prob alone")

        for i in range(args.rounds):
            order = [BOTH, ALONE] if i % 2 == 0 else [ALONE, BOTH]
            got = {}
            for strategies in order:
                cache = tmp / f"cache-{i}-{'both' if strategies == BOTH else 'alone'}"
                got[strategies] = run_compare(strategies, data, cache, args, env)
                log(f"round {i + 1}: {strategies}: {got[strategies]['wall_seconds']:.1f} s")
            both, alone = got[BOTH], got[ALONE]
            same = both.pop("yes_prob") == alone.pop("yes_prob")
            rounds.append({"order": order, "both": both, "alone": alone, "identical_yes_prob": same,
                           "ratio": round(both["wall_seconds"] / alone["wall_seconds"], 4),
                           "ratio_cpu": round(both["cpu_seconds"] / alone["cpu_seconds"], 4)})
            log(f"round {i + 1}: ratio {rounds[-1]['ratio']:.3f}, identical yes-prob rows: {same}")
            save(complete=False)
        last = tmp / f"cache-{args.rounds - 1}-both"
        warm = run_compare(BOTH, data, last, args, env)["wall_seconds"]
        log(f"warm rerun of {BOTH}: {warm:.1f} s")
        record = save(complete=True)
    emit(record)


if __name__ == "__main__":
    main()
