"""Which rows a saved program was fitted on, and a warning when it is evaluated on them.

A program compiled by ``personalign compile`` is fitted on its ``--train-split`` (teleprompters
hold their dev set out of that split too); one saved by ``personalign predict --save`` is fitted
on every row of its ``--data`` file (``fit_splits`` lists their splits) unless ``--fit-split``
names one. Scoring such a program on those rows again measures memory, not generalization.
"""

from __future__ import annotations

import os
from typing import Any


def fitted_splits(meta: dict[str, Any]) -> list[str] | None:
    """The splits of ``meta["data"]`` the program was fitted on (None: unknown or not fitted)."""
    info = meta.get("compile") or {}
    if info.get("fit_splits"):
        return [str(s) for s in info["fit_splits"]]
    if info.get("train_split"):
        return [str(info["train_split"])]
    return None


def fitted_rows_warning(meta: dict[str, Any], data: str | os.PathLike, split: str | None, *,
                        shown: str | None = None, sha256: str | None = None) -> str | None:
    """A one-line warning when ``split`` of ``data`` (None: every row) holds rows the saved program
    (metadata ``meta`` from ``program.json``) was fitted on: the same content (the data's
    ``sha256``, else the file's) and a split it was fitted on. None otherwise. ``shown``: how the
    warning names the data (default its path; e.g. ``"examples (a list of N)"``)."""
    from personalign.data.digest import file_sha256

    splits = fitted_splits(meta)
    sha = meta.get("data_sha256")
    if sha256 is None and os.path.isfile(data):
        sha256 = file_sha256(data)
    if not splits or not sha or sha256 != sha:
        return None
    if split is not None and split not in splits:
        return None
    where = f"split '{split}'" if split is not None else "every row"
    return (f"warning: the program was fitted on split(s) {', '.join(splits)} of {shown or data}; evaluating it on {where} "
            "scores rows it was fitted on (not held out)")


__all__ = ["fitted_splits", "fitted_rows_warning"]
