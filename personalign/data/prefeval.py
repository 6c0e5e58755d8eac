"""Loaders for the PrefEval benchmark (amazon-science/PrefEval, ``benchmark_dataset/``).

Layout (one JSON array of records per topic file ``<topic>.json``)::

    explicit_preference/                  preference, question, explanation
    implicit_preference/persona-driven/   + persona, conversation {"0": {user, assistant}, ...}
    implicit_preference/choice-based/     + implicit_query, options, aligned_op,
                                            conversation {query, assistant_options,
                                            user_selection, assistant_acknowledgment}
    mcq_options/                          + classification_task_options (4; the FIRST one
                                            follows the preference), violation_probability

Records are loaded independently per folder: the folders hold the same preferences in the
same order in most topics but with small wording differences, so they are not joined.

Each record gets ``id = prefeval:<kind>:<topic>:<index>`` (0-based position in its topic
file), ``user_id = prefeval:<topic>:<index>`` (one synthetic user per record) and
``prompt_id = prefeval:q:<sha1(question)[:10]>`` (identical questions share a group).
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, ConfigDict

from personalign.data.files import array_element_lines, read_json, require
from personalign.data.schemas import MCQExample, Turn
from personalign.errors import DataError

__all__ = [
    "PREFEVAL_KINDS",
    "PrefEvalRecord",
    "load_prefeval",
    "load_prefeval_file",
    "prefeval_mcq",
    "prefeval_choice_mcq",
    "question_id",
    "render_turns",
]

PrefEvalKind = Literal["explicit", "persona", "choice", "mcq"]
PREFEVAL_KINDS: dict[str, str] = {
    "explicit": "explicit_preference",
    "persona": "implicit_preference/persona-driven",
    "choice": "implicit_preference/choice-based",
    "mcq": "mcq_options",
}


def question_id(question: str) -> str:
    """Group key of a question text: ``prefeval:q:<sha1[:10]>``."""
    return "prefeval:q:" + hashlib.sha1(question.strip().encode("utf-8")).hexdigest()[:10]


class PrefEvalRecord(BaseModel):
    """One PrefEval record of any folder; fields absent from a folder are None.

    ``conversation`` is the persona-driven or choice-based conversation as turns;
    ``options``/``aligned_index`` come from choice-based records (``aligned_op`` located in
    ``options``); ``mcq_options`` keeps the upstream order (index 0 is the correct one).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    topic: str
    index: int
    preference: str
    question: str
    explanation: str = ""
    persona: str | None = None
    conversation: list[Turn] | None = None
    implicit_query: str | None = None
    options: list[str] | None = None
    aligned_index: int | None = None
    mcq_options: list[str] | None = None
    violation_probability: float | None = None

    @property
    def user_id(self) -> str:
        return f"prefeval:{self.topic}:{self.index}"

    @property
    def prompt_id(self) -> str:
        return question_id(self.question)


def render_turns(turns: Iterable[Turn]) -> str:
    """Plain-text rendering of turns, one ``Role: content`` paragraph each."""
    return "\n\n".join(f"{t.role.capitalize()}: {t.content}" for t in turns)


def _str_list(rec: dict, field: str, path, line, *, n: int | None = None) -> list[str]:
    vals = require(rec, field, list, path, line)
    if n is not None and len(vals) != n:
        raise DataError(path, line, field, f"expected {n} options, got {len(vals)}")
    if len(vals) < 2:
        raise DataError(path, line, field, f"expected at least 2 options, got {len(vals)}")
    for i, v in enumerate(vals):
        if not isinstance(v, str) or not v.strip():
            raise DataError(path, line, f"{field}.{i}", "expected a non-empty string")
    return vals


def _parse(rec: dict, kind: str, topic: str, index: int, path, line: int | None) -> PrefEvalRecord:
    if not isinstance(rec, dict):
        raise DataError(path, line, None, f"record {index}: expected an object, got {type(rec).__name__}")
    base = dict(
        id=f"prefeval:{kind}:{topic}:{index}", kind=kind, topic=topic, index=index,
        preference=require(rec, "preference", str, path, line),
        question=require(rec, "question", str, path, line),
        explanation=require(rec, "explanation", str, path, line, allow_empty=True) if "explanation" in rec else "",
    )
    if kind == "persona":
        base["persona"] = require(rec, "persona", str, path, line)
        conv = require(rec, "conversation", dict, path, line)
        if not conv:
            raise DataError(path, line, "conversation", "empty conversation")
        turns: list[Turn] = []
        try:
            keys = sorted(conv, key=int)
        except ValueError:
            bad = next(k for k in conv if not k.lstrip("-").isdigit())
            raise DataError(path, line, f"conversation.{bad}", "turn keys must be integers (\"0\", \"1\", ...)") from None
        for k in keys:
            where = f"conversation.{k}."
            t = conv[k]
            turns.append(Turn(role="user", content=require(t, "user", str, path, line, where=where)))
            turns.append(Turn(role="assistant", content=require(t, "assistant", str, path, line, where=where)))
        base["conversation"] = turns
    elif kind == "choice":
        base["implicit_query"] = require(rec, "implicit_query", str, path, line)
        options = _str_list(rec, "options", path, line)
        aligned = require(rec, "aligned_op", str, path, line)
        if aligned not in options:
            raise DataError(path, line, "aligned_op", "not one of the options")
        conv = require(rec, "conversation", dict, path, line)
        w = "conversation."
        base["conversation"] = [
            Turn(role="user", content=require(conv, "query", str, path, line, where=w)),
            Turn(role="assistant", content=require(conv, "assistant_options", str, path, line, where=w)),
            Turn(role="user", content=require(conv, "user_selection", str, path, line, where=w)),
            Turn(role="assistant", content=require(conv, "assistant_acknowledgment", str, path, line, where=w)),
        ]
        base["options"] = options
        base["aligned_index"] = options.index(aligned)
    elif kind == "mcq":
        base["mcq_options"] = _str_list(rec, "classification_task_options", path, line, n=4)
        vp = rec.get("violation_probability")
        if vp is not None and (isinstance(vp, bool) or not isinstance(vp, (int, float))):
            raise DataError(path, line, "violation_probability", f"expected number or null, got {type(vp).__name__}")
        base["violation_probability"] = None if vp is None else float(vp)
    return PrefEvalRecord(**base)


