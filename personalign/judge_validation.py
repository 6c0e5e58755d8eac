"""Judges validated against labels people wrote, before they judge anything else.

Labels: PrefEval's MCQ options (``mcq_options/``), written by its authors -- the FIRST option
follows the stated preference, the other three violate it. Each PrefEval MCQ question gives one
**labelled pair**: the following option and one violating option (drawn with a seeded
``random.Random``), shown in a seeded order (A/B), so the gold is balanced across positions.

* **violation judge** (:class:`~personalign.programs.common.violation.ViolationJudge`, typed
  ``violates: bool``): the following option must be judged ``follows``, the violating one
  ``violates`` (2 calls per pair). A single-response judge has no order to swap.
* **pairwise 1-5 judge** (a ``judge`` stage strategy, default ``pairwise-expected``; attribute = the
  preference, profile = the preference, prompt = the question): the following option must win.
  Verdicts: rating < 3 = A wins, > 3 = B wins, 3 = tie (a tie is never correct). **Before
  debiasing**: the verdict of the order shown (A, B); **after**: the verdict of the both-orders
  mean :func:`~personalign.programs.judge.pairwise.debias` uses. ``flip_rate``: share of pairs
  whose verdict changes when the two responses are swapped (the swapped rating mapped back,
  ``6 - r_ba``); after debiasing the verdict is order-invariant by construction, and the flip
  rate is recomputed to check it.

The violation judge's report also carries its sensitivity and specificity for "follows" and the
per-item verdicts, from which :func:`corrected_follow_rate` corrects a judged follow rate
(Rogan–Gladen) with an interval that carries the validation set's uncertainty.

Figures: accuracy, Cohen's kappa (scikit-learn, :func:`personalign.metrics.cohen_kappa`) and
flip rate, each with a 95% percentile-bootstrap CI over **pairs** (the two items of a pair are
resampled together). A judge is **usable** when the lower bounds of both its kappa CI and its
accuracy CI clear chance (kappa > 0, accuracy > 0.5: each pair's two items, or its two
responses, are one of each label) -- pairwise: after debiasing, where a tie is never correct, so a
judge that calls almost everything a tie is not usable however positive its kappa.
:func:`require_usable` is what other benchmarks call before scoring with a judge.

Strategies with expected ratings (``pairwise-expected``) return ``e_ab`` / ``e_ba``: the figures
then use those (floats on 1-5) in place of the integer ratings.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Sequence

import numpy as np

from personalign.programs.judge.metrics import verdict  # the stage's verdict, re-exported

__all__ = ["labelled_pairs", "validate_violation_judge", "validate_pairwise_judge", "validate_judges", "usable",
           "require_usable", "refusal", "JudgeUnusable", "verdict", "corrected_follow_rate"]


class JudgeUnusable(RuntimeError):
    """A judge whose kappa or accuracy CI against the labels does not clear chance was asked to score something."""


def labelled_pairs(data: str | os.PathLike, *, split: str | None = "val", limit: int | None = None,
                   seed: int = 0) -> list:
    """One labelled pair per PrefEval MCQ question of ``split`` (split by topic; ``limit``: a
    seeded sample stratified by topic, :meth:`personalign.stages.Stage.limit`).

    Returns:
        ``dspy.Example``s with ``id, topic, preference, question, follows, violates`` (option
        texts), ``follow_first`` (bool: the following option is shown as A) and
        ``response_a``/``response_b``.

    Raises:
        DataError: unreadable data or an empty split; ConfigurationError: ``limit < 1``.
    """
    from personalign.stages import resolve_stage

    stage = resolve_stage("mcq")
    out = []
    for ex in stage.limit(stage.load(data, split=split), limit, seed):
        rng = random.Random(f"{seed}:{ex.id}")
        gold = int(ex.gold_index)
        bad = rng.choice([i for i in range(len(ex.options)) if i != gold])
        follow_first = rng.random() < 0.5
        f, v = ex.options[gold], ex.options[bad]
        out.append(ex.copy(preference=ex.context, follows=f, violates=v, follow_first=follow_first,
                           response_a=f if follow_first else v, response_b=v if follow_first else f))
    return out


def _ci(statistic, *arrays, n_boot: int, seed: int) -> list[float] | None:
    from personalign.metrics import bootstrap_ci

    if len(arrays[0]) == 0:
        return None
    ci = bootstrap_ci(statistic, *arrays, n_boot=n_boot, seed=seed)
    return None if any(np.isnan(c) for c in ci) else [round(float(c), 4) for c in ci]


def _kappa(gold, pred) -> float:
    from personalign.metrics import cohen_kappa

    g, p = np.asarray(gold).ravel(), np.asarray(pred).ravel()
    if g.size == 0:
        return float("nan")
    if np.unique(np.concatenate([g, p])).size == 1:
        return float("nan")
    return cohen_kappa(g, p)


def _acc(gold, pred) -> float:
    g, p = np.asarray(gold).ravel(), np.asarray(pred).ravel()
    return float(np.mean(g == p)) if g.size else float("nan")


def _figures(gold: np.ndarray, pred: np.ndarray, *, n_boot: int, seed: int, prefix: str = "") -> dict:
    """Accuracy and kappa with CIs; rows are pairs (resampled together)."""
    k = _kappa(gold, pred)
    return {f"{prefix}accuracy": round(_acc(gold, pred), 4) if gold.size else None,
            f"{prefix}accuracy_ci": _ci(_acc, gold, pred, n_boot=n_boot, seed=seed),
            f"{prefix}kappa": None if np.isnan(k) else round(k, 4),
            f"{prefix}kappa_ci": _ci(_kappa, gold, pred, n_boot=n_boot, seed=seed)}


CHANCE_ACCURACY = 0.5
"""Accuracy of guessing on the labelled pairs: each pair holds one following and one violating
option, so a constant or coin-flip judge is right half the time."""


def usable(report: dict) -> bool:
    """Whether a judge report's kappa CI lies above 0 and its accuracy CI above chance
    (``report["kappa_ci"][0] > 0`` and ``report["accuracy_ci"][0] > 0.5``; a report without an
    accuracy CI is judged on kappa alone)."""
    ci, acc = report.get("kappa_ci"), report.get("accuracy_ci", "absent")
    if not (bool(ci) and ci[0] is not None and ci[0] > 0):
        return False
    if acc == "absent":
        return True
    return bool(acc) and acc[0] is not None and acc[0] > CHANCE_ACCURACY


def require_usable(report: dict, name: str = "judge") -> None:
    """Raise :class:`JudgeUnusable` unless :func:`usable` (message: the kappa and its CI)."""
    if not usable(report):
        raise JudgeUnusable(f"{name} unusable: kappa {report.get('kappa')} with 95% CI {report.get('kappa_ci')} and "
                            f"accuracy {report.get('accuracy')} with 95% CI {report.get('accuracy_ci')} against "
                            f"PrefEval's option labels do not both clear chance")


def refusal(report: dict | None, name: str = "judge") -> str | None:
    """None when ``report`` says the judge is usable, else the line a benchmark prints instead of a
    score: ``"judge unusable: ..."`` (``report`` None: the judge was not validated)."""
    if report is None:
        return f"judge unusable: the {name} was not validated against labels"
    if usable(report):
        return None
    return (f"judge unusable: against PrefEval's option labels the {name}'s kappa {report.get('kappa')} (95% CI "
            f"{report.get('kappa_ci')}) or accuracy {report.get('accuracy')} (95% CI {report.get('accuracy_ci')}) "
            "does not clear chance (kappa > 0, accuracy > 0.5)")


def _run(program, examples, inputs, lm, description):
    from personalign.programs.run import run_program

    return run_program(program, examples, inputs=inputs, output=None, lm=lm, description=description, progress=False)


def validate_violation_judge(pairs: Sequence, *, lm=None, judge=None, n_boot: int = 1000, seed: int = 0) -> dict:
    """The typed violation judge on both options of every pair.

    Args:
        pairs: from :func:`labelled_pairs`.
        lm: a ``dspy.LM`` (None: the judge runs in the caller's ``use(lm)`` context).
        judge: a program with ``forward(preference, question, response) -> Prediction(violates)``
            (default :class:`~personalign.programs.common.violation.ViolationJudge`; the ``violation``
            stage compiles it toward kappa).

    Returns:
        ``{"judge", "n_pairs", "n_items", "accuracy", "accuracy_ci", "kappa", "kappa_ci",
        "violates_rate", "flip_rate": None, "usable", "failures", "errors", "lm_calls", "seconds"}``;
        a pair with a failed call is left out of the figures (counted in ``failures``).
    """
    import dspy

    from personalign.programs.common.violation import ViolationJudge

    judge = judge or ViolationJudge()
    t0 = time.perf_counter()
    items = [dspy.Example(preference=p.preference, question=p.question, response=r).with_inputs(
        "preference", "question", "response") for p in pairs for r in (p.follows, p.violates)]
    out = _run(judge, items, ("preference", "question", "response"), lm, "violation-judge")
    preds = [None if o is None else bool(o.violates) for o in out.predictions]
    rows = [(preds[2 * i], preds[2 * i + 1]) for i in range(len(pairs))]
    ok = [r for r in rows if None not in r]
    gold = np.array([[False, True]] * len(ok), dtype=bool).reshape(-1, 2)
    pred = np.array(ok, dtype=bool).reshape(-1, 2)
    rep = {"judge": "violation", "labels": "follows=False, violates=True", "n_pairs": len(pairs),
           "n_items": 2 * len(ok), **_figures(gold, pred, n_boot=n_boot, seed=seed),
           "violates_rate": round(float(pred.mean()), 4) if pred.size else None,
           "flip_rate": None, "flip_rate_note": "one response per call: no order to swap",
           "failures": out.failures, "errors": out.errors[:3], "lm_calls": out.lm_calls,
           "seconds": round(time.perf_counter() - t0, 2),
           "resampling": {"unit": "pair", "n_clusters": len(ok), "n_boot": n_boot}}
    if pred.size:  # per-item verdicts: what a judge-corrected rate (corrected_follow_rate) needs
        rep["sensitivity_follows"] = round(float((~pred[:, 0]).mean()), 4)  # says follows | follows
        rep["specificity_follows"] = round(float(pred[:, 1].mean()), 4)  # says violates | violates
        rep["items"] = {"gold_follows": [True, False] * len(ok), "judge_follows": [not v for r in ok for v in r],
                        "pair": [i for i in range(len(ok)) for _ in range(2)]}
    rep["usable"] = usable(rep)
    return rep


def corrected_follow_rate(follows: Sequence[bool], report: dict, *, clusters=None, n_boot: int = 2000,
                          seed: int = 0) -> dict:
    """The share of responses that follow the preference, corrected for the violation judge's
    errors measured on PrefEval's labels (:func:`personalign.metrics.judge_correction.corrected_rate`,
    Rogan–Gladen; the interval resamples the judged responses and, by pair, the validation items).

    Args:
        follows: (n,) the judge's verdicts on the responses (True = follows, i.e. no violation).
        report: a :func:`validate_violation_judge` report with ``items`` (refused unless :func:`usable`).
        clusters: cluster labels of the responses (e.g. their prompt), or None.

    Raises:
        JudgeUnusable: the report does not clear chance; ValueError: no per-item verdicts in it.
    """
    from personalign.metrics.judge_correction import corrected_rate

    require_usable(report, "violation judge")
    items = report.get("items")
    if not items:
        raise ValueError("violation judge report has no per-item verdicts ('items'); re-run its validation")
    return corrected_rate(follows, items["gold_follows"], items["judge_follows"], clusters=clusters,
                          val_clusters=[items["pair"]], n_boot=n_boot, seed=seed)


def _flip(a, b) -> float:
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return float(np.mean(a != b)) if a.size else float("nan")


def validate_pairwise_judge(pairs: Sequence, *, lm=None, strategy: str = "pairwise-expected", judge=None, n_boot: int = 1000,
                            seed: int = 0) -> dict:
    """The pairwise 1-5 judge on every pair, both orders (2 calls per pair).

    Args:
        pairs: from :func:`labelled_pairs`.
        strategy: a both-orders ``judge`` stage strategy (``pairwise-expected``, the default;
            ``pairwise``, ``pairwise-implicit``).
        judge: a program with ``rate(profile, prompt, attribute, response_a, response_b) ->
            {"r_ab", "r_ba", ...}`` instead of ``strategy``.

    Returns:
        ``{"judge", "n_pairs", "before": {accuracy, accuracy_ci, kappa, kappa_ci, flip_rate,
        flip_rate_ci, a_rate}, "after": {same, tie_rate}, "accuracy", "kappa", "kappa_ci" (after
        debiasing: the judge as used), "usable", "failures", "errors", "lm_calls", "seconds"}``.
    """
    import dspy

    from personalign.stages import resolve_stage

    name = f"pairwise:{strategy}" if judge is None else f"pairwise:{strategy} (given {type(judge).__name__})"
    if judge is None:
        judge = resolve_stage("judge").registry.create(strategy)
    if getattr(judge, "both_orders", True) is False:
        raise ValueError(f"{strategy}: validation needs a judge that rates both orders")
    t0 = time.perf_counter()
    examples = [dspy.Example(profile=p.preference, prompt=p.question, attribute=p.preference,
                             response_a=p.response_a, response_b=p.response_b).with_inputs(
        "profile", "prompt", "attribute", "response_a", "response_b") for p in pairs]

    class _Rate(dspy.Module):  # one attribute, both orders: the stage program's own rate()
        def forward(self, **kw):
            return dspy.Prediction(**judge.rate(**kw))

    out = _run(_Rate(), examples, ("profile", "prompt", "attribute", "response_a", "response_b"), lm, "pairwise-judge")
    gold, first, swapped, after = [], [], [], []
    for p, o in zip(pairs, out.predictions):
        if o is None:
            continue
        r_ab = float(o.get("e_ab") if o.get("e_ab") is not None else o.r_ab)
        r_ba = float(o.get("e_ba") if o.get("e_ba") is not None else o.r_ba)
        gold.append("A" if p.follow_first else "B")
        first.append(verdict(r_ab))
        swapped.append(verdict(6 - r_ba))
        s = (r_ab + 6 - r_ba) / 2.0  # the debiased mean (personalign.programs.judge.pairwise.debias)
        s_swapped = 6 - (r_ba + 6 - r_ab) / 2.0  # debiased in the swapped frame, mapped back
        after.append((verdict(s), verdict(s_swapped)))
    g = np.array(gold, dtype=object)
    f, sw = np.array(first, dtype=object), np.array(swapped, dtype=object)
    af = np.array([a for a, _ in after], dtype=object)
    af_sw = np.array([b for _, b in after], dtype=object)
    before = {**_figures(g, f, n_boot=n_boot, seed=seed),
              "flip_rate": round(_flip(f, sw), 4) if f.size else None,
              "flip_rate_ci": _ci(_flip, f, sw, n_boot=n_boot, seed=seed),
              "a_rate": round(float(np.mean(f == "A")), 4) if f.size else None}
    aft = {**_figures(g, af, n_boot=n_boot, seed=seed),
           "flip_rate": round(_flip(af, af_sw), 4) if af.size else None,
           "flip_rate_ci": _ci(_flip, af, af_sw, n_boot=n_boot, seed=seed),
           "tie_rate": round(float(np.mean(af == "tie")), 4) if af.size else None}
    rep = {"judge": name, "n_pairs": len(pairs),
           "n_scored": len(gold), "gold_a_rate": round(float(np.mean(g == "A")), 4) if g.size else None,
           "before": before, "after": aft, "accuracy": aft["accuracy"], "accuracy_ci": aft["accuracy_ci"],
           "kappa": aft["kappa"], "kappa_ci": aft["kappa_ci"], "failures": out.failures, "errors": out.errors[:3],
           "lm_calls": out.lm_calls, "seconds": round(time.perf_counter() - t0, 2),
           "resampling": {"unit": "pair", "n_clusters": len(gold), "n_boot": n_boot}}
    rep["usable"] = usable(rep)
    return rep


def validate_judges(data: str | os.PathLike, *, split: str | None = "val", limit: int | None = None, lm=None,
                    judges: Sequence[str] = ("violation", "pairwise"), pairwise_strategy: str = "pairwise-expected",
                    n_boot: int = 1000, seed: int = 0, violation_judge=None, pairwise_judge=None) -> dict[str, Any]:
    """Validate the named judges on the labelled pairs of ``data`` (a PrefEval root or its
    ``mcq_options/`` folder). ``lm``: a model string or ``dspy.LM`` (None: the default model).
    ``violation_judge``: the violation program to validate (e.g. one compiled by the ``violation``
    stage; default a fresh :class:`~personalign.programs.common.violation.ViolationJudge`).
    ``pairwise_judge``: the pairwise program to validate (e.g. ``pairwise_strategy`` compiled by
    the ``judge`` stage; default a fresh one).

    Returns:
        ``{"data", "split", "n_pairs", "topics", "seed", "violation": {...}, "pairwise": {...}}``
        (the reports of :func:`validate_violation_judge` / :func:`validate_pairwise_judge`).

    Raises:
        DataError: unreadable data or empty split; ConfigurationError: bad ``limit``, unknown
            judge or strategy.
    """
    from personalign.errors import ConfigurationError
    from personalign.lm import resolve_lm

    unknown = [j for j in judges if j not in ("violation", "pairwise")]
    if unknown:
        raise ConfigurationError(f"unknown judge(s) {', '.join(unknown)}; choose from violation, pairwise")
    if "pairwise" in judges:
        from personalign.stages import resolve_stage

        resolve_stage("judge").registry.info(pairwise_strategy)  # unknown name: ConfigurationError, before any call
    pairs = labelled_pairs(data, split=split, limit=limit, seed=seed)
    lm_obj = resolve_lm(lm, True)
    out: dict[str, Any] = {"data": str(data), "split": split, "n_pairs": len(pairs), "seed": seed,
                           "topics": dict(sorted({t: sum(p.topic == t for p in pairs)
                                                  for t in {p.topic for p in pairs}}.items()))}
    if "violation" in judges:
        out["violation"] = validate_violation_judge(pairs, lm=lm_obj, judge=violation_judge, n_boot=n_boot, seed=seed)
    if "pairwise" in judges:
        out["pairwise"] = validate_pairwise_judge(pairs, lm=lm_obj, strategy=pairwise_strategy, judge=pairwise_judge,
                                                  n_boot=n_boot, seed=seed)
    return out
