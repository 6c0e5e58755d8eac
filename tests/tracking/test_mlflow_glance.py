"""MLflow that reads at a glance (issue 37): child runs tagged with model, adapter, data and split
under the CLI's wording; the headline under stable metric names; the summary as an MLflow table;
each traced row's gold label (expectation) and verdict (feedback); the runs page ``personalign ui``
opens, with its columns; a registered prompt says what compile kept. One LM-free compare on the
own-task example, no model."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT

OWN_TASK = ROOT / "examples" / "own_task"


@pytest.fixture
def compared(runs_dir):
    import personalign
    from personalign.tracking import MLflowCallback

    callback = MLflowCallback()
    result = personalign.compare(str(OWN_TASK / "stage.toml"), "majority", str(OWN_TASK / "data.jsonl"),
                                 n_boot=50, callbacks=[callback]).to_dict()
    return result, callback.tracker


@pytest.mark.slow  # an MLflow SQLite store, a compare and its traces: ~20-30 s
def test_a_compare_reads_at_a_glance(compared):
    import mlflow

    from personalign.tracking import runs_page_url
    from personalign.tracking.runs_view import VIEW_TAG

    result, tracker = compared
    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    exp = client.get_experiment_by_name("personalign")
    parent = client.get_run(result["mlflow_run_id"])
    children = {c.data.tags["strategy"]: c for c in client.search_runs(
        [exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    assert set(children) == {"all-yes", "majority"}
    child = children["majority"]
    row = next(r for r in result["strategies"] if r["name"] == "majority")
    # the child run says what ran on what: LM-free, so no model and no adapter
    assert {k: child.data.tags[k] for k in ("stage", "model", "adapter", "data", "split", "data_sha256")} == {
        "stage": "option-follows", "model": "none", "adapter": "none", "data": result["data"], "split": "val",
        "data_sha256": result["data_sha256"]}
    assert child.data.tags["mlflow.runType"] == "evaluation"  # the UI lists it expanded under the parent
    # the headline under the stage's metric name; 2 topics in val: the per-topic range, no interval
    assert child.data.metrics["f1"] == pytest.approx(row["f1"]) and row["f1_ci"] is None
    assert [child.data.metrics["f1_range_low"], child.data.metrics["f1_range_high"]] == pytest.approx(row["f1_range"])
    assert parent.data.metrics["best_f1"] == pytest.approx(max(r["f1"] for r in result["strategies"]))

    # the summary table is an MLflow table of the parent
    table = client.load_table(exp.experiment_id, "summary_table.json", run_ids=[parent.info.run_id])
    assert list(table["strategy"]) == ["all-yes", "majority"] and "f1 range" in table and "f1 95% CI" not in table
    assert list(table["f1"]) == pytest.approx([round(r["f1"], 4) for r in result["strategies"]])

    # every traced row carries its gold label and whether the answer was right, linked to its run
    traces = client.search_traces(locations=[exp.experiment_id], run_id=child.info.run_id, max_results=100)
    assert len(traces) == result["n"] == 12  # majority predicts row by row: every row traced (cap 50)
    ids = [r["id"] for r in result["rows"]]
    assert json.loads(open(client.download_artifacts(child.info.run_id, "predictions.json")).read())["ids"] == ids
    for trace in traces:
        found = {a.name: a for a in trace.info.assessments}
        i = ids.index(found["follows"].metadata["id"])
        gold, pred = result["rows"][i]["gold"], row["predictions"][i]
        assert found["follows"].value is gold and found["follows"].source.source_type == "HUMAN"
        assert found["correct"].value is (pred == gold) and found["correct"].source.source_id == "personalign"
        assert found["correct"].rationale == f"predicted {json.dumps(pred)}, gold {json.dumps(gold)}"

    # the runs page: the runs list with the metric columns, not the GenAI overview
    view = json.loads(exp.tags[VIEW_TAG])
    assert {"metrics.`f1`", "metrics.`f1_ci_low`", "metrics.`best_f1`", "tags.`strategy`", "tags.`adapter`"} <= set(
        view["selectedColumns"])
    assert runs_page_url(tracker.tracking_uri, "http://127.0.0.1:5000") == (
        f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning"
        "&viewStateShareKey=personalign")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for the tests below (creating one takes seconds)."""
    import mlflow

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    mlflow.MlflowClient(tracking_uri=uri).search_experiments()
    return uri


