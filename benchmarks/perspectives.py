"""Multi-perspective answering scored by a validated judge; prints one JSON object.

Seed 003, Section 3.3 / Table 2: answer an open question from k sampled user profiles, merge the
answers under explicit rules, and compare with a single answer and with baselines.

* **Questions**: PrefEval explicit-preference questions of the **val** topics, ``--questions`` of
  them (a seeded sample stratified by topic; the ``respond`` stage's loader). Each belongs to a
  user whose stated preference **no strategy sees**.
* **Profiles**: a bank of the PrefEval personas of the **train** topics only, so no val user's
  persona can be sampled.
* **Strategies** (``--strategies``, the ``perspectives`` stage's registry, ``--k`` profiles,
  ``--pool`` plausibility checks): ``aggregator`` (similar profiles), ``random-profiles``,
  ``high-temperature`` (k answers without profiles at temperature 1.0), each merged under the
  same rules; against ``no-profile`` (one answer, temperature 0).
* **Judge**: the ``judge`` stage's ``--pairwise-strategy`` (default ``pairwise-expected``) rates the
  single answer (A) against the strategy's (B) *for the question's own user*: attribute and
  profile = that user's preference, prompt = the question. This is the setting it was validated
  in against PrefEval's option labels (``benchmarks/judges.py``; pass its JSON with
  ``--judge-report``): it scores only when that report, for the same model and strategy, says
  usable (``--allow-unvalidated-judges`` overrides). Both orders, debiased; win = score > 3,
  tie = half a win; win rate with a 95% bootstrap CI over questions, and paired differences
  between strategies on the same questions.
* **Failure cases the rules caught** (Section 4.7.3), summed per strategy from each answer's
  report: persona leakage (``dropped_names``), refusals, meta text, ungrounded sentences,
  fragments, and **language drift** -- candidate answers with CJK characters (the Qwen models'
  drift) and final answers that still contain any; plus rule violations left in the final answer.

Usage: ``python benchmarks/perspectives.py --judge-report judges.json [--questions 30] [--k 3]
[--pool 3] [--strategies aggregator,random-profiles,high-temperature] [--lm MODEL] [--seed 0]
[--partial FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

from _common import judge_reports, quiet_logs, run_on_prefeval

import personalign  # noqa: F401
from personalign.lm import default_model  # noqa: E402

CAUGHT = ("dropped_names", "dropped_refusals", "dropped_meta", "dropped_ungrounded", "dropped_fragments",
          "dropped_echoes", "dropped_language")


def train_bank(root: Path):
    """The PrefEval personas of the train topics as a profile bank (one profile per distinct persona)."""
    from personalign.programs.common.stage1 import prefeval_topic_splits
    from personalign.programs.perspectives.bank import Profile, ProfileBank, profile_names

    seen: dict[str, Profile] = {}
    for r in prefeval_topic_splits(root / "implicit_preference" / "persona-driven")["train"]:
        persona = (r.persona or "").strip()
        if persona and persona not in seen:
            seen[persona] = Profile(f"prefeval-train-persona:{len(seen)}", persona, (), profile_names(persona))
    return ProfileBank(list(seen.values()), "prefeval personas, train topics")


def judge_gate(args) -> str | None:
    """None when a ``--judge-report`` of this model says the pairwise strategy is usable, else why not.

    Raises:
        ConfigurationError: an unreadable report, or one of another model (:func:`judge_reports`).
    """
    from personalign.judge_validation import refusal

    if args.allow_unvalidated_judges:
        return None
    return refusal(judge_reports(args.judge_report, args.lm, args.pairwise_strategy).get("pairwise"), "pairwise judge")


def caught(examples, predictions) -> dict:
    """Sums of what the rules removed, plus language drift (:func:`~personalign.programs.perspectives.rules.drifts`
    from each question), over one strategy's predictions."""
    from personalign.programs.perspectives.rules import drifts

    done = [(ex.question, p) for ex, p in zip(examples, predictions) if p is not None]
    reports = [p.report for _, p in done]
    out = {k: sum(int(r.get(k, 0) or 0) for r in reports) for k in CAUGHT}
    cands = [(q, c) for q, p in done for c in (p.candidates or [])]
    out["candidates"] = len(cands)
    out["candidates_with_cjk"] = sum(drifts(c or "", q) for q, c in cands)
    out["answers_with_cjk"] = sum(drifts(p.answer or "", q) for q, p in done)
    out["answers_with_violations"] = sum(bool(r.get("violations")) for r in reports)
    out["violation_kinds"] = sorted({v for r in reports for v in (r.get("violations") or [])})
    return out


def win_rates(judge, examples, single, answers, lm):
    """Per question: 1 / 0.5 / 0 (B = the strategy wins / tie / loses) or None when either answer failed."""
    from personalign.lm import use

    wins = []
    with use(lm):
        for ex, a, b in zip(examples, single, answers):
            if a is None or b is None:
                wins.append(None)
                continue
            try:
                s = judge.rate(ex.preference, ex.prompt, ex.preference, a.answer, b.answer)["score"]
            except Exception:  # noqa: BLE001 -- a judge failure is counted, not fatal
                wins.append(None)
                continue
            wins.append(1.0 if s > 3 else (0.5 if s == 3 else 0.0))
    return wins


