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

**Every row must answer the question** (:func:`check_answer`): a teacher answer is rejected,
counted as a failure by reason and never written, when it

* ``too_short``: has fewer than :data:`MIN_CONTENT_WORDS` content words (e.g. a template
  placeholder such as ``{response}``, or "I strictly follow a Kosher diet.");
* ``restates_profile``: is a restatement of the profile -- MiniLM cosine to the profile
  >= :data:`RESTATE_COSINE`, or closer to the profile than to the question by
  >= :data:`PROFILE_MARGIN`;
* ``echoes_question``: repeats the question (cosine to the question >= :data:`ECHO_COSINE`);
* ``off_topic``: is unrelated to the question (cosine to the question < :data:`OFF_TOPIC_COSINE`).

Why MiniLM cosine rather than lexical overlap: restatements are often paraphrases ("As someone who
keeps kosher ..."), which word overlap misses. The thresholds come from a measurement: six
hand-written answers to PrefEval train questions scored profile cosine 0.28-0.51 and question
cosine 0.37-0.62 (profile minus question <= 0.0) with >= 17 content words; SmolLM2-135M's own 12
answers to 12 PrefEval train pairs (``--limit 12 --seed 0``) were 3 verbatim profile restatements
(cosine 1.00), 2 echoes of the question (0.99-1.00) and 7 template placeholders (``{response}``)
-- all 12 rejected: 8 ``too_short`` (the placeholders and a 6-word restatement), 2
``restates_profile``, 2 ``echoes_question``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Sequence

SYSTEM_TEMPLATE = "User profile: {profile}"
MIN_CONTENT_WORDS = 5
RESTATE_COSINE = 0.75
PROFILE_MARGIN = 0.25
ECHO_COSINE = 0.9
OFF_TOPIC_COSINE = 0.1


def check_answer(profile: str, question: str, answer: str, *, profile_cosine: float,
                 question_cosine: float) -> str | None:
    """Why ``answer`` is not an answer to ``question`` conditioned on ``profile`` (``"too_short"``,
    ``"restates_profile"``, ``"echoes_question"``, ``"off_topic"``; see the module docstring), or
    None when it is one. The cosines are MiniLM similarities of the answer to the profile and to
    the question (:func:`check_answers` computes them)."""
    from personalign.programs.common.text import content_words

    if len(content_words(answer)) < MIN_CONTENT_WORDS:
        return "too_short"
    if profile_cosine >= RESTATE_COSINE or profile_cosine - question_cosine >= PROFILE_MARGIN:
        return "restates_profile"
    if question_cosine >= ECHO_COSINE:
        return "echoes_question"
    if question_cosine < OFF_TOPIC_COSINE:
        return "off_topic"
    return None


def check_answers(profiles: Sequence[str], questions: Sequence[str], answers: Sequence[str]) -> list[dict]:
    """:func:`check_answer` for each row: ``{"reason": str | None, "profile_cosine", "question_cosine"}``
    (cosines rounded to 3 decimals; MiniLM, :func:`personalign.lm.embedder.cosine_pairs`)."""
    from personalign.lm.embedder import cosine_pairs

    if not answers:
        return []
    to_profile = cosine_pairs(list(answers), list(profiles))
    to_question = cosine_pairs(list(answers), list(questions))
    return [{"reason": check_answer(p, q, a, profile_cosine=float(cp), question_cosine=float(cq)),
             "profile_cosine": round(float(cp), 3), "question_cosine": round(float(cq), 3)}
            for p, q, a, cp, cq in zip(profiles, questions, answers, to_profile, to_question)]


def prefeval_pairs(data: str | os.PathLike, *, split: str | None = "train", limit: int | None = None,
                   seed: int = 0) -> list[dict]:
    """``{"id", "profile", "question", "source", "profile_id"}`` per PrefEval explicit record of
    ``split`` (profile = the stated preference), ``limit`` of them a seeded sample stratified by topic."""
    from personalign.stages import resolve_stage

    stage = resolve_stage("respond")
    examples = stage.limit(stage.load(data, split=split), limit, seed)
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
    """Generate one teacher answer per pair, keep those that answer the question
    (:func:`check_answers`) and write them as chat-format JSONL to ``out``.

    Returns:
        ``{"path", "written", "failed", "generation_failures", "rejected": {reason: count},
        "errors", "lm_calls", "seconds", "teacher"}``; ``failed`` = generation failures + rejected
        answers; ``errors`` holds the first generation errors and rejections (id, reason, answer).
    """
    from personalign.data.files import write_jsonl
    from personalign.evaluation import run_program
    from personalign.programs.respond.generate import PersonalizedResponder
    from personalign.lm import resolve_lm

    import dspy

    t0 = time.perf_counter()
    lm_obj = resolve_lm(lm, True)
    teacher = PersonalizedResponder(forbid_explicit=implicit, max_tokens=max_tokens)
    examples = [dspy.Example(prompt=p["question"], attributes=[p["profile"]]).with_inputs("prompt", "attributes")
                for p in pairs]
    outcome = run_program(teacher, examples, inputs=("prompt", "attributes"), output="response", lm=lm_obj,
                          description="sft", progress=progress)
    answered = [(p, a) for p, a in zip(pairs, outcome.predictions) if a]
    checks = check_answers([p["profile"] for p, _ in answered], [p["question"] for p, _ in answered],
                           [a for _, a in answered])
    records, rejected, rejections = [], {}, []
    for (p, answer), check in zip(answered, checks):
        if check["reason"] is not None:
            rejected[check["reason"]] = rejected.get(check["reason"], 0) + 1
            rejections.append(f"{p['id']}: {check['reason']}: {answer[:120]!r}")
            continue
        records.append({"id": p["id"], "messages": [
            {"role": "system", "content": SYSTEM_TEMPLATE.format(profile=p["profile"])},
            {"role": "user", "content": p["question"]},
            {"role": "assistant", "content": answer},
        ], "metadata": {"source": p.get("source"), "profile_id": p.get("profile_id"), "teacher": lm_obj.model,
                        "implicit": implicit, "profile_cosine": check["profile_cosine"],
                        "question_cosine": check["question_cosine"]}})
    written = write_jsonl(Path(out), records)
    return {"path": str(out), "written": written, "failed": outcome.failures + sum(rejected.values()),
            "generation_failures": outcome.failures, "rejected": dict(sorted(rejected.items())),
            "errors": (outcome.errors[:5] + rejections[:5]), "lm_calls": outcome.lm_calls,
            "seconds": round(time.perf_counter() - t0, 2), "teacher": lm_obj.model}


__all__ = ["SYSTEM_TEMPLATE", "check_answer", "check_answers", "prefeval_pairs", "bank_pairs", "export_sft"]
