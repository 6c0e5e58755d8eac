"""SFT export: profile-conditioned teacher answers as chat-format JSONL, for fine-tuning elsewhere.

Each line is one conversation in the OpenAI/TRL ``messages`` format::

    {"id": "...", "messages": [{"role": "system", "content": "User profile: ..."},
                               {"role": "user", "content": "<question>"},
                               {"role": "assistant", "content": "<teacher answer>"}],
     "metadata": {"source": "...", "profile_id": "...", "teacher": "<model string>",
                  "implicit": true}}

The teacher is :class:`~personalign.programs.respond.generate.PersonalizedResponder` given the
profile as the user's attributes; by default (``implicit=True``) it must not mention the profile
explicitly (the seed study: people do not value restated attributes), enforced in code. Pairs
come from PrefEval (the stated preference is the profile, :func:`prefeval_pairs`) or from a
profile bank and a question list (the ``k`` profiles most similar to each question,
:func:`bank_pairs`). The file is written atomically; failed generations are counted and
skipped, never written.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Sequence

SYSTEM_TEMPLATE = "User profile: {profile}"


def prefeval_pairs(data: str | os.PathLike, *, split: str | None = "train", limit: int | None = None,
                   seed: int = 0) -> list[dict]:
    """``{"id", "profile", "question", "source", "profile_id"}`` per PrefEval explicit record of
    ``split`` (profile = the stated preference), ``limit`` drawn with ``random.Random(seed)``."""
    from personalign.stages import get_stage

    examples = get_stage("respond").load(data, split=split)
    if limit is not None:
        idx = sorted(random.Random(seed).sample(range(len(examples)), min(limit, len(examples))))
        examples = [examples[i] for i in idx]
    return [{"id": f"sft:{e.id}", "profile": e.preference, "question": e.prompt, "source": "prefeval",
             "profile_id": getattr(e, "user_id", None)} for e in examples]


def bank_pairs(bank: str | os.PathLike, questions: Sequence[str], *, k: int = 3) -> list[dict]:
    """The ``k`` profiles of ``bank`` most similar to each question (MiniLM cosine), as pairs."""
    from personalign.programs.perspectives.bank import load_bank

    b = load_bank(bank)
    out = []
    for qi, q in enumerate(questions):
        for p, _ in b.ranked(q)[:k]:
            out.append({"id": f"sft:q{qi}:{p.user_id}", "profile": p.text, "question": q, "source": str(bank),
                        "profile_id": p.user_id})
    return out


def export_sft(pairs: Sequence[dict], out: str | os.PathLike, *, lm=None, implicit: bool = True,
               max_tokens: int = 256, progress: bool = False) -> dict:
    """Generate one teacher answer per pair and write the chat-format JSONL to ``out``.

    Returns:
        ``{"path", "written", "failed", "errors", "lm_calls", "seconds", "teacher"}``.
    """
    from personalign.data._io import write_jsonl
    from personalign.evaluation import run_program
    from personalign.programs.respond.generate import PersonalizedResponder
    from personalign.runners._common import resolve_lm

    import dspy

    t0 = time.perf_counter()
    lm_obj = resolve_lm(lm, True)
    teacher = PersonalizedResponder(forbid_explicit=implicit, max_tokens=max_tokens)
    examples = [dspy.Example(prompt=p["question"], attributes=[p["profile"]]).with_inputs("prompt", "attributes")
                for p in pairs]
    outcome = run_program(teacher, examples, inputs=("prompt", "attributes"), output="response", lm=lm_obj,
                          description="sft", progress=progress)
    records = []
    for p, answer in zip(pairs, outcome.predictions):
        if not answer:
            continue
        records.append({"id": p["id"], "messages": [
            {"role": "system", "content": SYSTEM_TEMPLATE.format(profile=p["profile"])},
            {"role": "user", "content": p["question"]},
            {"role": "assistant", "content": answer},
        ], "metadata": {"source": p.get("source"), "profile_id": p.get("profile_id"), "teacher": lm_obj.model,
                        "implicit": implicit}})
    written = write_jsonl(Path(out), records)
    return {"path": str(out), "written": written, "failed": outcome.failures, "errors": outcome.errors[:5],
            "lm_calls": outcome.lm_calls, "seconds": round(time.perf_counter() - t0, 2), "teacher": lm_obj.model}


__all__ = ["SYSTEM_TEMPLATE", "prefeval_pairs", "bank_pairs", "export_sft"]