def test_a_registered_prompt_records_what_compile_kept(store):
    import dspy
    import mlflow

    from personalign.stages import resolve_stage
    from personalign.tracking.native import register_prompt
    from personalign.tracking.store import Tracker

    tracker = Tracker(store, experiment="prompts")
    program = dspy.Predict(resolve_stage("relevance").signature_class)
    lost = register_prompt(tracker, program, stage="relevance", strategy="zero-shot", lm="local/m",
                           compile_info={"optimizer": "labeled", "chosen": "uncompiled"})
    won = register_prompt(tracker, program, stage="relevance", strategy="zero-shot", lm="local/m",
                          compile_info={"optimizer": "labeled", "chosen": "labeled+rule"})
    client = mlflow.MlflowClient(tracking_uri=store)
    first, second = (client.get_prompt_version("relevance-zero-shot", v["version"]) for v in (lost, won))
    assert (first.tags["optimizer"], first.tags["kept"]) == ("labeled", "uncompiled")
    assert first.commit_message == "zero-shot uncompiled (labeled did not beat it on dev) on local/m"
    assert second.tags["kept"] == "labeled+rule" and second.commit_message == "zero-shot compiled with labeled on local/m"


def test_the_runs_page_url_and_its_view(store):
    import mlflow

    from personalign.tracking import runs_page_url
    from personalign.tracking.runs_view import VIEW_TAG, publish_runs_view

    uri = store
    client = mlflow.MlflowClient(tracking_uri=uri)
    # no experiment "personalign" yet: no experiment to open, the home page
    assert runs_page_url(uri, "http://127.0.0.1:5001/") == "http://127.0.0.1:5001/"
    assert runs_page_url("nosuchscheme://x", "http://127.0.0.1:5001") == "http://127.0.0.1:5001/"  # unreadable
    exp = client.create_experiment("personalign")
    assert runs_page_url(uri, "http://127.0.0.1:5001") == \
        f"http://127.0.0.1:5001/#/experiments/{exp}/runs?workflowType=machine_learning"  # no view yet
    for metric in ("f1", "kappa", "f1"):  # two stages' runs share the experiment's view
        publish_runs_view(client, exp, metric)
    cols = json.loads(client.get_experiment(exp).tags[VIEW_TAG])["selectedColumns"]
    assert cols.index("tags.`strategy`") == 0 and cols[-3:] == ["tags.`model`", "tags.`adapter`", "tags.`split`"]
    assert [c for c in cols if c.startswith("metrics.`best_")] == ["metrics.`best_f1`", "metrics.`best_kappa`"]
    assert runs_page_url(uri, "http://127.0.0.1:5001").endswith("&viewStateShareKey=personalign")


def test_traced_calls_map_to_their_rows():
    from types import SimpleNamespace as Row

    from personalign.tracking.assess import trace_rows

    rows = [Row(q="a"), Row(q="b"), Row(q="a"), Row(q="c")]
    calls = [{"trace_id": "t0", "inputs": {"q": "a"}}, {"trace_id": "t1", "inputs": {"q": "b"}, "raised": True},
             {"trace_id": "t2", "inputs": {"q": "b"}}, {"trace_id": "t3", "inputs": {"q": "a"}},
             {"trace_id": "t4", "inputs": {"q": "zzz"}}, {"trace_id": "t5", "inputs": {"q": "a"}}]
    got = [(call["trace_id"], i) for call, i in trace_rows(calls, rows, ["q"])]
    # a raised call and its retry are the same row; identical inputs are taken in row order, then
    # again from the first (a repeated evaluation); a call on no row is left out
    assert got == [("t0", 0), ("t1", 1), ("t2", 1), ("t3", 2), ("t5", 0)]


def test_the_adapter_is_named_as_the_table_names_it():
    from personalign._verbs.results import result_record
    from personalign.lm import adapter_name
    from personalign.tracking.summary import adapter_label

    local = "local/qwen2.5-coder-1.5b-instruct"
    assert adapter_label(local) == adapter_name(local) == "json-grammar" and adapter_label(None) == "none"
    record = result_record({"stage": "relevance", "lm": local, "uses_lm": True, "strategies": [], "split": "val"})
    assert record["adapter"] == "json-grammar"


def test_leave_one_group_out_rows_keep_the_same_names():
    from personalign.tracking.summary import headline, summary_columns

    row = {"name": "zero-shot", "metric": "f1", "lm_calls": 8, "seconds": 1.5,
           "headline": {"value": 0.61, "ci": [0.5, 0.7], "range": [0.4, 0.8]},
           "pooled": {"value": 0.6}, "worst": {"group": "p3", "value": 0.4}}
    assert headline(row, "f1") == {"f1": 0.61, "f1_ci": [0.5, 0.7], "f1_range": [0.4, 0.8], "pooled_f1": 0.6,
                                   "worst_group_f1": 0.4}
    cols = summary_columns({"metric": "f1", "cv": "groups", "strategies": [row]})
    assert cols == {"strategy": ["zero-shot"], "f1": [0.61], "f1 95% CI": ["0.500–0.700"], "pooled f1": [0.6],
                    "worst group": ["p3: 0.4"], "lm_calls": [8], "seconds": [1.5]}
