"""A sampler whose random stream is seeded per trial: distinct across workers, reproducible alone.

Two processes (or threads) sweeping one study with one ``--seed`` must not propose the same
parameters. Seeding each worker's sampler with the same number made them replay one random
stream (8 trials covered 4 configurations). :class:`PerTrialSeedSampler` builds the real sampler
(TPE) afresh for every trial with the seed :func:`trial_seed` derives from the study's seed and the
trial's number alone: trial numbers are unique in a study (the storage hands them out atomically),
so concurrent workers draw from different streams, and a single worker with the same seed and
history proposes the same parameters again. (``seed + trial.number`` let workers with different
``--seed`` s replay each other's streams: seed 1's trial 3 was seed 2's trial 2. The study keeps
one seed, :mod:`personalign.sweeps.runner`.)

It implements Optuna's public :class:`optuna.samplers.BaseSampler` interface by delegation.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState


def trial_seed(seed: int, number: int) -> int:
    """The seed of trial ``number`` of a study seeded ``seed``: a hash of the two (32 bits), so no
    other (seed, number) pair of a study gives the same stream, unlike ``seed + number``."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"personalign-trial:{int(seed)}:{int(number)}".encode()).digest()[:4], "big")


class PerTrialSeedSampler(optuna.samplers.BaseSampler):
    """Delegate to ``make(trial_seed(seed, trial.number))`` -- one inner sampler per live trial.

    Args:
        make: builds an inner sampler from an integer seed (e.g. ``lambda s: TPESampler(seed=s)``).
        seed: the base seed (``--seed``).
    """

    def __init__(self, make: Callable[[int], optuna.samplers.BaseSampler], seed: int = 0) -> None:
        self._make, self._seed = make, int(seed)
        self._inner: dict[int, optuna.samplers.BaseSampler] = {}
        self._lock = threading.Lock()

    def _for(self, trial: FrozenTrial) -> optuna.samplers.BaseSampler:
        with self._lock:
            inner = self._inner.get(trial.number)
            if inner is None:
                inner = self._inner[trial.number] = self._make(trial_seed(self._seed, trial.number))
            return inner

    def infer_relative_search_space(self, study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._for(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self._for(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._for(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial: FrozenTrial) -> None:
        self._for(trial).before_trial(study, trial)

    def after_trial(self, study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        with self._lock:
            inner = self._inner.pop(trial.number, None)
        if inner is not None:
            inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        """No-op: every trial has its own seed already (Optuna calls this per thread when n_jobs > 1)."""


def default_sampler(seed: int = 0) -> optuna.samplers.BaseSampler:
    """The sweep's default sampler: multivariate TPE seeded per trial (:func:`trial_seed`).

    ``group=True`` decomposes the conditional space (parameters that exist only for some
    strategies) into groups of co-occurring parameters; ``constant_liar`` keeps parallel workers
    from proposing the same point while a trial runs.
    """
    import warnings

    def tpe(trial_seed: int) -> optuna.samplers.BaseSampler:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=trial_seed, multivariate=True, group=True, constant_liar=True)

    return PerTrialSeedSampler(tpe, seed=seed)


__all__ = ["PerTrialSeedSampler", "default_sampler", "trial_seed"]
