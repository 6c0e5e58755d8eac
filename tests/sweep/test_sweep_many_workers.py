"""Many workers, one study (issue 46, item 8): workers given different ``--seed`` s draw distinct
settings, the study keeps one seed, and two workers that share a hostname and a pid but not a
process namespace (containers on the host's name) never take each other for dead. Fast, no LM."""

from __future__ import annotations

import contextlib
import warnings

import optuna
import pytest
from optuna.trial import TrialState

from personalign import processes
from personalign.sweeps import WORKER_ATTR, fail_stale_trials, open_storage
from personalign.sweeps.sampler import default_sampler, trial_seed
from personalign.sweeps.storage import trial_id
from tests.sweep.test_sweep_repeats import _study, _sweep


def test_a_trials_seed_depends_on_the_study_seed_and_its_number_alone():
    """``seed + number`` made seed 1's trial 3 seed 2's trial 2: no two pairs share a seed now."""
    seeds = {(s, n): trial_seed(s, n) for s in range(4) for n in range(50)}
    assert len(set(seeds.values())) == len(seeds)
    assert trial_seed(1, 3) == trial_seed(1, 3) != trial_seed(2, 2)


def test_two_workers_with_different_seeds_on_one_journal_study_draw_distinct_settings(tmp_path):
    """Two workers (seeds 1 and 2) take turns asking one journal study for a trial, as two
    machines do: every trial gets its own draw (with ``seed + number`` every trial of one worker
    replayed a trial of the other, 7 distinct settings in 12 trials)."""
    url = f"journal:{tmp_path / 'optuna.journal'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        workers = [optuna.create_study(study_name="s", storage=open_storage(url), sampler=default_sampler(seed),
                                       direction="maximize", load_if_exists=True) for seed in (1, 2)]
        drawn = []
        for turn in range(12):
            study = workers[turn % 2]
            trial = study.ask()
            drawn.append((trial.suggest_int("x", 0, 10**9), trial.suggest_categorical("c", list(range(1000)))))
            study.tell(trial, 0.0)
    assert len(set(drawn)) == 12, drawn


def test_a_later_worker_with_another_seed_uses_the_studys(runs_dir, tmp_path, capsys):
    first = _sweep(tmp_path, n_trials=1, seed=1)
    assert first["seed"] == 1 and "seed_ignored" not in first
    second = _sweep(tmp_path, n_trials=2, seed=2)
    assert (second["seed"], second["seed_ignored"]) == (1, 2)
    assert "note: study s uses seed 1 (set by its first worker); --seed 2 ignored" in capsys.readouterr().err
    assert _study(second).user_attrs["seed"] == 1
    numbers = [t.number for t in _study(second).get_trials(states=(TrialState.COMPLETE,))]
    assert len(numbers) == len(set(numbers)) >= 2


@contextlib.contextmanager
def _as_worker(monkeypatch, namespace: str, ticks: str, token: str):
    """This process as a worker in another container: hostname and pid shared with the other
    worker (``shared-host``, pid 4242), its own pid namespace, start time and token."""
    with monkeypatch.context() as m:
        m.setattr(processes.socket, "gethostname", lambda: "shared-host")
        m.setattr(processes, "_pid_ns", lambda: namespace)
        m.setattr(processes, "_start_ticks", lambda pid: ticks)
        m.setattr(processes, "worker_token", lambda: token)
        m.setattr(processes.os, "getpid", lambda: 4242)
        yield


@pytest.mark.parametrize("readable_namespace", [True, False])
def test_workers_with_one_hostname_and_pid_in_two_namespaces_do_not_fail_each_others_trials(
        tmp_path, monkeypatch, readable_namespace):
    """Two containers on the host's name, each worker pid 4242, one journal study: each records
    its worker and a heartbeat, then runs Optuna's stale-trial check, which fails neither live
    trial (the other's process is not visible here: only its heartbeat can tell). A trial of a
    worker that is gone from this namespace is still failed at once."""
    storage = open_storage(f"journal:{tmp_path / 'optuna.journal'}", heartbeat_interval=1, grace_period=30)
    study = optuna.create_study(study_name="s", storage=storage)
    a_ns, b_ns = ("pid:[4026531001]", "pid:[4026532002]") if readable_namespace else ("-", "-")
    worker_a = (a_ns, "1000", "tokenA")
    worker_b = (b_ns, "2000", "tokenB")
    trials = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "heartbeat is supposed to be used with Study.optimize"
        for name, who in (("a", worker_a), ("b", worker_b)):
            with _as_worker(monkeypatch, *who):
                trial = study.ask()  # the storage records the worker in the write that makes it RUNNING
                storage.record_heartbeat(trial_id(storage, "s", trial.number))
                trials[name] = trial.number
        stored = {t.number: t.system_attrs[WORKER_ATTR] for t in study.get_trials()}
        assert stored[trials["a"]] != stored[trials["b"]]
        assert "shared-host|" in stored[trials["a"]] and "|4242|" in stored[trials["a"]] and "|4242|" in stored[trials["b"]]
        for who in (worker_a, worker_b):
            with _as_worker(monkeypatch, *who):
                fail_stale_trials(study)
                assert {t.number: t.state for t in study.get_trials()} == {
                    trials["a"]: TrialState.RUNNING, trials["b"]: TrialState.RUNNING}
        with _as_worker(monkeypatch, *worker_a):  # A's own namespace: a gone worker is dead at once
            ghost = study.ask()
            storage.set_trial_system_attr(trial_id(storage, "s", ghost.number), WORKER_ATTR,
                                          f"shared-host|{processes._boot_id()}|{a_ns}|{2**22 + 7}|1|gone")
            storage.record_heartbeat(trial_id(storage, "s", ghost.number))
            fail_stale_trials(study)
            assert study.get_trials()[ghost.number].state == TrialState.FAIL
