"""Compiled vs uncompiled LLM strategies on a binary stage (default: relevance); prints one JSON object.

The table of issue 12: for each LLM strategy (``--strategies``, default ``zero-shot,cot,criteria``)
the **uncompiled** program and the program compiled by each teleprompter (``--teleprompters``,
default ``labeled,bootstrap,mipro,copro,simba,gepa``; MIPROv2 and GEPA ``auto="light"``), all
compiled on the train split by the one compile path
(:func:`personalign.compile_service.compile_program`: class-balanced inner metric, final choice
among uncompiled and compiled on dev groups of train by the stage's set objective, decision rule
when the program has scores), then run on the evaluation split (``--split``, default ``val``;
``--limit 0`` = the whole split). Per row:

* the stage's main metric (F1 of the positive class) with its 95% bootstrap CI, recall,
  precision, yes-rate (predicted positive rate), ``objective`` (the stage's set objective: F1,
  or F2 of "rejected" with ``--stage verification``, default data the PrefEval-derived pairs) and
  ``constant`` (a single class predicted);
* ``vs_uncompiled``: the paired-bootstrap F1 difference against the same strategy uncompiled,
  its 95% CI and McNemar's exact p (:func:`personalign.evaluation.paired_comparison`);
* ``compile``: the dev objective before/after, the chosen candidate and why, the decision rule;
* ``score_auc``: ROC AUC (95% CI) of the program's own score -- the judges' log-probability margin
  of the verdict under their own (compiled) prompt -- when every prediction has one;
* LM calls of compile (projected and actual) and of evaluation, and seconds.

Budget: compiles use at most ``--train-per-group`` train examples per decision unit (the stage's
``decision_keys``; relevance: one user's attributes for one prompt; a seeded, label-stratified
sample; 0 = all). DSPy's cache is disabled, so every call reaches the
model. The human-readable table goes to stderr; stdout holds the JSON object only.

Usage: ``python benchmarks/compile_relevance.py [--stage relevance] [--data PATH] [--lm MODEL]
[--strategies zero-shot,cot,criteria] [--teleprompters labeled,bootstrap] [--limit 40]
[--train-per-group 12] [--seed 0] [--n-boot 1000] [--cache-dir DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import sys
import time
from collections import defaultdict

from _common import ROOT, emit, quiet_logs, shared_data

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before llama.cpp loads (see benchmarks/README)

import personalign  # noqa: E402,F401

STRATEGIES = "zero-shot,cot,criteria"
TELEPROMPTERS = "labeled,bootstrap,mipro,copro,simba,gepa"
LIGHT = {"mipro": {"auto": "light"}, "gepa": {"auto": "light"}}


def default_data(stage: str):
    real = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    if stage == "relevance":
        return real if real.exists() else ROOT / "examples" / "relevance_demo.jsonl"
    if stage == "verification" and (shared_data() / "prefeval").exists():
        return shared_data() / "prefeval"  # PrefEval-derived pairs, split by topic
    return None


def cap_per_group(examples, per_group: int, group_of, label, seed: int) -> list:
    """A seeded sample of at most ``per_group`` examples of each group (``group_of(ex)``: the
    stage's decision unit, e.g. one user's attributes for one prompt), stratified by ``label(ex)``
    (at least one positive per group when it has one); file order kept."""
    groups = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[group_of(ex)].append(i)
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


def row_of(name, report, compile_info, seconds, keep):
    from personalign.compile_service import summary

    ci = compile_info or {}
    row = {"name": name, **{k: report.get(k) for k in keep}, "eval_lm_calls": report["lm_calls"],
           "constant": len({p for p in report["predicted_positive"]}) < 2,
           "compile_lm_calls": int(ci.get("actual_lm_calls") or ci.get("lm_calls") or 0),
           "projected_compile_lm_calls": ci.get("projected_lm_calls"), "seconds": round(seconds, 1),
           "errors": report["errors"][:3]}
    row["compile"] = summary(compile_info)
    return row


def score_auc(report, gold) -> dict | None:
    """ROC AUC of the program's own scores (the LLM judges' yes/no log-probability margin) against
    the gold positive class, with a 95% bootstrap CI; None when any prediction has no score."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    scores = report.get("scores") or []
    if not scores or any(s is None for s in scores) or len(set(gold)) < 2:
        return None
    s, y = np.asarray(scores, dtype=float), np.asarray(gold, dtype=bool)
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(1000):
        i = rng.integers(0, len(y), len(y))
        if y[i].any() and not y[i].all():
            boot.append(roc_auc_score(y[i], s[i]))
    return {"auc": round(float(roc_auc_score(y, s)), 4),
            "ci": [round(float(np.percentile(boot, 2.5)), 4), round(float(np.percentile(boot, 97.5)), 4)]}


