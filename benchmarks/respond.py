"""Stage 3 on PrefEval with the embedded model; prints one JSON object.

Sections (all measured in one run, same model, fixed seeded samples):

* ``mcq`` -- PrefEval MCQ accuracy (95% bootstrap CI) on ``--limit`` val questions (split by
  topic) for ``no-profile``, ``gold-preference`` (stated preference in context) and
  ``extracted-attributes``; LM-free references ``minilm-preference`` and ``random`` (chance 25%);
  paired differences vs no-profile. Attribute source (``--attributes``): a JSONL file, or
  ``auto`` -- the ``extraction`` stage's first default strategy on each user's persona-driven
  conversation when that stage is registered, else ``retrieval``: the two user sentences of the
  persona-driven conversation most similar (MiniLM) to the question.
* ``generation`` -- ``--gen-limit`` explicit-preference questions answered by ``generic``,
  ``personalized`` and ``personalized-implicit``; violation rate by the typed judge, explicit
  mention rate (lexical detector), mean length; ``follow_rate_corrected``: the follow rate
  corrected for the violation judge's sensitivity and specificity on PrefEval's labels
  (Rogan-Gladen, interval carrying the validation set's uncertainty; docs/figures.md).
* ``judge`` -- the position-debiased pairwise judge rates each personalized response (B)
  against the generic one (A) on the preference; explicit mentions by the lexical and the typed
  detectors; the judge's rating gap between mention and no-mention responses; judge position
  consistency.
* ``judge_validation`` -- before any judge scores, the violation judge (for ``generation``) and
  the pairwise judge (for ``judge``) are validated on ``--judge-validation-limit`` val questions
  against PrefEval's option labels (``benchmarks/judges.py``; or taken from its JSON with
  ``--judge-report``); a judge whose kappa and accuracy CIs do not both clear chance is not used:
  its section reports ``"judge unusable: ..."`` instead of a score. The ``judge`` section uses
  ``--pairwise-strategy`` (default ``pairwise-expected``) and reports the personalized
  response's win rate over the generic one with its CI. The
  perspectives answer judge sees no preference and cannot be validated by these labels, so its
  win rates are refused too (``--allow-unvalidated-judges`` scores anyway).
* ``perspectives`` -- ``--questions`` fixed open questions (one asks for exactly 5 items); the
  aggregator (k profiles from the PrefEval persona bank) and its baselines (random profiles,
  high temperature, synthetic profiles) vs the single no-profile answer: win rate by the typed
  answer judge (both orders), rule violations (meta text, item count), LM calls, seconds.

Usage: ``python benchmarks/respond.py [--lm local/qwen2.5-coder-1.5b-instruct] [--limit 20]
[--gen-limit 5] [--questions 2] [--k 5] [--attributes auto|retrieval|FILE] [--seed 0]
[--sections mcq,generation,judge,perspectives] [--judge-report JUDGES.json ...]
[--pairwise-strategy pairwise-expected]``. The DSPy cache is disabled so every call
reaches the model. Measured on 2 cores shared with other jobs (load 7-10, ``OMP_WAIT_POLICY=PASSIVE``):
``--sections mcq --limit 20`` 713 s (of which ~510 s the Stage 1 extraction of 20 conversations),
``--sections generation,judge,perspectives --gen-limit 4 --questions 2`` 509 s; an idle machine
is several times faster. For a quick run: ``--limit 8 --gen-limit 3 --questions 1``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings

from _common import emit, judge_reports, quiet_logs, shared_data

import personalign  # noqa: F401
from personalign.lm import default_model  # noqa: E402

QUESTIONS = [
    "Give me 5 items to pack for a weekend hiking trip.",
    "What is a good way to spend a free Saturday in a new city?",
    "How can I eat healthier without spending much time cooking?",
    "List 3 tips for sleeping better.",
]


def _retrieval_attributes(root, examples, k=2) -> dict[str, list[str]]:
    """user_id -> the k user sentences of that user's persona-driven conversation most similar
    (MiniLM cosine) to the MCQ question."""
    import numpy as np

    from personalign.data import load_prefeval
    from personalign.lm.embedder import embed
    from personalign.programs.common.text import split_sentences

    convs = {r.user_id: r for r in load_prefeval(root, "persona")}
    out = {}
    for ex in examples:
        rec = convs.get(ex.user_id)
        if rec is None:
            continue
        sents = [s for t in rec.conversation if t.role == "user" for s in split_sentences(t.content) if len(s) > 15]
        if not sents:
            continue
        vecs = embed([ex.question] + sents)
        order = np.argsort(-(vecs[1:] @ vecs[0]))[:k]
        out[ex.user_id] = [sents[i] for i in sorted(order)]
    return out


def _stage1_attributes(root, examples, lm) -> dict[str, list[str]]:
    """user_id -> attributes from the registered ``extraction`` stage (first default strategy)
    on the user's persona-driven conversation. Raises when the stage is absent or fails."""
    from personalign.data import extraction_targets, load_prefeval
    from personalign.lm import use
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("extraction")
    program = st.registry.create(st.default_strategies.split(",")[0].strip())
    wanted = {e.user_id for e in examples}
    targets = [t.to_dspy() for t in extraction_targets([r for r in load_prefeval(root, "persona")
                                                        if r.user_id in wanted])]
    out = {}
    with use(lm):
        for t in targets:
            pred = program(**{k: getattr(t, k) for k in st.inputs})
            vals = getattr(pred, st.output) or []
            texts = []
            for v in vals:
                text = v if isinstance(v, str) else getattr(v, "attribute", None) or getattr(v, "text", None)
                if text:
                    texts.append(str(text))
            out[t.user_id] = texts
    return out


