"""Loader and metric of the ``perspectives`` stage.

Questions (``load_questions(path)``):

* JSONL, one ``{"id", "question", "split"?, "profile_bank"?, "reference"?}`` per line.
  ``profile_bank`` (a profile JSONL or PrefEval folder, relative to the file) defaults to a
  ``profiles.jsonl`` beside the questions file, else none; ``reference`` (an answer to compare
  against) defaults to "" (the metric then uses the single no-profile answer). Lines without
  ``split`` are split by question into train/val/test = 0.5/0.25/0.25 (seeded).
* a PrefEval root (or its ``explicit_preference/`` folder or one topic file there): the distinct
  explicit-preference questions, split by topic; the bank is the root's
  ``implicit_preference/persona-driven/`` personas when present.

Metric (:func:`answer_win_rate`): the answer against the reference, judged by the typed
:class:`~personalign.signatures.judge.AnswerPreferenceSignature` in both orders (win 1, tie 0.5,
loss 0, averaged); an answer that breaks a rule (empty, meta text, wrong item count) scores 0.
"""

from __future__ import annotations

import os
from pathlib import Path

from personalign.errors import DataError

INPUTS = ("question", "profile_bank")
SPLITS = {"train": 0.5, "val": 0.25, "test": 0.25}


def _prefeval(p: Path, seed: int) -> list:
    import dspy

    from personalign.data.prefeval import PREFEVAL_KINDS, load_prefeval
    from personalign.data.splits import group_split

    root = p
    while root != root.parent and not (root / PREFEVAL_KINDS["explicit"]).is_dir():
        root = root.parent
    if not (root / PREFEVAL_KINDS["explicit"]).is_dir():
        root = p
    recs = load_prefeval(p if p.is_file() else (root / PREFEVAL_KINDS["explicit"]), "explicit")
    bank_dir = root / PREFEVAL_KINDS["persona"]
    bank = str(bank_dir) if bank_dir.is_dir() else ""
    first = {}
    for r in recs:
        first.setdefault(r.prompt_id, r)
    rows = list(first.values())
    topics = {r.topic for r in rows}
    key = (lambda r: r.topic) if len(topics) >= len(SPLITS) else (lambda r: r.prompt_id)
    parts = group_split(rows, by=key, fractions=SPLITS, seed=seed)
    out = []
    for split, items in parts.items():
        for r in items:
            out.append(dspy.Example(id=f"{r.prompt_id}", question=r.question, profile_bank=bank, reference="",
                                    split=split, topic=r.topic, prompt_id=r.prompt_id).with_inputs(*INPUTS))
    return sorted(out, key=lambda e: (e.topic, e.id))


def _jsonl(p: Path, seed: int) -> list:
    import dspy

    from personalign.data._io import iter_jsonl
    from personalign.data.splits import group_split

    default_bank = p.with_name("profiles.jsonl")
    rows, seen = [], {}
    for lineno, obj in iter_jsonl(p):
        q = obj.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DataError(p, lineno, "question", "missing or not a non-empty string")
        rid = obj.get("id", f"q{lineno}")
        if not isinstance(rid, str) or not rid:
            raise DataError(p, lineno, "id", "expected a non-empty string")
        if rid in seen:
            raise DataError(p, lineno, "id", f"duplicate id '{rid}' (first on line {seen[rid]})")
        seen[rid] = lineno
        for f in ("split", "profile_bank", "reference"):
            if obj.get(f) is not None and not isinstance(obj[f], str):
                raise DataError(p, lineno, f, f"expected a string, got {type(obj[f]).__name__}")
        bank = obj.get("profile_bank")
        if bank:
            bp = Path(bank) if Path(bank).is_absolute() else p.parent / bank
            if not bp.exists():
                raise DataError(p, lineno, "profile_bank", f"profile bank {bp} not found")
            bank = str(bp)
        else:
            bank = str(default_bank) if default_bank.exists() else ""
        rows.append(dict(id=rid, question=q.strip(), profile_bank=bank, reference=obj.get("reference") or "",
                         split=obj.get("split"), prompt_id=rid))
    if all(r["split"] is None for r in rows) and len(rows) >= len(SPLITS):
        parts = group_split(rows, by=lambda r: r["id"], fractions=SPLITS, seed=seed)
        for split, items in parts.items():
            for r in items:
                r["split"] = split
    return [dspy.Example(**r).with_inputs(*INPUTS) for r in rows]


def load_questions(path: str | os.PathLike, *, seed: int = 0) -> list:
    """Questions of the perspectives stage (see the module docstring) as ``dspy.Example``s with
    inputs ``question, profile_bank``.

    Raises:
        DataError: missing/malformed file or a named profile bank that does not exist.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix.lower() == ".json":
        return _prefeval(p, seed)
    return _jsonl(p, seed)


_PREF_SCORE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def answer_win_rate(example, pred, trace=None):
    """DSPy metric of the perspectives stage: ``pred.answer`` against ``example.reference`` (or,
    when empty, the single no-profile answer of the current LM at temperature 0), judged in both
    orders by the typed answer-preference judge: mean of (win 1, tie 0.5, loss 0). A rule-breaking
    answer (empty, meta text, persona name, wrong item count) scores 0. Two or three LM calls.

    Raises:
        ConfigurationError: no LM in the current ``dspy`` context.
    """
    import dspy

    from personalign.errors import ConfigurationError
    from personalign.programs.perspectives.rules import rule_violations
    from personalign.programs.common.text import requested_count, truncate_head
    from personalign.signatures.judge import AnswerPreferenceSignature

    answer = str(getattr(pred, "answer", "") or "")
    question = str(example.question)
    if rule_violations(answer, n_items=requested_count(question)):
        score = 0.0
    else:
        if dspy.settings.lm is None:
            raise ConfigurationError("answer_win_rate needs an LM: run it inside personalign.lm.use(lm)")
        reference = str(getattr(example, "reference", "") or "")
        if not reference:
            from personalign.programs.perspectives.aggregator import SingleAnswer

            reference = SingleAnswer()(question=question).answer
        judge = dspy.Predict(AnswerPreferenceSignature)
        a, r = truncate_head(answer, 2000), truncate_head(reference, 2000)
        first = judge(question=question, answer_a=a, answer_b=r).preferred
        second = judge(question=question, answer_a=r, answer_b=a).preferred
        score = (_PREF_SCORE.get(str(first), 0.5) + (1.0 - _PREF_SCORE.get(str(second), 0.5))) / 2.0
    return score > 0.5 if trace is not None else score


__all__ = ["INPUTS", "load_questions", "answer_win_rate"]
