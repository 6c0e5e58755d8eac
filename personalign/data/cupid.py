"""Loader for CUPID (kixlab/CUPID; "Evaluating Personalized and Contextualized Alignment of
LLMs from Interactions", COLM 2025; CC-BY-4.0).

Published schema (Hugging Face ``kixlab/CUPID``, ``test.parquet``; one row per instance)::

    persona_id                     str    e.g. "148+real_estate_developer"
    instance_type                  str    consistent | contrastive | changing
    current_request                str    the user's new request
    current_context_factor         str    the context the request involves
    current_contextual_preference  str    gold preference to infer and satisfy
    current_checklist              list[str]  2–4 yes/no checks for a response
    prior_interactions             list[{context_factor, contextual_preference,
                                          dialogue: [{role, content}]}]   (8 sessions)

Accepted files: the parquet (needs ``pyarrow``), a JSON array of rows, or JSONL (one row
per line). The assumed schema is exactly the list above; unknown extra columns are ignored.
Ids are ``cupid:<row number>:<persona_id>`` (rows are not otherwise keyed upstream).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from personalign.data.files import array_element_lines, check_file, iter_jsonl, read_json, require
from personalign.data.schemas import ExtractionExample, Session, Turn, UserHistory
from personalign.errors import DataError

__all__ = ["CupidInstance", "load_cupid", "cupid_extraction"]

INSTANCE_TYPES = ("consistent", "contrastive", "changing")


class CupidInstance(BaseModel):
    """One CUPID evaluation instance (see the module docstring for the schema)."""

    model_config = ConfigDict(frozen=True)

    id: str
    persona_id: str
    instance_type: Literal["consistent", "contrastive", "changing"]
    current_request: str
    current_context_factor: str
    current_contextual_preference: str
    current_checklist: list[str]
    prior_sessions: list[Session]

    def history(self) -> UserHistory:
        """The prior sessions as a :class:`UserHistory` of ``cupid:<persona_id>``."""
        return UserHistory(user_id=f"cupid:{self.persona_id}", sessions=list(self.prior_sessions))


def _to_py(v: Any) -> Any:
    # pyarrow/numpy containers → plain lists/dicts
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, dict):
        return {k: _to_py(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_to_py(x) for x in v]
    return v


def _parse(row: Any, rownum: int, path, line: int | None) -> CupidInstance:
    if not isinstance(row, dict):
        raise DataError(path, line, None, f"row {rownum}: expected an object, got {type(row).__name__}")
    persona = require(row, "persona_id", str, path, line)
    itype = require(row, "instance_type", str, path, line)
    if itype not in INSTANCE_TYPES:
        raise DataError(path, line, "instance_type", f"'{itype}' not one of {', '.join(INSTANCE_TYPES)}")
    checklist = require(row, "current_checklist", list, path, line)
    for i, c in enumerate(checklist):
        if not isinstance(c, str):
            raise DataError(path, line, f"current_checklist.{i}", "expected a string")
    prior = require(row, "prior_interactions", list, path, line)
    sessions = []
    for i, s in enumerate(prior):
        w = f"prior_interactions.{i}."
        cf = require(s, "context_factor", str, path, line, where=w)
        pref = require(s, "contextual_preference", str, path, line, where=w)
        dialogue = require(s, "dialogue", list, path, line, where=w)
        turns = []
        for j, t in enumerate(dialogue):
            wt = f"{w}dialogue.{j}."
            role = require(t, "role", str, path, line, where=wt)
            if role not in ("user", "assistant", "system"):
                raise DataError(path, line, wt + "role", f"expected user, assistant or system, got '{role}'")
            turns.append(Turn(role=role, content=require(t, "content", str, path, line, where=wt, allow_empty=True)))
        sessions.append(Session(id=f"{rownum}.{i}", turns=turns, context_factor=cf, preference=pref))
    return CupidInstance(
        id=f"cupid:{rownum}:{persona}", persona_id=persona, instance_type=itype,
        current_request=require(row, "current_request", str, path, line),
        current_context_factor=require(row, "current_context_factor", str, path, line),
        current_contextual_preference=require(row, "current_contextual_preference", str, path, line),
        current_checklist=checklist, prior_sessions=sessions)


def _rows(p: Path) -> Iterator[tuple[int | None, Any]]:
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataError(p, None, None, "reading parquet needs pyarrow (pip install pyarrow), or convert to JSONL") from None
        try:
            table = pq.read_table(p)
        except Exception as exc:  # pyarrow raises ArrowInvalid and OSError variants
            raise DataError(p, None, None, f"not a readable parquet file ({exc.__class__.__name__})") from None
        for row in table.to_pylist():
            yield None, _to_py(row)
    elif suffix == ".jsonl":
        for lineno, obj in iter_jsonl(p):
            yield lineno, obj
    else:
        data = read_json(p)
        if isinstance(data, dict) and isinstance(data.get("rows"), list):
            data = data["rows"]
        if not isinstance(data, list):
            raise DataError(p, 1, None, f"expected a JSON array of rows, got {type(data).__name__}")
        if not data:
            raise DataError(p, None, None, "no rows (empty array)")
        starts = array_element_lines(p, len(data))
        for row, line in zip(data, starts):
            yield line, row


def load_cupid(path: str | os.PathLike) -> list[CupidInstance]:
    """Load CUPID instances from ``.parquet``, ``.json`` (array) or ``.jsonl``.

    Raises:
        DataError: unreadable file, missing/mistyped field (named with its path inside the
            row, e.g. ``prior_interactions.3.dialogue.0.role``), unknown ``instance_type``,
            no rows.
    """
    p = check_file(path, what="CUPID file")
    out = [_parse(row, i, p, line if line is not None else None) for i, (line, row) in enumerate(_rows(p))]
    if not out:
        raise DataError(p, None, None, "no rows")
    return out


def cupid_extraction(instances: list[CupidInstance]) -> list[ExtractionExample]:
    """Preference-inference targets: all prior sessions (in order) followed by the current
    request as a final user turn; gold = ``current_contextual_preference``."""
    out = []
    for inst in instances:
        turns = [t for s in inst.prior_sessions for t in s.turns] + [Turn(role="user", content=inst.current_request)]
        out.append(ExtractionExample(id=f"{inst.id}:ext", conversation=turns,
                                     gold_attributes=[inst.current_contextual_preference],
                                     user_id=f"cupid:{inst.persona_id}", topic=inst.current_context_factor))
    return out
