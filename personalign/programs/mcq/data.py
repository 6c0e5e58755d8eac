"""Loader of the ``mcq`` stage: multiple-choice questions as ``dspy.Example`` with a split.

Accepted inputs (``load_mcq(path)``):

* **PrefEval** -- the root (holding ``mcq_options/``), the ``mcq_options/`` folder or one of its
  ``<topic>.json`` files: :func:`personalign.data.prefeval_mcq` (options shuffled with seed 0,
  gold tracked; ``context`` = the stated preference). A path inside
  ``implicit_preference/choice-based/`` gives :func:`personalign.data.prefeval_choice_mcq`
  instead. Split **by topic** (:func:`split_by_topic`).
* **PersonaMem** -- a questions ``.csv`` with its ``shared_contexts_*.jsonl`` beside it
  (:func:`personalign.data.load_personamem`; a missing contexts file is a DataError naming it);
  split by persona.
* **canonical JSONL** -- one :class:`~personalign.data.MCQExample` per line, plus an optional
  ``attributes`` list of strings (extracted attributes of the user). Lines without ``split`` are
  split by topic.

Every example carries ``context``, ``question``, ``options``, ``attributes`` (inputs),
``gold_index`` (label), ``split``, ``topic``, ``user_id``, ``prompt_id``. PrefEval and PersonaMem
carry no extracted attributes (``attributes=[]``); attach them with :func:`attach_attributes`
from an attributes JSONL (:func:`read_attributes`), e.g. Stage 1 output.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from personalign.errors import DataError
SPLIT_FRACTIONS = {"train": 0.5, "val": 0.25, "test": 0.25}


def split_by_topic(items: Sequence, *, seed: int = 0, fractions: Mapping[str, float] | None = None) -> list:
    """Copies of pydantic examples, in input order, with ``split`` set so that no topic is in two splits (train/val/test =
    0.5/0.25/0.25 of the rows by default; seeded, order-independent --
    :func:`personalign.data.group_split`). With fewer topics than splits, whole prompts
    (``prompt_id``) are split instead."""
    from personalign.data.splits import group_split

    fr = dict(fractions or SPLIT_FRACTIONS)
    items = list(items)
    topics = {getattr(x, "topic", None) for x in items}
    by = "topic" if None not in topics and len(topics) >= len(fr) else "prompt"
    where = {id(x): name for name, part in group_split(items, by=by, fractions=fr, seed=seed).items() for x in part}
    return [x.model_copy(update={"split": where[id(x)]}) for x in items]  # input order kept


def _to_example(ex, attributes: list[str] | None = None):
    d = ex.to_dspy()
    d = d.copy(attributes=list(attributes or []))
    return d.with_inputs(*inputs())


def _prefeval(p: Path, seed: int) -> list:
    from personalign.data import load_prefeval, prefeval_choice_mcq, prefeval_mcq

    if "choice-based" in p.resolve().parts:
        items = prefeval_choice_mcq(load_prefeval(p, "choice"), seed=seed)
    else:
        items = prefeval_mcq(load_prefeval(p, "mcq"), seed=seed)
    return split_by_topic(items, seed=seed)


def _canonical(p: Path, seed: int) -> tuple[list, dict[str, list[str]]]:
    from personalign.data.canonical import validate_row
    from personalign.data.files import iter_jsonl
    from personalign.data.schemas import MCQExample

    items, attrs, seen = [], {}, {}
    for lineno, obj in iter_jsonl(p):
        obj = dict(obj)
        a = obj.pop("attributes", [])
        if not isinstance(a, list) or not all(isinstance(x, str) for x in a):
            raise DataError(p, lineno, "attributes", "expected a list of strings")
        ex = validate_row(MCQExample, obj, p, lineno, seen)
        items.append(ex)
        attrs[ex.id] = a
    if all(ex.split is None for ex in items):
        items = split_by_topic(items, seed=seed)
    return items, attrs


def load_mcq(path: str | os.PathLike, *, seed: int = 0) -> list:
    """Multiple-choice examples of ``path`` (see the module docstring) as ``dspy.Example``s with
    inputs ``context, question, options, attributes`` and gold ``gold_index``.

    Raises:
        DataError: missing or malformed file (names file, line, field), unknown format.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix.lower() == ".json":
        return [_to_example(ex) for ex in _prefeval(p, seed)]
    if p.suffix.lower() == ".csv":
        from personalign.data import load_personamem
        from personalign.data.splits import assign_split, group_split

        items = load_personamem(p)
        users = {x.user_id for x in items}
        if len(users) >= len(SPLIT_FRACTIONS):
            items = assign_split(group_split(items, by="user", fractions=SPLIT_FRACTIONS, seed=seed))
        return [_to_example(ex) for ex in items]
    if p.suffix.lower() == ".jsonl":
        items, attrs = _canonical(p, seed)
        return [_to_example(ex, attrs.get(ex.id)) for ex in items]
    raise DataError(p, None, None, "unknown multiple-choice format: expected a PrefEval folder or .json file, "
                                   "a PersonaMem questions .csv, or canonical MCQ .jsonl")


def read_attributes(path: str | os.PathLike) -> dict[str, list[str]]:
    """Attributes per user from JSONL: either ``{"user_id", "attributes": [str | {"text": str}]}``
    per line, or one attribute per line ``{"user_id", "text"}`` (Stage 1 output; lines of one user
    are concatenated in file order).

    Returns:
        user_id -> attribute texts.

    Raises:
        DataError: missing file, a line without ``user_id``, an attribute that is not a non-empty
            string or an object with a non-empty ``text``.
    """
    from personalign.data.files import iter_jsonl

    out: dict[str, list[str]] = {}
    for lineno, obj in iter_jsonl(path):
        uid = obj.get("user_id")
        if not isinstance(uid, str) or not uid:
            raise DataError(path, lineno, "user_id", "missing or not a non-empty string")
        if "attributes" in obj:
            raw = obj["attributes"]
            if not isinstance(raw, list):
                raise DataError(path, lineno, "attributes", f"expected a list, got {type(raw).__name__}")
            field = "attributes"
        elif "text" in obj:
            raw, field = [obj], "text"
        else:
            raise DataError(path, lineno, "attributes", "expected an 'attributes' list or a 'text' field")
        for i, a in enumerate(raw):
            text = a.get("text") if isinstance(a, dict) else a
            if not isinstance(text, str) or not text.strip():
                raise DataError(path, lineno, f"{field}.{i}" if field == "attributes" else "text",
                                "expected a non-empty string (or an object with one in 'text')")
            out.setdefault(uid, []).append(text.strip())
    return out


def attach_attributes(examples: Iterable, attributes: Mapping[str, Sequence[str]]) -> list:
    """Copies of ``examples`` whose ``attributes`` are those of their ``user_id`` (``[]`` when the
    user has none); inputs re-marked."""
    out = []
    for ex in examples:
        uid = getattr(ex, "user_id", None)
        out.append(ex.copy(attributes=list(attributes.get(uid, []) if uid else [])).with_inputs(*inputs()))
    return out


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.mcq.MCQTaskSignature`), in order."""
    from personalign.signatures.mcq import MCQTaskSignature

    return tuple(MCQTaskSignature.input_fields)

__all__ = ["SPLIT_FRACTIONS", "load_mcq", "read_attributes", "attach_attributes", "split_by_topic"]
