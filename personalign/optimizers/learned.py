"""Fit a learned selector on human labels, with its threshold from grouped cross-validation."""

from __future__ import annotations

import math
import time
import warnings
from typing import Sequence

from personalign.optimizers.base import CompileResult, Optimizer


class LearnedSelectorFit(Optimizer):
    """Compile a learned selector: grouped-CV threshold, then a final fit on all of ``trainset``.

    Works with any program exposing ``fit(examples, *, seed) -> self``, ``score_batch(examples) ->
    list[float]`` and a ``threshold`` attribute (:class:`~personalign.programs.relevance.learned.MiniLMLogReg`,
    :class:`~personalign.programs.relevance.cross_encoder.MiniLMCrossEncoder`,
    :class:`~personalign.programs.relevance.ensemble.LearnedPlusLLM`).

    Steps: (1) for each fold of :func:`~personalign.programs.common.cv.grouped_folds` (grouped
    by ``group_key``, leave-one-prompt-out for <= ``max_folds`` prompts) a fresh copy is fitted on the
    other prompts and scores the held-out prompt; (2) the threshold maximizing F1 over the pooled
    out-of-fold scores is chosen (:func:`personalign.metrics.fit_threshold`); (3) a fresh copy is
    fitted on all of train and gets that threshold. ``train_score`` is the out-of-fold F1 (an
    honest estimate), not the in-sample F1. A program with its own decision rule
    ``decide(scores, examples) -> list[bool]`` (e.g. :class:`~personalign.programs.relevance.ranked.RankedSelector`,
    top fraction per user) is scored with that rule instead of ``score >= threshold``.
    Cost: ``n_folds + 1`` fits.

    **Decision rule** (``decision="auto"``, programs that threshold a raw score, i.e. without a
    ``decide`` of their own): the out-of-fold scores also go to
    :func:`~personalign.optimizers.decision.fit_decision_rule`, which chooses among the raw
    threshold and the rules inside a unit (top share, z-score, offset; unit = ``group_key`` or
    ``decision_keys``) by leave-one-group-out F-beta, an absolute threshold only where it shows it
    survives a new group, and every rule with a yes-rate guard (half to twice the share of positives
    in train, kept inside each unit by rank). The rule wraps the compiled scorer
    (:func:`~personalign.programs.decision.with_rule`; saved as the program's ``decision_rule``). ``details["decision_rule"]`` holds the choice, its
    per-group figures and every candidate's. ``decision="threshold"``: the raw threshold only.

    Args:
        group_key: example attribute grouping the CV folds (the stage's ``group_key``; an example
            without it is grouped by its ``prompt``).
        max_folds: leave-one-group-out up to this many groups, else GroupKFold(max_folds).
        label: example field holding the gold label (the stage's ``label``).
        positive: the label value that is the positive class (False for verification, where the
            positive class is a *rejected* attribute).
        beta: the threshold maximizes F-beta (1: F1; 2: recall weighted over precision).
        seed: passed to every ``fit``.
        decision: ``"auto"`` (choose the decision rule, above) or ``"threshold"``.
        decision_keys: the fields of the finer unit candidate (relevance: ``("prompt_id",
            "user_id")``); None: only ``group_key``.

    Raises:
        ValueError: empty trainset, a single prompt group, or a single class.
    """

    name = "learned-selector-fit"
    min_groups = 2  # the threshold's grouped cross-validation holds whole groups out

    def __init__(self, *, label: str, group_key: str, max_folds: int = 5,
                 positive: bool = True, beta: float = 1.0, seed: int = 0, decision: str = "auto",
                 decision_keys: tuple[str, ...] | None = None) -> None:
        super().__init__(seed=seed)
        if decision not in ("auto", "threshold"):
            raise ValueError(f"decision must be 'auto' or 'threshold', got {decision!r}")
        self.decision = decision
        self.decision_keys = tuple(decision_keys) if decision_keys else None
        self.group_key = group_key
        self.max_folds = int(max_folds)
        self.label = label
        self.positive = bool(positive)
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta <= 0:
            raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
        if isinstance(max_folds, bool) or not isinstance(max_folds, int) or max_folds < 2:
            raise ValueError(f"max_folds must be an integer >= 2, got {max_folds!r}")
        self.beta = float(beta)

    def config(self) -> dict:
        return {**super().config(), "threshold": f"f{self.beta:g} on out-of-fold scores"}

    def _is_positive(self, example) -> bool:
        return bool(getattr(example, self.label)) == self.positive

    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        from personalign.metrics import fbeta, fit_threshold
        from personalign.programs.common.cv import group_of, out_of_fold_scores

        if not trainset:
            raise ValueError("LearnedSelectorFit needs a non-empty trainset")
        start = time.perf_counter()
        labels = [self._is_positive(ex) for ex in trainset]
        if len(set(labels)) < 2:
            raise ValueError(f"LearnedSelectorFit needs train examples of both '{self.label}' classes")

        def fit_and_score(tr, te):
            fold = program.deepcopy()
            fold.fit(tr, seed=self.seed)
            return fold.score_batch(te)

        groups = [group_of(ex, self.group_key, fallback="prompt") for ex in trainset]
        oof, folds = out_of_fold_scores(fit_and_score, trainset, groups=groups, labels=labels,
                                        max_folds=self.max_folds)
        threshold = float(fit_threshold(oof, labels, beta=self.beta))
        compiled = program.deepcopy()
        compiled.fit(trainset, seed=self.seed)
        compiled.threshold = threshold
        # programs with their own decision rule (e.g. rank inside a user's attributes) report the
        # out-of-fold score of that rule, with the final model's threshold / top fraction
        oof_pred = compiled.decide(oof, trainset) if hasattr(compiled, "decide") else [s >= threshold for s in oof]
        details = {"threshold": threshold, "n_train": len(trainset), "folds": folds,
                   "oof_yes_rate": sum(oof_pred) / len(oof)}
        if getattr(compiled, "top_fraction", None) is not None:
            details["top_fraction"] = compiled.top_fraction
        try:
            from sklearn.metrics import roc_auc_score

            details["oof_auc"] = round(float(roc_auc_score(labels, oof)), 4)
        except ValueError:
            pass
        returned = compiled
        if self.decision == "auto" and thresholds_raw_score(compiled):
            returned, oof_pred, details["decision_rule"] = self._fit_rule(compiled, oof, labels, groups,
                                                                          trainset, threshold, oof_pred)
        result = CompileResult(
            optimizer=self.name,
            config=self.config(),
            train_score=float(fbeta(labels, oof_pred, beta=self.beta)),
            seconds=time.perf_counter() - start,
            details=details,
        )
        if valset:
            vs = compiled.score_batch(valset)
            if returned is not compiled:
                val_pred = apply_unit_rule(returned.rule, vs, valset)
            else:
                val_pred = compiled.decide(vs, valset) if hasattr(compiled, "decide") else [s >= threshold for s in vs]
            result.val_score = float(fbeta([self._is_positive(e) for e in valset], val_pred, beta=self.beta))
        return returned, result

    def _fit_rule(self, compiled, oof, labels, groups, trainset, threshold, oof_pred):
        """Choose the decision rule on the out-of-fold scores (class docstring). Returns
        ``(program, out-of-fold decisions, rule dict | None)``."""
        from personalign.metrics import fbeta
        from personalign.optimizers.decision import fit_decision_rule, stage_units, with_rule

        def objective(idx, decisions):
            return fbeta([labels[i] for i in idx], list(decisions), beta=self.beta)

        units = stage_units(trainset, self.group_key, self.decision_keys)
        rule_oof: list[bool] = []
        with warnings.catch_warnings():  # candidate values that select nothing are expected in the search
            warnings.filterwarnings("ignore", message=".*predictions have no positives.*")
            rule = fit_decision_rule(oof, groups, None, objective, units=units or None, out_of_fold=rule_oof,
                                     n_splits=self.max_folds, positives=labels)
        if rule is None:
            return compiled, oof_pred, None
        if rule.kind == "threshold":  # the raw threshold wins: the scorer keeps its exhaustive one
            rule.value = threshold
            if rule.band is None:
                return compiled, oof_pred, rule.to_dict()
        wrapped = with_rule(compiled, rule, compiled.output_field, None, compiled.positive_output)
        return wrapped, rule_oof, rule.to_dict()


def thresholds_raw_score(program) -> bool:
    """True for a scorer that decides ``score >= threshold`` (no ``decide`` of its own, e.g. by rank)."""
    from personalign.programs.common.scorer import ThresholdedScorer

    return isinstance(program, ThresholdedScorer) and type(program).decide is ThresholdedScorer.decide


def apply_unit_rule(rule, scores, examples) -> list[bool]:
    """Positive-class decisions of a fitted unit ``rule`` on ``scores`` of ``examples``."""
    from personalign.programs.decision import apply_rule

    units = [rule.unit_of(ex) for ex in examples]
    return apply_rule(rule.kind, rule.value, scores, units, min_unit=rule.min_unit, fallback=rule.fallback,
                      band=rule.band)


__all__ = ["LearnedSelectorFit", "apply_unit_rule", "thresholds_raw_score"]
