"""The seed study's pipeline end to end on PrefEval: conversation → extract → verify → select →
answer, against controls on the same questions.

For each PrefEval MCQ question of ``split`` (split by topic; ``limit``: a seeded sample stratified
by topic) the pipeline sees only the user's **persona-driven conversation** (same PrefEval record
position, ``user_id``; the preference it implies is the MCQ's stated preference) and the new
question with its four options:

1. **extract** -- an ``extraction`` stage strategy on the conversation (default ``first-person``);
2. **verify** -- a ``verification`` stage strategy on each extracted attribute against the
   conversation (default ``minilm-logreg``); rejected attributes are dropped;
3. **select** -- a ``relevance`` stage strategy on each verified attribute and the new question
   (default ``zero-shot``);
4. **answer** -- the ``mcq`` stage's ``extracted-attributes`` strategy with the selected attributes.

Each step runs as one batch through :func:`personalign.programs.run.run_program` (retries; a failed
extraction gives no attributes, a failed verification or selection drops the attribute, a failed
answer counts as wrong). Trainable verifiers are fitted on the verification stage's ``train``
split of the same PrefEval data (LM-free); trainable selectors need ``selector_data`` (relevance
labels) to fit on its ``train`` split.

Conditions (same questions, same LM): ``pipeline``; ``verified-all`` (every verified attribute,
no selection: what the select step adds); ``no-profile`` (question only); ``gold-preference``
(the stated preference as context); ``random-attribute`` (as many attributes as the pipeline
selected, at least one, drawn with a seeded ``random.Random`` from the verified attributes of users
of *other* topics in the sample -- any attribute text, wrong user).

The defaults (:data:`DEFAULT_STEPS`) are the steps measured end to end on the embedded 1.5B model
(README, "The pipeline end to end"): there ``extract`` returns an empty list on every conversation and the
LLM verifiers reject nearly every attribute, so an all-LLM default would answer with no profile.
The LLM restaters (``extract-sentences``, ``extract-own-voice``) are no better than the LM-free
sentences and cost ~25-35 s per conversation. ``extract-generalize`` recovers more gold
preferences than the bare sentences (+0.03 recall on val, ~11 s per conversation), but the full
pipeline was measured with ``first-person``, so that stays the default.
"""

from __future__ import annotations

import os
import random
from typing import Any, Sequence

from personalign.lm import resolve_lm
from personalign.runners import PIPELINE_STEPS
from personalign.runners._common import mean_ci

DEFAULT_STEPS = PIPELINE_STEPS
"""Default strategy of each step (module doc; :data:`personalign.runners.PIPELINE_STEPS`)."""
CONDITIONS = ("pipeline", "verified-all", "no-profile", "gold-preference", "random-attribute")
_ANSWERERS = {"pipeline": "extracted-attributes", "verified-all": "extracted-attributes",
              "random-attribute": "extracted-attributes", "no-profile": "no-profile",
              "gold-preference": "gold-preference"}


def pipeline_examples(data: str | os.PathLike, *, split: str | None = "val", limit: int | None = None,
                      seed: int = 0) -> list:
    """MCQ examples of ``split`` (``limit``: seeded, stratified by topic) each with the
    ``conversation`` (list of :class:`~personalign.data.schemas.Turn`) of its user's
    persona-driven record.

    Raises:
        DataError: unreadable PrefEval data, an empty split, or no question with a conversation
            (``data`` must be the PrefEval root holding both ``mcq_options/`` and
            ``implicit_preference/persona-driven/``).
    """
    from pathlib import Path

    from personalign.data import load_prefeval
    from personalign.errors import DataError
    from personalign.stages import resolve_stage

    stage = resolve_stage("mcq")
    examples = stage.limit(stage.load(data, split=split), limit, seed)
    root = Path(data)
    if not (root / "implicit_preference" / "persona-driven").is_dir():
        raise DataError(root, None, None, "expected the PrefEval root (with mcq_options/ and "
                                          "implicit_preference/persona-driven/): the pipeline reads both")
    convs = {r.user_id: r.conversation for r in load_prefeval(root, "persona")}
    out = [ex.copy(conversation=list(convs[ex.user_id])) for ex in examples if convs.get(ex.user_id)]
    if not out:
        raise DataError(root, None, "user_id", f"no {split} question has a persona-driven conversation")
    return out


