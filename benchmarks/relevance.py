"""Stage 2 relevance: every registered strategy on real human labels; prints one JSON object.

Data: ``../shared/data/recenter_relevance/relevance_labels.jsonl`` (train = prompts 0, 2, 3; val =
prompt 4) and PrefEval-derived pairs (explicit preferences; records split by topic into halves,
pairs derived within each half by :func:`personalign.data.relevance_pairs`, 3 negatives per
positive). Trainable strategies are compiled on train with their registry default optimizer;
nothing is fitted on the evaluation split.

Per strategy: F1, precision, recall, yes-rate (each with a 95% percentile-bootstrap CI over items),
ROC AUC when the strategy scores, n used, LM calls (cache disabled unless ``--cache-dir``, so every
call reaches the model), seconds (compile + predict), compile facts. Optional bounds for a short run
(defaults: everything):
per-pair LLM judges (zero-shot, cot, criteria) run on ``--max-lm-pairs`` val pairs (0 = all, else a seeded sample); the
LM-scoring strategies (yes-prob, yes-prob-rank, ensemble, ensemble-rank: one prompt evaluation per pair, ~1.5 s for a long LIMA
prompt on an idle machine, ten times that on a busy one) are compiled on ``--max-lm-train`` train
pairs spread over the train prompts and evaluated on that same val subset; the batch judge runs
on all of val and on that same subset; ``cross-encoder`` runs only with
``--cross-encoder`` (4 CPU fine-tunings); on PrefEval only LM-free strategies run unless
``--prefeval-lm``. Also, unless ``--no-train-cv``: ``train_cv``, the leave-one-prompt-out CV table
inside train (val untouched) behind the design of ``minilm-rank`` and ``style-rank`` (features,
hard vs soft labels, C, PrefEval pairs as extra training data).

Usage: ``python benchmarks/relevance.py [--lm local/qwen2.5-coder-1.5b-instruct] [--max-lm-pairs 0] [--cache-dir DIR]
[--cross-encoder] [--strategies a,b] [--n-boot 1000] [--seed 0] [--no-train-cv]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from _common import ROOT, emit, quiet_logs, shared_data  # noqa: F401

import personalign  # noqa: E402,F401

PER_PAIR_JUDGES = ("zero-shot", "cot", "criteria")
LM_SCORERS = ("yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank")  # one embedded-model prompt evaluation per train and eval pair


def lm_train_subset(train, k, seed):
    """``k`` train pairs for the LM-scoring strategies, spread evenly over the train prompts
    (seeded sample per prompt), so grouped CV inside compile still sees every prompt; all of
    train when ``k <= 0``."""
    import random

    if k <= 0:
        return list(train)

    prompts = sorted({e.prompt_id for e in train})
    per = max(1, k // len(prompts))
    out = []
    for p in prompts:
        rows = [e for e in train if e.prompt_id == p]
        out += random.Random(f"{seed}:{p}").sample(rows, min(per, len(rows)))
    return out


def seeded_sample(rows, k, seed):
    """All ``rows`` when ``k <= 0`` or ``k >= len(rows)``; else a seeded uniform sample of ``k``
    rows (never the first k: files are ordered by prompt and user), in the rows' original order."""
    import random

    if k <= 0 or k >= len(rows):
        return list(rows)
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(rows)), k))
    return [rows[i] for i in chosen]


def _auc(gold, scores):
    from sklearn.metrics import roc_auc_score

    if any(s is None for s in scores) or len(set(gold)) < 2:
        return None
    return round(float(roc_auc_score(gold, scores)), 4)


