"""Stage 1 on PrefEval: verifier variants, extraction recall, verify-and-refine; prints one JSON object.

Data: ``../shared/data/prefeval`` (persona-driven conversations), split by topic into train / val /
test (:func:`personalign.programs.common.stage1.prefeval_topic_splits`; 8 / 4 / 4 topics).
No human accept/reject labels exist: verification pairs are derived (a conversation with its own
hidden preference = accepted; with another topic's preference = rejected) and extraction recall is
the share of conversations whose hidden preference some extracted attribute matches (MiniLM
cosine >= 0.6, also reported at 0.5 and 0.7).

Sections of the output:

* ``verification`` -- every verifier on the val split; the stage's positive class is a REJECTED
  attribute, so F1 / precision / recall are of detecting rejections (95% percentile-bootstrap CIs).
  Learned verifiers are compiled on all of train (grouped CV by topic, F2 threshold) and run on
  all of val *and* on the LLM subset; LLM verifiers run on ``--limit`` val pairs (taken
  alternately from accepted and rejected pairs so the subset is balanced; within each class a
  seeded sample stratified by topic, ``Stage.limit``).
* ``extraction`` -- on ``--limit-conversations`` val conversations (a seeded random sample
  stratified by topic, :meth:`personalign.programs.stages.Stage.limit`): the LLM extractor (default
  settings: confidence >= 0.4), the same LLM outputs merged (no extra calls), the LLM extractor
  without the confidence and evidence filters (diagnostic: what the model proposes; leave it out
  with ``--extractors extract``; with ``extract-generalize``, also its generalizations that do not
  copy a user's sentence, from the same LM outputs), and two LM-free controls, each on the same sample and on all of
  val: the first-person baseline and ``first-person-bare`` (the same sentences without the
  ``The user said`` wrapper: how much recall the user's own voice earns). Per strategy: recall with
  CI, recall at 0.5 / 0.7, attributes per conversation, the share of its attributes the learned
  verifier (``minilm-logreg``, fitted on train) rejects, LM calls, seconds; each row on the sample
  also has ``vs_first_person`` and (LLM rows) ``vs_first_person_bare``: the paired bootstrap
  difference in recall against that control on the same conversations, with its CI and McNemar's
  exact p. With
  ``--compile OPTIMIZER`` each LLM extractor is also compiled toward recall (the stage metric)
  through :func:`personalign.compile_service.compile_program` on ``--compile-train`` train
  conversations (dev selection on held-out train topics) and scored on the same conversations;
  its row carries the compile summary and ``vs_uncompiled`` (paired); when dev selection keeps the
  uncompiled program, the row reuses its outputs (``same_program_as``) instead of running it again.
* ``refine`` -- verify-and-refine (``--rounds``) with the learned verifier and the LLM refiner, for
  the first-person baseline's attributes and the unfiltered LLM extractor's: acceptance before /
  after, removed, still rejected; plus the error taxonomy (LLM) of up to ``--limit`` rejected ones.
* ``bad_input`` -- the extractor and the learned verifier on an empty history, a history without
  user turns, one 5 MB message and non-UTF-8 text: each a defined result or a clear error.

Cache disabled: every LM call reaches the model and is counted. About 10 minutes on an idle
2-core machine with the defaults.

Usage: ``python benchmarks/extraction.py [--lm local/qwen2.5-coder-1.5b-instruct] [--limit 8]
[--limit-conversations 3] [--extractors extract,extract-unfiltered] [--compile bootstrap] [--compile-train 24] [--rounds 1] [--n-boot 1000] [--seed 0] [--sections verification,extraction,refine,bad_input]``
(``--limit 0 --limit-conversations 0``: the LM-free parts only). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import time
import warnings

from _common import ROOT, emit, log, quiet_logs, shared_data, usage_error  # noqa: F401
from _extraction_recall import extraction_section

import personalign  # noqa: E402,F401

SECTIONS = ("verification", "extraction", "refine", "bad_input")

SUMMARY_KEYS = ("n", "f1", "f1_ci", "precision", "precision_ci", "recall", "recall_ci", "yes_rate", "yes_rate_ci",
                "accuracy", "gold_yes_rate", "lm_calls", "failures", "seconds")


def _auc(gold, scores):
    from sklearn.metrics import roc_auc_score

    if any(s is None for s in scores) or len(set(gold)) < 2:
        return None
    return round(float(roc_auc_score(gold, scores)), 4)


def _balanced(examples, k, seed=0):
    """``k`` pairs, alternately accepted and rejected, each class a seeded sample stratified by
    topic (the verification stage's ``--limit`` sample; file order within a class)."""
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("verification")
    half = (k + 1) // 2
    acc = st.limit([e for e in examples if e.accepted], half, seed) if k else []
    rej = st.limit([e for e in examples if not e.accepted], half, seed) if k else []
    out = []
    for a, r in zip(acc, rej):
        out += [a, r]
    return out[:k]


def verification_section(train, val, subset, lm, n_boot, seed):
    from personalign.evaluation import evaluate_stage
    from personalign.lm import CallCounter
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("verification")
    STRATEGIES = resolve_stage("verification").registry

    rows, compiled = [], {}
    for name in STRATEGIES.names():
        info = STRATEGIES.info(name)
        if info.uses_lm and not subset:
            continue
        log(f"verification: {name}")
        t0 = time.perf_counter()
        program = STRATEGIES.create(name)
        compile_info = None
        if info.trainable:
            with CallCounter() as cc:
                program, res = STAGE.default_optimizer(name, seed=seed).compile(program, trainset=train)
            compile_info = {"threshold": res.details["threshold"], "oof_auc": res.details.get("oof_auc"),
                            "train_f2_oof": res.train_score, "seconds": round(res.seconds, 2), "lm_calls": cc.calls}
            compiled[name] = program
        sets = ([("val", val)] if not info.uses_lm else []) + ([("lm_subset", subset)] if subset else [])
        for set_name, exs in sets:
            rep = evaluate_stage(STAGE, program, exs, lm=lm if info.uses_lm else None, n_boot=n_boot, seed=seed,
                                 progress=False, description=name)
            row = {"name": name, "on": set_name, **{k: rep[k] for k in SUMMARY_KEYS if k in rep},
                   "auc": _auc(rep["gold_positive"], rep["scores"]), "errors": rep["errors"][:3]}
            if compile_info:
                row["compile"] = compile_info
            row["seconds_total"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
    return rows, compiled


def refine_section(convs, verifier, lm, rounds, limit):
    from personalign.lm import CallCounter, use
    from personalign.programs.extraction.baseline import FirstPersonSentences
    from personalign.programs.extraction.extractor import AttributeExtractor
    from personalign.programs.extraction.refine import VerifyAndRefine
    from personalign.programs.common.evidence import render_turns
    from personalign.programs.verification.taxonomy import classify_errors

    rows, rejected_items = [], []
    if not convs:
        return rows, None
    for ext_name, extractor in (("first-person", FirstPersonSentences()),
                                ("extract-unfiltered", AttributeExtractor(min_confidence=0.0, require_evidence=False))):
        log(f"refine: {ext_name}")
        program = VerifyAndRefine(extractor=extractor, verifier=verifier, rounds=rounds)
        n_ex = acc0 = acc1 = removed = still = failures = 0
        t0 = time.perf_counter()
        with use(lm), CallCounter() as cc:
            for ex in convs:
                try:
                    p = program(conversation=ex.conversation)
                except Exception as exc:  # noqa: BLE001 -- counted, never fatal in a benchmark
                    failures += 1
                    last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                    continue
                n_ex += p.n_extracted
                acc0 += p.passes[0]["accepted"] if p.passes else 0
                acc1 += len(p.attributes)
                removed += len(p.removed)
                still += len(p.rejected)
                ev = render_turns(ex.conversation)
                rejected_items += [{"evidence": ev, **r} for r in p.removed + p.rejected]
        row = {"extractor": ext_name, "verifier": "minilm-logreg", "rounds": rounds, "n_conversations": len(convs),
               "n_extracted": n_ex, "acceptance_before": acc0 / n_ex if n_ex else None,
               "acceptance_after": acc1 / n_ex if n_ex else None, "removed": removed, "still_rejected": still,
               "lm_calls": cc.calls, "seconds": round(time.perf_counter() - t0, 2), "failures": failures}
        if failures:
            row["last_error"] = last_error
        rows.append(row)
    tax = None
    if rejected_items and limit:
        log(f"error taxonomy of {min(limit, len(rejected_items))} rejected attributes")
        t0 = time.perf_counter()
        tax = classify_errors(rejected_items[:limit], lm=lm)
        tax = {k: tax[k] for k in ("counts", "shares", "failures", "lm_calls")}
        tax.update(n=min(limit, len(rejected_items)), seconds=round(time.perf_counter() - t0, 2))
    return rows, tax


def bad_input_section(lm, verifier, max_turn_chars):
    from personalign.errors import PersonalignError
    from personalign.lm import CallCounter, use
    from personalign.programs.extraction.extractor import AttributeExtractor

    cases = {  # name: (history, an attribute the history supports, for the learned verifier)
        "empty history": ([], "The user grows tomatoes."),
        "no user turns": ([{"role": "assistant", "content": "Hello! How can I help?"}], "The user grows tomatoes."),
        "one 5 MB message": ([{"role": "user", "content": "I grow tomatoes on my balcony. " * 170_000}],
                             "The user grows tomatoes on a balcony."),
        "non-UTF-8 text": ([{"role": "user", "content": b"I am vegetarian and I love caf\xe9 \xff\xfe culture."}],
                           "The user is vegetarian."),
    }
    out = {}
    for name, (conv, attribute) in cases.items():
        log(f"bad input: {name}")
        t0 = time.perf_counter()
        row = {"chars": sum(len(t["content"]) for t in conv)}
        try:
            with use(lm), CallCounter() as cc:
                p = AttributeExtractor(max_turn_chars=max_turn_chars)(conversation=conv)
            row.update(outcome="result", attributes=len(p.attributes), n_chunks=p.n_chunks,
                       truncated_turns=p.truncated_turns, note=p.note, lm_calls=cc.calls)
        except PersonalignError as exc:
            row.update(outcome="error", error=str(exc))
        evidence = "\n\n".join(f"User: {t['content'] if isinstance(t['content'], str) else t['content'].decode('utf-8', 'replace')}"
                               for t in conv if t["role"] == "user")
        v = verifier(evidence=evidence, attribute=attribute)
        row.update(verifier_attribute=attribute, verifier_accepted=bool(v.accepted), verifier_rationale=v.rationale[:120],
                   seconds=round(time.perf_counter() - t0, 2))
        out[name] = row
    return out


def _check_args(ap, args) -> list[str]:
    """The sections, after checking every name in the flags (an unknown one is one ``error:`` line
    on stderr and exit 2, before any data or LM work)."""
    from personalign.errors import ConfigurationError
    from personalign.optimizers import OPTIMIZERS
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("extraction").registry

    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    bad = [x for x in sections if x not in SECTIONS]
    if bad:
        usage_error(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    try:
        if args.compile:
            OPTIMIZERS.info(args.compile)
        for name in (x.strip() for x in args.extractors.split(",") if x.strip()):
            if name != "extract-unfiltered":
                STRATEGIES.info(name)
    except ConfigurationError as exc:
        usage_error(str(exc))
    return sections


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from personalign.lm import default_model

    ap.add_argument("--lm", default=default_model(), help="model (default: the embedded default, or PERSONALIGN_LM)")
    ap.add_argument("--limit", type=int, default=8, help="val pairs per LLM verifier; rejected attributes classified")
    ap.add_argument("--limit-conversations", type=int, default=3,
                    help="val conversations for the LLM extractor/refiner: a seeded random sample stratified by topic")
    ap.add_argument("--extractors", default="extract,extract-unfiltered",
                    help="LLM extractor rows of the extraction section: extract-unfiltered or any LLM strategy of "
                         "the extraction stage (extract, extract-merge, extract-sentences, ...)")
    ap.add_argument("--compile", default=None, metavar="OPTIMIZER",
                    help="also compile each LLM extractor with this teleprompter (e.g. bootstrap) toward recall, "
                         "through the compile service (dev selection), and score it on the same conversations")
    ap.add_argument("--compile-train", type=int, default=24,
                    help="train conversations for --compile: a seeded random sample stratified by topic")
    ap.add_argument("--rounds", type=int, default=1, help="verify-and-refine rounds")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}")
    ap.add_argument("--bad-input-turn-chars", type=int, default=4000,
                    help="max_turn_chars of the extractor in the bad-input section (the 5 MB message is cut to this;"
                         " the library default 20,000 costs ~5 chunk calls on the embedded model)")
    args = ap.parse_args(argv)
    sections = _check_args(ap, args)  # every name, before the data or the LM is touched
    data = shared_data() / "prefeval"
    out: dict = {"benchmark": "extraction", "data": str(data), "lm": args.lm, "seed": args.seed, "n_boot": args.n_boot,
                 "limit": args.limit, "limit_conversations": args.limit_conversations, "rounds": args.rounds,
                 "compile": args.compile, "compile_train": args.compile_train if args.compile else None}
    if not data.exists():
        emit({**out, "skipped": f"data not found at {data} (set PERSONALIGN_SHARED_DATA)"})
        return 0
    quiet_logs()
    warnings.filterwarnings("ignore")
    from personalign.lm import configure_cache, make_lm
    from personalign.programs.extraction.data import load_extraction
    from personalign.programs.extraction.metrics import RECOVERY_THRESHOLD
    from personalign.programs.verification.data import load_verification

    configure_cache(enabled=False)
    t_all = time.perf_counter()
    lm = make_lm(args.lm, cache=False)
    pairs = load_verification(data)
    train = [e for e in pairs if e.split == "train"]
    val = [e for e in pairs if e.split == "val"]
    subset = _balanced(val, args.limit, args.seed)
    out["sections"] = sections
    out["verification_data"] = {"n_train": len(train), "n_val": len(val), "n_lm_subset": len(subset),
                                "val_topics": sorted({e.topic for e in val}), "positive_class": "rejected",
                                "gold_rejected_rate_val": sum(not e.accepted for e in val) / len(val)}
    log(f"data: {len(train)} train / {len(val)} val verification pairs")
    if "verification" in sections:
        out["verification"], compiled = verification_section(train, val, subset, lm, args.n_boot, args.seed)
    else:  # the learned verifier is still needed by refine / bad_input
        compiled = {}
    if ("refine" in sections or "bad_input" in sections or "extraction" in sections) and "minilm-logreg" not in compiled:
        from personalign.stages import resolve_stage
        STAGE = resolve_stage("verification")
        STRATEGIES = resolve_stage("verification").registry

        compiled["minilm-logreg"], _ = STAGE.default_optimizer("minilm-logreg", seed=args.seed).compile(
            STRATEGIES.create("minilm-logreg"), trainset=train)

    extraction_all = load_extraction(data)
    convs_all = [e for e in extraction_all if e.split == "val"]
    from personalign.stages import resolve_stage as get_stage

    convs = get_stage("extraction").limit(convs_all, args.limit_conversations, args.seed) if args.limit_conversations else []
    out["extraction_data"] = {"n_val_conversations": len(convs_all), "n_lm_subset": len(convs),
                              "recovery_threshold": RECOVERY_THRESHOLD}
    if "extraction" in sections:
        out["extraction"] = extraction_section(convs_all, convs, lm, args.n_boot, args.seed,
                                               extractors=[x.strip() for x in args.extractors.split(",")],
                                               verifier=compiled["minilm-logreg"], compile_with=args.compile,
                                               train=[e for e in extraction_all if e.split == "train"],
                                               n_train=args.compile_train)
    if "refine" in sections:
        out["refine"], out["error_taxonomy"] = refine_section(convs, compiled["minilm-logreg"], lm, args.rounds,
                                                              args.limit)
    if "bad_input" in sections:
        out["bad_input"] = bad_input_section(lm, compiled["minilm-logreg"], args.bad_input_turn_chars)
    summary: dict = {}
    if "verification" in out:
        ver = {(r["name"], r["on"]): r for r in out["verification"]}
        keys = ("f1", "f1_ci", "recall", "recall_ci", "auc")
        summary["learned_verifier_val"] = {k: ver[("minilm-logreg", "val")][k] for k in keys}
        summary["maxsim_baseline_val"] = {k: ver[("minilm-maxsim", "val")][k] for k in keys}
        summary["llm_verifiers_subset"] = {n: {k: ver[(n, "lm_subset")][k] for k in ("f1", "recall", "yes_rate", "lm_calls")}
                                           for n in ("zero-shot", "cot", "criteria") if (n, "lm_subset") in ver}
    if "extraction" in out:
        summary["extraction_recall"] = {r["name"]: r["recall"] for r in out["extraction"]}
    if "refine" in out:
        summary["acceptance"] = {r["extractor"]: [r["acceptance_before"], r["acceptance_after"]] for r in out["refine"]}
    out["summary"] = summary
    out["seconds"] = round(time.perf_counter() - t_all, 2)
    emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
