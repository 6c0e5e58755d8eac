"""The seed study's pipeline end to end on PrefEval; prints one JSON object.

From a PrefEval persona-driven conversation alone: extract → verify → select the attributes
relevant to the new question → answer the PrefEval MCQ (``extracted-attributes``), against
controls on the same questions: ``no-profile``, ``gold-preference`` (the stated preference),
``random-attribute`` (attributes of users of other topics) and ``verified-all`` (no selection).
Per condition: MCQ accuracy with a 95% bootstrap CI, the paired bootstrap difference vs
no-profile with its CI (and McNemar's exact p), LM calls and seconds per question (the pipeline's
include its extract / verify / select steps, reported one by one under ``steps``); ``gap_closed`` =
(pipeline − no-profile) / (gold − no-profile). See :mod:`personalign.runners.pipeline`.

Usage: ``python benchmarks/pipeline.py [--lm local/qwen2.5-coder-1.5b-instruct] [--split val]
[--limit N] [--extractor first-person] [--verifier minilm-logreg] [--selector zero-shot]
[--conditions pipeline,verified-all,no-profile,gold-preference,random-attribute] [--n-boot 1000]
[--seed 0] [--data PATH] [--no-items]``. ``--limit N``: a seeded sample of N val questions
stratified by topic (default: the whole split, 203 questions). Cost with the LLM defaults: about
1 + 2·(attributes extracted) + 5 LM calls per question. The DSPy cache is disabled. A bad ``--data``
prints one ``error:`` line and exits 2; progress bars per step go to stderr. The same run as a command: ``personalign run pipeline DATA``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from _common import quiet_logs, run_on_prefeval

import personalign  # noqa: F401
from personalign.lm import default_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from personalign.runners.pipeline import CONDITIONS, DEFAULT_STEPS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lm", default=default_model(), help="model (default: the embedded default, or PERSONALIGN_LM)")
    ap.add_argument("--data", default=None, help="PrefEval root (default ../shared/data/prefeval)")
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int, default=None,
                    help="a seeded random sample of N questions stratified by topic (default: all of the split)")
    ap.add_argument("--extractor", default=DEFAULT_STEPS["extractor"])
    ap.add_argument("--verifier", default=DEFAULT_STEPS["verifier"])
    ap.add_argument("--selector", default=DEFAULT_STEPS["selector"])
    ap.add_argument("--selector-data", default=None, help="relevance labels to fit a trained --selector on")
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-items", action="store_true", help="leave out the per-question records")
    args = ap.parse_args(argv)
    quiet_logs()
    warnings.filterwarnings("ignore")
    from personalign.lm import configure_cache, make_lm
    from personalign.runners.pipeline import run_pipeline

    def work(root):
        t0 = time.perf_counter()
        configure_cache(enabled=False)
        lm = make_lm(args.lm, cache=False)
        out = run_pipeline(root, split=args.split, limit=args.limit, lm=lm, extractor=args.extractor,
                           verifier=args.verifier, selector=args.selector, selector_data=args.selector_data,
                           conditions=[c.strip() for c in args.conditions.split(",") if c.strip()],
                           n_boot=args.n_boot, seed=args.seed, keep_items=not args.no_items, progress=True)
        return {"benchmark": "pipeline", "lm": args.lm, "n_boot": args.n_boot, **out,
                "seconds": round(time.perf_counter() - t0, 2)}

    return run_on_prefeval("pipeline", args.data, work)


if __name__ == "__main__":
    sys.exit(main())