def evaluate(name, trainset, evalset, *, lm, n_boot, seed):
    """Compile (if trainable) and run one strategy; returns its row."""
    from personalign.evaluation import filled_predictions, run_program
    from personalign.lm import CallCounter, use
    from personalign.metrics import binary_report
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry
    from personalign.signatures.relevance import INPUTS, LABEL

    info = STRATEGIES.info(name)
    t0 = time.perf_counter()
    program = STRATEGIES.create(name)
    compile_info = None
    compile_calls = 0
    import contextlib

    ctx = use(lm) if info.uses_lm else contextlib.nullcontext()
    with ctx:
        if info.trainable:
            with CallCounter() as cc:
                program, res = resolve_stage("relevance").default_optimizer(name, seed=seed).compile(program, trainset=trainset)
            compile_calls = cc.calls
            compile_info = {k: v for k, v in res.to_dict().items() if k in ("optimizer", "config", "train_score", "seconds")}
            d = res.details
            compile_info.update({k: d[k] for k in ("threshold", "top_fraction", "oof_auc", "oof_yes_rate") if k in d})
            if "folds" in d:
                compile_info["folds"] = [{k: f.get(k) for k in ("held_out", "auc", "seconds")} for f in d["folds"]]
            if hasattr(program, "stacker") and program.stacker:
                compile_info["stacker"] = program.stacker
        # run_program applies the LM only on the per-example path; predict_batch runs in this context
        outcome = run_program(program, evalset, inputs=INPUTS, output=LABEL, lm=lm if info.uses_lm else None,
                              description=name, progress=False)
    gold = [bool(getattr(e, LABEL)) for e in evalset]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = binary_report(gold, filled_predictions(gold, outcome.predictions), n_boot=n_boot, seed=seed)
    row = {"name": name, "n": len(evalset), **{k: rep[k] for k in ("f1", "f1_ci", "precision", "precision_ci",
                                                                  "recall", "recall_ci", "yes_rate", "yes_rate_ci")},
           "gold_yes_rate": rep["gold_yes_rate"], "auc": _auc(gold, outcome.scores),
           "lm_calls": outcome.lm_calls, "compile_lm_calls": compile_calls,
           "seconds": round(time.perf_counter() - t0, 2), "failures": outcome.failures,
           "errors": outcome.errors[:3], "compile": compile_info}
    if hasattr(program, "last_errors") and program.last_errors:
        row["errors"] = (row["errors"] + program.last_errors)[:3]
    return row


def train_cv(train, pe_extra, seed):
    """Leave-one-prompt-out CV inside train only (val untouched): the design choices of the rank
    selectors, side by side. Per configuration: pooled out-of-fold F1 of the top-fraction decision
    (fraction = the fold's training positive rate), per-fold F1, ROC AUC of the pooled probabilities
    and ROC AUC within each (prompt, user) group (weighted mean). ``+prefeval`` adds the
    PrefEval-derived pairs (``pe_extra``) to every fold's training data."""
    import numpy as np
    from sklearn.metrics import f1_score, roc_auc_score

    from personalign.programs.relevance.ranked import RankedSelector, _groups

    emb = ("attribute", "cosine", "sentence_cosine", "cosine_z")
    sty = ("style", "cosine", "sentence_cosine", "cosine_z")
    configs = [("attribute only, hard, C=0.1", ("attribute",), "hard", 0.1, False),
               ("cosine only", ("cosine",), "hard", 1.0, False),
               ("sentence_cosine only", ("sentence_cosine",), "hard", 1.0, False),
               ("style only", ("style",), "hard", 1.0, False)]
    for feats, tag in ((emb, "minilm"), (sty, "style")):
        for labels in ("hard", "soft"):
            for C in (0.01, 0.1, 1.0):
                configs.append((f"{tag}: {'+'.join(feats)}, {labels}, C={C}", feats, labels, C, False))
    configs += [("minilm-rank + prefeval pairs", emb, "hard", 0.1, True),
                ("style-rank + prefeval pairs", sty, "soft", 0.01, True)]
    y = np.array([bool(e.relevant) for e in train])
    prompts = sorted({e.prompt_id for e in train})
    groups = _groups(train)
    out = []
    for name, feats, labels, C, extra in configs:
        t0 = time.perf_counter()
        scores = np.zeros(len(train))
        pred = np.zeros(len(train), dtype=bool)
        per_fold = {}
        for p in prompts:
            tr = [e for e in train if e.prompt_id != p] + (list(pe_extra) if extra else [])
            te_idx = [i for i, e in enumerate(train) if e.prompt_id == p]
            sel = RankedSelector(features=feats, C=C, labels=labels).fit(tr, seed=seed)
            sel.top_fraction = float(np.mean([e.relevant for e in train if e.prompt_id != p]))
            sel.threshold = 0.5  # unused: every recenter group has >= min_group attributes
            te = [train[i] for i in te_idx]
            s = sel.score_batch(te)
            scores[te_idx] = s
            pred[te_idx] = sel.decide(s, te)
            per_fold[p] = round(float(f1_score(y[te_idx], pred[te_idx])), 3)
        aucs, w = [], []
        for idx in groups.values():
            if 0 < y[idx].sum() < len(idx):
                aucs.append(roc_auc_score(y[idx], scores[idx]))
                w.append(len(idx))
        out.append({"config": name, "oof_f1": round(float(f1_score(y, pred)), 4), "fold_f1": per_fold,
                    "oof_yes_rate": round(float(pred.mean()), 4), "oof_auc": round(float(roc_auc_score(y, scores)), 4),
                    "within_user_auc": round(float(np.average(aucs, weights=w)), 4),
                    "seconds": round(time.perf_counter() - t0, 2)})
    return out


