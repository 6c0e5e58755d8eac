"""Unlabelled rows for batch prediction: a JSONL file whose rows carry a stage's input fields.

A row is one JSON object holding every input field of the stage's signature (a ``str`` field must
hold a string), an optional ``id`` (a string, echoed in the output) and, when the program decides
within units (a rank, top-share, z-score or offset rule), the unit's fields (relevance:
``prompt_id`` and ``user_id``). Other fields are kept on the example and ignored. No label, no
``split``: this is the data a compiled program is used on, not scored on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from personalign.errors import DataError


def _annotation(signature, name: str) -> Any:
    field = signature.input_fields[name]
    return getattr(field, "annotation", None)


def check_group_fields(rec: dict, keys: Sequence[str], path: str | Path, line: int | None, *,
                       role: str = "the stage's group field") -> None:
    """Each of ``keys`` in the row ``rec`` is present and a string or an integer: a group, decision
    or unit field names the group a row belongs to (held-out groups, strata, a rule's unit), so a
    list, an object, a boolean, a float or null is refused (a list or object cannot key a group;
    ``1.0`` and ``true`` would silently join the group ``1``).

    Used by :func:`read_inputs` (a unit rule's fields) and by the stage-file loader for the
    stage's ``group_key`` and ``decision_keys``.

    Raises:
        DataError: one line naming the file, the line and the field.
    """
    for key in keys:
        value = rec.get(key)
        if value is None:
            raise DataError(path, line, key, f"missing: {role}, every row needs it")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            kind = {dict: "an object", list: "a list", bool: "a boolean", float: "a number with a fraction"}.get(
                type(value), type(value).__name__)
            raise DataError(path, line, key, f"{kind} ({value!r:.40}): {role} must be a string or an integer")


def read_inputs(path: str | Path, stage, *, unit_fields: Sequence[str] = ()) -> list[tuple[int, Any]]:
    """``(line, dspy.Example)`` per row of ``path``, with the stage's inputs marked.

    Args:
        path: JSONL file, one object per line (blank lines skipped).
        stage: a :class:`~personalign.stages.Stage`; its signature names the inputs.
        unit_fields: fields every row must carry besides the inputs (a unit rule's unit).

    Raises:
        DataError: the first bad row: not an object, a missing input or unit field, an input
            declared ``str`` holding another type, a non-string ``id``; or what
            :func:`~personalign.data.files.iter_jsonl` refuses (invalid JSON, an empty file). The
            message names the file, the line and the field.
    """
    import dspy

    from personalign.data.files import iter_jsonl

    signature = stage.signature_class
    inputs = stage.inputs
    out = []
    for line, rec in iter_jsonl(path):
        for key in inputs:
            if key not in rec:
                raise DataError(path, line, key, f"missing (an input of stage {stage.name}: {', '.join(inputs)})")
            if rec[key] is None:
                raise DataError(path, line, key, "null; every input needs a value")
            if _annotation(signature, key) is str and not isinstance(rec[key], str):
                raise DataError(path, line, key, f"expected a string, got {type(rec[key]).__name__}")
        check_group_fields(rec, unit_fields, path, line,
                           role=f"a field of the program's decision unit ({'+'.join(unit_fields)})")
        if "id" in rec and rec["id"] is None:
            raise DataError(path, line, "id", "null; give a string id or leave the field out")
        if "id" in rec and not isinstance(rec["id"], str):
            raise DataError(path, line, "id", f"expected a string, got {type(rec['id']).__name__}")
        out.append((line, dspy.Example(**rec).with_inputs(*inputs)))
    return out


__all__ = ["check_group_fields", "read_inputs"]
