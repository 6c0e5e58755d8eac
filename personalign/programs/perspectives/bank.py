"""Profile bank of the multi-perspective aggregator: load profiles, find those relevant to a
question, know their names.

Sources accepted by :func:`load_bank`:

* profile JSONL -- one :class:`~personalign.data.ProfileExample` per line (``id``, ``user_id``,
  ``bio``, ``descriptors``), optionally with a ``name`` (the persona's name, used by the
  aggregator's post-check); ``id`` defaults to ``user_id``;
* a PrefEval root or its ``implicit_preference/persona-driven/`` folder -- one profile per
  distinct ``persona`` text (bio = persona; no descriptors, so a user's hidden preference does
  not leak into the bank).

Relevance is the MiniLM cosine similarity of the question and the profile text
(:func:`personalign.lm.embedder.embed`); bank embeddings are computed once per bank.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from personalign.errors import DataError

MAX_PROFILE_CHARS = 600


@dataclass(frozen=True)
class Profile:
    """One profile: ``user_id``, ``bio``, ``descriptors`` and the names it uses (may be empty)."""

    user_id: str
    bio: str
    descriptors: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Bio and descriptors in one string of at most 600 characters (the prompt's profile)."""
        parts = [self.bio.strip()] + [d.strip() for d in self.descriptors[:6]]
        text = " ".join(p if p.endswith((".", "!", "?")) else p + "." for p in parts if p)
        return text[:MAX_PROFILE_CHARS]


_NAME_START = re.compile(r"^\s*(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?([A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})(?=\s*(?:,|\bis\b|\bwas\b|\bhas\b|\(|'s\b|:))")
_NAME_INTRO = re.compile(r"\b(?:named|called|name is|I'm|I am|Meet)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)")
_NOT_NAMES = {"A", "An", "The", "This", "He", "She", "They", "I", "My", "Our", "Retired", "Former", "Young", "Single",
              "Busy", "New", "Senior", "Junior", "Local", "Freelance", "Mid", "Middle", "College", "High", "Graduate",
              "Stay", "Working", "Avid", "Veteran", "Experienced", "Aspiring", "Amateur", "Professional"}


def profile_names(bio: str, name: str | None = None) -> tuple[str, ...]:
    """Names a profile uses: the explicit ``name`` (and its parts), a leading proper name ("Maria
    Lopez, a nurse ..." / "Tom is a ..."), names introduced by "named"/"called"/"I'm". Heuristic:
    a name not in these positions is not found."""
    found: list[str] = []
    if name and name.strip():
        found.append(name.strip())
    for rx in (_NAME_START, _NAME_INTRO):
        for m in rx.finditer(bio):
            cand = m.group(1).strip()
            if cand.split()[0] not in _NOT_NAMES:
                found.append(cand)
    parts: list[str] = []
    for n in found:
        parts.append(n)
        parts.extend(w for w in n.split() if len(w) > 2 and w not in _NOT_NAMES)
    return tuple(dict.fromkeys(parts))


class ProfileBank:
    """Profiles with lazily computed MiniLM embeddings (one ``embed`` call per bank)."""

    def __init__(self, profiles: Sequence[Profile], source: str = "") -> None:
        if not profiles:
            raise DataError(source or "profile bank", None, None, "the profile bank has no profiles")
        self.profiles = list(profiles)
        self.source = source
        self._vecs = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.profiles)

    def vectors(self):
        with self._lock:
            if self._vecs is None:
                from personalign.lm.embedder import embed

                self._vecs = embed([p.text for p in self.profiles])
            return self._vecs

    def ranked(self, question: str) -> list[tuple[Profile, float]]:
        """All profiles with their cosine similarity to ``question``, most similar first (ties by
        position in the bank)."""
        import numpy as np

        from personalign.lm.embedder import embed

        sims = self.vectors() @ embed([question])[0]
        order = np.argsort(-sims, kind="stable")
        return [(self.profiles[i], float(sims[i])) for i in order]


def _from_jsonl(p: Path) -> list[Profile]:
    from personalign.data.canonical import validate_row
    from personalign.data.files import iter_jsonl
    from personalign.data.schemas import ProfileExample

    out, seen = [], {}
    for lineno, obj in iter_jsonl(p):
        obj = dict(obj)
        name = obj.pop("name", None)
        if name is not None and not isinstance(name, str):
            raise DataError(p, lineno, "name", f"expected a string, got {type(name).__name__}")
        if "id" not in obj and isinstance(obj.get("user_id"), str):
            obj["id"] = obj["user_id"]
        ex = validate_row(ProfileExample, obj, p, lineno, seen, key="user_id")
        if not ex.bio.strip() and not ex.descriptors:
            raise DataError(p, lineno, "bio", "a profile needs a bio or descriptors")
        out.append(Profile(ex.user_id, ex.bio, tuple(ex.descriptors), profile_names(ex.bio, name)))
    return out


def _from_prefeval(p: Path) -> list[Profile]:
    from personalign.data.prefeval import load_prefeval

    out: dict[str, Profile] = {}
    for r in load_prefeval(p, "persona"):
        persona = (r.persona or "").strip()
        if persona and persona not in out:
            out[persona] = Profile(f"prefeval-persona:{len(out)}", persona, (), profile_names(persona))
    return list(out.values())


_cache: dict[tuple[str, float], ProfileBank] = {}
_cache_lock = threading.Lock()


def load_bank(source: str | os.PathLike) -> ProfileBank:
    """The profile bank at ``source`` (JSONL or PrefEval folder; see the module docstring), cached
    per (path, modification time) in this process.

    Raises:
        DataError: missing file, malformed line (file, line, field), duplicate ``user_id``,
            no profiles.
    """
    p = Path(source)
    if not p.exists():
        raise DataError(p, None, None, "profile bank not found")
    key = (str(p.resolve()), p.stat().st_mtime)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    profiles = _from_prefeval(p) if p.is_dir() or p.suffix.lower() == ".json" else _from_jsonl(p)
    bank = ProfileBank(profiles, str(p))
    with _cache_lock:
        _cache[key] = bank
    return bank


__all__ = ["Profile", "ProfileBank", "load_bank", "profile_names", "MAX_PROFILE_CHARS"]
