"""The generic strategies every stage gets from its signature (built-in and declared stages alike):
:func:`bind_generic` makes, for one stage, a subclass bound to its signature, label and positive
class (:mod:`personalign.stages.stage` lists which kind gets which):

* ``all-yes`` / ``all-no`` -- LM-free constants: the output true (false) for every row, the
  trivial baselines of a binary stage (the reference row of its comparisons is the one that
  predicts the class its objective scores);
* ``majority`` -- LM-free: the most frequent train label (:class:`personalign.optimizers.majority.MajorityFit`);
* ``predict`` -- ``dspy.Predict(signature)``; ``cot`` -- ``dspy.ChainOfThought(signature)``
  (LLM strategies: ``NAME@OPT`` compiles them with a teleprompter);
* ``yes-prob`` (binary) -- ``log p(Yes) - log p(No)`` (an embedded model, or an endpoint
  returning ``top_logprobs``) for the question "is the output true for these inputs?",
  natural-log units; the threshold is fitted by grouped CV on train
  (:class:`personalign.optimizers.LearnedSelectorFit`, as relevance's ``yes-prob``);
* ``minilm-logreg`` (binary) -- LM-free: a class-balanced logistic head
  (:class:`~personalign.programs.common.logistic.LogisticSelector`) on MiniLM embeddings of every
  input field plus their pairwise cosines, threshold by grouped CV on train.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Sequence

import dspy

from personalign.programs.common.embed import embed_cached
from personalign.programs.common.logistic import LogisticSelector
from personalign.programs.common.scorer import ThresholdedScorer

_OPT = "personalign.optimizers"


class SignatureModule(dspy.Module):
    """``module_cls(signature)`` called with the stage's inputs (subclasses bind ``signature``)."""

    signature: Any = None
    module_cls: Any = dspy.Predict
    uses_lm = True

    def __init__(self) -> None:
        super().__init__()
        self.predict = self.module_cls(self.signature)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        return self.predict(**inputs)


class Majority(dspy.Module):
    """The most frequent gold label of train, whatever the inputs (``value`` None until fitted)."""

    output_field = "label"
    label = "label"
    signature: Any = None  # the stage's signature (bound by signature_strategies): the type of ``value``
    uses_lm = False

    def __init__(self, value: Any = None) -> None:
        super().__init__()
        self.value = value

    def fit(self, examples: Sequence, *, seed: int = 0) -> "Majority":
        """``value`` = the most frequent ``label`` of ``examples`` (ties: the first seen).

        Raises:
            ValueError: no examples."""
        if not examples:
            raise ValueError("Majority.fit needs examples")
        self.value = Counter(getattr(ex, self.label) for ex in examples).most_common(1)[0][0]
        return self

    def forward(self, **inputs: Any) -> dspy.Prediction:
        self.require_compiled()
        return dspy.Prediction(**{self.output_field: self.value})

    def dump_state(self, *args, **kwargs) -> dict:
        return {"value": self.value}

    def require_compiled(self) -> None:
        """Raise ``RuntimeError`` until ``value`` is set (by :meth:`fit` or a saved state)."""
        if self.value is None:
            raise RuntimeError("Majority is not fitted: compile it first")

    @classmethod
    def state_schema(cls):
        """A saved state's schema: ``{"value": <a value of the stage's output type>}`` (strict: the
        string ``"no"`` is not a bool, ``true`` is not an int; a label list admits only its labels)."""
        from pydantic import ConfigDict, create_model

        fields = getattr(cls.signature, "output_fields", None) or {}
        annotation = fields[cls.output_field].annotation if cls.output_field in fields else Any
        return create_model(f"{cls.__name__}State", __config__=ConfigDict(extra="forbid", strict=True),
                            value=(annotation, ...))

    def load_state(self, state: dict) -> "Majority":
        self.value = state.get("value")
        return self


def _lm_model(model: str | None = None) -> str:
    """The scoring model (``model``, else the LM in context, else the default), checked to give
    next-token log-probabilities (embedded, or an endpoint returning ``top_logprobs``)."""
    from personalign.lm.scoring import resolve_model
    from personalign.lm.serving import require_top_logprobs

    model = resolve_model(model)
    require_top_logprobs(model, "yes-prob")
    return model


class _Positive:
    """Mixin: the positive class of a bool-output stage (``label`` field, ``positive`` value)."""

    label = "label"
    positive = True

    def is_positive(self, example) -> bool:
        from personalign.metrics.dspy_metrics import to_bool

        return to_bool(getattr(example, self.label)) == self.positive


