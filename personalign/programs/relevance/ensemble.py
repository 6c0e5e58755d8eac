"""Ensemble: a learned selector stacked with an LLM signal (the yes-probability margin).

Members: :class:`~personalign.programs.relevance.learned.MiniLMLogReg` (trained on human labels)
and the embedded model's ``log p(Yes) - log p(No)`` margin
(:func:`personalign.programs.relevance.yes_prob.cached_margin`, no generation). A 2-feature
``LogisticRegression(class_weight="balanced")`` stacker combines ``logit(p_learned)`` and the
margin. Stacking without leakage: inside :meth:`LearnedPlusLLM.fit`, the learned member's
stacker inputs are its out-of-fold scores (grouped by prompt,
:func:`personalign.programs.common.cv.out_of_fold_scores`), then the member is refit on all
examples. :class:`personalign.optimizers.LearnedSelectorFit` adds the outer grouped CV that fixes
the decision threshold, so train labels never set the threshold through in-sample scores.

The stacker's margin weight shows how much the LLM adds: near 0 when the model is at chance.

``probe=True`` adds a third stacker input: the logit of an ``lm-probe`` member
(:class:`~personalign.programs.relevance.probe.LMProbe`, a linear probe on the embedded model's
final hidden state at the verdict position, read from the same forward pass as the margin), its
stacker inputs out-of-fold like the learned member's; then ``coef`` is ``[w_learned, w_margin,
w_probe]``, the state holds ``"probe": <member state>`` and the weights directory the member's
``lm_probe.npz``. Embedded models only.

Saving (no pickle): :meth:`LearnedPlusLLM.dump_state` -> JSON ``{"threshold", "model",
"stacker": {"coef": [w_learned, w_margin], "intercept": b}, "learned": <member state>}``;
:meth:`LearnedPlusLLM.save_weights(dir)` writes the member's ``minilm_logreg.npz``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence


from personalign.programs.common.logistic import LogisticHead
from personalign.programs.relevance._scorer import RelevanceScorer, TopShareDecision

from personalign.programs.relevance.learned import MiniLMLogReg
from personalign.programs.relevance.yes_prob import margins, resolve_model


def _probe_member(model: str | None):
    from personalign.programs.relevance.probe import LMProbe

    return LMProbe(model=model)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


class LearnedPlusLLM(RelevanceScorer):
    """Relevant when ``sigmoid(w1 * logit(p_learned) + w2 * margin + b) >= threshold``.

    Args:
        model: embedded model for the margin; None = the LM of the current dspy context (else the
            default model), recorded at fit time and reused for predicting.
        learned: the learned member (default ``MiniLMLogReg()``).
        threshold: decision threshold on the stacked probability; None until compiled.
        probe: stack the logit of an ``lm-probe`` member too (embedded models only; see the module).

    Cost per pair: one MiniLM embedding lookup and one prompt evaluation of the embedded model
    (with ``probe``, the hidden state is read from that same evaluation).

    Raises:
        ConfigurationError: an endpoint that returns no ``top_logprobs``.
        RuntimeError: scoring before fitting, predicting without a threshold.
    """

    needs_logprobs = True  # reads next-token log-probabilities: an embedded model, or an endpoint with top_logprobs

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    fit_with = "LearnedSelectorFit"

    uses_lm = True

    def __init__(self, model: str | None = None, learned: MiniLMLogReg | None = None,
                 threshold: float | None = None, probe: bool = False) -> None:
        super().__init__()
        self.model = model
        self.learned = learned or MiniLMLogReg()
        self.threshold = threshold
        self.fitted_model: str | None = None
        self.stacker: dict | None = None
        self.probe = _probe_member(model) if probe else None

    def _model(self) -> str:
        from personalign.lm.serving import require_top_logprobs

        model = resolve_model(self.model or self.fitted_model)
        require_top_logprobs(model, "the ensemble's LLM signal")
        return model

    def _features(self, learned_scores: Sequence[float], examples: Sequence, model: str,
                  probe_scores: Sequence[float] | None = None):
        import numpy as np

        margin = margins(model, examples)
        X = np.array([[_logit(p), m] for p, m in zip(learned_scores, margin)], dtype=float)
        return X if probe_scores is None else np.column_stack([X, np.asarray(probe_scores, dtype=float)])

    def fit(self, examples: Sequence, *, seed: int = 0) -> "LearnedPlusLLM":
        """Fit the learned member (out-of-fold for the stacker, then on all) and the stacker."""
        import numpy as np

        from personalign.programs.common.cv import group_of, out_of_fold_scores

        model = self._model()

        def fit_and_score(tr, te):
            member = self.learned.deepcopy()
            member.fit(tr, seed=seed)
            return member.score_batch(te)

        labels = [bool(e.relevant) for e in examples]
        groups = [group_of(e, "prompt_id", fallback="prompt") for e in examples]
        oof, _ = out_of_fold_scores(fit_and_score, examples, labels=labels, groups=groups)
        probe_oof = None
        if self.probe is not None:
            def fit_and_score_probe(tr, te):
                return _probe_member(model).fit(tr, seed=seed).score_batch(te)

            probe_oof, _ = out_of_fold_scores(fit_and_score_probe, examples, labels=labels, groups=groups)
            self.probe = _probe_member(model).fit(examples, seed=seed)
        X = self._features(oof, examples, model, probe_oof)
        y = np.array([bool(e.relevant) for e in examples], dtype=int)
        head = LogisticHead(class_weight="balanced", standardize=False, random_state=seed).fit(X, y)
        self.stacker = {"coef": [float(v) for v in head.coef_], "intercept": float(head.intercept_)}
        self.learned.fit(examples, seed=seed)
        self.fitted_model = model
        return self

    def score_batch(self, examples: Sequence) -> list[float]:
        """Stacked probability of relevant per example (shape (n,))."""
        if self.stacker is None:
            raise RuntimeError("LearnedPlusLLM is not fitted: compile it with LearnedSelectorFit first")
        if not examples:
            return []
        model = self._model()
        probe = self.probe.score_batch(examples) if self.probe is not None else None
        X = self._features(self.learned.score_batch(examples), examples, model, probe)
        head = LogisticHead.from_arrays(self.stacker["coef"], self.stacker["intercept"])
        return [float(v) for v in head.predict_proba(X)[:, 1]]

    def dump_state(self, *args, **kwargs) -> dict:
        state = {"threshold": self.threshold, "model": self.fitted_model, "stacker": self.stacker,
                 "learned": self.learned.dump_state()}
        if self.probe is not None:
            state["probe"] = self.probe.dump_state()
        return state

    def load_state(self, state: dict) -> "LearnedPlusLLM":
        self.threshold = state.get("threshold")
        self.fitted_model = state.get("model")
        self.stacker = state.get("stacker")
        if state.get("learned"):
            self.learned.load_state(state["learned"])
        if state.get("probe") is not None:
            self.probe = _probe_member(self.model).load_state(state["probe"])
        return self

    def save_weights(self, directory: Path) -> Path:
        """Write the learned member's weights (``minilm_logreg.npz``) into ``directory``, and the
        probe member's (``lm_probe.npz``) when there is one."""
        if self.probe is not None:
            self.probe.save_weights(directory)
        return self.learned.save_weights(directory)

    def load_weights(self, directory: Path) -> "LearnedPlusLLM":
        self.learned.load_weights(directory)
        if self.probe is not None:
            self.probe.load_weights(directory)
        return self


