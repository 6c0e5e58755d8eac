"""The own-task example end to end through the four verbs: LM-free strategies of a user's stage.

Stage: ``examples/own_task/stage.toml`` (option-follows) and ``examples/own_task/my_task.py:STAGE``
(the same, with the user's LM-free ``word-overlap`` strategy). Data: the example's 60 rows written
for this project; strategies are fitted on train (36 rows, 6 topics; thresholds by grouped CV over
topics) and scored on ``--split`` (default test: 12 rows, 2 topics). With ``--lm`` (an embedded
model, e.g. local/qwen2.5-coder-0.5b-instruct; run under flock) ``yes-prob`` is added.

Writes ``benchmarks/results/own-task.json`` (run-record format: F1 per strategy with its 95%
percentile-bootstrap CI over the split's rows, n_boot resamples, seed 0) and prints it.

Usage: ``python benchmarks/own_task.py [--split test] [--n-boot 1000] [--lm MODEL]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import personalign  # noqa: E402

from _common import emit, log, quiet_logs  # noqa: E402

EXAMPLE = ROOT / "examples" / "own_task"


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name, dist in (("personalign", "personalign"), ("dspy", "dspy"), ("optuna", "optuna"),
                       ("mlflow", "mlflow"), ("litellm", "litellm"), ("llama_cpp_python", "llama-cpp-python")):
        try:
            out[name] = version(dist)
        except PackageNotFoundError:
            out[name] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="test")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--lm", default=None)
    args = ap.parse_args()
    quiet_logs()
    from personalign.data.digest import file_sha256

    data = EXAMPLE / "data.jsonl"
    figures = []
    runs = [("stage.toml", str(EXAMPLE / "stage.toml"), "majority,minilm-logreg" + (",yes-prob" if args.lm else "")),
            ("my_task.py", f"{EXAMPLE / 'my_task.py'}:STAGE", "majority,word-overlap")]
    rows_out = {}
    for label, ref, strategies in runs:
        log(f"compare {label}: {strategies}")
        res = personalign.compare(ref, strategies, data, split=args.split, lm=args.lm, n_boot=args.n_boot)
        for row in res.rows:
            key = f"own_task.{args.split}.{row['name']}.f1"
            if any(f["key"] == key for f in figures):
                continue
            vs = row.get("vs_first")
            figures.append({"key": key, "label": f"option-follows {row['name']} ({label})", "strategy": None if row["name"] == "word-overlap" else row["name"],  # my_task.py's, not the stage file's
                            "metric": "f1", "value": row["f1"], "ci": row["f1_ci"], "n": res["n"],
                            "note": None if not vs else
                            f"vs {vs['against']}: diff {vs['diff']['diff']:+.3f} CI {vs['diff']['ci']}, "
                            f"McNemar p {vs['mcnemar']['p_value']:.3g}" if vs.get("mcnemar") else None})
            rows_out[row["name"]] = {k: row.get(k) for k in ("precision", "recall", "yes_rate", "seconds",
                                                            "lm_calls")}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    record = {
        "name": "own-task", "title": "A user's own stage (option-follows): strategies it gets from its signature",
        "command": "python benchmarks/own_task.py " + " ".join(sys.argv[1:]), "git_commit": commit or None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()}, "versions": _versions(),
        "model": {"name": args.lm, "sha256": None}, "adapter": None, "sampler": None,
        "data": {"path": str(data.relative_to(ROOT)), "sha256": file_sha256(data)},
        "resampling": {"unit": "row", "n_clusters": figures[0]["n"] if figures else 0, "n_boot": args.n_boot},
        "stage": "examples/own_task/stage.toml", "figures": figures, "extra": {"split": args.split, "rows": rows_out},
    }
    out = ROOT / "benchmarks" / "results" / "own_task.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(out)
    emit(record)


if __name__ == "__main__":
    main()
