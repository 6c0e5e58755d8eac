"""Ctrl-C and SIGTERM of tracked commands (issue 28): one line on stderr, exit 128 + signal, every
MLflow run of the command closed KILLED, no Optuna trial left RUNNING, no result file, no
temporary file, no traceback.

Real processes and real signals; the LM is the ``mock`` provider with latency (no model is loaded),
run through ``benchmarks/_mock_lm.py`` (the ``personalign`` CLI with the provider registered).
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, cli_env

MOCK = ROOT / "benchmarks" / "_mock_lm.py"
SPACE = 'strategies = ["zero-shot"]\n[pruner]\nkind = "none"\n[lm]\ntemperature = { low = 0.0, high = 1.0 }\n'


def _statuses(db: Path) -> list[str]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            return [r[0] for r in con.execute("select status from runs")]
    except sqlite3.Error:  # being created
        return []


def _interrupt(argv: list[str], runs: Path, sig: int, ready, delay: float = 0.5) -> subprocess.CompletedProcess:
    """Run the CLI, send ``sig`` ``delay`` seconds after ``ready()`` holds (polled every 10 ms)."""
    proc = subprocess.Popen([sys.executable, str(MOCK), *argv], cwd=ROOT, env=cli_env(runs), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline and not ready():
        time.sleep(0.01)
    assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()[1][-2000:]}"
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _assert_one_clean_line(proc, sig: int, *, killed: bool | None = True) -> None:
    """Exit 128 + sig, no traceback, one ``interrupted`` line, the last; it counts the MLflow runs
    closed as KILLED when ``killed`` (True: some, False: none, None: either)."""
    assert proc.returncode == 128 + sig, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1, proc.stderr[-3000:]
    match = re.fullmatch(rf"interrupted \({signal.Signals(sig).name}\): no complete result written"
                         r"(; [1-9]\d* open MLflow runs? closed as KILLED)?", lines[0])
    assert match, lines[0]
    if killed is not None:
        assert bool(match.group(1)) is killed, lines[0]
    assert proc.stderr.rstrip().splitlines()[-1] == lines[0]


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()) if d.exists() else []


def test_ctrl_c_of_a_tracked_compare(tmp_path):
    runs = tmp_path / "runs"
    db = runs / "mlflow.db"
    proc = _interrupt(["compare", "relevance", "--data", str(DEMO), "--strategies", "zero-shot", "--split", "val",
                       "--lm", "mock/relevance-1500ms", "--no-cache"], runs, signal.SIGINT,
                      lambda: "RUNNING" in _statuses(db))
    _assert_one_clean_line(proc, signal.SIGINT)
    statuses = _statuses(db)
    assert statuses and set(statuses) == {"KILLED"}, statuses
    assert _files(runs / "compare") == []  # no result JSON, no chart


def test_ctrl_c_of_a_tracked_compile(tmp_path):
    runs = tmp_path / "runs"
    db = runs / "mlflow.db"
    out = tmp_path / "program"
    proc = _interrupt(["compile", "relevance", "--strategy", "zero-shot", "--optimizer", "bootstrap", "--data",
                       str(DEMO), "--lm", "mock/relevance-400ms", "--no-cache", "--out", str(out)], runs,
                      signal.SIGINT, lambda: "RUNNING" in _statuses(db))
    _assert_one_clean_line(proc, signal.SIGINT)
    statuses = _statuses(db)
    assert statuses and set(statuses) == {"KILLED"}, statuses
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".program")]


def test_ctrl_c_of_a_tracked_sweep(tmp_path):
    import optuna
    from optuna.trial import TrialState

    from personalign.sweeps import open_storage

    runs = tmp_path / "runs"
    db = runs / "mlflow.db"
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    url = f"sqlite:///{runs / 'optuna.db'}"
    proc = _interrupt(["sweep", "relevance", "--data", str(DEMO), "--space", str(space), "--n-trials", "4",
                       "--split", "val", "--limit", "6", "--storage", url, "--study-name", "s", "--lm",
                       "mock/relevance-400ms", "--no-cache", "--n-boot", "100"], runs, signal.SIGINT,
                      lambda: _statuses(db).count("RUNNING") >= 2)  # the sweep's run and a trial's
    _assert_one_clean_line(proc, signal.SIGINT)
    statuses = _statuses(db)
    assert len(statuses) >= 2 and set(statuses) == {"KILLED"}, statuses
    study = optuna.load_study(study_name="s", storage=open_storage(url))
    assert TrialState.RUNNING not in {t.state for t in study.get_trials(deepcopy=False)}
    assert not (runs / "programs").exists()  # no best program exported


def test_sigterm_while_the_store_is_created_leaves_no_temporary_file(tmp_path):
    runs = tmp_path / "runs"
    proc = _interrupt(["compile", "relevance", "--strategy", "bm25", "--data", str(DEMO), "--out",
                       str(tmp_path / "program")], runs, signal.SIGTERM,
                      lambda: any(runs.glob(".mlflow.db.init-*")), delay=0.0)
    _assert_one_clean_line(proc, signal.SIGTERM, killed=None)  # 143: the signal landed while the store was created
    assert not list(runs.glob(".mlflow.db.init-*")), _files(runs)
    assert not list(runs.glob("*.db-journal"))
