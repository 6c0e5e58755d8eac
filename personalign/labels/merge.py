"""``personalign label merge``: labels from annotations -- the majority label, ``n_annotators`` and the
yes-rate of every annotated row, with the annotators' agreement.

A row's ``annotations`` (:mod:`personalign.data.annotations`) are checked against the stage's output
type; the row's label field (relevance: ``relevant``) becomes their majority under the tie rule,
``n_annotators`` their number and, for yes/no labels, ``human_yes_rate`` the share of ``true``.
Rows without annotations are written as they are when they carry the label already (a gold label);
rows without either -- the rows nobody labelled yet, in the export of a partly labelled round -- are
left out and counted. A tie under ``--ties drop`` leaves its row out.
The merged file is read back with the stage's own loader before it replaces ``--out``, so what is
written is what every verb reads (and nothing is written when it would not be).

Two annotators who gave the same label on every one of at least 10 rows they share are one person
counted twice (:func:`personalign.labels.agreement.identical_annotators`): the summary lists them
(``identical``) and ``label merge`` refuses them (``--drop-annotator`` leaves a name out,
``--allow-identical`` counts them as two people).

The recenter raw annotations (``raw_task3_annotations.jsonl``) carry no prompt text: they are joined
to the released ``relevance_labels.jsonl`` (``join``), and only the rows with votes are merged.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from personalign.errors import ConfigurationError, DataError

__all__ = ["output_type", "read_annotated", "merge_labels", "write_merged", "annotation_items", "drop_annotators",
           "refuse_identical"]


def output_type(stage) -> Any:
    """The annotation of the stage's output field (``bool``, ``typing.Literal[...]``, ``str``, ...)."""
    return stage.signature_class.output_fields[stage.output].annotation


def _positive(stage) -> Any:
    return stage.positive if stage.kind == "binary" else True


def _is_recenter_raw(path) -> bool:
    from personalign.data.files import iter_jsonl

    for _, obj in iter_jsonl(path):
        return "relevance_judgments" in obj
    return False


def read_annotated(stage, path: str | os.PathLike, *,
                   join: str | os.PathLike | None = None) -> tuple[list[tuple[int | None, dict]], dict | None]:
    """``(rows, join report)``: ``(line, row)`` of every row of ``path``, its ``annotations`` (where
    present) checked against the stage's output type; the report is None but for a recenter raw file.

    ``path`` may also be a raw recenter annotation file (records with ``relevance_judgments``) for the
    relevance stage: then ``join`` is the released ``relevance_labels.jsonl`` the votes are joined to
    (:func:`personalign.data.recenter.annotated_relevance`, whose count of the join is the report) and
    the rows are its rows with votes (line None: they come from two files).

    Raises:
        DataError: a malformed row or annotation (file, line, field); a raw recenter file without
            ``join``.
    """
    from personalign.data.annotations import FIELD, check_annotations, label_checker
    from personalign.data.files import iter_jsonl

    if _is_recenter_raw(path):
        if stage.name != "relevance" or join is None:
            raise DataError(path, None, None, "a raw recenter annotation file carries no prompt texts: merge it for "
                                              "stage relevance with --join relevance_labels.jsonl")
        from personalign.data.recenter import annotated_relevance

        examples, report = annotated_relevance(join, path)
        return [(None, ex.model_dump(mode="json")) for ex in examples if ex.annotations], report
    if join is not None:
        raise ConfigurationError(f"--join is for a raw recenter annotation file; {path} is not one")
    check = label_checker(output_type(stage))
    rows = []
    for line, obj in iter_jsonl(path):
        if FIELD in obj:
            obj[FIELD] = check_annotations(obj[FIELD], path, line, check)
        rows.append((line, obj))
    return rows, None


def annotation_items(rows: Sequence[Mapping]) -> dict[str, dict[str, Any]]:
    """``{item: annotations}`` of the annotated rows (item: the row's ``id``, else ``row <i>``)."""
    return {str(r.get("id", f"row {i + 1}")): dict(r["annotations"]) for i, r in enumerate(rows)
            if r.get("annotations")}


def drop_annotators(rows: Sequence[Mapping], names: Sequence[str], *, path=None) -> tuple[list[dict], int]:
    """``(rows, labels removed)``: ``rows`` with the labels of the annotators ``names`` removed from
    their ``annotations`` (a row left with none has no ``annotations``).

    Raises:
        DataError: a name with no label in ``rows`` (a typo), naming ``path``.
    """
    known = {a for row in rows for a in row.get("annotations") or {}}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise DataError(path, None, "annotations", f"no label of {', '.join(unknown)} (--drop-annotator); its "
                        f"annotators: {', '.join(sorted(known)[:20]) or 'none'}{' ...' if len(known) > 20 else ''}")
    gone, out, n = set(names), [], 0
    for row in rows:
        labels = row.get("annotations")
        if labels and gone & set(labels):
            kept = {a: v for a, v in labels.items() if a not in gone}
            n += len(labels) - len(kept)
            row = {k: v for k, v in row.items() if k != "annotations"} | ({"annotations": kept} if kept else {})
        out.append(dict(row))
    return out, n


