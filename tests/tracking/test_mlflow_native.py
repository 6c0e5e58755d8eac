"""MLflow holds what an MLflow user looks for after a compare: a parent run named after stage,
data and model with the summary metrics, the evaluation data as a dataset input with its sha256,
predictions as a table with ids and inputs, each compiled prompt as a registered prompt version,
and the LM calls as (capped, tagged) traces. Mock LM (litellm custom provider), no model load."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DEMO
from tests.sweep.conftest import load_mock

MODEL = "mock/relevance-0ms"


@pytest.fixture
def compared(runs_dir, monkeypatch):
    import personalign
    from personalign.tracking import MLflowCallback
    from personalign.lm import configure_cache
    from personalign.tracking.store import Tracker

    load_mock().register()
    configure_cache(runs_dir / "cache", enabled=False)
    monkeypatch.setenv("PERSONALIGN_MAX_TRACES", "4")
    tracker = Tracker()
    result = personalign.compare("relevance", "zero-shot,zero-shot@labeled,bm25", DEMO, lm=MODEL, limit=6, n_boot=50,
                                 callbacks=[MLflowCallback(tracker.tracking_uri)]).to_dict()
    return result, tracker


@pytest.mark.slow  # an MLflow SQLite store and three strategies: ~20 s
def test_compare_is_native_in_mlflow(compared):
    import mlflow

    from personalign.data.digest import file_sha256

    result, tracker = compared
    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    parent = client.get_run(result["mlflow_run_id"])
    # the run name says stage, data, split and model
    assert parent.info.run_name == "compare relevance · relevance_demo:val · relevance-0ms"
    # the parent carries the summary metrics
    metrics = parent.data.metrics
    by_name = {r["name"]: r for r in result["strategies"]}
    assert metrics["f1/zero-shot at labeled"] == pytest.approx(by_name["zero-shot@labeled"]["f1"])
    assert metrics["f1/bm25"] == pytest.approx(by_name["bm25"]["f1"])
    assert metrics["best_f1"] == pytest.approx(max(r["f1"] for r in result["strategies"]))
    assert parent.data.tags["best_strategy"] in by_name

    # evaluation and training data as dataset inputs with the file's sha256
    inputs = {next(t.value for t in d.tags if t.key == "mlflow.data.context"): d for d in parent.inputs.dataset_inputs}
    assert set(inputs) == {"evaluation", "training"}
    ev = inputs["evaluation"]
    assert {t.key: t.value for t in ev.tags}["sha256"] == file_sha256(DEMO) == result["data_sha256"]
    assert json.loads(ev.dataset.profile)["num_rows"] == 6 and ev.dataset.name.startswith("relevance_demo:val@")

    # predictions: predictions.json with ids and inputs, and an MLflow table
    children = {c.info.run_name.split(" · ")[0]: c for c in client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    child = children["zero-shot@labeled"]
    local = client.download_artifacts(child.info.run_id, "predictions.json")
    logged = json.loads(open(local).read())
    from personalign.stages import resolve_stage as get_stage

    stage = get_stage("relevance")  # --limit 6: a sample stratified by prompt, seed 0, in file order
    evalset = stage.limit([ex for ex in stage.load(DEMO) if ex.split == "val"], 6, 0)
    assert logged["ids"] == [ex.id for ex in evalset]
    assert logged["inputs"][0] == {"attribute": evalset[0].attribute, "prompt": evalset[0].prompt}
    assert len(logged["predictions"]) == 6
    table = client.load_table(parent.info.experiment_id, "predictions_table.json", run_ids=[child.info.run_id])
    assert list(table["id"]) == logged["ids"] and {"attribute", "prompt", "gold", "prediction", "correct"} <= set(table)

    # each compiled prompt is a registered prompt version; LM-free strategies register none
    prompt = mlflow.genai.load_prompt("prompts:/relevance-zero-shot/1")
    assert "### instructions" in prompt.template and prompt.tags["optimizer"] == "labeled"
    assert by_name["zero-shot@labeled"]["prompt"]["uri"] == "prompts:/relevance-zero-shot/1"
    assert "prompt" not in by_name["bm25"] and "prompt" not in by_name["zero-shot"]

    # LM calls as traces: at most PERSONALIGN_MAX_TRACES (4) per strategy, tagged with it
    traces = client.search_traces(locations=[parent.info.experiment_id], max_results=100)
    strategies = [t.info.tags.get("personalign.strategy") for t in traces]
    assert sorted(strategies) == ["zero-shot"] * 4 + ["zero-shot@labeled"] * 4
    spans = traces[0].data.spans
    assert any(s.span_type == "CHAT_MODEL" or "LM" in s.name for s in spans)
    assert all(t.info.request_metadata.get("mlflow.sourceRun") == parent.info.run_id for t in traces)
    # and each strategy's traces are linked to its child run (the run page's Traces tab)
    linked = client.search_traces(locations=[parent.info.experiment_id], run_id=child.info.run_id)
    assert sorted(t.info.tags.get("personalign.strategy") for t in linked) == ["zero-shot@labeled"] * 4
    # each carries its row's gold label (expectation) and whether the answer was right (feedback)
    by_id = {i: (gold, ok) for i, gold, ok in zip(table["id"], table["gold"], table["correct"])}
    for trace in linked:
        found = {a.name: a for a in trace.info.assessments}
        assert set(found) == {stage.output, "correct"}
        gold, ok = by_id[found[stage.output].metadata["id"]]
        assert found[stage.output].value == gold and found["correct"].value is bool(ok)

    # child runs name their model and adapter as the compare table does; LM-free ones have none
    from personalign.lm import adapter_name

    assert {k: child.data.tags[k] for k in ("model", "adapter", "split")} == {
        "model": MODEL, "adapter": adapter_name(MODEL), "split": "val"}
    assert result["adapter"] == adapter_name(MODEL)
    assert (children["bm25"].data.tags["model"], children["bm25"].data.tags["adapter"]) == ("none", "none")


def _mock_cli(runs, *args):
    import subprocess
    import sys

    from tests.conftest import ROOT, cli_env
    from tests.sweep.conftest import MOCK_SCRIPT

    return subprocess.run([sys.executable, str(MOCK_SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env=cli_env(runs, PERSONALIGN_MAX_TRACES="3"), timeout=600)


@pytest.mark.slow  # two CLI processes on an MLflow SQLite store
def test_compile_registers_a_prompt_version_and_eval_logs_data_predictions_traces(tmp_path):
    import mlflow

    runs = tmp_path / "runs"
    prog = tmp_path / "prog"
    proc = _mock_cli(runs, "compile", "relevance", "--strategy", "zero-shot", "--optimizer", "labeled", "--data",
                     str(DEMO), "--lm", MODEL, "--out", str(prog), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    compiled = json.loads(proc.stdout)
    assert compiled["compile"]["prompt"]["uri"] == "prompts:/relevance-zero-shot/1"
    # --lm: a saved program never chooses a non-embedded model (the mock provider is one)
    proc = _mock_cli(runs, "eval", "relevance", "--program", str(prog), "--data", str(DEMO), "--limit", "5",
                     "--lm", MODEL, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}")
    exp = client.get_experiment_by_name("personalign")
    runs_by_cmd = {r.data.tags["command"]: r for r in client.search_runs([exp.experiment_id])}
    assert runs_by_cmd["compile"].info.run_name == "zero-shot@labeled · compile relevance · relevance_demo:train · relevance-0ms"
    assert runs_by_cmd["eval"].info.run_name == "zero-shot@labeled · eval relevance · relevance_demo:val · relevance-0ms"
    version = client.get_prompt_version("relevance-zero-shot", 1)
    assert "### demos (4)" in version.template and version.tags["mlflow_run_id"] == runs_by_cmd["compile"].info.run_id
    ev = runs_by_cmd["eval"]
    assert [d.dataset.name.split("@")[0] for d in ev.inputs.dataset_inputs] == ["relevance_demo:val"]
    logged = json.loads(open(client.download_artifacts(ev.info.run_id, "predictions.json")).read())
    assert len(logged["ids"]) == len(logged["inputs"]) == len(logged["predictions"]) == 5
    traces = client.search_traces(locations=[exp.experiment_id])
    assert len(traces) == 3 and {t.info.request_metadata.get("mlflow.sourceRun") for t in traces} == {ev.info.run_id}
    # eval's traced rows carry their gold label and verdict too, matched to the rows by their inputs
    verdict = {i: ok for i, ok in zip(logged["ids"], json.loads(open(client.download_artifacts(
        ev.info.run_id, "predictions.json")).read())["correct"])}
    for trace in traces:
        found = {a.name: a for a in trace.info.assessments}
        assert {"correct", "relevant"} <= set(found)
        assert found["correct"].value is bool(verdict[found["relevant"].metadata["id"]])
    assert (ev.data.tags["model"], ev.data.tags["mlflow.runType"]) == (MODEL, "evaluation")


def test_an_untracked_run_has_no_callbacks_and_every_hook_is_a_no_op(tmp_path):
    from personalign.tracking import Callbacks, Candidate, RunInfo

    cbs, run, result = Callbacks([]), RunInfo("compare", None), {}
    cbs.check(run)
    with cbs.run(run, result), cbs.tracing(run, "x") as traces:
        cbs.on_candidate_end(run, Candidate("x"))
        cbs.on_artifact(run, tmp_path / "f")
    assert traces is None and cbs.on_trial_start(run, 0, {}) == {} and list(tmp_path.iterdir()) == []
    with pytest.raises(Exception, match="not a personalign RunCallback"):
        Callbacks(["mlflow"])


def test_run_names_and_prompt_names():
    import dataclasses

    from personalign.stages import resolve_stage
    from personalign.tracking import RunInfo
    from personalign.tracking.mlflow import run_name
    from personalign.tracking.native import prompt_name

    rel = resolve_stage("relevance")
    run = RunInfo("compare", rel, data="a/b/relevance_labels.jsonl", split="val", lm="local/qwen2.5-coder-1.5b-instruct")
    assert run_name(run) == "compare relevance · relevance_labels:val · qwen2.5-coder-1.5b-instruct"
    assert run_name(dataclasses.replace(run, command="compile", strategy="zero-shot@bootstrap", split="train")) == \
        "zero-shot@bootstrap · compile relevance · relevance_labels:train · qwen2.5-coder-1.5b-instruct"
    assert run_name(RunInfo("run cupid", None, data="x/cupid.jsonl")) == "run cupid · cupid · no LM"
    assert prompt_name("relevance", "zero-shot") == "relevance-zero-shot"
    assert prompt_name("relevance", "zero-shot@bootstrap") == "relevance-zero-shot-bootstrap"


def test_max_traces_env(monkeypatch):
    from personalign.errors import ConfigurationError
    from personalign.tracking.native import DEFAULT_MAX_TRACES, max_traces

    monkeypatch.delenv("PERSONALIGN_MAX_TRACES", raising=False)
    assert max_traces() == DEFAULT_MAX_TRACES
    monkeypatch.setenv("PERSONALIGN_MAX_TRACES", "0")
    assert max_traces() == 0
    monkeypatch.setenv("PERSONALIGN_MAX_TRACES", "many")
    with pytest.raises(ConfigurationError, match="PERSONALIGN_MAX_TRACES"):
        max_traces()
