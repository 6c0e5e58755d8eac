"""Warnings about a labelled JSONL file that loads but is probably not what its author meant.

:func:`data_warnings` scans the rows of a canonical JSONL file (``id``, ``split`` and the stage's
group field; what :mod:`personalign.stages.canonical` loads) and returns one
:class:`DataWarning` per problem -- never an error: the file is valid, and ``personalign stage
validate`` prints each warning on one line and exits 0. Checked:

* **duplicate ids**: an ``id`` on more than one row (predictions, tracking tables and the
  leave-one-group-out rows are keyed by id);
* **unknown split**: a ``split`` value outside the known splits (``train``, ``val``, ``test`` and
  the split compile fits on), with the closest known one (:func:`difflib.get_close_matches`), e.g.
  ``'tran'`` -> ``'train'`` (such rows are in no split that compile fits on or ``--split`` scores);
* **single-example groups** (only when the stage declares a ``group_key``): a group of one row
  gives a per-group figure (``--cv groups``) resting on one example.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from personalign.errors import DataError, located

#: Split names every command knows (compile fits on ``train``; ``--split val`` / ``test`` score).
KNOWN_SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class DataWarning:
    """One problem: the file, the 1-based line of its first row, the field and what is wrong."""

    path: str
    line: int | None
    field: str | None
    problem: str

    def __str__(self) -> str:
        return located(self.path, self.line, self.field, self.problem)


def _rows(path: Path) -> list[tuple[int, dict]]:
    from personalign.data.files import iter_jsonl

    try:
        return [(line, rec) for line, rec in iter_jsonl(path) if isinstance(rec, dict)]
    except DataError:
        return []  # not a canonical JSONL file (a built-in loader's own format): nothing to lint


def _rows_at(lines: list[int]) -> str:
    """``"1 row: line 4"`` / ``"3 rows: lines 4, 9, 12"`` (the first five lines shown)."""
    if len(lines) == 1:
        return f"1 row: line {lines[0]}"
    shown = ", ".join(map(str, lines[:5])) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
    return f"{len(lines)} rows: lines {shown}"


def data_warnings(path: str | Path, *, group_key: str | None = None,
                  splits: Iterable[str] = KNOWN_SPLITS) -> list[DataWarning]:
    """The warnings of the JSONL file ``path`` (module docstring), in order of kind, then line.

    Args:
        path: a JSONL file that already loads (a line that does not parse yields no warnings).
        group_key: the stage's group field; None: no single-example-group check.
        splits: the split names that are known (others are warned about).

    Returns:
        one :class:`DataWarning` per duplicated id, per unknown split value and per single-example
        group, each naming the line of its first row.
    """
    path = Path(path)
    known = list(dict.fromkeys(str(s) for s in splits))
    ids: dict[str, list[int]] = defaultdict(list)
    bad_splits: dict[str, list[int]] = defaultdict(list)
    groups: dict[str, list[int]] = defaultdict(list)
    for line, rec in _rows(path):
        if isinstance(rec.get("id"), (str, int)) and not isinstance(rec.get("id"), bool):
            ids[str(rec["id"])].append(line)
        split = rec.get("split")
        if isinstance(split, str) and split not in known:
            bad_splits[split].append(line)
        if group_key and rec.get(group_key) is not None:
            groups[str(rec[group_key])].append(line)
    out = [DataWarning(str(path), lines[1], "id", f"{value!r} is the id of {_rows_at(lines)}; predictions and "
                       "tracking tables are keyed by id")
           for value, lines in ids.items() if len(lines) > 1]
    for value, lines in bad_splits.items():
        close = difflib.get_close_matches(value, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        out.append(DataWarning(str(path), lines[0], "split", f"{value!r} ({_rows_at(lines)}) is not one of "
                               f"the known splits ({', '.join(known)}){hint}"))
    out += [DataWarning(str(path), lines[0], group_key, f"group {value!r} has a single example: its "
                        "leave-one-group-out figure (--cv groups) rests on one row")
            for value, lines in groups.items() if len(lines) == 1]
    return out


__all__ = ["KNOWN_SPLITS", "DataWarning", "data_warnings"]
