"""Sweep reliability with real processes: kill -9 and resume; two workers on one journal study.

The sweep runs as a real CLI process (``benchmarks/_mock_lm.py`` registers the mock LM provider and
then runs ``personalign sweep``); trials wait on a mock LM with latency, so a kill lands inside a
trial and two workers overlap.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter

import pytest

from tests.sweep.conftest import run, spawn, sweep_cmd


def _study(storage_url: str):
    import optuna

    from personalign.sweeps import open_storage

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(storage_url)
    summaries = optuna.get_all_study_summaries(storage=storage)
    assert len(summaries) == 1, [s.study_name for s in summaries]
    return optuna.load_study(study_name=summaries[0].study_name, storage=storage)


def _runs(tracking_uri: str, study_name: str):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name("personalign")
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`personalign.study` = '{study_name}'",
                              max_results=1000)


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_kill_9_after_three_trials_then_resume(tmp_path, mock_space, storage):
    from optuna.trial import TrialState

    runs = tmp_path / "runs"
    url = f"sqlite:///{runs / 'optuna.db'}" if storage == "sqlite" else f"journal:{runs / 'optuna.journal'}"
    tracking = f"sqlite:///{runs / 'mlflow.db'}"
    cmd = sweep_cmd(runs, mock_space, "--storage", url, n_trials=5, latency_ms=200, limit=4)
    proc = spawn(cmd, runs, tmp_path / "first")
    killed_trial = None
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.3)
            if not (runs / ("optuna.db" if storage == "sqlite" else "optuna.journal")).exists():
                continue
            try:
                study = _study(url)
            except Exception:  # noqa: BLE001 -- storage being created
                continue
            trials = study.get_trials(deepcopy=False)
            done = [t for t in trials if t.state == TrialState.COMPLETE]
            running = [t for t in trials if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs]
            if len(done) >= 3 and running:
                os.kill(proc.pid, signal.SIGKILL)
                killed_trial = running[0].number
                break
    finally:
        if proc.poll() is None and killed_trial is None:
            proc.kill()
        proc.wait(timeout=30)
    err = (tmp_path / "first.err").read_text()
    assert killed_trial is not None, f"the sweep ended before 3 trials finished: {err[-2000:]}"
    assert proc.returncode == -signal.SIGKILL

    study = _study(url)
    before = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert before[killed_trial] == TrialState.RUNNING, "the killed trial is left RUNNING in the storage"
    runs_before = {r.data.tags.get("personalign.trial"): r.info.status for r in _runs(tracking, study.study_name)}
    assert runs_before[str(killed_trial)] == "RUNNING", "its MLflow run is left RUNNING too"

    # the same command again
    proc2, out = run(cmd, runs)
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert "database is locked" not in proc2.stderr

    study = _study(url)
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state for t in trials)
    assert states[TrialState.COMPLETE] + states[TrialState.PRUNED] == 5, states  # the requested total, not 6
    assert states[TrialState.RUNNING] == 0 and states[TrialState.WAITING] == 0
    killed = next(t for t in trials if t.number == killed_trial)
    assert killed.state == TrialState.FAIL
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed_trial]
    assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE, "retried exactly once"
    assert retries[0].params == killed.params, "the retry runs the killed trial's parameters"
    assert out["stale_failed"] == [killed_trial]
    assert out["n_complete"] == 5 and out["ran"] == 5 - len([s for n, s in before.items() if s == TrialState.COMPLETE])
    # no trial doubled: every finished trial has exactly one MLflow child run, and each ran once
    children = [r for r in _runs(tracking, study.study_name) if r.data.tags.get("command") == "sweep-trial"]
    per_trial = Counter(r.data.tags["personalign.trial"] for r in children)
    assert all(v == 1 for v in per_trial.values()), per_trial
    status = {r.data.tags["personalign.trial"]: r.info.status for r in children}
    assert status[str(killed_trial)] == "KILLED"
    assert all(status[str(t.number)] == "FINISHED" for t in trials if t.state == TrialState.COMPLETE)
    all_runs = _runs(tracking, study.study_name)
    assert not [r for r in all_runs if r.info.status == "RUNNING"], "no MLflow run left RUNNING (parent included)"
    parents = [r for r in all_runs if r.data.tags.get("command") == "sweep"]
    assert sorted(r.info.status for r in parents) == ["FINISHED", "KILLED"]

    # and once more: nothing is missing, nothing runs
    proc3, out3 = run(cmd, runs)
    assert proc3.returncode == 0, proc3.stderr[-2000:]
    assert out3["ran"] == 0 and out3["n_complete"] == 5


@pytest.mark.slow
def test_two_processes_on_one_journal_study(tmp_path, mock_space):
    from optuna.trial import TrialState

    runs = tmp_path / "runs"
    url = f"journal:{runs / 'optuna.journal'}"
    tracking = f"sqlite:///{runs / 'mlflow.db'}"
    n = 8
    cmd = sweep_cmd(runs, mock_space, "--storage", url, "--study-name", "two-workers", n_trials=n, latency_ms=200,
                    limit=4)
    # create the MLflow store once, so two processes do not race on creating its tables
    run([*cmd[:cmd.index("--n-trials")], "--n-trials", "1", *cmd[cmd.index("--n-trials") + 2:]], runs)
    workers = [spawn(cmd, runs, tmp_path / f"worker{i}") for i in range(2)]
    for w in workers:
        w.wait(timeout=300)
    outs = []
    for i, w in enumerate(workers):
        err = (tmp_path / f"worker{i}.err").read_text()
        assert w.returncode == 0, err[-3000:]
        assert "locked" not in err.lower() and "Traceback" not in err, err[-3000:]
        outs.append(json.loads((tmp_path / f"worker{i}.out").read_text().strip().splitlines()[-1]))

    study = _study(url)
    trials = study.get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == n, Counter(t.state for t in trials)
    assert all(t.state != TrialState.RUNNING for t in trials)
    surplus = [t for t in trials if t.user_attrs.get("surplus")]
    assert all(t.state == TrialState.FAIL for t in surplus)
    assert len(trials) == n + len(surplus), "every trial is either finished or a surplus claim"
    ran = [set(o["ran_trials"]) for o in outs]
    assert not (ran[0] & ran[1]), "no trial run by both workers"
    assert all(r for r in ran), f"both workers ran trials: {ran}"
    workers_of = Counter(t.system_attrs["personalign:worker"] for t in finished if t.number != 0)
    assert len(workers_of) == 2
    children = [r for r in _runs(tracking, "two-workers") if r.data.tags.get("command") == "sweep-trial"]
    per_trial = Counter(r.data.tags["personalign.trial"] for r in children)
    assert sorted(int(k) for k in per_trial) == sorted(t.number for t in finished if "mlflow_run_id" in t.user_attrs)
    assert all(v == 1 for v in per_trial.values())
    assert all(r.info.status == "FINISHED" for r in children)
