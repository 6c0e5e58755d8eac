"""Loader of the ``perspectives`` stage.

Questions (``load_questions(path)``):

* JSONL, one ``{"id", "question", "split"?, "profile_bank"?, "reference"?}`` per line.
  ``profile_bank`` (a profile JSONL or PrefEval folder, relative to the file) defaults to a
  ``profiles.jsonl`` beside the questions file, else none; ``reference`` (an answer to compare
  against) defaults to "" (the metric then uses the single no-profile answer). Lines without
  ``split`` are split by question into train/val/test = 0.5/0.25/0.25 (seeded).
* a PrefEval root (or its ``explicit_preference/`` folder or one topic file there): the distinct
  explicit-preference questions, split by topic; the bank is the root's
  ``implicit_preference/persona-driven/`` personas when present.

The metric is :func:`personalign.programs.perspectives.metrics.answer_win_rate`.
"""

from __future__ import annotations

import os
from pathlib import Path

from personalign.errors import DataError
SPLITS = {"train": 0.5, "val": 0.25, "test": 0.25}


def _prefeval(p: Path, seed: int) -> list:
    import dspy

    from personalign.data.prefeval import PREFEVAL_KINDS, load_prefeval
    from personalign.data.splits import group_split

    root = p
    while root != root.parent and not (root / PREFEVAL_KINDS["explicit"]).is_dir():
        root = root.parent
    if not (root / PREFEVAL_KINDS["explicit"]).is_dir():
        root = p
    recs = load_prefeval(p if p.is_file() else (root / PREFEVAL_KINDS["explicit"]), "explicit")
    bank_dir = root / PREFEVAL_KINDS["persona"]
    bank = str(bank_dir) if bank_dir.is_dir() else ""
    first = {}
    for r in recs:
        first.setdefault(r.prompt_id, r)
    rows = list(first.values())
    topics = {r.topic for r in rows}
    key = (lambda r: r.topic) if len(topics) >= len(SPLITS) else (lambda r: r.prompt_id)
    parts = group_split(rows, by=key, fractions=SPLITS, seed=seed)
    out = []
    for split, items in parts.items():
        for r in items:
            out.append(dspy.Example(id=f"{r.prompt_id}", question=r.question, profile_bank=bank, reference="",
                                    split=split, topic=r.topic, prompt_id=r.prompt_id).with_inputs(*inputs()))
    return sorted(out, key=lambda e: (e.topic, e.id))


def _jsonl(p: Path, seed: int) -> list:
    import dspy

    from personalign.data.files import iter_jsonl
    from personalign.data.splits import group_split

    default_bank = p.with_name("profiles.jsonl")
    rows, seen = [], {}
    for lineno, obj in iter_jsonl(p):
        q = obj.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DataError(p, lineno, "question", "missing or not a non-empty string")
        rid = obj.get("id", f"q{lineno}")
        if not isinstance(rid, str) or not rid:
            raise DataError(p, lineno, "id", "expected a non-empty string")
        if rid in seen:
            raise DataError(p, lineno, "id", f"duplicate id '{rid}' (first on line {seen[rid]})")
        seen[rid] = lineno
        for f in ("split", "profile_bank", "reference"):
            if obj.get(f) is not None and not isinstance(obj[f], str):
                raise DataError(p, lineno, f, f"expected a string, got {type(obj[f]).__name__}")
        bank = obj.get("profile_bank")
        if bank:
            bp = Path(bank) if Path(bank).is_absolute() else p.parent / bank
            if not bp.exists():
                raise DataError(p, lineno, "profile_bank", f"profile bank {bp} not found")
            bank = str(bp)
        else:
            bank = str(default_bank) if default_bank.exists() else ""
        rows.append(dict(id=rid, question=q.strip(), profile_bank=bank, reference=obj.get("reference") or "",
                         split=obj.get("split"), prompt_id=rid))
    if all(r["split"] is None for r in rows) and len(rows) >= len(SPLITS):
        parts = group_split(rows, by=lambda r: r["id"], fractions=SPLITS, seed=seed)
        for split, items in parts.items():
            for r in items:
                r["split"] = split
    return [dspy.Example(**r).with_inputs(*inputs()) for r in rows]


def load_questions(path: str | os.PathLike, *, seed: int = 0) -> list:
    """Questions of the perspectives stage (see the module docstring) as ``dspy.Example``s with
    inputs ``question, profile_bank``.

    Raises:
        DataError: missing/malformed file or a named profile bank that does not exist.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix.lower() == ".json":
        return _prefeval(p, seed)
    return _jsonl(p, seed)


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.perspectives.PerspectivesSignature`), in order."""
    from personalign.signatures.perspectives import PerspectivesSignature

    return tuple(PerspectivesSignature.input_fields)

__all__ = ["load_questions"]
