"""``gepa``: DSPy's GEPA -- reflective instruction evolution from textual feedback."""

from __future__ import annotations

import math

from personalign.optimizers._teleprompter import TeleprompterOptimizer
from personalign.programs.relevance.metrics import relevance_feedback


class GEPA(TeleprompterOptimizer):
    """Wrap ``dspy.GEPA``: evaluate the program on train mini-batches with a *feedback* metric,
    let a reflection LM rewrite one predictor's instruction from the feedback, keep candidates on
    the Pareto front of per-example ``valset`` scores. Demos are not touched.

    Budget: exactly one of ``max_metric_calls`` (default 32 program runs), ``max_full_evals`` or
    ``auto``; merging is off by default (bounded, CPU-sized).

    Projected LM calls (teleprompter), with ``M`` = the metric-call budget (program runs; for
    ``max_full_evals=k``: ``k x (N + V)``; for ``auto``: DSPy's ``auto_budget``), ``V = len(valset)``,
    ``mb = min(reflection_minibatch_size, len(trainset))``, ``c = calls_per_run``, ``K`` components
    updated per iteration (1 for ``round_robin``, ``P`` for ``all``), ``p`` = reflection call cost:

    * program runs: ``max(V, M - 1 + 2 mb + V) x c`` (GEPA checks the budget before an iteration,
      and one iteration runs at most the parent and the child on a mini-batch plus a full valset
      evaluation; the first full valset evaluation counts towards ``M``);
    * reflection: ``(ceil(max(0, M - V) / mb) + 1) x K x p`` (an iteration spends at least ``mb``
      runs); merge adds ``max_merge_invocations x (2 mb + V) x c`` when ``use_merge``.

    ``p`` is 1: GEPA's instruction proposer uses JSONAdapter (no fallback call).

    Args:
        feedback_metric: ``(example, pred, trace, pred_name, pred_trace) -> Prediction(score,
            feedback)`` (a stage's ``feedback_metric``, e.g.
            :func:`~personalign.programs.relevance.metrics.relevance_feedback`; None: the plain ``metric``
            without textual feedback). ``metric`` (plain) is used for the before/after scores.
        reflection_lm: LM rewriting instructions (None: the wrapper's LM).
    """

    name = "gepa"
    needs_feedback = True  # compile passes the stage's feedback metric (a capability, not a name check)
    seed_note = "seed passed to dspy.GEPA(seed=) (candidate selection, mini-batches)"

    def __init__(self, *, feedback_metric=None, reflection_lm=None, max_metric_calls: int | None = 32,
                 max_full_evals: int | None = None, auto: str | None = None, reflection_minibatch_size: int = 3,
                 candidate_selection_strategy: str = "pareto", component_selector: str = "round_robin",
                 skip_perfect_score: bool = True, use_merge: bool = False, max_merge_invocations: int = 5,
                 failure_score: float = 0.0, perfect_score: float = 1.0, **common) -> None:
        super().__init__(**common)
        if max_full_evals is not None or auto is not None:
            if max_metric_calls == 32:  # the default yields to an explicit alternative budget
                max_metric_calls = None
        if (max_metric_calls is not None) + (max_full_evals is not None) + (auto is not None) != 1:
            raise ValueError("give exactly one of max_metric_calls, max_full_evals, auto")
        self.feedback_metric = feedback_metric  # None: the plain metric, without textual feedback
        self.reflection_lm = reflection_lm
        self.max_metric_calls = max_metric_calls
        self.max_full_evals = max_full_evals
        self.auto = auto
        self.reflection_minibatch_size = int(reflection_minibatch_size)
        self.candidate_selection_strategy = candidate_selection_strategy
        self.component_selector = component_selector
        self.skip_perfect_score = bool(skip_perfect_score)
        self.use_merge = bool(use_merge)
        self.max_merge_invocations = int(max_merge_invocations)
        self.failure_score = float(failure_score)
        self.perfect_score = float(perfect_score)

    def _budget(self, program, trainset, valset) -> int:
        if self.max_metric_calls is not None:
            return int(self.max_metric_calls)
        if self.max_full_evals is not None:
            return int(self.max_full_evals) * (len(trainset) + (len(valset) if valset else 0))
        import dspy

        n = {"light": 6, "medium": 12, "heavy": 18}[self.auto]
        return dspy.GEPA.auto_budget(None, num_preds=max(1, len(program.predictors())), num_candidates=n,
                                     valset_size=len(valset) if valset else len(trainset))

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        m = self._budget(program, trainset, valset)
        v = len(valset) if valset else len(trainset)
        mb = max(1, min(self.reflection_minibatch_size, len(trainset)))
        c = self._calls_per_run(program)
        k = max(1, len(program.predictors())) if self.component_selector == "all" else 1
        runs = max(v, m - 1 + 2 * mb + v)
        out = {"program_runs": runs * c,
               "reflection": (math.ceil(max(0, m - v) / mb) + 1) * k}
        if self.use_merge:
            out["merge"] = self.max_merge_invocations * (2 * mb + v) * c
        return out

    def _budget_note(self) -> str:
        return ("GEPA's metric-call budget counts program runs, and a program called its predictors more "
                "than once per run, or the reflection LM was called more than once per iteration")

    def _run(self, student, trainset, valset):
        import dspy

        feedback = self.feedback_metric
        if feedback is None:
            plain = self.metric

            def feedback(gold, pred, trace=None, pred_name=None, pred_trace=None):
                return plain(gold, pred, trace)

        tp = dspy.GEPA(metric=feedback, max_metric_calls=self.max_metric_calls,
                       max_full_evals=self.max_full_evals, auto=self.auto,
                       reflection_minibatch_size=self.reflection_minibatch_size,
                       candidate_selection_strategy=self.candidate_selection_strategy,
                       reflection_lm=self.reflection_lm if self.reflection_lm is not None else dspy.settings.lm,
                       skip_perfect_score=self.skip_perfect_score, component_selector=self.component_selector,
                       use_merge=self.use_merge, max_merge_invocations=self.max_merge_invocations,
                       num_threads=self.num_threads, failure_score=self.failure_score,
                       perfect_score=self.perfect_score, track_stats=False, seed=self.seed)
        return tp.compile(student, trainset=trainset, valset=valset)


__all__ = ["GEPA", "relevance_feedback"]
