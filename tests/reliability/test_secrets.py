"""A fake API key -- in the environment, or among an LM's keyword arguments -- never reaches the
MLflow store (database and artifacts), whatever personalign logs through its tracking module.

(``tests/cli/test_cli.py`` scans the store after a real ``compare``; the fault-injection CLI test
in ``test_lm_faults.py`` after ``compile`` and ``eval``.)
"""

from __future__ import annotations

import json

import pytest

ENV_KEY = "sk-test-FAKE-ENV-KEY-5f0c1e2d3c4b5a69"
KWARG_KEY = "sk-test-FAKE-KWARG-KEY-0a9b8c7d6e5f4321"


@pytest.mark.slow  # creating an MLflow SQLite store (schema migrations) takes many seconds
def test_fake_api_keys_never_reach_the_mlflow_store(runs_dir, monkeypatch):
    from personalign.lm import make_lm
    from personalign.tracking.store import Tracker

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    lm = make_lm("openai/gpt-4o-mini", api_key=KWARG_KEY, api_base="http://127.0.0.1:9/v1", cache=False,
                 load=False)  # no capability check: nothing listens on port 9
    assert lm.kwargs["api_key"] == KWARG_KEY  # the LM really carries it
    tracker = Tracker()
    config = {"model": lm.model, **lm.kwargs}
    with tracker.run("secrets", params={"lm": config, "note": f"env key {ENV_KEY}"}):
        tracker.log_metrics({"f1": 0.5, "f1_ci": [0.4, 0.6]})
        tracker.log_dict({"lm_kwargs": lm.kwargs, "headers": {"Authorization": f"Bearer {KWARG_KEY}"},
                          "errors": [f"example 0: AuthenticationError: Incorrect API key provided: {ENV_KEY}"]},
                         "predictions.json")
        tracker.log_text(f"OPENAI_API_KEY={ENV_KEY}\n", "notes.txt")
        with tracker.run("child", nested=True, params={"api_key": KWARG_KEY, "token": "tok-FAKE-TOKEN-123456"}):
            tracker.log_metrics({"lm_calls": 3})

    files = [p for p in runs_dir.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in files) and any(p.name == "predictions.json" for p in files)
    for path in files:
        body = path.read_bytes()
        for secret in (ENV_KEY, KWARG_KEY, "tok-FAKE-TOKEN-123456"):
            assert secret.encode() not in body, (secret, path)
    # and what was logged is still there, redacted
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    run = client.get_run(tracker.run_id)
    assert run.data.params["lm.api_key"] == "***" and run.data.params["lm.model"] == "openai/gpt-4o-mini"
    assert run.data.metrics["f1_ci_low"] == 0.4
    logged = json.loads(next(p for p in files if p.name == "predictions.json").read_text())
    assert logged["lm_kwargs"]["api_key"] == "***" and "***" in logged["errors"][0]


@pytest.mark.slow  # an MLflow SQLite store
def test_fake_api_keys_never_reach_mlflow_traces(runs_dir, monkeypatch):
    """LM calls traced into MLflow (inputs, messages, outputs, LM attributes) are redacted too."""
    import mlflow
    from dspy.utils.dummies import DummyLM

    from personalign.evaluation import evaluate_stage
    from personalign.stages import resolve_stage as get_stage
    from personalign.tracking.store import Tracker
    from personalign.tracking.native import lm_traces
    from tests.conftest import DEMO

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    stage = get_stage("relevance")
    examples = [ex.copy(attribute=f"My key is {ENV_KEY}") for ex in stage.load(DEMO, "val")[:2]]
    lm = DummyLM([{"reasoning": f"saw {ENV_KEY}", "relevant": True}] * 4)
    lm.kwargs.update(api_key=KWARG_KEY, api_base="http://127.0.0.1:9/v1", extra_headers={"Authorization": KWARG_KEY})
    tracker = Tracker()
    with tracker.run("traced"):
        with lm_traces(tracker, limit=5) as stats:
            report = evaluate_stage(stage, stage.registry.create("zero-shot"), examples, lm=lm, n_boot=10,
                                    progress=False)
    assert report["failures"] == 0 and stats["traced"] == 2
    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    traces = client.search_traces(locations=[client.get_run(tracker.run_id).info.experiment_id])
    assert len(traces) == 2
    text = json.dumps([t.to_dict() for t in traces], default=str)
    assert "***" in text and "My key is" in text  # the inputs are there, redacted
    for secret in (ENV_KEY, KWARG_KEY):
        assert secret not in text
        for path in (p for p in runs_dir.rglob("*") if p.is_file()):
            assert secret.encode() not in path.read_bytes(), (secret, path)
