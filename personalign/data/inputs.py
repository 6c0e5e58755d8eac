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
        for key in unit_fields:
            if rec.get(key) is None:
                raise DataError(path, line, key, "missing (the program decides within units of "
                                                 f"{'+'.join(unit_fields)}: every row needs them)")
        if "id" in rec and rec["id"] is None:
            raise DataError(path, line, "id", "null; give a string id or leave the field out")
        if "id" in rec and not isinstance(rec["id"], str):
            raise DataError(path, line, "id", f"expected a string, got {type(rec['id']).__name__}")
        out.append((line, dspy.Example(**rec).with_inputs(*inputs)))
    return out


__all__ = ["read_inputs"]
