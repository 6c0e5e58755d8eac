"""personalign against a hosted-like model, side by side with plain DSPy on the same rows and the
same loopback server (``personalign.testing.openai_server``: a real OpenAI-compatible HTTP server
on 127.0.0.1 answering every chat request after ``--latency`` seconds). Prints one JSON object and
writes ``benchmarks/results/hosted-throughput.json``.

Sections (``--only`` picks some; all by default):

* ``eval``: ``personalign compare relevance --strategies zero-shot --lm openai/mock --api-base URL
  --no-cache`` on ``--limit`` relevance val rows against plain DSPy's ``dspy.Evaluate`` (its
  default ``num_threads``) of ``dspy.Predict`` on the same signature and rows
  (``benchmarks/_hosted_dspy.py``), in turn, ``--runs`` pairs: the evaluation's wall time, the
  whole process's, and the latency floor (calls x latency / concurrency);
* ``limits``: the same compare against a server that answers 429 (``Retry-After``) beyond
  ``--limit-in-flight`` requests in flight: failures, requests refused, and the throughput as a
  share of limit / latency;
* ``identical``: the compare at ``--concurrency 1`` and ``32``: the same predictions and figures;
* ``compile``: ``personalign compile relevance --strategy zero-shot --optimizer bootstrap`` against
  plain DSPy's ``BootstrapFewShot`` with its defaults on the same training rows (whole processes).

Usage: ``python benchmarks/hosted_throughput.py [--latency 0.5] [--limit 192] [--runs 3] [--only eval,limits]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, log, shared_data, usage_error, write_results

PY = sys.executable


class Server:
    """``python -m personalign.testing.openai_server`` in a process of its own."""

    def __init__(self, latency: float, **opts) -> None:
        cmd = [PY, "-m", "personalign.testing.openai_server", "--latency", str(latency), "--max-lifetime", "3600",
               "--max-requests", "200000"]
        for k, v in opts.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
        self.api_base = json.loads(self.proc.stdout.readline())["api_base"]

    def stop(self) -> dict:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        lines = [line for line in out.splitlines() if line.strip()]
        return json.loads(lines[-1]) if lines else {}


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.setdefault("PERSONALIGN_RUNS_DIR", tempfile.mkdtemp(prefix="hosted-runs-"))
    return env


def _timed(cmd: list[str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=3000)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {proc.stderr[-1500:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def _compare(api_base: str, data: Path, limit: int, *extra: str, track: bool = False) -> list[str]:
    return [PY, "-m", "personalign", "compare", "relevance", "--data", str(data), "--split", "val", "--limit",
            str(limit), "--strategies", "zero-shot", "--lm", "openai/mock", "--api-base", api_base, "--no-cache",
            *([] if track else ["--no-track"]), "--json", "--n-boot", "200", *extra]


def _row(result: dict) -> dict:
    return next(r for r in result["strategies"] if r["name"] == "zero-shot")


def eval_section(srv: Server, data: Path, limit: int, latency: float, runs: int) -> tuple[list, dict]:
    ours, theirs, ours_eval, theirs_eval, ratios_eval, ratios_proc = [], [], [], [], [], []
    dspy_cmd = [PY, str(ROOT / "benchmarks" / "_hosted_dspy.py"), "--api-base", srv.api_base, "--data", str(data),
                "--split", "val", "--limit", str(limit)]
    for k in range(runs):
        wall_a, res_a = _timed(_compare(srv.api_base, data, limit))
        wall_b, res_b = _timed(dspy_cmd)
        row = _row(res_a)
        ours.append(wall_a), theirs.append(wall_b)
        ours_eval.append(row["seconds"]), theirs_eval.append(res_b["evaluation_seconds"])
        ratios_eval.append(row["seconds"] / res_b["evaluation_seconds"]), ratios_proc.append(wall_a / wall_b)
        log(f"eval run {k + 1}: personalign eval {row['seconds']:.2f} s (process {wall_a:.1f} s), plain DSPy eval "
            f"{res_b['evaluation_seconds']:.2f} s (process {wall_b:.1f} s, {res_b['num_threads']} threads)")
    # the default: MLflow tracking on (a trace for each of the first PERSONALIGN_MAX_TRACES calls)
    tracked_wall, tracked = _timed(_compare(srv.api_base, data, limit, track=True))
    tracked_eval = _row(tracked)["seconds"]
    log(f"eval with MLflow tracking (the default): {tracked_eval:.2f} s (process {tracked_wall:.1f} s)")
    from personalign.lm.flight import HOSTED_CONCURRENCY

    calls = row["lm_calls"]
    floor = calls * latency / HOSTED_CONCURRENCY
    med = statistics.median
    figures = [
        _fig("eval.personalign_seconds", "personalign compare: evaluation wall (s), median", med(ours_eval), "seconds", runs),
        _fig("eval.dspy_seconds", f"plain DSPy Evaluate (num_threads {res_b['num_threads']}): evaluation wall (s), median",
             med(theirs_eval), "seconds", runs),
        _fig("eval.ratio_vs_dspy", "personalign / plain DSPy evaluation wall, median of pairs (target <= 0.6)",
             med(ratios_eval), "ratio", runs),
        _fig("eval.ratio_vs_floor", f"personalign evaluation wall / latency floor ({calls} calls x {latency} s / "
             f"{HOSTED_CONCURRENCY}) (target <= 1.25)", med(ours_eval) / floor, "ratio", runs),
        _fig("process.personalign_seconds", "personalign compare: whole process (s), median", med(ours), "seconds", runs),
        _fig("process.dspy_seconds", "plain DSPy script: whole process (s), median", med(theirs), "seconds", runs),
        _fig("process.ratio_vs_dspy", "personalign / plain DSPy whole process, median of pairs (target <= 1.0)",
             med(ratios_proc), "ratio", runs),
        _fig("eval.lm_calls", "personalign model calls (evaluation)", calls, "calls", runs),
        _fig("eval.tracked_seconds", "personalign compare with MLflow tracking on (the default; traces of the "
             "first 50 calls): evaluation wall (s), one run", tracked_eval, "seconds", 1),
        _fig("eval.tracked_ratio", "evaluation wall tracked / untracked median (--no-track)",
             tracked_eval / med(ours_eval), "ratio", 1),
    ]
    return figures, {"personalign_f1": row["f1"], "personalign_yes_rate": row.get("yes_rate"),
                     "dspy_accuracy": res_b["score"], "floor_seconds": floor}


def limits_section(data: Path, limit: int, latency: float, in_flight: int) -> tuple[list, dict]:
    srv = Server(latency, max_in_flight=in_flight, retry_after=latency)
    try:
        wall, res = _timed(_compare(srv.api_base, data, limit))
    finally:
        stats = srv.stop()
    row = _row(res)
    throughput = row["lm_calls"] / row["seconds"]
    ceiling = in_flight / latency
    log(f"limits: {row['failures']} failures, {stats.get('rate_limited')} requests refused (429), "
        f"{throughput:.1f} calls/s of {ceiling:.1f}")
    return [
        _fig("limits.failures", f"failures against a server answering 429 beyond {in_flight} in flight", row["failures"],
             "count", 1),
        _fig("limits.rate_limited", "requests the server refused (429)", stats.get("rate_limited", 0), "count", 1),
        _fig("limits.throughput_share", f"calls per second / ({in_flight} / {latency} s) (target >= 0.8)",
             throughput / ceiling, "ratio", 1),
        _fig("limits.max_in_flight", "most requests the server served at once", stats.get("max_in_flight", 0), "count", 1),
    ], {"server": {k: v for k, v in stats.items() if k != "timeline"}}


def identical_section(srv: Server, data: Path, limit: int) -> tuple[list, dict]:
    runs = {}
    for c in (1, 32):
        wall, res = _timed(_compare(srv.api_base, data, limit, "--concurrency", str(c)))
        row = _row(res)
        full = json.loads(Path(res["result_file"]).read_text())  # --json leaves the per-row arrays to the file
        runs[c] = {"predictions": _row(full)["predictions"], "f1": row["f1"], "f1_ci": row.get("f1_ci"),
                   "seconds": row["seconds"]}
        log(f"identical: concurrency {c}: f1 {row['f1']:.4f} in {row['seconds']:.1f} s")
    same = runs[1]["predictions"] == runs[32]["predictions"] and runs[1]["f1"] == runs[32]["f1"] \
        and runs[1]["f1_ci"] == runs[32]["f1_ci"]
    return [_fig("identical.same_figures", "predictions, F1 and its interval identical at --concurrency 1 and 32 (1 = yes)",
                 int(same), "boolean", 2),
            _fig("identical.speedup", "evaluation wall at 1 / at 32", runs[1]["seconds"] / runs[32]["seconds"],
                 "ratio", 2)], {"f1": {c: r["f1"] for c, r in runs.items()}}


def compile_section(srv: Server, data: Path, runs: int, train_limit: int) -> tuple[list, dict]:
    ours, theirs = [], []
    for k in range(runs):
        out = tempfile.mkdtemp(prefix="hosted-compile-")
        wall_a, _ = _timed([PY, "-m", "personalign", "compile", "relevance", "--data", str(data), "--strategy",
                            "zero-shot", "--optimizer", "bootstrap", "--lm", "openai/mock", "--api-base", srv.api_base,
                            "--no-cache", "--no-track", "--json", "--train-limit", str(train_limit), "--out",
                            str(Path(out) / "p")])
        wall_b, res_b = _timed([PY, str(ROOT / "benchmarks" / "_hosted_dspy.py"), "--api-base", srv.api_base,
                                "--data", str(data), "--split", "val", "--limit", "1", "--bootstrap",
                                "--train-limit", str(train_limit)])
        ours.append(wall_a), theirs.append(wall_b)
        log(f"compile run {k + 1}: personalign {wall_a:.1f} s, plain DSPy BootstrapFewShot {wall_b:.1f} s")
    med = statistics.median
    return [_fig("compile.personalign_seconds", "personalign compile zero-shot --optimizer bootstrap: whole process (s)",
                 med(ours), "seconds", runs),
            _fig("compile.dspy_seconds", "plain DSPy BootstrapFewShot (defaults): whole process (s)", med(theirs),
                 "seconds", runs),
            _fig("compile.ratio_vs_dspy", "personalign / plain DSPy compile, median (target <= 1.0)",
                 med([a / b for a, b in zip(ours, theirs)]), "ratio", runs)], {}


def _fig(key: str, label: str, value: float, metric: str, n: int) -> dict:
    from personalign.record import figure

    return figure(f"hosted.{key}", label, float(value), metric=metric, n=n)


SECTIONS = ("eval", "limits", "identical", "compile")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--limit", type=int, default=192)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit-in-flight", type=int, default=8)
    ap.add_argument("--train-limit", type=int, default=48)
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--no-write", action="store_true", help="Print the object; write no results file.")
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    if any(s not in SECTIONS for s in only) or args.latency <= 0 or args.limit < 1 or args.runs < 1:
        usage_error(f"--only takes {', '.join(SECTIONS)}; --latency, --limit and --runs must be positive")
    data = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    if not data.is_file():
        emit({"benchmark": "hosted_throughput", "skipped": f"relevance labels not found at {data}"})
        return 0
    figures, extra = [], {"latency_s": args.latency, "limit": args.limit, "runs": args.runs}
    srv = Server(args.latency)
    try:
        for name in only:
            log(f"section {name}")
            if name == "eval":
                f, e = eval_section(srv, data, args.limit, args.latency, args.runs)
            elif name == "limits":
                f, e = limits_section(data, args.limit, args.latency, args.limit_in_flight)
            elif name == "identical":
                f, e = identical_section(srv, data, args.limit)
            else:
                f, e = compile_section(srv, data, args.runs, args.train_limit)
            figures += f
            extra[name] = e
    finally:
        extra["server"] = {k: v for k, v in srv.stop().items() if k != "timeline"}
    from personalign.data.digest import file_sha256

    command = "python benchmarks/hosted_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.no_write:
        emit({"benchmark": "hosted_throughput", "figures": figures, "extra": extra})
        return 0
    record = write_results("hosted-throughput", figures, title="hosted and served models: calls in flight against "
                           "plain DSPy on a loopback server", command=command.strip(), model="openai/mock (loopback)",
                           data=str(data), data_sha256=file_sha256(data), stage="relevance", extra=extra)
    emit(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
