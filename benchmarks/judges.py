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

Every figure has a 95% percentile-bootstrap CI over pairs; ``usable`` = the lower bounds of the
kappa CI and the accuracy CI clear chance (> 0 and > 0.5; pairwise: after debiasing). Other benchmarks refuse to score with a judge that is not
usable (:func:`personalign.judge_validation.require_usable`).

Usage: ``python benchmarks/judges.py [--lm local/qwen2.5-coder-1.5b-instruct] [--split val]
[--limit N] [--judges violation,pairwise] [--pairwise-strategy pairwise-expected] [--n-boot 1000]
[--seed 0] [--data PATH]``. ``--limit N``: a seeded sample of N val questions stratified by topic
(default: the whole split). Cost: 4 LM calls per question. The DSPy cache is disabled so every
call reaches the model. A bad ``--data`` prints one ``error:`` line and exits 2.
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lm", default=default_model(), help="model (default: the embedded default, or PERSONALIGN_LM)")
    ap.add_argument("--data", default=None, help="PrefEval root (default ../shared/data/prefeval)")
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int, default=None,
                    help="a seeded random sample of N questions stratified by topic (default: all of the split)")
    ap.add_argument("--judges", default="violation,pairwise")
    ap.add_argument("--pairwise-strategy", default="pairwise-expected",
                    help="judge-stage strategy validated as the pairwise judge (pairwise-expected, pairwise, ...)")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    quiet_logs()
    warnings.filterwarnings("ignore")
    from personalign.lm import configure_cache, make_lm
    from personalign.judge_validation import validate_judges

    def work(root):
        t0 = time.perf_counter()
        configure_cache(enabled=False)
        lm = make_lm(args.lm, cache=False)
        out = validate_judges(root, split=args.split, limit=args.limit, lm=lm,
                              judges=[j.strip() for j in args.judges.split(",") if j.strip()],
                              pairwise_strategy=args.pairwise_strategy, n_boot=args.n_boot, seed=args.seed)
        return {"benchmark": "judges", "lm": args.lm, "limit": args.limit, "n_boot": args.n_boot,
                "labels": "PrefEval mcq_options: first option follows the preference, the other three violate it",
                **out, "seconds": round(time.perf_counter() - t0, 2)}

    return run_on_prefeval("judges", args.data, work)


if __name__ == "__main__":
    sys.exit(main())
