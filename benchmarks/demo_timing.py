"""``make demo`` as a newcomer meets it: wall time, what stderr holds, and whether a second run agrees.

Runs the demo's own command (read from ``make -n demo``, so the Makefile stays the one place it is
written) ``--runs`` times, each in a fresh runs folder with a fresh DSPy cache (nothing cached from a
previous run; the models come from the user's model cache, assembled once), each with
``--results`` into a temporary file. Checks that every run exits 0, that stderr holds nothing but
progress-bar lines, and that every figure is identical across runs. Writes
``benchmarks/results/demo.json``: the first run's record (the compare run record: command, commit,
versions, model and data sha256, resampling, figures) with ``extra.timing`` (wall seconds of each
run, the stderr check, the agreement) -- the file the README's demo line and docs/results.md quote.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/demo_timing.py [--runs 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from _common import RESULTS, ROOT, emit, log, usage_error


def demo_command() -> list[str]:
    """The ``personalign compare`` line of ``make -n demo`` (set-up already done), as argv."""
    out = subprocess.run(["make", "-n", "-s", "demo"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in out.splitlines() if "personalign compare" in ln]
    if len(lines) != 1 or "pip install" in out:
        usage_error("make -n demo does not show exactly one `personalign compare` line (run `make setup` first)")
    return shlex.split(lines[0])


def _not_progress(stderr: str) -> list[str]:
    """The non-blank stderr lines that are not a progress bar (rich draws a bar with a done/total
    count): warnings, log lines, tracebacks. Empty when the run printed nothing else."""
    lines = [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.strip()]
    return [ln for ln in lines if not (("%" in ln or "/" in ln) and ("━" in ln or "─" in ln or "╸" in ln))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    if args.runs < 1:
        usage_error("--runs must be at least 1")
    argv = demo_command()
    runs = []
    with tempfile.TemporaryDirectory(prefix="personalign-demo-") as tmp:
        for i in range(args.runs):
            env = {k: v for k, v in os.environ.items() if k not in ("DSPY_CACHEDIR", "PERSONALIGN_CACHE_DIR")}
            env["PERSONALIGN_RUNS_DIR"] = str(Path(tmp) / f"runs{i}")
            out = Path(tmp) / f"demo{i}.json"
            t0 = time.perf_counter()
            p = subprocess.run([*argv, "--results", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
            secs = time.perf_counter() - t0
            log(f"run {i + 1}: exit {p.returncode}, {secs:.0f} s")
            if p.returncode != 0:
                log(p.stderr[-2000:])
                raise SystemExit(f"error: demo run {i + 1} exited {p.returncode}")
            other = _not_progress(p.stderr)
            runs.append({"seconds": round(secs, 1), "stderr_progress_only": not other, "stderr_other": other[:20],
                         "stdout": p.stdout, "record": json.loads(out.read_text())})
    values = [{f["key"]: f["value"] for f in r["record"]["figures"]} for r in runs]
    identical = all(v == values[0] for v in values[1:])
    # written as demo<i>.json above; the command that reproduces this file is this script's
    record = {**runs[0]["record"], "name": "demo", "command": f"python benchmarks/demo_timing.py --runs {args.runs}"}
    record["extra"]["demo_command"] = "make demo: " + shlex.join(argv)
    # keys unique across the results page: the demo's own namespace (relevance.lopo.* is the shared data's)
    record["figures"] = [*({**f, "key": f"demo.{f['key']}"} for f in record["figures"]), *(
        {"key": f"demo.run{i + 1}.wall_seconds", "label": f"wall time of fresh run {i + 1}", "strategy": None,
         "metric": "seconds", "value": r["seconds"], "ci": None, "n": None,
         "note": "the whole compare process, fresh runs folder and cache; model already in the user cache"}
        for i, r in enumerate(runs))]
    record["extra"]["timing"] = {
        "timed_by": "benchmarks/demo_timing.py", "runs": len(runs), "wall_seconds": [r["seconds"] for r in runs],
        "fresh_runs_dir_and_cache": True, "figures_identical_across_runs": identical,
        "stderr_progress_only": [r["stderr_progress_only"] for r in runs],
        "stderr_other_lines": [r["stderr_other"] for r in runs],
        "differing_figures": sorted({k for v in values[1:] for k in v if v[k] != values[0].get(k)}),
    }
    record["extra"]["printed"] = runs[0]["stdout"]
    from personalign.record import write_record

    write_record(RESULTS / "demo.json", record)
    emit({"name": "demo", "wall_seconds": record["extra"]["timing"]["wall_seconds"], "identical": identical,
          "stderr_progress_only": record["extra"]["timing"]["stderr_progress_only"]})


if __name__ == "__main__":
    main()
