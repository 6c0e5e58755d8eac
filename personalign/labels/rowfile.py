"""A rows file to label: canonical JSONL, one object per line, each with a unique string ``id``,
the stage's input fields and, optionally, ``split``, the gold label field and ``annotations``
(``{"<annotator>": <label value>, ...}``: the labels people already gave)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalign.errors import DataError

ANNOTATIONS = "annotations"


@dataclass(frozen=True)
class RowFile:
    """The rows of a file in file order, with ``line`` (1-based) and ``position`` per id."""

    path: Path
    sha256: str
    rows: tuple[dict[str, Any], ...]
    line: dict[str, int]
    position: dict[str, int]

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, row_id: str) -> dict[str, Any] | None:
        i = self.position.get(row_id)
        return None if i is None else self.rows[i]


def _check_id(path, line: int, rec: dict, seen: dict[str, int]) -> str:
    from personalign.labels.store import MAX_ROW_ID

    if "id" not in rec or rec["id"] is None:
        raise DataError(path, line, "id", "missing; every row to label needs a unique string id")
    rid = rec["id"]
    if not isinstance(rid, str) or not rid.strip():
        raise DataError(path, line, "id", f"expected a non-empty string, got {rid!r}"[:160])
    if len(rid) > MAX_ROW_ID:
        raise DataError(path, line, "id", f"longer than {MAX_ROW_ID} characters")
    if rid in seen:
        raise DataError(path, line, "id", f"duplicate id {rid!r} (first on line {seen[rid]})")
    seen[rid] = line
    return rid


def _check_annotations(path, line: int, rec: dict, spec) -> None:
    ann = rec.get(ANNOTATIONS)
    if ann is None:
        return
    if not isinstance(ann, dict):
        raise DataError(path, line, ANNOTATIONS, f"expected an object {{annotator: label}}, got {type(ann).__name__}")
    if spec is not None:
        from personalign.labels.spec import LabelValueError

        for name, value in ann.items():
            try:
                spec.check(value)
            except LabelValueError as exc:
                raise DataError(path, line, f"{ANNOTATIONS}.{name}", str(exc)) from None


def read_rows(path: str | Path, stage=None, spec=None) -> RowFile:
    """Read and check a rows file.

    Args:
        path: the JSONL file.
        stage: a :class:`~personalign.stages.Stage`: every row must carry its input
            fields (not null; a ``str`` field a string). None: inputs are not checked.
        spec: the stage's :class:`~personalign.labels.spec.LabelSpec`: values in ``annotations``
            must be allowed labels. None: not checked.

    Raises:
        DataError: the first bad row, naming the file, the line and the field (a missing, empty,
            overlong or duplicate ``id``; a missing or null input; ``annotations`` that is not an
            object or holds a value the stage does not allow); invalid JSON; an empty file.
    """
    from personalign.data.digest import file_sha256
    from personalign.data.files import check_file, iter_jsonl

    p = check_file(path)
    sha = file_sha256(p)
    if stage is not None:
        from personalign.data.inputs import read_inputs

        records = [(line, ex.toDict()) for line, ex in read_inputs(p, stage)]
    else:
        records = list(iter_jsonl(p))
    seen: dict[str, int] = {}
    rows = []
    for line, rec in records:
        _check_id(p, line, rec, seen)
        _check_annotations(p, line, rec, spec)
        rows.append(rec)
    return RowFile(path=p, sha256=sha, rows=tuple(rows), line=seen,
                   position={r["id"]: i for i, r in enumerate(rows)})


__all__ = ["ANNOTATIONS", "RowFile", "read_rows"]