def section_mcq(root, args, lm) -> dict:
    from personalign.lm import CallCounter
    from personalign.programs.mcq.data import attach_attributes, read_attributes
    from personalign.runners.prefeval import mcq_examples, run_mcq

    t0 = time.perf_counter()
    examples = mcq_examples(root, split="val", limit=args.limit, seed=args.seed)
    source, calls, error = args.attributes, 0, None
    if args.attributes == "auto":
        try:
            with CallCounter() as cc:
                attrs = _stage1_attributes(root, examples, lm)
            calls, source = cc.calls, "extraction-stage"
        except Exception as exc:  # noqa: BLE001 -- fall back, and say why
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            attrs, source = _retrieval_attributes(root, examples), "retrieval"
    elif args.attributes == "retrieval":
        attrs = _retrieval_attributes(root, examples)
    else:
        attrs = read_attributes(args.attributes)
    examples = attach_attributes(examples, attrs)
    res = run_mcq(examples, ["no-profile", "gold-preference", "extracted-attributes", "minilm-preference", "random"],
                  lm=lm, n_boot=args.n_boot, seed=args.seed)
    res.update(attributes_source=source, attributes_error=error, attribute_lm_calls=calls,
               n_with_attributes=sum(bool(e.attributes) for e in examples),
               mean_attributes=sum(len(e.attributes) for e in examples) / max(1, len(examples)),
               seconds=round(time.perf_counter() - t0, 2))
    return res


def section_generation(root, args, lm, refused: str | None = None) -> tuple[dict, list, dict]:
    """``refused``: why the violation judge may not score (its validation failed): responses are
    still generated, the violation rates are None and ``judge`` says why."""
    from personalign.runners.prefeval import generation_examples, run_generation

    t0 = time.perf_counter()
    examples = generation_examples(root, split="val", limit=args.gen_limit, seed=args.seed)
    res = run_generation(examples, ["generic", "personalized", "personalized-implicit"], lm=lm, n_boot=args.n_boot,
                         seed=args.seed, keep_responses=True, score=refused is None)
    responses = {r["name"]: r.pop("responses") for r in res["strategies"]}
    verdicts = {r["name"]: r.pop("verdicts", None) for r in res["strategies"]}
    res["judge"] = refused or "violation judge validated (see judge_validation)"
    res["_verdicts"] = verdicts
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res, examples, responses


def judge_corrected(gen: dict, report: dict | None, args) -> None:
    """Add each strategy's follow rate (1 - violation rate) corrected for the violation judge's
    sensitivity and specificity on PrefEval's labels (Rogan-Gladen,
    :func:`personalign.judge_validation.corrected_follow_rate`), or why not."""
    from personalign.judge_validation import JudgeUnusable, corrected_follow_rate

    verdicts = gen.pop("_verdicts", {})
    for row in gen["strategies"]:
        v = verdicts.get(row["name"])
        if not v or not report:
            row["follow_rate_corrected"] = None
            continue
        try:
            row["follow_rate_corrected"] = corrected_follow_rate([not x for x in v], report, n_boot=args.n_boot,
                                                                 seed=args.seed)
        except (JudgeUnusable, ValueError) as exc:
            row["follow_rate_corrected"] = f"not corrected: {exc}"


