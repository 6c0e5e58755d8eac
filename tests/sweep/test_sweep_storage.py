"""The sweep's storages on Optuna's heartbeat interface: Optuna's own ``fail_stale_trials``, its
heartbeat thread and its ``RetryHeartbeatStaleTrialCallback`` work on them unchanged (fast, no LM)."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings

import optuna
import pytest
from optuna.trial import TrialState

from personalign.sweeps import HEARTBEAT_ATTR, WORKER_ATTR, open_storage, worker_id
from personalign.sweeps.storage import BaseHeartbeat, trial_id


def _dead_local_worker() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host, boot, ns, _, ticks, _ = worker_id().split("|")
    return f"{host}|{boot}|{ns}|{child.pid}|{ticks}|gone"


def _running(study, storage, worker: str, heartbeat: float | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "heartbeat is supposed to be used with Study.optimize"
        trial = study.ask()
    trial.suggest_int("x", 0, 9)
    tid = trial_id(storage, study.study_name, trial.number)
    storage.set_trial_system_attr(tid, WORKER_ATTR, worker)
    if heartbeat is not None:
        storage.set_trial_system_attr(tid, HEARTBEAT_ATTR, heartbeat)
    return trial


def _states(study) -> dict[int, TrialState]:
    return {t.number: t.state for t in study.get_trials(deepcopy=False)}


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_optunas_fail_stale_trials_fails_trials_of_dead_workers_and_retries_them(tmp_path, kind):
    url = f"journal:{tmp_path / 'optuna.journal'}" if kind == "journal" else f"sqlite:///{tmp_path / 'optuna.db'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
    seen: list[int] = []

    def on_stale(study, trial):
        seen.append(trial.number)
        retry(study, trial)

    storage = open_storage(url, heartbeat_interval=1, grace_period=2, on_stale=on_stale)
    assert isinstance(storage, BaseHeartbeat) and storage.get_heartbeat_interval() == 1
    study = optuna.create_study(study_name="s", storage=storage)
    alive = _running(study, storage, worker_id(), heartbeat=time.time() - 600)  # live here: never stale
    dead = _running(study, storage, _dead_local_worker())  # gone: stale at once, before any grace period
    remote_fresh = _running(study, storage, "elsewhere|x|1|1", heartbeat=time.time())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)  # Optuna's own function, unchanged
    states = _states(study)
    assert (states[alive.number], states[dead.number], states[remote_fresh.number]) == (
        TrialState.RUNNING, TrialState.FAIL, TrialState.RUNNING)
    assert seen == [dead.number]
    retried = [t for t in study.get_trials() if t.system_attrs.get("failed_trial") == dead.number]
    assert len(retried) == 1 and retried[0].state == TrialState.WAITING and retried[0].params == {
        "x": next(t for t in study.get_trials() if t.number == dead.number).params["x"]}


def test_a_remote_journal_trial_is_stale_after_the_grace_period_without_heartbeat(tmp_path):
    storage = open_storage(f"journal:{tmp_path / 'optuna.journal'}", heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(study_name="s", storage=storage)
    old = _running(study, storage, "elsewhere|x|1|1", heartbeat=time.time() - 3)
    fresh = _running(study, storage, "elsewhere|x|2|1", heartbeat=time.time())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    assert _states(study) == {old.number: TrialState.FAIL, fresh.number: TrialState.RUNNING}
    storage.record_heartbeat(trial_id(storage, "s", old.number))  # a late heartbeat of a failed trial: ignored
    assert _states(study)[old.number] == TrialState.FAIL


def test_optunas_heartbeat_thread_beats_into_the_journal_while_a_trial_runs(tmp_path):
    storage = open_storage(f"journal:{tmp_path / 'optuna.journal'}", heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(study_name="s", storage=storage)
    beats: list = []

    def objective(trial):
        start = time.time()
        time.sleep(2.5)  # > interval: at least one beat after the first
        frozen = storage.get_trial(trial_id(storage, "s", trial.number))
        beats.append(frozen.system_attrs.get(HEARTBEAT_ATTR, 0) - start)
        return 0.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.optimize(objective, n_trials=1)
    assert len(beats) == 1 and beats[0] > 0.5, "a heartbeat was written while the objective ran"


def test_the_heartbeat_interface_is_optunas_own_and_the_journal_storage_implements_it():
    """``BaseHeartbeat`` (taken from RDBStorage's bases) is Optuna's abstract heartbeat interface,
    the class its heartbeat thread and ``fail_stale_trials`` test storages against."""
    from personalign.sweeps.storage import JournalHeartbeatStorage

    assert BaseHeartbeat.__module__.startswith("optuna.storages")
    assert {"record_heartbeat", "get_heartbeat_interval", "get_heartbeat_stale_trial_callback"} <= set(
        BaseHeartbeat.__abstractmethods__)
    assert issubclass(JournalHeartbeatStorage, BaseHeartbeat)
    assert not getattr(JournalHeartbeatStorage, "__abstractmethods__", None)


def test_two_processes_creating_one_fresh_database_is_not_an_error(tmp_path, monkeypatch):
    """The loser of a schema-creation race (Optuna's version row inserted twice) opens the storage
    the winner created; any other database error is still one ConfigurationError line."""
    from sqlalchemy.exc import IntegrityError

    from personalign.errors import ConfigurationError
    from personalign.sweeps import storage as storage_mod

    real, calls = storage_mod.LivenessRDBStorage, []

    def racing(url, **kwargs):
        calls.append(url)
        if len(calls) == 1:
            raise IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE constraint failed: "
                                                                           "alembic_version.version_num"))
        return real(url, **kwargs)

    monkeypatch.setattr(storage_mod, "LivenessRDBStorage", racing)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    assert isinstance(open_storage(url), real)
    assert len(calls) == 2

    def broken(url, **kwargs):
        raise IntegrityError("INSERT INTO trials", {}, Exception("NOT NULL constraint failed: trials.number"))

    monkeypatch.setattr(storage_mod, "LivenessRDBStorage", broken)
    with pytest.raises(ConfigurationError, match="cannot open --storage .*IntegrityError"):
        open_storage(url)
