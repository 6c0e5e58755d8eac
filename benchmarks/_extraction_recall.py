"""The extraction section of ``benchmarks/extraction.py``: recall of the gold preference per
extractor on the same val conversations, the LM-free controls (``first-person``, quoted, and
``first-person-bare``) on those conversations and on all val, and every row paired with each
control (difference in recall, bootstrap CI, McNemar's exact p)."""

from __future__ import annotations

import time

from _common import log


def _rejected_share(examples, texts_per_example, verifier):
    """Share of the attributes the learned verifier rejects against their own conversation (one
    batch: the verifier's ``predict_batch``)."""
    if verifier is None:
        return None
    import dspy

    from personalign.programs.common.evidence import render_turns

    items = []
    for ex, texts in zip(examples, texts_per_example):
        evidence = render_turns(ex.conversation)
        items += [dspy.Example(evidence=evidence, attribute=t, reason="") for t in texts]
    if not items:
        return None
    verdicts = [bool(p.accepted) for p in verifier.predict_batch(items)]
    return round(1 - sum(verdicts) / len(verdicts), 4)


def _recall_row(name, examples, preds, *, n_boot, seed, lm_calls, seconds, failures, verifier=None):
    import numpy as np

    from personalign.metrics import bootstrap_ci
    from personalign.programs.extraction.data import attribute_texts
    from personalign.programs.extraction.metrics import recovery_scores

    best = []
    n_attrs = []
    all_texts = []
    for ex, p in zip(examples, preds):
        texts = attribute_texts(p or [])
        all_texts.append(texts)
        n_attrs.append(len(texts))
        best.append(max(recovery_scores(list(ex.gold_attributes), texts)))
    best = np.array(best)
    row = {"name": name, "n": len(examples), "_hits": (best >= 0.6)}
    for t in (0.5, 0.6, 0.7):
        hits = (best >= t).astype(float)
        key = "recall" if t == 0.6 else f"recall@{t}"
        row[key] = float(hits.mean())
        if t == 0.6:
            row["recall_ci"] = [float(v) for v in bootstrap_ci(np.mean, hits, n_boot=n_boot, seed=seed)]
    row.update({"mean_best_cosine": float(best.mean()), "attributes_per_conversation": float(np.mean(n_attrs)),
                "verifier_rejected_share": _rejected_share(examples, all_texts, verifier),
                "lm_calls": lm_calls, "seconds": round(seconds, 2), "failures": failures})
    return row


def _paired(hits, base_hits, n_boot, seed) -> dict:
    """Paired recall difference ``hits - base_hits`` (per conversation) with its bootstrap CI and
    McNemar's exact p."""
    import numpy as np

    from personalign.metrics import bootstrap_ci, mcnemar_exact

    d = hits.astype(float) - base_hits.astype(float)
    mc = mcnemar_exact(np.ones(len(d), dtype=bool), hits, base_hits)
    return {"diff": round(float(d.mean()), 4),
            "ci": [round(float(v), 4) for v in bootstrap_ci(np.mean, d, n_boot=n_boot, seed=seed)],
            "mcnemar_p": mc.get("p_value")}


_CONTROLS = {"vs_first_person": "first-person (subset)", "vs_first_person_bare": "first-person-bare (subset)"}
"""Paired comparison key -> the LM-free control row it pairs with (same conversations)."""


def _paired_vs(rows, n_boot, seed):
    """Add ``vs_first_person`` and ``vs_first_person_bare`` (paired recall difference, CI, McNemar
    p) to the rows scored on the controls' conversations, and ``vs_uncompiled`` to compiled rows;
    drop the per-item hits."""
    hits = {r["name"]: r.pop("_hits") for r in rows}
    for r in rows:
        h = hits[r["name"]]
        for key, base_name in _CONTROLS.items():
            base = hits.get(base_name)
            if base is not None and r["name"] != base_name and "(all val)" not in r["name"] and len(h) == len(base) \
                    and not (key == "vs_first_person_bare" and r["name"].startswith("first-person")):
                r[key] = _paired(h, base, n_boot, seed)
        if r["name"] == "first-person-bare (all val)" and "first-person (all val)" in hits:  # the wrapper, on all val
            r["vs_first_person"] = _paired(h, hits["first-person (all val)"], n_boot, seed)
        if r.get("uncompiled") in hits:
            r["vs_uncompiled"] = _paired(h, hits[r["uncompiled"]], n_boot, seed)
    return rows


