"""First look at signal: yes-probability AUC of each embedded model on real relevance labels.

For both local models: the log-probability margin of "Yes" over "No"
(:func:`personalign.lm.scoring.yes_no_margin` on :func:`relevance_messages`) for the first N
train and N val pairs (default 100 each) of ``../shared/data/recenter_relevance``, ranked against
the human majority label (ROC AUC, scikit-learn; 0.5 = chance), plus prompt/generation tokens/s
measured here. Prints one JSON object ({"skipped": ...} when the data is absent).
Usage: python benchmarks/local_models.py [--n 100]
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
    ap.add_argument("--models", default="local/smollm2-135m-instruct,local/gemma-3-270m")
    args = ap.parse_args()
    quiet_logs()
    path = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    if not path.exists():
        emit({"benchmark": "local_models", "skipped": f"data not found: {path}"})
        return
    from personalign.cli._doctor import bench_model
    from personalign.data import load_relevance
    from personalign.lm.scoring import relevance_messages, yes_no_margin

    rows = load_relevance(path)
    subsets = {s: [r for r in rows if r.split == s][: args.n] for s in ("train", "val")}
    out = {"benchmark": "local_models", "data": str(path), "n_per_split": args.n, "models": {}}
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
