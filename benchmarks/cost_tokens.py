"""The cost line's projected tokens and dollars against what a served model reports: ``personalign
compare relevance --strategies zero-shot --lm openai/gpt-4o-mini --api-base URL --no-cache --json
--limit N`` against the loopback server (``personalign.testing.openai_server``: a real
OpenAI-compatible HTTP server on 127.0.0.1 whose ``usage`` counts tokens with tiktoken's cl100k,
the copy litellm bundles). ``openai/gpt-4o-mini`` is a model string litellm's bundled price map
prices, so the dollars are what those tokens would cost there.

Two runs, in turn, on one fresh cache directory, the cache off:

1. **first**: no speed known, so the output is projected at its bound (``max_tokens`` per call);
2. **again**: the output at the mean the first run measured (kept in ``speed.json``).

Figures: projected / reported input tokens, projected / reported output tokens (bound, then
measured), projected and spent dollars. "Reported" is the ``usage`` of the server's responses to
the run's calls (the run's ``spent_*``); the server's own totals, the capability check's requests
included, are kept in ``extra``.

Usage: ``python benchmarks/cost_tokens.py [--limit 48] [--no-write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, emit, log, shared_data, usage_error, write_results

PY = sys.executable
MODEL = "openai/gpt-4o-mini"


def _server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([PY, "-m", "personalign.testing.openai_server", "--latency", "0", "--max-lifetime", "900"],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    return proc, json.loads(proc.stdout.readline())["api_base"]


def _stop(proc: subprocess.Popen) -> dict:
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    lines = [line for line in out.splitlines() if line.strip()]
    return {k: v for k, v in json.loads(lines[-1]).items() if k != "timeline"} if lines else {}


def _compare(api_base: str, data: Path, limit: int, runs: str) -> tuple[dict, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PERSONALIGN_RUNS_DIR=runs,
               PERSONALIGN_CACHE_DIR=str(Path(runs) / "cache"))
    cmd = [PY, "-m", "personalign", "compare", "relevance", "--data", str(data), "--strategies", "zero-shot",
           "--lm", MODEL, "--api-base", api_base, "--no-cache", "--no-track", "--json", "--limit", str(limit),
           "--n-boot", "200"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({proc.returncode}): {proc.stderr[-1500:]}")
    line = next(x for x in proc.stderr.splitlines() if x.startswith("cost:"))
    return json.loads(proc.stdout), line


def _measure(result: dict) -> dict:
    projected = next(s for s in result["projected_lm_calls"]["strategies"] if s["name"] == "zero-shot")
    row = next(r for r in result["strategies"] if r["name"] == "zero-shot")
    return {"calls": row["lm_calls"], "projected_input": projected["input_tokens"],
            "projected_output": projected["output_tokens"], "projected_dollars": projected["dollars"],
            "reported_input": row["spent_input_tokens"], "reported_output": row["spent_output_tokens"],
            "spent_dollars": row["spent_dollars"]}


def _fig(key: str, label: str, value: float, metric: str, n: int) -> dict:
    from personalign.record import figure

    return figure(f"cost.{key}", label, float(value), metric=metric, n=n, strategy="zero-shot")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=48)
    ap.add_argument("--no-write", action="store_true", help="Print the object; write no results file.")
    args = ap.parse_args(argv)
    if args.limit < 1:
        usage_error("--limit must be positive")
    data = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    if not data.is_file():
        emit({"benchmark": "cost_tokens", "skipped": f"relevance labels not found at {data}"})
        return 0
    runs = tempfile.mkdtemp(prefix="cost-tokens-")
    proc, api_base = _server()
    try:
        log("first run: output projected at max_tokens")
        first, line1 = _compare(api_base, data, args.limit, runs)
        log("second run: output projected at the first run's measured mean")
        again, line2 = _compare(api_base, data, args.limit, runs)
    finally:
        server = _stop(proc)
    a, b = _measure(first), _measure(again)
    n = a["calls"]
    figures = [
        _fig("input_ratio", "projected / reported input tokens (5 rendered prompts counted by litellm's token_counter)",
             a["projected_input"] / a["reported_input"], "ratio", n),
        _fig("projected_input_tokens", "projected input tokens", a["projected_input"], "tokens", n),
        _fig("reported_input_tokens", "input tokens the server reported (usage)", a["reported_input"], "tokens", n),
        _fig("output_ratio_bound", "projected / reported output tokens, first run (max_tokens per call: a bound)",
             a["projected_output"] / a["reported_output"], "ratio", n),
        _fig("output_ratio_measured", "projected / reported output tokens, second run (the measured mean per call)",
             b["projected_output"] / b["reported_output"], "ratio", n),
        _fig("projected_dollars_bound", f"projected dollars, first run ({MODEL}, litellm's bundled price map)",
             a["projected_dollars"], "dollars", n),
        _fig("projected_dollars_measured", "projected dollars, second run (output at the measured mean)",
             b["projected_dollars"], "dollars", n),
        _fig("spent_dollars", "dollars spent (the responses' usage at the same prices)", a["spent_dollars"], "dollars",
             n),
        _fig("dollars_ratio_measured", "projected / spent dollars, second run", b["projected_dollars"] /
             b["spent_dollars"], "ratio", n),
    ]
    extra = {"first": a, "again": b, "cost_lines": [line1, line2], "server": server, "limit": args.limit,
             "spent": first["spent"], "projected": {k: first["projected_lm_calls"][k] for k in
                                                    ("input_tokens", "output_tokens", "dollars", "priced")}}
    for f in figures:
        log(f"{f['key']}: {f['value']:.6g}")
    command = "python benchmarks/cost_tokens.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.no_write:
        emit({"benchmark": "cost_tokens", "figures": figures, "extra": extra})
        return 0
    from personalign.data.digest import file_sha256

    record = write_results("cost-tokens", figures, title="the cost line's tokens and dollars against a served "
                           "model's usage (loopback server)", command=command.strip(),
                           model=f"{MODEL} (loopback server, cl100k usage)", data=str(data),
                           data_sha256=file_sha256(data), stage="relevance", extra=extra,
                           measures=["personalign/lm/spend.py", "personalign/lm/prices.py",
                                     "personalign/_verbs/cost.py", "personalign/_verbs/projection.py",
                                     "personalign/testing/_openai_reply.py"])
    emit(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
