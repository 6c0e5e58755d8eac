"""The stage's own set objective, as this package uses it: the one place ``personalign.labels`` reads
:mod:`personalign.objectives` (a stage's objective moves with the stage definition; adapt here).

* :func:`name` -- the objective's display name (``f1``, ``f2``, a metric or function name);
* :func:`score` -- the objective of predictions against the examples' gold;
* :func:`beta` -- β of a yes/no stage's F-beta objective (None for another objective);
* :func:`positive_labels` -- ``(gold, predicted)`` as the stage's positive class.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["name", "score", "beta", "positive_labels"]


def name(stage) -> str:
    """Display name of the stage's objective (:func:`personalign.objectives.objective_name`)."""
    from personalign.objectives import objective_name

    return objective_name(stage)


def score(stage, examples: Sequence, predictions: Sequence) -> float:
    """The stage's set objective of ``predictions`` (raw outputs, None = failure) against ``examples``
    (:func:`personalign.objectives.objective_score`)."""
    from personalign.objectives import objective_score

    return float(objective_score(stage, examples, predictions))


def beta(stage) -> float | None:
    """β of a yes/no stage's F-beta objective (``f1``: 1, ``fbeta:2``: 2); None for another objective."""
    from personalign.objectives import objective_spec

    if stage.kind != "binary":
        return None
    spec = objective_spec(stage)
    if spec == "f1":
        return 1.0
    return float(spec.split(":", 1)[1]) if spec.startswith("fbeta:") else None


def positive_labels(stage, examples: Sequence, predictions: Sequence) -> tuple[list[bool], list[bool]]:
    """``(gold, predicted)`` as the stage's positive class; a failure is the wrong label
    (:func:`personalign.objectives.binary_labels`)."""
    from personalign.objectives import binary_labels

    return binary_labels(stage, examples, predictions)