def refuse_identical(rows: Sequence[Mapping], identical: Sequence[dict], *, path=None) -> None:
    """Raise DataError (naming ``path``) when ``identical`` (the summary's pairs of
    :func:`personalign.labels.agreement.identical_annotators`) holds any: one person under two
    names, with the ``--drop-annotator`` that leaves the extra names out."""
    if not identical:
        return
    from personalign.labels.agreement import same_person

    p, extra = identical[0], ",".join(d["dropped"] for d in same_person(annotation_items(rows)))
    more = f" (and {len(identical) - 1} more pairs)" if len(identical) > 1 else ""
    raise DataError(path, None, "annotations", f"annotators {p['a']} and {p['b']} gave the same label on all {p['n']} "
                    f"rows they share{more}: one person under two names (a Label Studio export imported without "
                    f"e-mails?); nothing was written; leave the extra names out with --drop-annotator {extra}, or "
                    "--allow-identical if they are different people")


def merge_labels(stage, rows: Sequence[Mapping], *, ties: str = "negative") -> tuple[list[dict], dict]:
    """Derive each annotated row's label from its annotations.

    Args:
        stage: a :class:`~personalign.stages.Stage` (its ``label`` field is written; a
            binary stage's ``positive`` class is what a tie falls to or away from).
        rows: row dicts (canonical JSONL objects); annotations already checked (:func:`read_annotated`).
        ties: ``negative`` (default), ``positive`` or ``drop`` (:func:`personalign.data.annotations.majority`).

    Returns:
        ``(merged rows, summary)``; summary ``{"n_rows", "annotated", "unannotated", "dropped_ties",
        "unlabelled" (rows with neither annotations nor a label: left out), "dropped_rows" (indices
        into ``rows`` of every row left out), "changed" (rows whose existing label the majority
        replaced), "written", "ties", "label", "agreement", "identical"}``
        (:func:`personalign.labels.agreement.agreement` of the annotated rows; ``identical``: the
        pairs of :func:`personalign.labels.agreement.identical_annotators`).

    Raises:
        ConfigurationError: an unknown tie rule; a tie of labels that are not yes/no without ``drop``.
    """
    from personalign.data.annotations import TIE_RULES, majority, yes_rate
    from personalign.labels.agreement import agreement, identical_annotators

    if ties not in TIE_RULES:
        raise ConfigurationError(f"--ties must be one of {', '.join(TIE_RULES)}, got {ties!r}")
    positive = _positive(stage)
    out, annotated, dropped, unlabelled, changed = [], 0, [], [], 0
    for i, row in enumerate(rows):
        labels = row.get("annotations")
        if not labels:
            if row.get(stage.label) is None:  # nobody labelled it yet, and it has no gold: nothing to merge
                unlabelled.append(i)
            else:
                out.append(dict(row))
            continue
        annotated += 1
        try:
            label = majority(labels, ties=ties, positive=positive)
        except ValueError as exc:
            raise ConfigurationError(f"row {row.get('id', i + 1)}: {exc}") from None
        if label is None:
            dropped.append(i)
            continue
        changed += stage.label in row and row[stage.label] != label
        merged = {**row, stage.label: label, "n_annotators": len(labels)}
        rate = yes_rate(labels)
        if rate is not None:
            merged["human_yes_rate"] = rate
        out.append(merged)
    items = annotation_items(rows)
    summary = {"n_rows": len(rows), "annotated": annotated, "unannotated": len(rows) - annotated,
               "dropped_ties": len(dropped), "unlabelled": len(unlabelled), "dropped_rows": sorted(dropped + unlabelled),
               "changed": int(changed), "written": len(out), "ties": ties, "label": stage.label,
               "agreement": agreement(items, ties=ties, positive=positive), "identical": identical_annotators(items)}
    return out, summary


def write_merged(stage, rows: Sequence[Mapping], out: str | os.PathLike, *, source: str | os.PathLike,
                 lines: Sequence[int | None] | None = None) -> Path:
    """Write ``rows`` to ``out`` atomically, after reading them back with the stage's loader.

    Raises:
        ConfigurationError: ``out`` is the input file, or cannot be written (:func:`check_output`).
        DataError: a merged row the stage's loader refuses -- named at its line of ``source`` when
            ``lines`` gives it; nothing is written then.
    """
    from personalign.data.files import check_output, write_jsonl

    target = check_output(out)
    if Path(source).resolve() == target:
        raise ConfigurationError(f"--out {out} is the input file; write the merged rows to a new file")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".jsonl", dir=target.parent)
    os.close(fd)
    os.unlink(tmp)  # write_jsonl then gives it a new file's mode, not mkstemp's 0o600
    try:
        write_jsonl(tmp, rows)
        if target.exists():  # the replaced file's permission bits
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode) & 0o777)
        try:
            stage.load(tmp)
        except DataError as exc:
            line = lines[exc.line - 1] if lines and exc.line and exc.line <= len(lines) else None
            raise DataError(source, line, exc.field, f"merged row not readable as stage {stage.name}: "
                                                     f"{exc.problem}") from None
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
