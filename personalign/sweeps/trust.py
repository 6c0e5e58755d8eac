"""Which trials of a stored study this invocation may trust: a storage is input.

A study's storage (an SQLite file, a journal, a shared database) may hold anything another worker
or a hostile file put there: a trial of a strategy the user never listed, with the value 1.0. Its
parameters are checked against this invocation's search space before they are trusted:

* :func:`check_study_compatible` -- before any trial runs, the stored distributions agree with
  the space's (otherwise Optuna itself refuses mid-run, with a traceback);
* :func:`trusted_trials` -- best-trial selection and export use only the COMPLETE trials whose
  value is a finite number and whose parameters are a point of the space (:func:`trial_problem`).
"""

from __future__ import annotations

from typing import Any

from personalign.errors import ConfigurationError
from personalign.sweeps.space import Dimension, SearchSpace


class _NotInSpace(Exception):
    pass


def trial_problem(trial, space: SearchSpace) -> str | None:
    """Why a finished trial of the storage cannot be trusted by this invocation (None: it can): a
    state other than COMPLETE, a value that is not a finite number, or parameters that are not a
    point of ``space`` (a value outside a dimension, a parameter the space does not sample there,
    one it needs missing). A storage is input: another worker or a tampered file may hold anything."""
    import math

    from optuna.trial import TrialState

    if trial.state != TrialState.COMPLETE:
        return f"state {trial.state.name}"
    value = trial.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"value {value!r} is not a finite number"
    params, used = trial.params, set()

    def pick(dim: Dimension) -> Any:
        if dim.kind == "fixed":
            return dim.value
        if dim.name not in params:
            raise _NotInSpace(f"parameter {dim.name} missing")
        if not dim.holds(params[dim.name]):
            raise _NotInSpace(f"{dim.name}={params[dim.name]!r} is not in the search space")
        used.add(dim.name)
        return params[dim.name]

    try:
        space.configure(pick)
    except _NotInSpace as exc:
        return str(exc)
    if extra := sorted(set(params) - used):
        return f"parameter {extra[0]!r} is not sampled by the search space"
    return None


def trusted_trials(trials: list, space: SearchSpace) -> tuple[list, dict[int, str]]:
    """``(trusted, refused)``: the COMPLETE trials of ``trials`` whose value is finite and whose
    parameters are a point of ``space`` (:func:`trial_problem`), and ``{number: why}`` of the other
    COMPLETE trials. Only trusted trials may be reported as best or exported."""
    from optuna.trial import TrialState

    trusted, refused = [], {}
    for t in trials:
        if t.state != TrialState.COMPLETE:
            continue
        why = trial_problem(t, space)
        if why is None:
            trusted.append(t)
        else:
            refused[t.number] = why
    return trusted, refused


def check_study_compatible(trials: list, space: SearchSpace, study: str) -> None:
    """Every parameter the trials of a stored study recorded under a name this ``space`` samples has
    a distribution Optuna accepts beside the space's (same kind and log scale; the same choices for
    a categorical), so the study can be continued with this space.

    Raises:
        ConfigurationError: one line naming the study, a trial and the parameter.
    """
    from optuna.distributions import CategoricalDistribution

    ours = {d.name: d.distribution() for d in space.dimensions() if d.kind != "fixed"}
    for t in trials:
        for name, theirs in t.distributions.items():
            mine = ours.get(name)
            if mine is None:
                continue
            if (type(theirs) is not type(mine) or getattr(theirs, "log", None) != getattr(mine, "log", None)
                    or (isinstance(mine, CategoricalDistribution) and theirs != mine)):
                raise ConfigurationError(f"study {study!r} holds trials of another search space (trial {t.number}: "
                                         f"parameter {name!r} is {theirs!r:.100}); pass another --study-name")


__all__ = ["check_study_compatible", "trial_problem", "trusted_trials"]