def prefeval_sets(base, seed, per_topic):
    from personalign.data import group_split, load_prefeval, relevance_pairs

    path = base / "prefeval" / "explicit_preference"
    records = load_prefeval(path, "explicit")
    by_topic: dict = {}
    for r in records:
        by_topic.setdefault(r.topic, []).append(r)
    records = [r for t in sorted(by_topic) for r in by_topic[t][:per_topic]]
    halves = group_split(records, by="topic", fractions={"train": 0.5, "val": 0.5}, seed=seed)
    return ([e.to_dspy() for e in relevance_pairs(halves["train"], seed=seed)],
            [e.to_dspy() for e in relevance_pairs(halves["val"], seed=seed)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default=None, help="model (default: personalign.lm.DEFAULT_MODEL, the 1.5B Qwen)")
    ap.add_argument("--strategies", default=None, help="comma-separated (default: all but cross-encoder)")
    ap.add_argument("--max-lm-pairs", type=int, default=0,
                    help="val pairs for the LM strategies: 0 = all, else a seeded uniform sample")
    ap.add_argument("--max-lm-train", type=int, default=0,
                    help="train pairs (spread over the prompts) for compiling yes-prob and ensemble")
    ap.add_argument("--cross-encoder", action="store_true")
    ap.add_argument("--prefeval-lm", action="store_true")
    ap.add_argument("--prefeval-per-topic", type=int, default=10)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=None,
                    help="keep the LM cache (and yes/no margins) here; LM calls then count cache misses only "
                         "(default: cache off, every call reaches the model)")
    ap.add_argument("--no-train-cv", action="store_true", help="skip the train-only CV table of the rank selectors")
    args = ap.parse_args(argv)
    base = shared_data()
    data = base / "recenter_relevance" / "relevance_labels.jsonl"
    out: dict = {"benchmark": "relevance", "data": str(data), "lm": args.lm}
    if not data.exists():
        emit({**out, "skipped": f"data not found at {data} (set PERSONALIGN_SHARED_DATA)"})
        return 0
    quiet_logs()
    warnings.filterwarnings("ignore")
    from personalign.data import load_relevance
    from personalign.lm import configure_cache, make_lm
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry

    if args.cache_dir:
        configure_cache(args.cache_dir)
    else:
        configure_cache(enabled=False)  # count every LM call
    out["cache_dir"] = args.cache_dir
    t_all = time.perf_counter()
    rows = load_relevance(data)
    train = [r.to_dspy() for r in rows if r.split == "train"]
    val = [r.to_dspy() for r in rows if r.split == "val"]
    names = STRATEGIES.parse(args.strategies) if args.strategies else [
        n for n in STRATEGIES.names() if n != "cross-encoder" or args.cross_encoder]
    if args.cross_encoder and "cross-encoder" not in names:
        names.append("cross-encoder")
    from personalign.lm import DEFAULT_MODEL

    args.lm = args.lm or DEFAULT_MODEL
    out["lm"] = args.lm
    lm = make_lm(args.lm, cache=bool(args.cache_dir))
    subset = seeded_sample(val, args.max_lm_pairs, args.seed)
    out.update(n_train=len(train), n_val=len(val), gold_yes_rate_val=sum(e.relevant for e in val) / len(val),
               max_lm_pairs=args.max_lm_pairs, n_boot=args.n_boot, seed=args.seed,
               lm_subset_gold_yes_rate=sum(e.relevant for e in subset) / len(subset))
    results = []
    lm_train = lm_train_subset(train, args.max_lm_train, args.seed)
    out.update(max_lm_train=len(lm_train))
    for name in names:
        evalset = subset if name in PER_PAIR_JUDGES + LM_SCORERS else val
        results.append(evaluate(name, lm_train if name in LM_SCORERS else train, evalset, lm=lm, n_boot=args.n_boot,
                                seed=args.seed))
        if name == "batch":  # same subset as the per-pair judges, for the LM-call comparison
            row = evaluate(name, train, subset, lm=lm, n_boot=args.n_boot, seed=args.seed)
            row["name"] = "batch@subset"
            results.append(row)
    out["val"] = results
    if not args.no_train_cv:
        pe_extra = []
        if (base / "prefeval" / "explicit_preference").exists():
            pe_tr, pe_va = prefeval_sets(base, args.seed, args.prefeval_per_topic)
            pe_extra = pe_tr + pe_va  # PrefEval only: no recenter val data
        out["train_cv"] = {"protocol": "leave-one-prompt-out inside train (prompts 0, 2, 3); val not used",
                           "n_prefeval_extra": len(pe_extra), "configs": train_cv(train, pe_extra, args.seed)}
    best = max((r for r in results if r["n"] == len(val)), key=lambda r: r["f1"])
    per_pair_calls = len(val)
    batch_row = next((r for r in results if r["name"] == "batch"), None)
    out["summary"] = {
        "best": best["name"], "best_f1": best["f1"], "best_yes_rate": best["yes_rate"],
        "target_f1_0.50_met": best["f1"] >= 0.50,
        "yes_rate_within_10pts": abs(best["yes_rate"] - out["gold_yes_rate_val"]) <= 0.10,
        "batch_lm_calls_val": batch_row["lm_calls"] if batch_row else None,
        "per_pair_lm_calls_val": per_pair_calls,
        "batch_call_ratio": (batch_row["lm_calls"] / per_pair_calls) if batch_row else None,
    }
    pe = base / "prefeval" / "explicit_preference"
    if pe.exists():
        pe_train, pe_val = prefeval_sets(base, args.seed, args.prefeval_per_topic)
        pe_names = [n for n in names if not STRATEGIES.info(n).uses_lm or args.prefeval_lm]
        pe_rows = []
        for name in pe_names:
            evalset = seeded_sample(pe_val, args.max_lm_pairs, args.seed) if name in PER_PAIR_JUDGES + LM_SCORERS else pe_val
            pe_rows.append(evaluate(name, lm_train_subset(pe_train, args.max_lm_train, args.seed)
                                    if name in LM_SCORERS else pe_train, evalset, lm=lm, n_boot=args.n_boot,
                                    seed=args.seed))
        out["prefeval"] = {"n_train": len(pe_train), "n_val": len(pe_val), "per_topic": args.prefeval_per_topic,
                           "gold_yes_rate_val": sum(e.relevant for e in pe_val) / len(pe_val), "strategies": pe_rows}
    out["seconds"] = round(time.perf_counter() - t_all, 1)
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
