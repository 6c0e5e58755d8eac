"""LM-free strategies of three stages on their val splits, written as run records.

    python benchmarks/lm_free.py [--stages relevance,verification,mcq] [--n-boot 1000] [--out benchmarks/results]

For each stage, ``personalign.compare`` fits every trainable strategy on train
(never on val) and scores every strategy on val; the figures (the stage's main metric with its
95% interval, and the paired difference against the stage's baseline, the first strategy) go to
``benchmarks/results/<stage>-lm-free.json`` in the run-record format
(:mod:`benchmarks.report`). No LLM is loaded: these strategies use MiniLM features, BM25 or none.

Single-split figures, labelled as such: the intervals resample val items, so they are too narrow
when items are correlated within a prompt or topic (the figures issue adds cluster intervals and
leave-one-group-out evaluation). Data: the shared human-labelled files, read in place; a stage
whose data is absent is skipped with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from _common import ROOT, log, quiet_logs, shared_data, usage_error  # noqa: E402  (puts ROOT on sys.path)

from personalign.record import figure, run_record, write_record  # noqa: E402

SETUPS = {
    # stage: (data path under shared data, LM-free strategies, the first is the baseline)
    "relevance": ("recenter_relevance/relevance_labels.jsonl",
                  "all-yes,bm25,minilm-cosine,minilm-logreg,minilm-rank,style-rank"),
    "verification": ("prefeval", "minilm-maxsim,minilm-logreg"),
    "mcq": ("prefeval", "random,minilm-preference"),
}
TITLES = {
    "relevance": "Relevance, LM-free strategies, one val split (recenter relevance labels)",
    "verification": "Verification, LM-free strategies, val topics (PrefEval-derived pairs)",
    "mcq": "MCQ, LM-free strategies, val topics (PrefEval classification task)",
}


def record_for(stage: str, result: dict, data: Path, n_boot: int) -> dict:
    """The run record of one ``personalign.compare`` result."""
    metric = result["metric"]
    figures = []
    for row in result["strategies"]:
        name = row["name"]
        figures.append(figure(f"{stage}.val.{name}.{metric}", f"{metric} on val", row[metric], metric=metric,
                              strategy=name, ci=row.get(f"{metric}_ci"), n=row["n"],
                              note=None if result["objective"] == metric else
                              f"objective {result['objective']} = {row['objective']:.3f}"))
        vs = row.get("vs_first")
        if vs:
            diff = vs["diff"]
            mc = vs.get("mcnemar") or {}
            p = mc.get("p_value")
            figures.append(figure(f"{stage}.val.{name}.{metric}_diff_vs_{vs['against']}",
                                  f"paired {metric} difference vs {vs['against']}", diff["diff"],
                                  metric=f"{metric} difference", strategy=name, ci=diff.get("ci"), n=row["n"],
                                  note=None if p is None else f"McNemar exact p = {p:.3g} (item-level)"))
    command = shlex.join(["python", "benchmarks/lm_free.py", "--stages", stage, "--n-boot", str(n_boot)])
    return run_record(f"{stage}-lm-free", figures, title=TITLES[stage], command=command, model=None,
                      data=data, data_sha256=result.get("data_sha256"),
                      resampling={"unit": "item", "n_clusters": result["n"], "n_boot": n_boot}, stage=stage,
                      extra={"split": result["split"], "train_split": result["train_split"], "n": result["n"],
                             "n_train": result["n_train"], "seed": result["seed"],
                             "gold_yes_rate": result.get("gold_yes_rate"),
                             "seconds": {r["name"]: r["seconds"] for r in result["strategies"]}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", default=",".join(SETUPS))
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in SETUPS]
    if unknown or not stages:
        usage_error(f"--stages: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(SETUPS)}")
    if args.n_boot < 1:
        usage_error("--n-boot must be >= 1")
    quiet_logs()
    import personalign

    written = []
    for stage in stages:
        rel, strategies = SETUPS[stage]
        data = shared_data() / rel
        if not data.exists():
            log(f"{stage}: skipped, {data} not found")
            continue
        log(f"{stage}: {strategies} on {data}")
        result = personalign.compare(stage, strategies, data, split="val", seed=args.seed,
                                     n_boot=args.n_boot).to_dict()
        record = record_for(stage, result, Path("../shared/data") / rel, args.n_boot)
        path = args.out / f"{record['name']}.json"
        write_record(path, record)
        written.append(str(path))
        log(f"{stage}: wrote {path}")
    print(json.dumps({"benchmark": "lm_free", "written": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
