"""Seeded samples stratified over groups: what ``--limit N`` evaluates.

Taking the *first* N rows of a split measures whatever the file happens to hold first (on
PrefEval's val split, the first 30 MCQ rows are one topic). :func:`stratified_limit` instead
draws a seeded random sample in which every group (topic, prompt, user, ...) keeps its share of
the split (proportional allocation), returned in file order.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Hashable, Mapping, Sequence, TypeVar

__all__ = ["stratified_limit", "limit_examples"]

T = TypeVar("T")


def _key(item: Any, group_key: str | None) -> Hashable:
    if group_key is None:
        return None
    value = item.get(group_key) if isinstance(item, Mapping) else getattr(item, group_key, None)
    return value if isinstance(value, Hashable) else str(value)


def stratified_limit(examples: Sequence[T], n: int | None, group_key: str | None, seed: int = 0) -> list[T]:
    """A seeded random sample of ``n`` of ``examples``, stratified over ``group_key``.

    Allocation is proportional to group size (largest remainder; groups tied on the remainder
    are ordered by a seeded shuffle), then each group's rows are drawn uniformly with
    ``random.Random(seed)``. Rows whose group is missing (None) form one group of their own;
    ``group_key=None`` is a plain seeded sample.

    Args:
        examples: rows (``dspy.Example``, pydantic models, dicts: anything with the attribute or key).
        n: how many to keep; None, or ``n >= len(examples)``, returns every row (a new list).
        group_key: the attribute/key naming each row's group (a stage's ``limit_key``).
        seed: the sample's seed; the same (examples, n, group_key, seed) gives the same rows.

    Returns:
        ``min(n, len(examples))`` rows **in their input order** (a sorted subset of indices).

    Raises:
        ValueError: ``n < 1``.
    """
    items = list(examples)
    if n is None or n >= len(items):
        return items
    if n < 1:
        raise ValueError(f"limit must be >= 1, got {n}")
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[_key(item, group_key)].append(i)
    rng = random.Random(seed)
    names = sorted(groups, key=lambda k: (k is None, str(k)))  # independent of input order
    rng.shuffle(names)  # seeded tie order among equal remainders
    quotas = {g: n * len(groups[g]) / len(items) for g in names}
    take = {g: int(quotas[g]) for g in names}
    left = n - sum(take.values())
    for g in sorted(names, key=lambda g: -(quotas[g] - take[g]))[:left]:  # stable: ties keep shuffled order
        take[g] += 1
    chosen: list[int] = []
    for g in names:
        chosen.extend(rng.sample(groups[g], take[g]))
    return [items[i] for i in sorted(chosen)]


def limit_examples(stage, examples: Sequence[T], limit: int | None, seed: int = 0) -> list[T]:
    """``--limit`` for a stage: :func:`stratified_limit` over the stage's ``limit_key``.

    Raises:
        ConfigurationError: ``limit < 1``.
    """
    if limit is not None and limit < 1:
        from personalign.errors import ConfigurationError

        raise ConfigurationError(f"--limit must be >= 1, got {limit}")
    return stratified_limit(examples, limit, stage.limit_key, seed)
