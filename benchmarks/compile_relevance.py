"""Compiled prompts vs zero-shot vs a learned selector on relevance (val); prints one JSON object.

On the evaluation split (default ``val``), side by side in one process and on the same examples:

* ``zero-shot`` -- the typed LLM judge as written (no compile);
* ``zero-shot@bootstrap`` -- compiled by DSPy's BootstrapFewShot (4 bootstrapped + labeled demos);
* ``zero-shot@mipro`` -- compiled by DSPy's MIPROv2, ``auto="light"`` (6 candidates, trials capped
  at 6: :class:`personalign.optimizers.mipro.MIPROv2` defaults), data-aware and tip-aware
  proposals; for the time budget its prompt model is the same LM with a
  ``--proposal-max-tokens`` output budget (default 128: an instruction fits, and the 135M model
  tends to run to the budget) and the program-aware proposer (two more long-prompt calls per
  instruction) is off unless ``--mipro-program-aware``. Proposals were the slowest part: ~8 of
  the 10 minutes of a first run with both on;
* ``minilm-logreg`` -- a learned selector (logistic regression on MiniLM features; no LM).

Per strategy: F1 with its 95% percentile-bootstrap CI, precision, recall, yes-rate, failures,
the paired-bootstrap F1 difference against zero-shot with its 95% CI and McNemar's exact p
(:func:`personalign.evaluation.paired_comparison`), LM calls of compile and of evaluation (DSPy's
cache disabled, so every call reaches the model), projected compile calls, and seconds.

Budget (so that the run fits ~15 min on 2 busy cores with the embedded model): the evaluation
split is a seeded random sample of ``--limit`` examples; teleprompters compile on at most
``--train-per-prompt`` examples of each training prompt (a seeded sample; the teleprompters'
dev set is then a whole held-out prompt of that sample, see
:func:`personalign.compare.dev_split`). The learned selector calls no LM and is fitted on the whole
train split, as ``personalign compare`` does.

Data: ``--data`` (default: the real human labels ``../shared/data/recenter_relevance/
relevance_labels.jsonl`` when present, else ``examples/relevance_demo.jsonl``). Model: ``--lm``
(default the embedded ``local/smollm2-135m-instruct``).

llama.cpp threads: unless set, the script sets ``OMP_WAIT_POLICY=PASSIVE`` before the model loads.
Measured here on 2 cores shared with other jobs (load ~8), 5 relevance calls took 59 s with
OpenMP's default active wait and 10 s with ``PASSIVE`` (or ``PERSONALIGN_THREADS=1``); on an idle
machine active wait is faster (see the README). The JSON records the setting (``env``).

Usage: ``python benchmarks/compile_relevance.py [--data PATH] [--limit 40] [--train-per-prompt 6]
[--strategies zero-shot,zero-shot@bootstrap,zero-shot@mipro,minilm-logreg] [--seed 0] [--n-boot 1000]``
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from collections import defaultdict

from _common import ROOT, emit, quiet_logs, shared_data

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before llama.cpp loads; see the docstring

import personalign  # noqa: E402,F401

DEFAULT_STRATEGIES = "zero-shot,zero-shot@bootstrap,zero-shot@mipro,minilm-logreg"
KEEP = ("f1", "f1_ci", "precision", "recall", "yes_rate", "accuracy", "failures", "lm_calls")


def default_data():
    real = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    return real if real.exists() else ROOT / "examples" / "relevance_demo.jsonl"


def cap_per_group(examples, per_group: int, key: str, label, seed: int) -> list:
    """A seeded sample of at most ``per_group`` examples of each group, stratified by ``label(ex)``
    (at least one positive per group when it has one); file order kept."""
    groups = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[getattr(ex, key, None)].append(i)
    rng = random.Random(seed)
    keep = set()
    for g in sorted(groups, key=str):
        idx = groups[g]
        if len(idx) <= per_group:
            keep.update(idx)
            continue
        pos = [i for i in idx if label(examples[i])]
        neg = [i for i in idx if not label(examples[i])]
        k_pos = min(len(pos), max(1 if pos else 0, round(per_group * len(pos) / len(idx))))
        keep.update(rng.sample(pos, k_pos) + rng.sample(neg, min(len(neg), per_group - k_pos)))
    return [ex for i, ex in enumerate(examples) if i in keep]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="relevance data file (default: real labels when present)")
    ap.add_argument("--split", default="val")
    ap.add_argument("--lm", default=None)
    ap.add_argument("--strategies", default=DEFAULT_STRATEGIES)
    ap.add_argument("--limit", type=int, default=40, help="evaluation examples (seeded sample); 0 = all")
    ap.add_argument("--train-per-prompt", type=int, default=6,
                    help="teleprompters compile on at most this many examples per training prompt; 0 = all")
    ap.add_argument("--proposal-max-tokens", type=int, default=128,
                    help="output budget of MIPROv2's instruction-proposal calls (0 = the task LM's)")
    ap.add_argument("--mipro-program-aware", action="store_true",
                    help="let MIPROv2's proposer describe the program first (2 more long-prompt calls per "
                         "instruction; off by default for the time budget)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=1000)
    args = ap.parse_args(argv)
    quiet_logs()
    logging.getLogger("dspy").setLevel(logging.ERROR)

    import contextlib

    from personalign.compare import compile_for_stage, file_sha256, parse_strategy_specs
    from personalign.evaluation import evaluate_stage, paired_comparison
    from personalign.lm import DEFAULT_MODEL, configure_cache, make_lm
    from personalign.stages import get_stage

    t_all = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    st = get_stage("relevance")
    data = args.data or default_data()
    examples = st.load(data)
    evalset = [ex for ex in examples if ex.split == args.split]
    n_split = len(evalset)
    if args.limit and args.limit < len(evalset):
        keep = set(random.Random(args.seed).sample(range(len(evalset)), args.limit))
        evalset = [ex for i, ex in enumerate(evalset) if i in keep]
    trainset = [ex for ex in examples if ex.split == "train"]
    positive = lambda ex: bool(st.is_positive(st.gold(ex)))  # noqa: E731
    tele_train = (cap_per_group(trainset, args.train_per_prompt, st.group_key, positive, args.seed)
                  if args.train_per_prompt else trainset)

    configure_cache(enabled=False)  # every LM call reaches the model: honest calls and seconds
    model = args.lm or DEFAULT_MODEL
    specs = parse_strategy_specs(args.strategies, DEFAULT_STRATEGIES, st.registry)
    lm = make_lm(model) if any(st.registry.info(n).uses_lm for n, _ in specs) else None

    rows, reports = [], []
    for base, opt in specs:
        name = f"{base}@{opt}" if opt else base
        info = st.registry.info(base)
        print(f"[compile_relevance] {name} ... ({time.perf_counter() - t_all:.0f} s)", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        train = tele_train if opt else trainset
        settings = None
        if opt == "mipro":
            settings = {"program_aware_proposer": args.mipro_program_aware}
            if args.proposal_max_tokens:
                settings["prompt_lm"] = make_lm(model, max_tokens=args.proposal_max_tokens)
        with contextlib.redirect_stdout(sys.stderr):
            program, compile_info = compile_for_stage(st, base, opt, train, lm=lm, seed=args.seed,
                                                      optimizer_settings=settings)
        t_compile = time.perf_counter() - t0
        report = evaluate_stage(st, program, evalset, lm=lm if info.uses_lm else None, n_boot=args.n_boot,
                                seed=args.seed, progress=False, description=name)
        ci = compile_info or {}
        details = ci.get("details") or {}
        row = {"name": name, **{k: report[k] for k in KEEP}, "eval_lm_calls": report["lm_calls"],
               "compile_lm_calls": int(ci.get("actual_lm_calls") or ci.get("lm_calls") or 0),
               "projected_compile_lm_calls": ci.get("projected_lm_calls"),
               "n_compile_train": len(train) if (opt or info.trainable) else 0,
               "compile_seconds": round(t_compile, 1), "eval_seconds": report["seconds"],
               "seconds": round(time.perf_counter() - t0, 1), "errors": report["errors"][:3]}
        row.pop("lm_calls")
        row["lm_calls"] = row["compile_lm_calls"] + row["eval_lm_calls"]
        if opt:
            row["compile"] = {"dev_score_before": ci.get("score_before"), "dev_score_before_ci": ci.get("score_before_ci"),
                              "dev_score_after": ci.get("score_after"), "dev_score_after_ci": ci.get("score_after_ci"),
                              "n_fit": details.get("n_train"), "n_dev": details.get("n_val"),
                              "demos": details.get("demos"),
                              "teleprompter_failures": details.get("teleprompter_failures"),
                              "over_budget_reason": details.get("over_budget_reason")}
        elif ci:
            row["compile"] = {k: details.get(k) for k in ("threshold", "top_fraction", "oof_auc") if k in details}
        if reports:
            cmp = paired_comparison(st, report, reports[0], n_boot=args.n_boot, seed=args.seed)
            row["vs_zero_shot"] = {"against": rows[0]["name"], "f1_diff": round(cmp["diff"]["diff"], 4),
                                   "f1_diff_ci": [round(x, 4) for x in cmp["diff"]["ci"]],
                                   "mcnemar_p": (cmp["mcnemar"] or {}).get("p_value")}
        reports.append(report)
        rows.append(row)

    gold = [bool(st.is_positive(st.gold(ex))) for ex in evalset]
    emit({
        "benchmark": "compile_relevance",
        "data": str(data),
        "data_sha256": file_sha256(data),
        "split": args.split,
        "n_split": n_split,
        "n": len(evalset),
        "gold_yes_rate": round(sum(gold) / len(gold), 4),
        "n_train": len(trainset),
        "n_teleprompter_train": len(tele_train),
        "teleprompter_train_positives": sum(positive(ex) for ex in tele_train),
        "lm": model,
        "seed": args.seed,
        "n_boot": args.n_boot,
        "cache": "disabled (every LM call reaches the model)",
        "mipro_proposal_max_tokens": args.proposal_max_tokens or None,
        "mipro_program_aware_proposer": args.mipro_program_aware,
        "env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "PERSONALIGN_THREADS")},
        "cpus": os.cpu_count(),
        "load_avg_start": load_start,
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "strategies": rows,
        "seconds": round(time.perf_counter() - t_all, 1),
    })


if __name__ == "__main__":
    main()