def check_plan(conditions: Sequence[str], *, extractor: str, verifier: str, selector: str,
               selector_data: str | os.PathLike | None) -> None:
    """Everything a pipeline run refuses before any model work: unknown, missing or repeated
    conditions; unknown strategy names; ``selector_data`` whose train split is unreadable or holds
    a single class (a learned selector could not be fitted on it).

    Raises:
        ConfigurationError: a condition or a strategy name (names it). DataError: ``selector_data``.
    """
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage

    bad = [c for c in conditions if c not in CONDITIONS]
    if bad or not conditions:
        raise ConfigurationError(f"unknown condition(s) {', '.join(bad) or '(none given)'}; choose from "
                                 f"{', '.join(CONDITIONS)}")
    if repeated := sorted({c for c in conditions if list(conditions).count(c) > 1}):
        raise ConfigurationError(f"--conditions names {', '.join(repeated)} more than once; give each condition once")
    for stage_name, name in (("extraction", extractor), ("verification", verifier), ("relevance", selector)):
        resolve_stage(stage_name).registry.info(name)  # unknown names fail before any work
    if selector_data is not None:
        stage = resolve_stage("relevance")
        stage.check_fittable(stage.load(selector_data, "train"), selector_data, "train")


def _program(stage_name: str, strategy: str, *, data, selector_data, lm, seed: int):
    """A strategy of a stage, fitted first when it is trainable."""
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage

    stage = resolve_stage(stage_name)
    info = stage.registry.info(strategy)
    if not info.trainable:
        return stage.registry.create(strategy)
    source = data if stage_name == "verification" else selector_data
    if source is None:
        raise ConfigurationError(f"{stage_name} strategy '{strategy}' is trained: give --selector-data "
                                 f"(relevance labels with a train split), or choose an untrained one")
    from personalign.compile_service import compile_program

    trainset = stage.load(source, "train")
    stage.check_fittable(trainset, source, "train")
    program, _ = compile_program(stage, strategy, None, trainset, lm=lm, seed=seed)
    return program


def _step(program, items: list, inputs: Sequence[str], output: str | None, lm, name: str, progress: bool):
    from personalign.evaluation import run_program

    if not items:
        from personalign.evaluation import EvalOutcome

        return EvalOutcome([], [], 0, [], 0, 0.0)
    return run_program(program, items, inputs=inputs, output=output, lm=lm, description=name, progress=progress)


def _summary(outcome, n_questions: int) -> dict:
    return {"items": len(outcome.predictions), "lm_calls": outcome.lm_calls, "seconds": round(outcome.seconds, 2),
            "lm_calls_per_question": round(outcome.lm_calls / n_questions, 3),
            "seconds_per_question": round(outcome.seconds / n_questions, 3), "failures": outcome.failures,
            "errors": outcome.errors[:3]}


def build_profiles(examples: Sequence, *, extractor, verifier, selector, lm=None, progress: bool = False) -> dict:
    """Steps 1-3 for every example: ``{"extracted", "verified", "selected"}`` (lists of attribute
    texts per example) and ``"steps"`` (per step: items, LM calls, seconds, per question,
    failures). ``selector=None`` skips step 3 (no call; ``selected`` is None)."""
    import dspy

    from personalign.data.prefeval import render_turns
    from personalign.programs.extraction.data import attribute_texts

    n = max(1, len(examples))
    ext = _step(extractor, list(examples), ("conversation",), None, lm, "extract", progress)
    extracted: list[list[tuple[str, str]]] = []
    for pred in ext.predictions:  # (text, reason) per attribute; a failed extraction gives none
        raw = list(getattr(getattr(pred, "attributes", None), "root", getattr(pred, "attributes", None)) or [])
        texts = attribute_texts(pred)
        reasons = [str(getattr(a, "reason", "") or "") for a in raw] if len(raw) == len(texts) else [""] * len(texts)
        extracted.append(list(zip(texts, reasons)))
    v_items, v_owner = [], []
    for i, (ex, attrs) in enumerate(zip(examples, extracted)):
        evidence = render_turns(ex.conversation)
        for text, reason in attrs:
            v_items.append(dspy.Example(evidence=evidence, attribute=text, reason=reason or "").with_inputs(
                "evidence", "attribute", "reason"))
            v_owner.append(i)
    ver = _step(verifier, v_items, ("evidence", "attribute", "reason"), "accepted", lm, "verify", progress)
    verified: list[list[str]] = [[] for _ in examples]
    for i, item, ok in zip(v_owner, v_items, ver.predictions):
        if ok is not None and bool(ok):
            verified[i].append(item.attribute)
    s_items, s_owner = [], []
    for i, (ex, attrs) in enumerate(zip(examples, verified)):
        for text in attrs:
            s_items.append(dspy.Example(attribute=text, prompt=ex.question, prompt_id=ex.prompt_id,
                                        user_id=ex.user_id).with_inputs("attribute", "prompt"))
            s_owner.append(i)
    if selector is None:  # no condition reads the selection: no select call
        return {"extracted": [[t for t, _ in a] for a in extracted], "verified": verified, "selected": None,
                "steps": {"extract": _summary(ext, n), "verify": _summary(ver, n), "select": None}}
    sel = _step(selector, s_items, ("attribute", "prompt"), "relevant", lm, "select", progress)
    selected: list[list[str]] = [[] for _ in examples]
    for i, item, ok in zip(s_owner, s_items, sel.predictions):
        if ok is not None and bool(ok):
            selected[i].append(item.attribute)
    return {"extracted": [[t for t, _ in a] for a in extracted], "verified": verified, "selected": selected,
            "steps": {"extract": _summary(ext, n), "verify": _summary(ver, n), "select": _summary(sel, n)}}


