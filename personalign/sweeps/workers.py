"""Sweep workers: who runs a trial (process identity and liveness) and the budget they share.

A worker is one process (its threads share its identity, :mod:`personalign.processes`). Every
trial records its worker in the system attribute :data:`WORKER_ATTR` as
``host|boot_id|pid_ns|pid|start_ticks|token`` (``token``: random, drawn once per process); a worker
of this machine and process namespace whose process is gone is known dead at once
(:func:`worker_alive`), a worker of another machine or namespace (a container on the host's name)
only through heartbeats (:mod:`personalign.sweeps.storage`).

:class:`Budget` keeps several workers (threads, processes, machines) of one study from running
more than ``n_trials`` COMPLETE + PRUNED trials: a worker starts a trial only when the finished
trials plus the live running trials numbered before it leave room (:meth:`Budget.claim`). A
trial that reused a finished trial's value (same parameters) is not counted (:func:`finished`).
"""

from __future__ import annotations

import time

from personalign.processes import worker_alive, worker_id

WORKER_ATTR = "personalign:worker"  # system attr: "host|boot_id|pid_ns|pid|start_ticks|token" of the worker process
REUSED_ATTR = "same_as"  # user attr: the finished trial with the same parameters whose value a trial reused


class Surplus(Exception):
    """This trial would exceed the budget (it lost a race with another worker): failed without work."""


def counts(trials: list) -> dict[str, int]:
    """Number of ``trials`` per state name (every :class:`optuna.trial.TrialState`, zeros included)."""
    from optuna.trial import TrialState

    out = {s.name: 0 for s in TrialState}
    for t in trials:
        out[t.state.name] += 1
    return out


def finished(trials: list) -> int:
    """COMPLETE + PRUNED trials that did work: the ones the budget counts (a trial that reused the
    value of a finished trial with the same parameters, :data:`REUSED_ATTR`, does not)."""
    from optuna.trial import TrialState

    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) and REUSED_ATTR not in t.user_attrs
               for t in trials)


def distinct(trials: list) -> int:
    """Distinct parameter sets among the COMPLETE + PRUNED trials (the configurations that ran)."""
    import json

    from optuna.trial import TrialState

    return len({json.dumps(t.params, sort_keys=True, default=str) for t in trials
                if t.state in (TrialState.COMPLETE, TrialState.PRUNED)})


class Budget:
    """``n_trials`` COMPLETE + PRUNED trials shared by every worker of a study.

    Args:
        n_trials: the study's target.
        is_stale: ``is_stale(frozen_trial, now)``: whether a RUNNING trial's worker is dead (the
            storage's :meth:`~personalign.sweeps.storage.WorkerLiveness.is_stale`).
    """

    def __init__(self, n_trials: int, is_stale) -> None:
        self.n_trials = n_trials
        self._is_stale = is_stale

    def live_running(self, trials: list, *, exclude_number: int | None = None, below: int | None = None) -> list:
        """RUNNING trials of live workers (optionally only those numbered below ``below``)."""
        from optuna.trial import TrialState

        now = time.time()
        return [t for t in trials if t.state == TrialState.RUNNING and t.number != exclude_number
                and (below is None or t.number < below) and not self._is_stale(t, now)]

    def missing(self, trials: list) -> int:
        """Trials still to start: the target minus finished and live running trials (may be < 0)."""
        return self.n_trials - finished(trials) - len(self.live_running(trials))

    def claim(self, trials: list, number: int) -> object:
        """Check that trial ``number`` (RUNNING in the snapshot ``trials``) may run; returns its
        frozen trial.

        Raises:
            Surplus: the budget is taken by finished trials and trials running ahead of it, or it
                is a second retry of a killed trial that another trial retries already.
        """
        from optuna.trial import TrialState

        me = next(t for t in trials if t.number == number)
        origin = me.system_attrs.get("failed_trial")
        if origin is not None:
            for t in trials:
                if (t.number < number and t.system_attrs.get("failed_trial") == origin
                        and t.state in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)):
                    raise Surplus(f"trial {origin} is already being retried by trial {t.number}")
        ahead = self.live_running(trials, exclude_number=number, below=number)
        if finished(trials) + len(ahead) >= self.n_trials:
            raise Surplus(f"the budget of {self.n_trials} trials is taken")
        return me


__all__ = ["REUSED_ATTR", "WORKER_ATTR", "Budget", "Surplus", "counts", "distinct", "finished", "worker_alive",
           "worker_id"]
