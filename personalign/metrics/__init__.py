"""Human-agreement metrics: DSPy per-example metrics and corpus metrics with bootstrap CIs.

Importing is light (numpy only; scikit-learn and scipy load inside the functions).

Corpus functions (arrays in, floats/dicts out): :func:`precision`, :func:`recall`,
:func:`f1`, :func:`fbeta`, :func:`accuracy`, :func:`yes_rate`, :func:`binary_report`
(all of them with 95% percentile-bootstrap CIs), :func:`paired_bootstrap_diff`,
:func:`mcnemar_exact`, :func:`bootstrap_ci`, :func:`fit_threshold`, :func:`cohen_kappa`,
:func:`pairwise_kappa`, :func:`kappa_vs_majority`, :func:`quadratic_weighted_kappa`,
:func:`spearman`, :func:`mcq_accuracy`.

DSPy metrics ``metric(example, pred, trace=None)``: :func:`relevance_f1`,
:func:`relevance_accuracy`, :func:`verification_accuracy`, :func:`mcq_correct`,
:func:`rating_agreement`, :func:`binary_metric`; :func:`evaluate_binary` aggregates a
corpus of predictions into a :func:`binary_report`.
"""

from personalign.metrics.agreement import (
    cohen_kappa,
    kappa_vs_majority,
    majority_vote,
    mcq_accuracy,
    pairwise_kappa,
    quadratic_weighted_kappa,
    spearman,
)
from personalign.metrics.binary import (
    accuracy,
    binary_report,
    bootstrap_ci,
    f1,
    fbeta,
    fit_threshold,
    mcnemar_exact,
    paired_bootstrap_diff,
    precision,
    recall,
    yes_rate,
)
from personalign.metrics.dspy_metrics import (
    binary_metric,
    evaluate_binary,
    mcq_correct,
    rating_agreement,
    relevance_accuracy,
    relevance_f1,
    to_bool,
    verification_accuracy,
)

__all__ = [
    "accuracy", "binary_report", "bootstrap_ci", "f1", "fbeta", "fit_threshold", "mcnemar_exact",
    "paired_bootstrap_diff", "precision", "recall", "yes_rate",
    "cohen_kappa", "kappa_vs_majority", "majority_vote", "mcq_accuracy", "pairwise_kappa",
    "quadratic_weighted_kappa", "spearman",
    "binary_metric", "evaluate_binary", "mcq_correct", "rating_agreement", "relevance_accuracy",
    "relevance_f1", "to_bool", "verification_accuracy",
]
