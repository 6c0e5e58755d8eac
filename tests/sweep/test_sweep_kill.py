"""kill -9 of a sweep, anywhere, twice, then the same command: the asked-for trials complete and no
trial is left RUNNING (issue 28). Real processes, SIGKILL, the mock LM with latency (no model loaded),
sqlite and journal storages.

The hole: a worker killed inside ``study.ask()`` (after Optuna created the RUNNING trial, while the
sampler works, before the first heartbeat or the objective) left a trial with no worker and no
heartbeat, which ``RDBStorage`` never judges stale: RUNNING forever, counted as a live trial of
another machine, so a resumed sweep stopped one trial short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter

import optuna
import pytest
from optuna.trial import TrialState

from personalign.sweeps import WORKER_ATTR, fail_stale_trials, is_stale, open_storage, worker_id
from tests.conftest import DEMO, ROOT, cli_env

# The mock LM (``benchmarks/_mock_lm.py``) at 100 ms a call, uncached: a trial takes ~3 s, so "k trials
# COMPLETE and one RUNNING" lasts long enough to be seen by the poller on a loaded machine (an LM-free bm25
# trial on 3 prompts takes ~0.13 s, no bootstrap below 5 clusters: the sweep could end between two polls).
SPACE = 'strategies = ["zero-shot"]\n[pruner]\nkind = "none"\n[lm]\ntemperature = { low = 0.0, high = 1.0 }\n'
MOCK = ROOT / "benchmarks" / "_mock_lm.py"
_ASK_AND_DIE = """
import os, signal, sys, warnings, optuna
from personalign.sweeps import open_storage
storage = open_storage(sys.argv[1])
study = optuna.create_study(study_name="s", storage=storage, load_if_exists=True)
warnings.simplefilter("ignore")
study.ask()                       # the trial is RUNNING now; the objective never runs
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_worker_killed_inside_ask_leaves_a_trial_known_dead_at_once(tmp_path, kind):
    url = f"sqlite:///{tmp_path / 'o.db'}" if kind == "sqlite" else f"journal:{tmp_path / 'o.journal'}"
    proc = subprocess.run([sys.executable, "-c", _ASK_AND_DIE, url], env=cli_env(tmp_path / "runs"), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    storage = open_storage(url)
    study = optuna.load_study(study_name="s", storage=storage)
    (trial,) = study.get_trials(deepcopy=False)
    assert trial.state == TrialState.RUNNING and WORKER_ATTR in trial.system_attrs  # born with its worker
    assert is_stale(trial, storage)  # its worker is dead: no grace period to wait for
    fail_stale_trials(study)
    assert study.get_trials(deepcopy=False)[0].state == TrialState.FAIL


def test_a_trial_popped_from_the_queue_records_its_worker(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 'o.db'}")
    study = optuna.create_study(study_name="s", storage=storage)
    study.enqueue_trial({"x": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trial = study.ask()
    frozen = study.get_trials(deepcopy=False)[trial.number]
    assert frozen.system_attrs[WORKER_ATTR] == worker_id()


def _cmd(space, url: str) -> list[str]:
    return [sys.executable, str(MOCK), "sweep", "relevance", "--data", str(DEMO), "--space", str(space),
            "--n-trials", "6", "--split", "val", "--storage", url, "--study-name", "kill", "--lm",
            "mock/relevance-100ms", "--no-cache", "--no-track", "--no-export", "--json"]


def _states(url: str) -> Counter:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        study = optuna.load_study(study_name="kill", storage=open_storage(url))
    except Exception:  # noqa: BLE001 -- not created yet
        return Counter()
    return Counter(t.state for t in study.get_trials(deepcopy=False))


def _kill_when(cmd, runs, url, done: int, log) -> None:
    """Start ``cmd``; SIGKILL it once ``done`` trials are COMPLETE and one is RUNNING."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(runs), stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 240
    try:
        while proc.poll() is None and time.time() < deadline:
            states = _states(url)
            if states[TrialState.COMPLETE] >= done and states[TrialState.RUNNING]:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None and time.time() >= deadline:
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the sweep ended before it could be killed ({proc.returncode})"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("journal", marks=pytest.mark.slow)])
def test_kill_9_twice_then_the_same_command_completes_the_asked_for_trials(tmp_path, kind):
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    runs = tmp_path / "runs"
    url = f"sqlite:///{runs / 'optuna.db'}" if kind == "sqlite" else f"journal:{runs / 'optuna.journal'}"
    cmd = _cmd(space, url)
    with open(tmp_path / "killed.err", "w") as log:
        _kill_when(cmd, runs, url, 1, log)
        _kill_when(cmd, runs, url, 3, log)
    proc = subprocess.run(cmd, cwd=ROOT, env=cli_env(runs), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    states = _states(url)
    assert states[TrialState.COMPLETE] + states[TrialState.PRUNED] == 6, states
    assert states[TrialState.RUNNING] == 0 and states[TrialState.WAITING] == 0, states
    assert out["n_complete"] + out["n_pruned"] == 6 and out["n_running"] == 0
    assert len(out["stale_failed"]) >= 1  # the trial killed last was failed (and retried) by this run