def work(root: Path, args) -> dict:
    import dspy
    import numpy as np

    from personalign.lm import CallCounter, configure_cache, make_lm
    from personalign.evaluation import paired_comparison
    from personalign.programs.run import run_program
    from personalign.stages import resolve_stage as get_stage
    from personalign.runners._common import mean_ci
    from personalign.runners.prefeval import generation_examples

    refused = judge_gate(args)
    stage = get_stage("perspectives")
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    for n in names + ["no-profile"]:
        stage.registry.info(n)  # unknown strategy: ConfigurationError before any call
    configure_cache(enabled=False)
    lm = make_lm(args.lm, cache=False)
    t0 = time.perf_counter()
    gen = generation_examples(root, split="val", limit=args.questions, seed=args.seed)
    bank = train_bank(root)
    examples = [dspy.Example(question=ex.prompt, profile_bank=bank, prompt=ex.prompt, preference=ex.preference,
                             topic=ex.topic).with_inputs("question", "profile_bank") for ex in gen]
    judge = get_stage("judge").registry.create(args.pairwise_strategy)
    rows, outcomes = [], {}
    with CallCounter() as total:
        for name in ["no-profile"] + names:
            kwargs = {} if name == "no-profile" else {"k": args.k, "pool": max(args.pool, args.k)}
            out = run_program(stage.registry.create(name, **kwargs), examples, inputs=("question", "profile_bank"),
                              output=None, lm=lm, description=name, progress=False)
            outcomes[name] = out.predictions
            row = {"name": name, "failures": out.failures, "errors": out.errors[:3], "lm_calls": out.lm_calls,
                   "lm_calls_per_question": round(out.lm_calls / max(1, len(examples)), 2),
                   "seconds": round(out.seconds, 1), "caught": caught(examples, out.predictions),
                   "mean_chars": float(np.mean([len(p.answer) for p in out.predictions if p is not None] or [0]))}
            if name != "no-profile":
                if refused:
                    row.update(win_rate=None, win_rate_ci=None, judge=refused)
                else:
                    with CallCounter() as cc:
                        wins = win_rates(judge, examples, outcomes["no-profile"], out.predictions, lm)
                    scored = [w for w in wins if w is not None]
                    w = mean_ci(scored, n_boot=args.n_boot, seed=args.seed)
                    row.update(win_rate=w["mean"], win_rate_ci=w["ci"], n_judged=len(scored), wins_per_question=wins,
                               judge_lm_calls=cc.calls)
            row["example"] = {"question": examples[0].question,
                              "answer": (outcomes[name][0].answer if outcomes[name][0] is not None else None)}
            rows.append(row)
            if args.partial:  # a long run cut short still leaves the strategies finished so far
                Path(args.partial).write_text(json.dumps({"partial": True, "strategies": rows}) + "\n")
        paired = []
        by = {r["name"]: r for r in rows}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                wa, wb = by[a].get("wins_per_question"), by[b].get("wins_per_question")
                if not wa or not wb:
                    continue
                both = [(x, y) for x, y in zip(wa, wb) if x is not None and y is not None]
                if len(both) < 2:
                    continue
                d = paired_comparison(stage, {"correct": [x for x, _ in both]}, {"correct": [y for _, y in both]},
                                      n_boot=args.n_boot, seed=args.seed)["diff"]
                paired.append({"a": a, "b": b, "n": d["n"], "diff": d["diff"], "ci": d["ci"]})
    return {"benchmark": "perspectives", "lm": args.lm, "seed": args.seed, "n_questions": len(examples),
            "topics": sorted({ex.topic for ex in examples}), "k": args.k, "pool": max(args.pool, args.k),
            "bank": {"source": bank.source, "profiles": len(bank)}, "judge_strategy": args.pairwise_strategy,
            "judge": refused or "validated (see --judge-report)", "judge_reports": args.judge_report,
            "win_note": "the judge rates no-profile (A) vs the strategy (B) for the question's own user "
                        "(attribute = profile = their preference, unseen by every strategy); score > 3 = B wins",
            "strategies": rows, "paired": paired, "lm_calls": total.calls,
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default=default_model(), help="model (default: the embedded default, or PERSONALIGN_LM)")
    ap.add_argument("--data", default=None, help="PrefEval root (default ../shared/data/prefeval)")
    ap.add_argument("--questions", type=int, default=30,
                    help="val explicit-preference questions (a seeded sample stratified by topic)")
    ap.add_argument("--k", type=int, default=3, help="profiles (answers) per question")
    ap.add_argument("--pool", type=int, default=3, help="plausibility checks per question (aggregator; >= k)")
    ap.add_argument("--strategies", default="aggregator,random-profiles,high-temperature")
    ap.add_argument("--pairwise-strategy", default="pairwise-expected", help="the judge-stage strategy that scores")
    ap.add_argument("--judge-report", action="append", default=[],
                    help="a benchmarks/judges.py JSON of the same model (repeatable); the judge scores only when "
                         "one says it is usable")
    ap.add_argument("--allow-unvalidated-judges", action="store_true")
    ap.add_argument("--partial", default=None, help="also write the rows finished so far to this file after each strategy")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.questions < 1 or args.k < 1:
        ap.error("--questions and --k must be >= 1")
    quiet_logs()
    warnings.filterwarnings("ignore")
    return run_on_prefeval("perspectives", args.data, lambda root: work(root, args))


if __name__ == "__main__":
    sys.exit(main())
