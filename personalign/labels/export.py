"""``personalign label export``: a rows file with the store's labels, as canonical JSONL (every
verb reads it) or Label Studio tasks.

Each row is written as it is in the rows file, with ``"annotations": {"<annotator>": <label>}``
holding the annotations it already had plus the store's labels of it for the stage (skips are not
labels; where both hold one annotator's label, the store's, the newer, wins and is counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from personalign.errors import ConfigurationError
from personalign.labels.rowfile import ANNOTATIONS


@dataclass
class Exported:
    """What an export holds: ``rows`` (canonical, in file order) and counts for its summary.

    ``times`` maps ``(row_id, annotator)`` to when the store's label was given; ``outside`` counts
    the stage's stored labels of rows not in the file, ``other_version`` those given on another
    version of the file (another sha256), ``replaced`` annotations of the file the store overrode.
    """

    stage: str | None
    rows: list[dict[str, Any]]
    n_labels: int = 0
    annotators: list[str] = field(default_factory=list)
    replaced: int = 0
    outside: int = 0
    other_version: int = 0
    times: dict[tuple[str, str], datetime] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self, out: str | Path) -> str:
        labelled = sum(1 for r in self.rows if r.get(ANNOTATIONS))
        who = ", ".join(self.annotators) or "none"
        return (f"wrote {out}: {len(self.rows)} rows, {labelled} with annotations; {self.n_labels} labels from the "
                f"store (stage {self.stage or '-'}; annotators: {who})")


def _stage_name(store, sha256: str, stage) -> str | None:
    """The stage whose labels to export: ``stage`` (a reference or name) if given, else the one
    the rows file was served for, else the store's only stage; None when the store is empty."""
    if stage is not None:
        from personalign.stages import resolve_stage

        return stage if isinstance(stage, str) and stage in store.stages() else resolve_stage(stage).name
    served = store.stages_of_file(sha256)
    candidates = served or store.stages()
    if len(candidates) > 1:
        raise ConfigurationError(f"the store holds labels of stages {', '.join(candidates)}; name one with --stage")
    return candidates[0] if candidates else None


def open_for_export(store_url: str | None):
    """The store to read (``None``: the default store, or no store when its file does not exist)."""
    from personalign.labels.store import LabelStore, default_store_url

    if store_url is None:
        url = default_store_url()
        if not Path(url.removeprefix("sqlite:///")).exists():
            return None
        return LabelStore(url, write=False)
    return LabelStore(store_url, write=False)


def merge_labels(rows_path, *, store_url: str | None = None, stage=None, spec=None) -> Exported:
    """The rows of ``rows_path`` with the store's labels merged into their ``annotations``.

    Args:
        rows_path: the rows JSONL (ids checked; ``annotations`` values checked against ``spec``).
        store_url: the store; None: the default store (none yet: the file's own annotations only).
        stage: the stage (reference or name) whose labels to take; None: inferred from the store.
        spec: a :class:`~personalign.labels.spec.LabelSpec` to check the file's annotations with.

    Raises:
        DataError: a bad row (file, line, field). ConfigurationError: a missing store file, a
        store of several stages without ``stage``. StoreError: the store cannot be read.
    """
    from personalign.labels.rowfile import read_rows

    rowfile = read_rows(rows_path, spec=spec)
    rows = [dict(r) for r in rowfile.rows]
    store = open_for_export(store_url)
    if store is None:
        from personalign.labels.store import default_store_url

        out = Exported(stage=getattr(spec, "stage", None), rows=rows)
        out.notes.append(f"no label store yet ({default_store_url()}): exported the file's own annotations")
        return out
    try:
        name = _stage_name(store, rowfile.sha256, stage)
        labels = [] if name is None else [lab for lab in store.labels(name) if not lab.skipped]
    finally:
        store.close()
    out = Exported(stage=name, rows=rows)
    who = set()
    for lab in labels:
        i = rowfile.position.get(lab.row_id)
        if i is None:
            out.outside += 1
            continue
        ann = dict(rows[i].get(ANNOTATIONS) or {})
        if lab.annotator in ann and ann[lab.annotator] != lab.value:
            out.replaced += 1
        ann[lab.annotator] = lab.value
        rows[i][ANNOTATIONS] = ann
        out.times[(lab.row_id, lab.annotator)] = lab.time
        out.other_version += lab.rows_sha256 != rowfile.sha256
        out.n_labels += 1
        who.add(lab.annotator)
    out.annotators = sorted(who)
    if out.replaced:
        out.notes.append(f"{out.replaced} annotations in {rowfile.path.name} replaced by the store's (newer) labels")
    if out.outside:
        out.notes.append(f"{out.outside} stored labels of stage {name} are for rows not in {rowfile.path.name} "
                         "(not exported)")
    if out.other_version:
        out.notes.append(f"{out.other_version} labels were given on another version of {rowfile.path.name} "
                         "(its rows were matched by id)")
    return out


def export_canonical(rows_path, out_path, *, store_url: str | None = None, stage=None) -> Exported:
    """Write ``rows_path`` with the store's labels as canonical JSONL at ``out_path``, atomically
    (:func:`personalign.data.files.write_jsonl`). Raises what :func:`merge_labels` raises and a
    ConfigurationError for an unwritable ``out_path`` (checked before anything is read)."""
    from personalign.data.files import check_output, write_jsonl

    target = check_output(out_path)
    exported = merge_labels(rows_path, store_url=store_url, stage=stage)
    write_jsonl(target, exported.rows)
    return exported


__all__ = ["Exported", "export_canonical", "merge_labels", "open_for_export"]
