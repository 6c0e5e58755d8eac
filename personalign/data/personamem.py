"""Loader for PersonaMem (bowen-upenn/PersonaMem; "Know Me, Respond to Me", COLM 2025).

Published format (one pair of files per context length, e.g. ``questions_32k.csv`` with
``shared_contexts_32k.jsonl``):

* questions CSV with header columns ``persona_id, question_id, question_type, topic,
  context_length_in_tokens, context_length_in_bytes, num_irrelevant_tokens,
  end_index_in_shared_context, user_question_or_message, correct_answer, all_options,
  shared_context_id``. ``correct_answer`` is an option label such as ``(c)``;
  ``all_options`` lists four options labelled ``(a)``–``(d)`` (upstream stores a Python/JSON
  list literal; a plain ``(a) ... (b) ...`` string is also accepted).
* shared contexts JSONL: one object per line ``{"<shared_context_id>": [{"role", "content"},
  ...]}``. A question sees the messages ``[0, end_index_in_shared_context)`` of its context.

The contexts file is separate and may be absent: it is resolved next to the CSV
(``questions_<suffix>.csv`` → ``shared_contexts_<suffix>.jsonl``) unless given, and a
missing file is a DataError naming it. Only the contexts the CSV references are kept.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
from pathlib import Path

from personalign.data.files import check_file, iter_jsonl, read_text
from personalign.data.prefeval import render_turns
from personalign.data.schemas import MCQExample, Turn
from personalign.errors import DataError

__all__ = ["PERSONAMEM_COLUMNS", "load_personamem", "parse_options", "default_contexts_path"]

PERSONAMEM_COLUMNS = (
    "persona_id", "question_id", "question_type", "topic", "context_length_in_tokens",
    "context_length_in_bytes", "num_irrelevant_tokens", "end_index_in_shared_context",
    "user_question_or_message", "correct_answer", "all_options", "shared_context_id",
)
REQUIRED = ("persona_id", "question_id", "question_type", "topic", "end_index_in_shared_context",
            "user_question_or_message", "correct_answer", "all_options", "shared_context_id")
_LABEL = re.compile(r"^\s*\(([a-z])\)\s*", re.IGNORECASE)


def default_contexts_path(questions_csv: str | os.PathLike) -> Path:
    """``.../questions_32k.csv`` → ``.../shared_contexts_32k.jsonl``."""
    p = Path(questions_csv)
    stem = p.stem
    suffix = stem[len("questions"):] if stem.startswith("questions") else ""
    return p.with_name(f"shared_contexts{suffix}.jsonl")


def _csv_rows(reader: csv.DictReader, path: Path):
    """The rows of ``reader``; a CSV syntax error (e.g. a field over the size limit) is a DataError."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(path, reader.line_num, None, f"invalid CSV: {exc}") from None
        yield row


def parse_options(raw: str) -> list[str]:
    """Option texts (labels ``(a) `` stripped) from ``all_options``. Raises ValueError."""
    raw = raw.strip()
    items = None
    if raw.startswith("["):
        try:
            items = json.loads(raw)
        except (ValueError, RecursionError):
            try:
                items = ast.literal_eval(raw)  # a Python list literal; never evaluates code
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                raise ValueError("not a valid list literal") from None
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise ValueError("expected a list of strings")
    else:
        parts = re.split(r"(?=\([a-z]\)\s)", raw)
        items = [x for x in (p.strip() for p in parts) if x]
    opts = [_LABEL.sub("", x, count=1).strip() for x in items]
    if len(opts) < 2 or any(not o for o in opts):
        raise ValueError(f"expected at least 2 non-empty options, got {len(opts)}")
    return opts


def _answer_index(raw: str) -> int:
    m = re.fullmatch(r"\s*\(?([a-z])\)?\s*", raw, re.IGNORECASE)
    if not m:
        raise ValueError("expected an option label like (a)")
    return ord(m.group(1).lower()) - ord("a")


def _load_contexts(path: Path, wanted: set[str]) -> dict[str, list[Turn]]:
    out: dict[str, list[Turn]] = {}
    for lineno, obj in iter_jsonl(path):
        if len(obj) != 1:
            raise DataError(path, lineno, None, f"expected one {{shared_context_id: messages}} pair, got {len(obj)} keys")
        (sid, msgs), = obj.items()
        if sid not in wanted:
            continue
        if not isinstance(msgs, list):
            raise DataError(path, lineno, sid, f"expected a list of messages, got {type(msgs).__name__}")
        turns = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or not isinstance(m.get("content"), str):
                raise DataError(path, lineno, f"{sid}.{i}.content", "missing or not a string")
            role = m.get("role")
            if role not in ("user", "assistant", "system"):
                raise DataError(path, lineno, f"{sid}.{i}.role", f"expected user, assistant or system, got {role!r}")
            turns.append(Turn(role=role, content=m["content"]))
        out[sid] = turns
    return out


