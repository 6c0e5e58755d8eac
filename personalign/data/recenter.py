"""Loaders for the "Re-Centering Humans in LLM Personalization" relevance annotations.

Formats (see ``../shared/data/README.md``):

* ``relevance_labels.jsonl`` — one (attribute, prompt) pair per line with fields
  ``prompt_index, sample_index, attribute, prompt_text, label (0/1), split, n_annotators,
  human_yes_rate``; ``label`` is the human majority (``human_yes_rate > 0.5``, ties → 0).
* ``raw_task3_annotations.jsonl`` — per-annotator YES/NO judgments
  ``{task, item_index, user, prompt_index, annotator, is_admin_test, relevance_judgments:
  [{attribute, relevant}]}``; ``raw_task2_annotations.jsonl`` — the same shape with a finer
  ``rating`` per attribute. Records with ``is_admin_test: true`` are tool tests and dropped.

:func:`load_relevance` also reads the project's canonical relevance JSONL (the fields of
:class:`~personalign.data.schemas.RelevanceExample`) and detects the format from the first
record. Ids are ``recenter:p<prompt_index>:s<sample_index>:<sha1(attribute)[:10]>``;
``prompt_id`` is ``recenter:p<prompt_index>`` and ``user_id`` ``recenter:s<sample_index>``
(``sample_index`` equals ``item_index`` of the raw files: one sampled user history).

:func:`raw_annotation_rows` reads a raw file into rows keyed like ``relevance_labels.jsonl``
(``prompt_index, sample_index, attribute``) with the per-annotator ``annotations``
(:mod:`personalign.data.annotations`); :func:`annotated_relevance` joins them to the released rows
(which carry the prompt texts) and counts what matched.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from typing import Iterable, Iterator, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from personalign.data.files import iter_jsonl, require, validation_to_data_error
from personalign.data.schemas import RelevanceExample
from personalign.errors import DataError

__all__ = [
    "RECENTER_FIELDS",
    "iter_relevance",
    "load_relevance",
    "AnnotatorJudgment",
    "AnnotationRecord",
    "load_recenter_annotations",
    "annotator_votes",
    "attach_annotator_labels",
    "raw_annotation_rows",
    "annotated_relevance",
]

RECENTER_FIELDS = ("prompt_index", "sample_index", "attribute", "prompt_text", "label", "split",
                   "n_annotators", "human_yes_rate")
TASK2_RATINGS = ("necessary_explicit", "necessary_implicit", "optional", "unnecessary", "forbidden", "none")


def _attr_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def recenter_ids(prompt_index: int, sample_index: int, attribute: str) -> tuple[str, str, str]:
    """``(id, prompt_id, user_id)`` of a recenter row."""
    pid = f"recenter:p{prompt_index}"
    uid = f"recenter:s{sample_index}"
    return f"{pid}:s{sample_index}:{_attr_hash(attribute)}", pid, uid


def _parse_recenter(obj: dict, path, lineno: int) -> RelevanceExample:
    pi = require(obj, "prompt_index", int, path, lineno)
    si = require(obj, "sample_index", int, path, lineno)
    for name, v in (("prompt_index", pi), ("sample_index", si)):
        if v < 0:
            raise DataError(path, lineno, name, f"must be >= 0, got {v}")
    attribute = require(obj, "attribute", str, path, lineno)
    prompt = require(obj, "prompt_text", str, path, lineno)
    label = require(obj, "label", (int, bool), path, lineno)
    if label not in (0, 1):
        raise DataError(path, lineno, "label", f"must be 0 or 1, got {label!r}")
    split = require(obj, "split", str, path, lineno)
    n_ann = require(obj, "n_annotators", int, path, lineno)
    if n_ann < 1:
        raise DataError(path, lineno, "n_annotators", f"must be >= 1, got {n_ann}")
    rate = require(obj, "human_yes_rate", (int, float), path, lineno)
    if not 0.0 <= rate <= 1.0:
        raise DataError(path, lineno, "human_yes_rate", f"must be in [0, 1], got {rate}")
    if bool(label) != (rate > 0.5):
        raise DataError(path, lineno, "label",
                        f"{label} contradicts human_yes_rate {rate} (label is 1 iff rate > 0.5)")
    ex_id, pid, uid = recenter_ids(pi, si, attribute)
    return RelevanceExample(id=ex_id, attribute=attribute, prompt=prompt, relevant=bool(label),
                            split=split, prompt_id=pid, user_id=uid, human_yes_rate=float(rate))


def _detect(obj: dict, path, lineno: int) -> Literal["recenter", "canonical"]:
    if "prompt_text" in obj or "prompt_index" in obj:
        return "recenter"
    if "prompt" in obj and "relevant" in obj:
        return "canonical"
    missing = [f for f in ("attribute", "prompt", "relevant", "prompt_id", "id") if f not in obj]
    raise DataError(path, lineno, missing[0] if missing else None,
                    "missing: not a recenter relevance record (prompt_index, prompt_text, label, ...) "
                    "nor a canonical relevance record (id, attribute, prompt, relevant, prompt_id)")


def iter_relevance(path: str | os.PathLike) -> Iterator[RelevanceExample]:
    """Stream relevance examples from a recenter or canonical relevance JSONL file.

    Holds one line at a time (plus the set of ids seen, for the duplicate check).

    Raises:
        DataError: file missing or empty, non-UTF-8 bytes, invalid JSON, missing or mistyped
            field, ``label`` outside {0, 1}, ``label`` contradicting ``human_yes_rate``, a
            record in the other format than the first one, duplicate id.
    """
    fmt: str | None = None
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        kind = _detect(obj, path, lineno)
        if fmt is None:
            fmt = kind
        elif kind != fmt:
            raise DataError(path, lineno, None, f"{kind} record in a {fmt} relevance file")
        if fmt == "recenter":
            ex = _parse_recenter(obj, path, lineno)
        else:
            try:
                ex = RelevanceExample.model_validate(obj)
            except ValidationError as exc:
                raise validation_to_data_error(exc, path, lineno) from None
        if ex.id in seen:
            field = "attribute" if fmt == "recenter" else "id"
            raise DataError(path, lineno, field, f"duplicate id '{ex.id}' (first on line {seen[ex.id]})")
        seen[ex.id] = lineno
        yield ex


def load_relevance(path: str | os.PathLike, *, split: str | None = None) -> list[RelevanceExample]:
    """Load relevance examples (recenter format or canonical), optionally one split.

    Args:
        path: a ``.jsonl`` file.
        split: keep only rows whose ``split`` equals this; ``None`` keeps all.

    Returns:
        examples in file order.

    Raises:
        DataError: see :func:`iter_relevance`; also when ``split`` names no row (the message
            lists the available splits).
    """
    out: list[RelevanceExample] = []
    splits: set[str] = set()
    for ex in iter_relevance(path):
        if ex.split is not None:
            splits.add(ex.split)
        if split is None or ex.split == split:
            out.append(ex)
    if split is not None and not out:
        avail = ", ".join(sorted(splits)) or "none (no split column)"
        raise DataError(path, None, "split", f"unknown split '{split}'; available: {avail}")
    return out


# --- raw per-annotator files ---------------------------------------------------------------


class AnnotatorJudgment(BaseModel):
    """One annotator's judgment of one attribute. ``relevant`` is None when not answered;
    ``rating`` is the task-2 scale value (None for task 3)."""

    model_config = ConfigDict(frozen=True)

    attribute: str
    relevant: bool | None
    rating: str | None = None


class AnnotationRecord(BaseModel):
    """One annotator's pass over one (prompt, user sample) item."""

    model_config = ConfigDict(frozen=True)

    task: str
    item_index: int
    user: str
    prompt_index: int
    annotator: str
    flagged: bool = False
    judgments: list[AnnotatorJudgment]


