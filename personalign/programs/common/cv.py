"""Grouped cross-validation: whole groups are held out together; labels and groups are passed in.

Used by learned strategies inside their own ``fit`` (the ensemble's out-of-fold stacking) and by
the optimizers (``programs/`` never imports ``optimizers/``, so it lives here). Folds: scikit-learn
``LeaveOneGroupOut`` for at most ``max_folds`` groups, else ``GroupKFold(max_folds)``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Hashable, Sequence


def group_of(example, key: str, *, fallback: str | None = None) -> str:
    """The CV group of an example: its field ``key`` as a string; when that is missing or None,
    its field ``fallback`` (e.g. ``"prompt"`` for relevance rows without a ``prompt_id``).

    Raises:
        ValueError: neither ``key`` nor ``fallback`` is set on the example.
    """
    for name in (key, fallback):
        if name is None:
            continue
        value = getattr(example, name, None)
        if value is None and hasattr(example, "get"):
            value = example.get(name)
        if value is not None:
            return str(value)
    raise ValueError(f"example has no group field '{key}'" + (f" nor '{fallback}'" if fallback else ""))


def grouped_folds(groups: Sequence[Hashable], *, max_folds: int = 5) -> list[tuple[list[int], list[int]]]:
    """``[(train_idx, test_idx), ...]`` over ``len(groups)`` items, ``groups[i]`` the group of item
    ``i``: leave-one-group-out for <= ``max_folds`` distinct groups, else ``GroupKFold(max_folds)``.
    Every group is in exactly one test part and never in its own fold's train part.

    Raises:
        ValueError: fewer than 2 groups (nothing to hold out), or ``max_folds`` < 2.
    """
    import numpy as np
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    if max_folds < 2:
        raise ValueError(f"max_folds must be >= 2, got {max_folds}")
    g = np.array([str(v) for v in groups])
    n_groups = len(set(g.tolist()))
    if n_groups < 2:
        raise ValueError(f"grouped CV needs >= 2 groups, got {n_groups}")
    splitter = LeaveOneGroupOut() if n_groups <= max_folds else GroupKFold(n_splits=max_folds)
    X = np.zeros((len(g), 1))
    return [(tr.tolist(), te.tolist()) for tr, te in splitter.split(X, groups=g)]


def out_of_fold_scores(fit_and_score: Callable[[list, list], Sequence[float]], examples: Sequence, *,
                       groups: Sequence[Hashable], labels: Sequence[bool],
                       max_folds: int = 5) -> tuple[list[float], list[dict[str, Any]]]:
    """Out-of-fold scores of ``examples`` (one group ``groups[i]`` and positive-class flag
    ``labels[i]`` per example).

    For each fold of :func:`grouped_folds`, ``fit_and_score(train_examples, held_out_examples)``
    returns the held-out scores. Returns ``(scores (n,), per-fold facts)``: held-out groups, sizes,
    seconds and the held-out ROC AUC when both classes are held out. A fold whose train part has a
    single class is not fitted: its held-out scores are the fold's training positive rate (a
    constant), reported as ``skipped``.

    Raises:
        ValueError: ``groups`` or ``labels`` not one per example; fewer than 2 groups.
    """
    if len(groups) != len(examples) or len(labels) != len(examples):
        raise ValueError(f"{len(examples)} examples vs {len(groups)} groups and {len(labels)} labels")
    labels = [bool(v) for v in labels]
    scores: list[float | None] = [None] * len(examples)
    facts: list[dict[str, Any]] = []
    for tr_idx, te_idx in grouped_folds(groups, max_folds=max_folds):
        tr = [examples[i] for i in tr_idx]
        te = [examples[i] for i in te_idx]
        y_tr = [labels[i] for i in tr_idx]
        held = sorted({str(groups[i]) for i in te_idx})
        if len(set(y_tr)) < 2:
            rate = float(sum(y_tr) / len(tr))
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
        y = [labels[i] for i in te_idx]
        if 0 < sum(y) < len(y):
            from sklearn.metrics import roc_auc_score

            fact["auc"] = round(float(roc_auc_score(y, got)), 4)
        facts.append(fact)
    return [float(s) for s in scores], facts  # type: ignore[arg-type]


__all__ = ["group_of", "grouped_folds", "out_of_fold_scores"]
