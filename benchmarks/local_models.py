"""First look at signal: yes-probability AUC of each embedded model on real relevance labels.

For each embedded model: the log-probability margin of "Yes" over "No"
(:func:`personalign.lm.scoring.yes_no_margin` on :func:`relevance_messages`) for a seeded random
sample of N train and N val pairs (default 100 each; 0 = the whole split) of
``../shared/data/recenter_relevance``, ranked against the human majority label (ROC AUC with a
95% bootstrap CI, scikit-learn; 0.5 = chance), plus prompt/generation tokens/s measured here.
Pairs are scored in :func:`personalign.lm.scoring.sharing_order` (KV prefix reuse). Prints one
JSON object ({"skipped": ...} when the data is absent).
Usage: python benchmarks/local_models.py [--n 100] [--models a,b] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from _common import emit, quiet_logs, shared_data


def auc_with_ci(labels, scores, seed=0, n_boot=1000):
    import numpy as np
    from sklearn.metrics import roc_auc_score

    y, s = np.asarray(labels, dtype=int), np.asarray(scores, dtype=float)
    point = float(roc_auc_score(y, s))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(y), len(y))
        if y[idx].min() != y[idx].max():
            boots.append(roc_auc_score(y[idx], s[idx]))
    return point, [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--models", default="local/qwen2.5-coder-1.5b-instruct,local/qwen2.5-coder-0.5b-instruct,"
                                        "local/smollm2-135m-instruct")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    quiet_logs()
    path = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    if not path.exists():
        emit({"benchmark": "local_models", "skipped": f"data not found: {path}"})
        return
    from personalign.lm.speed import bench_model
    from personalign.data import load_relevance
    import random

    from personalign.lm.scoring import relevance_messages, sharing_order, yes_no_margin

    rows = load_relevance(path)
    subsets = {}
    for split in ("train", "val"):
        exs = [r for r in rows if r.split == split]
        if 0 < args.n < len(exs):
            exs = random.Random(args.seed).sample(exs, args.n)
        subsets[split] = [exs[i] for i in sharing_order([(r.prompt, str(r.user_id), r.attribute) for r in exs])]
    out = {"benchmark": "local_models", "data": str(path), "n_per_split": args.n, "seed": args.seed, "models": {}}
    for model in args.models.split(","):
        res = {"speed": bench_model(model)}
        for split, exs in subsets.items():
            t0 = time.perf_counter()
            scores = [yes_no_margin(model, relevance_messages(r.attribute, r.prompt)) for r in exs]
            auc, ci = auc_with_ci([r.relevant for r in exs], scores)
            res[split] = {"n": len(exs), "positives": sum(r.relevant for r in exs), "auc": round(auc, 4),
                          "auc_ci": [round(ci[0], 4), round(ci[1], 4)],
                          "mean_margin": round(sum(scores) / len(scores), 4),
                          "seconds": round(time.perf_counter() - t0, 1)}
        out["models"][model] = res
    emit(out)


if __name__ == "__main__":
    main()
