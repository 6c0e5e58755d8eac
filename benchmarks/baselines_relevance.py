"""Relevance baselines on the recenter relevance val split; prints one JSON object.

Data: ``../shared/data/recenter_relevance/relevance_labels.jsonl`` (or ``--data PATH`` /
``$PERSONALIGN_SHARED_DATA``). Nothing is fit on val: thresholds are chosen on train.

Baselines (predict "relevant" for an (attribute, prompt) pair):

* ``all_yes`` — every pair is relevant (F1 = 2p/(1+p) for positive rate p).
* ``bm25`` — BM25 (bm25s, Lucene variant, English stopwords) with the prompt as the query
  and, as documents, the attributes of all rows sharing that prompt (the candidate pool the
  selector would see; label-free). Scores are min-max normalized within each prompt's pool so
  one threshold transfers across prompts; the threshold maximizes F1 on train
  (:func:`personalign.metrics.fit_threshold`). On this data the train-optimal BM25 threshold
  lies below every score, i.e. BM25 falls back to all-yes; ``val_roc_auc`` shows how much
  ranking signal each score has independently of the threshold.
* ``minilm_cosine`` — cosine similarity of all-MiniLM-L6-v2 embeddings of attribute and
  prompt (:func:`personalign.lm.embedder.cosine_pairs`), threshold maximizing F1 on train.

Each system reports F1, precision, recall, yes-rate and accuracy with 95% percentile
bootstrap CIs over val items (1000 resamples, seed 0), plus McNemar's exact test and a
paired bootstrap F1 difference of each system against all-yes.

Usage: ``python benchmarks/baselines_relevance.py [--data PATH] [--n-boot 1000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import personalign  # noqa: E402,F401  (offline defaults before sentence-transformers loads)


def default_data() -> Path:
    base = os.environ.get("PERSONALIGN_SHARED_DATA")
    base_dir = Path(base) if base else ROOT / ".." / "shared" / "data"
    return (base_dir / "recenter_relevance" / "relevance_labels.jsonl").resolve()


def bm25_scores(examples) -> "np.ndarray":
    """Per-prompt BM25 score of each attribute (query = prompt), min-max normalized per prompt."""
    import bm25s
    import numpy as np

    scores = np.zeros(len(examples), dtype=float)
    pools: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        pools[ex.prompt_id].append(i)
    for idx in pools.values():
        docs = [examples[i].attribute for i in idx]
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        query = bm25s.tokenize([examples[idx[0]].prompt], stopwords="en", return_ids=False, show_progress=False)[0]
        s = np.asarray(retriever.get_scores(query), dtype=float)
        span = s.max() - s.min()
        scores[idx] = (s - s.min()) / span if span > 0 else 0.0
    return scores


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    data = args.data or default_data()
    out: dict = {"benchmark": "baselines_relevance", "data": str(data), "split": "val"}
    if not data.exists():
        out["skipped"] = f"data not found at {data} (set PERSONALIGN_SHARED_DATA or pass --data)"
        print(json.dumps(out))
        return 0

    import numpy as np
    from sklearn.metrics import roc_auc_score

    from personalign.data import load_relevance
    from personalign.metrics import binary_report, fit_threshold, mcnemar_exact, paired_bootstrap_diff

    t0 = time.perf_counter()
    train = load_relevance(data, split="train")
    val = load_relevance(data, split="val")
    y_tr = np.array([e.relevant for e in train])
    y_va = np.array([e.relevant for e in val])
    out.update(n_train=len(train), n_val=len(val), gold_yes_rate_val=float(y_va.mean()),
               n_boot=args.n_boot, seed=args.seed)

    systems: dict[str, dict] = {}
    preds: dict[str, np.ndarray] = {}

    preds["all_yes"] = np.ones(len(val), dtype=bool)
    systems["all_yes"] = {}

    bm_tr, bm_va = bm25_scores(train), bm25_scores(val)
    thr = fit_threshold(bm_tr, y_tr)
    preds["bm25"] = bm_va >= thr
    systems["bm25"] = {"threshold": thr, "threshold_fit_on": "train",
                       "train_f1": binary_report(y_tr, bm_tr >= thr, n_boot=1)["f1"],
                       "val_roc_auc": float(roc_auc_score(y_va, bm_va))}

    from personalign.lm.embedder import cosine_pairs

    cos_tr = cosine_pairs([e.attribute for e in train], [e.prompt for e in train])
    cos_va = cosine_pairs([e.attribute for e in val], [e.prompt for e in val])
    thr = fit_threshold(cos_tr, y_tr)
    preds["minilm_cosine"] = cos_va >= thr
    systems["minilm_cosine"] = {"threshold": thr, "threshold_fit_on": "train",
                                "train_f1": binary_report(y_tr, cos_tr >= thr, n_boot=1)["f1"],
                                "val_roc_auc": float(roc_auc_score(y_va, cos_va))}

    for name, p in preds.items():
        rep = binary_report(y_va, p, n_boot=args.n_boot, seed=args.seed)
        systems[name] = {**rep, **systems[name]}
        if name != "all_yes":
            systems[name]["vs_all_yes"] = {
                "f1_diff": paired_bootstrap_diff(y_va, p, preds["all_yes"], metric="f1", n_boot=args.n_boot,
                                                 seed=args.seed),
                "mcnemar": mcnemar_exact(y_va, p, preds["all_yes"]),
            }
    out["systems"] = systems
    out["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
