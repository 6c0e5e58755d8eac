"""Loader of the ``respond`` stage: requests with the user's attributes and the preference a
response must not violate.

* a PrefEval root, its ``explicit_preference/`` folder or one topic file there: one example per
  record -- ``prompt`` = the question, ``attributes`` = [the stated preference], ``preference`` =
  the same preference (what the violation judge checks); split by topic (train/val/test =
  0.5/0.25/0.25, :func:`personalign.programs.mcq.data.split_by_topic`).
* JSONL, one ``{"id", "prompt", "attributes": [...], "preference", "split"?}`` per line
  (``preference`` defaults to the attributes joined); lines without ``split`` are split by prompt.
"""

from __future__ import annotations

import os
from pathlib import Path

from personalign.errors import DataError
SPLITS = {"train": 0.5, "val": 0.25, "test": 0.25}


def load_respond(path: str | os.PathLike, *, seed: int = 0) -> list:
    """Examples with inputs ``prompt, attributes`` and the label ``preference``.

    Raises:
        DataError: missing/malformed file (file, line, field).
    """
    import dspy

    from personalign.data.splits import group_split

    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix.lower() == ".json":
        from personalign.data.prefeval import PREFEVAL_KINDS, load_prefeval

        folder = p / PREFEVAL_KINDS["explicit"] if (p / PREFEVAL_KINDS["explicit"]).is_dir() else p
        recs = load_prefeval(folder, "explicit")
        topics = {r.topic for r in recs}
        key = (lambda r: r.topic) if len(topics) >= len(SPLITS) else (lambda r: r.prompt_id)
        out = []
        for split, items in group_split(recs, by=key, fractions=SPLITS, seed=seed).items():
            for r in items:
                out.append(dspy.Example(id=r.id, prompt=r.question, question=r.question, attributes=[r.preference],
                                        preference=r.preference, split=split, topic=r.topic, user_id=r.user_id,
                                        prompt_id=r.prompt_id).with_inputs(*inputs()))
        return sorted(out, key=lambda e: e.id)
    from personalign.data.files import iter_jsonl

    rows, seen = [], {}
    for lineno, obj in iter_jsonl(p):
        for f in ("id", "prompt"):
            if not isinstance(obj.get(f), str) or not obj[f].strip():
                raise DataError(p, lineno, f, "missing or not a non-empty string")
        if obj["id"] in seen:
            raise DataError(p, lineno, "id", f"duplicate id '{obj['id']}' (first on line {seen[obj['id']]})")
        seen[obj["id"]] = lineno
        attrs = obj.get("attributes", [])
        if not isinstance(attrs, list) or not all(isinstance(a, str) and a.strip() for a in attrs):
            raise DataError(p, lineno, "attributes", "expected a list of non-empty strings")
        pref = obj.get("preference", " ".join(attrs))
        if not isinstance(pref, str) or not pref.strip():
            raise DataError(p, lineno, "preference", "missing (and no attributes to default to)")
        rows.append(dict(id=obj["id"], prompt=obj["prompt"], question=obj["prompt"], attributes=attrs,
                         preference=pref, split=obj.get("split"), prompt_id=obj.get("prompt_id") or obj["prompt"]))
    if all(r["split"] is None for r in rows) and len({r["prompt_id"] for r in rows}) >= len(SPLITS):
        for split, items in group_split(rows, by=lambda r: r["prompt_id"], fractions=SPLITS, seed=seed).items():
            for r in items:
                r["split"] = split
    return [dspy.Example(**r).with_inputs(*inputs()) for r in rows]


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.respond.RespondSignature`), in order."""
    from personalign.signatures.respond import RespondSignature

    return tuple(RespondSignature.input_fields)

__all__ = ["load_respond"]
