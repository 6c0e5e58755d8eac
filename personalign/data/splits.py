"""Leakage-free, seeded splits by group (prompt, user, topic — or several at once).

Rows are never split individually: every row of a group lands on the same side. With
several keys (e.g. ``by=("prompt", "user")``) groups are the connected components of rows
linked by sharing *any* key value (union-find), so no prompt and no user appears on both
sides — needed for derived pairs where a question appears with several users' preferences.

Algorithm: components are ordered by a seeded shuffle (``random.Random(seed)`` over
components sorted by their smallest key, so the result is independent of input order) and
assigned to splits in turn until each split holds its target share of *rows*; the last split
takes the rest. Split sizes are therefore approximate when groups are large.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence, TypeVar


def split_of(example) -> str | None:
    """The ``split`` of an example (None when it has none)."""
    value = getattr(example, "split", None)
    if value is None and hasattr(example, "get"):
        value = example.get("split")
    return None if value is None else str(value)


def splits_present(examples) -> str:
    """The splits of ``examples`` for an error message: sorted names, comma-separated; rows without
    a split show as ``(no 'split' field)``, an empty list as ``none``."""
    names = {split_of(ex) for ex in examples}
    shown = sorted(n for n in names if n is not None) + (["(no 'split' field)"] if None in names else [])
    return ", ".join(shown) or "none"


__all__ = ["split_of", "splits_present", "GROUP_KEYS", "group_key", "group_split", "find_leaks", "assert_no_leakage", "assign_split"]

T = TypeVar("T")

GROUP_KEYS = {"prompt": "prompt_id", "user": "user_id", "topic": "topic"}
"""Split name → example attribute holding the group key."""

KeySpec = str | Callable[[Any], Hashable]


def group_key(item: Any, by: KeySpec) -> Hashable:
    """The group key of an item for ``by`` (``prompt``/``user``/``topic``, an attribute name or
    a callable). Raises ValueError when the item has no such key (None)."""
    if callable(by):
        k = by(item)
    else:
        attr = GROUP_KEYS.get(by, by)
        k = item.get(attr) if isinstance(item, Mapping) else getattr(item, attr, None)
    if k is None:
        name = by if isinstance(by, str) else getattr(by, "__name__", "key")
        raise ValueError(f"item {getattr(item, 'id', item)!r} has no '{name}' group key")
    return k


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def group_split(items: Sequence[T], *, by: KeySpec | Sequence[KeySpec] = "prompt",
                fractions: Mapping[str, float] | None = None, seed: int = 0) -> dict[str, list[T]]:
    """Split ``items`` so that no group (per key of ``by``) appears in two splits.

    Args:
        items: examples (pydantic models, dicts or objects with the key attributes).
        by: ``"prompt"``, ``"user"``, ``"topic"``, an attribute name, a callable, or a sequence
            of those (then no value of *any* of the keys is shared across splits).
        fractions: split name → share of rows, e.g. ``{"train": 0.8, "val": 0.2}`` (default);
            shares must be positive and sum to 1.
        seed: seed of the group shuffle.

    Returns:
        split name → items, each list in input order.

    Raises:
        ValueError: bad fractions, an item without a key, or fewer groups than splits.
    """
    fractions = dict(fractions or {"train": 0.8, "val": 0.2})
    if not fractions or any(f <= 0 for f in fractions.values()) or abs(sum(fractions.values()) - 1) > 1e-9:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    keys = [by] if isinstance(by, str) or callable(by) else list(by)
    n = len(items)
    uf = _UnionFind(n)
    first: dict[tuple[int, Hashable], int] = {}
    for i, it in enumerate(items):
        for j, spec in enumerate(keys):
            k = (j, group_key(it, spec))
            if k in first:
                uf.union(first[k], i)
            else:
                first[k] = i
    comps: dict[int, list[int]] = {}
    for i in range(n):
        comps.setdefault(uf.find(i), []).append(i)
    if len(comps) < len(fractions):
        raise ValueError(f"{len(comps)} group(s) cannot fill {len(fractions)} splits without leakage")
    # order-independent: label each component by its sorted key repr, then shuffle
    labelled = sorted(comps.values(), key=lambda m: min(repr(group_key(items[i], keys[0])) for i in m))
    random.Random(seed).shuffle(labelled)
    names = list(fractions)
    out: dict[str, list[int]] = {name: [] for name in names}
    targets = {name: fractions[name] * n for name in names}
    s = 0
    remaining = len(labelled)
    for comp in labelled:
        name = names[s]
        out[name].extend(comp)
        remaining -= 1
        # move on when this split reached its share, keeping one component per later split
        if s < len(names) - 1 and (len(out[name]) >= targets[name] or remaining <= len(names) - 1 - s):
            s += 1
    return {name: [items[i] for i in sorted(idx)] for name, idx in out.items()}


def find_leaks(splits: Mapping[str, Iterable[Any]], by: KeySpec | Sequence[KeySpec] = "prompt") -> dict[str, list[Hashable]]:
    """Group keys present in more than one split, per key spec name (empty when clean)."""
    keys = [by] if isinstance(by, str) or callable(by) else list(by)
    leaks: dict[str, list[Hashable]] = {}
    for spec in keys:
        where: dict[Hashable, set[str]] = {}
        for name, items in splits.items():
            for it in items:
                where.setdefault(group_key(it, spec), set()).add(name)
        bad = sorted((k for k, s in where.items() if len(s) > 1), key=repr)
        if bad:
            leaks[spec if isinstance(spec, str) else getattr(spec, "__name__", "key")] = bad
    return leaks


def assert_no_leakage(splits: Mapping[str, Iterable[Any]], by: KeySpec | Sequence[KeySpec] = "prompt") -> None:
    """Raise ValueError naming the leaked groups if any group key appears in two splits."""
    leaks = find_leaks(splits, by)
    if leaks:
        desc = "; ".join(f"{k}: {', '.join(map(str, v[:5]))}{' ...' if len(v) > 5 else ''}" for k, v in leaks.items())
        raise ValueError(f"split leakage: {desc}")


def assign_split(splits: Mapping[str, Iterable[T]]) -> list[T]:
    """Flatten splits into one list with each pydantic example's ``split`` field set."""
    out = []
    for name, items in splits.items():
        for it in items:
            out.append(it.model_copy(update={"split": name}) if hasattr(it, "model_copy") else it)
    return out