def judge_gates(root, args, lm, sections) -> tuple[dict, dict]:
    """Validate the judges the sections use (:mod:`personalign.judge_validation`) on
    ``--judge-validation-limit`` val questions; returns (report, {judge: refusal line or None}).
    The perspectives answer judge sees no preference, so PrefEval's labels cannot validate it."""
    from personalign.judge_validation import refusal, validate_judges

    needed = [j for j, s in (("violation", "generation"), ("pairwise", "judge")) if s in sections]
    from personalign.errors import ConfigurationError

    try:  # a file made with another model stops the run with one ``error:`` line
        report = judge_reports(args.judge_report, args.lm, args.pairwise_strategy)
    except ConfigurationError as exc:
        sys.exit(f"error: {exc}")
    needed = [j for j in needed if j not in report]
    if needed and args.judge_validation_limit:
        report.update(validate_judges(root, split="val", limit=args.judge_validation_limit, lm=lm, judges=needed,
                                      pairwise_strategy=args.pairwise_strategy, n_boot=args.n_boot, seed=args.seed))
    gates = {j: refusal(report.get(j), f"{j} judge") for j in ("violation", "pairwise")}
    gates["answer"] = refusal(None, "answer-preference judge")
    if args.allow_unvalidated_judges:
        gates = {k: None for k in gates}
    return report, gates


def section_judge(examples, responses, args, lm, refused: str | None = None) -> dict:
    if refused:
        return {"judge": refused}
    from personalign.lm import CallCounter, use
    from personalign.programs.judge.mentions import MentionDetector, mention_rating_gap
    from personalign.programs.common.text import lexical_mention
    from personalign.stages import resolve_stage as get_stage

    t0 = time.perf_counter()
    judge, detector = get_stage("judge").registry.create(args.pairwise_strategy), MentionDetector()
    scores, lexical, typed, consistent, failures = [], [], [], [], 0
    with CallCounter() as cc, use(lm):
        for i, ex in enumerate(examples):
            generic = responses["generic"][i]
            for name in ("personalized", "personalized-implicit"):
                resp = responses[name][i]
                if not generic or not resp:
                    failures += 1
                    continue
                try:
                    row = judge.rate(ex.preference, ex.prompt, ex.preference, generic, resp)
                    m = bool(detector(attribute=ex.preference, response=resp).mentions)
                except Exception:  # noqa: BLE001 -- counted
                    failures += 1
                    continue
                scores.append(row["score"])
                consistent.append(bool(row["consistent"]))
                lexical.append(lexical_mention(ex.preference, resp))
                typed.append(m)
    gap_lex = mention_rating_gap(scores, lexical, n_boot=args.n_boot, seed=args.seed)
    gap_typed = mention_rating_gap(scores, typed, n_boot=args.n_boot, seed=args.seed)
    agree = sum(a == b for a, b in zip(lexical, typed)) / len(typed) if typed else None
    import numpy as np

    from personalign.runners._common import mean_ci

    wins = np.array([1.0 if sc > 3 else (0.5 if sc == 3 else 0.0) for sc in scores])
    win = mean_ci(wins, n_boot=args.n_boot, seed=args.seed) if len(wins) else {"mean": None, "ci": None}
    return {"n_pairs": len(scores), "failures": failures, "judge_strategy": args.pairwise_strategy,
            "personalized_win_rate": win["mean"], "personalized_win_rate_ci": win["ci"],
            "win_rate_note": "debiased score > 3 = the personalized response (B) wins, 3 = half a win",
            "mean_score_personalized_vs_generic": sum(scores) / len(scores) if scores else None,
            "position_consistency": sum(consistent) / len(consistent) if consistent else None,
            "mention_rate_lexical": sum(lexical) / len(lexical) if lexical else None,
            "mention_rate_typed": sum(typed) / len(typed) if typed else None,
            "detector_agreement": agree, "rating_gap_lexical": gap_lex, "rating_gap_typed": gap_typed,
            "lm_calls": cc.calls, "seconds": round(time.perf_counter() - t0, 2)}


