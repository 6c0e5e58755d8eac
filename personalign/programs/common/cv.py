"""Grouped cross-validation helpers (folds by prompt) shared by learned strategies and optimizers.

Lives in ``programs/`` because a strategy may need it inside its own ``fit`` (the ensemble's
out-of-fold stacking) and ``programs/`` never imports ``optimizers/``; the optimizers re-export it.
Folds: scikit-learn ``LeaveOneGroupOut`` for at most ``max_folds`` groups, else ``GroupKFold``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence


def group_of(example, key: str = "prompt_id") -> str:
    """The CV group of an example (``prompt_id`` by default; the prompt text when it is missing)."""
    value = getattr(example, key, None)
    if value is None:
        value = example.get(key) if hasattr(example, "get") else None
    return str(value if value is not None else example.prompt)


def grouped_folds(examples: Sequence, *, group_key: str = "prompt_id", max_folds: int = 5):
    """``[(train_idx, test_idx), ...]`` by group: leave-one-group-out for <= ``max_folds`` groups,
    else ``GroupKFold(max_folds)``.

    Raises:
        ValueError: fewer than 2 groups (no held-out prompt to measure on).
    """
    import numpy as np
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    groups = np.array([group_of(e, group_key) for e in examples])
    n_groups = len(set(groups.tolist()))
    if n_groups < 2:
        raise ValueError(f"grouped CV needs >= 2 groups of '{group_key}', got {n_groups}")
    splitter = LeaveOneGroupOut() if n_groups <= max_folds else GroupKFold(n_splits=max_folds)
    X = np.zeros((len(examples), 1))
    return [(tr.tolist(), te.tolist()) for tr, te in splitter.split(X, groups=groups)]


def out_of_fold_scores(fit_and_score: Callable[[list, list], list[float]], examples: Sequence, *,
                       group_key: str = "prompt_id", max_folds: int = 5,
                       label: Callable[[Any], bool] | None = None) -> tuple[list[float], list[dict[str, Any]]]:
    """Out-of-fold scores: for each grouped fold, ``fit_and_score(train_examples, held_out_examples)``
    returns the held-out scores. Returns ``(scores (n,), per-fold facts)``; folds whose train part
    has a single class are skipped with the held-out scores set to the fold's training positive rate
    (a constant), and reported in the facts. ``label(example) -> bool`` is the positive class
    (default ``example.relevant``)."""
    if label is None:
        def label(e):
            return bool(e.relevant)
    scores: list[float | None] = [None] * len(examples)
    facts: list[dict[str, Any]] = []
    for tr_idx, te_idx in grouped_folds(examples, group_key=group_key, max_folds=max_folds):
        tr = [examples[i] for i in tr_idx]
        te = [examples[i] for i in te_idx]
        labels = {label(e) for e in tr}
        held = sorted({group_of(e, group_key) for e in te})
        if len(labels) < 2:
            rate = float(sum(label(e) for e in tr) / len(tr))
            for i in te_idx:
                scores[i] = rate
            facts.append({"held_out": held, "n_train": len(tr), "n_test": len(te), "skipped": "single class"})
            continue
        t0 = time.perf_counter()
        got = fit_and_score(tr, te)
        for i, s in zip(te_idx, got):
            scores[i] = float(s)
        fact: dict[str, Any] = {"held_out": held, "n_train": len(tr), "n_test": len(te),
                                "seconds": round(time.perf_counter() - t0, 2)}
        y = [label(e) for e in te]
        if 0 < sum(y) < len(y):
            from sklearn.metrics import roc_auc_score

            fact["auc"] = round(float(roc_auc_score(y, got)), 4)
        facts.append(fact)
    return [float(s) for s in scores], facts  # type: ignore[arg-type]


__all__ = ["group_of", "grouped_folds", "out_of_fold_scores"]
