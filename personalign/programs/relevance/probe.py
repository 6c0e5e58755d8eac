"""``lm-probe``: a linear probe on the judge's final hidden state at the verdict position.

The prompt is the ``yes-prob`` question (:func:`personalign.lm.scoring.relevance_messages`); the
feature vector of a pair is the embedded model's final hidden state at the last prompt token --
the position that emits the Yes/No verdict (:func:`personalign.lm.forward.yes_no_pass`; shape
(n_embd,), 1536 for Qwen2.5-Coder-1.5B) -- and the head is the class-balanced
:class:`~personalign.programs.common.logistic.LogisticHead`. Its ``C`` is chosen inside the
training examples by leave-one-group-out CV over prompts (``prompt_id``): the ``C`` of
:data:`C_GRID` with the best mean held-out-prompt ROC AUC (ties: the smaller ``C``; one prompt in
train, as in a nested fold of a stack: the middle of the grid, said in ``cv``). The score is
the head's logit; the decision rule is chosen by :class:`personalign.optimizers.LearnedSelectorFit`
(leave-one-prompt-out, threshold or a rule inside a unit).

Cost: the ``yes-prob`` forward pass per pair, the same one: a pair whose margin ``yes-prob`` (or an
ensemble) already asked for costs nothing more, in this run or a later one with the same cache
dir (:mod:`personalign.lm.forward`); KV prefix reuse kept. Embedded (``local/...``) models
only: any other refuses with :class:`~personalign.errors.ConfigurationError`.

Saving (no pickle): state ``{"threshold", "model", "C", "n_embd", "fitted", "cv"}``; the head as
``lm_probe.npz`` (``coef`` (n_embd,), ``intercept`` (), ``mean`` (n_embd,), ``scale`` (n_embd,)),
read back with ``allow_pickle=False``.
"""

from __future__ import annotations

from typing import Sequence

from personalign.programs.common.logistic import LogisticHead, LogisticSelector
from personalign.programs.relevance._scorer import RelevanceScorer
from personalign.programs.relevance.yes_prob import resolve_model

C_GRID = (0.0003, 0.001, 0.003, 0.01, 0.03)
WEIGHTS_FILE = "lm_probe.npz"


def cached_hidden(model: str, attribute: str, prompt: str):
    """Final hidden state (float64, (n_embd,)) of the pair's yes/no question: the one forward pass
    whose margin ``yes-prob`` reads (:func:`personalign.lm.forward.yes_no_pass`, cached in memory
    and on disk).

    Raises:
        ConfigurationError: a model that is not embedded."""
    from personalign.lm.forward import yes_no_pass
    from personalign.lm.scoring import relevance_messages

    return yes_no_pass(model, relevance_messages(attribute, prompt)).hidden


def hidden_states(model: str, examples: Sequence):
    """(n, n_embd) float64 hidden states of the examples, computed grouped by request and user
    (KV prefix reuse), returned in the caller's order."""
    import numpy as np

    from personalign.lm.scoring import sharing_order

    keys = [(ex.prompt, str(getattr(ex, "user_id", "") or ""), ex.attribute) for ex in examples]
    out: list = [None] * len(examples)
    for i in sharing_order(keys):
        out[i] = cached_hidden(model, examples[i].attribute, examples[i].prompt)
    return np.vstack(out) if out else np.zeros((0, 0))


def _group(example) -> str:
    pid = getattr(example, "prompt_id", None)
    return str(pid if pid is not None else example.prompt)


