"""Agreement between annotators of the same rows: pairwise Cohen's κ, Fleiss' κ, Krippendorff's α,
and each annotator's agreement with the rest.

Input everywhere: ``items`` -- ``{item_id: {annotator: label}}`` (the ``annotations`` of each row).

* **Pairwise Cohen's κ** (Cohen 1960) on the items both annotators labelled
  (:func:`personalign.metrics.agreement.pairwise_kappa`, scikit-learn's ``cohen_kappa_score``).
* **Fleiss' κ** (Fleiss 1971; ``statsmodels.stats.inter_rater.fleiss_kappa`` on
  ``aggregate_raters``) assumes the same number of raters per item: it is computed on the items
  with the most common number of annotators (at least 2), and the report says how many.
* **Krippendorff's α** (Krippendorff 2011; the ``krippendorff`` package, nominal level) takes
  missing judgments as they are: every item with at least 2 annotators.
* **Each annotator against the rest**: on every item the annotator labelled that at least
  ``min_others`` (2) others labelled too, the annotator's label against the strict majority of
  the *others* (tie rule of :func:`personalign.data.annotations.majority`; a ``drop`` tie leaves
  the item out): share equal, Cohen's κ, and for yes/no labels the annotator's own yes-rate.
  This is how the study the project follows picked its annotators (a pilot scored each against
  the others).

κ or α is None (with ``undefined`` saying why) when it is 0/0: every label the same.

**One person under two names.** Two annotators who gave the same label on every one of at least
:data:`IDENTICAL_MIN_ROWS` (10) rows they share are taken for one person counted twice (Label
Studio's user ids imported beside the names the same people labelled under): :func:`identical_annotators`
finds such pairs, :func:`same_person` chooses which name of each group to keep. ``label merge``
refuses them and the human ceiling leaves the extra names out.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from typing import Any, Hashable, Mapping

import numpy as np

__all__ = ["IDENTICAL_MIN_ROWS", "agreement", "identical_annotators", "same_person", "vs_rest", "fleiss",
           "krippendorff_alpha"]

Items = Mapping[Hashable, Mapping[str, Any]]


def _codes(items: Items) -> dict[Any, int]:
    values = {v for labels in items.values() for v in labels.values()}
    return {v: i for i, v in enumerate(sorted(values, key=repr))}


def fleiss(items: Items) -> dict:
    """Fleiss' κ on the items with the most common number of annotators (>= 2).

    Returns:
        ``{"kappa", "n_items", "raters_per_item", "undefined"}`` (``kappa`` None when fewer than two
        such items, or κ is 0/0).
    """
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    counts = Counter(len(v) for v in items.values() if len(v) >= 2)
    if not counts:
        return {"kappa": None, "n_items": 0, "raters_per_item": None, "undefined": "no item with 2 or more annotators"}
    k = max(counts, key=lambda c: (counts[c], c))
    codes = _codes(items)
    rows = [[codes[v] for v in labels.values()] for labels in items.values() if len(labels) == k]
    out = {"kappa": None, "n_items": len(rows), "raters_per_item": k, "undefined": None}
    if len(rows) < 2:
        return {**out, "undefined": "fewer than 2 items"}
    table, _ = aggregate_raters(np.asarray(rows), n_cat=len(codes))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        kappa = float(fleiss_kappa(table, method="fleiss"))
    if not math.isfinite(kappa):
        return {**out, "undefined": "every label the same (expected agreement 1)"}
    return {**out, "kappa": kappa}


def krippendorff_alpha(items: Items) -> dict:
    """Krippendorff's α (nominal) over every item with at least 2 annotators.

    Returns:
        ``{"alpha", "n_items", "n_annotators", "level": "nominal", "undefined"}``.
    """
    import krippendorff

    kept = {i: labels for i, labels in items.items() if len(labels) >= 2}
    annotators = sorted({a for labels in kept.values() for a in labels})
    out = {"alpha": None, "n_items": len(kept), "n_annotators": len(annotators), "level": "nominal",
           "undefined": None}
    codes = _codes(kept)
    if len(codes) < 2:
        return {**out, "undefined": "every label the same" if kept else "no item with 2 or more annotators"}
    data = np.full((len(annotators), len(kept)), np.nan)
    col = {a: r for r, a in enumerate(annotators)}
    for j, labels in enumerate(kept.values()):
        for a, v in labels.items():
            data[col[a], j] = codes[v]
    alpha = float(krippendorff.alpha(reliability_data=data, value_domain=list(codes.values()),
                                     level_of_measurement="nominal"))
    return {**out, "alpha": alpha} if math.isfinite(alpha) else {**out, "undefined": "alpha is 0/0"}


def _kappa(x: list, y: list) -> tuple[float | None, str | None]:
    from personalign.metrics.agreement import cohen_kappa

    if not x:
        return None, "no items"
    if len(set(x) | set(y)) == 1:
        return None, "every label the same"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cohen_kappa(x, y)
    return (None, "kappa is 0/0") if math.isnan(k) else (float(k), None)


def vs_rest(items: Items, *, ties: str = "negative", positive: Any = True, min_others: int = 2) -> list[dict]:
    """Each annotator against the strict majority of the others on the same items.

    Returns:
        one dict per annotator (sorted by name): ``{"annotator", "n", "agreement", "kappa",
        "undefined", "yes_rate"}``; ``yes_rate`` (share of the annotator's labels that are the
        positive class) only for yes/no labels, else None.
    """
    from personalign.data.annotations import others_majority

    pairs: dict[str, tuple[list, list]] = {}
    for labels in items.values():
        for a, v in labels.items():
            defined, rest = others_majority(labels, a, ties=ties, positive=positive, min_others=min_others)
            if defined:
                mine, theirs = pairs.setdefault(a, ([], []))
                mine.append(v)
                theirs.append(rest)
    out = []
    for a in sorted({a for labels in items.values() for a in labels}):
        mine, theirs = pairs.get(a, ([], []))
        kappa, why = _kappa(mine, theirs)
        binary = bool(mine) and all(isinstance(v, bool) for v in mine)
        out.append({"annotator": a, "n": len(mine),
                    "agreement": float(np.mean([m == t for m, t in zip(mine, theirs)])) if mine else None,
                    "kappa": kappa, "undefined": why,
                    "yes_rate": float(np.mean([m == positive for m in mine])) if binary else None})
    return out


IDENTICAL_MIN_ROWS = 10
"""Shared rows from which two annotators who never differ are taken for one person under two names."""


def identical_annotators(items: Items, *, min_rows: int = IDENTICAL_MIN_ROWS) -> list[dict]:
    """Pairs of annotators who share at least ``min_rows`` items and gave the same label on every one.

    Returns:
        ``[{"a", "b", "n"}]`` (``a`` < ``b``; ``n`` shared items), most shared items first.
    """
    shared: Counter = Counter()
    differ: set[tuple[str, str]] = set()
    for labels in items.values():
        names = sorted(labels)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                shared[a, b] += 1
                if labels[a] != labels[b] or type(labels[a]) is not type(labels[b]):
                    differ.add((a, b))
    pairs = [{"a": a, "b": b, "n": n} for (a, b), n in shared.items() if n >= min_rows and (a, b) not in differ]
    return sorted(pairs, key=lambda p: (-p["n"], p["a"], p["b"]))


def same_person(items: Items, *, min_rows: int = IDENTICAL_MIN_ROWS) -> list[dict]:
    """The names to leave out so that no one is counted twice: annotators linked by
    :func:`identical_annotators` are one person, kept under one name -- not a ``ls-user-ID`` one
    when there is another, then the one with the most labels, then the first in order.

    Returns:
        ``[{"dropped", "kept", "n"}]`` (``n``: the rows the two share), one per name left out.
    """
    pairs = identical_annotators(items, min_rows=min_rows)
    if not pairs:
        return []
    from personalign.labels.labelstudio import USER_ID_NAME

    counts = Counter(a for labels in items.values() for a in labels)
    group = {}

    def root(a: str) -> str:
        while group.get(a, a) != a:
            a = group[a]
        return a

    for p in pairs:
        group.setdefault(p["a"], p["a"])
        group.setdefault(p["b"], p["b"])
        group[root(p["b"])] = root(p["a"])
    members: dict[str, list[str]] = {}
    for a in group:
        members.setdefault(root(a), []).append(a)
    out = []
    for names in members.values():
        kept = min(names, key=lambda a: (bool(USER_ID_NAME.fullmatch(a)), -counts[a], a))
        for a in sorted(set(names) - {kept}):
            n = next((p["n"] for p in pairs if {p["a"], p["b"]} == {a, kept}),
                     max(p["n"] for p in pairs if a in (p["a"], p["b"])))
            out.append({"dropped": a, "kept": kept, "n": n})
    return sorted(out, key=lambda d: d["dropped"])


MAX_PAIRWISE = 200  # annotators whose every pair gets a Cohen's κ (19,900 pairs); beyond it: skipped, said why


def agreement(items: Items, *, ties: str = "negative", positive: Any = True, min_others: int = 2) -> dict:
    """Every agreement figure of ``items`` (see the module doc).

    Returns:
        ``{"n_items", "n_annotators", "n_judgments", "annotators_per_item": {k: items}, "pairwise":
        [{"a", "b", "n", "kappa", "undefined"}] (empty beyond :data:`MAX_PAIRWISE` annotators, with
        "pairwise_skipped" saying so), "fleiss": {...}, "krippendorff": {...},
        "annotators": [...] (:func:`vs_rest`), "ties", "min_others"}``.
    """
    from personalign.metrics.agreement import pairwise_kappa

    by_annotator: dict[str, dict] = {}
    for item, labels in items.items():
        for a, v in labels.items():
            by_annotator.setdefault(a, {})[item] = v
    per_item = Counter(len(v) for v in items.values())
    return {"n_items": len(items), "n_annotators": len(by_annotator),
            "n_judgments": sum(len(v) for v in items.values()),
            "annotators_per_item": {str(k): per_item[k] for k in sorted(per_item)},
            "pairwise": pairwise_kappa(by_annotator) if len(by_annotator) <= MAX_PAIRWISE else [],
            "pairwise_skipped": None if len(by_annotator) <= MAX_PAIRWISE else
            f"{len(by_annotator):,} annotators: pairwise Cohen's κ is computed for at most {MAX_PAIRWISE}",
            "fleiss": fleiss(items),
            "krippendorff": krippendorff_alpha(items),
            "annotators": vs_rest(items, ties=ties, positive=positive, min_others=min_others),
            "ties": ties, "min_others": min_others}
