"""Which trials of a stored study this invocation may trust: a storage is input.

A study's storage (an SQLite file, a journal, a shared database) may hold anything another worker
or a hostile file put there: a trial of a strategy the user never listed, with the value 1.0. Its
parameters are checked against this invocation's search space before they are trusted:

* :func:`check_study_compatible` -- before any trial runs, the stored distributions agree with
  the space's (otherwise Optuna itself refuses mid-run, with a traceback);
* :func:`trusted_trials` -- best-trial selection and export use only the COMPLETE trials whose
  value is a finite number, whose parameters are a point of the space and whose ``report`` (the
  figures an exported program records as its ``metrics``) is figures (:func:`trial_problem`,
  :func:`report_problem`).
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
    why = params_problem(trial.params, space)
    if why is not None:
        return why
    from personalign.sweeps.attrs import trial_report

    return report_problem(trial_report(trial), space.stage.objective.name, value)


def params_problem(params: dict, space: SearchSpace) -> str | None:
    """Why ``params`` (a stored trial's) are not a point of ``space`` (None: they are)."""
    used: set = set()

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


MAX_TEXT = 1000  # characters of a string inside a report (a group name, a unit)
MAX_KEY = 200  # characters of a key inside a report (a group's name)


def _plain_key(key: Any) -> bool:
    """A report object's key the sweep prints and exports: text, at most :data:`MAX_KEY`
    characters, no control character or escape."""
    return isinstance(key, str) and len(key) <= MAX_KEY and key.isprintable()
MAX_DEPTH = 6


def report_problem(report: Any, objective: str, value: float) -> str | None:
    """Why a trial's ``report`` user attribute is not figures this invocation may record (None:
    it is, or there is none): an object whose top-level values are numbers (finite; not text),
    None, lists of them (an interval, a range) or objects (per-group figures, the resampling),
    with strings only inside objects (group names) and as ``objective`` (the objective's name);
    its ``objective`` figure, when present, is the trial's value."""
    import math

    if report is None:
        return None
    if not isinstance(report, dict):
        return f"report is {type(report).__name__}, not an object"

    def leaf_problem(x: Any, where: str, depth: int, text_ok: bool) -> str | None:
        if depth > MAX_DEPTH:
            return f"report {where} is nested deeper than {MAX_DEPTH}"
        if x is None or isinstance(x, bool):
            return None
        if isinstance(x, int):
            return None if abs(x) < 2 ** 63 else f"report {where} is an integer beyond 64 bits"
        if isinstance(x, float):
            return None if math.isfinite(x) else f"report {where} = {x!r} is not finite"
        if isinstance(x, str):
            return None if text_ok and len(x) <= MAX_TEXT else f"report {where} is text ({x[:40]!r}), not a figure"
        if isinstance(x, list):
            return next((p for i, v in enumerate(x) if (p := leaf_problem(v, f"{where}[{i}]", depth + 1, text_ok))), None)
        if isinstance(x, dict):
            return next((p for k, v in x.items()
                         if (p := None if _plain_key(k) else f"report {where} has a key that is not short plain text")
                         or (p := leaf_problem(v, f"{where}.{k}", depth + 1, True))), None)
        return f"report {where} is {type(x).__name__}"

    for key, x in report.items():
        if not _plain_key(key):
            return "report has a key that is not short plain text"
        if key == "objective":
            if x != objective:
                return f"report objective {x!r:.60} is not this sweep's objective {objective!r}"
            continue
        if problem := leaf_problem(x, str(key)[:60], 1, False):
            return problem
    figure = report.get(objective)
    if figure is not None and (isinstance(figure, bool) or not isinstance(figure, (int, float))
                               or not math.isclose(figure, value, rel_tol=1e-9, abs_tol=1e-12)):
        return f"report {objective} = {figure!r:.60} is not the trial's value {value!r}"
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


def configurations_run(trials: list, space: SearchSpace) -> int:
    """Distinct configurations among the trusted COMPLETE trials and the PRUNED trials whose
    parameters are a point of ``space`` (a storage is input: a forged trial exhausts nothing)."""
    from optuna.trial import TrialState

    from personalign.sweeps.workers import distinct

    pruned = [t for t in trials if t.state == TrialState.PRUNED and params_problem(t.params, space) is None]
    return distinct(trusted_trials(trials, space)[0] + pruned)


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


__all__ = ["check_study_compatible", "configurations_run", "params_problem", "report_problem", "trial_problem",
           "trusted_trials"]
