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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import personalign  # noqa: E402

from _common import emit, log, quiet_logs, write_results  # noqa: E402

EXAMPLE = ROOT / "examples" / "own_task"


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
    resampling = None
    for label, ref, strategies in runs:
        log(f"compare {label}: {strategies}")
        res = personalign.compare(ref, strategies, data, split=args.split, lm=args.lm, n_boot=args.n_boot)
        for row in res.rows:
            key = f"own_task.{args.split}.{row['name']}.f1"
            if any(f["key"] == key for f in figures):
                continue
            vs = row.get("vs_first")
            rng = row.get("f1_range")  # below 5 clusters: the range of per-cluster figures, no CI
            notes = [f"per-cluster range [{rng[0]:.3f}, {rng[1]:.3f}] (too few clusters for a CI)"
                     if rng and not row.get("f1_ci") else None,
                     f"vs {vs['against']}: diff {vs['diff']['diff']:+.3f}, McNemar p {vs['mcnemar']['p_value']:.3g} "
                     "(item-level)" if vs and vs.get("mcnemar") else None]
            resampling = resampling or row.get("resampling")
            figures.append({"key": key, "label": f"option-follows {row['name']} ({label})",
                            "strategy": None if row["name"] == "word-overlap" else row["name"],  # my_task.py's
                            "metric": "f1", "value": row["f1"], "ci": row.get("f1_ci"), "n": res["n"],
                            "note": "; ".join(n for n in notes if n) or None})
            rows_out[row["name"]] = {k: row.get(k) for k in ("precision", "recall", "yes_rate", "seconds",
                                                            "lm_calls")}
    record = write_results(
        "own-task", figures, title="A user's own stage (option-follows): strategies it gets from its signature",
        command="python benchmarks/own_task.py " + " ".join(sys.argv[1:]), model=args.lm,
        data=data.relative_to(ROOT), data_sha256=file_sha256(data),
        resampling=resampling,
        stage="examples/own_task/stage.toml", extra={"split": args.split, "rows": rows_out})
    emit(record)


if __name__ == "__main__":
    main()