def _compiled(name, optimizer, train, n_train, lm, seed):
    """``name`` compiled by ``optimizer`` through the compile service (dev selection: never worse
    on dev than the uncompiled program) on a seeded stratified sample of ``n_train`` train
    conversations: ``(program, compile summary)``."""
    from personalign.compile_service import compile_program, summary
    from personalign.stages import resolve_stage as get_stage

    stage = get_stage("extraction")
    sample = stage.limit(train, n_train, seed)
    log(f"extraction: compiling {name} with {optimizer} on {len(sample)} train conversations")
    t0 = time.perf_counter()
    program, info = compile_program(stage, name, optimizer, sample, lm=lm, seed=seed)
    return program, {**(summary(info) or {}), "n_train": len(sample), "optimizer": optimizer,
                     "seconds": round(time.perf_counter() - t0, 2),
                     "lm_calls": (info or {}).get("actual_lm_calls")}


def extraction_section(val_all, convs, lm, n_boot, seed, extractors=("extract", "extract-unfiltered"), verifier=None,
                       compile_with=None, train=(), n_train=0):
    from personalign.evaluation import run_program
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("extraction").registry
    from personalign.programs.extraction.extractor import AttributeExtractor
    from personalign.programs.extraction.merge import merge_attributes
    from personalign.programs.extraction.baseline import SENTENCE_REASON, BareFirstPersonSentences, FirstPersonSentences
    from personalign.signatures.extraction import ExtractedAttribute

    rows = []
    programs = []
    for name in extractors:
        if not convs:
            break
        if name == "extract-unfiltered":
            programs.append((name, AttributeExtractor(min_confidence=0.0, require_evidence=False), None))
        elif name not in ("first-person", "first-person-bare"):  # the LM-free controls run below
            programs.append((name, STRATEGIES.create(name), None))
            if compile_with:
                program, info = _compiled(name, compile_with, list(train), n_train, lm, seed)
                programs.append((f"{name} + {compile_with}", program, {"uncompiled": name, "compile": info}))
    outputs = {}
    for name, program, extra in programs:
        if extra and extra["compile"].get("chosen") == "uncompiled":  # the same program: greedy, same outputs
            o = outputs[extra["uncompiled"]]
            extra = {**extra, "same_program_as": extra["uncompiled"]}
        else:
            log(f"extraction: {name} on {len(convs)} conversations")
            o = run_program(program, convs, inputs=("conversation",), output="attributes", lm=lm, progress=False,
                            description=name)
        outputs[name] = o
        rows.append({**_recall_row(name, convs, o.predictions, n_boot=n_boot, seed=seed, lm_calls=o.lm_calls,
                                   seconds=o.seconds, failures=o.failures, verifier=verifier), **(extra or {})})
        if name == "extract-generalize":  # the LM's part by itself: is the generalizing call worth anything alone?
            # read from the returned attributes, so a generalization that copies a kept sentence (dropped there as
            # a duplicate) is not in this row: it measures the LM's *new* sentences
            general = [[a for a in (p or []) if a.reason != SENTENCE_REASON] for p in o.predictions]
            rows.append(_recall_row("extract-generalize, generalizations not copying a sentence (same LM outputs)",
                                    convs, general,
                                    n_boot=n_boot, seed=seed, lm_calls=0, seconds=o.seconds, failures=o.failures,
                                    verifier=verifier))
        if name == "extract":
            t0 = time.perf_counter()
            merged = [merge_attributes([ExtractedAttribute(**a.model_dump(include=set(ExtractedAttribute.model_fields)))
                                        for a in (p or [])]) for p in o.predictions]
            rows.append(_recall_row("extract-merge (same LM outputs)", convs, merged, n_boot=n_boot, seed=seed,
                                    lm_calls=0, seconds=time.perf_counter() - t0 + o.seconds, failures=o.failures,
                                    verifier=verifier))
    for set_name, exs in (("subset", convs), ("all val", val_all)):
        for control, program in (("first-person", FirstPersonSentences()), ("first-person-bare", BareFirstPersonSentences())):
            if not exs:
                continue
            o = run_program(program, exs, inputs=("conversation",), output="attributes", progress=False)
            rows.append(_recall_row(f"{control} ({set_name})", exs, o.predictions, n_boot=n_boot, seed=seed,
                                    lm_calls=0, seconds=o.seconds, failures=o.failures, verifier=verifier))
    return _paired_vs(rows, n_boot, seed)