def load_recenter_annotations(path: str | os.PathLike, *, keep_admin_tests: bool = False) -> list[AnnotationRecord]:
    """Load a raw recenter annotation file (task 3 YES/NO or task 2 ratings).

    Tool-test records (``is_admin_test: true``) are dropped unless ``keep_admin_tests``.
    For task 2, ``relevant`` is the record's ``is_relevant`` and ``rating`` must be one of
    ``necessary_explicit, necessary_implicit, optional, unnecessary, forbidden, none``.

    Raises:
        DataError: missing/mistyped fields (named as ``relevance_judgments.<i>.<field>``).
    """
    out: list[AnnotationRecord] = []
    for lineno, obj in iter_jsonl(path):
        admin = require(obj, "is_admin_test", bool, path, lineno)
        task = str(require(obj, "task", (str, int), path, lineno))
        item = require(obj, "item_index", int, path, lineno)
        user = require(obj, "user", str, path, lineno)
        pi = require(obj, "prompt_index", int, path, lineno)
        ann = require(obj, "annotator", str, path, lineno)
        flagged = obj.get("flagged", False)
        if not isinstance(flagged, bool):
            raise DataError(path, lineno, "flagged", f"expected boolean, got {type(flagged).__name__}")
        judg = require(obj, "relevance_judgments", list, path, lineno)
        js = []
        for i, j in enumerate(judg):
            where = f"relevance_judgments.{i}."
            attr = require(j, "attribute", str, path, lineno, where=where)
            if task == "2":
                rating = require(j, "rating", str, path, lineno, where=where)
                if rating not in TASK2_RATINGS:
                    raise DataError(path, lineno, where + "rating", f"'{rating}' not one of {', '.join(TASK2_RATINGS)}")
                rel = j.get("is_relevant")
            else:
                rating = None
                if "relevant" not in j:
                    raise DataError(path, lineno, where + "relevant", "missing")
                rel = j["relevant"]
            if rel is not None and not isinstance(rel, bool):
                raise DataError(path, lineno, where + ("is_relevant" if task == "2" else "relevant"),
                                f"expected boolean or null, got {type(rel).__name__}")
            js.append(AnnotatorJudgment(attribute=attr, relevant=rel, rating=rating))
        if admin and not keep_admin_tests:
            continue
        out.append(AnnotationRecord(task=task, item_index=item, user=user, prompt_index=pi,
                                    annotator=ann, flagged=flagged, judgments=js))
    return out


