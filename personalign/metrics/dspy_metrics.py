"""Per-example metrics with the DSPy signature ``metric(example, pred, trace=None)``.

DSPy convention: during evaluation (``trace is None``) a metric returns a float score; while
an optimizer bootstraps demonstrations (``trace`` is not None) it returns a bool — "is this
trace good enough to keep as a demo?".

F1, Fβ, κ and ρ are **corpus** metrics: they are not sums of per-example scores. The
per-example metrics below therefore score what one item can score (correctness, closeness of
a rating); optimizers that need a corpus value should evaluate with these and then call the
corpus functions (:func:`~personalign.metrics.binary_report`, :func:`~personalign.metrics.f1`,
:func:`evaluate_binary`) on the collected predictions. ``relevance_f1`` is named for the
metric it serves, but per example it is correctness (F1 of a single item is not meaningful).

``example`` and ``pred`` may be ``dspy.Example`` / ``dspy.Prediction`` objects, pydantic
models or plain dicts. Predicted booleans may be bools, 0/1, or the strings
yes/no/true/false/relevant/irrelevant/accepted/rejected (case-insensitive); anything else
counts as a wrong answer.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = [
    "to_bool",
    "relevance_f1",
    "relevance_accuracy",
    "verification_accuracy",
    "mcq_correct",
    "rating_agreement",
    "binary_metric",
    "evaluate_binary",
]

_TRUE = {"yes", "true", "1", "relevant", "accepted", "accept", "supported", "y"}
_FALSE = {"no", "false", "0", "irrelevant", "not relevant", "rejected", "reject", "unsupported", "n"}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    try:
        return getattr(obj, name)
    except (AttributeError, KeyError):
        try:
            return obj[name]
        except Exception:
            return default


def to_bool(value: Any) -> bool | None:
    """Interpret a predicted boolean; None when it cannot be read as one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().strip(".").lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


def _finish(score: float, trace) -> float | bool:
    return score >= 1.0 if trace is not None else float(score)


def binary_metric(label_field: str, pred_field: str | None = None):
    """Build a per-example correctness metric for a boolean field.

    The returned ``metric(example, pred, trace=None)`` gives 1.0/0.0 (bool with a trace);
    an unreadable prediction counts as wrong.
    """
    pf = pred_field or label_field

    def metric(example, pred, trace=None):
        gold = to_bool(_get(example, label_field))
        got = to_bool(_get(pred, pf))
        return _finish(1.0 if (got is not None and got == gold) else 0.0, trace)

    metric.__name__ = f"{label_field}_correct"
    return metric


_relevance = binary_metric("relevant")
_verification = binary_metric("accepted")


def relevance_f1(example, pred, trace=None):
    """Relevance metric for DSPy: per example, whether ``pred.relevant`` equals
    ``example.relevant`` (float 1.0/0.0; bool when ``trace`` is given).

    F1 is a corpus metric; aggregate with :func:`evaluate_binary` or
    :func:`~personalign.metrics.binary_report` to get F1 with its CI."""
    return _relevance(example, pred, trace)


def relevance_accuracy(example, pred, trace=None):
    """Per-example relevance correctness (same score as :func:`relevance_f1`)."""
    return _relevance(example, pred, trace)


def verification_accuracy(example, pred, trace=None):
    """Per-example verification correctness: ``pred.accepted == example.accepted``. The
    corpus metric for recall-first verifiers is F2 (:func:`~personalign.metrics.fbeta`)."""
    return _verification(example, pred, trace)


def mcq_correct(example, pred, trace=None):
    """1.0 when the predicted option index (``pred.answer_index`` or ``pred.gold_index`` or
    ``pred.index``) equals ``example.gold_index``; the corpus mean is MCQ accuracy."""
    got = None
    for name in ("answer_index", "gold_index", "index"):
        got = _get(pred, name)
        if got is not None:
            break
    try:
        ok = got is not None and not isinstance(got, bool) and int(got) == int(_get(example, "gold_index"))
    except (TypeError, ValueError):
        ok = False
    return _finish(1.0 if ok else 0.0, trace)


def rating_agreement(example, pred, trace=None):
    """Quadratic agreement of 1–5 ratings: mean over the gold attributes of
    ``1 − ((pred − gold)/4)²`` (1.0 exact, 0.0 opposite ends; the per-item analogue of the
    quadratic weights of κ_w). A missing or out-of-range predicted rating scores 0 for that
    attribute. With a trace, True only when every rating is exact."""
    gold: Mapping[str, int] = _get(example, "ratings") or {}
    got = _get(pred, "ratings") or {}
    if not gold:
        return _finish(0.0, trace)
    total = 0.0
    for attr, g in gold.items():
        p = got.get(attr) if isinstance(got, Mapping) else None
        if isinstance(p, (int, float)) and not isinstance(p, bool) and 1 <= p <= 5:
            total += 1.0 - ((float(p) - g) / 4.0) ** 2
    return _finish(total / len(gold), trace)


def evaluate_binary(examples: Iterable, preds: Iterable, *, label_field: str = "relevant",
                    pred_field: str | None = None, n_boot: int = 1000, seed: int = 0) -> dict:
    """Corpus evaluation of a boolean task: collect gold and predicted labels and return
    :func:`~personalign.metrics.binary_report` plus ``n_unreadable`` (predictions that could
    not be read as a boolean; counted as negative)."""
    from personalign.metrics.binary import binary_report

    pf = pred_field or label_field
    gold, got, bad = [], [], 0
    for ex, pr in zip(examples, preds, strict=True):
        gold.append(bool(to_bool(_get(ex, label_field))))
        v = to_bool(_get(pr, pf))
        if v is None:
            bad += 1
        got.append(bool(v))
    report = binary_report(gold, got, n_boot=n_boot, seed=seed)
    report["n_unreadable"] = bad
    return report
