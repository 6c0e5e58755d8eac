"""Run-state hygiene: a fresh MLflow store under concurrency, runs orphaned by kill -9, sweep
workers that never share a sampler stream."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import DEMO, ROOT, cli_env

OPEN_STORE = """
import sys
from personalign.tracking.store import Tracker
t = Tracker(sys.argv[1])
with t.run("concurrent", tags={"command": "test"}):
    t.log_metrics({"x": 1.0})
print("ok")
"""


def _running(uri: str) -> list[str]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("personalign")
    if exp is None:
        return []
    return [r.info.run_id for r in client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")]


@pytest.mark.slow  # six MLflow store migrations race on two cores (~1 min)
def test_six_processes_on_a_fresh_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    env = cli_env(tmp_path / "runs")
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_STORE, uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=tmp_path) for _ in range(6)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [o[1][-800:] for o in outs]
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("personalign")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 6 and {r.info.status for r in runs} == {"FINISHED"}
    assert not list((tmp_path / "fresh").glob(".mlflow.db.init-*"))  # no temp store left behind


def test_orphaned_runs_of_dead_processes_are_closed_killed(tmp_path):
    from personalign.tracking.store import WORKER_TAG, Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    from personalign.processes import worker_id

    me = worker_id()
    host, boot = me.split("|")[:2]
    ghost = f"{host}|{boot}|{dead.stdout.strip()}|1"  # a process that has exited (an older version's id)
    t = Tracker(uri)
    client = t.client()
    exp = client.get_experiment_by_name("personalign")
    orphan = client.create_run(exp.experiment_id, tags={WORKER_TAG: ghost}).info.run_id
    other_machine = client.create_run(exp.experiment_id, tags={WORKER_TAG: "elsewhere|x|1|1"}).info.run_id
    alive = client.create_run(exp.experiment_id, tags={WORKER_TAG: me}).info.run_id
    untagged = client.create_run(exp.experiment_id).info.run_id
    nxt = Tracker(uri)
    nxt.check()  # what every tracked command does first
    assert nxt.closed_orphans == [orphan]
    status = {r: client.get_run(r).info.status for r in (orphan, other_machine, alive, untagged)}
    assert status == {orphan: "KILLED", other_machine: "RUNNING", alive: "RUNNING", untagged: "RUNNING"}


@pytest.mark.slow  # two compiles in subprocesses with MLflow (~1 min)
def test_kill_9_of_compile_leaves_no_running_run_after_the_next_command(tmp_path):
    """compile is killed while its MLflow run is open; the next tracked command closes it KILLED."""
    runs = tmp_path / "runs"
    env = cli_env(runs)
    uri = f"sqlite:///{runs / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "personalign", "compile", "relevance", "--strategy", "minilm-logreg", "--data",
           str(DEMO), "--out", str(tmp_path / "prog")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            if (runs / "mlflow.db").exists() and _running(uri):
                break
            time.sleep(0.3)
        assert proc.poll() is None, "compile finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert _running(uri), "the killed compile should have left its run RUNNING"
    assert not (tmp_path / "prog").exists()  # no half-written program
    nxt = subprocess.run([sys.executable, "-m", "personalign", "compile", "relevance", "--strategy", "bm25",
                          "--data", str(DEMO), "--json"], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert nxt.returncode == 0, nxt.stderr[-2000:]
    assert _running(uri) == []
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("personalign")
    statuses = sorted(r.info.status for r in client.search_runs([exp.experiment_id]))
    assert statuses == ["FINISHED", "KILLED"]


def test_two_workers_with_one_seed_propose_distinct_parameters():
    """Interleaved workers on one study, same --seed: per-trial seeds give 8 distinct points; one
    sampler stream per worker (the former behaviour) gives duplicates; alone, the same seed replays."""
    import optuna

    from personalign.sweeps.sampler import PerTrialSeedSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def run(make_sampler, workers: int = 2, n: int = 8) -> list[float]:
        storage = optuna.storages.InMemoryStorage()
        optuna.create_study(study_name="s", storage=storage, direction="maximize")
        studies = [optuna.load_study(study_name="s", storage=storage, sampler=make_sampler()) for _ in range(workers)]
        values = []
        for i in range(n):
            study = studies[i % workers]
            trial = study.ask()
            x = trial.suggest_float("C", 1e-3, 1.0, log=True)
            values.append(x)
            study.tell(trial, -abs(x - 0.1))
        return values

    per_trial = run(lambda: PerTrialSeedSampler(lambda s: optuna.samplers.TPESampler(seed=s), seed=0))
    assert len(set(per_trial)) == 8
    shared = run(lambda: optuna.samplers.TPESampler(seed=0))
    assert len(set(shared)) < 8  # what the issue saw: both workers replay one stream
    alone_a = run(lambda: PerTrialSeedSampler(lambda s: optuna.samplers.TPESampler(seed=s), seed=3), workers=1)
    alone_b = run(lambda: PerTrialSeedSampler(lambda s: optuna.samplers.TPESampler(seed=s), seed=3), workers=1)
    assert alone_a == alone_b


def test_compare_result_files_are_unique_per_run(tmp_path):
    from personalign._verbs.results import write_result

    a = write_result({"stage": "relevance", "split": "val", "x": 1}, tmp_path, stem="relevance-val-T-aaaa")
    b = write_result({"stage": "relevance", "split": "val", "x": 2}, tmp_path, stem="relevance-val-T-bbbb")
    assert a != b and json.loads(a.read_text())["x"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [a.name, b.name]  # no temp files left