class YesProb(_Positive, ThresholdedScorer):
    """Positive when the yes/no margin (nats, oriented so that higher = positive class) reaches
    ``threshold``. One prompt evaluation per example, no generation: an embedded model's exact
    next-token distribution, or an endpoint's ``top_logprobs`` (as relevance's ``yes-prob``).
    Margins are cached (:func:`personalign.lm.scoring.cached_yes_no_margin`); an embedded model's
    is one forward pass shared with every strategy whose prompt has the same tokens
    (:func:`personalign.lm.forward.yes_no_pass`).

    Raises:
        ConfigurationError: an endpoint that returns no ``top_logprobs``. RuntimeError: predicting
            before compile.
    """

    needs_logprobs = True  # reads next-token log-probabilities: an embedded model, or an endpoint with top_logprobs

    signature: Any = None
    uses_lm = True
    fit_with = "LearnedSelectorFit"

    def __init__(self, threshold: float | None = None) -> None:
        super().__init__()
        self.threshold = threshold
        self.fitted_model: str | None = None

    def messages(self, example) -> list[dict]:
        """The yes/no question: the instructions as the system message; each input on its own line
        under DSPy's field prefix (``Preference: ...``), then the output's name and description."""
        sig = self.signature
        fields = "\n".join(f"{f.json_schema_extra.get('prefix') or name + ':'} {getattr(example, name)}"
                           for name, f in sig.input_fields.items())
        out_name, out = next(iter(sig.output_fields.items()))
        desc = out.json_schema_extra.get("desc")
        question = (out.json_schema_extra.get("prefix") or f"{out_name}:").rstrip(":") + "?"
        if desc and desc != out_name:
            question += f" ({desc})"
        return [{"role": "system", "content": sig.instructions},
                {"role": "user", "content": f"{fields}\n\n{question} Answer Yes or No."}]

    def fit(self, examples: Sequence, *, seed: int = 0) -> "YesProb":
        self.fitted_model = _lm_model()
        return self

    def score_batch(self, examples: Sequence) -> list[float]:
        from personalign.lm.scoring import cached_yes_no_margins

        model = _lm_model(self.fitted_model)
        self.fitted_model = model
        sign = 1.0 if self.positive else -1.0
        return [sign * m for m in cached_yes_no_margins(model, [self.messages(ex) for ex in examples])]

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "model": self.fitted_model}

    def load_state(self, state: dict) -> "YesProb":
        self.threshold = state.get("threshold")
        self.fitted_model = state.get("model")
        return self


class InputsLogReg(_Positive, LogisticSelector, ThresholdedScorer):
    """P(positive | MiniLM features of the inputs) >= threshold. Features: the embedding of each
    input field (384 each) and the cosine of every pair of fields, standardized.

    Args:
        C: inverse L2 strength of the logistic regression. threshold: None until compiled.
    """

    input_names: tuple[str, ...] = ()
    uses_lm = False
    fit_with = "LearnedSelectorFit"
    weights_file = "inputs_logreg.npz"
    classes = ("positive", "negative")
    max_iter = 2000

    def __init__(self, C: float = 0.05, threshold: float | None = None) -> None:
        super().__init__()
        self.C = float(C)
        self.threshold = threshold
        self.features = list(self.input_names)
        self.head = None

    def feature_dim(self) -> int:
        n = len(self.input_names)
        return 384 * n + n * (n - 1) // 2

    def feature_matrix(self, examples: Sequence):
        import numpy as np

        vecs = [embed_cached([str(getattr(ex, k)) for ex in examples]) for k in self.input_names]
        cos = [np.sum(a * b, axis=1, keepdims=True) for a, b in itertools.combinations(vecs, 2)]
        return np.concatenate(vecs + cos, axis=1).astype(np.float32)


class Constant(dspy.Module):
    """LM-free: the same output ``value`` for every row, nothing to fit (``score`` None)."""

    output_field = "label"
    value: Any = True
    uses_lm = False

    def predict_batch(self, examples: Sequence) -> list[dspy.Prediction]:
        return [self._prediction() for _ in examples]

    def forward(self, **inputs: Any) -> dspy.Prediction:
        return self._prediction()

    def _prediction(self) -> dspy.Prediction:
        return dspy.Prediction(**{self.output_field: self.value}, score=None)


_LEARNED = f"{_OPT}.learned:LearnedSelectorFit"
GENERIC: dict[str, tuple[type, dict, str]] = {
    "all-yes": (Constant, {"value": True}, "LM-free baseline: the output is true for every row"),
    "all-no": (Constant, {"value": False}, "LM-free baseline: the output is false for every row"),
    "majority": (Majority, {"optimizer": f"{_OPT}.majority:MajorityFit"}, "LM-free: the most frequent train label"),
    "predict": (SignatureModule, {"module_cls": dspy.Predict}, "LLM: dspy.Predict on the stage's signature"),
    "cot": (SignatureModule, {"module_cls": dspy.ChainOfThought},
            "LLM: dspy.ChainOfThought (reasoning, then the output)"),
    "yes-prob": (YesProb, {"optimizer": _LEARNED},
                 "log p(Yes) - log p(No) (embedded, or an endpoint's top_logprobs); threshold fitted by grouped CV "
                 "on train"),
    "minilm-logreg": (InputsLogReg, {"optimizer": _LEARNED},
                      "LM-free: logistic regression on MiniLM features of the inputs, threshold by grouped CV"),
}


def bind_generic(name: str, stage) -> tuple[type, str]:
    """``(class, summary)`` of the generic strategy ``name`` bound to ``stage`` (its signature, the
    first output field, the label and the positive class): a subclass named after the stage.

    Raises:
        KeyError: not a generic strategy."""
    base, extra, summary = GENERIC[name]
    signature = stage.signature_class
    inputs = tuple(signature.input_fields)
    output = next(iter(signature.output_fields))
    tag = "".join(c if c.isalnum() else "_" for c in stage.name)
    bound = {"signature": signature, "output_field": output, "label": stage.label, "positive": stage.positive,
             "positive_output": stage.positive, "input_names": inputs, **extra}
    cls_name = "".join(p.capitalize() for p in name.split("-")) + f"_{tag}"
    return type(cls_name, (base,), bound), summary


__all__ = ["Constant", "GENERIC", "InputsLogReg", "Majority", "SignatureModule", "YesProb", "bind_generic"]