def load_prefeval_file(path: str | os.PathLike, kind: PrefEvalKind, *, topic: str | None = None) -> list[PrefEvalRecord]:
    """Load one PrefEval topic file of a given kind (``topic`` defaults to the file stem).

    Raises:
        DataError: unreadable/empty/invalid JSON, not an array, a record missing or
            mistyping a field (the message names the record's starting line and the field),
            choice-based ``aligned_op`` not among ``options``, MCQ without exactly 4 options.
    """
    if kind not in PREFEVAL_KINDS:
        raise DataError(path, None, None, f"unknown PrefEval kind '{kind}'; choose from {', '.join(PREFEVAL_KINDS)}")
    p = Path(path)
    data = read_json(p)
    if not isinstance(data, list):
        raise DataError(p, 1, None, f"expected a JSON array of records, got {type(data).__name__}")
    if not data:
        raise DataError(p, None, None, "no records (empty array)")
    starts = array_element_lines(p, len(data))
    topic = topic or p.stem
    return [_parse(rec, kind, topic, i, p, starts[i]) for i, rec in enumerate(data)]


def load_prefeval(path: str | os.PathLike, kind: PrefEvalKind, *, topics: Iterable[str] | None = None) -> list[PrefEvalRecord]:
    """Load PrefEval records of one kind.

    Args:
        path: the PrefEval root (holding ``explicit_preference/`` etc.), the kind's folder
            (e.g. ``mcq_options/``), or one topic ``.json`` file.
        kind: ``explicit``, ``persona`` (implicit persona-driven), ``choice`` (implicit
            choice-based) or ``mcq``.
        topics: keep only these topic names (file stems); unknown names raise DataError.

    Returns:
        records ordered by topic name, then by position in the topic file.
    """
    p = Path(path)
    if kind not in PREFEVAL_KINDS:
        raise DataError(p, None, None, f"unknown PrefEval kind '{kind}'; choose from {', '.join(PREFEVAL_KINDS)}")
    if p.is_file():
        return load_prefeval_file(p, kind)
    if not p.exists():
        raise DataError(p, None, None, "PrefEval path not found")
    folder = p / PREFEVAL_KINDS[kind] if (p / PREFEVAL_KINDS[kind]).is_dir() else p
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DataError(folder, None, None, f"no <topic>.json files for PrefEval kind '{kind}'")
    if topics is not None:
        wanted = list(topics)
        have = {f.stem: f for f in files}
        unknown = [t for t in wanted if t not in have]
        if unknown:
            raise DataError(folder, None, "topics", f"unknown topic(s) {', '.join(unknown)}; available: {', '.join(sorted(have))}")
        files = [have[t] for t in sorted(set(wanted))]
    out: list[PrefEvalRecord] = []
    for f in files:
        out.extend(load_prefeval_file(f, kind))
    return out


def _rng(seed: int, key: str) -> random.Random:
    # per-record generator: the result for a record does not depend on which other records
    # are loaded or on their order
    return random.Random(f"{seed}:{key}")


def prefeval_mcq(records: Iterable[PrefEvalRecord], *, seed: int = 0) -> list[MCQExample]:
    """MCQ examples from ``mcq`` records: options shuffled with a fixed seed, gold tracked.

    Upstream the first ``classification_task_options`` entry is the one that follows the
    preference. Each record's options are permuted by ``random.Random(f"{seed}:{id}")`` and
    ``gold_index`` is where that first option lands. ``context`` is the stated preference
    (the explicit setting); ``question`` the user's question.
    """
    out = []
    for r in records:
        if r.mcq_options is None:
            raise DataError(r.id, None, "classification_task_options", "not an mcq record")
        order = list(range(len(r.mcq_options)))
        _rng(seed, r.id).shuffle(order)
        options = [r.mcq_options[i] for i in order]
        out.append(MCQExample(id=r.id, context=r.preference, question=r.question, options=options,
                              gold_index=order.index(0), user_id=r.user_id, prompt_id=r.prompt_id,
                              topic=r.topic))
    return out


def prefeval_choice_mcq(records: Iterable[PrefEvalRecord], *, seed: int = 0) -> list[MCQExample]:
    """MCQ examples from ``choice`` records: pick the option consistent with the preference.

    ``context`` is the stated preference, ``question`` the record's ``implicit_query`` and
    ``options`` its options shuffled with ``random.Random(f"{seed}:{id}")``; the gold is
    ``aligned_op``. The choice conversation is *not* the context: its ``user_selection``
    names the answer. (Use :func:`~personalign.data.derive.extraction_targets` to recover the
    preference from that conversation instead.)
    """
    out = []
    for r in records:
        if r.options is None or r.aligned_index is None:
            raise DataError(r.id, None, "options", "not a choice-based record")
        order = list(range(len(r.options)))
        _rng(seed, r.id).shuffle(order)
        out.append(MCQExample(id=r.id, context=r.preference, question=r.implicit_query or r.question,
                              options=[r.options[i] for i in order], gold_index=order.index(r.aligned_index),
                              user_id=r.user_id, prompt_id=question_id(r.implicit_query or r.question),
                              topic=r.topic))
    return out
