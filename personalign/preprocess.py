"""Preprocessing of chat histories before Stage 1: input normalization, scripted-user detection,
activity filter and diversity metrics.

Source: the appendix of the seed study "Re-Centering Humans in LLM Personalization" (user
selection from real chat logs): users whose messages come from a script or template are dropped,
only active users are kept, and users are sampled for diversity of their attribute profiles.
The numbers below (120-character windows, stride 60, 5 turns with > 40% coverage or 8 turns;
>= 3 conversations and > 15 user turns; K = 17 attributes per generalist score) are the study's.

Importing this module is light (numpy and pydantic load inside the functions that need them).

Functions:

* :func:`normalize_turns` -- any turn list (``Turn`` models, ``{"role", "content"}`` dicts,
  ``(role, content)`` pairs) into validated :class:`~personalign.data.schemas.Turn` objects;
  bytes and lone surrogates (text that was not valid UTF-8) become U+FFFD replacement
  characters instead of crashing a tokenizer later.
* :func:`window_hashes`, :func:`detect_scripted_user`, :func:`scripted_users` -- repeated
  120-character windows across a user's turns.
* :func:`activity_filter` -- users with enough conversations and user turns.
* :func:`generalist_score`, :func:`quintile_bins`, :func:`farthest_point_sampling`,
  :func:`diverse_sample`, :func:`dataset_diversity` -- diversity of attribute embeddings
  (cosine distance = 1 - cosine similarity of L2-normalized vectors); defined in
  :mod:`personalign.diversity`, importable from here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from personalign.diversity import (  # noqa: F401  (public names of this module since the first release)
    dataset_diversity,
    diverse_sample,
    farthest_point_sampling,
    generalist_score,
    mean_pairwise_cosine_distance,
    quintile_bins,
)
from personalign.errors import DataError

__all__ = [
    "CONVERSATION",
    "clean_text",
    "normalize_turns",
    "user_turn_texts",
    "window_hashes",
    "ScriptedReport",
    "detect_scripted_user",
    "scripted_users",
    "activity_filter",
    "generalist_score",
    "quintile_bins",
    "farthest_point_sampling",
    "diverse_sample",
    "dataset_diversity",
    "mean_pairwise_cosine_distance",
]

CONVERSATION = "<conversation>"
"""The pseudo-path named by :class:`~personalign.errors.DataError` for in-memory input."""

_ROLES = ("user", "assistant", "system")
_ROLE_ALIASES = {"human": "user", "gpt": "assistant", "bot": "assistant", "model": "assistant"}
_SURROGATES = re.compile("[\ud800-\udfff]")


# --------------------------------------------------------------------------- input normalization
def clean_text(value: Any, *, where: str = "content", path: str = CONVERSATION) -> str:
    """Text of a message as a valid Unicode string.

    ``bytes`` are decoded as UTF-8 with invalid sequences replaced by U+FFFD; lone surrogates in a
    ``str`` (what ``surrogateescape`` decoding leaves for non-UTF-8 bytes) are replaced by U+FFFD;
    NUL characters are removed.

    Raises:
        DataError: ``value`` is neither ``str`` nor ``bytes`` (names ``where``).
    """
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    if not isinstance(value, str):
        raise DataError(path, None, where, f"expected text, got {type(value).__name__}")
    if _SURROGATES.search(value):
        value = _SURROGATES.sub("\ufffd", value)
    return value.replace("\x00", "")


def normalize_turns(conversation: Any, *, path: str = CONVERSATION) -> list:
    """Validate a conversation into a list of :class:`~personalign.data.schemas.Turn`.

    Accepts ``Turn`` models, dicts with ``role`` and ``content`` (``human``/``gpt``/``bot``/``model``
    are read as user/assistant), ``(role, content)`` pairs, or a ``UserHistory``/``Session``-like
    object with ``sessions``/``turns`` (sessions are concatenated in order). Text is cleaned with
    :func:`clean_text`. An empty conversation gives ``[]`` (callers define what that means).

    Raises:
        DataError: not a list, a turn of another type, a missing/unknown role, non-text content
            (the message names the turn index and field).
    """
    from personalign.data.schemas import Turn

    if conversation is None:
        return []
    if hasattr(conversation, "sessions"):
        out: list = []
        for s in conversation.sessions:
            out.extend(normalize_turns(s, path=path))
        return out
    if hasattr(conversation, "turns") and not isinstance(conversation, (list, tuple)):
        conversation = conversation.turns
    if isinstance(conversation, (str, bytes)) or not isinstance(conversation, (list, tuple)):
        raise DataError(path, None, "conversation", f"expected a list of turns, got {type(conversation).__name__}")
    turns = []
    for i, t in enumerate(conversation):
        if isinstance(t, Turn):
            role, content = t.role, t.content
        elif isinstance(t, Mapping):
            if "role" not in t:
                raise DataError(path, None, f"turns.{i}.role", "missing")
            if "content" not in t:
                raise DataError(path, None, f"turns.{i}.content", "missing")
            role, content = t["role"], t["content"]
        elif isinstance(t, (list, tuple)) and len(t) == 2:
            role, content = t
        else:
            raise DataError(path, None, f"turns.{i}", f"expected a turn (role, content), got {type(t).__name__}")
        role = _ROLE_ALIASES.get(str(role).strip().lower(), str(role).strip().lower())
        if role not in _ROLES:
            raise DataError(path, None, f"turns.{i}.role", f"unknown role '{role}'; expected one of {', '.join(_ROLES)}")
        turns.append(Turn(role=role, content=clean_text(content, where=f"turns.{i}.content", path=path)))
    return turns


def user_turn_texts(conversation: Any) -> list[str]:
    """The non-empty user messages of a conversation, in order (see :func:`normalize_turns`)."""
    return [t.content for t in normalize_turns(conversation) if t.role == "user" and t.content.strip()]


# --------------------------------------------------------------------------- scripted users
def _normalize_for_hash(text: str) -> str:
    return " ".join(text.lower().split())


def window_hashes(text: str, *, window: int = 120, stride: int = 60) -> set[str]:
    """Hashes (blake2b, 8 bytes, hex) of the ``window``-character windows of a message taken every
    ``stride`` characters, after lower-casing and collapsing whitespace. The last window is
    aligned with the end of the text, so the tail is covered; a text shorter than ``window`` has
    no window (short greetings such as "thanks!" are not evidence of a script).

    Raises:
        ValueError: ``window`` or ``stride`` < 1.
    """
    if window < 1 or stride < 1:
        raise ValueError(f"window and stride must be >= 1, got {window}, {stride}")
    norm = _normalize_for_hash(text)
    if len(norm) < window:
        return set()
    starts = list(range(0, len(norm) - window + 1, stride))
    if starts[-1] != len(norm) - window:
        starts.append(len(norm) - window)
    return {hashlib.blake2b(norm[s:s + window].encode("utf-8", "replace"), digest_size=8).hexdigest() for s in starts}


@dataclass
class ScriptedReport:
    """Outcome of :func:`detect_scripted_user`.

    Attributes:
        scripted: the user is flagged.
        n_turns: user turns examined.
        max_repeat: the most turns any one window occurs in.
        coverage: ``max_repeat / n_turns`` (share of the user's turns holding that window).
        rule: which rule fired (``"repeat>=8"``, ``"repeat>=5 and coverage>0.4"``) or None.
        example: the start of one turn holding the most repeated window (for review), or None.
    """

    scripted: bool
    n_turns: int
    max_repeat: int
    coverage: float
    rule: str | None = None
    example: str | None = None


def detect_scripted_user(user_turns: Sequence[str], *, window: int = 120, stride: int = 60,
                         min_repeat: int = 5, min_coverage: float = 0.4, always_repeat: int = 8) -> ScriptedReport:
    """Flag a user whose messages repeat a template (the study's scripted-user rule).

    For every window hash (:func:`window_hashes`) count the number of *distinct* user turns it
    occurs in. The user is flagged when one window occurs in ``>= min_repeat`` (5) turns that make
    up ``> min_coverage`` (40%) of the user's turns, or in ``>= always_repeat`` (8) turns whatever
    the coverage. Coverage is read as the share of the user's turns holding the repeated window
    (our reading of the study's "40% coverage").

    Args:
        user_turns: the user's messages (all conversations pooled); assistant text must not be
            included (assistants repeat boilerplate by design).

    Returns:
        a :class:`ScriptedReport`; an empty list is not scripted.
    """
    from collections import Counter

    counts: Counter = Counter()
    first_turn: dict[str, int] = {}
    for i, text in enumerate(user_turns):
        for h in window_hashes(clean_text(text), window=window, stride=stride):
            counts[h] += 1
            first_turn.setdefault(h, i)
    n = len(user_turns)
    if not counts:
        return ScriptedReport(False, n, 0, 0.0)
    top, max_repeat = counts.most_common(1)[0]
    coverage = max_repeat / n if n else 0.0
    rule = None
    if max_repeat >= always_repeat:
        rule = f"repeat>={always_repeat}"
    elif max_repeat >= min_repeat and coverage > min_coverage:
        rule = f"repeat>={min_repeat} and coverage>{min_coverage:g}"
    example = clean_text(user_turns[first_turn[top]])[:200] if rule else None
    return ScriptedReport(rule is not None, n, int(max_repeat), float(coverage), rule, example)


def scripted_users(histories: Mapping[str, Iterable[Any]], **kwargs) -> dict[str, ScriptedReport]:
    """:func:`detect_scripted_user` for each user (user id -> conversations); the user turns of
    all of a user's conversations are pooled. ``kwargs`` go to :func:`detect_scripted_user`."""
    out = {}
    for uid, conversations in histories.items():
        texts: list[str] = []
        for conv in conversations:
            texts.extend(user_turn_texts(conv))
        out[uid] = detect_scripted_user(texts, **kwargs)
    return out


# --------------------------------------------------------------------------- activity
def activity_filter(histories: Mapping[str, Sequence[Any]], *, min_conversations: int = 3,
                    min_user_turns: int = 15) -> list[str]:
    """Ids of the active users: ``>= min_conversations`` (3) conversations and more than
    ``min_user_turns`` (15) non-empty user turns in total (the study's thresholds: ">= 3
    conversations, > 15 user turns"). Order follows ``histories``."""
    keep = []
    for uid, conversations in histories.items():
        convs = list(conversations)
        n_user = sum(len(user_turn_texts(c)) for c in convs)
        if len(convs) >= min_conversations and n_user > min_user_turns:
            keep.append(uid)
    return keep
