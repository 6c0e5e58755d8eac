"""How many distinct configurations a search space holds, when it is finite.

A space of choices, integer ranges, stepped float ranges and fixed values is finite: once every
configuration has run, a sweep has nothing left to learn and stops (:mod:`personalign.sweeps.runner`).
The count walks the define-by-run tree of :meth:`~personalign.sweeps.space.SearchSpace.configure`
(a parameter counts only where it applies), so ``labeled.k`` multiplies only the ``labeled`` branch.
"""

from __future__ import annotations

import math
from typing import Any

MAX_COUNT = 100_000  # configurations walked at most; beyond, the space is treated as unbounded


class _Unbounded(Exception):
    pass


def dimension_values(dim) -> list[Any]:
    """The points of one :class:`~personalign.sweeps.space.Dimension`.

    Raises:
        _Unbounded: a float range without a step (or too many points).
    """
    if dim.kind == "fixed":
        return [dim.value]
    if dim.kind == "categorical":
        return list(dim.choices)
    if dim.kind == "int":
        step = int(dim.step or 1)
        if (int(dim.high) - int(dim.low)) // step >= MAX_COUNT:
            raise _Unbounded
        return list(range(int(dim.low), int(dim.high) + 1, step))
    if not dim.step:
        raise _Unbounded
    n = math.floor((float(dim.high) - float(dim.low)) / float(dim.step) + 1e-9) + 1
    if n > MAX_COUNT:
        raise _Unbounded
    return [float(dim.low) + k * float(dim.step) for k in range(n)]


def space_size(space) -> int | None:
    """The number of distinct configurations of ``space`` (a
    :class:`~personalign.sweeps.space.SearchSpace`), or None when it is unbounded (a float range
    without a step, or more than :data:`MAX_COUNT`)."""
    count = 0
    stack: list[list[int]] = [[]]
    try:
        while stack:
            prefix = stack.pop()
            path: list[int] = []
            sizes: list[int] = []

            def pick(dim) -> Any:
                values = dimension_values(dim)
                k = prefix[len(path)] if len(path) < len(prefix) else 0
                path.append(k)
                sizes.append(len(values))
                return values[k]

            space.configure(pick)
            count += 1
            if count > MAX_COUNT:
                return None
            for j in range(len(prefix), len(sizes)):
                stack.extend(path[:j] + [k] for k in range(1, sizes[j]))
    except _Unbounded:
        return None
    return count


__all__ = ["MAX_COUNT", "space_size"]