def section_perspectives(root, args, lm, refused: str | None = None) -> dict:
    import dspy

    from personalign.evaluation import run_program
    from personalign.lm import CallCounter, use
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("perspectives").registry
    from personalign.programs.perspectives.metrics import answer_win_rate
    from personalign.programs.perspectives.rules import rule_violations
    from personalign.programs.common.text import requested_count
    from personalign.runners._common import mean_ci

    t0 = time.perf_counter()
    bank = str(root / "implicit_preference" / "persona-driven")
    qs = QUESTIONS[: args.questions]
    examples = [dspy.Example(question=q, profile_bank=bank).with_inputs("question", "profile_bank") for q in qs]
    rows, single = [], None
    for name in ("no-profile", "aggregator", "random-profiles", "high-temperature", "synthetic-profiles"):
        t1 = time.perf_counter()
        kwargs = {} if name == "no-profile" else {"k": args.k}
        prog = STRATEGIES.create(name, **kwargs)
        out = run_program(prog, examples, inputs=("question", "profile_bank"), output="answer", lm=lm,
                          description=name, progress=False)
        answers = out.predictions
        violations = [rule_violations(a or "", n_items=requested_count(q), question=q) for a, q in zip(answers, qs)]
        row = {"name": name, "failures": out.failures, "errors": out.errors[:2], "lm_calls": out.lm_calls,
               "rule_violations": sum(bool(v) for v in violations),
               "violation_kinds": sorted({k for v in violations for k in v}),
               "mean_chars": sum(len(a or "") for a in answers) / len(answers)}
        if name == "no-profile":
            single = answers
        elif refused:
            row.update(win_rate_vs_single=None, win_rate_ci=None, judge=refused)
        else:
            wins = []
            with CallCounter() as cc, use(lm):
                for ex, a, ref in zip(examples, answers, single):
                    if not a:
                        wins.append(0.0)
                    elif not ref:
                        wins.append(1.0)
                    else:
                        wins.append(answer_win_rate(ex.copy(reference=ref), dspy.Prediction(answer=a)))
            w = mean_ci(wins, n_boot=args.n_boot, seed=args.seed)
            row.update(win_rate_vs_single=w["mean"], win_rate_ci=w["ci"], judge_lm_calls=cc.calls)
        row["seconds"] = round(time.perf_counter() - t1, 2)
        row["example_answer"] = (answers[0] or "")[:400]
        rows.append(row)
    return {"questions": qs, "k": args.k, "bank": bank, "strategies": rows, "seconds": round(time.perf_counter() - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lm", default=default_model(), help="model (default: the embedded default, or PERSONALIGN_LM)")
    ap.add_argument("--limit", type=int, default=20, help="MCQ val questions (a seeded sample stratified by topic)")
    ap.add_argument("--gen-limit", type=int, default=5, help="generation questions (seeded, stratified by topic)")
    ap.add_argument("--questions", type=int, default=2, help="open questions for the aggregator (max 4)")
    ap.add_argument("--k", type=int, default=5, help="profiles per question")
    ap.add_argument("--attributes", default="auto", help="auto | retrieval | JSONL file")
    ap.add_argument("--sections", default="mcq,generation,judge,perspectives")
    ap.add_argument("--judge-validation-limit", type=int, default=40,
                    help="val questions the judges are validated on first (stratified by topic); 0 = none")
    ap.add_argument("--judge-report", action="append", default=[],
                    help="a benchmarks/judges.py JSON of the same model whose reports gate the judges instead of "
                         "validating again (repeatable)")
    ap.add_argument("--pairwise-strategy", default="pairwise-expected",
                    help="the judge-stage strategy of the judge section (validated first)")
    ap.add_argument("--allow-unvalidated-judges", action="store_true",
                    help="score with a judge that failed (or had no) validation anyway")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    quiet_logs()
    warnings.filterwarnings("ignore")
    root = shared_data() / "prefeval"
    if not root.is_dir():
        emit({"benchmark": "respond", "skipped": f"PrefEval not found at {root}"})
        return
    from personalign.lm import CallCounter, configure_cache, make_lm
    from personalign.lm import current_settings

    configure_cache(enabled=False)
    random.seed(args.seed)
    t0 = time.perf_counter()
    lm = make_lm(args.lm, cache=False)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    out = {"benchmark": "respond", "lm": args.lm, "seed": args.seed, "n_ctx": current_settings().n_ctx,
           "sections": sorted(sections)}
    with CallCounter() as total:
        out["judge_validation"], gates = judge_gates(root, args, lm, sections)
        if "mcq" in sections:
            out["mcq"] = section_mcq(root, args, lm)
        if sections & {"generation", "judge"}:
            gen, examples, responses = section_generation(root, args, lm, gates["violation"])
            judge_corrected(gen, out["judge_validation"].get("violation"), args)
            out["generation"] = gen
            if "judge" in sections:
                out["judge"] = section_judge(examples, responses, args, lm, gates["pairwise"])
        if "perspectives" in sections:
            out["perspectives"] = section_perspectives(root, args, lm, gates["answer"])
    out["lm_calls"] = total.calls
    out["seconds"] = round(time.perf_counter() - t0, 2)
    emit(out)


if __name__ == "__main__":
    sys.exit(main())