def table(rows, key) -> str:
    """The rows as a fixed-width text table (stderr)."""
    head = ("program", f"{key} [95% CI]", "recall", "yes", "Δ vs uncompiled [95% CI]", "McNemar p", "calls proj/act",
            "s", "chosen")
    out = [head]
    for r in rows:
        vs = r.get("vs_uncompiled")
        ci = r.get(f"{key}_ci") or [float("nan")] * 2
        out.append((r["name"] + (" (constant)" if r["constant"] else ""), f"{r[key]:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]",
                    f"{r['recall']:.3f}", f"{r['yes_rate']:.1%}",
                    f"{vs['diff']:+.3f} [{vs['ci'][0]:+.2f}, {vs['ci'][1]:+.2f}]" if vs else "(reference)",
                    f"{vs['mcnemar_p']:.3g}" if vs and vs.get("mcnemar_p") is not None else "-",
                    f"{r['projected_compile_lm_calls'] or '-'}/{r['compile_lm_calls']}", f"{r['seconds']:.1f}",
                    (r["compile"] or {}).get("chosen") or "-"))
    widths = [max(len(str(row[i])) for row in out) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stage", default="relevance", help="a binary stage (relevance, verification)")
    ap.add_argument("--data", default=None, help="the stage's labelled data (default: real relevance labels)")
    ap.add_argument("--split", default="val")
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--lm", default=None)
    ap.add_argument("--strategies", default=STRATEGIES, help="LLM strategies, comma-separated")
    ap.add_argument("--teleprompters", default=TELEPROMPTERS, help="teleprompters, comma-separated ('' = none)")
    ap.add_argument("--limit", type=int, default=0, help="evaluation examples (seeded sample); 0 = the whole split")
    ap.add_argument("--train-per-group", type=int, default=12,
                    help="compile on at most this many train examples per decision unit (relevance: one user's "
                         "attributes for one prompt; a seeded, label-stratified sample); 0 = all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--settings", default=None,
                    help='teleprompter settings as JSON, merged over the defaults, e.g. \'{"labeled": {"k": 2}}\'')
    ap.add_argument("--partial", default=None,
                    help="after every row, write the rows so far to this JSON file (atomic replace), so a long "
                         "run that is stopped keeps what it measured")
    ap.add_argument("--cache-dir", default=None,
                    help="use DSPy's cache in this directory (identical calls are answered once: a compiled "
                         "program that kept the uncompiled prompt plus a decision rule re-uses its val calls; "
                         "seconds then measure cache hits). Default: cache off, every call reaches the model")
    args = ap.parse_args(argv)
    quiet_logs()
    logging.getLogger("dspy").setLevel(logging.ERROR)

    from personalign.data.digest import file_sha256
    from personalign.compile_service import compile_program
    from personalign.errors import ConfigurationError
    from personalign.evaluation import evaluate_stage, paired_comparison
    from personalign.lm import DEFAULT_MODEL, configure_cache, make_lm
    from personalign.optimizers import OPTIMIZERS
    from personalign.stages import resolve_stage as get_stage

    t_all = time.perf_counter()
    st = get_stage(args.stage)
    if st.kind != "binary":
        raise SystemExit(f"error: --stage {args.stage} is not a binary stage")
    data = args.data or default_data(args.stage)
    if data is None:
        raise SystemExit(f"error: --data is required for --stage {args.stage}")
    bases = [s.strip() for s in args.strategies.split(",") if s.strip()]
    teles = [t.strip() for t in args.teleprompters.split(",") if t.strip()]
    for b in bases:
        if not st.registry.info(b).uses_lm or st.registry.info(b).trainable:
            raise ConfigurationError(f"'{b}' is not an untrained LLM strategy of {st.name}")
    import json

    settings = {t: dict(LIGHT.get(t) or {}) for t in teles}
    for t, extra in (json.loads(args.settings) if args.settings else {}).items():
        settings.setdefault(t, {}).update(extra)
    for t in teles:
        if OPTIMIZERS.info(t).kind != "teleprompter":
            raise ConfigurationError(f"'{t}' is not a teleprompter")
    examples = st.load(data)
    evalset = [ex for ex in examples if getattr(ex, "split", None) == args.split]
    n_split = len(evalset)
    if args.limit and args.limit < len(evalset):
        keep = set(random.Random(args.seed).sample(range(len(evalset)), args.limit))
        evalset = [ex for i, ex in enumerate(evalset) if i in keep]
    trainset = [ex for ex in examples if getattr(ex, "split", None) == args.train_split]
    positive = lambda ex: bool(st.is_positive(st.gold(ex)))  # noqa: E731
    tele_train = (cap_per_group(trainset, args.train_per_group, st.decision_group, positive, args.seed)
                  if args.train_per_group else trainset)
    if args.cache_dir:
        configure_cache(args.cache_dir)
    else:
        configure_cache(enabled=False)  # every LM call reaches the model: honest calls and seconds
    model = args.lm or DEFAULT_MODEL
    lm = make_lm(model)
    keep = ("f1", "f1_ci", "precision", "recall", "recall_ci", "yes_rate", "accuracy", "failures")

    rows = []
    for base in bases:
        reference = None
        for tele in [None, *teles]:
            name = f"{base}@{tele}" if tele else base
            print(f"[compile_relevance] {name} ... ({time.perf_counter() - t_all:.0f} s)", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):
                program, info = compile_program(st, base, tele, tele_train, lm=lm, seed=args.seed,
                                                optimizer_settings=settings.get(tele) or None)
            report = evaluate_stage(st, program, evalset, lm=lm, n_boot=args.n_boot, seed=args.seed, progress=False,
                                    description=name)
            row = row_of(name, report, info, time.perf_counter() - t0, keep)
            row["objective"] = st.score(evalset, report["predictions"])  # F1, or F2 of "rejected"
            row["score_auc"] = score_auc(report, [positive(ex) for ex in evalset])
            if reference is None:
                reference = report
            else:
                cmp = paired_comparison(st, report, reference, n_boot=args.n_boot, seed=args.seed)
                row["vs_uncompiled"] = {"against": base, "diff": round(cmp["diff"]["diff"], 4),
                                        "ci": [round(x, 4) for x in cmp["diff"]["ci"] or [float("nan")] * 2],
                                        "mcnemar_p": (cmp["mcnemar"] or {}).get("p_value")}
            rows.append(row)
            print(table([row], "f1").splitlines()[-1], file=sys.stderr, flush=True)
            if args.partial:
                import tempfile

                with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(os.path.abspath(args.partial)),
                                                 delete=False, suffix=".tmp") as fh:
                    json.dump({"rows": rows, "seconds": round(time.perf_counter() - t_all, 1)}, fh)
                os.replace(fh.name, args.partial)
    print(table(rows, "f1"), file=sys.stderr, flush=True)
    gold = [positive(ex) for ex in evalset]
    emit({
        "benchmark": "compile_relevance", "stage": st.name, "objective": st.objective.name,
        "positive": st.positive_name, "data": str(data), "data_sha256": file_sha256(data), "split": args.split,
        "n_split": n_split, "n": len(evalset), "gold_yes_rate": round(sum(gold) / max(1, len(gold)), 4),
        "n_train": len(trainset), "n_teleprompter_train": len(tele_train), "lm": model, "seed": args.seed,
        "n_boot": args.n_boot, "cache": args.cache_dir or "disabled (every LM call reaches the model)",
        "teleprompter_settings": {t: settings.get(t) or "wrapper defaults" for t in teles},
        "env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "PERSONALIGN_THREADS")}, "cpus": os.cpu_count(),
        "rows": rows, "seconds": round(time.perf_counter() - t_all, 1),
    })


if __name__ == "__main__":
    main()
