"""Judges validated against labels people wrote; prints one JSON object.

Labels: PrefEval's MCQ options (its authors wrote them: the first option follows the stated
preference, the other three violate it). One labelled pair per val question -- the following
option and one seeded violating option, in a seeded A/B order
(:func:`personalign.judge_validation.labelled_pairs`).

* ``violation`` -- the typed violation judge (follows / violates) on both options of each pair:
  accuracy, Cohen's kappa (scikit-learn), violates-rate.
* ``pairwise`` -- the 1-5 pairwise judge (``--pairwise-strategy``, default ``pairwise-expected``: each order read as the expected 1-5 rating
  under the model's log-probabilities) on each
  pair in both orders; the following option should win: accuracy, kappa and the verdict flip
  rate when the order is swapped, **before** debiasing (the order shown) and **after** (both
  orders averaged).

``--compile OPTIMIZER`` first compiles each judge toward kappa through
:func:`personalign.compile_service.compile_program` on ``--compile-train`` train examples of its
stage (a seeded sample; dev = held-out train topics or questions; the uncompiled judge is kept
unless the compiled one has a higher dev objective): the violation judge as the ``violation``
stage (Cohen's kappa of follows / violates), the pairwise judge as the ``judge`` stage on
PrefEval's option labels (Cohen's kappa of its verdicts, the side of 3 its unrounded debiased score
falls on, against the labelled side). The chosen
program is validated here; ``<judge>.compile`` holds the compile summary, and when a compiled
program is chosen the uncompiled one is validated too (``<judge>_uncompiled``) on the same pairs.

Every figure has a 95% percentile-bootstrap CI over pairs; ``usable`` = the lower bounds of the
kappa CI and the accuracy CI clear chance (> 0 and > 0.5; pairwise: after debiasing). Other benchmarks refuse to score with a judge that is not
usable (:func:`personalign.judge_validation.require_usable`).

Usage: ``python benchmarks/judges.py [--lm local/qwen2.5-coder-1.5b-instruct] [--split val]
[--limit N] [--judges violation,pairwise] [--pairwise-strategy pairwise-expected] [--n-boot 1000]
[--seed 0] [--data PATH] [--compile labeled --compile-train 120]``. ``--limit N``: a seeded sample of N val questions stratified by topic
(default: the whole split). Cost: 4 LM calls per question. The DSPy cache is disabled so every
call reaches the model. A bad ``--data`` prints one ``error:`` line and exits 2.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from _common import quiet_logs, run_on_prefeval, usage_error

import personalign  # noqa: F401
from personalign.lm import default_model  # noqa: E402


COMPILED = {"violation": ("violation", "typed"), "pairwise": ("judge", None)}
"""judge -> (stage, strategy) compiled by --compile (None: --pairwise-strategy)."""


def _compile(judge, root, args, lm):
    """``judge`` compiled toward its stage's kappa objective on a train sample: ``(program, summary)``."""
    from personalign.compile_service import compile_program, summary
    from personalign.stages import resolve_stage as get_stage

    stage_name, strategy = COMPILED[judge]
    strategy = strategy or args.pairwise_strategy
    stage = get_stage(stage_name)
    train = stage.limit(stage.load(root, split="train"), args.compile_train, args.seed)
    t0 = time.perf_counter()
    print(f"compiling the {judge} judge ({stage_name}:{strategy}) with {args.compile} on {len(train)} train "
          "examples", file=sys.stderr)
    program, info = compile_program(stage, strategy, args.compile, train, lm=lm, seed=args.seed)
    return program, {**(summary(info) or {}), "stage": stage_name, "strategy": strategy, "optimizer": args.compile,
                     "n_train": len(train), "lm_calls": (info or {}).get("actual_lm_calls"),
                     "seconds": round(time.perf_counter() - t0, 2)}


def _check_args(args) -> None:
    """Every name in the flags, before any data or LM work: an unknown one is one ``error:`` line
    and exit 2."""
    from personalign.errors import ConfigurationError
    from personalign.optimizers import OPTIMIZERS
    from personalign.stages import resolve_stage as get_stage

    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    bad = [j for j in judges if j not in COMPILED]
    if bad or not judges:
        usage_error(f"unknown judge(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(COMPILED)}")
    try:
        get_stage("judge").registry.info(args.pairwise_strategy)
        if args.compile:
            OPTIMIZERS.info(args.compile)
    except ConfigurationError as exc:
        usage_error(str(exc))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lm", default=default_model(), help="model (default: the embedded default, or PERSONALIGN_LM)")
    ap.add_argument("--data", default=None, help="PrefEval root (default ../shared/data/prefeval)")
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int, default=None,
                    help="a seeded random sample of N questions stratified by topic (default: all of the split)")
    ap.add_argument("--judges", default="violation,pairwise")
    ap.add_argument("--pairwise-strategy", default="pairwise-expected",
                    help="judge-stage strategy validated as the pairwise judge (pairwise-expected, pairwise, ...)")
    ap.add_argument("--compile", default=None, metavar="OPTIMIZER",
                    help="compile each judge toward kappa with this teleprompter (e.g. labeled, bootstrap) first")
    ap.add_argument("--compile-train", type=int, default=120,
                    help="train examples for --compile: a seeded random sample stratified by topic")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    _check_args(args)
    quiet_logs()
    warnings.filterwarnings("ignore")
    from personalign.lm import configure_cache, make_lm
    from personalign.judge_validation import validate_judges

    def work(root):
        t0 = time.perf_counter()
        configure_cache(enabled=False)
        lm = make_lm(args.lm, cache=False)
        judges = [j.strip() for j in args.judges.split(",") if j.strip()]
        compiled = {j: _compile(j, root, args, lm) for j in judges if args.compile and j in COMPILED}
        out = validate_judges(root, split=args.split, limit=args.limit, lm=lm, judges=judges,
                              pairwise_strategy=args.pairwise_strategy, n_boot=args.n_boot, seed=args.seed,
                              violation_judge=compiled.get("violation", (None,))[0],
                              pairwise_judge=compiled.get("pairwise", (None,))[0])
        for j, (_, info) in compiled.items():
            out[j]["compile"] = info
            if info.get("chosen") != "uncompiled":  # the program it was given, on the same pairs
                out[f"{j}_uncompiled"] = validate_judges(
                    root, split=args.split, limit=args.limit, lm=lm, judges=[j], n_boot=args.n_boot,
                    pairwise_strategy=args.pairwise_strategy, seed=args.seed)[j]
        return {"benchmark": "judges", "lm": args.lm, "limit": args.limit, "n_boot": args.n_boot,
                "labels": "PrefEval mcq_options: first option follows the preference, the other three violate it",
                **out, "seconds": round(time.perf_counter() - t0, 2)}

    return run_on_prefeval("judges", args.data, work)


if __name__ == "__main__":
    sys.exit(main())
