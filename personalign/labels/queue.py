"""Each annotator's queue over a rows file, kept in a label store (so it resumes after a restart).

An annotator is shown, in file order, the rows they have neither labelled nor skipped; when none
is left, the rows they skipped, the longest-skipped first (skipping again sends a row to the
back). Undo deletes their most recent label or skip in this file and shows that row again.
Only the stage's input fields are shown: never the gold label or other people's annotations.
"""

from __future__ import annotations

import re
from typing import Any

from personalign.labels.spec import LabelValueError

ANNOTATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


def check_annotator(name: Any) -> str:
    """``name`` if it is a valid annotator name: 1-64 letters, digits or ``. _ @ + -``, starting
    with a letter or digit (an e-mail address is one).

    Raises:
        LabelValueError: anything else.
    """
    if not isinstance(name, str) or not ANNOTATOR.fullmatch(name):
        shown = repr(name)[:70]
        raise LabelValueError(f"annotator name {shown}: use 1-64 letters, digits or . _ @ + - (starting with a "
                              "letter or digit)")
    return name


class LabelQueue:
    """Annotators' queues over ``rows`` (a :class:`~personalign.labels.rowfile.RowFile`) for
    ``spec`` (a :class:`~personalign.labels.spec.LabelSpec`), stored in ``store`` (a
    :class:`~personalign.labels.store.LabelStore`; the rows file is registered in it).

    Every method taking an annotator returns :meth:`state`. Raises LabelValueError on a bad
    annotator, row id or value (the page shows it; nothing is stored) and
    :class:`~personalign.labels.store.StoreError` when the store refuses (nothing is stored).
    """

    def __init__(self, spec, rows, store):
        self.spec, self.rows, self.store = spec, rows, store
        store.register_rows(spec.stage, rows.sha256, str(rows.path), len(rows))

    def _mine(self, annotator: str) -> list:
        return [lab for lab in self.store.labels(self.spec.stage, annotator) if lab.row_id in self.rows.position]

    def _row_id(self, row_id: Any) -> str:
        if not isinstance(row_id, str) or row_id not in self.rows.position:
            raise LabelValueError(f"row id {str(row_id)[:80]!r} is not in {self.rows.path.name}")
        return row_id

    def state(self, annotator: str, show: str | None = None) -> dict[str, Any]:
        """``{"annotator", "row", "progress": {"done", "skipped", "total"}, "last"}``: ``row`` is
        ``show`` if given, else the annotator's next row (None when every row is labelled), as
        ``{"id", "line", "position", "inputs": {field: value}}``; ``last`` is their most recent
        label or skip in this file (``{"row_id", "value", "skipped"}``) or None."""
        check_annotator(annotator)
        mine = self._mine(annotator)
        done = {lab.row_id for lab in mine if not lab.skipped}
        skipped = [lab for lab in mine if lab.skipped]  # oldest skip first (store order)
        if show is None:
            seen = done | {lab.row_id for lab in skipped}
            show = next((r["id"] for r in self.rows.rows if r["id"] not in seen), None)
            if show is None and skipped:
                show = skipped[0].row_id
        last = mine[-1] if mine else None
        return {
            "annotator": annotator,
            "row": None if show is None else self._view(show),
            "progress": {"done": len(done), "skipped": len(skipped), "total": len(self.rows)},
            "last": None if last is None else {"row_id": last.row_id, "value": last.value, "skipped": last.skipped},
        }

    def _view(self, row_id: str) -> dict[str, Any]:
        row = self.rows.row(row_id)
        return {"id": row_id, "line": self.rows.line[row_id], "position": self.rows.position[row_id] + 1,
                "inputs": {name: row.get(name) for name in self.spec.input_names}}

    def label(self, annotator: str, row_id: Any, value: Any) -> dict[str, Any]:
        """Store ``annotator``'s label ``value`` of ``row_id`` (replacing an earlier one)."""
        check_annotator(annotator)
        rid = self._row_id(row_id)
        self.store.put(self.spec.stage, rid, annotator, self.spec.check(value), self.rows.sha256)
        return self.state(annotator)

    def skip(self, annotator: str, row_id: Any) -> dict[str, Any]:
        """Record that ``annotator`` skipped ``row_id`` (it comes back after the unseen rows)."""
        check_annotator(annotator)
        self.store.put(self.spec.stage, self._row_id(row_id), annotator, None, self.rows.sha256)
        return self.state(annotator)

    def undo(self, annotator: str) -> dict[str, Any]:
        """Delete ``annotator``'s most recent label or skip in this file and show that row again
        (``state["undone"]``: what was deleted, or None when there was nothing to undo)."""
        check_annotator(annotator)
        gone = self.store.undo_last(self.spec.stage, annotator, self.rows.position)
        out = self.state(annotator, show=None if gone is None else gone.row_id)
        out["undone"] = None if gone is None else {"row_id": gone.row_id, "value": gone.value, "skipped": gone.skipped}
        return out

    def annotators(self) -> list[dict[str, Any]]:
        """``[{"name", "done", "skipped"}]`` of everyone with a label or skip in this file, by name."""
        counts: dict[str, list[int]] = {}
        for lab in self.store.labels(self.spec.stage):
            if lab.row_id in self.rows.position:
                counts.setdefault(lab.annotator, [0, 0])[1 if lab.skipped else 0] += 1
        return [{"name": n, "done": c[0], "skipped": c[1]} for n, c in sorted(counts.items())]


__all__ = ["ANNOTATOR", "LabelQueue", "check_annotator"]