class LMProbe(LogisticSelector, RelevanceScorer):
    """Relevant when the probe's logit on the verdict-position hidden state passes the decision rule.

    Args:
        model: embedded model string; None = the LM of the current dspy context (default model
            as the fallback), recorded at fit.
        C: inverse L2 strength; None = chosen from :data:`C_GRID` by leave-one-prompt-out AUC in ``fit``.
        threshold: decision threshold on the logit (None until compiled).

    Raises:
        ConfigurationError: a model that is not embedded.
        ValueError: ``fit`` on a single class.
        RuntimeError: scoring before fit / load_weights.
    """

    needs_logprobs = True  # reads next-token log-probabilities: an embedded model, or an endpoint with top_logprobs

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    uses_lm = True
    fit_with = "LearnedSelectorFit"
    weights_file = WEIGHTS_FILE
    classes = ("relevant", "irrelevant")
    max_iter = 2000

    def __init__(self, model: str | None = None, C: float | None = None, threshold: float | None = None) -> None:
        super().__init__()
        self.model = model
        self.C = C
        self.fixed_C = C is not None
        self.threshold = threshold
        self.features = ["hidden"]
        self.fitted_model: str | None = None
        self.n_embd: int | None = None
        self.cv: dict | None = None
        self.head = None

    def _model(self) -> str:
        from personalign.errors import ConfigurationError
        from personalign.lm import is_local

        model = resolve_model(self.model or self.fitted_model)
        if not is_local(model):
            raise ConfigurationError(f"lm-probe reads the hidden state of an embedded model (local/...); got '{model}'")
        return model

    def feature_dim(self) -> int:
        if self.n_embd is None:
            raise RuntimeError("LMProbe has no n_embd: fit it or load its state first")
        return int(self.n_embd)

    def feature_matrix(self, examples: Sequence):
        return hidden_states(self._model(), examples)

    def is_positive(self, example) -> bool:
        return bool(example.relevant)

    def fit(self, examples: Sequence, *, seed: int = 0) -> "LMProbe":
        """Hidden states of ``examples``; ``C`` by leave-one-prompt-out AUC (unless given); the head.

        Raises:
            ValueError: a single class in ``examples``.
        """
        import numpy as np
        from sklearn.metrics import roc_auc_score
        from sklearn.model_selection import LeaveOneGroupOut

        model = self._model()
        y = np.array([self.is_positive(e) for e in examples], dtype=int)
        if len(set(y.tolist())) < 2:
            raise ValueError("LMProbe.fit needs both relevant and irrelevant examples")
        X = hidden_states(model, examples)
        groups = [_group(e) for e in examples]
        C = self.C
        if not self.fixed_C and len(set(groups)) < 2:  # one prompt (a nested fold): no held-out prompt to choose C on
            C = C_GRID[len(C_GRID) // 2]
            self.cv = {"C": C, "C_grid_mean_auc": None, "note": "one prompt in train: C not chosen by CV"}
        elif not self.fixed_C:
            table = {}
            for c in C_GRID:
                aucs = []
                for tr, te in LeaveOneGroupOut().split(X, y, groups):
                    if len(set(y[tr].tolist())) < 2 or len(set(y[te].tolist())) < 2:
                        continue
                    head = LogisticHead(C=c, class_weight="balanced", max_iter=self.max_iter, random_state=seed)
                    aucs.append(float(roc_auc_score(y[te], head.fit(X[tr], y[tr]).decision_function(X[te]))))
                table[c] = float(np.mean(aucs)) if aucs else float("nan")
            valid = {c: a for c, a in table.items() if a == a}
            C = max(valid, key=lambda c: (valid[c], -c)) if valid else C_GRID[len(C_GRID) // 2]
            self.cv = {"C_grid_mean_auc": {str(c): round(a, 4) for c, a in table.items()}, "C": C}
        self.C = float(C)
        self.head = LogisticHead(C=self.C, class_weight="balanced", max_iter=self.max_iter,
                                 random_state=seed).fit(X, y)
        self.fitted_model = model
        self.n_embd = int(X.shape[1])
        return self

    def score_batch(self, examples: Sequence) -> list[float]:
        """The probe's logits, shape (n,)."""
        head = self.require_head()
        return [float(v) for v in head.decision_function(self.feature_matrix(examples))] if examples else []

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "model": self.fitted_model, "C": self.C, "n_embd": self.n_embd,
                "fitted": self.fitted, "cv": self.cv}

    def load_state(self, state: dict) -> "LMProbe":
        self.threshold = state.get("threshold")
        self.fitted_model = state.get("model")
        self.C = state.get("C")
        self.fixed_C = self.C is not None
        self.n_embd = state.get("n_embd")
        self.cv = state.get("cv")
        return self


__all__ = ["C_GRID", "LMProbe", "cached_hidden", "hidden_states"]
