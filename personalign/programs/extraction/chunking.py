"""Split a user's history into chunks of user turns, on turn boundaries.

Each user turn is rendered ``[turn N] content`` (``N`` = 0-based position of the turn in the
conversation, so evidence ids point into the conversation) and turns are packed greedily, in
order, into chunks of at most ``max_chars`` characters (the study's 50,000, or less when the model's
context is smaller). Assistant turns are not included: only what the user wrote is evidence
about the user. A single turn longer than ``max_turn_chars`` (default 20,000) keeps its beginning
(``" [...]"`` marks the cut; a 5 MB paste is mostly task content, not facts about the user); a
turn that alone exceeds ``max_chars`` is split into consecutive parts ``[turn N, part k/n]``,
each in its own chunk, so no chunk is ever longer than ``max_chars``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

MAX_CHUNK_CHARS = 50_000
MAX_TURN_CHARS = 20_000


@dataclass
class Chunk:
    """One chunk: its rendered ``text`` (<= max_chars) and the ids of the user turns in it."""

    text: str
    turn_ids: list[int] = field(default_factory=list)


@dataclass
class Chunking:
    """Chunks of a history, with ``truncated_turns`` (ids of user turns cut to ``max_turn_chars``)
    and ``n_user_turns``."""

    chunks: list[Chunk]
    n_user_turns: int
    truncated_turns: list[int] = field(default_factory=list)


def chunk_user_turns(turns: Sequence, *, max_chars: int = MAX_CHUNK_CHARS,
                     max_turn_chars: int = MAX_TURN_CHARS) -> Chunking:
    """Chunks of the user turns of ``turns`` (:class:`~personalign.data.schemas.Turn` objects,
    see :func:`personalign.preprocess.normalize_turns`). Blank user turns are skipped; no user
    turn gives no chunk.

    Raises:
        ValueError: ``max_chars`` < 100 or ``max_turn_chars`` < 1.
    """
    if max_chars < 100:
        raise ValueError(f"max_chars must be >= 100, got {max_chars}")
    if max_turn_chars < 1:
        raise ValueError(f"max_turn_chars must be >= 1, got {max_turn_chars}")
    pieces: list[tuple[int, str]] = []
    truncated: list[int] = []
    n_user = 0
    for i, t in enumerate(turns):
        if t.role != "user" or not t.content.strip():
            continue
        n_user += 1
        content = t.content.strip()
        if len(content) > max_turn_chars:
            content = content[: max_turn_chars - 6].rstrip() + " [...]"
            truncated.append(i)
        text = f"[turn {i}] {content}"
        if len(text) <= max_chars:
            pieces.append((i, text))
            continue
        head = f"[turn {i}, part 00/00] "
        size = max_chars - len(head) - 8
        parts = [content[k:k + size] for k in range(0, len(content), size)]
        for k, part in enumerate(parts, 1):
            pieces.append((i, f"[turn {i}, part {k}/{len(parts)}] {part}"))
    chunks: list[Chunk] = []
    cur: list[str] = []
    ids: list[int] = []
    size = 0
    for i, text in pieces:
        extra = len(text) + (2 if cur else 0)
        if cur and size + extra > max_chars:
            chunks.append(Chunk("\n\n".join(cur), ids))
            cur, ids, size = [], [], 0
            extra = len(text)
        cur.append(text)
        if i not in ids:
            ids.append(i)
        size += extra
    if cur:
        chunks.append(Chunk("\n\n".join(cur), ids))
    return Chunking(chunks, n_user, truncated)


__all__ = ["Chunk", "Chunking", "chunk_user_turns", "MAX_CHUNK_CHARS", "MAX_TURN_CHARS"]