class EnsembleRank(TopShareDecision, LearnedPlusLLM):
    """``ensemble-rank``: the ``style-rank`` selector's probability stacked with the yes/no margin,
    deciding by within-group top share (the top train-rate share of each user's attributes for a
    prompt, :func:`~personalign.programs.relevance.ranked.top_share_decisions`).

    Args:
        model: as :class:`LearnedPlusLLM`.
        learned: the learned member (default ``StyleRank()``: answer-style prototype similarity and
            prompt similarities, soft labels).
        min_group: smallest group decided by rank; smaller groups use ``probability >= threshold``.
        top_fraction: share of a group marked relevant; None = the train positive rate (``fit``).
        threshold: stacked-probability threshold for small groups (grouped CV in compile).
        probe: as :class:`LearnedPlusLLM`.
    """

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    def __init__(self, model: str | None = None, learned=None, min_group: int = 5,
                 top_fraction: float | None = None, threshold: float | None = None, probe: bool = False) -> None:
        from personalign.programs.relevance.ranked import StyleRank

        super().__init__(model=model, learned=learned or StyleRank(), threshold=threshold, probe=probe)
        self.min_group = int(min_group)
        self.top_fraction = top_fraction

    def fit(self, examples: Sequence, *, seed: int = 0) -> "EnsembleRank":
        """:meth:`LearnedPlusLLM.fit`, then ``top_fraction`` = the positive rate of ``examples``."""
        super().fit(examples, seed=seed)
        self.fit_top_fraction(examples)
        return self
