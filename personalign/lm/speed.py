"""How fast a model runs on this machine: measured by ``personalign doctor --bench``
(:func:`bench_model`, ``benchmarks/local_models.py``) or by the model calls of a run, and kept per
model in ``speed.json`` in the cache directory (``PERSONALIGN_CACHE_DIR``, default
``runs/cache``), so a run can estimate its time before it starts. Nothing here reaches the network.

The file holds, per model string and kind of call (``generation``: a DSPy LM call; ``forward``: a
forward pass, :mod:`personalign.lm.calls`), the seconds per call, how many calls measured it,
what measured it and when; the latest measurement of a kind replaces the one before. A strategy's
own calls on a model are kept the same way under ``"MODEL STRATEGY"``
(:func:`personalign._verbs.cost.speed_key`: a model string has no space).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

SPEED_FILE = "speed.json"
KINDS = ("generation", "forward")
SOURCES = ("run", "doctor --bench")
MAX_FILE_BYTES = 1 << 20  # a larger speed.json is ignored (and replaced by the next save)
MAX_SECONDS_PER_CALL = 86_400.0  # one day per call: anything above is not a measurement
MAX_CALLS = 10**9
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?")
_warned: set[str] = set()


class Speed(BaseModel):
    """One measured kind of call of one model, as kept in ``speed.json``: every field checked, so
    what the cost line computes with and prints is a sane number and printable text.

    Attributes:
        seconds_per_call: finite, 0 to :data:`MAX_SECONDS_PER_CALL` (s).
        calls: calls that measured it, 1 to :data:`MAX_CALLS`.
        source: what measured it, one of :data:`SOURCES`.
        measured: when, an ISO 8601 timestamp (``2026-01-01T00:00:00+00:00``).
        output_tokens_per_call: the mean output tokens of a call, from the responses' ``usage``
            (None: not reported), the cost line's output tokens (:mod:`personalign.lm.spend`).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    seconds_per_call: float = Field(ge=0, le=MAX_SECONDS_PER_CALL, allow_inf_nan=False, strict=True)
    calls: StrictInt = Field(ge=1, le=MAX_CALLS)
    source: Literal[SOURCES]  # type: ignore[valid-type]
    measured: str = Field(max_length=40)
    output_tokens_per_call: float | None = Field(default=None, ge=0, le=1e7, allow_inf_nan=False)

    @field_validator("seconds_per_call", mode="before")
    @classmethod
    def _number(cls, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("not a number")
        if isinstance(v, int) and abs(v) > MAX_SECONDS_PER_CALL:
            raise ValueError("out of range")  # a 400-digit integer never reaches float()
        return float(v)

    @field_validator("measured")
    @classmethod
    def _stamp(cls, v: str) -> str:
        if not _STAMP.fullmatch(v):
            raise ValueError("not an ISO timestamp")
        datetime.fromisoformat(v.replace("Z", "+00:00"))  # a ValueError for 2026-13-45
        return v


def speed_file() -> Path:
    """Where speeds are kept: ``speed.json`` in the cache directory."""
    from personalign.settings import cache_dir

    return cache_dir() / SPEED_FILE


def _warn(path: Path, why: str) -> None:
    """At most one ``warning:`` line per file and process: the file is only a cache of estimates."""
    if str(path) not in _warned:
        _warned.add(str(path))
        from personalign.errors import printable

        sys.stderr.write(printable(f"warning: speed file {path}: {why}; ignored (rewritten by the next run)") + "\n")


def _read(path: Path) -> dict:
    """The file's JSON object, or ``{}`` when it is absent, not a regular file (a FIFO would block,
    ``/dev/zero`` never ends), larger than :data:`MAX_FILE_BYTES`, unreadable or not a JSON
    object. Never raises, never blocks (opened non-blocking, read at most the bound)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:  # absent or unreadable: no speed known
        return {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _warn(path, "not a regular file")
            return {}
        if st.st_size > MAX_FILE_BYTES:
            _warn(path, f"larger than {MAX_FILE_BYTES} bytes")
            return {}
        raw = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        _warn(path, "not JSON")
        return {}
    return data if isinstance(data, dict) else {}


def _valid(entry: object) -> dict[str, dict]:
    """The valid kinds of one model's entry (:class:`Speed`), as plain dicts; invalid ones dropped."""
    if not isinstance(entry, dict):
        return {}
    out = {}
    for kind in KINDS:
        try:
            out[kind] = Speed.model_validate(entry.get(kind)).model_dump(exclude_none=True)
        except (ValidationError, ValueError, TypeError, RecursionError):
            continue
    return out


def known_speed(model: str | None) -> dict | None:
    """``{kind: {"seconds_per_call", "calls", "source", "measured"}}`` of ``model`` (kinds measured
    so far and valid: :class:`Speed`; an invalid kind is unknown), or None when nothing valid was
    measured for it."""
    if not model:
        return None
    path = speed_file()
    entry = _read(path).get(model)
    out = _valid(entry)
    if isinstance(entry, dict) and any(k in entry for k in KINDS) and len(out) < sum(k in entry for k in KINDS):
        _warn(path, f"an entry of {model!r} is not a valid measurement")
    return out or None


def _replace(path: Path, text: str) -> None:
    """Write ``text`` at ``path`` atomically: a temporary sibling renamed over it, so a symlink at
    ``path`` is replaced, never followed; nothing is written when ``path`` is neither absent, a
    regular file nor a symlink (a FIFO, a directory, a device)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def record_speed(model: str | None, measured: dict[str, tuple[float, int]], *, source: str,
                 output_tokens: dict[str, int] | None = None) -> None:
    """Keep ``model``'s speed: ``measured`` maps a kind to ``(seconds, calls)`` (kinds with no call
    are skipped; ``source``: one of :data:`SOURCES`; ``output_tokens``: a kind's output tokens in
    all, kept as their mean per call). Best effort: a cache directory that cannot be
    written keeps nothing, silently (the next run simply has no estimate). Only valid entries are
    kept (:class:`Speed`: an invalid one read from the file is dropped). Written atomically, a
    symlink replaced rather than followed (:func:`_replace`)."""
    kept = {k: (s, n) for k, (s, n) in measured.items()
            if k in KINDS and 0 < n <= MAX_CALLS and math.isfinite(s) and 0 <= s / n <= MAX_SECONDS_PER_CALL}
    if not model or not kept or source not in SOURCES:
        return
    path = speed_file()
    data = {m: v for m, v in ((m, _valid(e)) for m, e in _read(path).items()) if v}
    entry = data.get(model, {})
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for kind, (seconds, calls) in kept.items():
        entry[kind] = {"seconds_per_call": round(seconds / calls, 4), "calls": int(calls), "source": source,
                       "measured": stamp}
        if (output_tokens or {}).get(kind):
            entry[kind]["output_tokens_per_call"] = round(output_tokens[kind] / calls, 2)
    data[model] = entry
    try:
        _replace(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass


def bench_model(model: str, *, prompt_tokens: int = 256, gen_tokens: int = 64, calls: int = 3,
                keep: bool = True) -> dict:
    """Prompt-processing and generation speed of an embedded model in tokens/s (one run each), and
    the seconds of the two kinds of model call a run makes, each the median of ``calls`` made as a
    run makes them -- one after another on different rows, the prompt's shared prefix kept: a
    ``forward`` pass (relevance's yes/no question of a fact about a user and one request) and a
    ``generation`` (a typed DSPy call: a ``bool`` answer to a question about the same fact and
    request, DSPy's cache off), each after one call that warms the prefix. ``keep``: stored as the
    model's speed (:func:`record_speed`, source ``doctor --bench``; ``kept_in``: the file, None
    without ``keep``)."""
    import statistics

    from personalign.lm._engine import get_engine
    from personalign.lm.scoring import relevance_messages
    from personalign.lm.yesno import NO, YES

    eng = get_engine(model)
    text = " ".join(["The user enjoys hiking in the mountains and reading history books."] * 40)
    toks = eng.llm.tokenize(text.encode(), add_bos=False)[:prompt_tokens]
    with eng.lock:
        eng.llm.reset()
        t0 = time.perf_counter()
        eng.llm.eval(toks)
        t_prompt = time.perf_counter() - t0
        eng.llm.reset()
        t0 = time.perf_counter()
        story, _ = eng.render([{"role": "user", "content": "Write a long story about a dragon."}])
        out = eng.llm.create_completion(prompt=story, max_tokens=gen_tokens, temperature=0.0, stop=[],
                                        repeat_penalty=1.0, logit_bias={eng.llm.token_eos(): -1e9})
        t_gen = time.perf_counter() - t0
    n_gen = out["usage"]["completion_tokens"]
    forward, generation = [], []
    with eng.lock:
        eng.llm.reset()
    lm = _typed_lm(model)
    for i in range(calls + 1):  # as a run makes them: one question over consecutive rows, the shared prefix kept
        question, _ = eng.render(relevance_messages(FACTS[i % len(FACTS)], REQUEST))
        t0 = time.perf_counter()
        eng.next_token_logprobs(question, list(YES + NO))  # no cache in the way
        forward.append(time.perf_counter() - t0)
    for i in range(calls + 1):  # then the calls, apart: interleaved, each would evaluate its whole prompt again
        generation.append(_typed_call(lm, f"{FACTS[i % len(FACTS)]} Their request: {REQUEST}"))
    # the first of each warms the shared prefix (a run pays it once, over all its rows)
    per_call = {"forward": statistics.median(forward[1:]), "generation": statistics.median(generation[1:])}
    if keep:
        record_speed(model, {k: (v, 1) for k, v in per_call.items()}, source="doctor --bench")
    return {"model": model, "prompt_tokens": len(toks), "prompt_tokens_per_s": round(len(toks) / t_prompt, 1),
            "gen_tokens": n_gen, "gen_tokens_per_s": round(n_gen / t_gen, 1),
            "seconds_per_forward_pass": round(per_call["forward"], 3),
            "seconds_per_generation": round(per_call["generation"], 3),
            "kept_in": str(speed_file()) if keep else None}


REQUEST = "Can you suggest a weekly dinner plan for a family of four? We want meals that are quick to cook."
FACTS = ("The user follows a vegetarian diet.", "The user enjoys hiking in the mountains.",
         "The user prefers concise answers.", "The user has two young children.", "The user reads history books.")


def _typed_lm(model: str):
    from personalign.lm import make_lm

    return make_lm(model, cache=False)


def _typed_call(lm, passage: str) -> float:
    """Seconds of one typed DSPy call on ``lm`` (DSPy's cache off)."""
    import dspy

    from personalign.lm import use

    t0 = time.perf_counter()
    with use(lm):
        dspy.Predict("passage: str -> likes_outdoors: bool")(passage=passage)
    return time.perf_counter() - t0


__all__ = ["KINDS", "SOURCES", "Speed", "bench_model", "known_speed", "record_speed", "speed_file"]
