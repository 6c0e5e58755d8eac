"""Leave-one-prompt-out figures of the relevance strategies on the shared human labels.

``compare relevance --cv groups`` (``personalign.compare(..., cv="groups")``) on every labelled row of
``../shared/data/recenter_relevance/relevance_labels.jsonl`` (all splits pooled; 4 prompts): each
strategy is fitted or compiled on three prompts and scored on the fourth. Headline: the mean of
the per-prompt F1s; beside it the F1 of the pooled out-of-prompt predictions and the worst prompt.
With 4 prompts there is no percentile interval: the per-prompt range is reported, and the
smallest reachable sign-flip p is 2 / 2^4 = 0.125.

Writes ``benchmarks/results/<--name>.json`` (run-record format, rewritten after every strategy
with ``extra.complete`` false until the end: ``--partial`` results of a long run survive an
interruption) and prints the JSON object on stdout.

Usage: ``python benchmarks/relevance_lopo.py [--strategies all-yes,bm25,...] [--name relevance-lopo-lmfree]
[--lm MODEL] [--n-boot 1000] [--data FILE]``. LLM strategies: run under
``flock /tmp/personalign-model.lock`` (one model job on the machine at a time).
``--rerender``: rebuild the figures of ``benchmarks/results/<--name>.json`` from the per-strategy
rows it stores (``extra.strategies``) with the current figure keys and labels; nothing is re-run,
the run's command, commit and date are kept and ``extra.rerendered`` says so.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from _common import compare_groups, emit, log, quiet_logs, shared_data, usage_error, write_cv_results

LM_FREE = "all-yes,bm25,minilm-cosine,minilm-logreg,minilm-rank,style-rank"


def rerender(name: str) -> int:
    """Rewrite the figures of ``benchmarks/results/<name>.json`` from its stored rows (see the module docstring)."""
    import json
    from datetime import datetime, timezone

    from _common import RESULTS
    from personalign.results import result_figures
    from personalign.record import write_record

    path = RESULTS / f"{name}.json"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        ex = old["extra"]
        result = {"stage": old["stage"], "cv": "groups", "group_key": old["resampling"]["unit"],
                  "n_groups": old["resampling"]["n_clusters"], "strategies": ex["strategies"],
                  "n": next(f["n"] for f in old["figures"] if f["key"].endswith("_pooled"))}
        figures = result_figures(result)
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        usage_error(f"--rerender {path}: not a leave-one-group-out results file ({type(exc).__name__}: {exc})")
    def values(figs):
        return sorted(json.dumps([f["value"], f["ci"]]) for f in figs)

    if values(figures) != values(old["figures"]):
        usage_error(f"--rerender {path}: the stored rows do not give the file's figures; re-run instead")
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    record = {**old, "figures": figures,
              "extra": {**ex, "rerendered": f"{stamp}: figure keys and labels rebuilt from extra.strategies by "
                                            "`python benchmarks/relevance_lopo.py --rerender`; values unchanged, "
                                            "nothing re-run"}}
    write_record(path, record)
    log(f"{len(figures)} figures rewritten in {path}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--strategies", default=LM_FREE)
    ap.add_argument("--name", default="relevance-lopo-lmfree")
    ap.add_argument("--lm", default=None)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rerender", action="store_true", help="rebuild the figures of --name's file; run nothing")
    args = ap.parse_args(argv)
    if args.rerender:
        return rerender(args.name)
    if args.n_boot < 1:
        usage_error(f"--n-boot must be >= 1, got {args.n_boot}")
    data = args.data or str(shared_data() / "recenter_relevance" / "relevance_labels.jsonl")
    quiet_logs()
    from personalign.errors import PersonalignError
    from personalign.lm import configure_cache

    command = shlex.join(["python", "benchmarks/relevance_lopo.py", *(argv if argv is not None else sys.argv[1:])])

    def save(result: dict) -> None:
        write_cv_results(args.name, result, title="relevance: leave-one-prompt-out on the shared labels", command=command, stage="relevance")

    try:
        configure_cache(None, enabled=True)
        result = compare_groups("relevance", args.strategies, data, save=save, lm=args.lm, seed=args.seed,
                                n_boot=args.n_boot, progress=sys.stderr.isatty())
    except PersonalignError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    save(result)
    emit({"benchmark": "relevance_lopo", "result": f"benchmarks/results/{args.name}.json",
          "strategies": [{"name": r["name"], "mean_prompt_f1": r["headline"]["value"],
                          "range": r["headline"]["range"], "pooled_f1": r["pooled"]["value"],
                          "worst": r["worst"]} for r in result["strategies"]]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