def random_attributes(examples: Sequence, verified: Sequence[Sequence[str]], counts: Sequence[int], *,
                      seed: int = 0) -> list[list[str]]:
    """Per example, ``max(1, counts[i])`` attributes drawn (seeded, without replacement) from the
    verified attributes of examples of *other* topics (else other users); [] when none exist."""
    out = []
    for i, ex in enumerate(examples):
        rng = random.Random(f"{seed}:random-attribute:{ex.id}")
        pool = [a for j, (o, attrs) in enumerate(zip(examples, verified)) if j != i
                and getattr(o, "topic", None) != getattr(ex, "topic", None) for a in attrs]
        if not pool:
            pool = [a for j, attrs in enumerate(verified) if j != i
                    and getattr(examples[j], "user_id", None) != getattr(ex, "user_id", None) for a in attrs]
        out.append(rng.sample(pool, min(len(pool), max(1, int(counts[i])))) if pool else [])
    return out


def run_pipeline(data: str | os.PathLike, *, split: str | None = "val", limit: int | None = None, lm=None,
                 extractor: str = DEFAULT_STEPS["extractor"], verifier: str = DEFAULT_STEPS["verifier"],
                 selector: str = DEFAULT_STEPS["selector"],
                 conditions: Sequence[str] = CONDITIONS, selector_data: str | os.PathLike | None = None,
                 n_boot: int = 1000, seed: int = 0, progress: bool = False, keep_items: bool = True) -> dict[str, Any]:
    """The pipeline and its controls on the same PrefEval questions (module doc).

    Returns:
        ``{"data", "split", "n", "topics", "programs", "strategies": [{"name" (the condition), "accuracy",
        "accuracy_ci", "vs_no_profile": {"diff", "ci", "mcnemar_p"}, "answer_lm_calls",
        "lm_calls_per_question", "seconds_per_question", "failures", "mean_attributes"}],
        "steps": {extract, verify, select}, "attributes": {...per question}, "gap_closed",
        "items": [...]}``. ``lm_calls_per_question`` / ``seconds_per_question`` of ``pipeline`` and
        ``verified-all`` include the steps they use.

    Raises:
        DataError: bad data / empty split; ConfigurationError: unknown strategy or condition, bad
            limit, a trained selector without ``selector_data``.
    """
    import numpy as np

    from personalign.evaluation import run_program
    from personalign.metrics import mcnemar_exact
    from personalign.stages import resolve_stage

    check_plan(conditions, extractor=extractor, verifier=verifier, selector=selector, selector_data=selector_data)
    examples = pipeline_examples(data, split=split, limit=limit, seed=seed)
    lm_obj = resolve_lm(lm, True)
    progs = {"extractor": _program("extraction", extractor, data=data, selector_data=None, lm=lm_obj, seed=seed),
             "verifier": _program("verification", verifier, data=data, selector_data=None, lm=lm_obj, seed=seed),
             # verified-all alone reads no selection: no selector is built (or fitted) and no select call runs
             "selector": _program("relevance", selector, data=data, selector_data=selector_data, lm=lm_obj, seed=seed)
             if {"pipeline", "random-attribute"} & set(conditions) else None}
    n = len(examples)
    needs_profile = bool({"pipeline", "verified-all", "random-attribute"} & set(conditions))
    prof = build_profiles(examples, lm=lm_obj, progress=progress, **progs) if needs_profile else None
    attrs_of = {}
    if prof is not None:
        attrs_of = {"verified-all": prof["verified"]}
        if prof["selected"] is not None:
            attrs_of.update({"pipeline": prof["selected"],
                             "random-attribute": random_attributes(examples, prof["verified"],
                                                                   [len(s) for s in prof["selected"]], seed=seed)})
    mcq = resolve_stage("mcq")
    gold = np.array([int(e.gold_index) for e in examples])
    rows, correct = [], {}
    for name in conditions:
        exs = [e.copy(attributes=list(attrs_of[name][i])).with_inputs(*mcq.inputs) if name in attrs_of
               else e for i, e in enumerate(examples)]
        out = run_program(mcq.registry.create(_ANSWERERS[name]), exs, inputs=mcq.inputs, output=mcq.output,
                          lm=lm_obj, description=name, progress=progress)
        ok = np.array([p is not None and int(p) == g for p, g in zip(out.predictions, gold)], dtype=float)
        correct[name] = ok
        acc = mean_ci(ok, n_boot=n_boot, seed=seed)
        calls, secs = out.lm_calls, out.seconds
        if name in ("pipeline", "verified-all") and prof is not None:
            used = ("extract", "verify", "select") if name == "pipeline" else ("extract", "verify")
            calls += sum(prof["steps"][s]["lm_calls"] for s in used)
            secs += sum(prof["steps"][s]["seconds"] for s in used)
        rows.append({"name": name, "answerer": _ANSWERERS[name], "accuracy": acc["mean"], "accuracy_ci": acc["ci"],
                     "answer_lm_calls": out.lm_calls, "lm_calls_per_question": round(calls / n, 3),
                     "seconds_per_question": round(secs / n, 3), "failures": out.failures, "errors": out.errors[:3],
                     "mean_attributes": (round(float(np.mean([len(a) for a in attrs_of[name]])), 3)
                                         if name in attrs_of else None),
                     "predictions": [None if p is None else int(p) for p in out.predictions]})
    if "no-profile" in correct:
        base = correct["no-profile"]
        for row in rows:
            if row["name"] == "no-profile":
                continue
            d = mean_ci(correct[row["name"]] - base, n_boot=n_boot, seed=seed)
            mc = mcnemar_exact(np.ones(n, dtype=bool), correct[row["name"]].astype(bool), base.astype(bool))
            row["vs_no_profile"] = {"diff": d["mean"], "ci": d["ci"], "mcnemar_p": mc.get("p_value")}
    acc = {r["name"]: r["accuracy"] for r in rows}
    gap = None
    if {"pipeline", "no-profile", "gold-preference"} <= set(acc) and acc["gold-preference"] != acc["no-profile"]:
        gap = round((acc["pipeline"] - acc["no-profile"]) / (acc["gold-preference"] - acc["no-profile"]), 4)
    topics: dict[str, int] = {}
    for e in examples:
        topics[e.topic] = topics.get(e.topic, 0) + 1
    result: dict[str, Any] = {
        "data": str(data), "split": split, "n": n, "limit": limit, "seed": seed, "topics": dict(sorted(topics.items())),
        "programs": {"extractor": extractor, "verifier": verifier, "selector": selector,
                     "answerer": "extracted-attributes"},
        "chance": round(float(np.mean([1 / len(e.options) for e in examples])), 4),
        "strategies": rows, "gap_closed": gap}
    if prof is not None:
        per = {k: [len(a) for a in prof[k]] for k in ("extracted", "verified", "selected") if prof[k] is not None}
        n_ext = sum(per["extracted"])
        result["steps"] = prof["steps"]
        result["attributes"] = {f"{k}_per_question": round(sum(v) / n, 3) for k, v in per.items()}
        result["attributes"]["rejected_share"] = round(1 - sum(per["verified"]) / n_ext, 4) if n_ext else None
        if "selected" in per:
            result["attributes"]["questions_with_selected"] = sum(v > 0 for v in per["selected"])
    if keep_items:
        result["items"] = [{"id": e.id, "topic": e.topic, "gold_index": int(e.gold_index),
                            **({"extracted": prof["extracted"][i], "verified": prof["verified"][i],
                                "selected": None if prof["selected"] is None else prof["selected"][i]}
                               if prof is not None else {}),
                            "answers": {r["name"]: r["predictions"][i] for r in rows}}
                           for i, e in enumerate(examples)]
    for r in rows:
        r.pop("predictions")
    return result


__all__ = ["CONDITIONS", "check_plan", "pipeline_examples", "build_profiles", "random_attributes", "run_pipeline"]
