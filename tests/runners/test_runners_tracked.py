"""``personalign run ...`` is first-class: progress on stderr, the LM cache flags, an MLflow run
(named after command, data and model; summary metrics; a child run per strategy; traces)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from dspy.utils.dummies import DummyLM

from tests.conftest import ROOT, cli_env


@pytest.mark.slow  # a CLI process and an MLflow SQLite store
def test_run_prints_progress_uses_cache_flags_and_is_tracked(shared_data, tmp_path):
    import mlflow

    runs, cache = tmp_path / "runs", tmp_path / "mycache"
    proc = subprocess.run([sys.executable, "-m", "personalign", "run", "prefeval-mcq", str(shared_data / "prefeval"),
                           "--strategies", "random", "--limit", "12", "--n-boot", "50", "--cache-dir", str(cache)],
                          capture_output=True, text=True, cwd=ROOT, env=cli_env(runs), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)  # stdout stays one JSON object
    assert "random" in proc.stderr and "12/12" in proc.stderr  # the strategy's progress bar, on stderr
    assert "run prefeval-mcq · prefeval · no LM: done in" in proc.stderr
    assert cache.is_dir()

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}")
    run = client.get_run(out["mlflow_run_id"])
    assert run.info.run_name == "run prefeval-mcq · prefeval · no LM" and run.info.status == "FINISHED"
    assert run.data.params["limit"] == "12" and run.data.tags["command"] == "run prefeval-mcq"
    assert run.data.metrics["accuracy/random"] == pytest.approx(out["strategies"][0]["accuracy"])
    assert run.data.metrics["n"] == 12
    child = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'")
    assert [c.info.run_name for c in child] == ["random"] and "accuracy_ci_low" in child[0].data.metrics
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"result.json"}

    proc = subprocess.run([sys.executable, "-m", "personalign", "run", "prefeval-mcq", str(shared_data / "prefeval"),
                           "--strategies", "random", "--limit", "3", "--n-boot", "50", "--no-cache", "--no-track"],
                          capture_output=True, text=True, cwd=ROOT, env=cli_env(tmp_path / "other"), timeout=600)
    assert proc.returncode == 0 and "mlflow_run_id" not in json.loads(proc.stdout), proc.stderr[-2000:]
    assert not (tmp_path / "other" / "mlflow.db").exists()


@pytest.mark.slow  # an MLflow SQLite store
def test_runner_lm_calls_are_traced(shared_data, runs_dir):
    import mlflow

    from personalign.runners.tracked import run_tracked
    from personalign.runners.prefeval import mcq_examples, run_mcq
    from personalign.tracking import MLflowCallback
    from personalign.tracking.store import Tracker

    exs = mcq_examples(shared_data / "prefeval", split="val", limit=3, seed=0)
    lm = DummyLM([{"answer_index": e.gold_index} for e in exs])
    tracker = Tracker()
    out = run_tracked("prefeval-mcq", lambda: run_mcq(exs, ["gold-preference"], lm=lm, n_boot=20),
                      params={"limit": 3}, callbacks=[MLflowCallback(tracker.tracking_uri)], data=shared_data / "prefeval", lm="dummy")
    assert out["strategies"][0]["accuracy"] == 1.0
    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    run = client.get_run(out["mlflow_run_id"])
    traces = client.search_traces(locations=[run.info.experiment_id])
    assert len(traces) == 3
    assert {t.info.tags.get("personalign.runner") for t in traces} == {"prefeval-mcq"}
    assert {t.info.request_metadata.get("mlflow.sourceRun") for t in traces} == {run.info.run_id}


def test_every_runner_has_the_cache_and_tracking_flags():
    from typer.testing import CliRunner

    from personalign.cli.run import app

    for command in ("prefeval-mcq", "prefeval-generation", "pipeline", "personamem", "cupid", "judge-agreement",
                    "sft-export"):
        text = CliRunner().invoke(app, [command, "--help"], terminal_width=200).output
        for flag in ("--cache-dir", "--no-cache", "--tracking-uri", "--no-track"):
            assert flag in text, (command, flag)


@pytest.mark.slow  # an MLflow SQLite store
def test_pipeline_result_is_logged_per_condition(shared_data, runs_dir):
    import mlflow

    from personalign.runners.tracked import run_tracked
    from personalign.runners.pipeline import run_pipeline
    from personalign.tracking import MLflowCallback
    from personalign.tracking.store import Tracker

    lm = DummyLM({"[[ ## user_turns ## ]]": {"attributes": [{"attribute": "The user is vegan.", "reason": "r",
                                                             "confidence": 0.9, "evidence_turn_ids": [0]}]},
                  "[[ ## evidence ## ]]": {"accepted": True, "rationale": "ok"},
                  "[[ ## options ## ]]": {"answer_index": 1}, "[[ ## prompt ## ]]": {"relevant": True}})
    tracker = Tracker()
    out = run_tracked("pipeline", lambda: run_pipeline(shared_data / "prefeval", limit=3, lm=lm, n_boot=20),
                      params={"limit": 3}, callbacks=[MLflowCallback(tracker.tracking_uri)], data=shared_data / "prefeval", lm="dummy")
    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    run = client.get_run(out["mlflow_run_id"])
    assert "accuracy/pipeline" in run.data.metrics and "accuracy/no-profile" in run.data.metrics
    children = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}'")
    assert {c.data.params["strategy"] for c in children} >= {"pipeline", "no-profile", "gold-preference",
                                                             "random-attribute"}
