"""PrefEval runners: multiple-choice accuracy and preference following in generation.

Source: PrefEval ("Do LLMs Recognize Your Preferences? Evaluating Personalized Preference
Following in LLMs", ICLR 2025; data CC BY-NC 4.0): the classification task (pick, among four
options, the one that follows the stated preference; chance = 25%) and the generation task (a
judge decides whether the response violates the stated preference).

Conditions of the MCQ run (strategies of the ``mcq`` stage): ``no-profile`` (question only),
``gold-preference`` (the stated preference in context), ``extracted-attributes`` (attributes of
the user given as an input field -- Stage 1 output read with
:func:`personalign.programs.mcq.data.read_attributes`, keyed by PrefEval ``user_id``
``prefeval:<topic>:<index>``, which persona-driven and MCQ records of one position share).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Mapping, Sequence

from personalign.lm import resolve_lm, use
from personalign.runners._common import mean_ci


def mcq_examples(data: str | os.PathLike, *, split: str | None = "val", limit: int | None = None, seed: int = 0,
                 attributes: str | os.PathLike | Mapping[str, Sequence[str]] | None = None) -> list:
    """PrefEval MCQ examples of ``split`` (split by topic; None = all), ``limit`` of them a seeded
    sample stratified by topic (:meth:`personalign.stages.Stage.limit`; the same sample across
    strategies, in file order), attributes attached when
    given (a JSONL path or a ``user_id -> attributes`` mapping)."""
    from personalign.programs.mcq.data import attach_attributes, read_attributes
    from personalign.stages import resolve_stage

    stage = resolve_stage("mcq")
    examples = stage.limit(stage.load(data, split=split), limit, seed)
    if attributes is not None:
        attrs = read_attributes(attributes) if isinstance(attributes, (str, os.PathLike)) else attributes
        examples = attach_attributes(examples, attrs)
    return examples


def run_mcq(examples: Sequence, strategies: Sequence[str], *, lm=None, n_boot: int = 1000, seed: int = 0,
            progress: bool = False) -> dict:
    """Accuracy (95% bootstrap CI), LM calls, seconds and failures of each ``mcq`` strategy on
    the same ``examples``, and each strategy minus the first (paired bootstrap CI, McNemar).

    Returns:
        ``{"n", "strategies": [{"name", "accuracy", "accuracy_ci", "lm_calls", "seconds",
        "failures", "errors", "answer_counts"}], "vs_first": {name: {...}}}``.
    """
    from personalign.evaluation import evaluate_stage, paired_comparison
    from personalign.stages import resolve_stage

    stage = resolve_stage("mcq")
    rows, reports, lm_obj = [], {}, None
    for name in strategies:
        info = stage.registry.info(name)
        if info.uses_lm and lm_obj is None:
            lm_obj = resolve_lm(lm, True)
        program = stage.registry.create(name)
        rep = evaluate_stage(stage, program, list(examples), lm=lm_obj if info.uses_lm else None, n_boot=n_boot,
                             seed=seed, progress=progress, description=name)
        reports[name] = rep
        counts: dict[str, int] = {}
        for p in rep["predictions"]:
            counts[str(p)] = counts.get(str(p), 0) + 1
        rows.append({"name": name, "accuracy": rep["accuracy"], "accuracy_ci": rep["accuracy_ci"],
                     "lm_calls": rep["lm_calls"], "seconds": rep["seconds"], "failures": rep["failures"],
                     "errors": rep["errors"][:3], "answer_counts": dict(sorted(counts.items()))})
    vs = {}
    first = strategies[0] if strategies else None
    for name in strategies[1:]:
        cmp = paired_comparison(stage, reports[name], reports[first], n_boot=n_boot, seed=seed)
        vs[name] = {"diff": cmp["diff"]["diff"], "ci": cmp["diff"]["ci"],
                    "mcnemar_p": cmp["mcnemar"]["p_value"] if cmp["mcnemar"] else None}
    gold = [int(e.gold_index) for e in examples]
    return {"n": len(examples), "gold_counts": {str(k): gold.count(k) for k in sorted(set(gold))},
            "strategies": rows, "vs_first": vs}


def run_prefeval_mcq(data: str | os.PathLike, *, strategies: Sequence[str] = ("no-profile", "gold-preference",
                                                                               "extracted-attributes"),
                     split: str | None = "val", limit: int | None = None, attributes=None, lm=None,
                     n_boot: int = 1000, seed: int = 0, progress: bool = False) -> dict:
    """PrefEval MCQ accuracy with 95% CIs for each strategy (see :func:`run_mcq`) on ``split``
    of ``data`` (a PrefEval root, ``mcq_options/`` folder or topic file).

    Raises:
        DataError: unreadable data or an empty split; ConfigurationError: bad strategy/limit.
    """
    examples = mcq_examples(data, split=split, limit=limit, seed=seed, attributes=attributes)
    out = run_mcq(examples, strategies, lm=lm, n_boot=n_boot, seed=seed, progress=progress)
    out.update(data=str(data), split=split, attributes=str(attributes) if isinstance(attributes, (str, os.PathLike))
               else ("given" if attributes is not None else None),
               n_with_attributes=sum(bool(getattr(e, "attributes", None)) for e in examples))
    return out


def generation_examples(data: str | os.PathLike, *, split: str | None = "val", limit: int | None = None,
                        seed: int = 0) -> list:
    """Examples of the ``respond`` stage (PrefEval explicit preferences), ``limit`` of them a
    seeded sample stratified by topic (:meth:`personalign.stages.Stage.limit`), in file order."""
    from personalign.stages import resolve_stage

    stage = resolve_stage("respond")
    return stage.limit(stage.load(data, split=split), limit, seed)


def run_generation(examples: Sequence, strategies: Sequence[str] = ("generic", "personalized", "personalized-implicit"),
                   *, lm=None, n_boot: int = 1000, seed: int = 0, progress: bool = False,
                   keep_responses: bool = False, score: bool = True) -> dict:
    """Preference following in generation: each ``respond`` strategy writes a response per
    example; the typed :class:`~personalign.programs.respond.violation.ViolationJudge` (same LM)
    decides whether it violates ``example.preference``; the lexical detector marks explicit
    mentions of the preference.

    Returns:
        ``{"n", "strategies": [{"name", "violation_rate", "violation_rate_ci", "mention_rate",
        "mean_chars", "failures", "lm_calls" (generation + judge), "seconds"}]}``; a failed
        generation counts as a violation. ``score=False`` (a judge that failed its validation,
        :mod:`personalign.judge_validation`): the judge is not called and the violation
        rate and its CI are None.
    """
    from personalign.evaluation import run_program
    from personalign.lm import CallCounter
    from personalign.programs.common.text import lexical_mention
    from personalign.programs.respond.violation import ViolationJudge
    from personalign.stages import resolve_stage

    stage = resolve_stage("respond")
    lm_obj = resolve_lm(lm, True)
    judge = ViolationJudge()
    rows = []
    for name in strategies:
        t0 = time.perf_counter()
        program = stage.registry.create(name)
        out = run_program(program, list(examples), inputs=stage.inputs, output=stage.output, lm=lm_obj,
                          description=name, progress=progress)
        violations, mentions, chars, judge_fail = [], [], [], 0
        with CallCounter() as cc, use(lm_obj):
            for ex, resp in zip(examples, out.predictions):
                if not resp:
                    violations.append(1.0)
                    continue
                mentions.append(float(lexical_mention(ex.preference, resp)))
                chars.append(len(resp))
                if not score:
                    continue
                try:
                    v = judge(preference=ex.preference, question=ex.question, response=resp).violates
                except Exception:  # noqa: BLE001 -- a judge failure is counted, the run goes on
                    judge_fail += 1
                    v = True
                violations.append(float(v))
        vr = mean_ci(violations if score else [], n_boot=n_boot, seed=seed)
        mr = mean_ci(mentions, n_boot=n_boot, seed=seed)
        row = {"name": name, "violation_rate": vr["mean"], "violation_rate_ci": vr["ci"],
               "mention_rate": mr["mean"], "mean_chars": (sum(chars) / len(chars)) if chars else None,
               "failures": out.failures, "judge_failures": judge_fail, "lm_calls": out.lm_calls + cc.calls,
               "seconds": round(time.perf_counter() - t0, 2), "errors": out.errors[:3]}
        if keep_responses:
            row["responses"] = list(out.predictions)
            row["verdicts"] = [bool(v) for v in violations] if score else None  # True = violates
        rows.append(row)
    return {"n": len(examples), "strategies": rows}


def run_prefeval_generation(data: str | os.PathLike, *, strategies: Sequence[str] = ("generic", "personalized",
                                                                                      "personalized-implicit"),
                            split: str | None = "val", limit: int | None = 10, lm=None, n_boot: int = 1000,
                            seed: int = 0, progress: bool = False) -> dict:
    """:func:`run_generation` on PrefEval explicit-preference records of ``split``."""
    examples = generation_examples(data, split=split, limit=limit, seed=seed)
    out = run_generation(examples, strategies, lm=lm, n_boot=n_boot, seed=seed, progress=progress)
    out.update(data=str(data), split=split)
    return out


def write_mcq_jsonl(data: str | os.PathLike, out: str | os.PathLike, *, attributes=None, split: str | None = None,
                    seed: int = 0) -> int:
    """Write PrefEval MCQ examples (with their split and, when given, attributes) as canonical MCQ
    JSONL plus an ``attributes`` list per line -- the file ``personalign compare mcq --data FILE``
    reads. Atomic (temporary file renamed into place). Returns the number of lines."""
    from personalign.data.files import write_jsonl

    examples = mcq_examples(data, split=split, seed=seed, attributes=attributes)
    fields = ("id", "split", "context", "question", "options", "gold_index", "user_id", "prompt_id", "topic",
              "attributes")
    return write_jsonl(Path(out), ({f: getattr(e, f, None) for f in fields} for e in examples))


__all__ = ["mcq_examples", "run_mcq", "run_prefeval_mcq", "generation_examples", "run_generation",
           "run_prefeval_generation", "write_mcq_jsonl"]
