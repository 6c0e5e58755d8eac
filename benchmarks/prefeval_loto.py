"""Leave-one-topic-out figures of the PrefEval-derived verification and violation stages.

``compare STAGE --cv groups`` (``personalign.compare(..., cv="groups")``) on every labelled row the stage builds
from ``../shared/data/prefeval`` (its ``group_key``: verification ``group``, violation ``topic``):
each strategy is fitted on all topics but one and scored on it. Headline: the mean per-topic F1
(with an interval over resampled topics from 5 topics on, else the per-topic range), the pooled
F1, the worst topic; each strategy after the first is compared with the first (the stage's best
current strategy by the caller's order) on the per-topic differences (sign-flip p, Holm).
``--limit N`` keeps a seeded sample of N rows stratified over the topics (LLM rows: at most 100
pairs per fold is the issue's budget).

Writes ``benchmarks/results/<--name>.json`` (run-record format; rewritten after every strategy,
``extra.complete`` false until the end) and prints one JSON object on stdout.

Usage: ``python benchmarks/prefeval_loto.py --stage verification [--strategies minilm-logreg,minilm-maxsim]
[--name verification-loto-lmfree] [--limit N] [--lm MODEL] [--n-boot 1000] [--data DIR]``. LLM strategies:
run under ``flock /tmp/personalign-model.lock``.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from _common import compare_groups, emit, quiet_logs, shared_data, usage_error, write_cv_results

LM_FREE = {"verification": "minilm-logreg,minilm-maxsim", "violation": "all-no"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", choices=sorted(LM_FREE), required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--strategies", default=None)
    ap.add_argument("--name", default=None)
    ap.add_argument("--lm", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.n_boot < 1:
        usage_error(f"--n-boot must be >= 1, got {args.n_boot}")
    if args.limit is not None and args.limit < 1:
        usage_error(f"--limit must be >= 1, got {args.limit}")
    data = args.data or str(shared_data() / "prefeval")
    name = args.name or f"{args.stage}-loto-lmfree"
    quiet_logs()
    from personalign.errors import PersonalignError
    from personalign.lm import configure_cache

    command = shlex.join(["python", "benchmarks/prefeval_loto.py", *(argv if argv is not None else sys.argv[1:])])

    def save(result: dict) -> None:
        write_cv_results(name, result, title=f"{args.stage}: leave-one-topic-out on the PrefEval-derived labels", command=command, stage=args.stage)

    try:
        configure_cache(None, enabled=True)
        result = compare_groups(args.stage, args.strategies or LM_FREE[args.stage], data, save=save, lm=args.lm, seed=args.seed,
                                n_boot=args.n_boot, limit=args.limit, progress=sys.stderr.isatty())
    except PersonalignError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    save(result)
    emit({"benchmark": "prefeval_loto", "stage": args.stage, "result": f"benchmarks/results/{name}.json",
          "strategies": [{"name": r["name"], "mean_topic_f1": r["headline"]["value"], "ci": r["headline"]["ci"],
                          "range": r["headline"]["range"], "pooled_f1": r["pooled"]["value"], "worst": r["worst"],
                          "vs_first": {k: (r.get("vs_first") or {}).get(k) for k in ("diff", "ci", "range")}}
                         for r in result["strategies"]]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
