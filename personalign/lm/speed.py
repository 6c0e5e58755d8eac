"""How fast a model runs on this machine: measured by ``personalign doctor --bench``
(:func:`bench_model`, ``benchmarks/local_models.py``) or by the model calls of a run, and kept per
model in ``speed.json`` in the cache directory (``PERSONALIGN_CACHE_DIR``, default
``runs/cache``), so a run can estimate its time before it starts. Nothing here reaches the network.

The file holds, per model string and kind of call (``generation``: a DSPy LM call; ``forward``: a
forward pass, :mod:`personalign.lm.calls`), the seconds per call, how many calls measured it,
what measured it and when; the latest measurement of a kind replaces the one before.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

SPEED_FILE = "speed.json"
KINDS = ("generation", "forward")


def speed_file() -> Path:
    """Where speeds are kept: ``speed.json`` in the cache directory."""
    from personalign.settings import cache_dir

    return cache_dir() / SPEED_FILE


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or unreadable: no speed known (never an error)
        return {}
    return data if isinstance(data, dict) else {}


def known_speed(model: str | None) -> dict | None:
    """``{kind: {"seconds_per_call", "calls", "source", "measured"}}`` of ``model`` (kinds measured
    so far), or None when nothing was measured for it."""
    if not model:
        return None
    entry = _read(speed_file()).get(model)
    if not isinstance(entry, dict):
        return None
    out = {k: v for k, v in entry.items() if k in KINDS and isinstance(v, dict)
           and isinstance(v.get("seconds_per_call"), (int, float)) and v["seconds_per_call"] >= 0}
    return out or None


def record_speed(model: str | None, measured: dict[str, tuple[float, int]], *, source: str) -> None:
    """Keep ``model``'s speed: ``measured`` maps a kind to ``(seconds, calls)`` (kinds with no call
    are skipped). Best effort: a cache directory that cannot be written keeps nothing, silently
    (the next run simply has no estimate). Written atomically (:func:`personalign.data.files.atomic_text`)."""
    from personalign.data.files import atomic_text

    kept = {k: (s, n) for k, (s, n) in measured.items() if k in KINDS and n > 0 and s >= 0}
    if not model or not kept:
        return
    path = speed_file()
    data = _read(path)
    entry = data.get(model) if isinstance(data.get(model), dict) else {}
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for kind, (seconds, calls) in kept.items():
        entry[kind] = {"seconds_per_call": round(seconds / calls, 4), "calls": int(calls), "source": source,
                       "measured": stamp}
    data[model] = entry
    try:
        with atomic_text(path) as out:
            out.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass


def bench_model(model: str, *, prompt_tokens: int = 256, gen_tokens: int = 64, calls: int = 3,
                keep: bool = True) -> dict:
    """Prompt-processing and generation speed of an embedded model in tokens/s (one run each), and
    the seconds of the two kinds of model call a run makes, each the median of ``calls``: a
    ``forward`` pass (the yes/no question over a ``prompt_tokens``-token prompt, KV cache reset) and
    a ``generation`` (a typed DSPy call: a ``bool`` answer to a question about the same text, DSPy's
    cache off). ``keep``: stored as the model's speed (:func:`record_speed`, source ``doctor --bench``;
    ``kept_in``: the file, None without ``keep``)."""
    import statistics

    from personalign.lm._engine import get_engine
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
    passage = eng.llm.detokenize(toks).decode("utf-8", errors="replace")
    question, _ = eng.render([{"role": "user", "content": f"{passage}\n\nDoes the user like the outdoors? Answer Yes or No."}])
    forward, generation = [], []
    for _ in range(calls):
        with eng.lock:
            eng.llm.reset()
        t0 = time.perf_counter()
        eng.next_token_logprobs(question, list(YES + NO))
        forward.append(time.perf_counter() - t0)
        generation.append(_typed_call(model, passage))
    per_call = {"forward": statistics.median(forward), "generation": statistics.median(generation)}
    if keep:
        record_speed(model, {k: (v, 1) for k, v in per_call.items()}, source="doctor --bench")
    return {"model": model, "prompt_tokens": len(toks), "prompt_tokens_per_s": round(len(toks) / t_prompt, 1),
            "gen_tokens": n_gen, "gen_tokens_per_s": round(n_gen / t_gen, 1),
            "seconds_per_forward_pass": round(per_call["forward"], 3),
            "seconds_per_generation": round(per_call["generation"], 3),
            "kept_in": str(speed_file()) if keep else None}


def _typed_call(model: str, passage: str) -> float:
    """Seconds of one typed DSPy call on ``model`` (DSPy's cache off), the KV cache reset first."""
    import dspy

    from personalign.lm import make_lm, use
    from personalign.lm._engine import get_engine

    eng = get_engine(model)
    with eng.lock:
        eng.llm.reset()
    lm = make_lm(model, cache=False)
    t0 = time.perf_counter()
    with use(lm):
        dspy.Predict("passage: str -> likes_outdoors: bool")(passage=passage)
    return time.perf_counter() - t0


__all__ = ["KINDS", "bench_model", "known_speed", "record_speed", "speed_file"]