def load_personamem(questions_csv: str | os.PathLike, contexts_jsonl: str | os.PathLike | None = None, *,
                    include_context: bool = True) -> list[MCQExample]:
    """Load PersonaMem questions as :class:`MCQExample` (0-based ``gold_index``).

    ``context`` is the rendered conversation prefix the question sees (empty when
    ``include_context`` is False, in which case the contexts file is not read). Group keys:
    ``user_id = personamem:<persona_id>``, ``prompt_id = personamem:<shared_context_id>``,
    ``topic``.

    Raises:
        DataError: missing CSV or contexts file (named), CSV header without a required
            column, an unreadable cell (names the CSV line and column), duplicate
            ``question_id``, a ``shared_context_id`` absent from the contexts file, an
            ``end_index`` beyond the context.
    """
    qpath = check_file(questions_csv, what="PersonaMem questions CSV")
    rows = []
    text = read_text(qpath, what="PersonaMem questions CSV")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames
    except csv.Error as exc:
        raise DataError(qpath, 1, None, f"invalid CSV: {exc}") from None
    if not header:
        raise DataError(qpath, None, None, "file is empty (no CSV header)")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DataError(qpath, 1, missing[0], f"missing column in CSV header (need {', '.join(REQUIRED)})")
    seen: dict[str, int] = {}
    for row in _csv_rows(reader, qpath):
        line = reader.line_num
        if None in row or any(row.get(c) is None for c in REQUIRED):
            raise DataError(qpath, line, None, f"expected {len(header)} columns")
        qid = row["question_id"].strip()
        if not qid:
            raise DataError(qpath, line, "question_id", "empty")
        if qid in seen:
            raise DataError(qpath, line, "question_id", f"duplicate id '{qid}' (first on line {seen[qid]})")
        seen[qid] = line
        try:
            end = int(row["end_index_in_shared_context"])
            if end < 0:
                raise ValueError
        except ValueError:
            raise DataError(qpath, line, "end_index_in_shared_context", f"expected a non-negative integer, got {row['end_index_in_shared_context']!r}") from None
        try:
            options = parse_options(row["all_options"])
        except ValueError as exc:
            raise DataError(qpath, line, "all_options", str(exc)) from None
        try:
            gold = _answer_index(row["correct_answer"])
        except ValueError as exc:
            raise DataError(qpath, line, "correct_answer", f"{exc}, got {row['correct_answer']!r}") from None
        if gold >= len(options):
            raise DataError(qpath, line, "correct_answer", f"{row['correct_answer']} but only {len(options)} options")
        for c in ("persona_id", "topic", "shared_context_id", "user_question_or_message"):
            if not row[c].strip():
                raise DataError(qpath, line, c, "empty")
        rows.append((line, row, end, options, gold))
    if not rows:
        raise DataError(qpath, None, None, "no question rows")
    contexts: dict[str, list[Turn]] = {}
    if include_context:
        cpath = Path(contexts_jsonl) if contexts_jsonl is not None else default_contexts_path(qpath)
        if not cpath.exists():
            raise DataError(cpath, None, None, f"PersonaMem shared-contexts file not found (needed by {qpath.name})")
        contexts = _load_contexts(cpath, {r[1]["shared_context_id"] for r in rows})
    out = []
    for line, row, end, options, gold in rows:
        sid = row["shared_context_id"]
        context = ""
        if include_context:
            if sid not in contexts:
                raise DataError(qpath, line, "shared_context_id", f"'{sid}' not in the shared-contexts file")
            turns = contexts[sid]
            if end > len(turns):
                raise DataError(qpath, line, "end_index_in_shared_context", f"{end} beyond the context's {len(turns)} messages")
            context = render_turns(turns[:end])
        out.append(MCQExample(id=f"personamem:{row['question_id'].strip()}", context=context,
                              question=row["user_question_or_message"], options=options, gold_index=gold,
                              user_id=f"personamem:{row['persona_id']}", prompt_id=f"personamem:{sid}",
                              topic=row["topic"]))
    return out