def annotator_votes(records: Iterable[AnnotationRecord]) -> dict[tuple[str, str, str], dict[str, bool]]:
    """Per-item votes: ``(prompt_id, user_id, attribute) -> {annotator: relevant}``.

    Unanswered judgments (``relevant`` None) are skipped; if an annotator judged the same
    item twice, the last record wins.
    """
    votes: dict[tuple[str, str, str], dict[str, bool]] = defaultdict(dict)
    for rec in records:
        for j in rec.judgments:
            if j.relevant is None:
                continue
            key = (f"recenter:p{rec.prompt_index}", f"recenter:s{rec.item_index}", j.attribute)
            votes[key][rec.annotator] = j.relevant
    return dict(votes)


def attach_annotator_labels(examples: Iterable[RelevanceExample],
                            records: Iterable[AnnotationRecord]) -> list[RelevanceExample]:
    """Return copies of ``examples`` with ``annotator_labels`` filled from raw task-3 records
    (votes ordered by annotator pseudonym). Examples without votes keep ``None``."""
    votes = annotator_votes(records)
    out = []
    for ex in examples:
        v = votes.get((ex.prompt_id, ex.user_id or "", ex.attribute))
        if v:
            ex = ex.model_copy(update={"annotator_labels": [v[a] for a in sorted(v)]})
        out.append(ex)
    return out


def raw_annotation_rows(path: str | os.PathLike, *, keep_admin_tests: bool = False) -> list[dict]:
    """The votes of a raw recenter file as rows keyed like ``relevance_labels.jsonl``:
    ``{"prompt_index", "sample_index", "attribute", "annotations": {annotator: relevant}}``, one per
    (prompt, user sample, attribute) judged, in first-seen order. Tool tests are dropped (unless
    ``keep_admin_tests``), unanswered judgments skipped, and an annotator's later record of the same
    item wins (:func:`annotator_votes`).

    Raises:
        DataError: see :func:`load_recenter_annotations`.
    """
    votes = annotator_votes(load_recenter_annotations(path, keep_admin_tests=keep_admin_tests))
    return [{"prompt_index": int(pid.removeprefix("recenter:p")), "sample_index": int(uid.removeprefix("recenter:s")),
             "attribute": attr, "annotations": dict(sorted(v.items()))} for (pid, uid, attr), v in votes.items()]


def annotated_relevance(labels_path: str | os.PathLike, raw_path: str | os.PathLike) -> tuple[list[RelevanceExample], dict]:
    """The released relevance rows of ``labels_path`` with the per-annotator votes of the raw file
    ``raw_path`` attached as ``annotations`` and ``n_annotators`` (joined on prompt, user sample and
    attribute), and a count of the join.

    The labels (``relevant``, ``human_yes_rate``) stay the released ones: ``personalign label merge``
    derives them again from the votes.

    Returns:
        ``(examples, join)``: every released row (``annotations`` None where the raw file has no
        vote), and ``{"released_rows", "raw_items", "matched", "raw_only", "released_only",
        "yes_rate_equal", "label_equal"}`` -- the last two count the matched rows whose released
        ``human_yes_rate`` / ``relevant`` equal the raw votes' yes-rate / majority (ties not relevant).

    Raises:
        DataError: either file unreadable or malformed.
    """
    from personalign.data.annotations import majority, yes_rate

    released = load_relevance(labels_path)
    rows = {(f"recenter:p{r['prompt_index']}", f"recenter:s{r['sample_index']}", r["attribute"]): r["annotations"]
            for r in raw_annotation_rows(raw_path)}
    out, matched, rate_eq, label_eq = [], set(), 0, 0
    for ex in released:
        key = (ex.prompt_id, ex.user_id or "", ex.attribute)
        votes = rows.get(key)
        if votes is not None:
            matched.add(key)
            rate_eq += ex.human_yes_rate is not None and abs(ex.human_yes_rate - yes_rate(votes)) < 1e-9
            label_eq += ex.relevant == majority(votes, ties="negative")
            ex = ex.model_copy(update={"annotations": votes, "n_annotators": len(votes)})
        out.append(ex)
    join = {"released_rows": len(released), "raw_items": len(rows), "matched": len(matched),
            "raw_only": len(rows) - len(matched), "released_only": len(released) - len(matched),
            "yes_rate_equal": int(rate_eq), "label_equal": int(label_eq)}
    return out, join
